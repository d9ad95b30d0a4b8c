//! The Skills view (`#/skills`): every skill of the workspace's catalog
//! (`kiln_types::skill::Skill`), the ones that ship with Kiln marked and
//! read-only, each opened to read its body as Markdown; New, and for the
//! workspace's own Edit and Delete (with Undo); Duplicate for any, a shipped
//! one included, into an editable copy. The form writes a name, a one-line
//! description, the body and the built-in tools the skill unlocks.
//!
//! Every write goes through the runtime worker (`skills.put` at the version
//! read, with `replacing` when a skill is renamed; `skills.remove`), which
//! holds the record to `SkillRecord::check` (the form checks it first, in
//! the same words) and refuses a shipped name with its own sentence. The
//! list is read again at each change of the configuration (another tab's
//! too). The plain logic (a form to its `skills.put`, what a row says) is
//! apart and tested natively; the tools typed as a list and a copy's free
//! name are `panel`'s.

use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::{Value, json};

use kiln_types::skill::{MAX_DESCRIPTION, Skill, SkillRecord};

use crate::agents_panel::WorkspaceAgents;
use crate::panel::{
    PanelNames, PanelState, Undoable, config_read, copy_slug, escape_cancels, focus_soon,
    typed_list,
};
use crate::storage::{StorageSignals, error_alert, load_status};
use crate::storage_model::ErrorText;

/// The skill form's fields as plain data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SkillForm {
    /// The workspace's skill being edited (its name and the version read);
    /// `None` for a new one (a copy included).
    pub editing: Option<(String, u64)>,
    /// The skill a copy was made from, for the form's title.
    pub copied_from: Option<String>,
    pub name: String,
    pub description: String,
    pub body: String,
    /// The required tools as typed: `http_request, web_search`.
    pub tools: String,
}

/// A checked `skills.put`: the record, and the name it had when renamed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SkillPut {
    pub skill: SkillRecord,
    pub replacing: Option<String>,
}

impl SkillPut {
    /// The operation's arguments.
    pub(crate) fn args(&self) -> Value {
        let mut args = json!({"skill": self.skill});
        if let Some(old) = &self.replacing {
            args["replacing"] = old.as_str().into();
        }
        args
    }
}

impl SkillForm {
    /// An empty form for a new skill.
    pub(crate) fn new_skill() -> Self {
        Self {
            editing: None,
            copied_from: None,
            name: String::new(),
            description: String::new(),
            body: String::new(),
            tools: String::new(),
        }
    }

    /// The form showing the workspace's skill `record`, to edit it.
    pub(crate) fn of(record: &SkillRecord) -> Self {
        Self {
            editing: Some((record.name.clone(), record.version)),
            copied_from: None,
            name: record.name.clone(),
            description: record.description.clone(),
            body: record.body.clone(),
            tools: record.required_tools.join(", "),
        }
    }

    /// A new skill copied from `record` (a shipped one, say) under a free name.
    pub(crate) fn copy_of(record: &SkillRecord, taken: &[String]) -> Self {
        Self {
            editing: None,
            copied_from: Some(record.name.clone()),
            name: copy_slug(&record.name, taken),
            ..Self::of(record)
        }
    }

    /// The `skills.put` to send: the fields trimmed, held to
    /// `SkillRecord::check`; a new skill (or a rename) may not take a name
    /// the workspace's own skills in `own` have. A shipped name is left to
    /// the runtime worker, which refuses it in its own words.
    ///
    /// # Errors
    ///
    /// The first problem, as a sentence for the form.
    pub(crate) fn to_put(&self, own: &[String]) -> Result<SkillPut, String> {
        let name = self.name.trim().to_owned();
        let old = self.editing.as_ref().map(|(old, _)| old.as_str());
        if old != Some(name.as_str()) && own.contains(&name) {
            return Err(format!(
                "There is already a skill `{name}` in this workspace: choose another name."
            ));
        }
        let skill = SkillRecord {
            name: name.clone(),
            description: self.description.trim().to_owned(),
            body: self.body.trim_end().to_owned(),
            required_tools: typed_list(&self.tools),
            version: self.editing.as_ref().map_or(0, |(_, version)| *version),
        };
        skill.check()?;
        let replacing = old.filter(|old| *old != name).map(str::to_owned);
        Ok(SkillPut { skill, replacing })
    }
}

/// What a skill's row says under its name: the tools it unlocks and the
/// agents it is assigned to.
pub(crate) fn skill_meta(skill: &SkillRecord, assigned: &[String]) -> String {
    let tools = if skill.required_tools.is_empty() {
        "Unlocks no tools".to_owned()
    } else {
        format!("Unlocks {}", skill.required_tools.join(", "))
    };
    let agents = if assigned.is_empty() {
        "assigned to no agent".to_owned()
    } else {
        format!("assigned to {}", assigned.join(", "))
    };
    format!("{tools} · {agents}")
}

/// The names of the agents in `agents` whose profile lists skill `name`.
fn assigned_to(agents: &[kiln_types::profile::AgentRecord], name: &str) -> Vec<String> {
    agents
        .iter()
        .filter(|agent| agent.skills.iter().any(|skill| skill == name))
        .map(|agent| agent.name.clone())
        .collect()
}

/// The form's fields as signals: loaded from a [`SkillForm`], read back as one.
#[derive(Clone, Copy)]
struct Editor {
    editing: RwSignal<Option<(String, u64)>>,
    copied_from: RwSignal<Option<String>>,
    name: RwSignal<String>,
    description: RwSignal<String>,
    body: RwSignal<String>,
    tools: RwSignal<String>,
}

impl Editor {
    fn new() -> Self {
        Self {
            editing: RwSignal::new(None),
            copied_from: RwSignal::new(None),
            name: RwSignal::new(String::new()),
            description: RwSignal::new(String::new()),
            body: RwSignal::new(String::new()),
            tools: RwSignal::new(String::new()),
        }
    }

    fn load(self, form: SkillForm) {
        self.editing.set(form.editing);
        self.copied_from.set(form.copied_from);
        self.name.set(form.name);
        self.description.set(form.description);
        self.body.set(form.body);
        self.tools.set(form.tools);
    }

    fn read(self) -> SkillForm {
        SkillForm {
            editing: self.editing.get_untracked(),
            copied_from: self.copied_from.get_untracked(),
            name: self.name.get_untracked(),
            description: self.description.get_untracked(),
            body: self.body.get_untracked(),
            tools: self.tools.get_untracked(),
        }
    }
}

impl Undoable for SkillRecord {
    const UNDO: &'static str = "skill-undo";
    const AFTER_UNDO: &'static str = "skill-new";

    fn remove_op(&self) -> (&'static str, Value) {
        (
            "skills.remove",
            json!({"name": self.name, "version": self.version}),
        )
    }

    fn restore_op(&self) -> (&'static str, Value) {
        let skill = SkillRecord {
            version: 0,
            ..self.clone()
        };
        ("skills.put", json!({"skill": skill}))
    }

    fn key(&self) -> &str {
        &self.name
    }
}

/// The Skills view: the catalog, a skill opened to read, and the form.
#[component]
pub(crate) fn SkillsPanel(storage: StorageSignals, agents: WorkspaceAgents) -> impl IntoView {
    let listing =
        config_read::<Vec<Skill>>(storage, "skills.list", "The skills could not be read: ");
    // The catalog as last read, for the rows and the form's checks.
    let skills = move || {
        listing
            .with(|read| match read {
                Some(Ok(Some(skills))) => Some(skills.clone()),
                _ => None,
            })
            .unwrap_or_default()
    };
    let own_names = move || {
        listing.with_untracked(|read| match read {
            Some(Ok(Some(skills))) => skills
                .iter()
                .filter(|skill| !skill.system)
                .map(|skill| skill.record.name.clone())
                .collect(),
            _ => Vec::new(),
        })
    };
    let all_names = move || {
        listing.with_untracked(|read| match read {
            Some(Ok(Some(skills))) => skills
                .iter()
                .map(|skill| skill.record.name.clone())
                .collect(),
            _ => Vec::new(),
        })
    };
    let editor = Editor::new();
    // The skill whose body is shown.
    let opened = RwSignal::new(None::<String>);
    let panel = PanelState::<SkillRecord>::new(PanelNames {
        status: "skills-status",
        action_error: "skills-action-error",
        unavailable: "Storage is not available: skills cannot be kept until it is. Reload the page to try again.",
    });
    let open_form = move |form: SkillForm| {
        editor.load(form);
        panel.open_form("skill-name");
    };
    let close_form = move || {
        panel.close_form();
        focus_soon("skill-new");
    };
    let save = move || {
        let form = editor.read();
        let Some((stores, put)) = panel.begin_save(storage, || form.to_put(&own_names())) else {
            return;
        };
        spawn_local(async move {
            match panel
                .finish_save(stores.act("skills.put", put.args()))
                .await
            {
                Ok(()) => {
                    let name = &put.skill.name;
                    panel.say(match &put.replacing {
                        Some(old) => format!("Saved `{old}` as `{name}`."),
                        None => format!("Saved `{name}`."),
                    });
                    if put.replacing.is_some() && opened.get_untracked() == put.replacing {
                        opened.set(Some(name.clone()));
                    }
                    close_form();
                }
                Err(problem)
                    if problem.code.as_deref() == Some("conflict") && put.skill.version > 0 =>
                {
                    panel.form_failed(ErrorText::plain(format!(
                        "`{}` was changed in another tab after you opened it, so your changes were not saved. Cancel, open it again, and make your changes there.",
                        put.replacing.as_deref().unwrap_or(&put.skill.name)
                    )));
                }
                Err(problem) => {
                    panel.form_failed(ErrorText::with_prefix("Not saved: ", &problem));
                }
            }
        });
    };
    let remove = move |skill: SkillRecord| {
        panel.remove(storage, skill, move |skill| {
            editor.editing.with_untracked(|editing| {
                editing
                    .as_ref()
                    .is_some_and(|(name, _)| *name == skill.name)
            })
        });
    };
    let toggle = move |name: String| {
        opened.update(|opened| {
            *opened = (opened.as_deref() != Some(name.as_str())).then_some(name);
        });
    };
    let unavailable_line = move || {
        (storage.settled.get() && storage.stores.with(Option::is_none)).then(|| view! {
            <p class="hint" data-testid="skills-unavailable">"Storage is not available: the skills cannot be read or kept (see the message at the top)."</p>
        })
    };
    view! {
        <section class="skills storage-panel" data-testid="skills-panel" aria-labelledby="skills-title">
            <div class="agents-head">
                <h2 id="skills-title">"Skills"</h2>
                <button type="button" id="skill-new" data-testid="skill-new" disabled=move || storage.stores.with(Option::is_none)
                    on:click=move |_| open_form(SkillForm::new_skill())>"New skill"</button>
            </div>
            <p class="hint">"Guidance an agent reads when it needs it. Every turn lists the skills one line each; an agent assigned a skill (in its profile, under Agents) may also use the tools the skill unlocks."</p>
            <p class="hint" data-testid="skills-slash">"In a message, "<code>"/name"</code>" loads that skill into the turn: "<code>"/tidy-data clean this table"</code>"."</p>
            {unavailable_line}
            {load_status(listing, "skills-error", "skills-empty", |skills: &Vec<Skill>| {
                skills.is_empty().then(|| "No skills yet.".to_owned())
            })}
            <ul class="skill-list" data-testid="skill-list" aria-label="Skills">
                <For each=skills key=|skill| (skill.record.name.clone(), skill.record.version, skill.system) let:skill>
                    {
                        let assigned = Signal::derive({
                            let name = skill.record.name.clone();
                            move || agents.list.with(|list| assigned_to(list, &name))
                        });
                        view! {
                            <SkillRow skill=skill opened=opened assigned=assigned on_toggle=toggle
                                on_edit=move |record: SkillRecord| open_form(SkillForm::of(&record))
                                on_copy=move |record: SkillRecord| open_form(SkillForm::copy_of(&record, &all_names()))
                                on_delete=remove />
                        }
                    }
                </For>
            </ul>
            {panel.status_line_with_undo(storage)}
            <Show when=move || panel.form_open.get()>
                <SkillFormView editor=editor saving=panel.saving failure=panel.form_failure on_save=save on_cancel=close_form />
            </Show>
        </section>
    }
}

/// One skill in the list: its name, description, tier and what it unlocks,
/// with Read (its body, as Markdown, below), Duplicate, and for the
/// workspace's own Edit and Delete.
#[component]
fn SkillRow(
    skill: Skill,
    opened: RwSignal<Option<String>>,
    assigned: Signal<Vec<String>>,
    on_toggle: impl Fn(String) + Copy + Send + Sync + 'static,
    on_edit: impl Fn(SkillRecord) + Copy + Send + Sync + 'static,
    on_copy: impl Fn(SkillRecord) + Copy + Send + Sync + 'static,
    on_delete: impl Fn(SkillRecord) + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let Skill { record, system } = skill;
    let name = record.name.clone();
    let body_id = format!("skill-body-{name}");
    let is_open = {
        let name = name.clone();
        Memo::new(move |_| opened.with(|opened| opened.as_deref() == Some(name.as_str())))
    };
    let meta = {
        let record = record.clone();
        move || skill_meta(&record, &assigned.get())
    };
    let body = record.body.clone();
    let (edited, copied, removed) = (record.clone(), record.clone(), record.clone());
    let toggled = name.clone();
    view! {
        <li class="skill-row" data-testid="skill-row" data-name=name.clone() data-system=system.to_string()>
            <div class="skill-head">
                <div class="agent-who">
                    <p class="agent-title">
                        <code class="skill-name" data-testid="skill-row-name">{format!("/{name}")}</code>
                        {system.then(|| view! { " "<span class="badge skill-shipped" data-testid="skill-shipped">"ships with Kiln"</span> })}
                    </p>
                    <p class="skill-description" data-testid="skill-row-description">{record.description.clone()}</p>
                    <p class="agent-meta" data-testid="skill-row-meta">{meta}</p>
                    {system.then(|| view! {
                        <p class="agent-meta" data-testid="skill-read-only">"Read-only: duplicate it to make your own version."</p>
                    })}
                </div>
                <div class="agent-actions">
                    <button type="button" class="secondary small" data-testid="skill-read" aria-controls=body_id.clone()
                        aria-expanded=move || is_open.get().to_string() aria-label=format!("Read {name}")
                        on:click=move |_| on_toggle(toggled.clone())>{move || if is_open.get() { "Close" } else { "Read" }}</button>
                    {(!system).then(|| view! {
                        <button type="button" class="secondary small" data-testid="skill-edit" aria-label=format!("Edit {name}")
                            on:click=move |_| on_edit(edited.clone())>"Edit"</button>
                    })}
                    <button type="button" class="secondary small" data-testid="skill-duplicate" aria-label=format!("Duplicate {name}")
                        on:click=move |_| on_copy(copied.clone())>"Duplicate"</button>
                    {(!system).then(|| view! {
                        <button type="button" class="secondary small danger" data-testid="skill-delete" aria-label=format!("Delete {name}")
                            on:click=move |_| on_delete(removed.clone())>"Delete"</button>
                    })}
                </div>
            </div>
            <div class="skill-body" id=body_id data-testid="skill-body" hidden=move || !is_open.get()>
                {move || is_open.get().then(|| {
                    if body.trim().is_empty() {
                        view! { <p class="hint">"This skill has no body yet."</p> }.into_any()
                    } else {
                        crate::markdown::markdown_view(&body)
                    }
                })}
            </div>
        </li>
    }
}

/// The form that writes one skill.
#[component]
fn SkillFormView(
    editor: Editor,
    saving: RwSignal<bool>,
    failure: RwSignal<Option<ErrorText>>,
    on_save: impl Fn() + Copy + Send + Sync + 'static,
    on_cancel: impl Fn() + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let title = move || match (editor.editing.get(), editor.copied_from.get()) {
        (Some((name, _)), _) => format!("Edit /{name}"),
        (None, Some(from)) => format!("New skill, copied from /{from}"),
        (None, None) => "New skill".to_owned(),
    };
    let renaming = move || {
        editor.editing.with(|editing| {
            editing
                .as_ref()
                .is_some_and(|(old, _)| editor.name.with(|name| name.trim() != old))
        })
    };
    view! {
        <form class="agent-form skill-form" data-testid="skill-form" aria-labelledby="skill-form-title" novalidate
            on:submit=move |event| { event.prevent_default(); on_save(); } on:keydown=escape_cancels(on_cancel)>
            <h3 id="skill-form-title">{title}</h3>
            <div class="agent-fields">
                <label for="skill-name">"Name"</label>
                <div class="agent-field">
                    <input id="skill-name" data-testid="skill-name" type="text" maxlength="64" autocomplete="off" spellcheck="false" required
                        aria-describedby="skill-name-hint" prop:value=editor.name
                        on:input=move |event| editor.name.set(event_target_value(&event)) />
                    <p id="skill-name-hint" class="hint">{move || if renaming() {
                        "Renaming: agents assigned the old name keep it until you edit them, and /old-name no longer loads it."
                    } else {
                        "a-z, 0-9 and -: what /name in a message and load_skill call it."
                    }}</p>
                </div>

                <label for="skill-description">"Description"</label>
                <div class="agent-field">
                    <input id="skill-description" data-testid="skill-description" type="text" maxlength=MAX_DESCRIPTION.to_string() autocomplete="off"
                        aria-describedby="skill-description-hint" prop:value=editor.description
                        on:input=move |event| editor.description.set(event_target_value(&event)) />
                    <p id="skill-description-hint" class="hint">"One line saying when it helps: every turn lists it."</p>
                </div>

                <label for="skill-body">"Body"</label>
                <div class="agent-field">
                    <textarea id="skill-body" data-testid="skill-body-input" rows="10" aria-describedby="skill-body-hint"
                        prop:value=editor.body on:input=move |event| editor.body.set(event_target_value(&event))></textarea>
                    <p id="skill-body-hint" class="hint">"The guidance, in Markdown: what the agent reads when it loads the skill."</p>
                </div>

                <label for="skill-tools">"Required tools"</label>
                <div class="agent-field">
                    <input id="skill-tools" data-testid="skill-tools" type="text" autocomplete="off" spellcheck="false"
                        placeholder="http_request" aria-describedby="skill-tools-hint" prop:value=editor.tools
                        on:input=move |event| editor.tools.set(event_target_value(&event)) />
                    <p id="skill-tools-hint" class="hint">"Built-in tools, separated by commas, that an agent assigned this skill is given."</p>
                </div>
            </div>
            {move || failure.get().map(|error| error_alert("skill-form-error", error))}
            <div class="actions">
                <button type="submit" data-testid="skill-save" disabled=saving>"Save skill"</button>
                <button type="button" class="secondary" data-testid="skill-cancel" on:click=move |_| on_cancel()>"Cancel"</button>
            </div>
        </form>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|name| (*name).to_owned()).collect()
    }

    fn record(name: &str, version: u64) -> SkillRecord {
        SkillRecord {
            name: name.into(),
            description: "Pack for a trip.".into(),
            body: "Roll, do not fold.".into(),
            required_tools: vec!["http_request".into()],
            version,
        }
    }

    #[test]
    fn a_new_skill_is_checked_and_sent_without_replacing() {
        let form = SkillForm {
            name: "  packing ".into(),
            description: " Pack for a trip. ".into(),
            body: "Roll, do not fold.\n\n".into(),
            tools: "http_request".into(),
            ..SkillForm::new_skill()
        };
        let put = form.to_put(&[]).expect("a good skill");
        assert_eq!(put.skill, record("packing", 0));
        assert_eq!(put.replacing, None);
        assert_eq!(
            put.args(),
            json!({"skill": {"name": "packing", "description": "Pack for a trip.", "body": "Roll, do not fold.",
                "required_tools": ["http_request"], "version": 0}})
        );
    }

    #[test]
    fn an_edit_keeps_its_version_and_a_rename_sends_the_old_name() {
        let kept = record("packing", 4);
        let same = SkillForm::of(&kept)
            .to_put(&names(&["packing"]))
            .expect("unchanged");
        assert_eq!(same.skill, kept);
        assert_eq!(same.replacing, None);
        let renamed = SkillForm {
            name: "travel-packing".into(),
            ..SkillForm::of(&kept)
        }
        .to_put(&names(&["packing"]))
        .expect("a rename");
        assert_eq!(renamed.skill.name, "travel-packing");
        assert_eq!(renamed.skill.version, 4);
        assert_eq!(renamed.replacing.as_deref(), Some("packing"));
        assert_eq!(renamed.args()["replacing"], "packing");
        // Onto another skill of the workspace: refused before anything is sent.
        let onto = SkillForm {
            name: "notes".into(),
            ..SkillForm::of(&kept)
        }
        .to_put(&names(&["packing", "notes"]))
        .unwrap_err();
        assert!(onto.contains("already a skill `notes`"), "{onto}");
    }

    #[test]
    fn a_copy_is_a_new_skill_under_a_free_name() {
        let shipped = record("tidy-data", 0);
        let copy = SkillForm::copy_of(&shipped, &names(&["tidy-data"]));
        assert_eq!(copy.editing, None);
        assert_eq!(copy.copied_from.as_deref(), Some("tidy-data"));
        let put = copy.to_put(&[]).expect("a copy");
        assert_eq!(put.skill.name, "tidy-data-copy");
        assert_eq!(put.skill.version, 0);
        assert_eq!(put.skill.body, shipped.body);
        assert_eq!(put.replacing, None);
    }

    #[test]
    fn each_problem_is_the_checks_own_sentence() {
        let cases = [
            (
                SkillForm {
                    name: "Packing".into(),
                    description: "x".into(),
                    ..SkillForm::new_skill()
                },
                "skill name `Packing` must be 1 to 64 of `a-z`",
            ),
            (
                SkillForm {
                    name: "packing".into(),
                    ..SkillForm::new_skill()
                },
                "`description` must be one line",
            ),
            (
                SkillForm {
                    name: "packing".into(),
                    description: "Two\nlines".into(),
                    ..SkillForm::new_skill()
                },
                "`description` must be one line",
            ),
            (
                SkillForm {
                    name: "packing".into(),
                    description: "Pack.".into(),
                    tools: "http-request".into(),
                    ..SkillForm::new_skill()
                },
                "names `http-request`, which is not a tool name",
            ),
        ];
        for (form, said) in cases {
            let error = form.to_put(&[]).unwrap_err();
            assert!(error.contains(said), "{error}");
        }
    }

    #[test]
    fn a_row_says_what_it_unlocks_and_who_has_it() {
        let mut skill = record("packing", 1);
        assert_eq!(
            skill_meta(&skill, &names(&["Ada", "Kiln"])),
            "Unlocks http_request · assigned to Ada, Kiln"
        );
        skill.required_tools.clear();
        assert_eq!(
            skill_meta(&skill, &[]),
            "Unlocks no tools · assigned to no agent"
        );
        let mut ada = kiln_types::profile::AgentRecord::new("ada", "Ada");
        ada.skills = names(&["packing"]);
        let bob = kiln_types::profile::AgentRecord::new("bob", "Bob");
        assert_eq!(assigned_to(&[ada, bob], "packing"), names(&["Ada"]));
    }
}

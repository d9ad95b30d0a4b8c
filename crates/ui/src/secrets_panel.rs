//! Settings' secrets and web search: the workspace's vault as the page may
//! see it (`kiln_types::vault::SecretInfo`: a name, the origins it may be
//! sent to, the agents that may use it, when it was set and last given to a
//! job — never its value), the form that adds a secret or changes one, and
//! the search API agents' `web_search` asks, its key a secret of the vault.
//!
//! A value crosses once, page to runtime worker, in the `secrets.put` that
//! writes it; nothing the worker answers carries it, and the form forgets it
//! as soon as it is saved (the field is emptied, then taken out of the
//! page). Editing a secret changes its origins and agents and sends no value
//! unless the person types a new one ("Replace value"). Every change is held
//! to `SecretPut::check` (or `WebSearch::check`) first, in the worker's own
//! words. The plain logic (a form to its `secrets.put`, the lines a secret's
//! row says, the web search form to its setting) is apart and tested natively.

use crate::said::said;
use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::{Value, json};

use kiln_types::profile::AgentRecord;
use kiln_types::search::{SearchProvider, WebSearch};
use kiln_types::vault::{SecretInfo, SecretPut};

use crate::agents_panel::WorkspaceAgents;
use crate::panel::{PanelNames, PanelState, config_read, escape_cancels, focus_soon, typed_list};
use crate::storage::{Loaded, StorageSignals, error_alert, local_time};
use crate::storage_model::ErrorText;

/// What the section says about where values are kept.
pub(crate) const SEALED: &str = "Values are sealed in this browser with a key no script can read; they go only to the origins listed, and only to agents whose profile names them.";

/// The secret form's fields as plain data.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct SecretForm {
    /// The version read of the secret being edited; `None` for a new one.
    pub editing: Option<u64>,
    pub name: String,
    /// A value to write: always for a new secret, for an edit only when the
    /// person chose to replace it (`None`: the stored value stays).
    pub value: Option<String>,
    /// The origins as typed, one a line.
    pub origins: String,
    /// The agents chosen, by slug; none: every agent whose profile names it.
    pub agents: Vec<String>,
}

impl std::fmt::Debug for SecretForm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretForm")
            .field("editing", &self.editing)
            .field("name", &self.name)
            .field("value", &self.value.as_ref().map(|_| "<redacted>"))
            .field("origins", &self.origins)
            .field("agents", &self.agents)
            .finish()
    }
}

impl SecretForm {
    /// An empty form for a new secret.
    pub(crate) fn new_secret() -> Self {
        Self {
            editing: None,
            name: String::new(),
            value: Some(String::new()),
            origins: String::new(),
            agents: Vec::new(),
        }
    }

    /// The form showing `info`, to change its origins and agents.
    pub(crate) fn of(info: &SecretInfo) -> Self {
        Self {
            editing: Some(info.version),
            name: info.name.clone(),
            value: None,
            origins: info.origins.join("\n"),
            agents: info.agents.clone(),
        }
    }

    /// The `secrets.put` arguments to send, held to `SecretPut::check` (the
    /// origins as it reads them); a new secret may not take a name in
    /// `taken`. The value is sent as typed but for white space at its ends
    /// (a pasted token's trailing newline).
    ///
    /// # Errors
    ///
    /// The first problem, as a sentence for the form.
    pub(crate) fn to_put(&self, taken: &[String]) -> Result<Value, String> {
        let name = self.name.trim();
        if self.editing.is_none() && taken.iter().any(|known| known == name) {
            return Err(format!(
                "There is already a secret `{name}`: edit it to replace its value."
            ));
        }
        let mut args = json!({
            "name": name,
            "origins": typed_list(&self.origins),
            "agents": self.agents,
            "version": self.editing.unwrap_or(0),
        });
        if let Some(value) = &self.value {
            args["value"] = value.trim().into();
        }
        let change: SecretPut = serde_json::from_value(args.clone())
            .map_err(|error| format!("secret `{name}`: {error}"))?;
        args["origins"] = change.check()?.into();
        Ok(args)
    }
}

/// Who may use a secret, as its row says it.
pub(crate) fn agents_line(agents: &[String]) -> String {
    if agents.is_empty() {
        "every agent that names it".to_owned()
    } else {
        format!("only {}", agents.join(", "))
    }
}

/// When a secret was last given to a job, as its row says it.
pub(crate) fn used_line(used_ms: Option<u64>, time: impl Fn(u64) -> String) -> String {
    match used_ms {
        Some(used) => format!("last given to a job {}", time(used)),
        None => "never given to a job".to_owned(),
    }
}

/// The secrets of the vault, read once storage is open and again at each
/// change of the configuration (the vault is kept there).
pub(crate) fn vault_listing(storage: StorageSignals) -> LocalResource<Loaded<Vec<SecretInfo>>> {
    config_read(storage, "secrets.list", "The secrets could not be read: ")
}

/// The secrets listed, or none while they are not read.
fn listed(vault: LocalResource<Loaded<Vec<SecretInfo>>>) -> Vec<SecretInfo> {
    vault
        .with(|read| match read {
            Some(Ok(Some(secrets))) => Some(secrets.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// The form's fields as signals.
#[derive(Clone, Copy)]
struct Editor {
    editing: RwSignal<Option<u64>>,
    name: RwSignal<String>,
    /// Whether a value is to be written (a new secret, or "Replace value").
    replacing: RwSignal<bool>,
    value: RwSignal<String>,
    origins: RwSignal<String>,
    agents: RwSignal<Vec<String>>,
}

impl Editor {
    fn new() -> Self {
        Self {
            editing: RwSignal::new(None),
            name: RwSignal::new(String::new()),
            replacing: RwSignal::new(false),
            value: RwSignal::new(String::new()),
            origins: RwSignal::new(String::new()),
            agents: RwSignal::new(Vec::new()),
        }
    }

    fn load(self, form: SecretForm) {
        self.editing.set(form.editing);
        self.name.set(form.name);
        self.replacing.set(form.value.is_some());
        self.value.set(form.value.unwrap_or_default());
        self.origins.set(form.origins);
        self.agents.set(form.agents);
    }

    fn read(self) -> SecretForm {
        SecretForm {
            editing: self.editing.get_untracked(),
            name: self.name.get_untracked(),
            value: self
                .replacing
                .get_untracked()
                .then(|| self.value.get_untracked()),
            origins: self.origins.get_untracked(),
            agents: self.agents.get_untracked(),
        }
    }

    /// Forgets the value typed: the field shows nothing.
    fn forget(self) {
        self.value.set(String::new());
        self.replacing.set(false);
    }
}

/// Settings' secrets: the vault listed, Add secret, and for each Edit and Remove.
#[component]
pub(crate) fn SecretsSettings(
    storage: StorageSignals,
    agents: WorkspaceAgents,
    vault: LocalResource<Loaded<Vec<SecretInfo>>>,
) -> impl IntoView {
    let editor = Editor::new();
    let panel = PanelState::<()>::new(PanelNames {
        status: "secrets-status",
        action_error: "secrets-action-error",
        unavailable: "Storage is not available: secrets cannot be kept until it is.",
    });
    // The secret whose Remove waits for the person's yes.
    let confirming = RwSignal::new(None::<String>);
    let names = move || {
        vault.with_untracked(|read| match read {
            Some(Ok(Some(secrets))) => secrets.iter().map(|secret| secret.name.clone()).collect(),
            _ => Vec::new(),
        })
    };
    let open_form = move |form: SecretForm| {
        confirming.set(None);
        editor.load(form);
        panel.open_form("secret-name");
    };
    let close_form = move || {
        editor.forget();
        panel.close_form();
    };
    let save = move || {
        let form = editor.read();
        let Some((stores, args)) = panel.begin_save(storage, || form.to_put(&names())) else {
            return;
        };
        let name = form.name.trim().to_owned();
        let wrote_value = form.value.is_some();
        drop(form);
        spawn_local(async move {
            match panel.finish_save(stores.act("secrets.put", args)).await {
                Ok(()) => {
                    close_form();
                    panel.say(if wrote_value {
                        format!("Saved `{name}`: its value is sealed and will not be shown again.")
                    } else {
                        format!("Saved `{name}`; its value is unchanged.")
                    });
                }
                Err(problem) if problem.code.as_deref() == Some("conflict") => {
                    panel.form_failed(ErrorText::plain(format!(
                        "`{name}` was changed meanwhile (in another tab perhaps), so this was not saved. Cancel, then edit it again."
                    )));
                }
                Err(problem) => {
                    panel.form_failed(ErrorText::with_prefix("Not saved: ", &problem));
                }
            }
        });
    };
    let remove = move |secret: SecretInfo| {
        let Some(stores) = storage.stores.get_untracked() else {
            return;
        };
        spawn_local(async move {
            let removed = stores
                .act(
                    "secrets.remove",
                    json!({"name": secret.name, "version": secret.version}),
                )
                .await;
            confirming.set(None);
            match removed {
                Ok(()) => {
                    panel.say(format!("Removed `{}`.", secret.name));
                    focus_soon("secret-add");
                }
                Err(problem) => panel.failed(ErrorText::with_prefix(
                    &format!("`{}` was not removed: ", secret.name),
                    &problem,
                )),
            }
        });
    };
    let summary = move || match vault.with(|read| {
        read.as_ref().map(|read| match read {
            Ok(found) => Ok(found.as_ref().map(Vec::len)),
            Err(_) => Err(()),
        })
    }) {
        Some(Ok(Some(0))) => "Secrets (none yet)".to_owned(),
        Some(Ok(Some(1))) => "Secrets (1)".to_owned(),
        Some(Ok(Some(n))) => format!("Secrets ({n})"),
        Some(Ok(None)) => "Secrets (storage is not available)".to_owned(),
        Some(Err(_)) => "Secrets (could not be read)".to_owned(),
        None => "Secrets (loading…)".to_owned(),
    };
    let load_error = move || {
        vault.with(|read| match read {
            Some(Err(error)) => Some(error_alert("secrets-error", error.clone())),
            _ => None,
        })
    };
    view! {
        <details class="secrets" data-testid="secrets">
            <summary>{summary}</summary>
            <p class="hint" data-testid="secrets-sealed">{SEALED}</p>
            <p class="hint">"A program uses one by name ("<code>"secret_headers: {Authorization: \"Bearer ${GITHUB_TOKEN}\"}"</code>" in "<code>"http_request"</code>"); an MCP server can send one as its token."</p>
            {load_error}
            <ul class="secret-list" data-testid="secret-list" aria-label="Secrets">
                <For each=move || listed(vault) key=|secret| (secret.name.clone(), secret.version) let:secret>
                    <SecretRow secret=secret confirming=confirming
                        on_edit=move |secret: SecretInfo| open_form(SecretForm::of(&secret)) on_remove=remove />
                </For>
            </ul>
            {panel.status_line()}
            <Show when=move || panel.form_open.get() fallback=move || view! {
                <button type="button" id="secret-add" data-testid="secret-add" disabled=move || storage.stores.with(Option::is_none)
                    on:click=move |_| open_form(SecretForm::new_secret())>"Add secret"</button>
            }>
                <SecretFormView editor=editor agents=agents saving=panel.saving failure=panel.form_failure on_save=save on_cancel=close_form />
            </Show>
        </details>
    }
}

/// One secret: its name, origins, agents and dates, with Edit and Remove
/// (Remove asks first: a value removed cannot be brought back).
#[component]
fn SecretRow(
    secret: SecretInfo,
    confirming: RwSignal<Option<String>>,
    on_edit: impl Fn(SecretInfo) + Copy + Send + Sync + 'static,
    on_remove: impl Fn(SecretInfo) + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let name = secret.name.clone();
    let asking = {
        let name = name.clone();
        move || confirming.with(|asking| asking.as_deref() == Some(name.as_str()))
    };
    let origins = secret.origins.join(", ");
    let set = format!("set {}", local_time(secret.set_ms));
    let used = used_line(secret.used_ms, local_time);
    let (edited, removed) = (secret.clone(), secret.clone());
    let asked = name.clone();
    view! {
        <li class="secret-row" data-testid="secret-row" data-name=name.clone()>
            <div class="agent-who">
                <p class="agent-title"><code data-testid="secret-row-name">{name.clone()}</code></p>
                <p class="agent-meta">"Sent only to "<span data-testid="secret-row-origins">{origins}</span></p>
                <p class="agent-meta">"Used by "<span data-testid="secret-row-agents">{agents_line(&secret.agents)}</span></p>
                <p class="agent-meta"><span data-testid="secret-row-set">{set}</span>" · "<span data-testid="secret-row-used">{used}</span></p>
            </div>
            <div class="agent-actions">
                <Show when=asking.clone() fallback=move || {
                    let (edited, asked) = (edited.clone(), asked.clone());
                    view! {
                        <button type="button" class="secondary small" data-testid="secret-edit" aria-label=format!("Edit {}", edited.name)
                            on:click=move |_| on_edit(edited.clone())>"Edit"</button>
                        <button type="button" class="secondary small danger" data-testid="secret-remove" aria-label=format!("Remove {asked}")
                            on:click=move |_| confirming.set(Some(asked.clone()))>"Remove"</button>
                    }
                }>
                    {
                        let removed = removed.clone();
                        view! {
                            <span class="secret-confirm" role="alert">{format!("Remove {}? Its value cannot be brought back.", removed.name)}</span>
                            <button type="button" class="secondary small danger" data-testid="secret-remove-confirm"
                                on:click=move |_| on_remove(removed.clone())>"Remove"</button>
                            <button type="button" class="secondary small" data-testid="secret-remove-cancel"
                                on:click=move |_| confirming.set(None)>"Keep"</button>
                        }
                    }
                </Show>
            </div>
        </li>
    }
}

/// The form that adds a secret or changes one's origins and agents.
#[component]
fn SecretFormView(
    editor: Editor,
    agents: WorkspaceAgents,
    saving: RwSignal<bool>,
    failure: RwSignal<Option<ErrorText>>,
    on_save: impl Fn() + Copy + Send + Sync + 'static,
    on_cancel: impl Fn() + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let editing = move || editor.editing.with(Option::is_some);
    let title = move || {
        if editing() {
            format!("Edit {}", editor.name.get())
        } else {
            "Add a secret".to_owned()
        }
    };
    // The workspace's agents, and any the secret names that it no longer has.
    let choices = move || {
        let mut choices: Vec<(String, String)> = agents.list.with(|list: &Vec<AgentRecord>| {
            list.iter()
                .map(|agent| (agent.slug.clone(), agent.name.clone()))
                .collect()
        });
        editor.agents.with(|chosen| {
            for slug in chosen {
                if !choices.iter().any(|(known, _)| known == slug) {
                    choices.push((slug.clone(), format!("{slug} (no such agent now)")));
                }
            }
        });
        choices
    };
    let toggle = move |slug: String, on: bool| {
        editor.agents.update(|chosen| {
            chosen.retain(|known| *known != slug);
            if on {
                chosen.push(slug);
            }
        });
    };
    view! {
        <form class="agent-form secret-form" data-testid="secret-form" aria-labelledby="secret-form-title" novalidate autocomplete="off"
            on:submit=move |event| { event.prevent_default(); on_save(); } on:keydown=escape_cancels(on_cancel)>
            <h3 id="secret-form-title">{title}</h3>
            <div class="agent-fields">
                <label for="secret-name">"Name"</label>
                <div class="agent-field">
                    <input id="secret-name" data-testid="secret-name" type="text" maxlength="64" autocomplete="off" spellcheck="false"
                        aria-describedby="secret-name-hint" readonly=editing prop:value=editor.name
                        on:input=move |event| editor.name.set(event_target_value(&event)) />
                    <p id="secret-name-hint" class="hint">"How programs and profiles name it: A-Z, a-z, 0-9 and _ (GITHUB_TOKEN)."</p>
                </div>

                <label for="secret-value">"Value"</label>
                <div class="agent-field">
                    <Show when=move || editor.replacing.get() fallback=move || view! {
                        <p class="secret-kept">
                            <span class="hint" data-testid="secret-value-kept">"Kept sealed; not shown. "</span>
                            <button type="button" class="secondary small" data-testid="secret-replace"
                                on:click=move |_| {
                                    editor.value.set(String::new());
                                    editor.replacing.set(true);
                                    focus_soon("secret-value");
                                }>"Replace value"</button>
                        </p>
                    }>
                        <input id="secret-value" data-testid="secret-value" type="password" autocomplete="off" spellcheck="false"
                            aria-describedby="secret-value-hint" prop:value=editor.value
                            on:input=move |event| editor.value.set(event_target_value(&event)) />
                        <p id="secret-value-hint" class="hint">{move || if editing() {
                            "The new value replaces the old one when you save."
                        } else {
                            "Written once: after saving it is never shown or sent back to this page."
                        }}</p>
                        {move || editing().then(|| view! {
                            <button type="button" class="secondary small" data-testid="secret-keep-value"
                                on:click=move |_| { editor.value.set(String::new()); editor.replacing.set(false); }>"Keep the current value"</button>
                        })}
                    </Show>
                </div>

                <label for="secret-origins">"Origins"</label>
                <div class="agent-field">
                    <textarea id="secret-origins" data-testid="secret-origins" rows="3" spellcheck="false" aria-describedby="secret-origins-hint"
                        placeholder="https://api.github.com"
                        prop:value=editor.origins on:input=move |event| editor.origins.set(event_target_value(&event))></textarea>
                    <p id="secret-origins-hint" class="hint">"One a line: where it may be sent. Any other address is refused."</p>
                </div>
            </div>
            <fieldset class="secret-agents" data-testid="secret-agents">
                <legend>"Agents"</legend>
                <p class="hint">"None ticked: every agent whose profile names it. Ticked: only those."</p>
                <For each=choices key=|(slug, name)| (slug.clone(), name.clone()) let:choice>
                    {
                        let (slug, name) = choice;
                        let checked = {
                            let slug = slug.clone();
                            move || editor.agents.with(|chosen| chosen.contains(&slug))
                        };
                        let changed = slug.clone();
                        view! {
                            <label class="inline" data-testid="secret-agent">
                                <input type="checkbox" value=slug.clone() data-testid=format!("secret-agent-{slug}") prop:checked=checked
                                    on:change=move |event| toggle(changed.clone(), event_target_checked(&event)) />
                                {name}" "<code>{slug}</code>
                            </label>
                        }
                    }
                </For>
            </fieldset>
            {move || failure.get().map(|error| error_alert("secret-form-error", error))}
            <div class="actions">
                <button type="submit" data-testid="secret-save" disabled=saving>"Save secret"</button>
                <button type="button" class="secondary" data-testid="secret-cancel" on:click=move |_| on_cancel()>"Cancel"</button>
            </div>
        </form>
    }
}

/// The web search form's fields as plain data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SearchForm {
    /// `off`, `searxng`, `brave` or `tavily`.
    pub provider: String,
    pub base_url: String,
    /// A vault secret's name; empty: none.
    pub key_secret: String,
}

impl SearchForm {
    /// The form showing the stored setting.
    pub(crate) fn of(setting: Option<&WebSearch>) -> Self {
        match setting {
            None => Self {
                provider: "off".to_owned(),
                base_url: String::new(),
                key_secret: String::new(),
            },
            Some(setting) => Self {
                provider: setting.provider.as_str().to_owned(),
                base_url: setting.base_url.clone(),
                key_secret: setting.key_secret.clone().unwrap_or_default(),
            },
        }
    }

    /// The setting to save (`None`: web search off), held to `WebSearch::check`.
    ///
    /// # Errors
    ///
    /// The check's sentence.
    pub(crate) fn to_setting(&self) -> Result<Option<WebSearch>, String> {
        let provider = match self.provider.as_str() {
            "off" => return Ok(None),
            "searxng" => SearchProvider::Searxng,
            "brave" => SearchProvider::Brave,
            "tavily" => SearchProvider::Tavily,
            other => {
                return Err(format!(
                    "web search: `{other}` is not a search API Kiln speaks"
                ));
            }
        };
        let key = self.key_secret.trim();
        let setting = WebSearch {
            provider,
            base_url: self.base_url.trim().to_owned(),
            key_secret: (!key.is_empty()).then(|| key.to_owned()),
        };
        setting.check()?;
        Ok(Some(setting))
    }
}

/// The search API agents' `web_search` asks (off until one is chosen), its
/// key a secret of the vault.
#[component]
pub(crate) fn WebSearchSetting(
    storage: StorageSignals,
    vault: LocalResource<Loaded<Vec<SecretInfo>>>,
) -> impl IntoView {
    let provider = RwSignal::new("off".to_owned());
    let base_url = RwSignal::new(String::new());
    let key_secret = RwSignal::new(String::new());
    // The setting as last read: the form follows it only when it changes
    // (another tab's save), not at every change of the configuration.
    let stored = StoredValue::new(None::<SearchForm>);
    // The provider kept in the workspace, for the section's summary.
    let kept = RwSignal::new("off".to_owned());
    let problem = RwSignal::new(None::<ErrorText>);
    let status = RwSignal::new(None::<String>);
    let show = move |form: SearchForm| {
        provider.set(form.provider);
        base_url.set(form.base_url);
        key_secret.set(form.key_secret);
    };
    crate::storage::follow_config(storage, move |config| {
        let form = SearchForm::of(config.settings.web_search.as_ref());
        kept.set(form.provider.clone());
        if stored.get_value().as_ref() != Some(&form) {
            stored.set_value(Some(form.clone()));
            show(form);
        }
    });
    let save = move || {
        let form = SearchForm {
            provider: provider.get_untracked(),
            base_url: base_url.get_untracked(),
            key_secret: key_secret.get_untracked(),
        };
        status.set(None);
        let setting = match form.to_setting() {
            Ok(setting) => setting,
            Err(why) => {
                problem.set(Some(ErrorText::plain(why)));
                return;
            }
        };
        problem.set(None);
        let Some(stores) = storage.stores.get_untracked() else {
            problem.set(Some(ErrorText::plain(
                "Storage is not available: the web search setting cannot be kept.",
            )));
            return;
        };
        spawn_local(async move {
            match stores
                .act("config.web_search", json!({"web_search": setting}))
                .await
            {
                Ok(()) => status.set(Some(match &setting {
                    None => "Saved: web search is off.".to_owned(),
                    Some(setting) => format!(
                        "Saved: agents search with {} at {}.",
                        provider_label(setting.provider),
                        setting.root()
                    ),
                })),
                Err(why) => problem.set(Some(ErrorText::with_prefix("Not saved: ", &why))),
            }
        });
    };
    let secret_options = move || {
        let chosen = key_secret.get();
        let names: Vec<String> = listed(vault)
            .into_iter()
            .map(|secret| secret.name)
            .collect();
        let mut options = vec![
            view! { <option value="" prop:selected=chosen.is_empty()>"No key"</option> }.into_any(),
        ];
        for name in &names {
            options.push(
                view! { <option value=name.clone() prop:selected=*name == chosen>{name.clone()}</option> }
                    .into_any(),
            );
        }
        if !chosen.is_empty() && !names.contains(&chosen) {
            let label = format!("{chosen} (not in the vault)");
            options.push(
                view! { <option value=chosen.clone() prop:selected=true>{label}</option> }
                    .into_any(),
            );
        }
        options.collect_view()
    };
    let on = move || provider.get() != "off";
    let base_placeholder = move || match provider.get().as_str() {
        "brave" => SearchProvider::Brave.default_base_url().unwrap_or_default(),
        "tavily" => SearchProvider::Tavily
            .default_base_url()
            .unwrap_or_default(),
        _ => "https://searx.example.org",
    };
    let summary = move || {
        kept.with(|kept| match kept.as_str() {
            "searxng" => "Web search (SearXNG)",
            "brave" => "Web search (Brave)",
            "tavily" => "Web search (Tavily)",
            _ => "Web search (off)",
        })
    };
    view! {
        <details class="web-search" data-testid="web-search">
            <summary>{summary}</summary>
            <p class="hint">"Agents get a "<code>"web_search"</code>" tool once a search API is set here; its key is a secret of the vault, sent only to that API."</p>
            <form class="agent-form web-search-form" novalidate on:submit=move |event| { event.prevent_default(); save(); }>
                <div class="agent-fields">
                    <label for="web-search-provider">"Search API"</label>
                    <select id="web-search-provider" data-testid="web-search-provider"
                        on:change=move |event| { provider.set(event_target_value(&event)); status.set(None); }>
                        <option value="off" prop:selected=move || provider.get() == "off">"Off: agents have no web_search"</option>
                        <option value="searxng" prop:selected=move || provider.get() == "searxng">"SearXNG (an instance's JSON API)"</option>
                        <option value="brave" prop:selected=move || provider.get() == "brave">"Brave Search API"</option>
                        <option value="tavily" prop:selected=move || provider.get() == "tavily">"Tavily"</option>
                    </select>
                    <label for="web-search-base-url" hidden=move || !on()>"Base URL"</label>
                    <div class="agent-field" hidden=move || !on()>
                        <input id="web-search-base-url" data-testid="web-search-base-url" type="url" autocomplete="off" spellcheck="false"
                            aria-describedby="web-search-base-url-hint" placeholder=base_placeholder
                            prop:value=base_url on:input=move |event| base_url.set(event_target_value(&event)) />
                        <p id="web-search-base-url-hint" class="hint">"SearXNG: your instance’s address. Brave and Tavily: empty for their own."</p>
                    </div>
                    <label for="web-search-key" hidden=move || !on()>"Key secret"</label>
                    <div class="agent-field" hidden=move || !on()>
                        <select id="web-search-key" data-testid="web-search-key" aria-describedby="web-search-key-hint"
                            on:change=move |event| key_secret.set(event_target_value(&event))>{secret_options}</select>
                        <p id="web-search-key-hint" class="hint">"Brave and Tavily need one: add it under Secrets with the API’s origin."</p>
                    </div>
                </div>
                {move || problem.get().map(|error| error_alert("web-search-error", error))}
                <p class="mcp-status" role="status" data-testid="web-search-status">
                    {move || status.get().map(|text| view! { <span class="ok">{said(text)}</span> })}
                </p>
                <div class="actions">
                    <button type="submit" data-testid="web-search-save">"Save web search"</button>
                </div>
            </form>
        </details>
    }
}

/// A search API's name for people.
fn provider_label(provider: SearchProvider) -> &'static str {
    match provider {
        SearchProvider::Searxng => "SearXNG",
        SearchProvider::Brave => "Brave",
        SearchProvider::Tavily => "Tavily",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(agents: &[&str]) -> SecretInfo {
        SecretInfo {
            name: "GITHUB_TOKEN".into(),
            origins: vec!["https://api.github.com".into()],
            agents: agents.iter().map(|slug| (*slug).to_owned()).collect(),
            set_ms: 1,
            used_ms: None,
            version: 3,
        }
    }

    #[test]
    fn a_new_secret_sends_its_value_and_its_origins_as_the_check_reads_them() {
        let form = SecretForm {
            name: " GITHUB_TOKEN ".into(),
            value: Some("  ghp_s3cret\n".into()),
            origins: "https://API.github.com/".into(),
            agents: vec!["ada".into()],
            ..SecretForm::new_secret()
        };
        assert_eq!(
            form.to_put(&[]).expect("a good secret"),
            json!({"name": "GITHUB_TOKEN", "value": "ghp_s3cret", "origins": ["https://api.github.com"],
                "agents": ["ada"], "version": 0})
        );
        // Its Debug never prints the value.
        assert!(!format!("{form:?}").contains("ghp_s3cret"));
    }

    #[test]
    fn an_edit_sends_no_value_unless_one_is_typed() {
        let kept = SecretForm::of(&info(&["ada"]));
        assert_eq!(kept.value, None);
        let args = kept.to_put(&["GITHUB_TOKEN".into()]).expect("an edit");
        assert_eq!(args.get("value"), None);
        assert_eq!(args["version"], 3);
        assert_eq!(args["agents"], json!(["ada"]));
        let replaced = SecretForm {
            value: Some("ghp_new".into()),
            ..SecretForm::of(&info(&[]))
        };
        assert_eq!(
            replaced.to_put(&[]).expect("a new value")["value"],
            "ghp_new"
        );
    }

    #[test]
    fn each_problem_is_named_before_anything_is_sent() {
        let new = |name: &str, value: &str, origins: &str| SecretForm {
            name: name.into(),
            value: Some(value.into()),
            origins: origins.into(),
            ..SecretForm::new_secret()
        };
        let cases = [
            (
                new("GITHUB_TOKEN", "", "https://a.example"),
                "the value must be 1 to",
            ),
            (
                new("GITHUB_TOKEN", "  ", "https://a.example"),
                "the value must be 1 to",
            ),
            (
                new("GITHUB TOKEN", "x", "https://a.example"),
                "secret name `GITHUB TOKEN` must be",
            ),
            (new("GITHUB_TOKEN", "x", ""), "name 1 to 16 origins"),
            (
                new("GITHUB_TOKEN", "x", "api.github.com"),
                "is not an origin",
            ),
            (
                new("GITHUB_TOKEN", "a\nb", "https://a.example"),
                "line break",
            ),
        ];
        for (form, said) in cases {
            let error = form.to_put(&[]).unwrap_err();
            assert!(error.contains(said), "{error}");
            assert!(!error.contains("a\nb"));
        }
        let taken = new("GITHUB_TOKEN", "x", "https://a.example")
            .to_put(&["GITHUB_TOKEN".into()])
            .unwrap_err();
        assert!(taken.contains("already a secret `GITHUB_TOKEN`"), "{taken}");
    }

    #[test]
    fn a_row_says_who_may_use_it_and_when_it_was_last_used() {
        assert_eq!(agents_line(&[]), "every agent that names it");
        assert_eq!(agents_line(&["ada".into(), "bob".into()]), "only ada, bob");
        let time = |ms: u64| format!("at {ms}");
        assert_eq!(used_line(None, time), "never given to a job");
        assert_eq!(used_line(Some(7), time), "last given to a job at 7");
    }

    #[test]
    fn the_web_search_form_reads_and_writes_the_setting() {
        assert_eq!(SearchForm::of(None).to_setting(), Ok(None));
        let searx = WebSearch {
            provider: SearchProvider::Searxng,
            base_url: "https://searx.example.org".into(),
            key_secret: None,
        };
        let form = SearchForm::of(Some(&searx));
        assert_eq!(form.provider, "searxng");
        assert_eq!(form.to_setting(), Ok(Some(searx)));
        let brave = SearchForm {
            provider: "brave".into(),
            base_url: " ".into(),
            key_secret: "BRAVE_KEY".into(),
        };
        assert_eq!(
            brave.to_setting(),
            Ok(Some(WebSearch {
                provider: SearchProvider::Brave,
                base_url: String::new(),
                key_secret: Some("BRAVE_KEY".into()),
            }))
        );
        for (form, said) in [
            (
                SearchForm {
                    provider: "searxng".into(),
                    ..SearchForm::of(None)
                },
                "searxng needs `base_url`",
            ),
            (
                SearchForm {
                    provider: "tavily".into(),
                    ..SearchForm::of(None)
                },
                "tavily needs its key",
            ),
            (
                SearchForm {
                    provider: "searxng".into(),
                    base_url: "searx.example.org".into(),
                    key_secret: String::new(),
                },
                "must be an http:// or https:// address",
            ),
        ] {
            let error = form.to_setting().unwrap_err();
            assert!(error.contains(said), "{error}");
        }
    }
}

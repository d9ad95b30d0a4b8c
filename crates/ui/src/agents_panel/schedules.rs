//! The schedules of the agent being edited, under its form in the Agents
//! view: each with its cron expression and the runtime's words for it, its
//! time zone, whether it is on, its next occurrence in the person's time and
//! its last firings (a missed one said so, a run one linked to its job in
//! History); a form that adds one, and a switch and a Remove on each.
//!
//! They are written as they are changed, through the runtime worker
//! (`schedules.put` at the version read, `schedules.remove`), apart from
//! the agent form's Save; the runtime reads the expression and the zone and
//! refuses one that does not read with a sentence, shown here. A firing
//! moves a schedule's version, so a switch or a Remove that meets a
//! conflict reads the schedule again and tries once more. The list is read
//! again at each change of the configuration: a firing in this tab or
//! another shows as it happens. The plain parts (the form to a record, a
//! firing's words, what switching on writes) are tested natively.

use leptos::prelude::*;
use leptos::task::spawn_local;
use serde::Deserialize;
use serde_json::json;

use kiln_types::runtime::Problem;
use kiln_types::schedule::{Firing, FiringStatus, ScheduleRecord};

use crate::panel::{PanelNames, PanelState, config_read, focus_soon};
use crate::storage::{StorageSignals, Stores, error_alert, local_time};
use crate::storage_model::ErrorText;

/// How many of a schedule's last firings its row shows.
const SHOWN_FIRINGS: usize = 5;
/// The longest summary or prompt a row shows, in characters.
const SHOWN_CHARS: usize = 160;

/// A schedule as `schedules.list` answers it.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub(crate) struct ScheduleView {
    pub schedule: ScheduleRecord,
    /// The expression in words (`At 07:00`), when it reads.
    #[serde(default)]
    pub when: Option<String>,
    /// Why the expression or the zone does not read.
    #[serde(default)]
    pub problem: Option<String>,
    /// Its next occurrence, in ms since the epoch.
    #[serde(default)]
    pub next_ms: Option<u64>,
    /// Its last firings, newest first.
    #[serde(default)]
    pub firings: Vec<Firing>,
}

/// The new-schedule form's fields, as typed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ScheduleForm {
    pub id: String,
    pub cron: String,
    pub prompt: String,
    /// An IANA zone; empty: UTC.
    pub time_zone: String,
    pub enabled: bool,
}

impl ScheduleForm {
    /// The new schedule of agent `agent` to save: the fields trimmed (the
    /// expression's fields one space apart), held to `ScheduleRecord::check`;
    /// its id may not be one of `taken` (the workspace's, any agent's). The
    /// runtime sets when it was made and reads the expression and the zone.
    ///
    /// # Errors
    ///
    /// The first problem, as a sentence for the form.
    pub(crate) fn to_record(
        &self,
        agent: &str,
        taken: &[String],
    ) -> Result<ScheduleRecord, String> {
        let id = self.id.trim();
        if taken.iter().any(|other| other == id) {
            return Err(format!(
                "There is already a schedule `{id}` in this workspace (perhaps another agent’s): choose another id."
            ));
        }
        let zone = self.time_zone.trim();
        let record = ScheduleRecord {
            id: id.to_owned(),
            agent: agent.to_owned(),
            cron: self.cron.split_whitespace().collect::<Vec<_>>().join(" "),
            prompt: self.prompt.trim().to_owned(),
            time_zone: (!zone.is_empty()).then(|| zone.to_owned()),
            enabled: self.enabled,
            since_ms: 0,
            version: 0,
        };
        record.check()?;
        Ok(record)
    }
}

/// `schedule` switched on or off at `now_ms`. Switched on, its occurrences
/// while it was off are neither run nor listed as missed: it starts afresh.
pub(crate) fn switched(schedule: ScheduleRecord, on: bool, now_ms: u64) -> ScheduleRecord {
    let since_ms = if on && !schedule.enabled {
        schedule.since_ms.max(now_ms)
    } else {
        schedule.since_ms
    };
    ScheduleRecord {
        enabled: on,
        since_ms,
        ..schedule
    }
}

/// Agent `agent`'s schedules of `all`, by id.
pub(crate) fn of_agent(all: &[ScheduleView], agent: &str) -> Vec<ScheduleView> {
    let mut mine: Vec<ScheduleView> = all
        .iter()
        .filter(|view| view.schedule.agent == agent)
        .cloned()
        .collect();
    mine.sort_by(|a, b| a.schedule.id.cmp(&b.schedule.id));
    mine
}

/// When a schedule fires, in words, and in which zone its expression is
/// read; or why it does not read.
pub(crate) fn cadence_line(view: &ScheduleView) -> String {
    if let Some(problem) = &view.problem {
        return format!("Does not fire: {problem}");
    }
    let zone = view.schedule.time_zone.as_deref().unwrap_or("UTC");
    match &view.when {
        Some(when) => format!("{when}, {zone} time"),
        None => format!("{zone} time"),
    }
}

/// The row's line about what comes next: paused, its next occurrence in
/// the person's time (`local` writes it), or none.
pub(crate) fn next_line(view: &ScheduleView, local: impl Fn(u64) -> String) -> String {
    if view.problem.is_some() {
        return "Nothing fires until the expression and the zone read.".to_owned();
    }
    if !view.schedule.enabled {
        return "Off: nothing fires until it is switched on, and what passes meanwhile is not listed as missed.".to_owned();
    }
    match view.next_ms {
        Some(next) => format!("Next: {} (your time)", local(next)),
        None => "It has no next occurrence.".to_owned(),
    }
}

/// A firing's status as its badge says it, and the badge's class.
pub(crate) fn firing_words(status: FiringStatus) -> (&'static str, &'static str) {
    match status {
        FiringStatus::Running => ("running", "status-running"),
        FiringStatus::Ok => ("ok", "status-ok"),
        FiringStatus::Failed => ("failed", "status-error"),
        FiringStatus::Missed => ("missed", "status-cancelled"),
    }
}

/// What a firing's line says after its time: its summary, or for a missed
/// one why it did not run.
pub(crate) fn firing_note(firing: &Firing) -> String {
    let summary = firing.summary.trim();
    match firing.status {
        FiringStatus::Missed if summary.is_empty() => {
            "No tab of the workspace was open (nor any runner) in time; it is not run late."
                .to_owned()
        }
        FiringStatus::Running if summary.is_empty() => "Its job is going.".to_owned(),
        _ => kiln_types::words::clip(summary, SHOWN_CHARS),
    }
}

/// The browser's IANA time zone (`Intl.DateTimeFormat().resolvedOptions().timeZone`).
fn browser_zone() -> String {
    let format = js_sys::Intl::DateTimeFormat::new(&js_sys::Array::new(), &js_sys::Object::new());
    js_sys::Reflect::get(&format.resolved_options(), &"timeZone".into())
        .ok()
        .and_then(|zone| zone.as_string())
        .unwrap_or_default()
}

/// The zones the browser knows, `UTC` first, for the zone field's suggestions.
fn known_zones() -> Vec<String> {
    let mut zones = vec!["UTC".to_owned()];
    zones.extend(
        js_sys::Intl::supported_values_of(js_sys::Intl::SupportedValuesKey::TimeZone)
            .iter()
            .map(String::from)
            .filter(|zone| zone != "UTC"),
    );
    zones
}

fn is_conflict(problem: &Problem) -> bool {
    problem.code.as_deref() == Some("conflict")
}

/// Schedule `id` as the runtime keeps it now.
async fn read_one(stores: &Stores, id: &str) -> Result<Option<ScheduleRecord>, Problem> {
    Ok(stores
        .op::<Vec<ScheduleView>>("schedules.list", json!({}))
        .await?
        .into_iter()
        .find(|view| view.schedule.id == id)
        .map(|view| view.schedule))
}

/// Writes `change` of schedule `id` at the version kept now: read, change,
/// write; read and try once more when a firing moved it meanwhile.
/// `Ok(false)`: it is gone.
async fn change_kept(
    stores: &Stores,
    id: &str,
    change: impl Fn(ScheduleRecord) -> Option<ScheduleRecord>,
    remove: bool,
) -> Result<bool, Problem> {
    let mut tries = 0;
    loop {
        tries += 1;
        let Some(kept) = read_one(stores, id).await? else {
            return Ok(false);
        };
        let written = if remove {
            stores
                .act(
                    "schedules.remove",
                    json!({"id": kept.id, "version": kept.version}),
                )
                .await
        } else {
            match change(kept) {
                Some(record) => stores.act("schedules.put", json!(record)).await,
                None => Ok(()),
            }
        };
        match written {
            Err(problem) if is_conflict(&problem) && tries < 2 => {}
            other => return other.map(|()| true),
        }
    }
}

/// The schedules of agent `agent` (named `name`), and the form that adds one.
#[component]
pub(crate) fn AgentSchedules(
    storage: StorageSignals,
    agent: String,
    name: String,
) -> impl IntoView {
    let agent = StoredValue::new(agent);
    let read = config_read::<Vec<ScheduleView>>(
        storage,
        "schedules.list",
        "The schedules could not be read: ",
    );
    let all = move || match read.get() {
        Some(Ok(Some(all))) => all,
        _ => Vec::new(),
    };
    let mine = Memo::new(move |_| agent.with_value(|agent| of_agent(&all(), agent)));
    let panel = PanelState::<()>::new(PanelNames {
        status: "schedules-status",
        action_error: "schedules-action-error",
        unavailable: "Storage is not available: schedules cannot be kept until it is. Reload the page to try again.",
    });
    let id = RwSignal::new(String::new());
    let cron = RwSignal::new(String::new());
    let prompt = RwSignal::new(String::new());
    let zone = RwSignal::new(browser_zone());
    let enabled = RwSignal::new(true);
    let zones = known_zones();

    let add = move || {
        let form = ScheduleForm {
            id: id.get_untracked(),
            cron: cron.get_untracked(),
            prompt: prompt.get_untracked(),
            time_zone: zone.get_untracked(),
            enabled: enabled.get_untracked(),
        };
        let taken: Vec<String> = all().into_iter().map(|view| view.schedule.id).collect();
        let Some((stores, record)) =
            panel.begin_save(storage, || form.to_record(&agent.get_value(), &taken))
        else {
            return;
        };
        spawn_local(async move {
            match panel.finish_save(stores.act("schedules.put", json!(record))).await {
                Ok(()) => {
                    panel.say(format!("Added the schedule `{}`.", record.id));
                    id.set(String::new());
                    cron.set(String::new());
                    prompt.set(String::new());
                }
                Err(problem) if is_conflict(&problem) => panel.form_failed(ErrorText::plain(format!(
                    "There is already a schedule `{}` (added meanwhile, in another tab perhaps): choose another id.",
                    record.id
                ))),
                Err(problem) => panel.form_failed(ErrorText::with_prefix("Not added: ", &problem)),
            }
        });
    };
    let switch = move |id: String, on: bool| {
        let Some(stores) = panel.stores(storage) else {
            return;
        };
        spawn_local(async move {
            let changed = change_kept(
                &stores,
                &id,
                |kept| (kept.enabled != on).then(|| switched(kept, on, kiln_clock::epoch_ms())),
                false,
            )
            .await;
            match changed {
                Ok(true) => panel.say(format!(
                    "The schedule `{id}` is {}.",
                    if on { "on" } else { "off" }
                )),
                Ok(false) => panel.failed(ErrorText::plain(format!(
                    "The schedule `{id}` is gone (removed in another tab perhaps)."
                ))),
                Err(problem) => panel.failed(ErrorText::with_prefix(
                    &format!(
                        "The schedule `{id}` was not switched {}: ",
                        if on { "on" } else { "off" }
                    ),
                    &problem,
                )),
            }
        });
    };
    let remove = move |id: String| {
        let Some(stores) = panel.stores(storage) else {
            return;
        };
        spawn_local(async move {
            match change_kept(&stores, &id, |_| None, true).await {
                Ok(_) => {
                    panel.say(format!("Removed the schedule `{id}` and its firings."));
                    focus_soon("schedule-id");
                }
                Err(problem) => panel.failed(ErrorText::with_prefix(
                    &format!("The schedule `{id}` was not removed: "),
                    &problem,
                )),
            }
        });
    };
    let state_line = move || match read.get() {
        None => Some(view! { <p class="hint loading">"Reading the schedules…"</p> }.into_any()),
        Some(Ok(None)) => Some(error_alert("schedules-error", panel.unavailable()).into_any()),
        Some(Err(error)) => Some(error_alert("schedules-error", error).into_any()),
        Some(Ok(Some(_))) => mine.with(Vec::is_empty).then(|| {
            view! { <p class="hint" data-testid="schedules-none">"No schedules yet."</p> }
                .into_any()
        }),
    };
    let heading = format!("Schedules of {name}");
    view! {
        <section class="agent-form agent-schedules" data-testid="agent-schedules" aria-labelledby="agent-schedules-title">
            <h3 id="agent-schedules-title">{heading.clone()}</h3>
            <p class="hint">"A schedule runs a job of this agent on a cron expression, with its prompt, while any tab of this workspace is open (natively, "<code>"kiln schedules run-due"</code>" run by cron or a timer). One tab claims each firing; a firing that passes with no tab open is listed as missed, never run late. Each job is in History. Changes here are saved at once, apart from the form’s Save."</p>
            {state_line}
            <Show when=move || mine.with(|mine| !mine.is_empty())>
                <ul class="agent-list" data-testid="schedule-list" aria-label=heading.clone()>
                    <For each=move || mine.with(|mine| mine.iter().map(|view| view.schedule.id.clone()).collect::<Vec<_>>())
                        key=|id| id.clone() let:id>
                        <ScheduleRow id=id listed=mine on_switch=switch on_remove=remove />
                    </For>
                </ul>
            </Show>
            {panel.status_line()}
            <form class="schedule-new" data-testid="schedule-form" aria-labelledby="schedule-new-title" novalidate
                on:submit=move |event| { event.prevent_default(); add(); }>
                <fieldset>
                    <legend id="schedule-new-title">"New schedule"</legend>
                    <div class="agent-fields">
                        <label for="schedule-id">"Id"</label>
                        <div class="agent-field">
                            <input id="schedule-id" data-testid="schedule-id" type="text" maxlength="64" autocomplete="off" spellcheck="false"
                                placeholder="morning-news" aria-describedby="schedule-id-hint" prop:value=id
                                on:input=move |event| id.set(event_target_value(&event)) />
                            <p id="schedule-id-hint" class="hint">"a-z, 0-9 and -, unique in the workspace."</p>
                        </div>

                        <label for="schedule-cron">"Cron"</label>
                        <div class="agent-field">
                            <input id="schedule-cron" data-testid="schedule-cron" type="text" autocomplete="off" spellcheck="false"
                                placeholder="0 7 * * *" aria-describedby="schedule-cron-hint" prop:value=cron
                                on:input=move |event| cron.set(event_target_value(&event)) />
                            <p id="schedule-cron-hint" class="hint">"minute hour day month weekday — "<code>"0 7 * * *"</code>" is every day at 07:00, "<code>"30 8 * * 1-5"</code>" weekdays at 08:30."</p>
                        </div>

                        <label for="schedule-prompt">"Prompt"</label>
                        <div class="agent-field">
                            <textarea id="schedule-prompt" data-testid="schedule-prompt" rows="3" aria-describedby="schedule-prompt-hint"
                                prop:value=prompt on:input=move |event| prompt.set(event_target_value(&event))></textarea>
                            <p id="schedule-prompt-hint" class="hint">"What each job is asked, as if you sent it in the chat."</p>
                        </div>

                        <label for="schedule-zone">"Time zone"</label>
                        <div class="agent-field">
                            <input id="schedule-zone" data-testid="schedule-zone" type="text" list="schedule-zones" autocomplete="off" spellcheck="false"
                                placeholder="UTC" aria-describedby="schedule-zone-hint" prop:value=zone
                                on:input=move |event| zone.set(event_target_value(&event)) />
                            <datalist id="schedule-zones">
                                {zones.into_iter().map(|zone| view! { <option value=zone></option> }).collect_view()}
                            </datalist>
                            <p id="schedule-zone-hint" class="hint">"The zone the hours are read in (an IANA name such as Europe/Paris); yours to start with, UTC when empty."</p>
                        </div>
                    </div>
                    <label class="inline"><input type="checkbox" data-testid="schedule-enabled" prop:checked=enabled
                        on:change=move |event| enabled.set(event_target_checked(&event)) />"On"</label>
                    {move || panel.form_failure.get().map(|error| error_alert("schedule-form-error", error))}
                    <div class="actions">
                        <button type="submit" class="secondary" data-testid="schedule-add" disabled=panel.saving>
                            {move || if panel.saving.get() { "Adding…" } else { "Add the schedule" }}
                        </button>
                    </div>
                </fieldset>
            </form>
        </section>
    }
}

/// One schedule: its id and expression, when it fires, what it asks, its
/// last firings, and its switch and Remove. Keyed by its id, it follows
/// the list (a firing, a switch) without being drawn again, so the focus
/// stays where it was.
#[component]
fn ScheduleRow(
    id: String,
    listed: Memo<Vec<ScheduleView>>,
    on_switch: impl Fn(String, bool) + Copy + Send + Sync + 'static,
    on_remove: impl Fn(String) + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let key = StoredValue::new(id.clone());
    let shown = move || {
        key.with_value(|id| {
            listed.with(|listed| listed.iter().find(|view| &view.schedule.id == id).cloned())
        })
    };
    let text = move |say: fn(&ScheduleView) -> String| move || shown().map(|view| say(&view));
    let (switch_id, switch_for) = (format!("schedule-on-{id}"), format!("schedule-on-{id}"));
    let (for_switch, for_remove) = (id.clone(), id.clone());
    let firings = move || {
        let view = shown()?;
        if view.firings.is_empty() {
            return Some(view! { <p class="agent-meta" data-testid="schedule-no-firings">"No firings yet."</p> }.into_any());
        }
        let items = view
            .firings
            .iter()
            .take(SHOWN_FIRINGS)
            .map(|firing| {
                let (word, class) = firing_words(firing.status);
                let job = firing.job_id.clone().map(|job| {
                    view! {
                        " "<a href=format!("#/history/{job}") data-testid="schedule-job" data-job=job.clone()>"Its job in History"</a>
                    }
                });
                view! {
                    <li data-testid="schedule-firing" data-status=word>
                        <span class=format!("badge {class}")>{word}</span>
                        " "{local_time(firing.due_ms)}" · "{firing_note(firing)}
                        {job}
                    </li>
                }
            })
            .collect_view();
        Some(
            view! {
                <ul class="agent-meta schedule-firings" data-testid="schedule-firings"
                    aria-label=format!("Last firings of {}", view.schedule.id)>{items}</ul>
            }
            .into_any(),
        )
    };
    view! {
        <li class="agent-row" data-testid="schedule-row" data-id=id.clone()
            data-enabled=move || shown().map(|view| view.schedule.enabled.to_string())>
            <div class="agent-who">
                <p class="agent-title"><strong data-testid="schedule-row-id">{id.clone()}</strong>" "
                    <code data-testid="schedule-row-cron">{text(|view| view.schedule.cron.clone())}</code></p>
                <p class="agent-meta" data-testid="schedule-when">{text(cadence_line)}</p>
                <p class="agent-meta" data-testid="schedule-next">{text(|view| next_line(view, local_time))}</p>
                <p class="agent-meta" data-testid="schedule-prompt-text">{text(|view| {
                    format!("Asks: “{}”", kiln_types::words::clip(view.schedule.prompt.trim(), SHOWN_CHARS))
                })}</p>
                {firings}
            </div>
            <div class="agent-actions">
                <label class="inline" for=switch_for>
                    <input type="checkbox" id=switch_id data-testid="schedule-on" aria-label=format!("On: the schedule {id}")
                        prop:checked=move || shown().is_some_and(|view| view.schedule.enabled)
                        on:change=move |event| on_switch(for_switch.clone(), event_target_checked(&event)) />"On"
                </label>
                <button type="button" class="secondary small danger" data-testid="schedule-remove" aria-label=format!("Remove the schedule {id}")
                    on:click=move |_| on_remove(for_remove.clone())>"Remove"</button>
            </div>
        </li>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form() -> ScheduleForm {
        ScheduleForm {
            id: " morning-news ".into(),
            cron: " 0  7 * *   * ".into(),
            prompt: "  Summarise the news.\n".into(),
            time_zone: " Europe/Paris ".into(),
            enabled: true,
        }
    }

    fn view_of(record: ScheduleRecord) -> ScheduleView {
        ScheduleView {
            schedule: record,
            when: Some("At 07:00".into()),
            problem: None,
            next_ms: Some(60_000),
            firings: Vec::new(),
        }
    }

    #[test]
    fn the_form_makes_a_new_schedule_of_the_agent() {
        let record = form().to_record("ada", &[]).expect("a good form");
        assert_eq!(
            record,
            ScheduleRecord {
                id: "morning-news".into(),
                agent: "ada".into(),
                cron: "0 7 * * *".into(),
                prompt: "Summarise the news.".into(),
                time_zone: Some("Europe/Paris".into()),
                enabled: true,
                since_ms: 0,
                version: 0,
            }
        );
        // No zone: UTC.
        let utc = ScheduleForm {
            time_zone: "  ".into(),
            ..form()
        };
        assert_eq!(utc.to_record("ada", &[]).map(|r| r.time_zone), Ok(None));
    }

    #[test]
    fn the_form_says_what_is_wrong_before_anything_is_sent() {
        let cases = [
            (
                ScheduleForm {
                    id: "morning-news".into(),
                    ..form()
                },
                vec!["morning-news".to_owned()],
                "There is already a schedule `morning-news` in this workspace (perhaps another agent’s): choose another id.",
            ),
            (
                ScheduleForm {
                    id: "Morning".into(),
                    ..form()
                },
                Vec::new(),
                "schedule id",
            ),
            (
                ScheduleForm {
                    cron: "0 7 * *".into(),
                    ..form()
                },
                Vec::new(),
                "`cron` has five fields, minute hour day-of-month month day-of-week",
            ),
            (
                ScheduleForm {
                    prompt: " \n ".into(),
                    ..form()
                },
                Vec::new(),
                "`prompt` must say what the job does",
            ),
        ];
        for (form, taken, said) in cases {
            let error = form.to_record("ada", &taken).unwrap_err();
            assert!(error.contains(said), "{error}");
        }
    }

    #[test]
    fn switching_on_starts_afresh_and_switching_off_keeps_the_mark() {
        let mut record = form().to_record("ada", &[]).unwrap();
        record.since_ms = 1_000;
        record.version = 4;
        let off = switched(record.clone(), false, 9_000);
        assert_eq!((off.enabled, off.since_ms, off.version), (false, 1_000, 4));
        let on = switched(off, true, 9_000);
        assert_eq!((on.enabled, on.since_ms, on.version), (true, 9_000, 4));
        // Already on: nothing moves.
        assert_eq!(switched(record.clone(), true, 9_000), record);
    }

    #[test]
    fn a_row_says_when_it_fires_what_comes_next_and_each_firing() {
        let mut record = form().to_record("ada", &[]).unwrap();
        let local = |ms: u64| format!("t{ms}");
        let view = view_of(record.clone());
        assert_eq!(cadence_line(&view), "At 07:00, Europe/Paris time");
        assert_eq!(next_line(&view, local), "Next: t60000 (your time)");
        record.enabled = false;
        record.time_zone = None;
        let off = view_of(record.clone());
        assert_eq!(cadence_line(&off), "At 07:00, UTC time");
        assert!(next_line(&off, local).starts_with("Off: nothing fires"));
        let broken = ScheduleView {
            when: None,
            problem: Some("schedule `x`: `cron` `a b c d e` does not read".into()),
            ..view_of(record)
        };
        assert_eq!(
            cadence_line(&broken),
            "Does not fire: schedule `x`: `cron` `a b c d e` does not read"
        );
        let firing = |status, summary: &str| Firing {
            schedule: "x".into(),
            due_ms: 0,
            status,
            runner: "tab-1".into(),
            job_id: None,
            summary: summary.into(),
            version: 1,
        };
        assert_eq!(
            firing_words(FiringStatus::Missed),
            ("missed", "status-cancelled")
        );
        assert_eq!(
            firing_words(FiringStatus::Failed),
            ("failed", "status-error")
        );
        assert_eq!(firing_words(FiringStatus::Ok), ("ok", "status-ok"));
        assert!(firing_note(&firing(FiringStatus::Missed, "")).contains("not run late"));
        assert_eq!(
            firing_note(&firing(FiringStatus::Ok, "  Here is the news. ")),
            "Here is the news."
        );
        let long = "x".repeat(400);
        assert_eq!(
            firing_note(&firing(FiringStatus::Failed, &long))
                .chars()
                .count(),
            SHOWN_CHARS + 1
        );
    }

    #[test]
    fn an_agent_lists_its_own_schedules_by_id() {
        let record = |id: &str, agent: &str| ScheduleRecord {
            id: id.into(),
            agent: agent.into(),
            ..form().to_record("ada", &[]).unwrap()
        };
        let all = [
            view_of(record("zeta", "ada")),
            view_of(record("beta", "bob")),
            view_of(record("alpha", "ada")),
        ];
        let ids: Vec<String> = of_agent(&all, "ada")
            .into_iter()
            .map(|view| view.schedule.id)
            .collect();
        assert_eq!(ids, ["alpha", "zeta"]);
    }

    #[test]
    fn a_listed_schedule_reads_as_the_runtime_answers_it() {
        let answer = serde_json::json!([{
            "schedule": {"id": "ping", "agent": "ada", "cron": "* * * * *", "prompt": "kiln-schedule-ping",
                         "enabled": true, "since_ms": 5, "version": 2},
            "when": "Every minute", "problem": null, "next_ms": 60000,
            "firings": [{"schedule": "ping", "due_ms": 60000, "status": "ok", "runner": "tab-1",
                         "job_id": "j-1", "summary": "pong", "version": 2}]
        }]);
        let listed: Vec<ScheduleView> = serde_json::from_value(answer).expect("readable");
        assert_eq!(listed[0].schedule.time_zone, None);
        assert_eq!(listed[0].firings[0].job_id.as_deref(), Some("j-1"));
    }
}

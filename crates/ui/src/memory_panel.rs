//! The Memory panel: the run memory of the newest job ("Last run": each
//! entry's key, kind, title and size, its value on click), and the durable
//! memories — searched, marked, edited at the version the editor started
//! from (a lost compare-and-swap is shown and the person's text is kept),
//! deleted and saved. It follows the change feed: a memory saved in another
//! tab appears here without a reload.

use std::collections::HashMap;

use crate::said::said;
use leptos::prelude::*;

use kiln_types::records::{DEFAULT_AGENT, EntryMeta, Job, Mark, Memory};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::storage::{StorageSignals, error_alert, load_status, local_time};
use crate::storage_model::{ErrorText, format_bytes, status_label, value_text};

/// The most memories the list shows.
const LIST_LIMIT: usize = 50;

/// A run-memory entry with its value, as `run.list` answers it.
#[derive(Clone, Debug, PartialEq, Deserialize)]
struct Entry {
    #[serde(flatten)]
    meta: EntryMeta,
    #[serde(default)]
    value: Value,
}

/// `run.list`'s answer.
#[derive(Deserialize)]
struct RunEntries {
    entries: Vec<Entry>,
}

/// An edit in progress. It keeps the version it started from: saving
/// writes only over that version.
#[derive(Clone, Debug, PartialEq)]
struct EditState {
    version: u64,
    text: String,
    error: Option<ErrorText>,
    /// The stored text and version, once the person asked for them after a conflict.
    latest: Option<(u64, String)>,
    saving: bool,
}

#[component]
pub(crate) fn MemoryPanel(storage: StorageSignals) -> impl IntoView {
    let unavailable = move || storage.settled.get() && storage.stores.with(Option::is_none);
    view! {
        <section class="storage-panel memory-panel" data-testid="memory-panel" aria-labelledby="memory-title">
            <h2 id="memory-title">"Memory"</h2>
            {move || unavailable().then(|| view! {
                <p class="hint" data-testid="memory-unavailable">"Storage is not available, so nothing is kept (see the message at the top)."</p>
            })}
            <LastRun storage=storage />
            <DurableList storage=storage />
        </section>
    }
}

/// The newest job and what its run memory holds.
#[derive(Clone, Debug, PartialEq)]
struct LastRunMemory {
    job: Job,
    entries: Vec<Entry>,
}

/// The newest job's run memory.
#[component]
fn LastRun(storage: StorageSignals) -> impl IntoView {
    // The entry on show: its job and key. Its value follows the record.
    let shown = RwSignal::new(None::<(String, String)>);
    let last = LocalResource::new(move || {
        let stores = storage.stores.get();
        storage.revisions.jobs.track();
        storage.revisions.run_entries.track();
        async move {
            let Some(stores) = stores else {
                return Ok(None);
            };
            let read = async {
                let jobs: Vec<Job> = stores.op("history.jobs", json!({"limit": 1})).await?;
                let Some(job) = jobs.into_iter().next() else {
                    return Ok(None);
                };
                let listed: RunEntries = stores.op("run.list", json!({"run_id": job.id})).await?;
                Ok(Some(LastRunMemory {
                    job,
                    entries: listed.entries,
                }))
            };
            read.await
                .map(Some)
                .map_err(|failure: kiln_types::runtime::Problem| {
                    ErrorText::with_prefix("The last run's memory could not be read: ", &failure)
                })
        }
    });
    let newest = move || {
        last.with(|last| match last {
            Some(Ok(Some(Some(last)))) => Some(last.clone()),
            _ => None,
        })
    };
    let show = move |job: String, key: String| {
        shown.update(|shown| {
            let again = shown.as_ref().is_some_and(|(j, k)| *j == job && *k == key);
            *shown = (!again).then_some((job, key));
        });
    };

    view! {
        <div class="last-run" data-testid="last-run">
            <h3>"Last run"</h3>
            {load_status(last, "last-run-error", "last-run-none", |last: &Option<LastRunMemory>| {
                last.is_none().then(|| "No run yet. What a run keeps in its memory shows here.".to_owned())
            })}
            {move || newest().map(|last| last_run_view(last, shown, show))}
        </div>
    }
}

/// The newest job's line, its entries, and the value on show.
fn last_run_view<S>(
    last: LastRunMemory,
    shown: RwSignal<Option<(String, String)>>,
    show: S,
) -> impl IntoView + use<S>
where
    S: Fn(String, String) + Copy + Send + Sync + 'static,
{
    let LastRunMemory { job, entries } = last;
    let on_show = {
        let job = job.id.clone();
        move || {
            shown
                .get()
                .filter(|(shown_job, _)| *shown_job == job)
                .map(|(_, key)| key)
        }
    };
    let value = {
        let entries = entries.clone();
        move || {
            on_show().map(|key| {
                let text = entries
                    .iter()
                    .find(|entry| entry.meta.key == key)
                    .map_or_else(
                        || "(no longer there)".to_owned(),
                        |entry| value_text(&entry.value),
                    );
                view! {
                    <div class="entry-value">
                        <h4>"Value of "<code>{key}</code></h4>
                        <pre data-testid="run-entry-value">{text}</pre>
                    </div>
                }
            })
        }
    };
    let empty = entries.is_empty();
    let rows = entries
        .into_iter()
        .map(|Entry { meta: entry, .. }| {
            let key = entry.key.clone();
            let job = job.id.clone();
            let expanded = {
                let key = key.clone();
                let job = job.clone();
                move || shown.with(|shown| shown.as_ref().is_some_and(|(j, k)| *j == job && *k == key))
            };
            let label = format!("Show the value of {}", entry.key);
            view! {
                <tr data-testid="run-entry" data-key=entry.key.clone()>
                    <td>
                        <button type="button" class="link" aria-label=label aria-expanded=move || expanded().to_string()
                            on:click=move |_| show(job.clone(), key.clone())>
                            <code>{entry.key.clone()}</code>
                        </button>
                    </td>
                    <td>{entry.kind.clone()}</td>
                    <td>{entry.title.clone()}</td>
                    <td class="number">{format_bytes(entry.bytes)}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <p class="last-run-job" data-testid="last-run-job">
            <strong>{job.title.clone()}</strong>
            " · "{status_label(&job.status).to_owned()}" · "{local_time(job.started_ms)}
        </p>
        {empty.then(|| view! { <p class="hint">"This run kept nothing in its run memory."</p> })}
        <table class="data-table" data-testid="run-entries" hidden=empty>
            <thead><tr><th>"Key"</th><th>"Kind"</th><th>"Title"</th><th>"Size"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
        {value}
    }
}

/// The durable memories' state and what the person can do to them. Copy:
/// every row's buttons hold one.
#[derive(Clone, Copy)]
struct Durable {
    storage: StorageSignals,
    /// What the last action said went wrong.
    action_error: RwSignal<Option<ErrorText>>,
    /// What the last action did.
    status: RwSignal<Option<String>>,
    /// The edits in progress, by memory id.
    edits: RwSignal<HashMap<String, EditState>>,
}

impl Durable {
    fn new(storage: StorageSignals) -> Self {
        Self {
            storage,
            action_error: RwSignal::new(None),
            status: RwSignal::new(None),
            edits: RwSignal::new(HashMap::new()),
        }
    }

    /// The last action went wrong: `before` says what was being done.
    fn failed(self, before: &str, failure: &kiln_types::runtime::Problem) {
        self.action_error
            .set(Some(ErrorText::with_prefix(before, failure)));
    }

    fn mark(self, id: String, which: Mark) {
        self.storage.with_stores(move |stores| async move {
            match stores
                .act("memory.mark", json!({"id": id, "mark": which}))
                .await
            {
                Ok(_) => self.action_error.set(None),
                Err(failure) => self.failed(&format!("`{id}` was not marked: "), &failure),
            }
        });
    }

    fn delete(self, id: String, version: u64) {
        self.storage.with_stores(move |stores| async move {
            match stores
                .act("memory.remove", json!({"id": id, "version": version}))
                .await
            {
                Ok(()) => {
                    self.action_error.set(None);
                    self.edits.update(|edits| {
                        edits.remove(&id);
                    });
                    self.status.set(Some(format!("Deleted memory `{id}`.")));
                }
                Err(failure) => self.failed(&format!("`{id}` was not deleted: "), &failure),
            }
        });
    }

    fn start_edit(self, memory: &Memory) {
        self.edits.update(|edits| {
            edits.insert(
                memory.id.clone(),
                EditState {
                    version: memory.version,
                    text: memory.text.clone(),
                    error: None,
                    latest: None,
                    saving: false,
                },
            );
        });
    }

    /// Changes the edit of `id`, if there is one.
    fn edit(self, id: &str, change: impl FnOnce(&mut EditState)) {
        self.edits.update(|edits| {
            if let Some(edit) = edits.get_mut(id) {
                change(edit);
            }
        });
    }

    fn save_edit(self, id: String) {
        let Some(edit) = self.edits.with_untracked(|edits| edits.get(&id).cloned()) else {
            return;
        };
        if edit.saving {
            return;
        }
        self.edit(&id, |edit| edit.saving = true);
        self.storage.with_stores(move |stores| async move {
            let saved = stores
                .act(
                    "memory.edit",
                    json!({"id": id, "version": edit.version, "text": edit.text}),
                )
                .await;
            match saved {
                Ok(_) => {
                    self.edits.update(|edits| {
                        edits.remove(&id);
                    });
                    self.status.set(Some(format!("Saved your edit of `{id}`.")));
                }
                Err(failure) => self.edit(&id, |edit| {
                    edit.saving = false;
                    edit.error = Some(ErrorText::with_prefix(
                        &format!("Your edit of memory `{id}` was not saved: "),
                        &failure,
                    ));
                }),
            }
        });
    }

    /// After a conflict: reads what is stored now and edits over that version.
    /// The person's text stays in the box; the stored text is shown beside it.
    fn reload_latest(self, id: String) {
        self.storage.with_stores(move |stores| async move {
            let latest = stores.op::<Memory>("memory.get", json!({"id": id})).await;
            self.edit(&id, |edit| match latest {
                Ok(memory) => {
                    edit.version = memory.version;
                    edit.latest = Some((memory.version, memory.text));
                    edit.error = None;
                }
                Err(failure) => {
                    edit.error = Some(ErrorText::with_prefix(
                        &format!("`{id}` could not be read: "),
                        &failure,
                    ));
                }
            });
        });
    }
}

/// The durable memories: search, save, and each memory's marks, edit and delete.
#[component]
fn DurableList(storage: StorageSignals) -> impl IntoView {
    let durable = Durable::new(storage);
    let query = RwSignal::new(String::new());

    // The search's answer (or the newest), with the words it answers.
    let listing = LocalResource::new(move || {
        let stores = storage.stores.get();
        storage.revisions.memories.track();
        let words = query.get();
        async move {
            let Some(stores) = stores else {
                return Ok(None);
            };
            let found = if words.trim().is_empty() {
                stores
                    .op::<Vec<Memory>>("memory.list", json!({"limit": LIST_LIMIT}))
                    .await
            } else {
                // Each hit is a memory with its score beside it.
                stores
                    .op::<Vec<Memory>>("memory.query", json!({"query": words, "limit": LIST_LIMIT}))
                    .await
            };
            found
                .map(|found| Some((words, found)))
                .map_err(|failure| ErrorText::new(&failure))
        }
    });
    // The rows follow the newest answer, keyed, so an open editor survives a reload.
    let memories = move || {
        listing.with(|listed| match listed {
            Some(Ok(Some((_, memories)))) => memories.clone(),
            _ => Vec::new(),
        })
    };
    let status_line = load_status(
        listing,
        "memory-list-error",
        "memory-empty",
        |(words, found): &(String, Vec<Memory>)| {
            found.is_empty().then(|| {
                if words.trim().is_empty() {
                    "No memories yet. Save one here, or let a program call tools.save_memory."
                        .to_owned()
                } else {
                    format!("No memory matches `{}`.", words.trim())
                }
            })
        },
    );

    view! {
        <div class="durable-memory">
            <h3>"Kept memories"</h3>
            <NewMemory durable=durable />
            {move || durable.action_error.get().map(|error| error_alert("memory-error", error))}
            <div class="memory-search">
                <label for="memory-search">"Search memories"</label>
                <input id="memory-search" type="search" data-testid="memory-search" autocomplete="off"
                    placeholder="Words to look for; empty lists the newest first"
                    prop:value=query on:input=move |event| query.set(event_target_value(&event)) />
            </div>
            {status_line}
            <ul class="memory-list" data-testid="memory-list">
                <For each=memories key=|memory| (memory.id.clone(), memory.version) let:memory>
                    {memory_row(memory, durable)}
                </For>
            </ul>
        </div>
    }
}

/// The form that saves a new memory. A text the store refused stays in the box.
#[component]
fn NewMemory(durable: Durable) -> impl IntoView {
    let text = RwSignal::new(String::new());
    let saving = RwSignal::new(false);
    let save = move || {
        if saving.get_untracked() {
            return;
        }
        let typed = text.get_untracked();
        durable.storage.with_stores(move |stores| {
            saving.set(true);
            async move {
                match stores
                    .op::<Memory>(
                        "memory.save",
                        json!({"agent": DEFAULT_AGENT, "text": typed}),
                    )
                    .await
                {
                    Ok(_) => {
                        text.set(String::new());
                        durable.action_error.set(None);
                        durable.status.set(Some(
                            "Saved. The agent finds it when a question needs it.".to_owned(),
                        ));
                    }
                    Err(failure) => {
                        durable.status.set(None);
                        durable.failed("The memory was not saved: ", &failure);
                    }
                }
                saving.set(false);
            }
        });
    };
    view! {
        <form class="memory-new" on:submit=move |event| { event.prevent_default(); save(); }>
            <label for="memory-new-text">"Save a memory"</label>
            <textarea id="memory-new-text" data-testid="memory-new" rows="2" placeholder="A fact worth keeping across runs."
                prop:value=text on:input=move |event| text.set(event_target_value(&event))></textarea>
            <div class="actions">
                <button type="submit" data-testid="memory-save"
                    disabled=move || saving.get() || durable.storage.stores.with(Option::is_none)>"Save memory"</button>
                <span class="hint" role="status" data-testid="memory-status">{move || durable.status.get().map(said)}</span>
            </div>
        </form>
    }
}

/// One memory: its text, agent, marks and time, its buttons, and its editor
/// while it is being edited.
fn memory_row(memory: Memory, durable: Durable) -> impl IntoView {
    let id = memory.id.clone();
    // A memo: the row's editor is made when editing starts, not at each keystroke.
    let editing = {
        let id = id.clone();
        Memo::new(move |_| durable.edits.with(|edits| edits.contains_key(&id)))
    };
    let for_helpful = id.clone();
    let for_outdated = id.clone();
    let for_delete = id.clone();
    let for_edit = memory.clone();
    let version = memory.version;
    let helpful = match memory.helpful {
        0 => "not marked helpful yet".to_owned(),
        1 => "helpful once".to_owned(),
        n => format!("helpful {n} times"),
    };
    let text_id = format!("memory-text-{id}");
    let editor = {
        let id = id.clone();
        move || {
            editing
                .get()
                .then(|| editor_view(id.clone(), version, durable))
        }
    };
    view! {
        <li class="memory-item" class:outdated=memory.outdated data-testid="memory-item" data-id=id.clone()>
            <p class="memory-text" id=text_id.clone() data-testid="memory-text">{memory.text.clone()}</p>
            <p class="memory-meta">
                <span data-testid="memory-agent">{memory.agent.clone()}</span>
                " · "<span data-testid="memory-helpful">{helpful}</span>
                " · "{local_time(memory.updated_ms.max(memory.created_ms))}
                {memory.outdated.then(|| view! { " "<span class="badge outdated" data-testid="memory-outdated">"outdated"</span> })}
            </p>
            <div class="memory-actions" hidden=move || editing.get()>
                <button type="button" class="secondary small" data-testid="memory-helpful-button" aria-describedby=text_id.clone()
                    on:click=move |_| durable.mark(for_helpful.clone(), Mark::Helpful)>"Helpful"</button>
                <button type="button" class="secondary small" data-testid="memory-outdated-button" aria-describedby=text_id.clone()
                    disabled=memory.outdated on:click=move |_| durable.mark(for_outdated.clone(), Mark::Outdated)>"Outdated"</button>
                <button type="button" class="secondary small" data-testid="memory-edit" aria-describedby=text_id.clone()
                    on:click=move |_| durable.start_edit(&for_edit)>"Edit"</button>
                <button type="button" class="secondary small danger" data-testid="memory-delete" aria-describedby=text_id.clone()
                    on:click=move |_| durable.delete(for_delete.clone(), version)>"Delete"</button>
            </div>
            {editor}
        </li>
    }
}

/// The editor under a memory being edited. Made once per edit; each part
/// follows its own field through a memo (which notifies only on a change),
/// so typing never rebuilds the text box.
fn editor_view(id: String, listed_version: u64, durable: Durable) -> impl IntoView {
    let edits = durable.edits;
    let started_from = {
        let id = id.clone();
        Memo::new(move |_| edits.with(|edits| edits.get(&id).map_or(0, |edit| edit.version)))
    };
    let started_from = move || started_from.get();
    let error = {
        let id = id.clone();
        Memo::new(move |_| edits.with(|edits| edits.get(&id).and_then(|edit| edit.error.clone())))
    };
    let error = move || error.get();
    let latest = {
        let id = id.clone();
        Memo::new(move |_| edits.with(|edits| edits.get(&id).and_then(|edit| edit.latest.clone())))
    };
    let latest = move || latest.get();
    let saving = {
        let id = id.clone();
        Memo::new(move |_| edits.with(|edits| edits.get(&id).is_some_and(|edit| edit.saving)))
    };
    let saving = move || saving.get();
    let text = {
        let id = id.clone();
        move || {
            edits.with(|edits| {
                edits
                    .get(&id)
                    .map(|edit| edit.text.clone())
                    .unwrap_or_default()
            })
        }
    };
    let conflict = move || error().is_some_and(|error| error.code == "conflict");
    // The list shows a newer version than the one the edit started from.
    let moved_on = move || listed_version != started_from() && error().is_none();
    let text_id = format!("memory-edit-{id}");
    let for_input = id.clone();
    let for_save = id.clone();
    let for_cancel = id.clone();
    let for_reload = id.clone();
    let for_use_latest = id.clone();
    let label = {
        let id = id.clone();
        move || format!("Edit memory `{id}` (from version {})", started_from())
    };
    view! {
        <div class="memory-editor" data-testid="memory-editor">
            <label for=text_id.clone()>{label}</label>
            <textarea id=text_id data-testid="memory-edit-text" rows="3"
                prop:value=text
                on:input=move |event| {
                    let text = event_target_value(&event);
                    durable.edit(&for_input, |edit| edit.text = text);
                }></textarea>
            {move || moved_on().then(|| view! {
                <p class="hint" data-testid="memory-edit-moved">{format!(
                    "This memory changed elsewhere since you began (now version {listed_version}); saving will say so."
                )}</p>
            })}
            {move || error().map(|error| error_alert("memory-edit-error", error))}
            {move || latest().map(|(version, text)| {
                let for_use_latest = for_use_latest.clone();
                view! {
                    <div class="memory-latest">
                        <p class="hint">{format!("Stored now (version {version}); your text above is kept and replaces it when you save:")}</p>
                        <pre data-testid="memory-latest">{text.clone()}</pre>
                        <button type="button" class="secondary small" data-testid="memory-use-latest"
                            on:click=move |_| {
                                let text = text.clone();
                                durable.edit(&for_use_latest, |edit| edit.text = text);
                            }>"Use the stored text instead"</button>
                    </div>
                }
            })}
            <div class="actions">
                <button type="button" class="small" data-testid="memory-edit-save" disabled=saving
                    on:click=move |_| durable.save_edit(for_save.clone())>"Save edit"</button>
                {move || conflict().then(|| {
                    let for_reload = for_reload.clone();
                    view! {
                        <button type="button" class="secondary small" data-testid="memory-reload-latest"
                            on:click=move |_| durable.reload_latest(for_reload.clone())>"Reload latest"</button>
                    }
                })}
                <button type="button" class="secondary small" data-testid="memory-edit-cancel"
                    on:click=move |_| edits.update(|edits| { edits.remove(&for_cancel); })>"Cancel"</button>
            </div>
        </div>
    }
}

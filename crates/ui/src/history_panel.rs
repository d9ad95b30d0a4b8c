//! The History panel: past runs (jobs), newest first, each with its title,
//! status, time and kind; a click shows its input and output. A search box
//! goes through `History::search` (jobs and chat messages, ranked). It
//! follows the change feed, so a run in another tab shows up here.

use leptos::prelude::*;
use leptos::task::spawn_local;

use kiln_types::records::{HistoryHit, Job};
use serde_json::json;

use crate::storage::{StorageSignals, error_alert, local_time};
use crate::storage_model::{ErrorText, duration_label, status_label};

/// The most jobs, or search hits, the panel lists.
const LIST_LIMIT: usize = 50;

#[component]
pub(crate) fn HistoryPanel(storage: StorageSignals) -> impl IntoView {
    let query = RwSignal::new(String::new());
    let jobs = RwSignal::new(Vec::<Job>::new());
    let hits = RwSignal::new(None::<Vec<HistoryHit>>);
    let loaded = RwSignal::new(false);
    let error = RwSignal::new(None::<ErrorText>);
    // The job whose input and output are shown.
    let selected = RwSignal::new(None::<Job>);
    let generation = StoredValue::new(0_u64);

    Effect::new(move || {
        let stores = storage.stores.get();
        storage.revisions.jobs.track();
        storage.revisions.messages.track();
        let words = query.get();
        let Some(stores) = stores else { return };
        let this = generation.get_value() + 1;
        generation.set_value(this);
        spawn_local(async move {
            let (listed, found) = if words.trim().is_empty() {
                (
                    stores
                        .op::<Vec<Job>>("history.jobs", json!({"limit": LIST_LIMIT}))
                        .await,
                    Ok(None),
                )
            } else {
                (
                    Ok(Vec::new()),
                    stores
                        .op::<Vec<HistoryHit>>(
                            "history.search",
                            json!({"query": words, "limit": LIST_LIMIT}),
                        )
                        .await
                        .map(Some),
                )
            };
            if generation.get_value() != this {
                return;
            }
            match (listed, found) {
                (Ok(listed), Ok(found)) => {
                    jobs.set(listed);
                    hits.set(found);
                    error.set(None);
                }
                (Err(failure), _) | (_, Err(failure)) => {
                    error.set(Some(ErrorText::new(&failure)));
                }
            }
            // A job on show follows its record (a running one finishes).
            if let Some(shown) = selected.get_untracked() {
                match stores
                    .op::<Job>("history.job", json!({"id": shown.id}))
                    .await
                {
                    Ok(job) => {
                        if job != shown {
                            selected.set(Some(job));
                        }
                    }
                    Err(_) => selected.set(None),
                }
            }
            loaded.set(true);
        });
    });

    let show = move |id: String| {
        if selected.with_untracked(|s| s.as_ref().is_some_and(|job| job.id == id)) {
            selected.set(None);
            return;
        }
        let Some(stores) = storage.stores.get_untracked() else {
            return;
        };
        spawn_local(async move {
            match stores.op::<Job>("history.job", json!({"id": id})).await {
                Ok(job) => {
                    error.set(None);
                    selected.set(Some(job));
                }
                Err(failure) => error.set(Some(ErrorText::with_prefix(
                    &format!("Run `{id}` could not be read: "),
                    &failure,
                ))),
            }
        });
    };

    let detail = move |id: String| {
        move || {
            selected
                .get()
                .filter(|job| job.id == id)
                .map(|job| {
                    view! {
                        <div class="job-detail" data-testid="history-detail">
                            <p class="hint">{format!("{} · took {}", job.id, duration_label(job.started_ms, job.finished_ms))}</p>
                            <h4>"Input"</h4>
                            <pre data-testid="history-input">{job.input.clone()}</pre>
                            <h4>"Output"</h4>
                            <pre data-testid="history-output">{if job.output.is_empty() { "(nothing yet)".to_owned() } else { job.output.clone() }}</pre>
                        </div>
                    }
                })
        }
    };

    let job_rows = move || {
        jobs.get()
            .into_iter()
            .map(|job| {
                let id = job.id.clone();
                let expanded = {
                    let id = id.clone();
                    move || selected.with(|s| s.as_ref().is_some_and(|job| job.id == id)).to_string()
                };
                let for_show = id.clone();
                let for_detail = id.clone();
                view! {
                    <li class="history-item" data-testid="history-item" data-id=id data-status=job.status.clone()>
                        <button type="button" class="link job-title" aria-expanded=expanded
                            on:click=move |_| show(for_show.clone())>{job.title.clone()}</button>
                        <span class=format!("badge status-{}", job.status) data-testid="history-status">{status_label(&job.status).to_owned()}</span>
                        <span class="hint">{format!(" {} · {}", local_time(job.started_ms), job.kind)}</span>
                        {detail(for_detail)}
                    </li>
                }
            })
            .collect_view()
    };

    let hit_rows = move || {
        hits.get()
            .unwrap_or_default()
            .into_iter()
            .map(|hit| {
                let id = hit.id.clone();
                let is_job = hit.kind == "job";
                let title = if hit.title.is_empty() { "(untitled)".to_owned() } else { hit.title.clone() };
                let for_show = id.clone();
                let for_detail = id.clone();
                view! {
                    <li class="history-item" data-testid="history-hit" data-id=id data-kind=hit.kind>
                        {if is_job {
                            view! { <button type="button" class="link job-title" on:click=move |_| show(for_show.clone())>{title}</button> }.into_any()
                        } else {
                            view! { <strong>{title}</strong> }.into_any()
                        }}
                        <span class="hint">{format!(" {} · {} · {}", if is_job { "run" } else { "chat message" }, local_time(hit.created_ms), hit.agent)}</span>
                        <p class="excerpt" data-testid="history-excerpt">{hit.excerpt.clone()}</p>
                        {is_job.then(|| detail(for_detail))}
                    </li>
                }
            })
            .collect_view()
    };

    let empty = move || {
        if !loaded.get() || error.with(Option::is_some) {
            return None;
        }
        let text = match hits.get() {
            Some(found) if found.is_empty() => {
                format!("Nothing in the history matches `{}`.", query.get().trim())
            }
            Some(_) => return None,
            None if jobs.with(Vec::is_empty) => {
                "No runs yet. Each run of a program is kept here.".to_owned()
            }
            None => return None,
        };
        Some(view! { <p class="hint" data-testid="history-empty">{text}</p> })
    };

    let unavailable = move || storage.settled.get() && storage.stores.with(Option::is_none);

    view! {
        <section class="storage-panel history-panel" data-testid="history-panel" aria-labelledby="history-title">
            <h2 id="history-title">"History"</h2>
            {move || unavailable().then(|| view! {
                <p class="hint" data-testid="history-unavailable">"Storage is not available, so runs are not kept (see the message at the top)."</p>
            })}
            <div class="history-search">
                <label for="history-search">"Search the history"</label>
                <input id="history-search" type="search" data-testid="history-search" autocomplete="off"
                    placeholder="Words from a run's title, program or result"
                    prop:value=query on:input=move |event| query.set(event_target_value(&event)) />
            </div>
            {move || error.get().map(|error| error_alert("history-error", error))}
            {empty}
            <ol class="history-list" data-testid="history-list">
                {move || if hits.with(Option::is_some) { hit_rows().into_any() } else { job_rows().into_any() }}
            </ol>
        </section>
    }
}

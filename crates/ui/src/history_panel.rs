//! The History panel: past runs (jobs), newest first, each with its title,
//! status, time and kind; a click shows its input and output. A search box
//! goes through `History::search` (jobs and chat messages, ranked). It
//! follows the change feed, so a run in another tab shows up here.
//!
//! A link to a job (`#/history/ID`, a schedule firing's "Its job in
//! History") opens it as a click does and brings it into view, listed above
//! the others when it is not among them (older than the newest, or not a
//! search's hit); a job the workspace does not have is said so.

use crate::said::said;
use leptos::prelude::*;
use wasm_bindgen::JsCast as _;

use kiln_types::records::{HistoryHit, Job};
use serde_json::json;

use crate::route::{Route, Router};
use crate::storage::{Loaded, StorageSignals, error_alert, load_status, local_time};
use crate::storage_model::{ErrorText, duration_label, status_label};

/// The most jobs, or search hits, the panel lists.
const LIST_LIMIT: usize = 50;

/// What the list shows: the newest jobs, or a search's hits and its words.
#[derive(Clone, Debug, PartialEq)]
enum Listed {
    Jobs(Vec<Job>),
    Hits(String, Vec<HistoryHit>),
}

impl Listed {
    /// The line saying the list is empty, if it is.
    fn empty_line(&self) -> Option<String> {
        match self {
            Listed::Jobs(jobs) if jobs.is_empty() => {
                Some("No runs yet. Each run of a program is kept here.".to_owned())
            }
            Listed::Hits(words, hits) if hits.is_empty() => Some(format!(
                "Nothing in the history matches `{}`.",
                words.trim()
            )),
            _ => None,
        }
    }

    /// Whether job `id` is among those listed.
    fn has_job(&self, id: &str) -> bool {
        match self {
            Listed::Jobs(jobs) => jobs.iter().any(|job| job.id == id),
            Listed::Hits(_, hits) => hits.iter().any(|hit| hit.kind == "job" && hit.id == id),
        }
    }
}

/// The line saying that the history has no job `id`.
fn missing_line(id: &str) -> String {
    format!("No job `{id}` in this workspace's history.")
}

/// Scrolls the title of job `id`'s row to the middle of the view (clear of
/// the sticky header) and gives it the focus; whether the row is drawn.
fn bring_into_view(id: &str) -> bool {
    // `id` is a well-formed record id (`Route::parse`), safe in a selector.
    let Some(title) = web_sys::window()
        .and_then(|window| window.document())
        .and_then(|document| {
            document
                .query_selector(&format!(".history-item[data-id=\"{id}\"] .job-title"))
                .ok()
                .flatten()
        })
        .and_then(|element| element.dyn_into::<web_sys::HtmlElement>().ok())
    else {
        return false;
    };
    let options = js_sys::Object::new();
    let _ = js_sys::Reflect::set(&options, &"block".into(), &"center".into());
    if let Ok(scroll) = js_sys::Reflect::get(&title, &"scrollIntoView".into())
        .and_then(|scroll| scroll.dyn_into::<js_sys::Function>())
    {
        let _ = scroll.call1(&title, &options);
    }
    let _ = title.focus();
    true
}

#[component]
pub(crate) fn HistoryPanel(storage: StorageSignals) -> impl IntoView {
    let query = RwSignal::new(String::new());
    // The job whose input and output are shown.
    let selected = RwSignal::new(None::<String>);

    let listing = LocalResource::new(move || {
        let stores = storage.stores.get();
        storage.revisions.jobs.track();
        storage.revisions.messages.track();
        let words = query.get();
        async move {
            let Some(stores) = stores else {
                return Ok(None);
            };
            let listed = if words.trim().is_empty() {
                stores
                    .op::<Vec<Job>>("history.jobs", json!({"limit": LIST_LIMIT}))
                    .await
                    .map(Listed::Jobs)
            } else {
                stores
                    .op::<Vec<HistoryHit>>(
                        "history.search",
                        json!({"query": words, "limit": LIST_LIMIT}),
                    )
                    .await
                    .map(|hits| Listed::Hits(words, hits))
            };
            listed.map(Some).map_err(|failure| ErrorText::new(&failure))
        }
    });
    let shown = job_read(storage, selected);
    let show = move |id: String| {
        selected.update(|selected| {
            *selected = (selected.as_deref() != Some(id.as_str())).then_some(id);
        });
    };
    // The job the route names, and whether it is still to be brought into view.
    let linked = RwSignal::new(None::<String>);
    let to_bring = RwSignal::new(None::<String>);
    if let Some(router) = use_context::<Router>() {
        Effect::new(move || {
            if let Route::History(id) = router.route.get() {
                to_bring.set(id.clone());
                linked.set(id);
            }
        });
    }
    let linked_job = job_read(storage, linked);
    // Once the history has it, the linked job is opened as a click opens it.
    Effect::new(move || {
        linked_job.with(|read| {
            if let Some(Ok(Some(job))) = read
                && to_bring.with_untracked(|id| id.as_deref() == Some(job.id.as_str()))
            {
                selected.set(Some(job.id.clone()));
            }
        });
    });
    // Once its row and its detail are drawn, it is brought into view, once.
    Effect::new(move || {
        let Some(id) = to_bring.get() else {
            return;
        };
        let listed = listing.with(|listed| matches!(listed, Some(Ok(Some(_)))));
        let open = shown.with(|shown| matches!(shown, Some(Ok(Some(job))) if job.id == id));
        if listed && open {
            request_animation_frame(move || {
                if to_bring.with_untracked(|still| still.as_deref() == Some(id.as_str()))
                    && bring_into_view(&id)
                {
                    to_bring.set(None);
                }
            });
        }
    });
    let rows = move || {
        listing.with(|listed| match listed {
            Some(Ok(Some(Listed::Jobs(jobs)))) => job_rows(jobs, selected, shown, show).into_any(),
            Some(Ok(Some(Listed::Hits(_, hits)))) => hit_rows(hits, shown, show).into_any(),
            _ => ().into_any(),
        })
    };
    // The linked job, above the list when the list does not have it.
    let linked_row = move || {
        let job = linked_job.with(|read| match read {
            Some(Ok(Some(job))) => Some(job.clone()),
            _ => None,
        })?;
        let unlisted = listing.with(|listed| match listed {
            Some(Ok(Some(listed))) => !listed.has_job(&job.id),
            _ => false,
        });
        unlisted.then(|| view! {
            <ol class="history-list" data-testid="history-linked" aria-label="The job the link names">
                {job_rows(std::slice::from_ref(&job), selected, shown, show)}
            </ol>
        })
    };
    let linked_line = move || {
        linked_job.with(|read| match read {
            Some(Err(error)) if error.code == "not_found" => {
                let id = linked.get().unwrap_or_default();
                Some(view! { <p class="hint" data-testid="history-missing" role="status">{said(missing_line(&id))}</p> }.into_any())
            }
            Some(Err(error)) => Some(error_alert("history-error", error.clone()).into_any()),
            _ => None,
        })
    };
    let unavailable = move || storage.settled.get() && storage.stores.with(Option::is_none);

    view! {
        <section class="storage-panel history-panel" data-testid="history-panel" aria-labelledby="history-title">
            <h2 id="history-title">"History"</h2>
            {move || unavailable().then(|| view! {
                <p class="hint" data-testid="history-unavailable">"Storage is not available, so runs are not kept (see the message at the top)."</p>
            })}
            {linked_line}
            <div class="history-search">
                <label for="history-search">"Search the history"</label>
                <input id="history-search" type="search" data-testid="history-search" autocomplete="off"
                    placeholder="Words from a run's title, program or result"
                    prop:value=query on:input=move |event| query.set(event_target_value(&event)) />
            </div>
            {load_status(listing, "history-error", "history-empty", Listed::empty_line)}
            {move || shown.with(|shown| match shown {
                Some(Err(error)) => Some(error_alert("history-error", error.clone())),
                _ => None,
            })}
            {linked_row}
            <ol class="history-list" data-testid="history-list">{rows}</ol>
        </section>
    }
}

/// Job `id` (a signal) as the history has it, read again as the jobs change
/// (a running one finishes); `None` without storage or an id.
fn job_read(storage: StorageSignals, id: RwSignal<Option<String>>) -> LocalResource<Loaded<Job>> {
    LocalResource::new(move || {
        let stores = storage.stores.get();
        storage.revisions.jobs.track();
        let id = id.get();
        async move {
            let (Some(stores), Some(id)) = (stores, id) else {
                return Ok(None);
            };
            stores
                .op::<Job>("history.job", json!({"id": id}))
                .await
                .map(Some)
                .map_err(|failure| {
                    ErrorText::with_prefix(&format!("Run `{id}` could not be read: "), &failure)
                })
        }
    })
}

/// The jobs, newest first, each a button that shows its input and output.
fn job_rows<S>(
    jobs: &[Job],
    selected: RwSignal<Option<String>>,
    shown: LocalResource<Loaded<Job>>,
    show: S,
) -> impl IntoView + use<S>
where
    S: Fn(String) + Copy + Send + Sync + 'static,
{
    jobs.iter()
        .map(|job| {
            let id = job.id.clone();
            let expanded = {
                let id = id.clone();
                move || selected.with(|s| s.as_deref() == Some(id.as_str())).to_string()
            };
            let for_show = id.clone();
            let for_detail = id.clone();
            view! {
                <li class="history-item" data-testid="history-item" data-id=id data-status=job.status.clone()>
                    <button type="button" class="link job-title" aria-expanded=expanded
                        on:click=move |_| show(for_show.clone())>{job.title.clone()}</button>
                    <span class=format!("badge status-{}", job.status) data-testid="history-status">{status_label(&job.status).to_owned()}</span>
                    <span class="hint">{format!(" {} · {}", local_time(job.started_ms), job_kind(&job.kind))}</span>
                    {job.thread.clone().map(|thread| view! {
                        " "<a href=format!("#/chat/{thread}") data-testid="history-open-thread">"Open the conversation"</a>
                    })}
                    {detail(for_detail, shown)}
                </li>
            }
        })
        .collect_view()
}

/// A search's hits: jobs (which open like the list's) and chat messages.
fn hit_rows<S>(
    hits: &[HistoryHit],
    shown: LocalResource<Loaded<Job>>,
    show: S,
) -> impl IntoView + use<S>
where
    S: Fn(String) + Copy + Send + Sync + 'static,
{
    hits.iter()
        .map(|hit| {
            let id = hit.id.clone();
            let is_job = hit.kind == "job";
            let title = if hit.title.is_empty() { "(untitled)".to_owned() } else { hit.title.clone() };
            let for_show = id.clone();
            let for_detail = id.clone();
            view! {
                <li class="history-item" data-testid="history-hit" data-id=id data-kind=hit.kind.clone()>
                    {if is_job {
                        view! { <button type="button" class="link job-title" on:click=move |_| show(for_show.clone())>{title}</button> }.into_any()
                    } else {
                        // Something said in a conversation: the hit opens it.
                        view! { <a class="job-title" href=format!("#/chat/{for_show}") data-testid="history-open-thread">{title}</a> }.into_any()
                    }}
                    <span class="hint">{format!(" {} · {} · {}", if is_job { "run" } else { "conversation" }, local_time(hit.created_ms), hit.agent)}</span>
                    <p class="excerpt" data-testid="history-excerpt">{hit.excerpt.clone()}</p>
                    {is_job.then(|| detail(for_detail, shown))}
                </li>
            }
        })
        .collect_view()
}

/// A job's kind as the list says it.
fn job_kind(kind: &str) -> &str {
    match kind {
        "agent" => "agent turn",
        "program" => "program",
        other => other,
    }
}

/// The input and output of job `id`, while it is the one on show.
fn detail(id: String, shown: LocalResource<Loaded<Job>>) -> impl IntoView {
    move || {
        let job = shown.with(|shown| match shown {
            Some(Ok(Some(job))) if job.id == id => Some(job.clone()),
            _ => None,
        })?;
        Some(view! {
            <div class="job-detail" data-testid="history-detail">
                <p class="hint">{format!("{} · took {}", job.id, duration_label(job.started_ms, job.finished_ms))}</p>
                <h4>"Input"</h4>
                <pre data-testid="history-input">{job.input.clone()}</pre>
                <h4>"Output"</h4>
                <pre data-testid="history-output">{if job.output.is_empty() { "(nothing yet)".to_owned() } else { job.output }}</pre>
            </div>
        })
    }
}

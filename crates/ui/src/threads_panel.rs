//! The conversations list: every kept thread, pinned first, then grouped by
//! day (Today, Yesterday, Previous 7 days, …), newest first; New chat;
//! search over titles and what was said (the history's search); rename, pin,
//! and delete with Undo. Each row is a link to `#/chat/ID`, so a thread opens
//! with a click, the keyboard, or in another tab. It follows the change
//! feed, so a thread started or renamed in another tab shows up here.

use std::collections::BTreeSet;

use leptos::ev::KeyboardEvent;
use leptos::prelude::*;
use serde_json::json;

use kiln_types::records::{HistoryHit, Thread};

use crate::route::{Route, Router};
use crate::storage::{Loaded, StorageSignals, Stores};
use crate::storage_model::ErrorText;

/// The most threads the list reads.
const LIST_LIMIT: usize = 500;
/// How long Undo stays offered after a delete.
const UNDO_MS: u64 = 10_000;
const DAY_MS: i64 = 86_400_000;

/// Which group of the list a thread updated at `updated_ms` falls in, seen
/// at `now_ms` in a time zone `offset_minutes` behind UTC (`Date`'s
/// `getTimezoneOffset`).
pub(crate) fn day_group(updated_ms: u64, now_ms: u64, offset_minutes: i64) -> &'static str {
    let day = |ms: u64| {
        (i64::try_from(ms).unwrap_or(i64::MAX) - offset_minutes * 60_000).div_euclid(DAY_MS)
    };
    match day(now_ms) - day(updated_ms) {
        i64::MIN..=0 => "Today",
        1 => "Yesterday",
        2..=7 => "Previous 7 days",
        8..=30 => "Previous 30 days",
        _ => "Older",
    }
}

/// The list's groups in order, each with its threads (pinned ones first,
/// under "Pinned"), keeping the store's order within a group.
pub(crate) fn grouped(
    threads: Vec<Thread>,
    now_ms: u64,
    offset_minutes: i64,
) -> Vec<(&'static str, Vec<Thread>)> {
    let mut groups: Vec<(&'static str, Vec<Thread>)> = Vec::new();
    for thread in threads {
        let label = if thread.pinned {
            "Pinned"
        } else {
            day_group(thread.updated_ms, now_ms, offset_minutes)
        };
        match groups.iter_mut().find(|(name, _)| *name == label) {
            Some((_, members)) => members.push(thread),
            None => groups.push((label, vec![thread])),
        }
    }
    groups
}

/// The threads a search finds: those whose title holds the words, and
/// those where something said matched (`hits`, the history's search),
/// in the list's order.
pub(crate) fn found(threads: Vec<Thread>, words: &str, hits: &[HistoryHit]) -> Vec<Thread> {
    let words: Vec<String> = words.split_whitespace().map(str::to_lowercase).collect();
    let said: BTreeSet<&str> = hits
        .iter()
        .filter(|hit| hit.kind == "message")
        .map(|hit| hit.id.as_str())
        .collect();
    threads
        .into_iter()
        .filter(|thread| {
            let title = thread.title.to_lowercase();
            said.contains(thread.id.as_str())
                || words.iter().all(|word| title.contains(word.as_str()))
        })
        .collect()
}

fn now_ms() -> u64 {
    kiln_clock::epoch_ms()
}

/// A thread the person just deleted, which Undo brings back.
#[derive(Clone, Debug, PartialEq)]
struct Deleted {
    id: String,
    title: String,
    /// It was the conversation on show.
    was_open: bool,
}

async fn list(stores: Stores, words: String) -> Loaded<Vec<Thread>> {
    let threads = stores
        .op::<Vec<Thread>>("threads.list", json!({"limit": LIST_LIMIT}))
        .await
        .map_err(|problem| ErrorText::new(&problem))?;
    if words.trim().is_empty() {
        return Ok(Some(threads));
    }
    // A query with no words to search for (punctuation) matches titles only.
    let hits = stores
        .op::<Vec<HistoryHit>>("history.search", json!({"query": words, "limit": 200}))
        .await
        .unwrap_or_default();
    Ok(Some(found(threads, &words, &hits)))
}

#[component]
pub(crate) fn ThreadList(storage: StorageSignals, router: Router) -> impl IntoView {
    let query = RwSignal::new(String::new());
    let deleted = RwSignal::new(None::<Deleted>);
    let renaming = RwSignal::new(None::<String>);
    let problem = RwSignal::new(None::<ErrorText>);
    let listing = LocalResource::new(move || {
        let stores = storage.stores.get();
        storage.revisions.messages.track();
        let words = query.get();
        async move {
            match stores {
                Some(stores) => list(stores, words).await,
                None => Ok(None),
            }
        }
    });
    let open_id = move || match router.route.get() {
        Route::Chat(id) => id,
        _ => None,
    };
    let act = move |op: &'static str, args: serde_json::Value| {
        storage.with_stores(move |stores| async move {
            if let Err(error) = stores.act(op, args).await {
                problem.try_set(Some(ErrorText::new(&error)));
            }
        });
    };
    let remove = move |thread: Thread| {
        let was_open = open_id().as_deref() == Some(thread.id.as_str());
        let gone = Deleted {
            id: thread.id.clone(),
            title: thread.title.clone(),
            was_open,
        };
        deleted.set(Some(gone.clone()));
        act("threads.delete", json!({"id": thread.id}));
        if was_open {
            router.go(Route::Chat(None), false);
        }
        set_timeout(
            move || {
                deleted.try_update(|shown| {
                    if shown.as_ref() == Some(&gone) {
                        *shown = None;
                    }
                });
            },
            std::time::Duration::from_millis(UNDO_MS),
        );
    };
    let undo = move || {
        let Some(gone) = deleted.get_untracked() else {
            return;
        };
        deleted.set(None);
        act("threads.restore", json!({"id": gone.id}));
        if gone.was_open {
            router.go(Route::Chat(Some(gone.id)), false);
        }
    };
    let rows = move || {
        let Ok(Some(threads)) = listing.get().unwrap_or(Ok(None)) else {
            return None;
        };
        let searching = !query.get_untracked().trim().is_empty();
        if threads.is_empty() {
            let line = if searching {
                "No conversation matches."
            } else {
                "Your conversations are kept here."
            };
            return Some(
                view! { <p class="hint" data-testid="threads-empty">{line}</p> }.into_any(),
            );
        }
        let offset = js_sys::Date::new_0().get_timezone_offset() as i64;
        let groups = if searching {
            vec![("Found", threads)]
        } else {
            grouped(threads, now_ms(), offset)
        };
        Some(
            groups
                .into_iter()
                .map(|(label, threads)| {
                    view! {
                        <h3 class="threads-group">{label}</h3>
                        <ul class="threads-list">
                            {threads.into_iter().map(|thread| view! {
                                <ThreadRow thread=thread open=Signal::derive(open_id) renaming=renaming
                                    act=act remove=remove />
                            }).collect_view()}
                        </ul>
                    }
                })
                .collect_view()
                .into_any(),
        )
    };
    view! {
        <nav class="threads" data-testid="threads" aria-label="Conversations">
            <div class="threads-head">
                <a class="button new-chat" href="#/chat" data-testid="thread-new"
                    on:click=move |_| router.go(Route::Chat(None), false)>"New chat"</a>
            </div>
            <input type="search" class="threads-search" data-testid="thread-search" aria-label="Search conversations"
                placeholder="Search conversations" prop:value=query
                on:input=move |event| query.set(event_target_value(&event)) />
            {move || problem.get().map(|error| crate::storage::error_alert("threads-error", error))}
            {rows}
            {move || deleted.get().map(|gone| view! {
                <div class="undo" data-testid="thread-undo" role="status">
                    <span>{format!("Deleted \u{201c}{}\u{201d}.", gone.title)}</span>
                    <button type="button" class="small" data-testid="thread-undo-button" on:click=move |_| undo()>"Undo"</button>
                </div>
            })}
        </nav>
    }
}

/// One conversation in the list: its link, and Rename, Pin and Delete.
#[component]
fn ThreadRow(
    thread: Thread,
    open: Signal<Option<String>>,
    renaming: RwSignal<Option<String>>,
    act: impl Fn(&'static str, serde_json::Value) + Copy + Send + Sync + 'static,
    remove: impl Fn(Thread) + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let id = thread.id.clone();
    let is_open = {
        let id = id.clone();
        Signal::derive(move || open.get().as_deref() == Some(id.as_str()))
    };
    let editing = {
        let id = id.clone();
        move || renaming.get().as_deref() == Some(id.as_str())
    };
    let draft = RwSignal::new(thread.title.clone());
    let field = NodeRef::<leptos::html::Input>::new();
    Effect::new(move || {
        if let Some(field) = field.get() {
            let _ = field.focus();
            field.select();
        }
    });
    let save = {
        let id = id.clone();
        let title = thread.title.clone();
        move || {
            if renaming.get_untracked().as_deref() != Some(id.as_str()) {
                return;
            }
            renaming.set(None);
            let text = draft.get_untracked();
            if !text.trim().is_empty() && text.trim() != title {
                act("threads.rename", json!({"id": id, "title": text}));
            }
        }
    };
    let on_key = {
        let save = save.clone();
        move |event: KeyboardEvent| match event.key().as_str() {
            "Enter" => {
                event.prevent_default();
                save();
            }
            "Escape" => {
                event.prevent_default();
                renaming.set(None);
            }
            _ => {}
        }
    };
    let pinned = thread.pinned;
    let title = thread.title.clone();
    let href = Route::Chat(Some(id.clone())).hash();
    let (rename_id, pin_id) = (id.clone(), id.clone());
    let row = thread.clone();
    view! {
        <li class="thread" class:open=is_open data-testid="thread" data-thread=id.clone()>
            {move || if editing() {
                let save = save.clone();
                view! {
                    <input class="thread-title-edit" data-testid="thread-rename-input" aria-label="Conversation title"
                        node_ref=field prop:value=draft on:input=move |event| draft.set(event_target_value(&event))
                        on:keydown=on_key.clone() on:blur=move |_| save() />
                }.into_any()
            } else {
                view! {
                    <a class="thread-link" href=href.clone() data-testid="thread-link"
                        aria-current=move || is_open.get().then_some("page")>
                        {pinned.then(|| view! { <span class="pin-mark" aria-label="Pinned">"\u{2605} "</span> })}
                        {title.clone()}
                    </a>
                }.into_any()
            }}
            <span class="thread-actions">
                <button type="button" class="icon" data-testid="thread-rename" aria-label=format!("Rename \u{201c}{}\u{201d}", thread.title)
                    title="Rename" on:click=move |_| { draft.set(row.title.clone()); renaming.set(Some(rename_id.clone())); }>"\u{270e}"</button>
                <button type="button" class="icon" data-testid="thread-pin" aria-pressed=pinned.to_string()
                    aria-label=if pinned { "Unpin" } else { "Pin" } title=if pinned { "Unpin" } else { "Pin" }
                    on:click=move |_| act("threads.pin", json!({"id": pin_id, "pinned": !pinned}))>
                    {if pinned { "\u{2605}" } else { "\u{2606}" }}</button>
                <button type="button" class="icon danger" data-testid="thread-delete" aria-label=format!("Delete \u{201c}{}\u{201d}", thread.title)
                    title="Delete" on:click=move |_| remove(thread.clone())>"\u{2715}"</button>
            </span>
        </li>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(id: &str, updated_ms: u64, pinned: bool, title: &str) -> Thread {
        Thread {
            n_messages: 2,
            pinned,
            version: 1,
            ..Thread::new(id.into(), title.into(), "default".into(), updated_ms)
        }
    }

    const HOUR: u64 = 3_600_000;

    #[test]
    fn threads_fall_in_the_persons_days() {
        // 2026-12-06 10:00 UTC; the person is at UTC+2 (offset -120): 12:00 there.
        let now = 1_796_551_200_000;
        assert_eq!(day_group(now - HOUR, now, -120), "Today");
        // 23:30 UTC the day before is 01:30 today at UTC+2, but yesterday in UTC.
        let late = now - 10 * HOUR - 30 * 60_000;
        assert_eq!(day_group(late, now, -120), "Today");
        assert_eq!(day_group(late, now, 0), "Yesterday");
        assert_eq!(day_group(now - 3 * 24 * HOUR, now, 0), "Previous 7 days");
        assert_eq!(day_group(now - 20 * 24 * HOUR, now, 0), "Previous 30 days");
        assert_eq!(day_group(now - 90 * 24 * HOUR, now, 0), "Older");
        // A clock that moved back still says today.
        assert_eq!(day_group(now + HOUR, now, 0), "Today");
        let groups = grouped(
            vec![
                thread("p", now - 90 * 24 * HOUR, true, "kept"),
                thread("a", now - HOUR, false, "a"),
                thread("b", now - 2 * HOUR, false, "b"),
                thread("c", now - 40 * 24 * HOUR, false, "c"),
            ],
            now,
            0,
        );
        let shape: Vec<(&str, Vec<&str>)> = groups
            .iter()
            .map(|(label, threads)| (*label, threads.iter().map(|t| t.id.as_str()).collect()))
            .collect();
        assert_eq!(
            shape,
            [
                ("Pinned", vec!["p"]),
                ("Today", vec!["a", "b"]),
                ("Older", vec!["c"])
            ]
        );
    }

    #[test]
    fn a_search_finds_titles_and_what_was_said() {
        let threads = vec![
            thread("a", 3, false, "Trip to Lyon"),
            thread("b", 2, false, "Groceries"),
            thread("c", 1, false, "Taxes"),
        ];
        let hit = HistoryHit {
            kind: "message".into(),
            id: "c".into(),
            agent: String::new(),
            title: "Taxes".into(),
            excerpt: "lyon office".into(),
            created_ms: 1,
            score: 1.0,
        };
        let ids = |found: Vec<Thread>| found.into_iter().map(|t| t.id).collect::<Vec<_>>();
        assert_eq!(
            ids(found(threads.clone(), "lyon", std::slice::from_ref(&hit))),
            ["a", "c"]
        );
        assert_eq!(ids(found(threads.clone(), "  GROC ", &[])), ["b"]);
        let job = HistoryHit {
            kind: "job".into(),
            id: "b".into(),
            ..hit
        };
        assert_eq!(ids(found(threads, "nothing", &[job])), Vec::<String>::new());
    }
}

//! The contract every backend keeps, as one suite: native tests run it on
//! [`crate::native::MemoryBackend`] and [`crate::native::LogBackend`], and
//! `wasm-bindgen-test` runs it in Chromium on IndexedDB and OPFS. A broken
//! promise panics with the check's name. It is built only with the
//! `contract` feature, which this crate's tests turn on: it never ships.

use std::cell::RefCell;
use std::rc::Rc;

use serde_json::json;

use crate::backend::{Backend, Change, Expect, Op, Scan, Table};
use crate::config::{AgentRecord, Config, ProviderRecord, Settings, StoredKey};
use crate::durable::{DurableMemory, Mark};
use crate::error::StoreError;
use crate::export::{self, ExportOptions};
use crate::files::{self, FileTree, WorkspacePath};
use crate::history::{History, JobStart};
use crate::run::{Describe, ListFilter, RunMemory};
use crate::threads::{ContextChange, Draft, Threads};

fn ok<T>(result: Result<T, StoreError>, check: &str) -> T {
    match result {
        Ok(value) => value,
        Err(error) => panic!("{check}: unexpected error: {error}"),
    }
}

fn err<T: std::fmt::Debug>(result: Result<T, StoreError>, check: &str) -> StoreError {
    match result {
        Ok(value) => panic!("{check}: expected an error, got {value:?}"),
        Err(error) => error,
    }
}

fn path(text: &str) -> WorkspacePath {
    match WorkspacePath::parse(text) {
        Ok(path) => path,
        Err(error) => panic!("path `{text}`: {error}"),
    }
}

/// Runs every table check on `backend` and `other`, two empty backends of
/// the same kind (export goes from one to the other).
pub async fn backend_suite(backend: Rc<dyn Backend>, other: Rc<dyn Backend>) {
    records(&*backend).await;
    batches(&*backend).await;
    scans_and_terms(&*backend).await;
    feed(&*backend).await;
    durable(backend.clone()).await;
    run_memory(backend.clone()).await;
    history(backend.clone()).await;
    threads(backend.clone()).await;
    config(backend.clone()).await;
    export_import(backend, other).await;
}

async fn records(backend: &dyn Backend) {
    let check = "records";
    let t = Table::Config;
    ok(
        backend
            .commit(vec![Op::put(t, "r:a", json!({"n": 1}), Expect::Absent)])
            .await,
        check,
    );
    let record =
        ok(backend.get(t, "r:a").await, check).unwrap_or_else(|| panic!("{check}: r:a missing"));
    assert_eq!(
        (record.version, record.value.clone()),
        (1, json!({"n": 1})),
        "{check}: first version"
    );
    let changes = ok(
        backend
            .commit(vec![Op::put(t, "r:a", json!({"n": 2}), Expect::Version(1))])
            .await,
        check,
    );
    assert_eq!(
        changes,
        [Change {
            table: t,
            key: "r:a".into(),
            version: Some(2)
        }],
        "{check}: change"
    );
    let stale = err(
        backend
            .commit(vec![Op::put(t, "r:a", json!({"n": 3}), Expect::Version(1))])
            .await,
        check,
    );
    assert!(
        matches!(&stale, StoreError::Conflict { key, expected, found, .. } if key == "r:a" && expected == "1" && found == "2"),
        "{check}: stale write: {stale}"
    );
    assert!(
        stale.hint().is_some() && !stale.to_string().contains("hint:"),
        "{check}: conflict hint, apart from the message"
    );
    let again = err(
        backend
            .commit(vec![Op::put(t, "r:a", json!({}), Expect::Absent)])
            .await,
        check,
    );
    assert_eq!(again.code(), "conflict", "{check}: absent expected");
    let kept = ok(backend.get(t, "r:a").await, check).map(|r| (r.version, r.value));
    assert_eq!(
        kept,
        Some((2, json!({"n": 2}))),
        "{check}: refused writes wrote nothing"
    );
    ok(
        backend
            .commit(vec![Op::delete(t, "r:a", Expect::Version(2))])
            .await,
        check,
    );
    assert_eq!(
        ok(backend.get(t, "r:a").await, check),
        None,
        "{check}: deleted"
    );
    ok(
        backend
            .commit(vec![Op::put(t, "r:a", json!(1), Expect::Absent)])
            .await,
        check,
    );
    let reborn = ok(backend.get(t, "r:a").await, check).map(|r| r.version);
    assert_eq!(reborn, Some(1), "{check}: a deleted key starts again at 1");
    ok(
        backend
            .commit(vec![Op::delete(t, "r:a", Expect::Any)])
            .await,
        check,
    );
}

async fn batches(backend: &dyn Backend) {
    let check = "batches";
    let t = Table::Config;
    ok(
        backend
            .commit(vec![Op::put(t, "b:x", json!("x"), Expect::Absent)])
            .await,
        check,
    );
    let failed = backend
        .commit(vec![
            Op::put(t, "b:new", json!("new"), Expect::Absent),
            Op::put(
                Table::Memories,
                "b:m",
                json!({"id": "b:m", "text": "batch word", "agent": "a", "created_ms": 1}),
                Expect::Absent,
            ),
            Op::put(t, "b:x", json!("lost"), Expect::Version(7)),
        ])
        .await;
    assert_eq!(
        err(failed, check).code(),
        "conflict",
        "{check}: the bad op fails the batch"
    );
    assert_eq!(
        ok(backend.get(t, "b:new").await, check),
        None,
        "{check}: nothing of a failed batch is written"
    );
    assert_eq!(
        ok(backend.get(Table::Memories, "b:m").await, check),
        None,
        "{check}: across tables"
    );
    let found = ok(
        backend.search(Table::Memories, &["batch".to_owned()]).await,
        check,
    );
    assert!(found.iter().all(Vec::is_empty), "{check}: nor indexed");
    let changes = ok(
        backend
            .commit(vec![
                Op::put(t, "b:y", json!(1), Expect::Absent),
                Op::put(t, "b:y", json!(2), Expect::Version(1)),
                Op::delete(t, "b:x", Expect::Version(1)),
            ])
            .await,
        check,
    );
    assert_eq!(changes.len(), 3, "{check}: one change per op");
    assert_eq!(
        ok(backend.get(t, "b:y").await, check).map(|r| (r.version, r.value)),
        Some((2, json!(2))),
        "{check}: a key written twice in one batch"
    );
    ok(
        backend
            .commit(vec![Op::delete(t, "b:y", Expect::Any)])
            .await,
        check,
    );

    // An update: the batch made from what was read, checked as a commit is.
    let seen = std::cell::Cell::new(None);
    ok(
        backend
            .update(
                &[Table::Memories],
                t,
                "b:u",
                Box::new(|found| {
                    seen.set(Some(found.is_none()));
                    Ok(vec![Op::put(t, "b:u", json!(1), Expect::Absent)])
                }),
            )
            .await,
        check,
    );
    assert_eq!(
        seen.get(),
        Some(true),
        "{check}: an update reads what is there"
    );
    let changes = ok(
        backend
            .update(
                &[],
                t,
                "b:u",
                Box::new(|found| {
                    let version = found.map_or(0, |record| record.version);
                    Ok(vec![Op::put(t, "b:u", json!(2), Expect::Version(version))])
                }),
            )
            .await,
        check,
    );
    assert_eq!(changes[0].version, Some(2), "{check}: an update's batch");
    let outside = backend
        .update(
            &[Table::Memories],
            t,
            "b:u",
            Box::new(|_| Ok(vec![Op::delete(Table::Threads, "b:t", Expect::Any)])),
        )
        .await;
    assert_eq!(
        err(outside, check).code(),
        "invalid",
        "{check}: an update writes only within its scope"
    );
    let refused = backend
        .update(
            &[],
            t,
            "b:u",
            Box::new(|_| Err(StoreError::Invalid("no".into()))),
        )
        .await;
    assert_eq!(
        err(refused, check).code(),
        "invalid",
        "{check}: an update that makes no batch"
    );
    assert_eq!(
        ok(backend.get(t, "b:u").await, check).map(|record| record.value),
        Some(json!(2)),
        "{check}: and writes nothing"
    );
    ok(
        backend
            .commit(vec![Op::delete(t, "b:u", Expect::Any)])
            .await,
        check,
    );
}

async fn scans_and_terms(backend: &dyn Backend) {
    let check = "scans";
    let t = Table::Jobs;
    let job = |id: &str, title: &str| json!({"id": id, "kind": "program", "agent": "a", "title": title, "status": "ok", "started_ms": 1});
    let ops = ["s/3", "s/1", "s/2", "t/1"]
        .iter()
        .map(|key| {
            Op::put(
                t,
                *key,
                job(key, &format!("title {key} apples")),
                Expect::Absent,
            )
        })
        .collect();
    ok(backend.commit(ops).await, check);
    let keys = |records: Vec<crate::backend::Record>| {
        records.into_iter().map(|r| r.key).collect::<Vec<_>>()
    };
    let all = ok(
        backend
            .scan(
                t,
                Scan {
                    prefix: "s/",
                    ..Scan::default()
                },
            )
            .await,
        check,
    );
    assert_eq!(
        keys(all),
        ["s/1", "s/2", "s/3"],
        "{check}: prefix in key order"
    );
    let newest = ok(
        backend
            .scan(
                t,
                Scan {
                    prefix: "s/",
                    reverse: true,
                    limit: Some(2),
                },
            )
            .await,
        check,
    );
    assert_eq!(
        keys(newest),
        ["s/3", "s/2"],
        "{check}: reverse with a limit"
    );
    assert_eq!(ok(backend.count(t).await, check), 4, "{check}: count");
    let terms = vec!["apple".to_owned(), "nothing".to_owned()];
    let found = ok(backend.search(t, &terms).await, check);
    assert_eq!(found.len(), 2, "{check}: one list per term");
    let mut apples = keys(found[0].clone());
    apples.sort();
    assert_eq!(apples, ["s/1", "s/2", "s/3", "t/1"], "{check}: term hits");
    assert!(found[1].is_empty(), "{check}: no hits");
    ok(
        backend
            .commit(vec![Op::put(
                t,
                "s/1",
                job("s/1", "pears only"),
                Expect::Version(1),
            )])
            .await,
        check,
    );
    ok(
        backend
            .commit(vec![Op::delete(t, "s/2", Expect::Any)])
            .await,
        check,
    );
    let found = ok(
        backend
            .search(t, &["apple".to_owned(), "pear".to_owned()])
            .await,
        check,
    );
    let mut apples = keys(found[0].clone());
    apples.sort();
    assert_eq!(
        apples,
        ["s/3", "t/1"],
        "{check}: overwritten and deleted records leave the index"
    );
    assert_eq!(
        keys(found[1].clone()),
        ["s/1"],
        "{check}: new words are indexed"
    );
    let cleanup = ["s/1", "s/3", "t/1"]
        .iter()
        .map(|k| Op::delete(t, *k, Expect::Any))
        .collect();
    ok(backend.commit(cleanup).await, check);
}

async fn feed(backend: &dyn Backend) {
    let check = "feed";
    let seen: Rc<RefCell<Vec<Change>>> = Rc::default();
    let sink = seen.clone();
    let subscription = backend.subscribe(Rc::new(move |changes: &[Change]| {
        sink.borrow_mut().extend_from_slice(changes)
    }));
    ok(
        backend
            .commit(vec![Op::put(Table::Config, "f:1", json!(1), Expect::Any)])
            .await,
        check,
    );
    assert_eq!(
        seen.borrow().as_slice(),
        [Change {
            table: Table::Config,
            key: "f:1".into(),
            version: Some(1)
        }],
        "{check}: a subscriber sees the write"
    );
    drop(subscription);
    ok(
        backend
            .commit(vec![Op::delete(Table::Config, "f:1", Expect::Any)])
            .await,
        check,
    );
    assert_eq!(
        seen.borrow().len(),
        1,
        "{check}: a dropped subscription sees nothing"
    );
}

async fn durable(backend: Rc<dyn Backend>) {
    let check = "durable memory";
    let memory = DurableMemory::new(backend);
    let teal = ok(
        memory
            .save("ada", "The user's favourite colour is teal")
            .await,
        check,
    );
    assert_eq!(
        (
            teal.agent.as_str(),
            teal.helpful,
            teal.outdated,
            teal.version
        ),
        ("ada", 0, false, 1),
        "{check}: saved"
    );
    let soup = ok(
        memory
            .save(
                "",
                "Soup recipes are kept in notes/soup.md; colour of the pot is red",
            )
            .await,
        check,
    );
    assert_eq!(soup.agent, "default", "{check}: default agent");
    ok(memory.save("bob", "Deploys happen on Fridays").await, check);
    assert_eq!(
        err(memory.save("ada", "   ").await, check).code(),
        "invalid",
        "{check}: empty text"
    );
    let listed = ok(memory.list(None, Some(2)).await, check);
    assert_eq!(listed.len(), 2, "{check}: list limit");
    assert_eq!(listed[1].id, soup.id, "{check}: newest first");
    assert_eq!(
        ok(memory.list(Some("ada"), None).await, check).len(),
        1,
        "{check}: list by agent"
    );
    let hits = ok(memory.query("favourite colour", None, 10).await, check);
    let ids: Vec<&str> = hits.iter().map(|hit| hit.memory.id.as_str()).collect();
    assert_eq!(ids, [teal.id.as_str(), soup.id.as_str()], "{check}: ranked");
    let marked = ok(memory.mark(&soup.id, Mark::Helpful).await, check);
    assert_eq!(marked.helpful, 1, "{check}: helpful counts");
    let outdated = ok(memory.mark(&teal.id, Mark::Outdated).await, check);
    assert!(outdated.outdated, "{check}: outdated");
    let hits = ok(memory.query("colour", None, 10).await, check);
    assert_eq!(
        hits.last().map(|hit| hit.memory.id.clone()),
        Some(teal.id.clone()),
        "{check}: outdated ranks last"
    );
    let stale = err(
        memory
            .edit(&teal.id, teal.version, "The favourite colour is now green")
            .await,
        check,
    );
    assert_eq!(
        stale.code(),
        "conflict",
        "{check}: an edit at an old version is refused"
    );
    let edited = ok(
        memory
            .edit(
                &teal.id,
                outdated.version,
                "The favourite colour is now green",
            )
            .await,
        check,
    );
    assert!(
        !edited.outdated && edited.text.ends_with("green"),
        "{check}: edited"
    );
    assert_eq!(
        ok(memory.query("green", Some("ada"), 10).await, check).len(),
        1,
        "{check}: the new words are found"
    );
    assert!(
        ok(memory.query("teal", None, 10).await, check).is_empty(),
        "{check}: the old ones are gone"
    );
    ok(memory.remove(&soup.id, None).await, check);
    assert_eq!(
        err(memory.get(&soup.id).await, check).code(),
        "not_found",
        "{check}: removed"
    );
    assert_eq!(
        err(memory.mark(&soup.id, Mark::Helpful).await, check).code(),
        "not_found",
        "{check}: marking a removed memory"
    );
}

async fn run_memory(backend: Rc<dyn Backend>) {
    let check = "run memory";
    let run = RunMemory::new(backend.clone(), "run-1");
    let other = RunMemory::new(backend, "run-2");
    let seen: Rc<RefCell<Vec<String>>> = Rc::default();
    let sink = seen.clone();
    let _subscription = run.subscribe(Rc::new(move |keys: &[String]| {
        sink.borrow_mut().extend_from_slice(keys)
    }));
    ok(
        run.set(
            "step:fetch",
            json!({"rows": 3}),
            Describe {
                title: "Fetched rows".into(),
                ..Describe::default()
            },
        )
        .await,
        check,
    );
    ok(
        run.set("input:customer", json!("ACME"), Describe::default())
            .await,
        check,
    );
    let published = ok(
        run.publish("note", json!("hello"), "A note", "for the team")
            .await,
        check,
    );
    assert_eq!(
        (
            published.key.as_str(),
            published.kind.as_str(),
            published.bytes
        ),
        ("shared:note", "shared", 7),
        "{check}: publish"
    );
    ok(
        other.set("step:fetch", json!(0), Describe::default()).await,
        check,
    );
    let spoof = err(run.publish("step:fetch", json!(1), "", "").await, check);
    assert!(
        spoof.to_string().contains("only under `shared:`")
            && spoof.to_string().contains("`step:fetch`"),
        "{check}: spoof refused by name: {spoof}"
    );
    assert_eq!(
        err(
            run.set("secret:x", json!(1), Describe::default()).await,
            check
        )
        .code(),
        "invalid",
        "{check}: unknown namespace"
    );
    let listed = ok(run.list(&ListFilter::default()).await, check);
    let keys: Vec<&str> = listed.iter().map(|meta| meta.key.as_str()).collect();
    assert_eq!(
        keys,
        ["step:fetch", "input:customer", "shared:note"],
        "{check}: metadata in namespace order, this run only"
    );
    assert_eq!(listed[0].title, "Fetched rows", "{check}: title");
    assert_eq!(listed[0].kind, "step_result", "{check}: kind");
    let shared = ok(
        run.list(&ListFilter {
            namespace: Some("shared".into()),
            ..ListFilter::default()
        })
        .await,
        check,
    );
    assert_eq!(shared.len(), 1, "{check}: namespace filter");
    let read = ok(
        run.read(&["step:fetch".into(), "task:missing".into()])
            .await,
        check,
    );
    assert_eq!(read[0].value, Some(json!({"rows": 3})), "{check}: read");
    assert_eq!(read[1].value, None, "{check}: a missing key reads none");
    assert_eq!(
        seen.borrow().as_slice(),
        ["step:fetch", "input:customer", "shared:note"],
        "{check}: the subscriber saw this run's writes"
    );
}

async fn history(backend: Rc<dyn Backend>) {
    let check = "history";
    let history = History::new(backend.clone());
    let job = ok(
        history
            .start_job(JobStart {
                kind: "program".into(),
                agent: "ada".into(),
                title: "Sum invoices".into(),
                input: "return 1 + 1".into(),
                owner: "tab-1".into(),
                run_id: None,
            })
            .await,
        check,
    );
    assert_eq!(job.status, "running", "{check}: running");
    let done = ok(
        history
            .finish_job(&job.id, "ok", "the invoices total 42 euros")
            .await,
        check,
    );
    assert_eq!(
        (done.status.as_str(), done.finished_ms.is_some()),
        ("ok", true),
        "{check}: finished"
    );
    let keyed = ok(
        history
            .start_job(JobStart {
                kind: "program".into(),
                agent: "ada".into(),
                title: "Keyed".into(),
                input: "return 2".into(),
                owner: "tab-1".into(),
                run_id: Some("codemode:00000000000000aa".into()),
            })
            .await,
        check,
    );
    let result = serde_json::json!({"content": [{"type": "text", "text": "completed"}], "structuredContent": {"value": 2}});
    ok(
        history
            .finish_run(&keyed.id, "ok", "completed", Some(result.clone()))
            .await,
        check,
    );
    let read = ok(history.job(&keyed.id).await, check);
    assert_eq!(
        (read.run_id.as_deref(), read.result.as_ref()),
        (Some("codemode:00000000000000aa"), Some(&result)),
        "{check}: a keyed run keeps its id and its whole result"
    );
    ok(
        history
            .start_job(JobStart {
                kind: "chat".into(),
                agent: "bob".into(),
                title: "Later".into(),
                input: String::new(),
                owner: "tab-2".into(),
                run_id: None,
            })
            .await,
        check,
    );
    let jobs = ok(history.jobs(10).await, check);
    assert_eq!(jobs.len(), 3, "{check}: jobs");
    assert_eq!(jobs[2].id, job.id, "{check}: newest first");
    let conversations = Threads::new(backend.clone());
    let thread = ok(conversations.create("Travel", "bob").await, check);
    ok(
        conversations
            .append(&thread.id, Draft::said("user", "Book a train to Lyon"))
            .await,
        check,
    );
    let second = ok(
        conversations
            .append(
                &thread.id,
                Draft::said("assistant", "The train to Lyon leaves at 9"),
            )
            .await,
        check,
    );
    assert_eq!(second.seq, 2, "{check}: sequence");
    assert_eq!(
        err(
            conversations
                .append(&thread.id, Draft::said("robot", "x"))
                .await,
            check
        )
        .code(),
        "invalid",
        "{check}: role"
    );
    assert_eq!(
        ok(conversations.messages(&thread.id).await, check).len(),
        2,
        "{check}: messages"
    );
    assert_eq!(
        ok(conversations.get(&thread.id).await, check).n_messages,
        2,
        "{check}: the thread counts them"
    );
    let hits = ok(history.search("invoices euros", 10).await, check);
    assert_eq!(
        hits.first()
            .map(|hit| (hit.kind.as_str(), hit.id.clone(), hit.agent.clone())),
        Some(("job", job.id.clone(), "ada".into())),
        "{check}: a job found"
    );
    let hits = ok(history.search("Lyon", 10).await, check);
    assert_eq!(hits.len(), 2, "{check}: both messages found");
    assert!(
        hits.iter()
            .all(|hit| hit.kind == "message" && hit.title == "Travel" && hit.agent == "bob"),
        "{check}: with their thread"
    );
    assert_eq!(
        err(history.search("  ", 10).await, check).code(),
        "invalid",
        "{check}: empty query"
    );

    // Tab 2 closed with "Later" running; tab 1 is still running another job.
    let going = ok(
        history
            .start_job(JobStart {
                kind: "program".into(),
                agent: "ada".into(),
                title: "Still going".into(),
                input: "await sleep(1e6)".into(),
                owner: "tab-1".into(),
                run_id: None,
            })
            .await,
        check,
    );
    let owners = AliveOwners(&["tab-1"]);
    let interrupted = ok(history.interrupt_abandoned(&owners).await, check);
    assert_eq!(
        interrupted
            .iter()
            .map(|job| (job.title.as_str(), job.status.as_str(), job.output.as_str()))
            .collect::<Vec<_>>(),
        [("Later", "interrupted", crate::history::INTERRUPTED_OUTPUT)],
        "{check}: only the gone owner's running job is interrupted"
    );
    assert!(
        interrupted[0].finished_ms.is_some(),
        "{check}: it has ended"
    );
    assert_eq!(
        ok(history.job(&going.id).await, check).status,
        "running",
        "{check}: a live owner's job is left running"
    );
    assert_eq!(
        ok(history.job(&job.id).await, check).status,
        "ok",
        "{check}: a finished job keeps its ending"
    );
    assert!(
        ok(history.interrupt_abandoned(&owners).await, check).is_empty(),
        "{check}: a second sweep finds nothing"
    );
}

/// Owners of whom exactly the named ones are alive.
struct AliveOwners(&'static [&'static str]);

impl crate::owners::Owners for AliveOwners {
    fn owner(&self) -> &str {
        self.0.first().copied().unwrap_or_default()
    }

    fn is_alive<'a>(&'a self, owner: &'a str) -> futures::future::LocalBoxFuture<'a, bool> {
        Box::pin(std::future::ready(self.0.contains(&owner)))
    }
}

async fn threads(backend: Rc<dyn Backend>) {
    use kiln_types::agent::AgentEvent;
    use kiln_types::chat::Message;
    let check = "threads";
    let threads = Threads::new(backend.clone());
    let user = |text: &str| Message::User { text: text.into() };
    let said = |text: &str| Message::Assistant {
        text: text.into(),
        tool_calls: Vec::new(),
    };
    let first = ok(
        threads
            .create(
                "  \nWhat is the capital of Peru? I am asking for a crossword puzzle clue today",
                "",
            )
            .await,
        check,
    );
    assert_eq!(
        first.title, "What is the capital of Peru? I am asking for a crossword puzzle clue today",
        "{check}: titled after the first line"
    );
    ok(
        threads
            .append(&first.id, Draft::user("What is the capital of Peru?"))
            .await,
        check,
    );
    let answer = Draft {
        role: "assistant".into(),
        text: "Lima".into(),
        events: vec![
            AgentEvent::TextDelta { text: "Li".into() },
            AgentEvent::TextDelta { text: "ma".into() },
            AgentEvent::LogUpdate {
                message: "note".into(),
            },
        ],
        context: Some(ContextChange::Append(vec![
            user("What is the capital of Peru?"),
            said("Lima"),
        ])),
        provider: "scripted".into(),
        model: "m-1".into(),
        ..Draft::default()
    };
    let kept = ok(threads.append(&first.id, answer).await, check);
    assert_eq!(kept.seq, 2, "{check}: numbered");
    assert_eq!(
        kept.events.first(),
        Some(&AgentEvent::TextDelta {
            text: "Lima".into()
        }),
        "{check}: text deltas joined"
    );
    assert_eq!(kept.events.len(), 2, "{check}: the note kept apart");
    // A second turn compacted what came before.
    ok(
        threads
            .append(&first.id, Draft::user("And of Chile?"))
            .await,
        check,
    );
    ok(
        threads
            .append(
                &first.id,
                Draft {
                    role: "assistant".into(),
                    text: "Santiago".into(),
                    context: Some(ContextChange::Replace(vec![
                        Message::System {
                            text: "summary".into(),
                        },
                        user("And of Chile?"),
                        said("Santiago"),
                    ])),
                    ..Draft::default()
                },
            )
            .await,
        check,
    );
    // A third failed: it changes nothing the model reads.
    ok(
        threads.append(&first.id, Draft::user("And of Mars?")).await,
        check,
    );
    ok(
        threads
            .append(
                &first.id,
                Draft {
                    role: "assistant".into(),
                    failure: Some(crate::threads::TurnFailure {
                        code: "provider".into(),
                        message: "the provider refused".into(),
                        hint: None,
                    }),
                    ..Draft::default()
                },
            )
            .await,
        check,
    );
    let opened = ok(threads.open(&first.id).await, check);
    assert_eq!(opened.messages.len(), 6, "{check}: every message");
    assert_eq!(opened.thread.n_messages, 6, "{check}: counted");
    assert_eq!(
        opened.thread.provider, "scripted",
        "{check}: the provider kept"
    );
    assert_eq!(
        opened.context,
        vec![
            Message::System {
                text: "summary".into()
            },
            user("And of Chile?"),
            said("Santiago"),
        ],
        "{check}: what the model reads next"
    );
    assert_eq!(
        err(
            threads
                .append(
                    &first.id,
                    Draft {
                        role: "robot".into(),
                        ..Draft::default()
                    }
                )
                .await,
            check
        )
        .code(),
        "invalid",
        "{check}: a role checked"
    );

    // The list: pinned first, then the newest; rename, delete and undo.
    let second = ok(threads.create("Another", "").await, check);
    let ours = [first.id.clone(), second.id.clone()];
    // The history's suite left its own thread: only these two are looked at.
    let ids = |list: Vec<crate::threads::Thread>| {
        list.into_iter()
            .map(|thread| thread.id)
            .filter(|id| ours.contains(id))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(ok(threads.list(10).await, check)),
        [second.id.clone(), first.id.clone()],
        "{check}: newest first"
    );
    ok(threads.pin(&first.id, true).await, check);
    assert_eq!(
        ids(ok(threads.list(10).await, check)),
        [first.id.clone(), second.id.clone()],
        "{check}: pinned first"
    );
    let renamed = ok(threads.rename(&first.id, "  Capitals  ").await, check);
    assert!(
        renamed.titled && renamed.title == "Capitals",
        "{check}: renamed {renamed:?}"
    );
    assert_eq!(
        err(threads.rename(&first.id, "   ").await, check).code(),
        "invalid",
        "{check}: no empty title"
    );
    ok(threads.delete(&second.id).await, check);
    assert_eq!(
        ids(ok(threads.list(10).await, check)),
        vec![first.id.clone()],
        "{check}: deleted hidden"
    );
    assert_eq!(
        ok(threads.purge(crate::clock::epoch_ms()).await, check),
        0,
        "{check}: undo still possible"
    );
    ok(threads.restore(&second.id).await, check);
    assert_eq!(
        ids(ok(threads.list(10).await, check)).len(),
        2,
        "{check}: restored"
    );
    ok(threads.delete(&second.id).await, check);
    let later = crate::clock::epoch_ms() + crate::threads::DELETED_KEPT_MS + 1;
    assert_eq!(
        ok(threads.purge(later).await, check),
        1,
        "{check}: purged after the grace"
    );
    assert_eq!(
        err(threads.get(&second.id).await, check).code(),
        "not_found",
        "{check}: gone"
    );

    // Regenerate: cut from message 5; edit and resend: fork before message 3.
    let cut = ok(threads.truncate(&first.id, 5).await, check);
    assert_eq!(cut.n_messages, 4, "{check}: cut");
    assert_eq!(
        ok(threads.open(&first.id).await, check).messages.len(),
        4,
        "{check}: cut messages gone"
    );
    let next = ok(threads.append(&first.id, Draft::user("again")).await, check);
    assert_eq!(next.seq, 5, "{check}: numbering goes on after a cut");
    // Two appends at once (two tabs' workers, or a turn's two writes): each
    // takes its own number and the thread counts both.
    let (one, two) = futures::join!(
        threads.append(&first.id, Draft::user("at once, one")),
        threads.append(&first.id, Draft::user("at once, two")),
    );
    let mut numbers = [ok(one, check).seq, ok(two, check).seq];
    numbers.sort_unstable();
    assert_eq!(
        numbers,
        [6, 7],
        "{check}: appends at once take the next numbers"
    );
    assert_eq!(
        ok(threads.get(&first.id).await, check).n_messages,
        7,
        "{check}: the thread counts both"
    );
    ok(threads.truncate(&first.id, 6).await, check);
    assert_eq!(
        err(
            threads.append("no-such-thread", Draft::user("hello")).await,
            check
        )
        .code(),
        "not_found",
        "{check}: a message for a thread that is not there"
    );
    let fork = ok(threads.fork(&first.id, 3).await, check);
    assert_ne!(fork.thread.id, first.id, "{check}: a new thread");
    assert_eq!(
        fork.messages.iter().map(|m| m.seq).collect::<Vec<_>>(),
        [1, 2],
        "{check}: fork keeps what came before"
    );
    assert_eq!(
        fork.context,
        vec![user("What is the capital of Peru?"), said("Lima")],
        "{check}: fork's context"
    );
    assert_eq!(
        fork.thread.title, "Capitals",
        "{check}: fork keeps the title"
    );
    assert_eq!(
        ok(threads.open(&first.id).await, check).messages.len(),
        5,
        "{check}: the original stays"
    );
    assert_eq!(
        err(threads.fork(&first.id, 0).await, check).code(),
        "invalid",
        "{check}: fork before 0"
    );
    assert_eq!(
        err(threads.fork(&first.id, 9).await, check).code(),
        "invalid",
        "{check}: fork past the end"
    );
    // The history's search finds a thread by what was said in it.
    let hits = ok(History::new(backend).search("Santiago", 10).await, check);
    assert!(
        hits.iter().any(|hit| hit.id == first.id),
        "{check}: found by search {hits:?}"
    );
    // Clean up for the suites after this one (export counts records).
    for thread in ok(threads.list(10).await, check) {
        ok(threads.delete(&thread.id).await, check);
    }
    ok(threads.purge(later).await, check);
}

async fn config(backend: Rc<dyn Backend>) {
    let check = "config";
    let config = Config::new(backend);
    let mut provider = ProviderRecord {
        name: "work".into(),
        kind: "openai".into(),
        base_url: "https://api.openai.com/v1".into(),
        model: "gpt-4o-mini".into(),
        key: Some(StoredKey::new("sk-secret-1")),
        version: 0,
    };
    provider.version = ok(config.put_provider(&provider).await, check);
    assert!(
        !format!("{provider:?}").contains("sk-secret"),
        "{check}: keys print redacted"
    );
    let again = err(
        config
            .put_provider(&ProviderRecord {
                version: 0,
                ..provider.clone()
            })
            .await,
        check,
    );
    assert_eq!(
        again.code(),
        "conflict",
        "{check}: a second new provider of one name"
    );
    let mut tab_a = ok(config.providers().await, check).remove(0);
    let mut tab_b = tab_a.clone();
    tab_a.model = "gpt-4o".into();
    ok(config.put_provider(&tab_a).await, check);
    tab_b.model = "o3".into();
    let lost = err(config.put_provider(&tab_b).await, check);
    assert_eq!(
        lost.code(),
        "conflict",
        "{check}: the second tab's edit is refused, not lost"
    );
    assert_eq!(
        ok(config.providers().await, check)[0].model,
        "gpt-4o",
        "{check}: the first edit stands"
    );
    let bad = err(
        config
            .put_provider(&ProviderRecord {
                kind: "gemini".into(),
                ..provider.clone()
            })
            .await,
        check,
    );
    assert!(
        bad.to_string().contains("`gemini`"),
        "{check}: bad kind named"
    );
    let mut settings = ok(config.settings().await, check);
    assert_eq!(settings, Settings::default(), "{check}: default settings");
    settings.brake = true;
    settings.version = ok(config.put_settings(&settings).await, check);
    assert!(
        ok(config.settings().await, check).brake,
        "{check}: brake kept"
    );
    let bad_mode = err(
        config
            .put_settings(&Settings {
                permission_mode: "yolo".into(),
                ..settings
            })
            .await,
        check,
    );
    assert!(
        bad_mode.to_string().contains("`yolo`"),
        "{check}: bad mode named"
    );
    agents(&config).await;
}

/// Agent profiles: a new workspace has the default agent; an agent is saved,
/// read back whole, edited at its version, refused by field, removed; the
/// default agent cannot be removed.
async fn agents(config: &Config) {
    use kiln_types::permission::Autonomy;
    use kiln_types::profile::{AgentRole, AgentServer};
    let check = "agents";
    let fresh = ok(config.agents().await, check);
    assert_eq!(
        fresh,
        vec![AgentRecord::default_agent()],
        "{check}: a new workspace has the default agent"
    );
    let mut ada = AgentRecord {
        system_prompt: "You answer in French.".into(),
        provider: "work".into(),
        model: "gpt-4o".into(),
        mcp: vec![AgentServer {
            name: "docs".into(),
            url: "https://docs.example/mcp".into(),
            auth_secret: None,
        }],
        autonomy: [("http_request".to_owned(), Autonomy::Block)].into(),
        role: AgentRole::Orchestrator,
        ..AgentRecord::new("ada", "Ada")
    };
    ada.version = ok(config.put_agent(&ada).await, check);
    let read = ok(config.agent("ada").await, check);
    assert_eq!(read.as_ref(), Some(&ada), "{check}: read back whole");
    let mut stale = ada.clone();
    ada.name = "Ada L.".into();
    ada.version = ok(config.put_agent(&ada).await, check);
    stale.name = "Ada X".into();
    assert_eq!(
        err(config.put_agent(&stale).await, check).code(),
        "conflict",
        "{check}: a stale edit is refused"
    );
    let bad = err(
        config.put_agent(&AgentRecord::new("Bad Slug", "Bad")).await,
        check,
    );
    assert!(
        bad.to_string().contains("`Bad Slug`"),
        "{check}: a bad slug named: {bad}"
    );
    let slugs: Vec<String> = ok(config.agents().await, check)
        .into_iter()
        .map(|agent| agent.slug)
        .collect();
    assert_eq!(
        slugs,
        ["default", "ada"],
        "{check}: the default agent first, then by slug"
    );
    let kept_default = err(config.remove_agent("default", 1).await, check);
    assert!(
        kept_default.to_string().contains("cannot be removed"),
        "{check}: {kept_default}"
    );
    ok(config.remove_agent("ada", ada.version).await, check);
    assert_eq!(
        ok(config.agent("ada").await, check),
        None,
        "{check}: removed"
    );
}

async fn export_import(backend: Rc<dyn Backend>, other: Rc<dyn Backend>) {
    let check = "export";
    let plain = ok(
        export::export(&*backend, None, ExportOptions::default()).await,
        check,
    );
    let text = match serde_json::to_string(&plain) {
        Ok(text) => text,
        Err(error) => panic!("{check}: {error}"),
    };
    assert!(
        !text.contains("sk-secret-1"),
        "{check}: keys left out unless asked"
    );
    let with_keys = ok(
        export::export(&*backend, None, ExportOptions { include_keys: true }).await,
        check,
    );
    let with_keys = serde_json::to_value(&with_keys).unwrap_or_default();
    assert!(
        with_keys.to_string().contains("sk-secret-1"),
        "{check}: keys in when asked"
    );

    let mut broken = with_keys.clone();
    if let Some(memories) = broken
        .pointer_mut("/tables/memories")
        .and_then(|m| m.as_array_mut())
    {
        memories.push(json!({"key": "m-bad", "value": {"id": "m-bad", "text": "", "agent": "a", "created_ms": 1}}));
    }
    let refused = err(export::import(&*other, None, &broken).await, check);
    assert!(
        refused.to_string().contains("`m-bad`")
            && refused.to_string().contains("nothing was imported"),
        "{check}: {refused}"
    );
    assert_eq!(
        ok(other.count(Table::Memories).await, check),
        0,
        "{check}: a refused import wrote nothing"
    );
    let wrong = err(
        export::import(&*other, None, &json!({"format": "zip", "schema": 1})).await,
        check,
    );
    assert!(wrong.to_string().contains("`zip`"), "{check}: format named");

    let summary = ok(export::import(&*other, None, &with_keys).await, check);
    for table in Table::ALL {
        let a = ok(backend.scan(table, Scan::default()).await, check);
        let b = ok(other.scan(table, Scan::default()).await, check);
        let values = |records: Vec<crate::backend::Record>| {
            records
                .into_iter()
                .map(|r| (r.key, r.value))
                .collect::<Vec<_>>()
        };
        assert_eq!(values(a), values(b), "{check}: {table} round trip");
        assert!(
            summary.records.contains_key(table.name()),
            "{check}: summary names {table}"
        );
    }
    let providers = ok(Config::new(other.clone()).providers().await, check);
    assert_eq!(
        providers[0].key.as_ref().map(StoredKey::expose),
        Some("sk-secret-1"),
        "{check}: key imported when exported"
    );
    // Importing the keyless export keeps the key already there.
    let plain = serde_json::to_value(&plain).unwrap_or_default();
    ok(export::import(&*other, None, &plain).await, check);
    let providers = ok(Config::new(other).providers().await, check);
    assert_eq!(
        providers[0].key.as_ref().map(StoredKey::expose),
        Some("sk-secret-1"),
        "{check}: a keyless import keeps the stored key"
    );
}

/// Runs every file check on `tree`, an empty workspace.
pub async fn tree_suite(tree: Rc<dyn FileTree>) {
    let check = "files";
    let tree = &*tree;
    let stat = ok(
        tree.write(&path("notes/today.md"), b"# Today\nbuy milk\n".to_vec())
            .await,
        check,
    );
    assert!(
        stat.exists && stat.is_file && stat.size == 17,
        "{check}: write answers the stat: {stat:?}"
    );
    assert_eq!(
        ok(tree.read(&path("notes/today.md")).await, check),
        b"# Today\nbuy milk\n",
        "{check}: read back"
    );
    ok(
        tree.write(&path("notes/today.md"), b"# Today\nbuy bread\n".to_vec())
            .await,
        check,
    );
    assert_eq!(
        ok(files::read_text(tree, &path("notes/today.md")).await, check),
        "# Today\nbuy bread\n",
        "{check}: replaced whole"
    );
    ok(tree.write(&path("a.txt"), vec![0xff, 0xfe]).await, check);
    ok(tree.mkdir(&path("empty/inner")).await, check);
    ok(tree.mkdir(&path("empty/inner")).await, check);
    let root = ok(tree.list(&WorkspacePath::root()).await, check);
    let names: Vec<(&str, bool)> = root.iter().map(|e| (e.name.as_str(), e.is_dir)).collect();
    assert_eq!(
        names,
        [("empty", true), ("notes", true), ("a.txt", false)],
        "{check}: folders first, then by name"
    );
    assert_eq!(root[2].path, "a.txt", "{check}: entry path");
    let notes = ok(tree.list(&path("notes")).await, check);
    assert_eq!(
        (notes.len(), notes[0].path.as_str(), notes[0].size),
        (1, "notes/today.md", 18),
        "{check}: nested list"
    );
    let missing = ok(tree.stat(&path("nope.txt")).await, check);
    assert!(!missing.exists, "{check}: a missing path stats as absent");
    let dir = ok(tree.stat(&path("empty")).await, check);
    assert!(dir.exists && dir.is_dir, "{check}: folder stat");
    assert_eq!(
        err(tree.read(&path("nope.txt")).await, check).code(),
        "not_found",
        "{check}: reading a missing file"
    );
    assert!(
        err(tree.read(&path("notes")).await, check)
            .to_string()
            .contains("folder"),
        "{check}: reading a folder"
    );
    assert!(
        err(files::read_text(tree, &path("a.txt")).await, check)
            .to_string()
            .contains("not UTF-8"),
        "{check}: bytes are not text"
    );
    let full = err(tree.remove(&path("empty")).await, check);
    assert!(
        full.to_string().contains("not empty"),
        "{check}: a tree is never removed: {full}"
    );
    ok(tree.remove(&path("empty/inner")).await, check);
    ok(tree.remove(&path("empty")).await, check);
    ok(tree.remove(&path("a.txt")).await, check);
    assert!(
        !ok(tree.stat(&path("a.txt")).await, check).exists,
        "{check}: removed"
    );
    assert_eq!(
        err(tree.remove(&path("a.txt")).await, check).code(),
        "not_found",
        "{check}: removing twice"
    );
    assert!(
        err(tree.write(&path("notes/today.md/x"), vec![]).await, check)
            .to_string()
            .contains("not a folder"),
        "{check}: a file is not a folder"
    );

    assert_eq!(
        ok(
            files::edit(tree, &path("notes/today.md"), "bread", "eggs", false).await,
            check
        ),
        1,
        "{check}: edit"
    );
    assert_eq!(
        ok(files::read_text(tree, &path("notes/today.md")).await, check),
        "# Today\nbuy eggs\n",
        "{check}: edited"
    );
    ok(
        tree.write(&path("notes/two.md"), b"x x".to_vec()).await,
        check,
    );
    let twice = err(
        files::edit(tree, &path("notes/two.md"), "x", "y", false).await,
        check,
    );
    assert!(
        twice.to_string().contains("2 times"),
        "{check}: ambiguous edit refused: {twice}"
    );
    assert_eq!(
        ok(
            files::edit(tree, &path("notes/two.md"), "x", "y", true).await,
            check
        ),
        2,
        "{check}: replace all"
    );
    let absent = err(
        files::edit(tree, &path("notes/two.md"), "zzz", "y", false).await,
        check,
    );
    assert!(
        absent.to_string().contains("does not contain"),
        "{check}: {absent}"
    );
    let found = ok(
        files::search(tree, &WorkspacePath::root(), "EGGS").await,
        check,
    );
    assert_eq!(found.len(), 1, "{check}: search");
    assert_eq!(
        (found[0].path.as_str(), found[0].line),
        ("notes/today.md", 2),
        "{check}: search hit"
    );
    let walked = ok(files::walk(tree, &WorkspacePath::root(), 100).await, check);
    let paths: Vec<&str> = walked.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["notes/today.md", "notes/two.md"], "{check}: walk");
}

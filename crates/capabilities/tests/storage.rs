//! The memory, history and file capabilities through the real ladder
//! (`Dispatcher::call`), over the store's in-memory twins.

#![allow(
    clippy::unwrap_used,
    clippy::result_large_err,
    reason = "a test: a panic is a failed test with a line number, and its tools answer the contract's error"
)]

use std::cell::Cell;
use std::rc::Rc;

use futures::executor::block_on;
use kiln_capabilities::{Dispatcher, Gate, GateSettings, HeldSignal, Mode, Registry, SecretScope};
use kiln_capabilities::{Storage, builtin};
use kiln_store::files::{FileTree, MAX_FILE_BYTES, WorkspacePath};
use kiln_store::history::JobStart;
use kiln_store::native::{MemoryBackend, MemoryTree};
use kiln_store::{StoreError, Table};
use kiln_types::protocol::CallRequest;
use kiln_types::run::RunLimits;
use kiln_types::tool_result::{CallOutcome, ToolReply};
use serde_json::{Value, json};

/// One run's ladder over fresh stores.
struct Ladder {
    dispatcher: Dispatcher,
    storage: Storage,
    tree: Rc<MemoryTree>,
    n_calls: Cell<u32>,
}

fn ladder(mode: Mode) -> Ladder {
    let tree = MemoryTree::new();
    ladder_over(
        mode,
        Storage::new(MemoryBackend::new(), tree.clone(), "run-1", "default"),
        tree,
    )
}

/// A ladder over `storage` (whose files are `tree`).
fn ladder_over(mode: Mode, storage: Storage, tree: Rc<MemoryTree>) -> Ladder {
    let mut registry = Registry::new();
    builtin::add_storage(&mut registry, &storage);
    assert!(registry.warnings().is_empty(), "{:?}", registry.warnings());
    let settings = GateSettings {
        mode,
        ..GateSettings::default()
    };
    let gate = Gate::headless("storage test", settings).unwrap();
    let dispatcher = Dispatcher::new(
        Rc::new(registry),
        Some(gate),
        SecretScope::new(),
        RunLimits::default(),
        "storage test",
    );
    Ladder {
        dispatcher,
        storage,
        tree,
        n_calls: Cell::new(0),
    }
}

impl Ladder {
    fn call(&self, tool: &str, args: Value) -> ToolReply {
        self.n_calls.set(self.n_calls.get() + 1);
        let held: HeldSignal = Rc::new(|_| {});
        block_on(self.dispatcher.call(
            CallRequest {
                call_number: self.n_calls.get(),
                tool: tool.into(),
                args,
            },
            held,
        ))
    }

    fn ok(&self, tool: &str, args: Value) -> Value {
        self.call(tool, args.clone())
            .unwrap_or_else(|failure| panic!("{tool} {args}: {failure:?}"))
    }

    fn exists(&self, path: &str) -> bool {
        let path = WorkspacePath::parse(path).unwrap();
        block_on(self.tree.stat(&path)).unwrap().exists
    }
}

/// What a step of a table expects.
enum Expect {
    /// A reply holding this value (objects may hold more keys; arrays match
    /// item by item, and may not be longer).
    Holds(Value),
    /// A failure with this code whose message holds this text.
    Fails(&'static str, &'static str),
}

use Expect::{Fails, Holds};

/// Whether `value` holds everything `expected` says.
fn holds(value: &Value, expected: &Value) -> bool {
    match (value, expected) {
        (Value::Object(got), Value::Object(want)) => want
            .iter()
            .all(|(key, want)| got.get(key).is_some_and(|got| holds(got, want))),
        (Value::Array(got), Value::Array(want)) => {
            got.len() == want.len() && got.iter().zip(want).all(|(got, want)| holds(got, want))
        }
        (got, want) => got == want,
    }
}

/// Runs `steps` in order on one ladder; answers every mismatch.
fn run_steps(ladder: &Ladder, steps: &[(&str, Value, Expect)]) -> Vec<String> {
    let mut problems = Vec::new();
    for (tool, args, expect) in steps {
        let reply = ladder.call(tool, args.clone());
        let fine = match (&reply, expect) {
            (Ok(value), Holds(want)) => holds(value, want),
            (Err(failure), Fails(code, text)) => {
                failure.code == *code
                    && failure.message.contains(text)
                    && failure.outcome == CallOutcome::Error
            }
            _ => false,
        };
        if !fine {
            problems.push(format!("{tool} {args}: got {reply:?}"));
        }
    }
    problems
}

#[test]
fn run_memory_lists_metadata_reads_by_key_and_publishes_only_under_shared() {
    let ladder = ladder(Mode::Auto);
    block_on(ladder.storage.run.set(
        "step:fetch",
        json!([1, 2, 3]),
        kiln_store::run::Describe::default(),
    ))
    .unwrap();
    let steps = [
        (
            "share_result",
            json!({"key": "summary", "value": {"n": 1}, "title": "Sum"}),
            Holds(json!({"key": "shared:summary", "kind": "shared", "title": "Sum", "bytes": 7})),
        ),
        (
            "share_result",
            json!({"key": "shared:again", "value": "x"}),
            Holds(json!({"key": "shared:again"})),
        ),
        // Agents cannot spoof step, task or input results.
        (
            "share_result",
            json!({"key": "step:x", "value": 1}),
            Fails("namespace_refused", "`step:x` is in `step:`"),
        ),
        (
            "share_result",
            json!({"key": "input:customer", "value": 1}),
            Fails("namespace_refused", "`input:customer`"),
        ),
        (
            "share_result",
            json!({"key": "shared:", "value": 1}),
            Fails("invalid", "`shared:` needs a name"),
        ),
        (
            "list_shared",
            json!({}),
            Holds(json!({"entries": [
                {"key": "step:fetch", "kind": "step_result", "bytes": 7},
                {"key": "shared:again"},
                {"key": "shared:summary", "title": "Sum"},
            ]})),
        ),
        (
            "list_shared",
            json!({"namespace": "step"}),
            Holds(json!({"entries": [{"key": "step:fetch"}]})),
        ),
        (
            "list_shared",
            json!({"prefix": "shared:s"}),
            Holds(json!({"entries": [{"key": "shared:summary"}]})),
        ),
        (
            "list_shared",
            json!({"namespace": "secrets"}),
            Fails("invalid_arguments", "list_shared (call 9)"),
        ),
        // Values only when asked for, and a missing key is said so.
        (
            "read_shared",
            json!({"keys": ["shared:summary", "step:missing", "step:fetch"]}),
            Holds(json!({
                "entries": [
                    {"key": "shared:summary", "value": {"n": 1}},
                    {"key": "step:missing", "value": null},
                    {"key": "step:fetch", "value": [1, 2, 3]},
                ],
                "missing": ["step:missing"],
            })),
        ),
        (
            "read_shared",
            json!({"keys": ["summary"]}),
            Fails("invalid", "run memory key `summary` has no namespace"),
        ),
        (
            "read_shared",
            json!({"keys": []}),
            Fails("invalid_arguments", "read_shared"),
        ),
    ];
    let problems = run_steps(&ladder, &steps);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // A value as JSON for the missing key, not an absent field.
    let read = ladder.ok("read_shared", json!({"keys": ["task:t"]}));
    assert_eq!(read["entries"][0], json!({"key": "task:t", "value": null}));
}

#[test]
fn durable_memory_saves_ranks_and_marks_through_the_ladder() {
    let ladder = ladder(Mode::Auto);
    let save = |text: &str| ladder.ok("save_memory", json!({"text": text}));
    let tests = save("Run the wasm tests with cargo xtask test");
    let chromium = save("The wasm tests need chromium and chromedriver installed");
    save("Lunch is at noon");
    // Another agent's memory, as its own runs would have kept it.
    let elsewhere = serde_json::to_value(
        block_on(
            ladder
                .storage
                .memory
                .save("other", "chromium lives in /usr/bin for the other agent"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(tests["agent"].as_str(), Some("default"));
    let ids = |reply: &Value| -> Vec<String> {
        reply["memories"]
            .as_array()
            .unwrap()
            .iter()
            .map(|memory| memory["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let id = |memory: &Value| memory["id"].as_str().unwrap().to_owned();

    // Both words beat one; the other agent's memory and the unrelated one stay out.
    let hits = ladder.ok("query_memory", json!({"query": "wasm chromium"}));
    assert_eq!(ids(&hits), [id(&chromium), id(&tests)]);
    assert!(hits["memories"][0]["score"].as_f64().unwrap() > 0.0);
    let hits = ladder.ok(
        "query_memory",
        json!({"query": "wasm chromium", "limit": 1}),
    );
    assert_eq!(ids(&hits), [id(&chromium)]);
    // A run reaches only its own agent's memories (issue 15 #21): naming
    // another agent, or marking its memory, is refused and changes nothing.
    let refused = [
        (
            "query_memory",
            json!({"query": "chromium", "agent": "other"}),
        ),
        ("save_memory", json!({"text": "planted", "agent": "other"})),
        ("save_memory", json!({"text": "x", "agent": "a\u{1}b"})),
        ("mark_memory_outdated", json!({"memory_id": id(&elsewhere)})),
        ("mark_memory_helpful", json!({"memory_id": id(&elsewhere)})),
    ];
    for (tool, args) in refused {
        let failure = ladder.call(tool, args.clone()).unwrap_err();
        assert_eq!(failure.code, "agent_not_granted", "{tool} {args}");
        assert_eq!(failure.outcome, CallOutcome::Refused, "{tool} {args}");
        assert!(!failure.message.contains('\u{1}'), "{}", failure.message);
        assert!(
            failure
                .message
                .contains("only the memories of its own agent (`default`)"),
            "{tool}: {}",
            failure.message
        );
    }
    let kept = block_on(ladder.storage.memory.get(&id(&elsewhere))).unwrap();
    assert_eq!((kept.helpful, kept.outdated), (0, false));
    assert_eq!(
        block_on(ladder.storage.memory.query("planted", None, 10))
            .unwrap()
            .len(),
        0
    );
    // Its own agent named is the same as none.
    let hits = ladder.ok(
        "query_memory",
        json!({"query": "chromium", "agent": "default"}),
    );
    assert_eq!(ids(&hits), [id(&chromium)]);

    // The reference's fold: a bare id, or `{id}`, lands on `memory_id`.
    let marked = ladder.ok("mark_memory_helpful", json!({"id": id(&tests)}));
    assert_eq!(marked["helpful"], 1);
    let marked = ladder.ok("mark_memory_helpful", json!(id(&tests)));
    assert_eq!(marked["helpful"], 2);
    let marked = ladder.ok("mark_memory_outdated", json!({"memory_id": id(&chromium)}));
    assert_eq!(marked["outdated"], true);
    // Outdated after every current memory, whatever its score.
    let hits = ladder.ok("query_memory", json!({"query": "wasm chromium"}));
    assert_eq!(ids(&hits), [id(&tests), id(&chromium)]);

    let steps = [
        (
            "save_memory",
            json!({"text": "   "}),
            Fails("invalid", "a memory's text is empty"),
        ),
        (
            "query_memory",
            json!({"query": "!!! ???"}),
            Fails("invalid", "the query `!!! ???` has no words"),
        ),
        (
            "query_memory",
            json!({"query": "wasm", "limit": 51}),
            Fails("invalid_arguments", "query_memory"),
        ),
        (
            "mark_memory_helpful",
            json!({"memory_id": "m-nope"}),
            Fails("not_found", "memory `m-nope` does not exist"),
        ),
        (
            "mark_memory_outdated",
            json!({"id": "m-gone"}),
            Fails("not_found", "memory `m-gone` does not exist"),
        ),
    ];
    let problems = run_steps(&ladder, &steps);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn search_history_finds_jobs_and_messages() {
    let ladder = ladder(Mode::Auto);
    let history = &ladder.storage.history;
    let job = block_on(history.start_job(JobStart {
        kind: "program".into(),
        agent: "default".into(),
        title: "quarterly report".into(),
        input: "return await tools.sum_sales()".into(),
        ..JobStart::default()
    }))
    .unwrap();
    block_on(history.finish_job(&job.id, "ok", "sales were 42")).unwrap();
    let threads = history.conversations();
    let thread = block_on(threads.create("planning", "helper")).unwrap();
    block_on(threads.append(
        &thread.id,
        kiln_store::threads::Draft::user("when is the quarterly review?"),
    ))
    .unwrap();

    let steps = [
        (
            "search_history",
            json!({"query": "quarterly"}),
            Holds(json!({"hits": [{}, {}]})),
        ),
        (
            "search_history",
            json!({"query": "sales", "limit": 5}),
            Holds(json!({"hits": [{"kind": "job", "id": job.id, "title": "quarterly report"}]})),
        ),
        (
            "search_history",
            json!({"query": "review"}),
            Holds(
                json!({"hits": [{"kind": "message", "id": thread.id, "agent": "helper", "excerpt": "when is the quarterly review?"}]}),
            ),
        ),
        (
            "search_history",
            json!({"query": "absent"}),
            Holds(json!({"hits": []})),
        ),
        (
            "search_history",
            json!({"query": "--"}),
            Fails("invalid", "the query `--` has no words"),
        ),
        (
            "search_history",
            json!({"query": "x", "limit": 0}),
            Fails("invalid_arguments", "search_history"),
        ),
    ];
    let problems = run_steps(&ladder, &steps);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn files_are_read_written_edited_listed_searched_and_removed() {
    let ladder = ladder(Mode::Auto);
    let steps = [
        (
            "file_write",
            json!({"path": "notes/a.txt", "content": "hello\nworld\nworld\n"}),
            Holds(
                json!({"path": "notes/a.txt", "exists": true, "is_file": true, "is_dir": false, "size": 18}),
            ),
        ),
        (
            "file_read",
            json!({"path": "./notes//a.txt"}),
            Holds(
                json!({"path": "notes/a.txt", "content": "hello\nworld\nworld\n", "size": 18, "encoding": "utf8"}),
            ),
        ),
        // A lone string is the only required string field.
        (
            "file_read",
            json!("notes/a.txt"),
            Holds(json!({"size": 18})),
        ),
        (
            "file_read",
            json!({"path": "notes/missing.txt"}),
            Fails("not_found", "file `notes/missing.txt` does not exist"),
        ),
        (
            "file_read",
            json!({"path": "notes"}),
            Fails("invalid", "`notes` is a folder, not a file"),
        ),
        // Ambiguity is refused, naming the count; nothing is written.
        (
            "file_edit",
            json!({"path": "notes/a.txt", "old_text": "world", "new_text": "there"}),
            Fails("invalid", "contains the text to replace 2 times"),
        ),
        (
            "file_edit",
            json!({"path": "notes/a.txt", "old_text": "hello", "new_text": "hi"}),
            Holds(json!({"path": "notes/a.txt", "replaced": 1})),
        ),
        (
            "file_edit",
            json!({"path": "notes/a.txt", "old_text": "world", "new_text": "there", "replace_all": true}),
            Holds(json!({"replaced": 2})),
        ),
        (
            "file_read",
            json!({"path": "notes/a.txt"}),
            Holds(json!({"content": "hi\nthere\nthere\n"})),
        ),
        (
            "file_edit",
            json!({"path": "notes/a.txt", "old_text": "absent", "new_text": "x"}),
            Fails("invalid", "does not contain the text to replace"),
        ),
        (
            "file_edit",
            json!({"path": "notes/a.txt", "old_text": "", "new_text": "x"}),
            Fails("invalid_arguments", "file_edit"),
        ),
        (
            "file_mkdir",
            json!({"path": "empty/deeper"}),
            Holds(json!({"path": "empty/deeper", "exists": true, "is_dir": true})),
        ),
        (
            "file_mkdir",
            json!({"path": "notes/a.txt/sub"}),
            Fails("invalid", "`notes/a.txt` is a file, not a folder"),
        ),
        (
            "file_list",
            json!({}),
            Holds(json!({"path": "", "entries": [
                {"name": "empty", "path": "empty", "is_dir": true},
                {"name": "notes", "path": "notes", "is_dir": true},
            ]})),
        ),
        (
            "file_list",
            json!({"path": "notes"}),
            Holds(
                json!({"path": "notes", "entries": [{"name": "a.txt", "path": "notes/a.txt", "is_dir": false, "size": 15}]}),
            ),
        ),
        (
            "file_list",
            json!({"path": "nowhere"}),
            Fails("not_found", "folder `nowhere` does not exist"),
        ),
        (
            "file_search",
            json!({"pattern": "THERE"}),
            Holds(json!({"truncated": false, "matches": [
                {"path": "notes/a.txt", "line": 2, "text": "there"},
                {"path": "notes/a.txt", "line": 3, "text": "there"},
            ]})),
        ),
        (
            "file_search",
            json!({"pattern": "there", "path": "empty"}),
            Holds(json!({"matches": []})),
        ),
        (
            "file_search",
            json!({"pattern": "x", "path": "/etc"}),
            Fails("path_refused", "path `/etc` is absolute"),
        ),
        (
            "file_stat",
            json!({"path": "notes/a.txt"}),
            Holds(json!({"exists": true, "is_file": true, "size": 15})),
        ),
        // A missing path is an answer, not an error.
        (
            "file_stat",
            json!({"path": "notes/b.txt"}),
            Holds(
                json!({"path": "notes/b.txt", "exists": false, "is_file": false, "is_dir": false, "size": 0, "modified_ms": null}),
            ),
        ),
        (
            "file_stat",
            json!({"path": "C:/Windows"}),
            Fails("path_refused", "path `C:/Windows` names a drive"),
        ),
        (
            "file_remove",
            json!({"path": "empty"}),
            Fails("invalid", "folder `empty` is not empty"),
        ),
        (
            "file_remove",
            json!({"path": "empty/deeper"}),
            Holds(json!({"path": "empty/deeper", "removed": true})),
        ),
        (
            "file_remove",
            json!({"path": "empty"}),
            Holds(json!({"removed": true})),
        ),
        (
            "file_remove",
            json!({"path": "empty"}),
            Fails("not_found", "file `empty` does not exist"),
        ),
        (
            "file_remove",
            json!({"path": ""}),
            Fails("invalid", "the workspace root cannot be removed"),
        ),
        (
            "file_write",
            json!({"path": "notes", "content": "x"}),
            Fails("invalid", "`notes` is a folder, not a file"),
        ),
    ];
    let problems = run_steps(&ladder, &steps);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn bytes_travel_as_base64_and_text_reads_refuse_what_is_not_utf8() {
    let ladder = ladder(Mode::Auto);
    let steps = [
        (
            "file_write",
            json!({"path": "blob.bin", "content": "/wAB", "encoding": "base64"}),
            Holds(json!({"size": 3})),
        ),
        (
            "file_read",
            json!({"path": "blob.bin"}),
            Fails(
                "not_text",
                "`blob.bin` is not UTF-8 text (byte 0 is not)\nhint: read it with `encoding: \"base64\"`",
            ),
        ),
        (
            "file_read",
            json!({"path": "blob.bin", "encoding": "base64"}),
            Holds(json!({"content": "/wAB", "size": 3, "encoding": "base64"})),
        ),
        // A program's Uint8Array arrives as `{"$bytes": base64}`.
        (
            "file_write",
            json!({"path": "u8.bin", "content": {"$bytes": "aGk="}}),
            Holds(json!({"size": 2})),
        ),
        (
            "file_read",
            json!({"path": "u8.bin"}),
            Holds(json!({"content": "hi"})),
        ),
        (
            "file_write",
            json!({"path": "bad.bin", "content": "not base64!", "encoding": "base64"}),
            Fails("invalid_arguments", "file_write: `content` is not base64"),
        ),
        (
            "file_read",
            json!({"path": "u8.bin", "encoding": "latin1"}),
            Fails("invalid_arguments", "file_read"),
        ),
    ];
    let problems = run_steps(&ladder, &steps);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(!ladder.exists("bad.bin"));
}

#[test]
fn a_store_error_reaches_the_model_with_its_hint_on_a_line_of_its_own() {
    let failure = kiln_capabilities::storage::store_failure(StoreError::Conflict {
        table: Table::Memories,
        key: "m-1".to_owned(),
        expected: "1".to_owned(),
        found: "2".to_owned(),
    });
    assert_eq!(failure.code, "conflict");
    assert_eq!(
        failure.message,
        "`m-1` in memories was changed elsewhere (expected version 1, found 2); nothing was written\nhint: reload it and apply the change again"
    );
    assert_eq!(failure.outcome, CallOutcome::Error);
}

#[test]
fn content_past_the_file_bound_is_refused_naming_its_size() {
    let ladder = ladder(Mode::Auto);
    let big = "a".repeat(MAX_FILE_BYTES + 1);
    let failure = ladder
        .call("file_write", json!({"path": "big.txt", "content": big}))
        .unwrap_err();
    assert_eq!(failure.code, "file_too_large");
    assert!(
        failure.message.contains(&format!(
            "`big.txt` was not written: its content would be {} bytes",
            MAX_FILE_BYTES + 1
        )),
        "{}",
        failure.message
    );
    assert!(!ladder.exists("big.txt"));

    // An edit that would grow a file past the bound is refused before writing.
    let half = "b".repeat(MAX_FILE_BYTES / 2 + 1);
    ladder.ok("file_write", json!({"path": "half.txt", "content": "x x"}));
    let failure = ladder
        .call(
            "file_edit",
            json!({"path": "half.txt", "old_text": "x", "new_text": half, "replace_all": true}),
        )
        .unwrap_err();
    assert_eq!(failure.code, "file_too_large");
    let read = ladder.ok("file_read", json!({"path": "half.txt"}));
    assert_eq!(read["content"], "x x");

    // A growth past 4 GiB (which a 32-bit size once wrapped around, on wasm32)
    // is refused naming its true size.
    ladder.ok(
        "file_write",
        json!({"path": "many.txt", "content": "a".repeat(1 << 20)}),
    );
    let failure = ladder
        .call(
            "file_edit",
            json!({"path": "many.txt", "old_text": "a", "new_text": "b".repeat(4097), "replace_all": true}),
        )
        .unwrap_err();
    assert_eq!(failure.code, "file_too_large");
    assert!(
        failure
            .message
            .contains(&format!("would be {} bytes", (1_u64 << 20) * 4097)),
        "{}",
        failure.message
    );
}

#[test]
fn paths_that_could_leave_the_workspace_are_refused_by_name_and_nothing_is_written() {
    let ladder = ladder(Mode::Auto);
    let cases = [
        ("../x", "contains `..`"),
        ("/etc/passwd", "is absolute"),
        ("a/../../b", "contains `..`"),
        ("C:\\x", "names a drive"),
        ("a\\..\\b", "contains `\\`"),
    ];
    for (path, why) in cases {
        for (tool, args) in [
            ("file_write", json!({"path": path, "content": "owned"})),
            ("file_mkdir", json!({"path": path})),
            ("file_read", json!({"path": path})),
            (
                "file_edit",
                json!({"path": path, "old_text": "a", "new_text": "b"}),
            ),
        ] {
            let failure = ladder.call(tool, args).unwrap_err();
            assert_eq!(failure.code, "path_refused", "{tool} {path}: {failure:?}");
            assert!(
                failure.message.contains(&format!("path `{path}` {why}")),
                "{tool} {path}: {}",
                failure.message
            );
        }
    }
    let root = ladder.ok("file_list", json!({}));
    assert_eq!(root["entries"], json!([]));
    assert!(!ladder.exists("x") && !ladder.exists("b") && !ladder.exists("etc"));
}

#[test]
fn plan_mode_refuses_writes_at_the_gate_and_lets_reads_through() {
    let ladder = ladder(Mode::Plan);
    block_on(
        ladder
            .tree
            .write(&WorkspacePath::parse("a.txt").unwrap(), b"kept".to_vec()),
    )
    .unwrap();
    for (tool, args) in [
        ("file_write", json!({"path": "a.txt", "content": "changed"})),
        (
            "file_edit",
            json!({"path": "a.txt", "old_text": "kept", "new_text": "x"}),
        ),
        ("file_mkdir", json!({"path": "d"})),
        ("file_remove", json!({"path": "a.txt"})),
        ("share_result", json!({"key": "k", "value": 1})),
        ("save_memory", json!({"text": "a fact"})),
        ("mark_memory_helpful", json!({"memory_id": "m-1"})),
        ("mark_memory_outdated", json!({"memory_id": "m-1"})),
    ] {
        let failure = ladder.call(tool, args).unwrap_err();
        assert_eq!(
            (failure.code.as_str(), failure.outcome),
            ("refused", CallOutcome::Refused),
            "{tool}"
        );
        assert!(
            failure.message.contains("plan mode runs only read calls"),
            "{}",
            failure.message
        );
    }
    let read = ladder.ok("file_read", json!({"path": "a.txt"}));
    assert_eq!(read["content"], "kept");
    for (tool, args) in [
        ("file_list", json!({})),
        ("file_stat", json!({"path": "d"})),
        ("file_search", json!({"pattern": "kept"})),
        ("list_shared", json!({})),
        ("read_shared", json!({"keys": ["shared:k"]})),
        ("query_memory", json!({"query": "fact"})),
        ("search_history", json!({"query": "fact"})),
    ] {
        ladder.ok(tool, args);
    }
    assert!(!ladder.exists("d"));
}

#[test]
fn every_storage_and_skill_spec_is_builtin_closed_and_categorised_by_what_it_does() {
    let writes = [
        "create_skill",
        "update_skill",
        "delete_skill",
        "share_result",
        "save_memory",
        "mark_memory_helpful",
        "mark_memory_outdated",
        "file_write",
        "file_edit",
        "file_mkdir",
        "file_remove",
    ];
    let specs = builtin::specs();
    let storage: Vec<_> = specs
        .iter()
        .filter(|spec| spec.name != "http_request")
        .collect();
    assert_eq!(
        storage.len(),
        21,
        "16 storage capabilities and 5 skill ones"
    );
    for spec in storage {
        let expected = if writes.contains(&spec.name.as_str()) {
            kiln_capabilities::Category::Write
        } else {
            kiln_capabilities::Category::Read
        };
        assert_eq!(spec.category, expected, "{}", spec.name);
        assert_eq!(spec.source, kiln_capabilities::Source::Builtin);
        assert_eq!(
            spec.input_schema["additionalProperties"], false,
            "{}",
            spec.name
        );
        assert_eq!(spec.input_schema["type"], "object", "{}", spec.name);
    }
}

/// The host may grant a run another agent's memories; then it reaches them.
#[test]
fn a_host_may_grant_a_run_another_agents_memories() {
    let tree = MemoryTree::new();
    let mut storage = Storage::new(MemoryBackend::new(), tree.clone(), "run-1", "default");
    storage.granted_agents = vec!["helper".into()];
    let ladder = ladder_over(Mode::Auto, storage, tree);
    let kept = ladder.ok(
        "save_memory",
        json!({"text": "the helper keeps notes here", "agent": "helper"}),
    );
    assert_eq!(kept["agent"], "helper");
    let hits = ladder.ok("query_memory", json!({"query": "notes", "agent": "helper"}));
    assert_eq!(hits["memories"][0]["id"], kept["id"]);
    let marked = ladder.ok("mark_memory_helpful", json!({"memory_id": kept["id"]}));
    assert_eq!(marked["helpful"], 1);
    let failure = ladder
        .call(
            "query_memory",
            json!({"query": "notes", "agent": "stranger"}),
        )
        .unwrap_err();
    assert!(
        failure.message.contains("(`default`) and of helper"),
        "{}",
        failure.message
    );
}

/// file_search reads within a budget of its own, per call and per run, and
/// says where it stopped (issue 15 #7).
#[test]
fn file_search_reads_within_its_budgets_and_says_where_it_stopped() {
    let tree = MemoryTree::new();
    let storage = Storage::new(MemoryBackend::new(), tree.clone(), "run-1", "default");
    let budget = storage.search_budget.clone();
    let ladder = ladder_over(Mode::Auto, storage, tree);
    for name in ["a", "b", "c"] {
        ladder.ok(
            "file_write",
            json!({"path": format!("{name}.txt"), "content": format!("needle in {name}\n")}),
        );
    }
    let all = ladder.ok("file_search", json!({"pattern": "needle"}));
    assert_eq!(all["matches"].as_array().unwrap().len(), 3);
    assert_eq!(all["truncated"], false);
    // Room for one more file of this run's budget: the search stops before the next.
    budget.set(15);
    let cut = ladder.ok("file_search", json!({"pattern": "needle"}));
    assert_eq!(cut["matches"].as_array().unwrap().len(), 1);
    assert_eq!(cut["truncated"], true);
    assert!(
        cut["note"]
            .as_str()
            .unwrap()
            .contains("this run's file_search budget of 256 MiB"),
        "{cut}"
    );
    budget.set(0);
    let failure = ladder
        .call("file_search", json!({"pattern": "needle"}))
        .unwrap_err();
    assert_eq!(failure.code, "search_budget_exhausted");
}

#[test]
fn skills_are_listed_loaded_written_and_the_shipped_ones_refused() {
    let mut registry = Registry::new();
    let skills = Rc::new(kiln_store::skills::Skills::new(Some(
        kiln_store::config::Config::new(MemoryBackend::new()),
    )));
    kiln_capabilities::skill_tools::add_skill_tools(&mut registry, &skills, true);
    let gate = Gate::headless(
        "skills test",
        GateSettings {
            mode: Mode::Auto,
            ..GateSettings::default()
        },
    )
    .unwrap();
    let tree = MemoryTree::new();
    let ladder = Ladder {
        dispatcher: Dispatcher::new(
            Rc::new(registry),
            Some(gate),
            SecretScope::new(),
            RunLimits::default(),
            "skills test",
        ),
        storage: Storage::new(MemoryBackend::new(), tree.clone(), "run-1", "default"),
        tree,
        n_calls: Cell::new(0),
    };
    let problems = run_steps(
        &ladder,
        &[
            (
                "list_skills",
                json!({"query": "web"}),
                Holds(
                    json!([{"name": "web-research", "system": true, "required_tools": ["http_request"]}]),
                ),
            ),
            (
                "load_skill",
                json!({"name": "web-research"}),
                Holds(json!({"name": "web-research", "system": true})),
            ),
            (
                "load_skill",
                json!({"name": "nope"}),
                Fails(
                    "not_found",
                    "there is no skill `nope`; the skills are `big-jobs`",
                ),
            ),
            (
                "create_skill",
                json!({"name": "packing", "description": "Pack for a trip.", "body": "Roll."}),
                Holds(json!({"name": "packing", "version": 1})),
            ),
            (
                "create_skill",
                json!({"name": "tidy-data", "description": "Mine.", "body": "x"}),
                Fails(
                    "invalid",
                    "`tidy-data` is a system skill that ships with Kiln",
                ),
            ),
            (
                "create_skill",
                json!({"name": "Bad Name", "description": "x", "body": "x"}),
                Fails("invalid", "skill name `Bad Name`"),
            ),
            (
                "update_skill",
                json!({"name": "packing", "rename": "packing-list", "body": "Roll, never fold."}),
                Holds(json!({"name": "packing-list"})),
            ),
            (
                "update_skill",
                json!({"name": "packing-list", "rename": "big-jobs"}),
                Fails("invalid", "`big-jobs` is a system skill"),
            ),
            (
                "load_skill",
                json!({"name": "packing-list"}),
                Holds(
                    json!({"body": "Roll, never fold.", "system": false, "description": "Pack for a trip."}),
                ),
            ),
            (
                "delete_skill",
                json!({"name": "web-research"}),
                Fails("invalid", "`web-research` is a system skill"),
            ),
            (
                "delete_skill",
                json!({"name": "packing-list"}),
                Holds(json!({"deleted": "packing-list"})),
            ),
            ("list_skills", json!({"query": "trip"}), Holds(json!([]))),
        ],
    );
    assert!(problems.is_empty(), "{problems:#?}");
}

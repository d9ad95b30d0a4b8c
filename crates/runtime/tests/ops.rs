//! The storage operations pages and the app name, over the in-memory store:
//! each verb's answer, and a bad request refused by name.

use futures::executor::block_on;
use kiln_run::Workspace;
use kiln_runtime::{OpError, store_op};
use kiln_store::native::{MemoryBackend, MemoryTree};
use serde_json::{Value, json};

fn workspace() -> Workspace {
    Workspace {
        backend: MemoryBackend::new(),
        files: MemoryTree::new(),
        owners: std::rc::Rc::new(kiln_store::owners::Solo::new()),
    }
}

fn op(workspace: &Workspace, op: &str, args: Value) -> Result<Value, OpError> {
    block_on(store_op(workspace, op, &args))
}

#[test]
fn each_verb_answers_its_json() {
    let workspace = workspace();
    let saved = op(
        &workspace,
        "memory.save",
        json!({"text": "the sky is blue", "agent": "a"}),
    )
    .expect("saved");
    let id = saved["id"].as_str().expect("an id").to_owned();
    let hits = op(&workspace, "memory.query", json!({"query": "sky"})).expect("queried");
    assert_eq!(hits.as_array().map(Vec::len), Some(1), "{hits}");
    let listed = op(&workspace, "memory.list", json!({"agent": "a"})).expect("listed");
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    op(
        &workspace,
        "memory.mark",
        json!({"id": id, "mark": "helpful"}),
    )
    .expect("marked");

    op(
        &workspace,
        "files.write",
        json!({"path": "notes/a.txt", "text": "hello"}),
    )
    .expect("written");
    op(
        &workspace,
        "files.write",
        json!({"path": "b.bin", "base64": "AP8="}),
    )
    .expect("written");
    assert_eq!(
        op(&workspace, "files.read", json!({"path": "notes/a.txt"})).expect("read"),
        json!({"text": "hello"})
    );
    assert_eq!(
        op(&workspace, "files.read", json!({"path": "b.bin"})).expect("read"),
        json!({"base64": "AP8="})
    );
    let root = op(&workspace, "files.list", Value::Null).expect("listed");
    let names: Vec<&str> = root
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|entry| entry["name"].as_str())
        .collect();
    assert_eq!(names, ["notes", "b.bin"], "folders first: {root}");
    op(&workspace, "files.remove", json!({"path": "b.bin"})).expect("removed");

    assert_eq!(
        op(&workspace, "run.list", json!({})).expect("no runs"),
        json!({"run_id": null, "entries": []})
    );
    let config = op(&workspace, "config.get", json!({})).expect("config");
    assert!(config["settings"].is_object(), "{config}");
    let exported = op(&workspace, "export", json!({})).expect("exported");
    let other = self::workspace();
    op(&other, "import", exported).expect("imported");
    let moved = op(&other, "memory.list", json!({})).expect("listed");
    assert_eq!(moved.as_array().map(Vec::len), Some(1), "{moved}");
}

#[test]
fn a_bad_request_is_refused_by_name() {
    let workspace = workspace();
    let cases = [
        (
            "memory.fly",
            json!({}),
            "`memory.fly` is not a storage operation",
        ),
        ("memory.save", json!({}), "missing field `text`"),
        (
            "memory.save",
            json!({"text": "x", "colour": 1}),
            "unknown field `colour`",
        ),
        ("memory.mark", json!({"id": "m", "mark": "great"}), "great"),
        ("files.read", json!({"path": "../etc"}), ".."),
        (
            "files.write",
            json!({"path": "a", "text": "x", "base64": "eA=="}),
            "exactly one of",
        ),
        (
            "files.write",
            json!({"path": "a", "base64": "%%"}),
            "`base64` is not base64",
        ),
        ("config.permissions", json!({"mode": "yolo"}), "yolo"),
        (
            "config.permissions",
            json!({"autonomy": {"echo": "maybe"}}),
            "`echo`",
        ),
        (
            "config.network",
            json!({"network": {"reach": "only", "origins": []}}),
            "names no origin",
        ),
        (
            "config.network",
            json!({"network": {"reach": "only", "origins": ["ftp://x"]}}),
            "ftp://x",
        ),
        ("config.select", json!({"provider": 3}), "invalid type"),
        (
            "config.turn_limits",
            json!({"limits": {"max_turns": 0, "max_tokens": 10000, "max_cost_cents": 100}}),
            "a reply's model calls are 1 to 1000, not 0",
        ),
        (
            "config.turn_limits",
            json!({"limits": {"max_turns": 5, "max_tokens": 10, "max_cost_cents": 100}}),
            "a reply's tokens are 1,000 to 100,000,000, not 10",
        ),
        (
            "config.turn_limits",
            json!({"limits": {"max_turns": 5, "max_tokens": 10000, "max_cost_cents": 100000000}}),
            "a reply's spend is $0.00 to $1,000.00",
        ),
        (
            "config.turn_limits",
            json!({"limits": {"max_turns": 5, "max_tokens": 10000, "max_usd": 1}}),
            "unknown field `max_usd`",
        ),
        (
            "threads.create",
            json!({"agent": "a"}),
            "missing field `first_message`",
        ),
    ];
    for (verb, args, named) in cases {
        match op(&workspace, verb, args.clone()) {
            Err(OpError::BadRequest(message)) => {
                assert!(message.contains(named), "{verb} {args}: {message}");
            }
            other => panic!("{verb} {args}: expected a bad request, got {other:?}"),
        }
    }
    // A missing file is the store's own error, with its code.
    match op(&workspace, "files.read", json!({"path": "nowhere.txt"})) {
        Err(OpError::Store(error)) => assert_eq!(error.code(), "not_found", "{error}"),
        other => panic!("expected not_found, got {other:?}"),
    }
}

#[test]
fn a_job_left_running_by_a_runtime_that_ended_is_interrupted_on_open() {
    use kiln_store::history::{History, JobStart};
    let workspace = workspace();
    let history = History::new(workspace.backend.clone());
    let start = |owner: &str| JobStart {
        kind: "program".into(),
        title: "a run".into(),
        owner: owner.into(),
        ..JobStart::default()
    };
    let gone = block_on(history.start_job(start("a tab that closed"))).expect("started");
    let mine = block_on(history.start_job(start(workspace.owners.owner()))).expect("started");
    assert_eq!(block_on(workspace.interrupt_abandoned()).expect("swept"), 1);
    let status = |id: &str| block_on(history.job(id)).expect("read").status;
    assert_eq!(status(&gone.id), "interrupted");
    assert_eq!(
        status(&mine.id),
        "running",
        "this runtime's own job goes on"
    );
}

#[test]
fn the_app_edits_its_configuration_and_never_reads_a_key_back() {
    let workspace = workspace();
    let config = |workspace: &Workspace| op(workspace, "config.get", json!({})).expect("read");
    op(
        &workspace,
        "config.permissions",
        json!({"mode": "auto", "brake": true, "autonomy": {"echo": "block"}}),
    )
    .expect("saved");
    op(&workspace, "config.permissions", json!({"brake": false})).expect("saved");
    // A reply's limits: kept, then back to Kiln's defaults.
    let limits = json!({"max_turns": 8, "max_tokens": 20000, "max_cost_cents": 25});
    op(&workspace, "config.turn_limits", json!({"limits": limits})).expect("saved");
    assert_eq!(config(&workspace)["settings"]["turn_limits"], limits);
    op(&workspace, "config.turn_limits", json!({"limits": null})).expect("saved");
    assert!(config(&workspace)["settings"].get("turn_limits").is_none());
    let read = config(&workspace);
    assert_eq!(read["settings"]["permission_mode"], "auto", "{read}");
    assert_eq!(read["settings"]["brake"], false, "{read}");
    assert_eq!(
        read["agents"][0]["autonomy"],
        json!({"echo": "block"}),
        "{read}"
    );

    op(
        &workspace,
        "config.network",
        json!({"network": {"reach": "only", "origins": ["http://127.0.0.1:9"]}}),
    )
    .expect("saved");
    assert_eq!(
        config(&workspace)["settings"]["network"],
        json!({"reach": "only", "origins": ["http://127.0.0.1:9"]})
    );

    let put = json!({"name": "work", "kind": "openai", "base_url": "http://127.0.0.1:9/v1",
        "model": "m", "key": "sk-secret"});
    op(&workspace, "config.provider.put", put).expect("saved");
    let read = config(&workspace);
    assert!(
        !read.to_string().contains("sk-secret"),
        "the key came back: {read}"
    );
    assert_eq!(read["providers"][0]["has_key"], true, "{read}");
    assert_eq!(
        read["settings"]["selected_provider"], "work",
        "chosen: {read}"
    );
    let version = read["providers"][0]["version"].as_u64().expect("a version");

    // Renamed without a key: the key stays, the old record goes.
    op(
        &workspace,
        "config.provider.put",
        json!({"name": "home", "kind": "openai", "base_url": "http://127.0.0.1:9/v1",
            "version": version, "replacing": "work"}),
    )
    .expect("renamed");
    let read = config(&workspace);
    assert_eq!(
        read["providers"].as_array().map(Vec::len),
        Some(1),
        "{read}"
    );
    assert_eq!(read["providers"][0]["name"], "home", "{read}");
    assert_eq!(read["providers"][0]["has_key"], true, "{read}");
    let version = read["providers"][0]["version"].as_u64().expect("a version");
    // A stale version is the store's conflict, and nothing is lost.
    match op(
        &workspace,
        "config.provider.remove",
        json!({"name": "home", "version": version + 5}),
    ) {
        Err(OpError::Store(error)) => assert_eq!(error.code(), "conflict", "{error}"),
        other => panic!("expected a conflict, got {other:?}"),
    }
    op(
        &workspace,
        "config.provider.remove",
        json!({"name": "home", "version": version}),
    )
    .expect("removed");
    let read = config(&workspace);
    assert_eq!(read["providers"], json!([]), "{read}");
    assert_eq!(
        read["settings"].get("selected_provider"),
        None,
        "pick cleared: {read}"
    );
}

#[test]
fn a_conversations_thread_is_listed_opened_renamed_pinned_forked_and_deleted_with_undo() {
    let workspace = workspace();
    let thread = op(
        &workspace,
        "threads.create",
        json!({"first_message": "What is the capital of Peru?"}),
    )
    .expect("created");
    let id = thread["id"].as_str().expect("an id").to_owned();
    assert_eq!(thread["title"], "What is the capital of Peru?");
    let opened = op(&workspace, "threads.open", json!({"id": id})).expect("opened");
    assert_eq!(opened["messages"], json!([]), "{opened}");
    let said = op(
        &workspace,
        "threads.append",
        json!({"id": id, "role": "user", "text": "Lima?"}),
    )
    .expect("appended");
    assert_eq!(
        (said["seq"].clone(), said["role"].clone()),
        (json!(1), json!("user"))
    );
    let refused = op(
        &workspace,
        "threads.append",
        json!({"id": id, "role": "robot", "text": "x"}),
    )
    .expect_err("a role checked");
    assert!(refused.to_string().contains("robot"), "{refused}");
    op(&workspace, "threads.truncate", json!({"id": id, "seq": 1})).expect("cut");
    assert_eq!(opened["context"], json!([]), "{opened}");
    let renamed = op(
        &workspace,
        "threads.rename",
        json!({"id": id, "title": "Capitals"}),
    )
    .expect("renamed");
    assert_eq!(
        (renamed["title"].clone(), renamed["titled"].clone()),
        (json!("Capitals"), json!(true))
    );
    op(&workspace, "threads.pin", json!({"id": id, "pinned": true})).expect("pinned");
    let listed = op(&workspace, "threads.list", json!({})).expect("listed");
    assert_eq!(listed[0]["pinned"], true, "{listed}");
    let fork = op(&workspace, "threads.fork", json!({"id": id, "seq": 1})).expect("forked");
    assert_ne!(fork["thread"]["id"], id.as_str(), "{fork}");
    op(&workspace, "threads.delete", json!({"id": id})).expect("deleted");
    let listed = op(&workspace, "threads.list", json!({})).expect("listed");
    assert_eq!(
        listed.as_array().map(Vec::len),
        Some(1),
        "only the fork: {listed}"
    );
    op(&workspace, "threads.restore", json!({"id": id})).expect("restored");
    let listed = op(&workspace, "threads.list", json!({"limit": 5})).expect("listed");
    assert_eq!(listed.as_array().map(Vec::len), Some(2), "{listed}");
    // Bad requests, by name.
    for (verb, args, says) in [
        ("threads.rename", json!({"id": id}), "needs `title`"),
        ("threads.pin", json!({"id": id}), "needs `pinned`"),
        ("threads.truncate", json!({"id": id}), "needs `seq`"),
        (
            "threads.open",
            json!({"id": id, "extra": 1}),
            "unknown field `extra`",
        ),
        ("threads.list", json!({"agent": "a"}), "takes only `limit`"),
    ] {
        let error = op(&workspace, verb, args).expect_err(verb).to_string();
        assert!(error.contains(says), "{verb}: {error}");
    }
    let missing = op(&workspace, "threads.open", json!({"id": "t-nope"})).expect_err("missing");
    assert!(missing.to_string().contains("t-nope"), "{missing}");
}

#[test]
fn delete_everything_leaves_no_record_and_no_file_and_asks_to_be_meant() {
    let workspace = workspace();
    op(
        &workspace,
        "memory.save",
        json!({"text": "the sky is blue"}),
    )
    .expect("saved");
    op(
        &workspace,
        "files.write",
        json!({"path": "a/b/c.txt", "text": "x"}),
    )
    .expect("written");
    op(
        &workspace,
        "files.write",
        json!({"path": "top.txt", "text": "y"}),
    )
    .expect("written");
    op(
        &workspace,
        "threads.create",
        json!({"first_message": "hello"}),
    )
    .expect("created");
    let refused =
        op(&workspace, "workspace.clear", json!({"confirm": "yes"})).expect_err("unmeant");
    assert!(
        refused.to_string().contains("delete everything"),
        "{refused}"
    );
    assert_eq!(
        op(&workspace, "memory.list", json!({}))
            .expect("listed")
            .as_array()
            .map(Vec::len),
        Some(1),
        "nothing deleted when not meant"
    );
    let cleared = op(
        &workspace,
        "workspace.clear",
        json!({"confirm": "delete everything"}),
    )
    .expect("cleared");
    assert_eq!(cleared["files"], 2, "{cleared}");
    assert_eq!(cleared["records"]["memories"], 1, "{cleared}");
    assert_eq!(cleared["records"]["threads"], 1, "{cleared}");
    let doc = op(&workspace, "export", json!({})).expect("exported");
    assert!(
        doc["tables"].as_object().is_none_or(|tables| tables
            .values()
            .all(|rows| rows.as_array().is_none_or(Vec::is_empty))),
        "{doc}"
    );
    assert_eq!(doc["files"], json!([]), "{doc}");
    assert_eq!(
        op(&workspace, "files.list", json!({"path": ""})).expect("listed"),
        json!([])
    );
}

#[test]
fn graphs_are_kept_by_name_checked_before_saving_and_written_at_their_version() {
    let workspace = workspace();
    let node = |id: &str, input: Option<&str>| {
        json!({"id": id, "title": id, "code": "return {out: 1};",
               "inputs": input.map(|ty| vec![json!({"name": "x", "type": ty})]).unwrap_or_default(),
               "outputs": [{"name": "out", "type": "integer"}]})
    };
    let graph = json!({"name": "board", "nodes": [node("a", None), node("b", Some("number"))],
                       "edges": [{"from": "a.out", "to": "b.x"}], "samples": {"a": {}}});
    let saved = op(&workspace, "graphs.put", graph.clone()).unwrap();
    assert_eq!(saved["version"], 1);
    let listed = op(&workspace, "graphs.list", json!({})).unwrap();
    assert_eq!(listed[0]["name"], "board");
    assert_eq!(listed[0]["edges"][0]["to"], "b.x");
    // A stale version is a conflict, and nothing is written.
    let stale = op(&workspace, "graphs.put", graph).unwrap_err();
    assert!(format!("{stale:?}").contains("onflict"), "{stale:?}");
    // A connection whose types do not fit is refused by name.
    let bad = json!({"name": "bad", "nodes": [node("a", None), node("b", Some("string"))],
                     "edges": [{"from": "a.out", "to": "b.x"}]});
    let refused = op(&workspace, "graphs.put", bad).unwrap_err();
    assert!(format!("{refused:?}").contains("a.out"), "{refused:?}");
    op(
        &workspace,
        "graphs.remove",
        json!({"name": "board", "version": 1}),
    )
    .unwrap();
    assert_eq!(op(&workspace, "graphs.list", json!({})).unwrap(), json!([]));
}

//! One program run through `kiln_run::run_program`, natively: the real
//! sandbox in process as the runner, the real ladder, the in-memory store.
//! What every entrance now shares: the whitelist, the mode rule, the history
//! record, the warnings.

#![expect(clippy::unwrap_used, reason = "tests")]

use std::cell::RefCell;
use std::rc::Rc;

use futures::executor::block_on;
use futures::future::LocalBoxFuture;
use kiln_capabilities::gate::{Fixed, Headless, SessionAllow};
use kiln_capabilities::{Answer, ApprovalRequest, Approver, CallContext, Implementation, Permit};
use kiln_run::Environment;
use kiln_run::{People, RunRequest, ToolBridge, Workspace, run_program};
use kiln_store::history::History;
use kiln_store::native::{MemoryBackend, MemoryTree};
use kiln_types::cancel::AbortSignal;
use kiln_types::tool_result::ToolReply;
use serde_json::{Value, json};

mod common;
use common::InProcess;

/// A page tool that answers its arguments and counts its calls.
struct Echo(Rc<RefCell<u32>>);

impl Implementation for Echo {
    fn call(&self, args: Value, _: CallContext, _: Permit) -> LocalBoxFuture<'static, ToolReply> {
        *self.0.borrow_mut() += 1;
        Box::pin(async move { Ok(args) })
    }
}

/// A page tool that throws the run's cancel switch and never answers (the
/// person pressed Stop while it ran).
struct StopsTheRun(AbortSignal);

impl Implementation for StopsTheRun {
    fn call(&self, _: Value, _: CallContext, _: Permit) -> LocalBoxFuture<'static, ToolReply> {
        self.0.abort();
        Box::pin(futures::future::pending())
    }
}

struct Bridge(Rc<RefCell<u32>>, AbortSignal);

impl ToolBridge for Bridge {
    fn implementation(&self, name: &str) -> Option<Rc<dyn Implementation>> {
        match name {
            "orphan" => None,
            "stop" => Some(Rc::new(StopsTheRun(self.1.clone()))),
            _ => Some(Rc::new(Echo(self.0.clone()))),
        }
    }
}

/// A person who denies, counting the questions.
struct Person(Rc<RefCell<u32>>);

impl Approver for Person {
    fn ask(&self, _: ApprovalRequest) -> LocalBoxFuture<'static, Answer> {
        *self.0.borrow_mut() += 1;
        Box::pin(async { Answer::Deny })
    }
}

struct Setup {
    environment: Environment,
    backend: Rc<MemoryBackend>,
    calls: Rc<RefCell<u32>>,
    cancel: AbortSignal,
}

fn setup(approver: Rc<dyn Approver>) -> Setup {
    let backend = MemoryBackend::new();
    let calls = Rc::new(RefCell::new(0));
    let cancel = AbortSignal::new();
    let workspace = Workspace {
        backend: backend.clone(),
        files: MemoryTree::new(),
        owners: Rc::new(kiln_store::owners::Solo::new()),
    };
    Setup {
        environment: Environment {
            entrance: "agent test".into(),
            tools_host: "page".into(),
            http: kiln_http::default_client(),
            people: People::Approver {
                host: "agent test".into(),
                approver,
                session: SessionAllow::default(),
            },
            own_tools: None,
            bridge: Some(Rc::new(Bridge(calls.clone(), cancel.clone()))),
            workspace: Some(Rc::new(Ok(workspace))),
            random: Rc::new(|| [7; 8]),
            on_gate: None,
            on_progress: None,
        },
        backend,
        calls,
        cancel,
    }
}

fn run(setup: &Setup, request: Value) -> kiln_run::ProgramRun {
    let request = RunRequest::from_value(request).unwrap();
    block_on(run_program(
        request,
        &setup.environment,
        &InProcess,
        setup.cancel.clone(),
    ))
    .unwrap()
}

fn value(run: &kiln_run::ProgramRun) -> Value {
    run.result.structured_content["value"].clone()
}

#[test]
fn a_runs_tools_are_exactly_its_whitelist() {
    let headless: Rc<dyn Approver> = Rc::new(Headless::new("agent test"));
    let mut setup = setup(headless);
    let keys = "return Object.keys(tools)";
    let storage = [
        "list_shared",
        "read_shared",
        "share_result",
        "save_memory",
        "query_memory",
        "mark_memory_helpful",
        "mark_memory_outdated",
        "search_history",
        "file_read",
        "file_write",
        "file_edit",
        "file_list",
        "file_search",
        "file_stat",
        "file_mkdir",
        "file_remove",
    ];
    // `Object.keys(tools)` lists the names sorted.
    let listed =
        |run: &kiln_run::ProgramRun| -> Vec<String> { serde_json::from_value(value(run)).unwrap() };
    let sorted = |names: &[&str]| -> Vec<String> {
        let mut names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
        names.sort();
        names
    };
    // No page tools, no network asked for: the workspace's tools only.
    let plain = run(&setup, json!({"code": keys}));
    assert_eq!(listed(&plain), sorted(&storage), "{:?}", plain.result);
    // The page's tools, and the network when asked for by name.
    let asked = run(
        &setup,
        json!({"code": keys, "tools": {"zeta": {}, "alpha": {}}, "builtins": ["http_request"]}),
    );
    let mut expected = vec!["zeta", "alpha", "http_request"];
    expected.extend(storage);
    assert_eq!(listed(&asked), sorted(&expected));
    // `allow_net` asks for the network too.
    let named = run(
        &setup,
        json!({"code": keys, "allow_net": ["http://127.0.0.1:1"]}),
    );
    assert!(listed(&named).contains(&"http_request".to_owned()));
    // Without a workspace, nothing but what was asked for.
    setup.environment.workspace = None;
    let bare = run(&setup, json!({"code": keys, "tools": {"zeta": {}}}));
    assert_eq!(listed(&bare), ["zeta"]);
}

#[test]
fn the_mode_is_default_when_a_person_can_be_asked_else_auto() {
    let asked = Rc::new(RefCell::new(0));
    let code = "return await tools.write_it({n: 1})";
    let tools = json!({"write_it": {"category": "write"}});
    // A person: mode `default`, so a write asks (and this person denies).
    let person = setup(Rc::new(Person(asked.clone())));
    let denied = run(&person, json!({"code": code, "tools": tools}));
    assert!(denied.result.is_error, "{:?}", denied.result);
    assert_eq!(*asked.borrow(), 1);
    assert_eq!(
        *person.calls.borrow(),
        0,
        "a denied call never reaches the tool"
    );
    // Nobody to ask: mode `auto`, the write runs.
    let headless = setup(Rc::new(Headless::new("agent test")));
    let ran = run(&headless, json!({"code": code, "tools": tools}));
    assert_eq!(value(&ran), json!({"n": 1}), "{:?}", ran.result);
    // A fixed answer is nobody either.
    let fixed = setup(Rc::new(Fixed(Answer::Deny)));
    let ran = run(&fixed, json!({"code": code, "tools": tools}));
    assert!(!ran.result.is_error, "{:?}", ran.result);
    // A mode the request names wins: plan refuses the write, asking nobody.
    let planned = run(
        &person,
        json!({"code": code, "tools": tools, "permission": {"mode": "plan"}}),
    );
    assert!(planned.result.is_error);
    assert_eq!(*asked.borrow(), 1, "plan mode asks nobody");
}

#[test]
fn every_run_is_recorded_with_one_title_output_and_status() {
    let setup = setup(Rc::new(Headless::new("agent test")));
    let history = History::new(setup.backend.clone());
    let cases = [
        (
            "/* sums */\n// two numbers\nreturn 1 + 2",
            "return 1 + 2",
            "ok",
        ),
        ("throw new Error('no')", "throw new Error('no')", "error"),
        ("", "(an empty program)", "ok"),
    ];
    for (code, title, status) in cases {
        let ran = run(&setup, json!({"code": code, "agent": "ada"}));
        let job = block_on(history.job(ran.job_id.as_deref().unwrap())).unwrap();
        assert_eq!(job.title, title, "{code:?}");
        assert_eq!(job.status, status, "{code:?}");
        assert_eq!(job.agent, "ada");
        assert_eq!(job.input, code);
        let owners = &setup
            .environment
            .workspace
            .as_ref()
            .unwrap()
            .as_ref()
            .as_ref()
            .unwrap()
            .owners;
        assert_eq!(job.owner, owners.owner(), "the job carries its runtime");
        assert_eq!(
            job.output,
            ran.result.text(),
            "the recorded output is the model's text"
        );
        assert!(ran.record_error.is_none());
    }
}

#[test]
fn inputs_reach_the_run_memory_and_problems_are_warnings() {
    let mut setup = setup(Rc::new(Headless::new("agent test")));
    let ran = run(
        &setup,
        json!({"code": "return await tools.read_shared({keys: ['input:rows']})", "inputs": {"rows": [1, 2]}}),
    );
    assert!(value(&ran).to_string().contains("[1,2]"), "{}", value(&ran));
    // A page tool the page gave no call for, and a store that did not open.
    setup.environment.workspace = Some(Rc::new(Err(kiln_store::StoreError::Unavailable {
        detail: "blocked by the browser".into(),
    })));
    let warned = run(
        &setup,
        json!({"code": "return 1", "tools": {"orphan": {}}, "inputs": {"a": 1}}),
    );
    let codes: Vec<String> = warned.result.structured_content["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|warning| warning["code"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        codes,
        ["tools_unavailable", "storage_unavailable", "keyless"]
    );
    assert!(warned.job_id.is_none());
}

#[test]
fn a_call_key_names_the_run_and_drops_the_keyless_warning() {
    let setup = setup(Rc::new(Headless::new("agent test")));
    let first = run(&setup, json!({"code": "return 1", "key": "k1"}));
    let again = run(&setup, json!({"code": "return 1", "key": "k1"}));
    let other = run(&setup, json!({"code": "return 1", "key": "k2"}));
    let id = |run: &kiln_run::ProgramRun| run.result.structured_content["run_id"].clone();
    assert_eq!(id(&first), id(&again));
    assert_ne!(id(&first), id(&other));
    assert_eq!(first.result.structured_content["keyless"], json!(false));
    let keyless = run(&setup, json!({"code": "return 1"}));
    assert_eq!(id(&keyless), json!("codemode:0707070707070707"));
}

#[test]
fn a_cancelled_run_ends_cancelled_and_is_recorded_so() {
    let setup = setup(Rc::new(Headless::new("agent test")));
    let ran = run(
        &setup,
        json!({"code": "console.log('before'); await tools.stop({}); return 1", "tools": {"stop": {}}}),
    );
    assert!(ran.result.is_error);
    assert_eq!(ran.result.error_code.as_deref(), Some("cancelled"));
    assert_eq!(ran.result.structured_content["status"], "cancelled");
    assert_eq!(
        ran.result.structured_content["termination_reason"],
        "cancelled"
    );
    let history = History::new(setup.backend.clone());
    let job = block_on(history.job(ran.job_id.as_deref().unwrap())).unwrap();
    assert_eq!(job.status, "cancelled");
}

#[test]
fn the_catalog_lists_what_a_run_would_have_and_records_nothing() {
    let headless: Rc<dyn Approver> = Rc::new(Headless::new("agent test"));
    let setup = setup(headless);
    let request = RunRequest::from_value(json!({
        "code": "",
        "tools": {"echo": {"description": "Echoes.", "category": "read"}},
        "builtins": ["http_request"],
    }))
    .unwrap();
    let (specs, warnings) = block_on(kiln_run::catalog(&request, &setup.environment));
    let listed: Vec<(String, String)> = specs
        .iter()
        .map(|spec| (spec.name.clone(), spec.source.module()))
        .collect();
    assert!(
        listed.contains(&("echo".into(), "page".into())),
        "{listed:?}"
    );
    assert!(
        listed.contains(&("http_request".into(), "builtin".into())),
        "{listed:?}"
    );
    assert!(
        listed.contains(&("save_memory".into(), "builtin".into())),
        "{listed:?}"
    );
    assert!(warnings.is_empty(), "{warnings:?}");
    let history = kiln_store::history::History::new(setup.backend.clone());
    assert!(
        block_on(history.jobs(10)).unwrap().is_empty(),
        "no job recorded"
    );
}

//! `workspace` in programs, end to end: the guest's methods, its `tools`
//! functions, a `ToolHost` that walks the real ladder (`Dispatcher::call`,
//! as the CLI's does), the file capabilities, and the store's in-memory tree.
#![cfg(not(target_arch = "wasm32"))]
#![allow(
    clippy::unwrap_used,
    reason = "a test: a panic is a failed test with a line number"
)]

use std::rc::Rc;

use futures::executor::block_on;
use futures::future::LocalBoxFuture;
use kiln_capabilities::{
    Dispatcher, Gate, GateSettings, HeldSignal, Mode, Registry, SecretScope, Storage, builtin,
};
use kiln_sandbox::catalog::Admission;
use kiln_sandbox::clock::PersonSignal;
use kiln_sandbox::run_with_tools;
use kiln_sandbox::tools::{ToolCall, ToolHost, ToolReply};
use kiln_store::files::{FileTree, WorkspacePath};
use kiln_store::native::{MemoryBackend, MemoryTree};
use kiln_types::protocol::CallRequest;
use kiln_types::{RunLimits, RunOutcome, RunReport};
use serde_json::{Value, json};

/// Sends every call up the ladder.
struct Ladder(Dispatcher);

impl ToolHost for Ladder {
    fn call(&self, call: ToolCall, person: PersonSignal) -> LocalBoxFuture<'static, ToolReply> {
        let held: HeldSignal = Rc::new(move |on| person.held(on));
        let request = CallRequest {
            call_number: call.call_number,
            tool: call.tool,
            args: call.args,
        };
        self.0.call(request, held)
    }
}

/// A run's files and what runs programs over them.
struct Setup {
    tree: Rc<MemoryTree>,
    host: Rc<Ladder>,
    catalog: Value,
}

fn setup(mode: Mode) -> Setup {
    let backend = MemoryBackend::new();
    let tree = MemoryTree::new();
    let storage = Storage::new(backend, tree.clone(), "run-1", "default");
    let mut registry = Registry::new();
    builtin::add_storage(&mut registry, &storage);
    let settings = GateSettings {
        mode,
        ..GateSettings::default()
    };
    let gate = Gate::headless("workspace test", settings).unwrap();
    let dispatcher = Dispatcher::new(
        Rc::new(registry),
        Some(gate),
        SecretScope::new(),
        RunLimits::default(),
        "workspace test",
    );
    let catalog = dispatcher.catalog();
    Setup {
        tree,
        host: Rc::new(Ladder(dispatcher)),
        catalog,
    }
}

impl Setup {
    /// Runs `code` with the catalog's entries that `keep` lets through.
    fn run_with(&self, code: &str, limits: &RunLimits, keep: &dyn Fn(&str) -> bool) -> RunReport {
        let catalog: Vec<Value> = self
            .catalog
            .as_array()
            .unwrap()
            .iter()
            .filter(|entry| keep(entry["name"].as_str().unwrap()))
            .cloned()
            .collect();
        let admission = Admission::admit(&Value::Array(catalog), "builtin").unwrap();
        block_on(run_with_tools(
            code,
            limits,
            Rc::new(admission),
            self.host.clone(),
        ))
    }

    fn run(&self, code: &str) -> RunReport {
        self.run_with(code, &RunLimits::default(), &|_| true)
    }

    fn file(&self, path: &str) -> Option<String> {
        let path = WorkspacePath::parse(path).unwrap();
        block_on(self.tree.read(&path))
            .ok()
            .map(|bytes| String::from_utf8(bytes).unwrap())
    }
}

/// The outcome in one line: `completed <json>` or `<kind> <code> <message>`.
fn outcome(report: &RunReport) -> String {
    match &report.outcome {
        RunOutcome::Completed { value } => format!("completed {value}"),
        RunOutcome::Failed(error) => {
            let kind = serde_json::to_value(error.kind).unwrap();
            format!(
                "{} {} {}",
                kind.as_str().unwrap(),
                error.code.as_deref().unwrap_or("-"),
                error.message
            )
        }
    }
}

fn calls(report: &RunReport) -> Vec<String> {
    report
        .calls
        .iter()
        .map(|call| format!("{} {}", call.tool, call.outcome.as_str()))
        .collect()
}

#[test]
fn programs_write_read_list_stat_make_and_remove_files() {
    let setup = setup(Mode::Auto);
    let report = setup.run(
        r#"
        const written = await workspace.write("notes/a.txt", "hello");
        const text = await workspace.read("notes/a.txt");
        await workspace.mkdir("empty/deeper");
        const root = await workspace.list();
        const notes = await workspace.list("notes");
        const stat = await workspace.stat("notes/a.txt");
        const missing = await workspace.stat("notes/b.txt");
        const removed = await workspace.remove("empty/deeper");
        const gone = await workspace.stat("empty/deeper");
        const made = await workspace.mkdir("made");
        return {
            written: [written.exists, written.is_file, written.size, typeof written.modified_ms, written.path],
            text,
            root: root.map((entry) => [entry.name, entry.is_dir, Object.keys(entry).join()]),
            notes: notes.map((entry) => [entry.path, entry.size, typeof entry.modified_ms]),
            stat: [stat.exists, stat.is_file, stat.is_dir, stat.size],
            missing,
            removed: removed === undefined,
            gone: gone.exists,
            made: made === undefined,
        };
        "#,
    );
    assert_eq!(
        outcome(&report),
        format!(
            "completed {}",
            json!({
                "written": [true, true, 5, "number", "notes/a.txt"],
                "text": "hello",
                "root": [["empty", true, "name,path,is_dir,size,modified_ms"], ["notes", true, "name,path,is_dir,size,modified_ms"]],
                "notes": [["notes/a.txt", 5, "number"]],
                "stat": [true, true, false, 5],
                "missing": {"path": "notes/b.txt", "exists": false, "is_file": false, "is_dir": false, "size": 0, "modified_ms": null},
                "removed": true,
                "gone": false,
                "made": true,
            })
        )
    );
    // One tool call per method call, each in the run's summaries.
    assert_eq!(
        calls(&report),
        [
            "file_write ok",
            "file_read ok",
            "file_mkdir ok",
            "file_list ok",
            "file_list ok",
            "file_stat ok",
            "file_stat ok",
            "file_remove ok",
            "file_stat ok",
            "file_mkdir ok",
        ]
    );
    assert_eq!(setup.file("notes/a.txt").as_deref(), Some("hello"));
}

#[test]
fn bytes_from_a_uint8array_are_written_as_bytes() {
    let setup = setup(Mode::Auto);
    let report = setup.run(
        r#"const stat = await workspace.write("hi.bin", new Uint8Array([104, 105]));
        return [stat.size, await workspace.read("hi.bin")]"#,
    );
    assert_eq!(outcome(&report), r#"completed [2,"hi"]"#);
}

#[test]
fn a_refused_path_rejects_with_the_capabilitys_error() {
    let setup = setup(Mode::Auto);
    let cases = [
        (
            r#"try { await workspace.read("../secret") } catch (e) { return [e instanceof Error, e.code, e.message] }"#,
            r#"completed [true,"path_refused","path `../secret` contains `..`; paths cannot leave the workspace"]"#,
        ),
        (
            r#"try { await workspace.stat("a/../../b") } catch (e) { return e.code }"#,
            r#"completed "path_refused""#,
        ),
        // Uncaught, the run fails with the call's code, naming the call.
        (
            r#"await workspace.write("/etc/passwd", "owned")"#,
            "tool path_refused file_write (call 1) failed: path `/etc/passwd` is absolute; paths are relative to the workspace (write `notes/a.txt`, not `/notes/a.txt`)",
        ),
        // Kiln's own names for writes in progress are never listed, so no
        // program may keep a file under one.
        (
            r#"try { await workspace.write(".kiln-tmp-hidden", "unseen") } catch (e) { return e.code }"#,
            r#"completed "path_refused""#,
        ),
        (
            r#"await workspace.read("nope.txt")"#,
            "tool not_found file_read (call 1) failed: file `nope.txt` does not exist",
        ),
        (
            r#"await workspace.remove("")"#,
            "tool invalid file_remove (call 1) failed: the workspace root cannot be removed",
        ),
        // Arguments are checked by the ladder, like any call's.
        (
            "await workspace.read(42)",
            "tool invalid_arguments file_read (call 1) failed: file_read (call 1): argument `/path` must be a string; got an integer",
        ),
    ];
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|(code, expected)| {
            let got = outcome(&setup.run(code));
            (got != *expected).then(|| format!("{code}\n  expected {expected}\n  got      {got}"))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(setup.file("etc/passwd"), None);
    let root = block_on(setup.tree.list(&WorkspacePath::root())).unwrap();
    assert!(root.is_empty(), "{root:?}");
}

#[test]
fn programs_cannot_replace_workspace_or_its_methods() {
    let setup = setup(Mode::Auto);
    let cases = [
        (
            r#"workspace = 1; workspace.read = null; delete workspace.write; globalThis.workspace = 2;
            return [typeof workspace, typeof workspace.read, typeof workspace.write,
                Object.isFrozen(workspace), Object.getPrototypeOf(workspace), Object.keys(workspace),
                Object.isFrozen(workspace.read)]"#,
            r#"completed ["object","function","function",true,null,["read","write","list","stat","mkdir","remove"],true]"#,
        ),
        (
            "\"use strict\"; workspace = 1",
            "script - TypeError: cannot set non-writable property: workspace",
        ),
        (
            "\"use strict\"; workspace.read = null",
            "script - TypeError: cannot set non-writable property: read",
        ),
        (
            "Object.defineProperty(globalThis, 'workspace', {value: 3})",
            "script - TypeError: cannot redefine property: workspace",
        ),
        // Changing the intrinsics after the fact does not reach the methods.
        (
            r#"globalThis.TypeError = function () { return 'forged' }; Object.freeze = () => {};
            await workspace.write("a.txt", "x"); return await workspace.read("a.txt")"#,
            r#"completed "x""#,
        ),
        // The object is made when first read; what the program changed
        // before that does not reach it either.
        (
            "Object.freeze = (o) => o; Array.prototype[Symbol.iterator] = function* () {}; \
             return [Object.isFrozen(workspace), Object.isFrozen(workspace.read), workspace === workspace]",
            "completed [true,true,true]",
        ),
    ];
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|(code, expected)| {
            let got = outcome(&setup.run(code));
            (got != *expected).then(|| format!("{code}\n  expected {expected}\n  got      {got}"))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn without_file_tools_workspace_is_absent_and_with_some_the_rest_say_which_tool() {
    let setup = setup(Mode::Auto);
    let none = |name: &str| !name.starts_with("file_");
    let report = setup.run_with(
        "return [typeof workspace, 'workspace' in globalThis]",
        &RunLimits::default(),
        &none,
    );
    assert_eq!(outcome(&report), r#"completed ["undefined",false]"#);
    let report = setup.run_with("await workspace.read('a')", &RunLimits::default(), &none);
    assert_eq!(
        outcome(&report),
        "script - ReferenceError: workspace is not defined"
    );

    let reads = |name: &str| name == "file_read" || name == "file_stat";
    let report = setup.run_with(
        r#"const stat = await workspace.stat("a.txt");
        try { await workspace.write("a.txt", "x") } catch (e) { return [stat.exists, e.name, e.message] }"#,
        &RunLimits::default(),
        &reads,
    );
    assert_eq!(
        outcome(&report),
        r#"completed [false,"TypeError","workspace.write needs tools.file_write, which this run does not have"]"#
    );
    // The missing tool was never called.
    assert_eq!(calls(&report), ["file_stat ok"]);
}

#[test]
fn the_gate_decides_workspace_calls_like_any_other() {
    let setup = setup(Mode::Plan);
    block_on(
        setup
            .tree
            .write(&WorkspacePath::parse("a.txt").unwrap(), b"kept".to_vec()),
    )
    .unwrap();
    let report = setup.run(
        r#"const text = await workspace.read("a.txt");
        try { await workspace.write("a.txt", "changed") } catch (e) { return [text, e.code] }"#,
    );
    assert_eq!(outcome(&report), r#"completed ["kept","refused"]"#);
    assert_eq!(calls(&report), ["file_read ok", "file_write refused"]);
    assert_eq!(setup.file("a.txt").as_deref(), Some("kept"));
}

#[test]
fn each_method_call_counts_against_the_call_budget() {
    let setup = setup(Mode::Auto);
    let limits = RunLimits {
        tool_calls: 2,
        ..RunLimits::default()
    };
    let report = setup.run_with(
        r#"for (let i = 0; i < 3; i++) { try { await workspace.stat("x") } catch (e) {} } return "done""#,
        &limits,
        &|_| true,
    );
    assert_eq!(
        outcome(&report),
        "budget_exhausted - budget_exhausted:tool_calls: the program made more than 2 tool calls"
    );
}

#[test]
fn positions_in_messages_stay_the_programs_own() {
    let setup = setup(Mode::Auto);
    let report = setup.run("let a = 1;\nlet = = 2;");
    let text = outcome(&report);
    assert!(
        text.starts_with("syntax ") && text.ends_with("at line 2, col 7"),
        "{text}"
    );
}

/// A run's globals beyond ECMAScript's are exactly those of
/// `kiln_types::guest::GLOBALS`, which the agent's prompt is written from.
#[test]
fn the_guests_globals_are_the_manifests() {
    let mut setup = setup(Mode::Auto);
    // A run with the sub-agent tools has `agents` too.
    let mut catalog = setup.catalog.as_array().unwrap().clone();
    for name in kiln_sandbox::agents::AGENT_TOOLS {
        let mut entry = catalog[0].clone();
        entry["name"] = json!(name);
        catalog.push(entry);
    }
    setup.catalog = Value::Array(catalog);
    let report = setup.run("return Object.getOwnPropertyNames(globalThis)");
    let RunOutcome::Completed { value } = report.outcome else {
        panic!("{:?}", report.outcome);
    };
    let mut plain = boa_engine::Context::default();
    let builtins = plain
        .eval(boa_engine::Source::from_bytes(
            "JSON.stringify(Object.getOwnPropertyNames(globalThis))",
        ))
        .unwrap()
        .to_string(&mut plain)
        .unwrap()
        .to_std_string_escaped();
    let builtins: Vec<String> = serde_json::from_str(&builtins).unwrap();
    let mut kiln: Vec<&str> = value
        .as_array()
        .unwrap()
        .iter()
        .map(|name| name.as_str().unwrap())
        .filter(|name| !builtins.iter().any(|builtin| builtin == name))
        .collect();
    kiln.sort_unstable();
    let mut manifest = kiln_types::guest::global_names();
    manifest.sort_unstable();
    assert_eq!(kiln, manifest);
    // The capability manifest's ECMAScript globals are the rest of them,
    // exactly.
    let mut ecmascript: Vec<&str> = value
        .as_array()
        .unwrap()
        .iter()
        .map(|name| name.as_str().unwrap())
        .filter(|name| !manifest.contains(name))
        .collect();
    ecmascript.sort_unstable();
    let mut listed = kiln_types::manifest::ECMASCRIPT_GLOBALS.to_vec();
    listed.sort_unstable();
    assert_eq!(
        ecmascript, listed,
        "kiln_types::manifest::ECMASCRIPT_GLOBALS"
    );
}

#[test]
fn what_the_manifest_calls_absent_is_absent_and_what_it_calls_refused_refuses() {
    let setup = setup(Mode::Auto);
    for absent in kiln_types::manifest::ABSENT {
        let report = setup.run(&format!("return typeof globalThis[{:?}]", absent.name));
        assert!(
            matches!(&report.outcome, RunOutcome::Completed { value } if value == "undefined"),
            "{}: {:?}",
            absent.name,
            report.outcome
        );
    }
    for (refused, program) in [
        ("eval", "return eval('1 + 1')"),
        ("Function", "return new Function('return 1')()"),
    ] {
        assert!(
            kiln_types::manifest::REFUSED
                .iter()
                .any(|entry| entry.name == refused)
        );
        let report = setup.run(program);
        assert!(
            matches!(report.outcome, RunOutcome::Failed(_)),
            "{refused}: {:?}",
            report.outcome
        );
    }
}

//! `kiln mcp serve --stdio` as another agent uses it: the MCP TypeScript SDK's
//! client (from `servers/`) lists `codemode` and calls it (a program over a
//! scripted tool, a program that throws, arguments the tool does not take, a
//! limit it cannot read); and over raw JSON-RPC lines, calls answered as they
//! end, a cancelled call never answered, bad lines answered with their error.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a panic here is a failed test with its line"
)]

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

fn scratch(name: &str, value: &Value) -> String {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("mcp-serve-{name}"));
    std::fs::write(&path, value.to_string()).unwrap();
    path.to_string_lossy().into_owned()
}

fn catalog() -> String {
    scratch(
        "catalog.json",
        &json!([{"name": "lookup", "description": "Looks a word up", "returns": {"meaning": "a small fire"}}]),
    )
}

#[test]
fn the_sdk_client_lists_codemode_and_runs_programs_through_it() {
    let calls = scratch(
        "calls.json",
        &json!([
            {"name": "codemode", "arguments": {"code": "const found = await tools.lookup({word: 'kiln'});\nconsole.log('found', found.meaning);\nreturn found.meaning;"}},
            {"name": "codemode", "arguments": {"code": "throw new Error('boom')"}},
            {"name": "codemode", "arguments": {"code": "return 1", "key": "k1"}},
            {"name": "codemode", "arguments": {"code": "return 1", "limits": {"wall_ms": "soon"}}},
        ]),
    );
    let out = Command::new("node")
        .arg(kiln_testkit::mcp_sdk_client())
        .arg(&calls)
        .arg(env!("CARGO_BIN_EXE_kiln"))
        .args(["mcp", "serve", "--stdio", "--tools", &catalog()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(answer["server"]["name"], "kiln");
    let tools = answer["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0]["name"], "codemode");
    assert_eq!(tools[0]["inputSchema"]["required"], json!(["code"]));
    assert!(
        tools[0]["description"]
            .as_str()
            .unwrap()
            .contains("the scripted catalog's tools")
    );

    let results = answer["results"].as_array().unwrap();
    let ran = &results[0];
    assert_ne!(ran["isError"], true, "{ran}");
    assert_eq!(ran["structuredContent"]["status"], "completed");
    assert_eq!(ran["structuredContent"]["value"], "a small fire");
    assert_eq!(ran["structuredContent"]["output"], "found a small fire\n");
    assert_eq!(ran["structuredContent"]["calls"][0]["tool"], "lookup");
    assert!(
        ran["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("completed · ")
    );

    let threw = &results[1];
    assert_eq!(threw["isError"], true);
    assert_eq!(
        threw["structuredContent"]["error"]["message"],
        "Error: boom"
    );

    let keyed = &results[2];
    assert_eq!(keyed["isError"], true);
    assert_eq!(
        keyed["content"][0]["text"],
        "refused: codemode takes `code`, `description`, `limits`; not `key`"
    );
    let limits = &results[3];
    assert_eq!(limits["isError"], true);
    assert_eq!(
        limits["structuredContent"]["error"]["code"],
        "invalid_arguments"
    );
    let text = limits["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("refused: the call's `limits` are not valid: "),
        "{text}"
    );
}

/// The server's answers to `lines`, sent one by one; stdin stays open until
/// `expected` answers have come (a client that goes away interrupts the runs
/// still going), then closes, and the server must end with nothing more to say.
fn exchange(lines: &[Value], expected: usize) -> Vec<Value> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["mcp", "serve", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in lines {
        match line {
            Value::String(raw) => writeln!(stdin, "{raw}").unwrap(),
            message => writeln!(stdin, "{message}").unwrap(),
        }
    }
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut answers: Vec<Value> = stdout
        .by_ref()
        .take(expected)
        .map(|line| serde_json::from_str(&line.unwrap()).unwrap())
        .collect();
    drop(stdin);
    answers.extend(stdout.map(|line| serde_json::from_str(&line.unwrap()).unwrap()));
    assert!(child.wait().unwrap().success());
    answers
}

fn call(id: u64, code: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "codemode", "arguments": {"code": code}}})
}

#[test]
fn calls_run_side_by_side_a_cancelled_one_is_not_answered_and_bad_lines_are_errors() {
    let answers = exchange(
        &[
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            call(2, "await sleep(30000); return 'slept'"),
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2, "reason": "the person moved on"}}),
            call(3, "await sleep(300); return 'second'"),
            call(4, "return 'first'"),
            json!("{not json"),
            json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}),
        ],
        5,
    );
    let ids: Vec<Value> = answers.iter().map(|answer| answer["id"].clone()).collect();
    // Every request but the cancelled one is answered; 4 ends before 3, which sleeps.
    assert!(!ids.contains(&json!(2)), "{answers:?}");
    let at = |id: u64| ids.iter().position(|seen| *seen == json!(id)).unwrap();
    assert!(at(4) < at(3), "{ids:?}");
    assert_eq!(
        answers[at(3)]["result"]["structuredContent"]["value"],
        "second"
    );
    assert_eq!(answers[at(5)]["result"], json!({}));
    let parse_error = answers
        .iter()
        .find(|answer| answer["id"].is_null())
        .unwrap();
    assert_eq!(parse_error["error"]["code"], -32_700);
    assert_eq!(answers.len(), 5, "{answers:?}");
}

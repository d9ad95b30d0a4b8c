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

/// The SDK client's calls and what it printed, against `target`: the server's
/// command line (stdio) or its URL (HTTP).
fn sdk_client(calls: &Value, target: &[&str]) -> Value {
    let calls = scratch(&format!("calls-{}.json", target.len()), calls);
    let out = Command::new("node")
        .arg(kiln_testkit::mcp_sdk_client())
        .arg(&calls)
        .args(target)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout).unwrap()
}

/// A `kiln mcp serve --http 0` and its endpoint's URL.
struct HttpServer {
    child: std::process::Child,
    url: String,
}

impl HttpServer {
    fn start(args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kiln"))
            .args(["mcp", "serve", "--http", "0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
        let first = stderr.next().unwrap().unwrap();
        let url = first
            .strip_prefix("kiln: serving MCP at ")
            .unwrap_or_else(|| panic!("{first}"))
            .to_owned();
        // The rest of stderr (the runs' notes) is drained so the server never blocks on it.
        std::thread::spawn(move || stderr.for_each(drop));
        Self { child, url }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What both transports must show for the same calls.
fn check_sdk_answer(answer: &Value) {
    assert_eq!(answer["server"]["name"], "kiln");
    let tools = answer["tools"].as_array().unwrap();
    let names: Vec<&str> = tools
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["codemode", "late_results", "withdraw"]);
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
    assert_eq!(ran["structuredContent"]["keyless"], true);
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

    let unknown = &results[2];
    assert_eq!(unknown["isError"], true);
    assert_eq!(
        unknown["content"][0]["text"],
        "refused: codemode takes `code`, `description`, `limits`, `key`; not `when`"
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
    // A keyed call's run id comes from the client's name and the key; it is
    // kept, so late_results gets it again.
    let keyed = &results[4];
    assert_eq!(keyed["structuredContent"]["keyless"], false, "{keyed}");
    assert_eq!(keyed["structuredContent"]["value"], 2);
    let late = &results[5];
    assert_eq!(
        late["structuredContent"]["run_id"],
        keyed["structuredContent"]["run_id"]
    );
    assert_eq!(late["structuredContent"]["value"], 2);
    let missing = &results[6];
    assert_eq!(missing["errorCode"], "unknown_run", "{missing}");
}

fn sdk_calls() -> Value {
    json!([
        {"name": "codemode", "arguments": {"code": "const found = await tools.lookup({word: 'kiln'});\nconsole.log('found', found.meaning);\nreturn found.meaning;"}},
        {"name": "codemode", "arguments": {"code": "throw new Error('boom')"}},
        {"name": "codemode", "arguments": {"code": "return 1", "when": "now"}},
        {"name": "codemode", "arguments": {"code": "return 1", "limits": {"wall_ms": "soon"}}},
        {"name": "codemode", "arguments": {"code": "return 1 + 1", "key": "sum"}},
        {"name": "late_results", "arguments": {"run_id": "$4"}},
        {"name": "late_results", "arguments": {"run_id": "codemode:0000000000000000"}},
    ])
}

#[test]
fn the_sdk_client_lists_the_tools_and_runs_programs_over_stdio() {
    let catalog = catalog();
    let kiln = env!("CARGO_BIN_EXE_kiln");
    let answer = sdk_client(
        &sdk_calls(),
        &[kiln, "mcp", "serve", "--stdio", "--tools", &catalog],
    );
    check_sdk_answer(&answer);
}

#[test]
fn the_sdk_client_lists_the_tools_and_runs_programs_over_http() {
    let catalog = catalog();
    let server = HttpServer::start(&["--tools", &catalog]);
    let answer = sdk_client(&sdk_calls(), &[&server.url]);
    check_sdk_answer(&answer);
    assert!(
        answer["session"].as_str().is_some_and(|id| id.len() == 32),
        "{answer}"
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

//! `kiln mcp serve` as another agent uses it: the MCP TypeScript SDK's client
//! (from `servers/`) over stdio and over Streamable HTTP lists the three tools
//! and calls them (a program over a scripted tool, a program that throws,
//! arguments the tool does not take, a limit it cannot read, a keyed run and
//! its late result, an unknown run id); over raw JSON-RPC lines, calls answered
//! as they end, a cancelled call never answered, bad lines answered with their
//! error; keyed runs (a retry attaches and a counting tool runs once, the
//! interim reply, withdraw, a run a killed server left going `interrupted` at
//! the next start, a run past `--max-runs` refused); over raw HTTP, sessions,
//! Host and Origin checks, the access token on every request, a keyed run no
//! other session can read, withdraw or attach to, the session cap and huge
//! client names cut; a program's `tools.model` and `tools.classify` asking the
//! server's model (aimock) under the per-run model budget. Clients that cannot
//! send a header (the SDK's test client) go through [`BearerProxy`].

#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a panic here is a failed test with its line"
)]

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use bearer_proxy::BearerProxy;
use common::HttpServer;

mod bearer_proxy;
mod common;

/// The access token the HTTP tests give their servers (`--token`).
const TOKEN: &str = "kiln-test-token-0123456789";

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
        "refused\n\nError (invalid_arguments): codemode takes `code`, `description`, `limits`, `key`; not `when`"
    );
    let limits = &results[3];
    assert_eq!(limits["isError"], true);
    assert_eq!(
        limits["structuredContent"]["error"]["code"],
        "invalid_arguments"
    );
    let text = limits["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with(
            "refused\n\nError (invalid_arguments): the call's `limits` are not valid: "
        ),
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
    let server = HttpServer::start(&["--tools", &catalog, "--token", TOKEN]);
    // The headless gate says once who denies what would ask; the token was given.
    assert_eq!(
        server.said,
        [
            "kiln: kiln mcp serve (its MCP client's person is not reachable from here) has nobody to ask for approval, so its gate denies every call that needs it",
            "kiln: every request must carry `Authorization: Bearer` with the token given by --token or KILN_MCP_TOKEN",
        ]
    );
    // The SDK's client is given no header here: the proxy adds the token.
    let proxy = BearerProxy::start(&server.url, TOKEN);
    let answer = sdk_client(&sdk_calls(), &[&proxy.url]);
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
    exchange_with(&[], lines, expected)
}

/// [`exchange`] with a server started with `flags` too.
fn exchange_with(flags: &[&str], lines: &[Value], expected: usize) -> Vec<Value> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["mcp", "serve", "--stdio"])
        .args(flags)
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

/// A tool that counts its executions: an HTTP server on 127.0.0.1 that
/// answers `ok` and counts the requests, which programs reach through
/// `http_request`.
struct Counter {
    origin: String,
    count: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Counter {
    fn start() -> Self {
        use std::io::Read as _;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = count.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut seen = Vec::new();
                let mut buffer = [0_u8; 1024];
                while !seen.windows(4).any(|window| window == b"\r\n\r\n") {
                    match stream.read(&mut buffer) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => seen.extend_from_slice(&buffer[..n]),
                    }
                }
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nok",
                );
            }
        });
        Self { origin, count }
    }

    fn count(&self) -> usize {
        self.count.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits until the tool has run `n` times (the program is past its call).
    fn wait_for(&self, n: usize) {
        for _ in 0..400 {
            if self.count() >= n {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        panic!("the program never called the tool");
    }

    /// A program that counts once, sleeps `ms`, and returns `done`.
    fn program(&self, ms: u64) -> String {
        format!(
            "await tools.http_request({{url: '{}/count'}}); await sleep({ms}); return 'done'",
            self.origin
        )
    }
}

/// A `kiln mcp serve --stdio` spoken to line by line.
struct LineServer {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl LineServer {
    fn start(args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kiln"))
            .args(["mcp", "serve", "--stdio"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut server = Self {
            child,
            stdin,
            stdout,
        };
        server.ask(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "keyed-test", "version": "1"}}}));
        server
    }

    /// Sends `message` and answers the next line.
    fn ask(&mut self, message: &Value) -> Value {
        writeln!(self.stdin.as_mut().unwrap(), "{message}").unwrap();
        let line = self.stdout.next().unwrap().unwrap();
        serde_json::from_str(&line).unwrap()
    }

    fn call(&mut self, id: u64, name: &str, arguments: Value) -> Value {
        let answer = self.ask(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}}));
        assert_eq!(answer["id"], id, "{answer}");
        answer["result"].clone()
    }

    /// `late_results` until the run has ended.
    fn final_result(&mut self, first_id: u64, run_id: &Value) -> Value {
        for id in first_id..first_id + 60 {
            let result = self.call(id, "late_results", json!({"run_id": run_id}));
            if result["structuredContent"]["status"] != "running" {
                return result;
            }
        }
        panic!("the run never ended")
    }
}

impl Drop for LineServer {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Served runs reuse waiting sandbox processes, as the browser reuses its
/// sandbox workers: each run still gets a fresh engine, a run that overruns
/// its budget ends its process, and the next run is served as before.
#[test]
fn each_served_run_has_a_fresh_engine_and_an_overrun_costs_only_its_process() {
    let mut server = LineServer::start(&[]);
    let leaked = "globalThis.leak = (globalThis.leak || 0) + 1; return globalThis.leak";
    for id in 1..=4 {
        let result = server.call(id, "codemode", json!({"code": leaked}));
        assert_eq!(
            result["structuredContent"]["value"], 1,
            "run {id}: {result}"
        );
    }
    let spin = server.call(
        5,
        "codemode",
        json!({"code": "while (true) {}", "limits": {"js_cpu_ms": 200}}),
    );
    assert_eq!(
        spin["structuredContent"]["termination_reason"], "budget_exhausted:js_cpu",
        "{spin}"
    );
    let deep = server.call(
        6,
        "codemode",
        json!({"code": "let o = {}; for (let i = 0; i < 1e5; i++) o = Object.create(o); return o.x"}),
    );
    assert_eq!(deep["errorCode"], "engine", "{deep}");
    for id in 7..=8 {
        let result = server.call(id, "codemode", json!({"code": leaked}));
        assert_eq!(
            result["structuredContent"]["value"], 1,
            "run {id}: {result}"
        );
    }
}

#[test]
fn a_keyed_retry_attaches_and_the_run_executes_once() {
    let counter = Counter::start();
    let allow = format!("--allow-net={}", counter.origin);
    let mut server = LineServer::start(&[&allow, "--reply-due-ms", "300"]);
    let program = counter.program(1_500);
    let interim = server.call(1, "codemode", json!({"code": program, "key": "k1"}));
    let run_id = interim["structuredContent"]["run_id"].clone();
    assert_eq!(
        interim["structuredContent"],
        json!({"status": "running", "run_id": run_id, "held": {"reason": "running"}}),
        "{interim}"
    );
    assert_ne!(interim["isError"], true);
    let text = interim["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Still running: the program had not finished when this reply was due."),
        "{text}"
    );
    // The retry attaches: the same run, still going.
    let retry = server.call(2, "codemode", json!({"code": program, "key": "k1"}));
    assert_eq!(retry["structuredContent"]["run_id"], run_id);
    let last = server.final_result(3, &run_id);
    assert_eq!(last["structuredContent"]["status"], "completed", "{last}");
    assert_eq!(last["structuredContent"]["value"], "done");
    assert_eq!(last["structuredContent"]["keyless"], false);
    // After the end a retry is answered from custody at once.
    let again = server.call(100, "codemode", json!({"code": program, "key": "k1"}));
    assert_eq!(again["structuredContent"]["value"], "done");
    assert_eq!(counter.count(), 1, "one execution for three calls");
    // Another key is another run.
    let other = server.call(
        101,
        "codemode",
        json!({"code": "return 'other'", "key": "k2"}),
    );
    assert_ne!(other["structuredContent"]["run_id"], run_id);
}

#[test]
fn withdraw_stops_a_sleeping_keyed_run() {
    let counter = Counter::start();
    let allow = format!("--allow-net={}", counter.origin);
    let store = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mcp-serve-withdraw-store");
    let _ = std::fs::remove_dir_all(&store);
    let store_arg = store.to_string_lossy().into_owned();
    let args = ["--store", &store_arg, &allow, "--reply-due-ms", "300"];
    let mut server = LineServer::start(&args);
    let program = format!("console.log('before'); {}", counter.program(10_000));
    let interim = server.call(1, "codemode", json!({"code": program, "key": "long"}));
    let run_id = interim["structuredContent"]["run_id"].clone();
    assert_eq!(interim["structuredContent"]["status"], "running");
    counter.wait_for(1);
    let withdrawn = server.call(2, "withdraw", json!({"run_id": run_id}));
    assert_eq!(withdrawn["isError"], true, "{withdrawn}");
    assert_eq!(withdrawn["errorCode"], "cancelled");
    assert_eq!(withdrawn["structuredContent"]["status"], "cancelled");
    assert_eq!(withdrawn["structuredContent"]["output"], "before\n");
    assert_eq!(
        withdrawn["structuredContent"]["error"]["message"],
        "cancelled: the MCP client withdrew or cancelled the run; its output and call outcomes so far are kept"
    );
    assert_eq!(withdrawn["structuredContent"]["calls"][0]["outcome"], "ok");
    // late_results now answers the same end; bad arguments are refused by name.
    let late = server.call(3, "late_results", json!({"run_id": run_id}));
    assert_eq!(late["errorCode"], "cancelled");
    let bad = server.call(4, "withdraw", json!({"id": run_id}));
    assert_eq!(
        bad["content"][0]["text"],
        "refused\n\nError (invalid_arguments): withdraw takes `run_id`; not `id`"
    );
    // The run settled its own record before its process ended: a restarted server
    // answers `cancelled` from it, not `interrupted`.
    drop(server);
    owners_gone(&store);
    let mut server = LineServer::start(&args);
    let recorded = server.call(1, "late_results", json!({"run_id": run_id}));
    assert_eq!(recorded["errorCode"], "cancelled", "{recorded}");
    assert_eq!(recorded["structuredContent"]["output"], "before\n");
}

/// Waits until no process holds a lock in the store's `owners/` folder.
fn owners_gone(store: &std::path::Path) {
    for _ in 0..200 {
        let held = std::fs::read_dir(store.join("owners"))
            .unwrap()
            .filter_map(Result::ok)
            .filter(|entry| {
                std::fs::File::open(entry.path()).is_ok_and(|file| file.try_lock().is_err())
            })
            .count();
        if held == 0 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("the killed server's runs still hold the store");
}

#[test]
fn a_run_a_killed_server_left_going_is_interrupted_at_the_next_start() {
    let counter = Counter::start();
    let store = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mcp-serve-killed-store");
    let _ = std::fs::remove_dir_all(&store);
    let store_arg = store.to_string_lossy().into_owned();
    let allow = format!("--allow-net={}", counter.origin);
    let args = ["--store", &store_arg, &allow, "--reply-due-ms", "300"];
    let mut server = LineServer::start(&args);
    let program = counter.program(10_000);
    let interim = server.call(1, "codemode", json!({"code": program, "key": "killed"}));
    let run_id = interim["structuredContent"]["run_id"].clone();
    assert_eq!(interim["structuredContent"]["status"], "running");
    // A finished keyed run is recorded with its whole result.
    let kept = server.call(
        2,
        "codemode",
        json!({"code": "return 'kept'", "key": "kept"}),
    );
    assert_eq!(kept["structuredContent"]["value"], "kept");
    counter.wait_for(1);
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    drop(server);
    owners_gone(&store);

    let mut server = LineServer::start(&args);
    let late = server.call(1, "late_results", json!({"run_id": run_id}));
    assert_eq!(late["errorCode"], "interrupted", "{late}");
    assert_eq!(late["structuredContent"]["run_id"], run_id);
    let retry = server.call(2, "codemode", json!({"code": program, "key": "killed"}));
    assert_eq!(
        retry["errorCode"], "interrupted",
        "a retry never runs it again"
    );
    let kept = server.call(
        3,
        "codemode",
        json!({"code": "return 'again'", "key": "kept"}),
    );
    assert_eq!(
        kept["structuredContent"]["value"], "kept",
        "answered from the record"
    );
    assert_eq!(counter.count(), 1);
}

/// One raw HTTP/1.1 exchange: the status, the headers (lowercased names) and the body.
fn http(
    address: &str,
    request_line: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Vec<(String, String)>, String) {
    use std::io::Read as _;
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    let mut request = format!(
        "{request_line} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|line| line.split_once(": "))
        .map(|(name, value)| (name.to_ascii_lowercase(), value.to_owned()))
        .collect();
    (status, headers, body.to_owned())
}

#[test]
fn http_sessions_hosts_and_origins_are_checked() {
    let server = HttpServer::start(&["--token", TOKEN]);
    let address = address_of(&server);
    let bearer = format!("Bearer {TOKEN}");
    let json_post = |headers: &[(&str, &str)], body: &Value| {
        let mut all = vec![
            ("Host", address.as_str()),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("Authorization", bearer.as_str()),
        ];
        all.extend_from_slice(headers);
        http(&address, "POST /mcp", &all, &body.to_string())
    };
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});

    // DNS rebinding: a foreign Host or Origin is refused before anything is read.
    let (status, _, body) = http(
        &address,
        "POST /mcp",
        &[
            ("Host", "evil.example"),
            ("Content-Type", "application/json"),
        ],
        &initialize.to_string(),
    );
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("the Host header `evil.example` is not this server's address"),
        "{body}"
    );
    let (status, _, body) = json_post(&[("Origin", "http://evil.example")], &initialize);
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("the Origin `http://evil.example` is not a page on this machine"),
        "{body}"
    );

    // initialize opens a session named in Mcp-Session-Id; a loopback Origin is fine.
    let (status, headers, body) = json_post(&[("Origin", "http://localhost:5173")], &initialize);
    assert_eq!(status, 200, "{body}");
    let session = headers
        .iter()
        .find(|(name, _)| name == "mcp-session-id")
        .map(|(_, value)| value.clone())
        .unwrap();
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["result"]["serverInfo"]["name"], "kiln");

    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let (status, _, body) = json_post(&[], &list);
    assert_eq!(status, 400, "no session header: {body}");
    assert!(
        body.contains("the Mcp-Session-Id header is missing"),
        "{body}"
    );
    let (status, _, _) = json_post(&[("Mcp-Session-Id", "nope")], &list);
    assert_eq!(status, 404);
    let (status, _, body) = json_post(&[("Mcp-Session-Id", &session)], &list);
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = json_post(
        &[("Mcp-Session-Id", &session)],
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert_eq!((status, body.as_str()), (202, ""));
    // A tools/call is answered as an event stream holding the response.
    let (status, headers, body) = json_post(
        &[("Mcp-Session-Id", &session)],
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "codemode", "arguments": {"code": "return 6 * 7"}}}),
    );
    assert_eq!(status, 200);
    assert!(
        headers.contains(&("content-type".into(), "text/event-stream".into())),
        "{headers:?}"
    );
    let data = body
        .lines()
        .find_map(|line| line.strip_prefix("data: "))
        .unwrap();
    let answer: Value = serde_json::from_str(data).unwrap();
    assert_eq!(answer["result"]["structuredContent"]["value"], 42);
    let (status, _, _) = json_post(
        &[
            ("Mcp-Session-Id", &session),
            ("MCP-Protocol-Version", "1999-01-01"),
        ],
        &list,
    );
    assert_eq!(status, 400);

    // No stream of the server's own; DELETE ends the session.
    let (status, headers, _) = http(
        &address,
        "GET /mcp",
        &[
            ("Host", &address),
            ("Accept", "text/event-stream"),
            ("Mcp-Session-Id", &session),
            ("Authorization", &bearer),
        ],
        "",
    );
    assert_eq!(status, 405);
    assert!(
        headers.contains(&("allow".into(), "POST, DELETE".into())),
        "{headers:?}"
    );
    let (status, _, _) = http(
        &address,
        "DELETE /mcp",
        &[
            ("Host", &address),
            ("Mcp-Session-Id", &session),
            ("Authorization", &bearer),
        ],
        "",
    );
    assert_eq!(status, 200);
    let (status, _, _) = json_post(&[("Mcp-Session-Id", &session)], &list);
    assert_eq!(status, 404, "an ended session is gone");
    let (status, _, _) = http(
        &address,
        "POST /other",
        &[("Host", &address), ("Authorization", &bearer)],
        "",
    );
    assert_eq!(status, 404);
}

/// `server`'s `HOST:PORT`.
fn address_of(server: &HttpServer) -> String {
    server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned()
}

fn initialize_message(client: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": client, "version": "1"}}})
}

/// A `POST /mcp` of `body` with `headers` besides the ones every message has.
fn post(
    address: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> (u16, Vec<(String, String)>, String) {
    let mut all = vec![
        ("Host", address),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    all.extend_from_slice(headers);
    http(address, "POST /mcp", &all, &body.to_string())
}

/// One MCP session spoken to as raw HTTP, with [`TOKEN`].
struct RawSession {
    address: String,
    session: String,
    next_id: u64,
}

impl RawSession {
    /// Opens a session as client `name`; the status and body when it was refused.
    fn open(address: &str, name: &str) -> Result<Self, (u16, String)> {
        let bearer = format!("Bearer {TOKEN}");
        let (status, headers, body) = post(
            address,
            &[("Authorization", &bearer)],
            &initialize_message(name),
        );
        if status != 200 {
            return Err((status, body));
        }
        let session = headers
            .iter()
            .find(|(name, _)| name == "mcp-session-id")
            .map(|(_, value)| value.clone())
            .unwrap();
        Ok(Self {
            address: address.to_owned(),
            session,
            next_id: 1,
        })
    }

    /// Posts `body` in this session: the status and the body.
    fn post(&self, body: &Value) -> (u16, String) {
        let bearer = format!("Bearer {TOKEN}");
        let (status, _, body) = post(
            &self.address,
            &[
                ("Authorization", &bearer),
                ("Mcp-Session-Id", &self.session),
            ],
            body,
        );
        (status, body)
    }

    /// Calls tool `name`: its result.
    fn call(&mut self, name: &str, arguments: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let (status, body) = self.post(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}}));
        assert_eq!(status, 200, "{body}");
        let data = body
            .lines()
            .find_map(|line| line.strip_prefix("data: "))
            .unwrap();
        let answer: Value = serde_json::from_str(data).unwrap();
        assert_eq!(answer["id"], id, "{answer}");
        answer["result"].clone()
    }

    /// `late_results` until the run has ended.
    fn final_result(&mut self, run_id: &Value) -> Value {
        for _ in 0..60 {
            let result = self.call("late_results", json!({"run_id": run_id}));
            if result["structuredContent"]["status"] != "running" {
                return result;
            }
        }
        panic!("the run never ended")
    }
}

#[test]
fn http_requests_without_the_servers_token_are_refused() {
    // Without --token the server draws one and says it before the URL.
    let server = HttpServer::start(&[]);
    let said = server.said.last().unwrap();
    let token = said
        .split("`Authorization: Bearer ")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap()
        .to_owned();
    assert_eq!(token.len(), 64, "{said}");
    let address = address_of(&server);
    let initialize = initialize_message("raw");
    let missing = "Unauthorized: the request carries no `Authorization: Bearer` token; this server answers only requests with its access token (printed on its stderr at start, or given by --token or KILN_MCP_TOKEN)";
    let wrong = "Unauthorized: the bearer token is not this server's access token (printed on its stderr at start, or given by --token or KILN_MCP_TOKEN)";
    let prefix = format!("Bearer {}", &token[..63]);
    let basic = format!("Basic {token}");
    let cases: [(Option<&str>, &str); 5] = [
        (None, missing),
        (Some(basic.as_str()), missing),
        (Some("Bearer"), missing),
        (Some("Bearer not-this-servers-token"), wrong),
        (Some(prefix.as_str()), wrong),
    ];
    for (authorization, message) in cases {
        let headers: Vec<(&str, &str)> = authorization
            .map(|value| ("Authorization", value))
            .into_iter()
            .collect();
        let (status, answer_headers, body) = post(&address, &headers, &initialize);
        assert_eq!(status, 401, "{authorization:?}: {body}");
        assert!(
            answer_headers.contains(&("www-authenticate".into(), "Bearer".into())),
            "{answer_headers:?}"
        );
        let answer: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(answer["error"]["message"], message, "{authorization:?}");
        assert!(!body.contains(&token), "a refusal never says the token");
    }
    // Every method needs it, before anything else is looked at.
    for request_line in ["GET /mcp", "DELETE /mcp", "POST /other"] {
        let (status, _, body) = http(&address, request_line, &[("Host", &address)], "");
        assert_eq!(status, 401, "{request_line}: {body}");
    }
    // The token opens a session; the scheme's name is case-insensitive.
    let lower = format!("bearer {token}");
    let (status, _, body) = post(&address, &[("Authorization", &lower)], &initialize);
    assert_eq!(status, 200, "{body}");

    // A token given in the environment is the one required, and never printed.
    let mut child = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["mcp", "serve", "--http", "0"])
        .env("KILN_MCP_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = loop {
        let line = stderr.next().unwrap().unwrap();
        assert!(!line.contains(TOKEN), "{line}");
        if let Some(url) = line.strip_prefix("kiln: serving MCP at ") {
            break url.to_owned();
        }
    };
    let address = url.trim_start_matches("http://").trim_end_matches("/mcp");
    let (status, _, _) = post(
        address,
        &[("Authorization", &format!("Bearer {token}"))],
        &initialize,
    );
    assert_eq!(status, 401);
    let (status, _, body) = post(
        address,
        &[("Authorization", &format!("Bearer {TOKEN}"))],
        &initialize,
    );
    assert_eq!(status, 200, "{body}");
    let _ = child.kill();
    let _ = child.wait();

    // A token too short to be one is refused at start.
    let out = kiln_until_exit(&["mcp", "serve", "--http", "0", "--token", "short"]);
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(
            "--token: an access token is 16 to 256 characters of letters, digits and `-._~+/=`"
        ),
        "{said}"
    );
}

/// `kiln ARGS` with no stdin, which must end by itself within a minute.
fn kiln_until_exit(args: &[&str]) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    for _ in 0..1200 {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = child.kill();
    panic!(
        "kiln {args:?} kept going: {:?}",
        child.wait_with_output().unwrap()
    );
}

#[test]
fn a_keyed_run_answers_only_the_session_that_started_it() {
    let counter = Counter::start();
    let allow = format!("--allow-net={}", counter.origin);
    let server = HttpServer::start(&["--token", TOKEN, &allow, "--reply-due-ms", "300"]);
    let address = address_of(&server);
    // Two clients of one name: a name is the client's own choice, not who it is.
    let mut owner = RawSession::open(&address, "same").unwrap();
    let mut other = RawSession::open(&address, "same").unwrap();
    let program = counter.program(1_500);
    let interim = owner.call("codemode", json!({"code": program, "key": "k"}));
    assert_eq!(
        interim["structuredContent"]["status"], "running",
        "{interim}"
    );
    let run_id = interim["structuredContent"]["run_id"].clone();
    counter.wait_for(1);
    // To another session the id is one never issued: the same refusal, word for word.
    let never_issued = "codemode:0123456789abcdef";
    let never = other.call("late_results", json!({"run_id": never_issued}));
    assert_eq!(never["errorCode"], "unknown_run", "{never}");
    let refusal = |id: &str| {
        never["content"][0]["text"]
            .as_str()
            .unwrap()
            .replace(never_issued, id)
    };
    for tool in ["late_results", "withdraw"] {
        let answer = other.call(tool, json!({"run_id": run_id}));
        assert_eq!(answer["errorCode"], "unknown_run", "{tool}: {answer}");
        assert_eq!(
            answer["content"][0]["text"].as_str().unwrap(),
            refusal(run_id.as_str().unwrap()),
            "{tool}"
        );
    }
    // The same key from another session is another run, never an attach.
    let mine = other.call("codemode", json!({"code": "return 'mine'", "key": "k"}));
    assert_eq!(mine["structuredContent"]["value"], "mine", "{mine}");
    assert_ne!(mine["structuredContent"]["run_id"], run_id);
    // The owner's run was neither read nor withdrawn: it ends as it would have.
    let last = owner.final_result(&run_id);
    assert_eq!(last["structuredContent"]["status"], "completed", "{last}");
    assert_eq!(last["structuredContent"]["value"], "done");
    assert_eq!(counter.count(), 1);
}

#[test]
fn sessions_are_capped_the_idle_evicted_and_huge_client_names_cut() {
    let counter = Counter::start();
    let allow = format!("--allow-net={}", counter.origin);
    let store = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mcp-serve-sessions-store");
    let _ = std::fs::remove_dir_all(&store);
    let store_arg = store.to_string_lossy().into_owned();
    let server = HttpServer::start(&[
        "--token",
        TOKEN,
        "--store",
        &store_arg,
        &allow,
        "--reply-due-ms",
        "300",
        "--max-sessions",
        "2",
    ]);
    let address = address_of(&server);
    let save = json!({"code": "return await tools.save_memory({text: 'hello'})"});
    // A megabyte of a name is cut to an agent name's limit, 100 characters...
    let mut first = RawSession::open(&address, &"n".repeat(1 << 20)).unwrap();
    let saved = first.call("codemode", save.clone());
    assert_eq!(
        saved["structuredContent"]["value"]["agent"],
        "n".repeat(100),
        "{saved}"
    );
    // ... and 128 bytes, at a character's edge; control characters are dropped.
    let wide = format!("\u{1b}[2J{}", "é".repeat(1 << 19));
    let mut second = RawSession::open(&address, &wide).unwrap();
    let saved = second.call("codemode", save);
    assert_eq!(
        saved["structuredContent"]["value"]["agent"],
        format!("[2J{}", "é".repeat(62)),
        "{saved}"
    );
    // The second is busy with a keyed run; a third session takes the place of
    // the first, idle the longest.
    let going = second.call(
        "codemode",
        json!({"code": counter.program(10_000), "key": "busy"}),
    );
    assert_eq!(going["structuredContent"]["status"], "running", "{going}");
    let mut third = RawSession::open(&address, "third").unwrap();
    let list = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"});
    let (status, body) = first.post(&list);
    assert_eq!(status, 404, "the first was evicted: {body}");
    assert!(body.contains("send initialize again"), "{body}");
    let (status, body) = second.post(&list);
    assert_eq!(status, 200, "{body}");
    // With every session busy, a new one is refused, naming the limit.
    let also = third.call(
        "codemode",
        json!({"code": counter.program(10_000), "key": "busy"}),
    );
    assert_eq!(also["structuredContent"]["status"], "running", "{also}");
    let (status, body) = RawSession::open(&address, "fourth").err().unwrap();
    assert_eq!(status, 503, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        answer["error"]["message"],
        "Service Unavailable: this server holds at most 2 sessions (--max-sessions) and every one has a call or a keyed run going; end one (DELETE /mcp) or call again when one is idle"
    );
    // Once one is idle again, the new session takes its place.
    let withdrawn = second.call(
        "withdraw",
        json!({"run_id": going["structuredContent"]["run_id"]}),
    );
    assert_eq!(withdrawn["errorCode"], "cancelled", "{withdrawn}");
    RawSession::open(&address, "fourth").unwrap();
    let (status, _) = second.post(&list);
    assert_eq!(status, 404);
    let (status, _) = third.post(&list);
    assert_eq!(status, 200);
}

#[test]
fn runs_past_the_servers_limit_are_refused_naming_it() {
    let counter = Counter::start();
    let allow = format!("--allow-net={}", counter.origin);
    let mut server = LineServer::start(&[&allow, "--reply-due-ms", "300", "--max-runs", "1"]);
    let program = counter.program(10_000);
    let interim = server.call(1, "codemode", json!({"code": program, "key": "long"}));
    assert_eq!(
        interim["structuredContent"]["status"], "running",
        "{interim}"
    );
    let run_id = interim["structuredContent"]["run_id"].clone();
    let refusal = "refused\n\nError (too_many_runs): the server is running as many programs as it runs at once (1, `--max-runs`); nothing ran: call again when one has ended";
    let keyless = server.call(2, "codemode", json!({"code": "return 1"}));
    assert_eq!(keyless["isError"], true, "{keyless}");
    assert_eq!(keyless["content"][0]["text"], refusal);
    let keyed = server.call(
        3,
        "codemode",
        json!({"code": "return 'later'", "key": "later"}),
    );
    assert_eq!(keyed["content"][0]["text"], refusal);
    // A retry of the run going attaches: it starts nothing.
    let retry = server.call(4, "codemode", json!({"code": program, "key": "long"}));
    assert_eq!(retry["structuredContent"]["run_id"], run_id, "{retry}");
    // Once it has ended, the refused key runs: its refusal was not kept.
    let withdrawn = server.call(5, "withdraw", json!({"run_id": run_id}));
    assert_eq!(withdrawn["errorCode"], "cancelled", "{withdrawn}");
    let later = server.call(
        6,
        "codemode",
        json!({"code": "return 'later'", "key": "later"}),
    );
    assert_eq!(later["structuredContent"]["value"], "later", "{later}");
    assert_eq!(counter.count(), 1);
}

#[test]
fn a_catalog_kiln_run_would_refuse_refuses_the_server_at_start() {
    let bad = scratch(
        "bad-catalog.json",
        &json!([{"name": "wipe", "category": "destructive", "returns": {}}]),
    );
    let out = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["mcp", "serve", "--stdio", "--tools", &bad])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("was refused: catalog entry 0 (`wipe`): `category` unknown permission category `destructive`"),
        "{stderr}"
    );
}

#[test]
fn a_served_program_asks_the_servers_model_under_its_budget() {
    let aimock = kiln_testkit::Aimock::start();
    let base_url = format!("{}/v1", aimock.url());
    let flags = [
        "--provider",
        "openai",
        "--base-url",
        &base_url,
        "--model",
        "gpt-4o-mini",
        "--model-budget",
        "calls=2",
    ];
    let code = "const label = await tools.classify({text: 'kiln-classify: saving crashes the app', labels: ['bug', 'feature']});
        const person = await tools.model({prompt: 'kiln-model-extract: who?', schema: {type: 'object', properties: {name: {type: 'string'}, year: {type: 'integer'}}, required: ['name', 'year']}});
        let third;
        try { await tools.model({prompt: 'kiln-hello'}); } catch (error) { third = error.code; }
        return {label, person, third};";
    let answers = exchange_with(
        &flags,
        &[
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            call(3, code),
        ],
        3,
    );
    let listed = answers.iter().find(|answer| answer["id"] == 2).unwrap();
    let description = listed["result"]["tools"][0]["description"]
        .as_str()
        .unwrap();
    assert!(
        description.contains("`model` and `classify` (asking `gpt-4o-mini`"),
        "{description}"
    );
    let called = answers.iter().find(|answer| answer["id"] == 3).unwrap();
    let result = &called["result"];
    assert_ne!(result["isError"], true, "{result}");
    assert_eq!(
        result["structuredContent"]["value"],
        json!({"label": "bug", "person": {"name": "Ada Lovelace", "year": 1843}, "third": "model_budget_exhausted"})
    );
    // Two requests reached the model; the third was refused before sending.
    assert_eq!(aimock.journal().as_array().unwrap().len(), 2);

    // A budget that does not read refuses the server, naming it.
    let refused = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args([
            "mcp",
            "serve",
            "--stdio",
            "--provider",
            "openai",
            "--base-url",
            &base_url,
        ])
        .args(["--model", "gpt-4o-mini", "--model-budget", "usd=-1"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("--model-budget usd=-1") && said.contains("`usd`"),
        "{said}"
    );
}

/// The belt's MCP servers are connected once, when the server starts: every
/// run calls their tools over that session. One that does not answer then is
/// tried again by each run, which says so in a warning and goes on.
#[test]
fn the_belts_mcp_servers_are_connected_once_and_a_missing_one_is_retried_per_run() {
    let everything = kiln_testkit::EverythingServer::start();
    let every = format!("every={}", everything.url());
    let down = format!("down=http://127.0.0.1:{}/mcp", kiln_testkit::free_port());
    let mut server = LineServer::start(&["--mcp", &every, "--mcp", &down]);
    for id in 1..=3 {
        let result = server.call(
            id,
            "codemode",
            json!({"code": format!("return await tools.every_get_sum({{a: {id}, b: 1}})")}),
        );
        assert_ne!(result["isError"], true, "run {id}: {result}");
        assert_eq!(
            result["structuredContent"]["calls"][0]["outcome"], "ok",
            "{result}"
        );
        let warnings = result["structuredContent"]["warnings"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            warnings
                .iter()
                .any(|warning| warning["code"] == "tools_unavailable"
                    && warning["message"]
                        .as_str()
                        .is_some_and(|message| message.contains("`down`"))),
            "run {id}: the missing server is tried again and said: {result}"
        );
        assert!(
            !warnings.iter().any(|warning| warning["message"]
                .as_str()
                .is_some_and(|message| message.contains("`every`"))),
            "{result}"
        );
    }
}

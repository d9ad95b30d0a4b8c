//! `cargo xtask bench` runs this natively: a `codemode` call's round trip to
//! `kiln mcp serve` over Streamable HTTP (through Kiln's own MCP client) and
//! over stdio (JSON-RPC lines), beside a direct `tools/call` of the same tool
//! through Kiln's MCP client, all on loopback. The tool is the MCP reference
//! server's `get-sum`: directly it is one `tools/call`; through codemode it is
//! a program `return await tools.every_get_sum(…)` run in the server's process
//! over its ladder (through the session the server opened to the reference
//! server when it started) and a warm sandbox process. `return 1` over HTTP
//! is the floor (the ladder and the sandbox, no tool). Over HTTP every
//! request carries the access token the server printed at start. `KILN_CLI`
//! is the release `kiln`. Prints a table; asserts nothing about time.

#![expect(clippy::disallowed_methods, reason = "a benchmark measures real time")]
#![expect(
    clippy::expect_used,
    reason = "a benchmark, not a test: a step that fails ends it with its message"
)]

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Command, Stdio};
use std::rc::Rc;
use std::time::Instant;

use futures::executor::block_on;
use futures::future::LocalBoxFuture;
use kiln_http::{HttpClient, HttpError, Request, Response, StreamingResponse};
use serde_json::{Value, json};

const DIRECT_CALLS: u32 = 200;
const CODEMODE_CALLS: u32 = 30;

fn main() {
    let kiln = std::env::var("KILN_CLI").unwrap_or_else(|_| "target/release/kiln".to_owned());
    let everything = kiln_testkit::EverythingServer::start();
    let mount = format!("every={}", everything.url());
    let program = |i: u32| format!("return await tools.every_get_sum({{a: {i}, b: 1}})");

    let client = kiln_mcp::McpClient::new("every", everything.url(), kiln_http::default_client());
    block_on(client.connect()).expect("the reference server answers initialize");
    let direct = measure(DIRECT_CALLS, |i| {
        let answer = block_on(client.call_tool("get-sum", json!({"a": i, "b": 1})));
        answer.map(drop).map_err(|error| error.to_string())
    });
    let _ = block_on(client.close());
    eprintln!("mcp_serve bench: direct calls measured");

    let mut server = Command::new(&kiln)
        .args(["mcp", "serve", "--http", "0", "--mcp", &mount])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("{kiln}: {error}"));
    let mut stderr = BufReader::new(server.stderr.take().expect("piped")).lines();
    let mut token = None;
    let url = stderr
        .by_ref()
        .map_while(Result::ok)
        .find_map(|line| {
            if let Some(drawn) = line
                .split("`Authorization: Bearer ")
                .nth(1)
                .and_then(|rest| rest.split('`').next())
            {
                token = Some(drawn.to_owned());
            }
            line.strip_prefix("kiln: serving MCP at ")
                .map(str::to_owned)
        })
        .expect("kiln mcp serve says where it listens");
    std::thread::spawn(move || stderr.for_each(drop));
    let bearer = Rc::new(Bearer {
        token: token.expect("kiln mcp serve prints its access token before its address"),
        inner: kiln_http::default_client(),
    });
    let http = kiln_mcp::McpClient::new("kiln", &url, bearer);
    block_on(http.connect()).expect("kiln mcp serve answers initialize");
    let codemode_http = measure(CODEMODE_CALLS, |i| {
        codemode_ok(block_on(http.call_tool("codemode", json!({"code": program(i)}))).map(value_of))
    });
    let floor = measure(CODEMODE_CALLS, |_| {
        codemode_ok(block_on(http.call_tool("codemode", json!({"code": "return 1"}))).map(value_of))
    });
    let _ = block_on(http.close());
    eprintln!("mcp_serve bench: codemode over HTTP measured");
    let _ = server.kill();
    let _ = server.wait();

    let mut stdio = Command::new(&kiln)
        .args(["mcp", "serve", "--stdio", "--mcp", &mount])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|error| panic!("{kiln}: {error}"));
    let mut input = stdio.stdin.take().expect("piped");
    let mut output = BufReader::new(stdio.stdout.take().expect("piped")).lines();
    let mut ask = move |message: Value| -> Value {
        writeln!(input, "{message}").expect("the server reads");
        let line = output.next().and_then(Result::ok).unwrap_or_default();
        serde_json::from_str(&line).unwrap_or(Value::Null)
    };
    ask(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}),
    );
    let codemode_stdio = measure(CODEMODE_CALLS, |i| {
        let answer = ask(
            json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": {"name": "codemode", "arguments": {"code": program(i)}}}),
        );
        codemode_ok(Ok(answer["result"].clone()))
    });
    drop(ask);
    let _ = stdio.kill();
    let _ = stdio.wait();

    println!(
        "  {:<58} {:>7} {:>10} {:>10} {:>9}",
        "MCP round trip on loopback", "calls", "median ms", "p90 ms", "× direct"
    );
    let rows = [
        (
            "direct tools/call get-sum (Kiln's MCP client)",
            DIRECT_CALLS,
            &direct,
        ),
        (
            "codemode → get-sum over Streamable HTTP (Kiln's client)",
            CODEMODE_CALLS,
            &codemode_http,
        ),
        (
            "codemode → get-sum over stdio",
            CODEMODE_CALLS,
            &codemode_stdio,
        ),
        (
            "codemode `return 1` over HTTP (process + sandbox floor)",
            CODEMODE_CALLS,
            &floor,
        ),
    ];
    for (name, calls, figures) in rows {
        println!(
            "  {name:<58} {calls:>7} {:>10.2} {:>10.2} {:>9.1}",
            figures.median,
            figures.p90,
            figures.median / direct.median
        );
    }
}

/// Kiln's HTTP client, every request carrying `Authorization: Bearer TOKEN`.
struct Bearer {
    token: String,
    inner: Rc<dyn HttpClient>,
}

impl Bearer {
    fn signed(&self, mut request: Request) -> Request {
        request
            .headers
            .push(("Authorization".to_owned(), format!("Bearer {}", self.token)));
        request
    }
}

impl HttpClient for Bearer {
    fn send(&self, request: Request) -> LocalBoxFuture<'static, Result<Response, HttpError>> {
        self.inner.send(self.signed(request))
    }

    fn open(
        &self,
        request: Request,
        idle_timeout_ms: u64,
    ) -> LocalBoxFuture<'static, Result<StreamingResponse, HttpError>> {
        self.inner.open(self.signed(request), idle_timeout_ms)
    }
}

struct Figures {
    median: f64,
    p90: f64,
}

fn value_of(result: kiln_mcp::CallToolResult) -> Value {
    json!({"content": result.content, "isError": result.is_error})
}

fn codemode_ok(answer: Result<Value, kiln_mcp::McpError>) -> Result<(), String> {
    match answer {
        Ok(result) if result["isError"] != true => Ok(()),
        Ok(result) => Err(result["content"][0]["text"].to_string()),
        Err(error) => Err(error.to_string()),
    }
}

fn measure(calls: u32, mut call: impl FnMut(u32) -> Result<(), String>) -> Figures {
    // One call first, unmeasured: sessions open, caches warm.
    call(0).unwrap_or_else(|error| panic!("{error}"));
    let mut samples: Vec<f64> = (1..=calls)
        .map(|i| {
            let started = Instant::now();
            call(i).unwrap_or_else(|error| panic!("{error}"));
            started.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    Figures {
        median: at(0.5),
        p90: at(0.9),
    }
}

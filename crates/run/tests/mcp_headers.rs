//! An MCP server that asks for a token, reached with a header filled from the
//! run's secret: whole runs through `kiln_run::run_program` (the real sandbox
//! in process, the real ladder, the in-memory store) against the reference
//! server (`@modelcontextprotocol/server-everything`) behind a proxy written
//! here that lets through only `Authorization: Bearer <TOKEN>`. The token
//! reaches the server and nothing else: no result, warning, error text, job
//! record or `Debug` dump of the run carries it.

#![expect(clippy::unwrap_used, reason = "tests")]

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use futures::executor::block_on;
use kiln_capabilities::gate::{Headless, SessionAllow};
use kiln_run::{Environment, People, RunRequest, Workspace, run_program};
use kiln_store::backend::{Backend as _, Scan, Table};
use kiln_store::native::{MemoryBackend, MemoryTree};
use kiln_testkit::EverythingServer;
use kiln_types::cancel::AbortSignal;
use kiln_types::tool_result::Warning;
use serde_json::{Value, json};

mod common;
use common::InProcess;

/// The token the proxy asks for.
const TOKEN: &str = "kiln-test-token-5e1d0c9a";

/// In a request's body, replaced by the `Authorization` the request carried:
/// the proxy plays a server that echoes what it was sent.
const ECHO_MARKER: &str = "ECHO_AUTHORIZATION";

/// What the proxy saw of one request: its method and its `Authorization`.
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// A proxy on 127.0.0.1 in front of the reference server that forwards a
/// request carrying `Authorization: Bearer <TOKEN>` and answers any other
/// 401, its body quoting the `Authorization` it got (as servers' error pages
/// do). It writes down every request it is sent.
struct BearerGate {
    url: String,
    seen: Seen,
}

impl BearerGate {
    fn start(server: &EverythingServer) -> Self {
        let upstream = format!("127.0.0.1:{}", server.port);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let seen = Seen::default();
        let recorded = seen.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let (upstream, recorded) = (upstream.clone(), recorded.clone());
                std::thread::spawn(move || gate(client, &upstream, &recorded));
            }
        });
        Self { url, seen }
    }

    fn seen(&self) -> Vec<(String, Option<String>)> {
        self.seen.lock().unwrap().clone()
    }
}

/// One request from `client`: refused with 401, or forwarded to `upstream`
/// with `Connection: close` and its answer copied back (saying `Connection:
/// close` too) until the server closes.
fn gate(mut client: TcpStream, upstream: &str, seen: &Seen) {
    let mut received = Vec::new();
    let mut buffer = [0_u8; 8192];
    let head_end = loop {
        if let Some(at) = received.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        match client.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(n) => received.extend_from_slice(&buffer[..n]),
        }
    };
    let head = String::from_utf8_lossy(&received[..head_end]).into_owned();
    let mut body = received[head_end + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default().to_owned();
    let method = request_line
        .split(' ')
        .next()
        .unwrap_or_default()
        .to_owned();
    let mut authorization = None;
    let mut length = 0_usize;
    let mut forwarded_headers = String::new();
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "authorization" => authorization = Some(value.to_owned()),
            "connection" | "keep-alive" => {}
            "transfer-encoding" => panic!("the proxy reads only bodies with a Content-Length"),
            "content-length" => length = value.parse().unwrap_or(0),
            "host" => forwarded_headers.push_str(&format!("Host: {upstream}\r\n")),
            _ => forwarded_headers.push_str(&format!("{}: {value}\r\n", name.trim())),
        }
    }
    seen.lock().unwrap().push((method, authorization.clone()));
    while body.len() < length {
        match client.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(n) => body.extend_from_slice(&buffer[..n]),
        }
    }
    let expected = format!("Bearer {TOKEN}");
    if authorization.as_deref() != Some(expected.as_str()) {
        let quoted = authorization.unwrap_or_else(|| "nothing".to_owned());
        let answer = json!({"error": "invalid_token", "error_description": format!("`{quoted}` is not a valid token")})
            .to_string();
        let _ = client.write_all(
            format!(
                "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n\
                 WWW-Authenticate: Bearer\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                answer.len()
            )
            .as_bytes(),
        );
        return;
    }
    let body = String::from_utf8_lossy(&body).replace(ECHO_MARKER, &expected);
    let forwarded = format!(
        "{request_line}\r\n{forwarded_headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let Ok(mut server) = TcpStream::connect(upstream) else {
        return;
    };
    if server.write_all(forwarded.as_bytes()).is_err() {
        return;
    }
    // The answer's head says `Connection: close` (the server may say
    // keep-alive): the client must not send another request on this
    // connection, which answers one.
    let mut answer = Vec::new();
    let head_end = loop {
        if let Some(at) = answer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        match server.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(n) => answer.extend_from_slice(&buffer[..n]),
        }
    };
    let head: String = String::from_utf8_lossy(&answer[..head_end])
        .split("\r\n")
        .filter(|line| {
            let name = line.split(':').next().unwrap_or_default().trim();
            !name.eq_ignore_ascii_case("connection") && !name.eq_ignore_ascii_case("keep-alive")
        })
        .map(|line| format!("{line}\r\n"))
        .collect();
    let head = format!("{head}Connection: close\r\n\r\n");
    if client.write_all(head.as_bytes()).is_err()
        || client.write_all(&answer[head_end + 4..]).is_err()
    {
        return;
    }
    loop {
        match server.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if client.write_all(&buffer[..n]).is_err() {
                    return;
                }
            }
        }
    }
    let _ = client.shutdown(std::net::Shutdown::Both);
}

struct Setup {
    environment: Environment,
    backend: Rc<MemoryBackend>,
}

fn setup() -> Setup {
    let backend = MemoryBackend::new();
    let workspace = Workspace {
        backend: backend.clone(),
        files: MemoryTree::new(),
        owners: Rc::new(kiln_store::owners::Solo::new()),
    };
    Setup {
        environment: Environment {
            entrance: "mcp headers test".into(),
            tools_host: "page".into(),
            http: kiln_http::default_client(),
            people: People::Approver {
                host: "mcp headers test".into(),
                approver: Rc::new(Headless::new("mcp headers test")),
                session: SessionAllow::default(),
            },
            own_tools: None,
            bridge: None,
            workspace: Some(Rc::new(Ok(workspace))),
            random: Rc::new(|| [7; 8]),
            on_gate: None,
            on_progress: None,
        },
        backend,
    }
}

/// Runs `code` with the MCP server `docs` at `url` given `headers`, and `secrets`.
fn run(setup: &Setup, code: &str, url: &str, headers: Value, secrets: Value) -> Ran {
    let request = json!({
        "code": code,
        "mcp": {"docs": {"url": url, "headers": headers}},
        "secrets": secrets,
    });
    let request = RunRequest::from_value(request).unwrap();
    let ran = block_on(run_program(
        request,
        &setup.environment,
        &InProcess,
        AbortSignal::new(),
    ))
    .unwrap();
    Ran {
        value: ran.result.structured_content["value"].clone(),
        warnings: ran.run.warnings.clone(),
        everything: format!(
            "{}\n{:?}\n{:?}\n{}",
            serde_json::to_string(&ran.result).unwrap(),
            ran,
            ran.run,
            stored(&setup.backend)
        ),
    }
}

/// What a run gave: its value, its warnings, and every text it left (the
/// result as JSON, its `Debug`, the sandbox's report, every stored record).
struct Ran {
    value: Value,
    warnings: Vec<Warning>,
    everything: String,
}

impl Ran {
    /// The warning about the server `docs`.
    fn docs_warning(&self) -> &Warning {
        self.warnings
            .iter()
            .find(|warning| warning.module.as_deref() == Some("mcp:docs"))
            .unwrap_or_else(|| panic!("no warning about `docs`: {:?}", self.warnings))
    }

    fn assert_never_shows(&self, value: &str) {
        assert!(
            !self.everything.contains(value),
            "the run left the secret's value somewhere: {}",
            self.everything
        );
    }
}

/// Every record of every table, as text.
fn stored(backend: &MemoryBackend) -> String {
    let mut out = String::new();
    for table in Table::ALL {
        let all = Scan {
            prefix: "",
            reverse: false,
            limit: None,
        };
        for record in block_on(backend.scan(table, all)).unwrap() {
            out.push_str(&format!("{table} {} {}\n", record.key, record.value));
        }
    }
    out
}

const CALLS: &str = "const names = Object.keys(tools).filter((name) => name.startsWith('docs_'));\n\
    const sum = await tools.docs_get_sum({a: 2, b: 3});\n\
    const echoed = await tools.docs_echo({message: 'ECHO_AUTHORIZATION'});\n\
    return {names, sum, echoed};";

#[test]
fn a_server_asking_for_a_token_is_reached_with_the_header_from_a_secret() {
    let server = EverythingServer::start();
    let proxy = BearerGate::start(&server);
    let setup = setup();
    let ran = run(
        &setup,
        CALLS,
        &proxy.url,
        json!({"Authorization": "Bearer ${TOKEN}"}),
        json!({"TOKEN": TOKEN}),
    );
    let names: Vec<String> = serde_json::from_value(ran.value["names"].clone()).unwrap();
    assert!(
        names.contains(&"docs_get_sum".to_owned()) && names.contains(&"docs_echo".to_owned()),
        "{names:?}\n{}",
        ran.everything
    );
    assert!(ran.value["sum"].to_string().contains('5'), "{}", ran.value);
    // The server echoed the header it was sent: the program gets it scrubbed.
    assert!(
        ran.value["echoed"]
            .to_string()
            .contains("Bearer [redacted:TOKEN]"),
        "{}",
        ran.value
    );
    ran.assert_never_shows(TOKEN);
    // Every exchange carried it: the handshake, the calls, the session's own
    // stream and the closing DELETE.
    let seen = proxy.seen();
    let expected = format!("Bearer {TOKEN}");
    for (method, authorization) in &seen {
        assert_eq!(
            authorization.as_deref(),
            Some(expected.as_str()),
            "{method}: {seen:?}"
        );
    }
    for method in ["POST", "GET", "DELETE"] {
        assert!(
            seen.iter().any(|(m, _)| m == method),
            "no {method}: {seen:?}"
        );
    }
}

#[test]
fn the_catalog_lists_the_tools_of_a_server_reached_with_the_header() {
    let server = EverythingServer::start();
    let proxy = BearerGate::start(&server);
    let setup = setup();
    let request = RunRequest::from_value(json!({
        "code": "",
        "mcp": {"docs": {"url": proxy.url, "headers": {"Authorization": "Bearer ${TOKEN}"}}},
        "secrets": {"TOKEN": TOKEN},
    }))
    .unwrap();
    let (specs, warnings) = block_on(kiln_run::catalog(&request, &setup.environment));
    assert!(
        specs.iter().any(|spec| spec.name == "docs_echo"),
        "{warnings:?}"
    );
}

#[test]
fn without_the_header_the_servers_401_is_the_runs_warning() {
    let server = EverythingServer::start();
    let proxy = BearerGate::start(&server);
    let setup = setup();
    let ran = run(
        &setup,
        "return Object.keys(tools).filter((name) => name.startsWith('docs_'))",
        &proxy.url,
        json!({}),
        json!({"TOKEN": TOKEN}),
    );
    assert_eq!(ran.value, json!([]));
    let warning = ran.docs_warning();
    assert_eq!(warning.code, "tools_unavailable");
    assert!(warning.message.contains("HTTP 401"), "{}", warning.message);
    ran.assert_never_shows(TOKEN);
    assert_eq!(proxy.seen(), [("POST".to_owned(), None)]);
}

#[test]
fn a_wrong_token_the_server_quotes_back_is_scrubbed_from_the_warning() {
    let server = EverythingServer::start();
    let proxy = BearerGate::start(&server);
    let setup = setup();
    let wrong = "kiln-wrong-token-77aa31";
    let ran = run(
        &setup,
        "return 1",
        &proxy.url,
        json!({"Authorization": "Bearer ${TOKEN}"}),
        json!({"TOKEN": wrong}),
    );
    let warning = ran.docs_warning();
    assert!(
        warning.message.contains("HTTP 401") && warning.message.contains("Bearer [redacted:TOKEN]"),
        "{}",
        warning.message
    );
    ran.assert_never_shows(wrong);
    ran.assert_never_shows(TOKEN);
}

#[test]
fn a_secret_bound_to_another_origin_refuses_the_server_before_anything_is_sent() {
    let server = EverythingServer::start();
    let proxy = BearerGate::start(&server);
    let setup = setup();
    let ran = run(
        &setup,
        "return Object.keys(tools).filter((name) => name.startsWith('docs_'))",
        &proxy.url,
        json!({"Authorization": "Bearer ${TOKEN}"}),
        json!({"TOKEN": {"value": TOKEN, "origins": ["https://docs.example.com"]}}),
    );
    assert_eq!(ran.value, json!([]));
    let warning = ran.docs_warning();
    assert_eq!(warning.code, "tools_unavailable");
    assert_eq!(warning.reason.as_deref(), Some("secret_not_allowed"));
    let message = &warning.message;
    for named in [
        "MCP server `docs`",
        "header `Authorization`",
        "secret `TOKEN`",
        "https://docs.example.com",
        "nothing was sent to it",
    ] {
        assert!(message.contains(named), "{named}: {message}");
    }
    ran.assert_never_shows(TOKEN);
    assert_eq!(proxy.seen(), [], "the proxy saw a request");
}

#[test]
fn a_header_naming_an_unknown_secret_refuses_the_server_by_name() {
    let server = EverythingServer::start();
    let proxy = BearerGate::start(&server);
    let setup = setup();
    let ran = run(
        &setup,
        "return 1",
        &proxy.url,
        json!({"Authorization": "Bearer ${DOCS_TOKEN}"}),
        json!({"TOKEN": TOKEN}),
    );
    let warning = ran.docs_warning();
    assert_eq!(warning.reason.as_deref(), Some("secret_unavailable"));
    let message = &warning.message;
    for named in [
        "MCP server `docs`",
        "header `Authorization`",
        "no secret named `DOCS_TOKEN`",
        "nothing was sent to it",
    ] {
        assert!(message.contains(named), "{named}: {message}");
    }
    ran.assert_never_shows(TOKEN);
    assert_eq!(proxy.seen(), [], "the proxy saw a request");
}

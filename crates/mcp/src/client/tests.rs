//! The client against a scripted server written here: one canned HTTP answer per request,
//! in order, each on its own connection. What each test shows is in its name.

use std::io::Write as _;
use std::net::TcpListener;
use std::rc::Rc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use futures::executor::block_on;
use serde_json::{Value, json};

use super::McpClient;
use crate::{CallToolResult, McpError};

/// Answers `answers.len()` requests in order; joining gives the requests as received. A
/// client that stops asking early leaves the server waiting 10 s at most.
fn serve(answers: Vec<String>) -> (String, JoinHandle<Vec<String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let handle = thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut requests = Vec::new();
        for answer in answers {
            let mut stream = loop {
                match listener.accept() {
                    Ok((stream, _)) => break stream,
                    Err(_) if Instant::now() < deadline => thread::sleep(Duration::from_millis(5)),
                    Err(_) => return requests,
                }
            };
            stream.set_nonblocking(false).unwrap();
            requests.push(kiln_testkit::read_http_request(&mut stream));
            stream.write_all(answer.as_bytes()).unwrap();
        }
        requests
    });
    (url, handle)
}

/// The value of header `name` in a raw request.
fn header<'a>(request: &'a str, name: &str) -> Option<&'a str> {
    request.split("\r\n\r\n").next()?.lines().find_map(|line| {
        let (line_name, value) = line.split_once(':')?;
        line_name.eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

fn body(request: &str) -> Value {
    serde_json::from_str(request.split_once("\r\n\r\n").unwrap().1).unwrap()
}

fn answer(status: &str, extra_headers: &str, content_type: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n{extra_headers}\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn json_result(id: u64, result: Value) -> String {
    let body = json!({ "jsonrpc": "2.0", "id": id, "result": result }).to_string();
    answer("200 OK", "", "application/json", &body)
}

/// `initialize` answered (giving `session_id`), then `notifications/initialized` accepted.
fn handshake(id: u64, session_id: &str) -> Vec<String> {
    let result = json!({
        "protocolVersion": "2025-06-18",
        "capabilities": { "tools": {} },
        "serverInfo": { "name": "scripted", "version": "1.0.0" },
    });
    let body = json!({ "jsonrpc": "2.0", "id": id, "result": result }).to_string();
    vec![
        answer(
            "200 OK",
            &format!("Mcp-Session-Id: {session_id}\r\n"),
            "application/json",
            &body,
        ),
        answer("202 Accepted", "", "text/plain", ""),
    ]
}

fn client(url: &str) -> McpClient {
    McpClient::new("scripted", url, kiln_http::default_client())
}

fn tool(name: &str) -> Value {
    json!({ "name": name, "inputSchema": { "type": "object" } })
}

#[test]
fn an_sse_reply_is_read_past_the_notification_before_it() {
    let sse = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\
               \"params\":{\"progress\":1}}\n\n\
               event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":\
               {\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}}\n\n";
    let mut answers = handshake(1, "session-a");
    answers.push(answer("200 OK", "", "text/event-stream", sse));
    let (url, server) = serve(answers);
    let client = client(&url);

    let info = block_on(client.connect()).unwrap();
    assert_eq!(
        (info.name.as_str(), info.protocol_version.as_str()),
        ("scripted", "2025-06-18")
    );
    assert_eq!(client.session_id().as_deref(), Some("session-a"));
    let result = block_on(client.call_tool("echo", json!({ "message": "hi" }))).unwrap();
    assert_eq!(
        result,
        CallToolResult {
            content: vec![json!({ "type": "text", "text": "hi" })],
            structured_content: None,
            is_error: false,
        }
    );

    let requests = server.join().unwrap();
    let [initialize, initialized, call] = requests.as_slice() else {
        panic!("{requests:?}")
    };
    assert_eq!(body(initialize)["params"]["clientInfo"]["name"], "kiln");
    assert_eq!(body(initialize)["params"]["protocolVersion"], "2025-06-18");
    assert_eq!(header(initialize, "mcp-session-id"), None);
    assert_eq!(
        body(initialized),
        json!({ "jsonrpc": "2.0", "method": "notifications/initialized" })
    );
    for request in [initialized, call] {
        assert_eq!(header(request, "mcp-session-id"), Some("session-a"));
        assert_eq!(header(request, "mcp-protocol-version"), Some("2025-06-18"));
        assert_eq!(
            header(request, "accept"),
            Some("application/json, text/event-stream")
        );
        assert_eq!(header(request, "content-type"), Some("application/json"));
    }
    assert_eq!(
        body(call)["params"],
        json!({ "name": "echo", "arguments": { "message": "hi" } })
    );
}

#[test]
fn a_json_rpc_error_is_an_rpc_error() {
    let error = json!({ "jsonrpc": "2.0", "id": 2, "error": { "code": -32602, "message": "Tool nope not found" } });
    let mut answers = handshake(1, "s");
    answers.push(answer("200 OK", "", "application/json", &error.to_string()));
    let (url, server) = serve(answers);
    let error = block_on(client(&url).call_tool("nope", json!({}))).unwrap_err();
    server.join().unwrap();
    assert_eq!(
        error,
        McpError::Rpc {
            server: "scripted".into(),
            method: "tools/call".into(),
            code: -32602,
            message: "Tool nope not found".into(),
        }
    );
    assert_eq!(
        error.to_string(),
        "MCP server `scripted` refused `tools/call`: Tool nope not found (JSON-RPC error -32602)"
    );
}

#[test]
fn malformed_json_names_the_method() {
    let mut answers = handshake(1, "s");
    answers.push(answer(
        "200 OK",
        "",
        "application/json",
        "{\"jsonrpc\":\"2.0\",\"id\":2,",
    ));
    let (url, server) = serve(answers);
    let error = block_on(client(&url).list_tools()).unwrap_err();
    server.join().unwrap();
    assert_eq!(
        error.to_string(),
        "MCP server `scripted` sent a malformed reply to `tools/list`: \
         the JSON reply is not valid JSON: EOF while parsing a value at line 1 column 24"
    );
}

#[test]
fn tools_are_listed_across_pages() {
    let mut answers = handshake(1, "s");
    answers.push(json_result(
        2,
        json!({ "tools": [tool("a"), tool("b")], "nextCursor": "page-2" }),
    ));
    answers.push(json_result(3, json!({ "tools": [tool("c")] })));
    let (url, server) = serve(answers);
    let tools = block_on(client(&url).list_tools()).unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    let requests = server.join().unwrap();
    assert_eq!(body(&requests[2])["params"], json!({}));
    assert_eq!(body(&requests[3])["params"], json!({ "cursor": "page-2" }));
}

#[test]
fn a_repeated_cursor_is_refused() {
    let mut answers = handshake(1, "s");
    answers.push(json_result(
        2,
        json!({ "tools": [tool("a")], "nextCursor": "again" }),
    ));
    answers.push(json_result(
        3,
        json!({ "tools": [tool("a")], "nextCursor": "again" }),
    ));
    let (url, server) = serve(answers);
    let error = block_on(client(&url).list_tools()).unwrap_err();
    server.join().unwrap();
    assert_eq!(
        error.to_string(),
        "MCP server `scripted` sent a malformed reply to `tools/list`: \
         the server repeated the cursor `again`"
    );
}

#[test]
fn a_malformed_tool_is_named() {
    let mut answers = handshake(1, "s");
    answers.push(json_result(
        2,
        json!({ "tools": [tool("a"), { "name": "b" }] }),
    ));
    let (url, server) = serve(answers);
    let error = block_on(client(&url).list_tools()).unwrap_err();
    server.join().unwrap();
    assert_eq!(
        error.to_string(),
        "MCP server `scripted` sent a malformed reply to `tools/list`: \
         tool #1 (`b`) is malformed: missing field `inputSchema`"
    );
}

#[test]
fn a_forgotten_session_is_opened_again_once() {
    let not_found = answer("404 Not Found", "", "text/plain", "Session not found");
    let mut answers = handshake(1, "old");
    answers.push(not_found.clone());
    answers.extend(handshake(3, "new"));
    answers.push(json_result(4, json!({ "content": [] })));
    let (url, server) = serve(answers);
    let client = client(&url);
    block_on(client.connect()).unwrap();
    let result = block_on(client.call_tool("t", json!({}))).unwrap();
    assert_eq!(result.content, Vec::<Value>::new());
    assert_eq!(client.session_id().as_deref(), Some("new"));
    let requests = server.join().unwrap();
    assert_eq!(header(&requests[2], "mcp-session-id"), Some("old"));
    assert_eq!(header(&requests[3], "mcp-session-id"), None);
    assert_eq!(header(&requests[5], "mcp-session-id"), Some("new"));

    // Lost again right after the new session: no loop, SessionLost.
    let mut answers = handshake(1, "old");
    answers.push(not_found.clone());
    answers.extend(handshake(3, "new"));
    answers.push(not_found);
    let (url, server) = serve(answers);
    let client = self::client(&url);
    let error = block_on(client.call_tool("t", json!({}))).unwrap_err();
    server.join().unwrap();
    assert_eq!(
        error,
        McpError::SessionLost {
            server: "scripted".into()
        }
    );
    assert_eq!(client.session_id(), None);
}

#[test]
fn replies_that_are_not_the_protocol_are_named() {
    let cases = [
        (
            answer("500 Internal Server Error", "", "text/plain", "boom"),
            "answered `tools/call` with HTTP 500: boom",
        ),
        (
            answer("202 Accepted", "", "text/plain", ""),
            "sent a malformed reply to `tools/call`: HTTP 202 Accepted with no response",
        ),
        (
            answer(
                "200 OK",
                "",
                "application/json",
                &format!("{{\"pad\":\"{}\"}}", "x".repeat(300)),
            ),
            "sent a malformed reply to `tools/call`: the reply is larger than the 256-byte cap",
        ),
    ];
    for (reply, expected) in cases {
        let mut answers = handshake(1, "s");
        answers.push(reply);
        let (url, server) = serve(answers);
        let client = client(&url).with_max_body_bytes(256);
        let error = block_on(client.call_tool("t", json!({}))).unwrap_err();
        server.join().unwrap();
        let message = error.to_string();
        assert!(message.starts_with("MCP server `scripted`"), "{message}");
        assert!(message.ends_with(expected), "{message}");
    }
}

#[test]
fn close_sends_delete_with_the_session_and_forgets_it() {
    for status in ["200 OK", "405 Method Not Allowed"] {
        let mut answers = handshake(1, "s-1");
        answers.push(answer(status, "", "text/plain", ""));
        let (url, server) = serve(answers);
        let client = client(&url);
        block_on(client.connect()).unwrap();
        block_on(client.close()).unwrap();
        assert_eq!(client.session_id(), None);
        let requests = server.join().unwrap();
        assert!(
            requests[2].starts_with("DELETE /mcp HTTP/1.1\r\n"),
            "{}",
            requests[2]
        );
        assert_eq!(header(&requests[2], "mcp-session-id"), Some("s-1"));
    }
}

#[test]
fn an_unsupported_protocol_revision_is_refused() {
    let result =
        json!({ "protocolVersion": "2099-01-01", "serverInfo": { "name": "n", "version": "1" } });
    let body = json!({ "jsonrpc": "2.0", "id": 1, "result": result }).to_string();
    let (url, server) = serve(vec![answer("200 OK", "", "application/json", &body)]);
    let error = block_on(client(&url).connect()).unwrap_err();
    server.join().unwrap();
    assert_eq!(
        error.to_string(),
        "MCP server `scripted` sent a malformed reply to `initialize`: the server speaks \
         protocol revision `2099-01-01`; this client speaks `2025-06-18`, `2025-03-26`"
    );
}

#[test]
fn no_server_is_unreachable_naming_the_url() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let client = McpClient::new(
        "down",
        url.as_str(),
        Rc::clone(&kiln_http::default_client()),
    );
    let error = block_on(client.list_tools()).unwrap_err();
    assert!(
        matches!(&error, McpError::Unreachable { server, url: got, .. } if server == "down" && *got == url),
        "{error:?}"
    );
}

#[test]
fn errors_show_the_endpoint_without_its_credentials() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let client = McpClient::new(
        "keyed",
        format!("http://127.0.0.1:{port}/mcp?api_key=sk-in-url"),
        kiln_http::default_client(),
    );
    let error = block_on(client.connect()).unwrap_err().to_string();
    assert!(!error.contains("sk-in-url"), "{error}");
    assert!(
        error.contains(&format!("http://127.0.0.1:{port}/mcp?…")),
        "{error}"
    );
    assert!(!format!("{client:?}").contains("sk-in-url"));
}

/// A priming event alone: an id to resume from and the wait the server asks for.
fn priming(event_id: &str, retry_ms: Option<u64>) -> String {
    let retry = retry_ms
        .map(|ms| format!("retry: {ms}\n"))
        .unwrap_or_default();
    answer(
        "200 OK",
        "",
        "text/event-stream",
        &format!("id: {event_id}\n{retry}data:\n\n"),
    )
}

#[test]
fn a_stream_that_ends_before_the_response_is_resumed_after_its_retry() {
    // As the conformance suite's `sse-retry` scenario does: the call's stream holds only a
    // priming event and closes; the answer comes on the GET that resumes it.
    let mut answers = handshake(1, "session-r");
    answers.push(priming("ev-1", Some(500)));
    answers.push(answer(
        "200 OK",
        "",
        "text/event-stream",
        "id: ev-2\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"late\"}]}}\n\n",
    ));
    let (url, server) = serve(answers);
    let clock = kiln_http::FakeClock::auto_advancing();
    let client = client(&url).with_clock(Rc::new(clock.clone()));
    let result = block_on(client.call_tool("echo", json!({}))).unwrap();
    assert_eq!(
        result.content,
        vec![json!({ "type": "text", "text": "late" })]
    );
    // It waited the server's retry, once.
    assert_eq!(clock.sleeps(), [500]);
    let requests = server.join().unwrap();
    let resume = &requests[3];
    assert!(resume.starts_with("GET /mcp "), "{resume}");
    assert_eq!(header(resume, "last-event-id"), Some("ev-1"));
    assert_eq!(header(resume, "mcp-session-id"), Some("session-r"));
    assert_eq!(header(resume, "accept"), Some("text/event-stream"));
}

#[test]
fn resuming_is_bounded_and_a_server_without_streams_is_named() {
    // Without a retry the client waits its own default; after MAX_RESUMES it gives up.
    let mut answers = handshake(1, "session-b");
    for n in 0..=super::MAX_RESUMES {
        answers.push(priming(&format!("ev-{n}"), None));
    }
    let (url, server) = serve(answers);
    let clock = kiln_http::FakeClock::auto_advancing();
    let bounded = client(&url).with_clock(Rc::new(clock.clone()));
    let error = block_on(bounded.call_tool("echo", json!({})))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("the event stream ended without a response to request id 2 after 1 event(s), resumed 5 times from its last event `ev-5`; gave up"),
        "{error}"
    );
    assert_eq!(
        clock.sleeps(),
        [super::DEFAULT_RETRY_MS; super::MAX_RESUMES]
    );
    assert_eq!(server.join().unwrap().len(), 3 + super::MAX_RESUMES);

    let mut answers = handshake(1, "session-c");
    answers.push(priming("ev-1", Some(10)));
    answers.push(answer(
        "405 Method Not Allowed",
        "",
        "application/json",
        "{}",
    ));
    let (url, server) = serve(answers);
    let quick = client(&url).with_clock(Rc::new(kiln_http::FakeClock::auto_advancing()));
    let error = block_on(quick.call_tool("echo", json!({})))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("the event stream ended before the response, and the server offers no stream to resume it from (GET answered HTTP 405)"),
        "{error}"
    );
    server.join().unwrap();
}

//! The client against scripted servers written here. Over real HTTP (`serve`): one canned
//! answer per request, in order, each on its own connection. Through a scripted
//! `HttpClient` (`ScriptedHttp`): replies whose bodies stay open, wait for the client, or
//! stall, which a server that closes each connection cannot show. What each test shows is
//! in its name.

#![expect(
    clippy::disallowed_methods,
    reason = "a test's own deadline and timings are real time: they bound and check what ran, not the code's clock"
)]

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::Write as _;
use std::net::TcpListener;
use std::rc::Rc;
use std::task::Poll;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use futures::executor::block_on;
use futures::future::{self, LocalBoxFuture};
use futures::{FutureExt as _, StreamExt as _, stream};
use kiln_http::{BodyStream, HttpClient, HttpError, Request, Response, StreamingResponse};
use kiln_types::Redacted;
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

/// A client of a scripted loopback server, which answers the requests it expects in
/// order: without the session's own stream (a test of it scripts it).
fn client(url: &str) -> McpClient {
    McpClient::new("scripted", url, kiln_http::default_client()).with_session_stream(false)
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

// Streams that stay open, servers that wait for an answer, and bodies that stall: the
// scripted HTTP client below answers at once from a script (every future is ready when
// first polled, and the `FakeClock` auto-advances), so each call is driven by a single poll
// ([`now`]): one still pending reads past its response or waits for what never comes.

/// What [`ScriptedHttp`] answers to one request.
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: BodyStream,
}

/// One request as the client made it, and the idle timeout it asked for (`None` for `send`).
struct Seen {
    request: Request,
    idle_timeout_ms: Option<u64>,
}

/// An `HttpClient` answering `open` and `send` from a script, in order, and writing down
/// each request. A request past the end of the script is unreachable.
#[derive(Default)]
struct ScriptedHttp {
    script: RefCell<VecDeque<Result<Reply, HttpError>>>,
    seen: RefCell<Vec<Seen>>,
}

impl ScriptedHttp {
    fn then(&self, reply: Result<Reply, HttpError>) -> &Self {
        self.script.borrow_mut().push_back(reply);
        self
    }

    fn next(&self, request: Request, idle_timeout_ms: Option<u64>) -> Result<Reply, HttpError> {
        let url = request.url.clone();
        self.seen.borrow_mut().push(Seen {
            request,
            idle_timeout_ms,
        });
        self.script
            .borrow_mut()
            .pop_front()
            .unwrap_or(Err(HttpError::Unreachable {
                url,
                message: "the script has no more replies".into(),
            }))
    }

    /// How many requests the client made so far.
    fn n_seen(&self) -> usize {
        self.seen.borrow().len()
    }
}

impl HttpClient for ScriptedHttp {
    fn send(&self, request: Request) -> LocalBoxFuture<'static, Result<Response, HttpError>> {
        let reply = self.next(request, None).map(|reply| {
            let chunks = now(reply.body.collect::<Vec<_>>());
            Response {
                status: reply.status,
                headers: reply.headers,
                body: chunks.into_iter().flatten().flatten().collect(),
                truncated: false,
            }
        });
        Box::pin(future::ready(reply))
    }

    fn open(
        &self,
        request: Request,
        idle_timeout_ms: u64,
    ) -> LocalBoxFuture<'static, Result<StreamingResponse, HttpError>> {
        let reply = self
            .next(request, Some(idle_timeout_ms))
            .map(|reply| StreamingResponse {
                status: reply.status,
                headers: reply.headers,
                body: reply.body,
            });
        Box::pin(future::ready(reply))
    }
}

const FAKE_URL: &str = "http://mcp.test/mcp";

/// `future`'s output, which must be ready at its first poll.
fn now<T>(future: impl Future<Output = T>) -> T {
    future
        .now_or_never()
        .expect("still pending: it waits for a stream that stays open or for an answer")
}

fn chunks(chunks: &[&str]) -> Vec<Result<Vec<u8>, HttpError>> {
    chunks
        .iter()
        .map(|chunk| Ok(chunk.as_bytes().to_vec()))
        .collect()
}

/// A body of `chunks` that then ends.
fn ending(chunks: Vec<Result<Vec<u8>, HttpError>>) -> BodyStream {
    stream::iter(chunks).boxed_local()
}

/// A body of `chunks` that then stays open, sending nothing more.
fn staying_open(chunks: Vec<Result<Vec<u8>, HttpError>>) -> BodyStream {
    stream::iter(chunks).chain(stream::pending()).boxed_local()
}

fn reply(status: u16, headers: &[(&str, &str)], body: BodyStream) -> Result<Reply, HttpError> {
    Ok(Reply {
        status,
        headers: headers
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect(),
        body,
    })
}

const EVENT_STREAM: (&str, &str) = ("content-type", "text/event-stream");

fn accepted() -> Result<Reply, HttpError> {
    reply(202, &[], ending(Vec::new()))
}

/// One SSE `message` event carrying `message`.
fn event(message: &Value) -> String {
    format!("event: message\ndata: {message}\n\n")
}

fn tool_result(id: u64, text: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": { "content": [{ "type": "text", "text": text }] } })
}

/// A scripted client after the handshake (`initialize` answered with `session_id`, then
/// `notifications/initialized` accepted), its first request id 2.
fn scripted(session_id: &str) -> (Rc<ScriptedHttp>, McpClient) {
    let http = Rc::new(ScriptedHttp::default());
    let result = json!({
        "protocolVersion": "2025-06-18",
        "capabilities": { "tools": {} },
        "serverInfo": { "name": "scripted", "version": "1.0.0" },
    });
    let initialize = json!({ "jsonrpc": "2.0", "id": 1, "result": result }).to_string();
    http.then(reply(
        200,
        &[
            ("content-type", "application/json"),
            ("mcp-session-id", session_id),
        ],
        ending(chunks(&[&initialize])),
    ))
    .then(accepted());
    let client = McpClient::new("scripted", FAKE_URL, Rc::clone(&http) as Rc<dyn HttpClient>)
        .with_timeout_ms(7_000)
        .with_clock(Rc::new(kiln_http::FakeClock::auto_advancing()))
        // Each script says what the call's stream holds; listening is tested on its own.
        .with_session_stream(false);
    now(client.connect()).unwrap();
    (http, client)
}

fn fake_header<'a>(request: &'a Request, name: &str) -> Option<&'a str> {
    request
        .headers
        .iter()
        .find(|(header_name, _)| header_name.eq_ignore_ascii_case(name))
        .map(|(_, value)| value.as_str())
}

fn fake_body(request: &Request) -> Value {
    serde_json::from_slice(request.body.as_deref().unwrap()).unwrap()
}

fn texts(result: &CallToolResult) -> Vec<&str> {
    result
        .content
        .iter()
        .filter_map(|block| block["text"].as_str())
        .collect()
}

#[test]
fn a_resumed_stream_that_stays_open_after_the_response_is_read_up_to_it() {
    // The conformance suite's `sse-retry`: the call's stream holds a priming event and
    // closes; the GET that resumes it primes again, sends the response, and stays open.
    let (http, client) = scripted("session-r");
    let clock = kiln_http::FakeClock::auto_advancing();
    let client = client.with_clock(Rc::new(clock.clone()));
    http.then(reply(
        200,
        &[EVENT_STREAM],
        ending(chunks(&["id: event-1\nretry: 500\ndata: \n\n"])),
    ))
    .then(reply(
        200,
        &[EVENT_STREAM],
        staying_open(chunks(&[
            "id: event-2\nretry: 500\ndata: \n\n",
            &format!("id: event-3\n{}", event(&tool_result(2, "reconnected"))),
        ])),
    ));

    let result = now(client.call_tool("test_reconnection", json!({}))).unwrap();
    assert_eq!(texts(&result), ["reconnected"]);
    assert_eq!(clock.sleeps(), [500]);
    let seen = http.seen.borrow();
    let resume = &seen[3];
    assert_eq!(resume.request.method, "GET");
    assert_eq!(
        fake_header(&resume.request, "last-event-id"),
        Some("event-1")
    );
    assert_eq!(
        fake_header(&resume.request, "mcp-session-id"),
        Some("session-r")
    );
    // Both the call and its resumption read with the exchange timeout as the idle timeout.
    assert_eq!(seen[2].idle_timeout_ms, Some(7_000));
    assert_eq!(resume.idle_timeout_ms, Some(7_000));
    assert_eq!(seen.len(), 4);
}

#[test]
fn a_post_stream_that_stays_open_after_the_response_returns_at_once() {
    let progress = json!({ "jsonrpc": "2.0", "method": "notifications/progress", "params": { "progress": 1 } });
    let response = event(&tool_result(2, "done"));
    // The response's event arrives cut in two chunks, as a network may deliver it.
    let (head, tail) = response.split_at(30);
    let (http, client) = scripted("s");
    http.then(reply(
        200,
        &[EVENT_STREAM],
        staying_open(chunks(&[&event(&progress), head, tail])),
    ));
    let result = now(client.call_tool("slow", json!({}))).unwrap();
    assert_eq!(texts(&result), ["done"]);
    assert_eq!(http.n_seen(), 3);
}

/// A body that sends `first`, then `last` only once the client has made `n_requests`
/// requests (as a server waiting for an answer does), then stays open.
fn after_requests(
    http: &Rc<ScriptedHttp>,
    n_requests: usize,
    first: &[&str],
    last: String,
) -> BodyStream {
    let http = Rc::clone(http);
    let mut last = Some(last);
    let waiting = stream::poll_fn(move |_| {
        if http.n_seen() < n_requests {
            return Poll::Pending;
        }
        match last.take() {
            Some(chunk) => Poll::Ready(Some(Ok(chunk.into_bytes()))),
            None => Poll::Pending,
        }
    });
    stream::iter(chunks(first)).chain(waiting).boxed_local()
}

#[test]
fn server_requests_on_the_stream_are_answered_before_the_response() {
    // The conformance suite's `elicitation-sep1034-client-defaults`: the tool asks the
    // client to elicit, and answers only once it has the client's answer.
    let elicit = json!({
        "jsonrpc": "2.0",
        "id": "elicit-1",
        "method": "elicitation/create",
        "params": { "message": "please accept", "requestedSchema": { "type": "object" } },
    });
    let ping = json!({ "jsonrpc": "2.0", "id": 41, "method": "ping" });
    let (http, client) = scripted("session-e");
    // The call's stream, then the two answers' replies, then the response (after both).
    let body = after_requests(
        &http,
        5,
        &[&event(&elicit), &event(&ping)],
        event(&tool_result(2, "elicitation declined")),
    );
    http.then(reply(200, &[EVENT_STREAM], body))
        .then(accepted())
        .then(accepted());

    let result = now(client.call_tool("test_client_elicitation_defaults", json!({}))).unwrap();
    assert_eq!(texts(&result), ["elicitation declined"]);

    let seen = http.seen.borrow();
    let answers: Vec<Value> = seen[3..]
        .iter()
        .map(|seen| fake_body(&seen.request))
        .collect();
    assert_eq!(
        answers,
        [
            json!({
                "jsonrpc": "2.0",
                "id": "elicit-1",
                "error": {
                    "code": -32601,
                    "message": "Kiln's MCP client does not offer `elicitation/create`: it declared no capability for it",
                },
            }),
            json!({ "jsonrpc": "2.0", "id": 41, "result": {} }),
        ]
    );
    for answer in &seen[3..] {
        let request = &answer.request;
        assert_eq!(
            (request.method.as_str(), request.url.as_str()),
            ("POST", FAKE_URL)
        );
        assert_eq!(fake_header(request, "mcp-session-id"), Some("session-e"));
        assert_eq!(
            fake_header(request, "mcp-protocol-version"),
            Some("2025-06-18")
        );
        assert_eq!(
            fake_header(request, "content-type"),
            Some("application/json")
        );
    }
    // The client still declares no capability, so it is right to refuse.
    assert_eq!(
        fake_body(&seen[0].request)["params"]["capabilities"],
        json!({})
    );
}

#[test]
fn an_answer_the_server_does_not_take_does_not_fail_the_call() {
    let ping = |id: u64| event(&json!({ "jsonrpc": "2.0", "id": id, "method": "ping" }));
    let (http, client) = scripted("s");
    http.then(reply(
        200,
        &[EVENT_STREAM],
        staying_open(chunks(&[
            &ping(10),
            &ping(11),
            &event(&tool_result(2, "ok")),
        ])),
    ))
    .then(Err(HttpError::Unreachable {
        url: FAKE_URL.into(),
        message: "connection refused".into(),
    }))
    .then(reply(
        500,
        &[("content-type", "text/plain")],
        ending(chunks(&["boom"])),
    ));
    let result = now(client.call_tool("t", json!({}))).unwrap();
    assert_eq!(texts(&result), ["ok"]);
    assert_eq!(http.n_seen(), 5);
}

#[test]
fn a_reply_that_overflows_stalls_or_breaks_is_named() {
    let http_error = |error: fn(String) -> HttpError| Err(error(FAKE_URL.to_owned()));
    let too_large = |url| HttpError::TooLarge { url, limit: 256 };
    let stalled = |url| HttpError::Stalled {
        url,
        idle_ms: 7_000,
    };
    let broken = |url| HttpError::Body {
        url,
        message: "connection reset".into(),
    };
    let progress =
        event(&json!({ "jsonrpc": "2.0", "method": "notifications/progress", "params": {} }));
    let json = ("content-type", "application/json");
    let timeout = McpError::Timeout {
        server: "scripted".into(),
        url: FAKE_URL.into(),
        method: "tools/call".into(),
        timeout_ms: 7_000,
    };
    let cases = [
        (
            json,
            vec![
                Ok(b"{\"jsonrpc\":\"2.0\",\"id\":2,".to_vec()),
                http_error(too_large),
            ],
            McpError::Protocol {
                server: "scripted".into(),
                method: "tools/call".into(),
                message: "the reply is larger than the 256-byte cap".into(),
            },
        ),
        (
            EVENT_STREAM,
            vec![Ok(progress.clone().into_bytes()), http_error(too_large)],
            McpError::Protocol {
                server: "scripted".into(),
                method: "tools/call".into(),
                message: "the reply is larger than the 256-byte cap".into(),
            },
        ),
        (
            EVENT_STREAM,
            vec![Ok(progress.clone().into_bytes()), http_error(stalled)],
            timeout.clone(),
        ),
        (json, vec![http_error(stalled)], timeout),
        (
            EVENT_STREAM,
            vec![Ok(progress.into_bytes()), http_error(broken)],
            McpError::Unreachable {
                server: "scripted".into(),
                url: FAKE_URL.into(),
                message: "the connection broke while reading the reply: connection reset".into(),
            },
        ),
    ];
    for (content_type, body, expected) in cases {
        let (http, client) = scripted("s");
        http.then(reply(200, &[content_type], ending(body)));
        let error = now(client.call_tool("t", json!({}))).unwrap_err();
        assert_eq!(error, expected);
    }

    // A resumed stream that stalls is a timeout too.
    let (http, client) = scripted("s");
    http.then(reply(
        200,
        &[EVENT_STREAM],
        ending(chunks(&["id: e-1\nretry: 5\ndata:\n\n"])),
    ))
    .then(reply(
        200,
        &[EVENT_STREAM],
        ending(vec![http_error(stalled)]),
    ));
    let error = now(client.call_tool("t", json!({}))).unwrap_err();
    assert_eq!(
        error.to_string(),
        "MCP server `scripted` at `http://mcp.test/mcp` did not answer `tools/call` within 7000 ms"
    );
}

#[test]
fn a_json_reply_in_many_chunks_is_read_whole() {
    let response =
        json!({ "jsonrpc": "2.0", "id": 2, "result": { "tools": [tool("a")] } }).to_string();
    let (first, rest) = response.split_at(10);
    let (http, client) = scripted("s");
    http.then(reply(
        200,
        &[("content-type", "application/json")],
        ending(chunks(&[first, rest])),
    ));
    let tools = now(client.list_tools()).unwrap();
    assert_eq!(tools.len(), 1);
}

#[test]
fn a_400_naming_no_valid_session_opens_a_new_one() {
    // As servers built on the TypeScript SDK's examples answer a session they forgot; the
    // words arrive split across chunks.
    let (http, client) = scripted("old");
    let initialize = json!({
        "jsonrpc": "2.0",
        "id": 3,
        "result": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "serverInfo": { "name": "scripted", "version": "1.0.0" },
        },
    })
    .to_string();
    http.then(reply(
        400,
        &[("content-type", "application/json")],
        ending(chunks(&[
            r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid ses"#,
            r#"sion ID provided"},"id":null}"#,
        ])),
    ))
    .then(reply(
        200,
        &[
            ("content-type", "application/json"),
            ("mcp-session-id", "new"),
        ],
        ending(chunks(&[&initialize])),
    ))
    .then(accepted())
    .then(reply(
        200,
        &[EVENT_STREAM],
        staying_open(chunks(&[&event(&tool_result(4, "again"))])),
    ));
    let result = now(client.call_tool("t", json!({}))).unwrap();
    assert_eq!(texts(&result), ["again"]);
    assert_eq!(client.session_id().as_deref(), Some("new"));
    let seen = http.seen.borrow();
    assert_eq!(fake_header(&seen[2].request, "mcp-session-id"), Some("old"));
    assert_eq!(fake_header(&seen[3].request, "mcp-session-id"), None);
    assert_eq!(fake_header(&seen[5].request, "mcp-session-id"), Some("new"));
    assert_eq!(seen.len(), 6);
}

/// Polls `future` until it is ready, at most `polls` times (the scripted replies wake
/// nobody: each poll looks again).
fn settle<T>(future: impl Future<Output = T>, polls: usize) -> T {
    let waker = futures::task::noop_waker();
    let mut context = std::task::Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    for _ in 0..polls {
        if let Poll::Ready(value) = future.as_mut().poll(&mut context) {
            return value;
        }
    }
    panic!("still pending after {polls} polls");
}

#[test]
fn a_request_on_the_sessions_own_stream_is_answered_while_a_call_waits() {
    // The MCP TypeScript SDK sends a tool's `elicitation/create` on the session's own GET
    // stream when the tool names no related request; the tool answers only after.
    let elicit = json!({"jsonrpc": "2.0", "id": 0, "method": "elicitation/create", "params": {"message": "ok?"}});
    let http = Rc::new(ScriptedHttp::default());
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "result": {
        "protocolVersion": "2025-06-18",
        "capabilities": { "tools": {} },
        "serverInfo": { "name": "scripted", "version": "1.0.0" },
    }})
    .to_string();
    let session_stream = stream::iter(chunks(&[&event(&elicit)]))
        .chain(stream::pending())
        .boxed_local();
    // 0 initialize, 1 initialized, 2 the session's GET, 3 the call, 4 the answer; the
    // call's response waits for the answer.
    let call_stream = after_requests(&http, 5, &[], event(&tool_result(2, "went on")));
    http.then(reply(
        200,
        &[
            ("content-type", "application/json"),
            ("mcp-session-id", "session-g"),
        ],
        ending(chunks(&[&initialize])),
    ))
    .then(accepted())
    .then(reply(200, &[EVENT_STREAM], session_stream))
    .then(reply(200, &[EVENT_STREAM], call_stream))
    .then(accepted());
    let client = McpClient::new("scripted", FAKE_URL, Rc::clone(&http) as Rc<dyn HttpClient>)
        .with_clock(Rc::new(kiln_http::FakeClock::auto_advancing()));
    now(client.connect()).unwrap();
    let result = settle(client.call_tool("asks", json!({})), 20).unwrap();
    assert_eq!(texts(&result), ["went on"]);
    let seen = http.seen.borrow();
    let get = &seen[2].request;
    assert_eq!(get.method, "GET");
    assert_eq!(fake_header(get, "accept"), Some("text/event-stream"));
    assert_eq!(fake_header(get, "mcp-session-id"), Some("session-g"));
    assert_eq!(fake_header(get, "last-event-id"), None);
    assert_eq!(
        fake_body(&seen[4].request),
        json!({"jsonrpc": "2.0", "id": 0, "error": {"code": -32601, "message": "Kiln's MCP client does not offer `elicitation/create`: it declared no capability for it"}})
    );
}

/// The client of `url` sending `Authorization: Bearer <TOKEN>` from the secret `TOKEN`.
fn authorized(url: &str) -> McpClient {
    let header =
        crate::Header::new("Authorization", Redacted::new(format!("Bearer {TOKEN}"))).unwrap();
    McpClient::new("scripted", url, kiln_http::default_client())
        .with_headers(vec![header])
        .with_secrets(vec![("TOKEN".into(), Redacted::new(TOKEN))])
}

const TOKEN: &str = "tok-3f9a1c77e2";

#[test]
fn extra_headers_go_on_every_exchange_and_an_echo_of_the_secret_is_scrubbed() {
    let mut answers = handshake(1, "s-1");
    // The session's own stream (the GET), then the call, then the DELETE.
    answers.push(answer("405 Method Not Allowed", "", "text/plain", ""));
    answers.push(json_result(
        2,
        json!({"content": [{"type": "text", "text": format!("you sent Bearer {TOKEN}")}],
               "structuredContent": {TOKEN: [TOKEN]}}),
    ));
    answers.push(answer("200 OK", "", "text/plain", ""));
    let (url, server) = serve(answers);
    let client = authorized(&url);
    let shown = format!("{client:?}");
    assert!(!shown.contains(TOKEN), "{shown}");
    assert!(shown.contains("Authorization: <redacted>"), "{shown}");
    block_on(client.connect()).unwrap();
    let result = block_on(client.call_tool("echo", json!({}))).unwrap();
    block_on(client.close()).unwrap();
    let requests = server.join().unwrap();
    let methods: Vec<&str> = requests
        .iter()
        .map(|request| request.split(' ').next().unwrap_or_default())
        .collect();
    assert_eq!(methods, ["POST", "POST", "GET", "POST", "DELETE"]);
    for request in &requests {
        let expected = format!("Bearer {TOKEN}");
        assert_eq!(
            header(request, "authorization"),
            Some(expected.as_str()),
            "{request}"
        );
    }
    assert_eq!(
        result.content,
        [json!({"type": "text", "text": "you sent Bearer [redacted:TOKEN]"})]
    );
    assert_eq!(
        result.structured_content,
        Some(json!({"[redacted:TOKEN]": ["[redacted:TOKEN]"]}))
    );
}

#[test]
fn an_error_quoting_the_secret_is_scrubbed_even_where_its_excerpt_is_cut() {
    let whole = format!("{{\"error\": \"invalid token Bearer {TOKEN}\"}}");
    // An error quotes the first 300 characters: the token starts 4 before the cut.
    let cut = format!("{}{TOKEN}", "x".repeat(296));
    let rpc = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": format!("no {TOKEN}")}})
        .to_string();
    let cases = [
        answer("401 Unauthorized", "", "application/json", &whole),
        answer("401 Unauthorized", "", "text/plain", &cut),
        answer("200 OK", "", "application/json", &rpc),
    ];
    for reply in cases {
        let (url, server) = serve(vec![reply]);
        let error = block_on(authorized(&url).connect())
            .unwrap_err()
            .to_string();
        server.join().unwrap();
        assert!(!error.contains(TOKEN), "{error}");
        assert!(
            !error.contains(&TOKEN[..4]),
            "the token's start is left: {error}"
        );
        assert!(error.contains("[redacted:TOKEN]"), "{error}");
    }
}

//! The client against the real reference server, `@modelcontextprotocol/server-everything`,
//! run natively with `node` over Streamable HTTP on a free loopback port.
//!
//! The package is found at `$KILN_MCP_EVERYTHING`, else under `servers/node_modules` at
//! the workspace root, where `cargo xtask test` installs it. Without it these tests fail:
//! they are never skipped.

use std::cell::RefCell;
use std::rc::Rc;

use futures::executor::block_on;
use futures::future::LocalBoxFuture;
use kiln_http::{HttpClient, HttpError, Request, Response, StreamingResponse};
use kiln_mcp::{CallToolResult, McpClient, McpError, PROTOCOL_VERSION};
use kiln_testkit::{EverythingServer, free_port};
use serde_json::json;

/// Each exchange's method, session id sent, and status (`None`: no response).
type Exchanges = Rc<RefCell<Vec<(String, Option<String>, Option<u16>)>>>;

/// The platform client, writing down every exchange.
struct Recording {
    inner: Rc<dyn HttpClient>,
    exchanges: Exchanges,
}

impl Recording {
    /// Writes down `request`'s exchange once its status is in.
    fn record<T: 'static>(
        &self,
        request: &Request,
        response: LocalBoxFuture<'static, Result<T, HttpError>>,
        status: fn(&T) -> u16,
    ) -> LocalBoxFuture<'static, Result<T, HttpError>> {
        let method = request.method.clone();
        let session_id = request
            .headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case("mcp-session-id"))
            .map(|(_, value)| value.clone());
        let exchanges = Rc::clone(&self.exchanges);
        Box::pin(async move {
            let response = response.await;
            let status = response.as_ref().ok().map(status);
            exchanges.borrow_mut().push((method, session_id, status));
            response
        })
    }
}

impl HttpClient for Recording {
    fn send(&self, request: Request) -> LocalBoxFuture<'static, Result<Response, HttpError>> {
        let response = self.inner.send(request.clone());
        self.record(&request, response, |response| response.status)
    }

    fn open(
        &self,
        request: Request,
        idle_timeout_ms: u64,
    ) -> LocalBoxFuture<'static, Result<StreamingResponse, HttpError>> {
        let response = self.inner.open(request.clone(), idle_timeout_ms);
        self.record(&request, response, |response| response.status)
    }
}

fn recording_client(url: &str) -> (McpClient, Exchanges) {
    let exchanges = Exchanges::default();
    let http = Recording {
        inner: kiln_http::default_client(),
        exchanges: Rc::clone(&exchanges),
    };
    (McpClient::new("everything", url, Rc::new(http)), exchanges)
}

fn text(text: &str) -> serde_json::Value {
    json!({ "type": "text", "text": text })
}

#[test]
fn a_full_session_with_the_reference_server() {
    let server = EverythingServer::start();
    let (client, exchanges) = recording_client(&server.url());
    block_on(async {
        let info = client.connect().await.unwrap();
        assert_eq!(
            (
                info.name.as_str(),
                info.version.as_str(),
                info.protocol_version.as_str()
            ),
            ("mcp-servers/everything", "2.0.0", PROTOCOL_VERSION)
        );
        assert!(
            info.instructions
                .unwrap()
                .starts_with("# Everything Server")
        );
        let session_id = client.session_id().unwrap();

        let tools = client.list_tools().await.unwrap();
        let tool = |name: &str| {
            tools
                .iter()
                .find(|tool| tool.name == name)
                .unwrap_or_else(|| panic!("no `{name}`"))
        };
        let get_sum = tool("get-sum");
        assert_eq!(get_sum.title.as_deref(), Some("Get Sum Tool"));
        assert_eq!(get_sum.input_schema["type"], "object");
        assert_eq!(get_sum.input_schema["properties"]["a"]["type"], "number");
        assert_eq!(get_sum.input_schema["properties"]["b"]["type"], "number");
        assert_eq!(get_sum.annotations.as_ref().unwrap()["readOnlyHint"], true);
        assert_eq!(
            tool("echo").input_schema["properties"]["message"]["type"],
            "string"
        );
        let structured = tool("get-structured-content");
        assert_eq!(
            structured.output_schema.as_ref().unwrap()["properties"]["humidity"]["type"],
            "number"
        );

        let sum = client
            .call_tool("get-sum", json!({ "a": 2, "b": 3 }))
            .await
            .unwrap();
        let expected = CallToolResult {
            content: vec![text("The sum of 2 and 3 is 5.")],
            structured_content: None,
            is_error: false,
        };
        assert_eq!(sum, expected);

        let echo = client
            .call_tool("echo", json!({ "message": "hello kiln" }))
            .await
            .unwrap();
        assert_eq!(
            (echo.content, echo.is_error),
            (vec![text("Echo: hello kiln")], false)
        );

        let weather =
            json!({ "temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82 });
        let result = client
            .call_tool("get-structured-content", json!({ "location": "Chicago" }))
            .await
            .unwrap();
        assert_eq!(result.structured_content, Some(weather.clone()));
        assert_eq!(result.content, vec![text(&weather.to_string())]);

        // The server's SDK turns an unknown tool into a tool error, not a JSON-RPC error.
        let unknown = client.call_tool("no-such-tool", json!({})).await.unwrap();
        let expected = CallToolResult {
            content: vec![text("MCP error -32602: Tool no-such-tool not found")],
            structured_content: None,
            is_error: true,
        };
        assert_eq!(unknown, expected);

        client.close().await.unwrap();
        assert_eq!(client.session_id(), None);
        let delete = ("DELETE".to_owned(), Some(session_id.clone()), Some(200));
        assert_eq!(exchanges.borrow().last(), Some(&delete));

        // The server really dropped the session: it no longer knows the id.
        let forgotten = kiln_http::default_client()
            .send(Request {
                method: "POST".into(),
                url: server.url(),
                headers: vec![
                    ("Content-Type".into(), "application/json".into()),
                    (
                        "Accept".into(),
                        "application/json, text/event-stream".into(),
                    ),
                    ("Mcp-Session-Id".into(), session_id),
                ],
                body: Some(br#"{"jsonrpc":"2.0","id":99,"method":"tools/list"}"#.to_vec()),
                timeout_ms: 5_000,
                max_body_bytes: 4096,
                redirect: kiln_http::Redirect::Follow,
            })
            .await
            .unwrap();
        assert_eq!(forgotten.status, 400);
        assert_eq!(
            String::from_utf8(forgotten.body).unwrap(),
            r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"}}"#
        );
    });
}

#[test]
fn a_server_that_is_down_is_unreachable() {
    let url = format!("http://127.0.0.1:{}/mcp", free_port());
    let (client, _) = recording_client(&url);
    let error = block_on(client.connect()).unwrap_err();
    let McpError::Unreachable {
        server,
        url: error_url,
        ..
    } = &error
    else {
        panic!("expected Unreachable, got {error:?}");
    };
    assert_eq!(
        (server.as_str(), error_url.as_str()),
        ("everything", url.as_str())
    );
    let message = error.to_string();
    assert!(
        message.starts_with(&format!(
            "MCP server `everything` at `{url}` is unreachable: "
        )),
        "{message}"
    );
}

#[test]
fn a_server_that_dies_and_comes_back_gets_a_new_session() {
    let mut server = EverythingServer::start();
    let port = server.port;
    let url = server.url();
    let (client, exchanges) = recording_client(&url);
    let sum = |a: i64, b: i64| client.call_tool("get-sum", json!({ "a": a, "b": b }));

    block_on(client.connect()).unwrap();
    let first_session = client.session_id().unwrap();
    assert_eq!(
        block_on(sum(1, 1)).unwrap().content,
        vec![text("The sum of 1 and 1 is 2.")]
    );

    drop(server);
    let error = block_on(sum(2, 2)).unwrap_err();
    assert!(
        matches!(&error, McpError::Unreachable { url: got, .. } if *got == url),
        "{error:?}"
    );
    // Unreachable is not a lost session: the client still holds it, and did not retry.
    assert_eq!(client.session_id().as_deref(), Some(first_session.as_str()));

    server = EverythingServer::start_on(port);
    exchanges.borrow_mut().clear();
    assert_eq!(
        block_on(sum(3, 4)).unwrap().content,
        vec![text("The sum of 3 and 4 is 7.")]
    );
    let second_session = client.session_id().unwrap();
    assert_ne!(second_session, first_session);
    // The old session was refused (400, as this server answers), then a new handshake and
    // the new session's own stream, then the same call again on the new session.
    let expected = [
        ("POST".to_owned(), Some(first_session), Some(400)),
        ("POST".to_owned(), None, Some(200)),
        ("POST".to_owned(), Some(second_session.clone()), Some(202)),
        ("GET".to_owned(), Some(second_session.clone()), Some(200)),
        ("POST".to_owned(), Some(second_session), Some(200)),
    ];
    assert_eq!(exchanges.borrow().as_slice(), expected.as_slice());
    drop(server);
}

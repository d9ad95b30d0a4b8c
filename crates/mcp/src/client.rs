//! [`McpClient`]: one server, one session, requests over Streamable HTTP.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::fmt;
use std::rc::Rc;

use kiln_http::{Clock, HttpClient, HttpError, Request, Response, SystemClock, shown_url};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::reply::{Found, RpcOutcome, excerpt, find_response};
use crate::{
    CallToolResult, DEFAULT_MAX_BODY_BYTES, DEFAULT_TIMEOUT_MS, MAX_TOOL_PAGES, McpError, McpTool,
    PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS, ServerInfo,
};

const SESSION_ID_HEADER: &str = "Mcp-Session-Id";
const LAST_EVENT_ID_HEADER: &str = "Last-Event-ID";

/// The most times one request's event stream is resumed before the request is given up.
pub const MAX_RESUMES: usize = 5;

/// How long to wait before resuming a stream whose server set no `retry` (SSE leaves the
/// default to the client). A server's `retry` is honoured up to the exchange timeout.
pub const DEFAULT_RETRY_MS: u64 = 1_000;
const PROTOCOL_VERSION_HEADER: &str = "MCP-Protocol-Version";

/// A client for one MCP server at one Streamable HTTP endpoint.
///
/// Defaults, each the safe one: every exchange ends within [`DEFAULT_TIMEOUT_MS`]
/// ([`Self::with_timeout_ms`]) and a reply over [`DEFAULT_MAX_BODY_BYTES`]
/// ([`Self::with_max_body_bytes`]) is refused. Requests before [`Self::connect`] connect
/// first. A session the server forgot is opened again once, transparently.
///
/// Single-threaded (`Rc`, `RefCell`): no borrow is held across an `.await`, so calls may
/// interleave on one executor.
pub struct McpClient {
    name: String,
    url: String,
    http: Rc<dyn HttpClient>,
    timeout_ms: u64,
    max_body_bytes: usize,
    session: RefCell<Option<Session>>,
    next_id: Cell<u64>,
    /// Waits out a server's `retry` before resuming a stream.
    clock: Rc<dyn Clock>,
}

/// What the handshake settled (Transports › Session Management, › Protocol Version Header).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Session {
    /// `None` when the server runs without sessions.
    id: Option<String>,
    protocol_version: String,
}

/// How one attempt at a request ended, when it did not fail outright.
enum Attempt {
    Answered(Value),
    /// Transports › Session Management: the server no longer knows the session we sent.
    SessionExpired,
}

impl fmt::Debug for McpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpClient")
            .field("name", &self.name)
            .field("url", &shown_url(&self.url))
            .field("timeout_ms", &self.timeout_ms)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl McpClient {
    /// `name` is how errors call the server; `url` its MCP endpoint (e.g. `http://host/mcp`).
    pub fn new(name: impl Into<String>, url: impl Into<String>, http: Rc<dyn HttpClient>) -> Self {
        Self {
            name: name.into(),
            url: url.into(),
            http,
            timeout_ms: DEFAULT_TIMEOUT_MS,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            session: RefCell::new(None),
            next_id: Cell::new(1),
            clock: Rc::new(SystemClock),
        }
    }

    /// The clock a resumed stream's `retry` is waited on (default the system's).
    pub fn with_clock(mut self, clock: Rc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Each HTTP exchange must end within `timeout_ms` (default [`DEFAULT_TIMEOUT_MS`]).
    pub fn with_timeout_ms(mut self, timeout_ms: u64) -> Self {
        self.timeout_ms = timeout_ms;
        self
    }

    /// Replies larger than this are refused (default [`DEFAULT_MAX_BODY_BYTES`]).
    pub fn with_max_body_bytes(mut self, max_body_bytes: usize) -> Self {
        self.max_body_bytes = max_body_bytes;
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// The session the server gave, if one is open and the server uses sessions.
    pub fn session_id(&self) -> Option<String> {
        self.session
            .borrow()
            .as_ref()
            .and_then(|session| session.id.clone())
    }

    /// Opens a new session, forgetting any previous one.
    ///
    /// Lifecycle §Initialization: `initialize` with our revision, no capabilities and
    /// `clientInfo`; then the `notifications/initialized` notification, which the server
    /// accepts with 202 (Transports › Sending Messages to the Server; any 2xx is taken).
    /// Lifecycle §Version Negotiation: a revision we cannot speak is refused. Transports ›
    /// Session Management: the `Mcp-Session-Id` of the `initialize` reply is kept.
    pub async fn connect(&self) -> Result<ServerInfo, McpError> {
        const METHOD: &str = "initialize";
        self.session.replace(None);
        let id = self.next_id();
        let message = json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": METHOD,
            "params": {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": { "name": "kiln", "version": env!("CARGO_PKG_VERSION") },
            },
        });
        let response = self.post(METHOD, &message, None).await?;
        let session_id = match response.header(SESSION_ID_HEADER) {
            // Session Management: "MUST only contain visible ASCII characters (0x21 to 0x7E)".
            Some(value)
                if value.is_empty() || !value.bytes().all(|b| (0x21..=0x7e).contains(&b)) =>
            {
                return Err(self.protocol(
                    METHOD,
                    format!("session id `{value}` is not visible ASCII (0x21 to 0x7E)"),
                ));
            }
            value => value.map(str::to_owned),
        };
        // A stream resumed before the handshake ends carries the session being opened.
        let opening = Session {
            id: session_id.clone(),
            protocol_version: PROTOCOL_VERSION.to_owned(),
        };
        let result = self.outcome(METHOD, response, id, Some(&opening)).await?;

        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct InitializeResult {
            protocol_version: String,
            server_info: Implementation,
            #[serde(default)]
            instructions: Option<String>,
        }
        #[derive(Deserialize)]
        struct Implementation {
            name: String,
            version: String,
        }
        let result: InitializeResult = serde_json::from_value(result)
            .map_err(|error| self.protocol(METHOD, format!("the result is malformed: {error}")))?;
        if !SUPPORTED_PROTOCOL_VERSIONS.contains(&result.protocol_version.as_str()) {
            return Err(self.protocol(
                METHOD,
                format!(
                    "the server speaks protocol revision `{}`; this client speaks {}",
                    result.protocol_version,
                    SUPPORTED_PROTOCOL_VERSIONS
                        .map(|version| format!("`{version}`"))
                        .join(", ")
                ),
            ));
        }
        let session = Session {
            id: session_id,
            protocol_version: result.protocol_version.clone(),
        };

        const INITIALIZED: &str = "notifications/initialized";
        let notification = json!({ "jsonrpc": "2.0", "method": INITIALIZED });
        let response = self
            .post(INITIALIZED, &notification, Some(&session))
            .await?;
        if !(200..300).contains(&response.status) {
            return Err(self.http_error(INITIALIZED, &response));
        }
        self.session.replace(Some(session));
        Ok(ServerInfo {
            name: result.server_info.name,
            version: result.server_info.version,
            protocol_version: result.protocol_version,
            instructions: result.instructions,
        })
    }

    /// Every tool of the server, all pages.
    ///
    /// Server Features › Tools §Listing Tools and Utilities › Pagination: `nextCursor` is
    /// followed for at most [`MAX_TOOL_PAGES`] pages, and a cursor seen before is refused
    /// (a server looping on its pages would otherwise keep us here).
    pub async fn list_tools(&self) -> Result<Vec<McpTool>, McpError> {
        const METHOD: &str = "tools/list";
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Page {
            tools: Vec<Value>,
            #[serde(default)]
            next_cursor: Option<String>,
        }
        let mut tools = Vec::new();
        let mut seen_cursors = HashSet::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_TOOL_PAGES {
            let params = match &cursor {
                Some(cursor) => json!({ "cursor": cursor }),
                None => json!({}),
            };
            let result = self.request(METHOD, params).await?;
            let page: Page = serde_json::from_value(result).map_err(|error| {
                self.protocol(METHOD, format!("the result is malformed: {error}"))
            })?;
            for (index, tool) in page.tools.into_iter().enumerate() {
                let name = tool
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_owned();
                let tool: McpTool = serde_json::from_value(tool).map_err(|error| {
                    self.protocol(
                        METHOD,
                        format!("tool #{index} (`{name}`) is malformed: {error}"),
                    )
                })?;
                tools.push(tool);
            }
            match page.next_cursor {
                None => return Ok(tools),
                Some(next) if !seen_cursors.insert(next.clone()) => {
                    return Err(self.protocol(
                        METHOD,
                        format!("the server repeated the cursor `{}`", excerpt(&next)),
                    ));
                }
                Some(next) => cursor = Some(next),
            }
        }
        Err(self.protocol(
            METHOD,
            format!("the tool list goes on past {MAX_TOOL_PAGES} pages; stopped there"),
        ))
    }

    /// Calls the tool `name` (Server Features › Tools §Calling Tools). A tool that ran and
    /// failed is `Ok` with [`CallToolResult::is_error`]; a call the server refused (unknown
    /// tool, bad arguments, as the server decides) is [`McpError::Rpc`].
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
    ) -> Result<CallToolResult, McpError> {
        const METHOD: &str = "tools/call";
        let result = self
            .request(METHOD, json!({ "name": name, "arguments": arguments }))
            .await?;
        serde_json::from_value(result).map_err(|error| {
            self.protocol(
                METHOD,
                format!("the result for tool `{name}` is malformed: {error}"),
            )
        })
    }

    /// Ends the session: forgets it, then asks the server to drop it with an HTTP DELETE
    /// (Transports › Session Management). A server that does not allow that answers 405,
    /// one that already forgot the session 404 (or 400, as the reference server does): all
    /// are fine. Without a session id there is nothing to send.
    pub async fn close(&self) -> Result<(), McpError> {
        const METHOD: &str = "DELETE";
        let Some(session) = self.session.replace(None) else {
            return Ok(());
        };
        if session.id.is_none() {
            return Ok(());
        }
        let response = self
            .send_bodiless(METHOD, METHOD, session_headers(&session))
            .await?;
        if (200..300).contains(&response.status)
            || response.status == 405
            || session_expired(&response)
        {
            return Ok(());
        }
        Err(self.http_error(METHOD, &response))
    }

    /// One request with its result, connecting first when no session is open, and opening
    /// a new session once if the server forgot ours (Transports › Session Management: "MUST
    /// start a new session by sending a new InitializeRequest").
    async fn request(&self, method: &str, params: Value) -> Result<Value, McpError> {
        let session = match self.current_session() {
            Some(session) => session,
            None => {
                self.connect().await?;
                self.current_session().ok_or_else(|| self.session_lost())?
            }
        };
        match self.attempt(method, &params, &session).await? {
            Attempt::Answered(result) => return Ok(result),
            Attempt::SessionExpired => {}
        }
        // Another call on this thread may have opened a new session meanwhile: use it.
        let current = self.current_session();
        if current.is_none() || current.as_ref() == Some(&session) {
            self.connect().await?;
        }
        let session = self.current_session().ok_or_else(|| self.session_lost())?;
        match self.attempt(method, &params, &session).await? {
            Attempt::Answered(result) => Ok(result),
            Attempt::SessionExpired => {
                self.session.replace(None);
                Err(self.session_lost())
            }
        }
    }

    async fn attempt(
        &self,
        method: &str,
        params: &Value,
        session: &Session,
    ) -> Result<Attempt, McpError> {
        let id = self.next_id();
        let message = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        let response = self.post(method, &message, Some(session)).await?;
        if session.id.is_some() && session_expired(&response) {
            return Ok(Attempt::SessionExpired);
        }
        self.outcome(method, response, id, Some(session))
            .await
            .map(Attempt::Answered)
    }

    /// Transports › Sending Messages to the Server: POST one JSON-RPC message, accepting
    /// either reply form; after initialization with the session headers.
    async fn post(
        &self,
        method: &str,
        message: &Value,
        session: Option<&Session>,
    ) -> Result<Response, McpError> {
        let mut headers = vec![
            ("Content-Type".to_owned(), "application/json".to_owned()),
            (
                "Accept".to_owned(),
                "application/json, text/event-stream".to_owned(),
            ),
        ];
        if let Some(session) = session {
            headers.extend(session_headers(session));
        }
        let request = Request {
            method: "POST".to_owned(),
            url: self.url.clone(),
            headers,
            body: Some(message.to_string().into_bytes()),
            timeout_ms: self.timeout_ms,
            max_body_bytes: self.max_body_bytes,
            redirect: kiln_http::Redirect::Follow,
        };
        self.http
            .send(request)
            .await
            .map_err(|error| self.transport_error(method, error))
    }

    /// The result of request `id` from a reply, or why there is none. An event stream that
    /// ended before the response, having given an event id, is resumed (Transports ›
    /// Resumability and Redelivery): after the `retry` it set (else [`DEFAULT_RETRY_MS`]),
    /// a GET with `Last-Event-ID`, at most [`MAX_RESUMES`] times.
    async fn outcome(
        &self,
        method: &str,
        response: Response,
        id: u64,
        session: Option<&Session>,
    ) -> Result<Value, McpError> {
        let mut response = response;
        let mut resumed = 0;
        loop {
            let resume = match self.found(method, &response, id)? {
                Found::Answer(RpcOutcome::Result(result)) => return Ok(result),
                Found::Answer(RpcOutcome::Error { code, message }) => {
                    return Err(McpError::Rpc {
                        server: self.name.clone(),
                        method: method.to_owned(),
                        code,
                        message,
                    });
                }
                Found::Resume(resume) => resume,
            };
            if resumed == MAX_RESUMES {
                return Err(self.protocol(
                    method,
                    format!(
                        "the event stream ended without a response to request id {id} after \
                         {} event(s), resumed {MAX_RESUMES} times from its last event `{}`; gave up",
                        resume.events,
                        excerpt(&resume.last_event_id)
                    ),
                ));
            }
            resumed += 1;
            let wait = resume
                .retry_ms
                .unwrap_or(DEFAULT_RETRY_MS)
                .min(self.timeout_ms);
            self.clock.sleep(wait).await;
            response = self.resume(method, &resume.last_event_id, session).await?;
        }
    }

    /// Asks for the rest of a stream after its event `last_event_id` (Transports ›
    /// Resumability and Redelivery: a GET with `Last-Event-ID`).
    async fn resume(
        &self,
        method: &str,
        last_event_id: &str,
        session: Option<&Session>,
    ) -> Result<Response, McpError> {
        let mut headers = vec![
            ("Accept".to_owned(), "text/event-stream".to_owned()),
            (LAST_EVENT_ID_HEADER.to_owned(), last_event_id.to_owned()),
        ];
        if let Some(session) = session {
            headers.extend(session_headers(session));
        }
        let response = self.send_bodiless(method, "GET", headers).await?;
        if response.status == 405 {
            return Err(self.protocol(
                method,
                "the event stream ended before the response, and the server offers no stream \
                 to resume it from (GET answered HTTP 405)"
                    .to_owned(),
            ));
        }
        Ok(response)
    }

    /// Sends a request with no body (`http_method` DELETE or GET) to the endpoint;
    /// `method` is what errors name.
    async fn send_bodiless(
        &self,
        method: &str,
        http_method: &str,
        headers: Vec<(String, String)>,
    ) -> Result<Response, McpError> {
        let request = Request {
            method: http_method.to_owned(),
            url: self.url.clone(),
            headers,
            body: None,
            timeout_ms: self.timeout_ms,
            max_body_bytes: self.max_body_bytes,
            redirect: kiln_http::Redirect::Follow,
        };
        self.http
            .send(request)
            .await
            .map_err(|error| self.transport_error(method, error))
    }

    /// What one reply holds for request `id`, or why it holds nothing.
    fn found(&self, method: &str, response: &Response, id: u64) -> Result<Found, McpError> {
        if !(200..300).contains(&response.status) {
            return Err(self.http_error(method, response));
        }
        if response.status == 202 {
            return Err(self.protocol(method, "HTTP 202 Accepted with no response".to_owned()));
        }
        if response.truncated {
            return Err(self.protocol(
                method,
                format!(
                    "the reply is larger than the {}-byte cap",
                    self.max_body_bytes
                ),
            ));
        }
        find_response(response.header("content-type"), &response.body, id)
            .map_err(|message| self.protocol(method, message))
    }

    fn current_session(&self) -> Option<Session> {
        self.session.borrow().clone()
    }

    fn next_id(&self) -> u64 {
        let id = self.next_id.get();
        self.next_id.set(id.wrapping_add(1));
        id
    }

    fn protocol(&self, method: &str, message: String) -> McpError {
        McpError::Protocol {
            server: self.name.clone(),
            method: method.to_owned(),
            message,
        }
    }

    fn session_lost(&self) -> McpError {
        McpError::SessionLost {
            server: self.name.clone(),
        }
    }

    fn http_error(&self, method: &str, response: &Response) -> McpError {
        McpError::Http {
            server: self.name.clone(),
            url: shown_url(&self.url),
            method: method.to_owned(),
            status: response.status,
            body: excerpt(String::from_utf8_lossy(&response.body).trim()),
        }
    }

    fn transport_error(&self, method: &str, error: HttpError) -> McpError {
        let server = self.name.clone();
        // Errors reach models and logs: the endpoint without credentials.
        let url = shown_url(&self.url);
        match error {
            HttpError::InvalidUrl { reason, .. } => McpError::InvalidUrl {
                server,
                url,
                reason,
            },
            HttpError::Unreachable { message, .. } => McpError::Unreachable {
                server,
                url,
                message,
            },
            HttpError::Timeout { timeout_ms, .. } => McpError::Timeout {
                server,
                url,
                method: method.to_owned(),
                timeout_ms,
            },
            HttpError::Body { message, .. } => McpError::Unreachable {
                server,
                url,
                message: format!("the connection broke while reading the reply: {message}"),
            },
            // Our own headers and method: only a session id the platform refuses gets here.
            HttpError::InvalidRequest { message, .. } => self.protocol(method, message),
            // Only streamed bodies stall or overflow, and only `send_public` or
            // `Redirect::Stop` refuse an address or a redirect; replies are read whole and sent
            // with neither, but say so plainly should that change.
            error @ (HttpError::Stalled { .. }
            | HttpError::TooLarge { .. }
            | HttpError::AddressRefused { .. }
            | HttpError::Redirected { .. }) => McpError::Unreachable {
                server,
                url,
                message: error.to_string(),
            },
        }
    }
}

/// Transports › Session Management and › Protocol Version Header.
fn session_headers(session: &Session) -> Vec<(String, String)> {
    let mut headers = vec![(
        PROTOCOL_VERSION_HEADER.to_owned(),
        session.protocol_version.clone(),
    )];
    if let Some(id) = &session.id {
        headers.push((SESSION_ID_HEADER.to_owned(), id.clone()));
    }
    headers
}

/// The spec's answer to a session the server no longer knows is 404; the reference server
/// (and other servers built on the TypeScript SDK's examples) answers 400 with a JSON-RPC
/// error "Bad Request: No valid session ID provided".
fn session_expired(response: &Response) -> bool {
    response.status == 404
        || (response.status == 400
            && String::from_utf8_lossy(&response.body)
                .to_ascii_lowercase()
                .contains("no valid session id"))
}

#[cfg(test)]
mod tests;

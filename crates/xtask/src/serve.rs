//! A plain static file server for `pkg/`, as any static host would serve it: no
//! custom headers beyond content types (no COOP/COEP), so what works here works
//! on a plain static host.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{Result, anyhow};
use tiny_http::{Header, Request, Response, Server};

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

/// Serves `dir` until the process is interrupted.
pub fn serve_forever(dir: &Path, port: u16) -> Result<()> {
    let server = StaticServer::start(dir, port)?;
    println!("Kiln is served at {}  (Ctrl+C stops it)", server.url());
    loop {
        std::thread::park();
    }
}

fn respond(dir: &Path, request: Request) {
    let response = match resolve(dir, request.url()) {
        Some(path) => match std::fs::read(&path) {
            Ok(bytes) => {
                let response = with_header(
                    Response::from_data(bytes),
                    "Content-Type",
                    content_type(&path),
                );
                with_header(response, "Cache-Control", "no-cache")
            }
            Err(_) => not_found(),
        },
        None => not_found(),
    };
    let _ = request.respond(response);
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
}

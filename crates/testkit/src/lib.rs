//! What tests need to meet real peers: the MCP reference server
//! (`@modelcontextprotocol/server-everything`) started with `node` on a free
//! loopback port and killed when dropped.
//!
//! The package is found at `$KILN_MCP_EVERYTHING`, else under
//! `servers/node_modules` at the workspace root, where `cargo xtask test`
//! installs it. Without it a test fails naming the fix: it is never skipped.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::missing_panics_doc,
    reason = "test support: a panic is a failed test with a line number"
)]

use std::io::Read as _;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
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

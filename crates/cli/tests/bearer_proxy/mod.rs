//! A loopback proxy that adds `kiln mcp serve --http`'s access token to every
//! request, for clients that cannot be given a header: the MCP conformance
//! suite's server scenarios and the TypeScript SDK's test client. It forwards
//! each request as sent, but for `Authorization: Bearer TOKEN` added, a `Host`
//! that named the proxy renamed to the server (any other `Host` is passed on,
//! so the server's own DNS-rebinding check still answers) and `Connection:
//! close`, then copies the server's answer back until the server closes.

// Each test binary includes this module and uses the part it needs.
#![allow(dead_code, reason = "each test binary uses the part of it it needs")]

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};

/// A proxy listening on 127.0.0.1 in front of one `kiln mcp serve --http`.
pub struct BearerProxy {
    /// The proxy's own MCP endpoint: `http://127.0.0.1:PORT/mcp`.
    pub url: String,
}

impl BearerProxy {
    /// Forwards to the server at `server_url` (`http://127.0.0.1:PORT/mcp`)
    /// with `token`.
    #[must_use]
    pub fn start(server_url: &str, token: &str) -> Self {
        let upstream = server_url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned();
        let listener = TcpListener::bind("127.0.0.1:0")
            .unwrap_or_else(|error| panic!("the proxy cannot listen: {error}"));
        let own = listener
            .local_addr()
            .unwrap_or_else(|error| panic!("the proxy has no address: {error}"))
            .to_string();
        let url = format!("http://{own}/mcp");
        let token = token.to_owned();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let (upstream, own, token) = (upstream.clone(), own.clone(), token.clone());
                std::thread::spawn(move || forward(client, &upstream, &own, &token));
            }
        });
        Self { url }
    }
}

/// One request from `client` to `upstream`, and its answer back.
fn forward(mut client: TcpStream, upstream: &str, own: &str, token: &str) {
    let mut seen = Vec::new();
    let mut buffer = [0_u8; 8192];
    let head_end = loop {
        if let Some(at) = seen.windows(4).position(|window| window == b"\r\n\r\n") {
            break at;
        }
        match client.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(n) => seen.extend_from_slice(&buffer[..n]),
        }
    };
    let head = String::from_utf8_lossy(&seen[..head_end]).into_owned();
    let mut body = seen[head_end + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default().to_owned();
    let mut forwarded = format!("{request_line}\r\n");
    let mut length = 0_usize;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "connection" | "authorization" | "keep-alive" => continue,
            "transfer-encoding" => panic!("the proxy forwards only bodies with a Content-Length"),
            "content-length" => length = value.parse().unwrap_or(0),
            "host" if value == own => {
                forwarded.push_str(&format!("Host: {upstream}\r\n"));
                continue;
            }
            _ => {}
        }
        forwarded.push_str(&format!("{}: {value}\r\n", name.trim()));
    }
    forwarded.push_str(&format!(
        "Authorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    ));
    while body.len() < length {
        match client.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(n) => body.extend_from_slice(&buffer[..n]),
        }
    }
    let Ok(mut server) = TcpStream::connect(upstream) else {
        return;
    };
    if server.write_all(forwarded.as_bytes()).is_err() || server.write_all(&body).is_err() {
        return;
    }
    let mut answer = [0_u8; 8192];
    loop {
        match server.read(&mut answer) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if client.write_all(&answer[..n]).is_err() {
                    return;
                }
            }
        }
    }
    let _ = client.shutdown(std::net::Shutdown::Both);
}

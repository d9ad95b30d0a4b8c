//! `kiln mcp serve --http PORT`: MCP's Streamable HTTP transport (2025-06-18,
//! Basic Protocol › Transports) on 127.0.0.1, one endpoint, `/mcp`.
//!
//! - DNS-rebinding protection: a `Host` that is not this loopback address, or
//!   an `Origin` that is not a loopback origin, is refused with 403 before the
//!   body is read, whatever the method.
//! - Authentication: every request must carry `Authorization: Bearer TOKEN`,
//!   the server's access token ([`AccessToken`]); without it, or with another,
//!   401 (`WWW-Authenticate: Bearer`) before anything else is looked at.
//! - `POST /mcp` carries one JSON-RPC message. `initialize` opens a session and
//!   its answer names it in `Mcp-Session-Id`; every later message must carry
//!   that header (missing: 400; unknown, ended, closed idle or for another:
//!   404; no room for a new one: 503). A notification or a response is
//!   accepted with 202 and no body; a `tools/call` is answered as an event
//!   stream (`text/event-stream`, one `message` event with the response),
//!   every other request as `application/json`.
//! - `GET /mcp` is 405: this server sends nothing the client did not ask for.
//! - `DELETE /mcp` ends the session (its runs are withdrawn).
//!
//! Each request is served on a thread of its own, which hands the message to
//! the protocol thread ([`crate::commands::mcp::Event`]), where the sessions
//! are kept, and waits for its answer.

use std::io::Read as _;
use std::net::SocketAddr;
use std::sync::Arc;

use futures::channel::mpsc::UnboundedSender;
use serde_json::{Value, json};
use tiny_http::{Header, Method, Request, Response, Server};

use crate::commands::mcp::secret::AccessToken;
use crate::commands::mcp::{Event, Message, Reply, SessionOf};

/// The largest message body read.
const MAX_BODY_BYTES: u64 = 4 * 1024 * 1024;

/// Listens on 127.0.0.1:`port` and serves on threads of its own; the address
/// it listens on.
pub(crate) fn listen(
    port: u16,
    token: AccessToken,
    events: UnboundedSender<Event>,
) -> Result<SocketAddr, Box<dyn std::error::Error + Send + Sync>> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", port))?;
    no_delay(&listener);
    let server = Server::from_listener(listener, None)?;
    let address = server
        .server_addr()
        .to_ip()
        .ok_or("the listener has no IP address")?;
    let token = Arc::new(token);
    std::thread::spawn(move || {
        for request in server.incoming_requests() {
            let events = events.clone();
            let token = token.clone();
            std::thread::spawn(move || serve(request, address, &token, &events));
        }
    });
    Ok(address)
}

/// Answers leave at once: tiny_http writes a response's head and body apart,
/// and with Nagle's algorithm on, the body waited for the client's delayed ACK
/// of the head (40 ms a call with Kiln's own client, measured by
/// `crates/cli/examples/mcp_serve.rs`). Linux gives accepted connections the
/// listener's `TCP_NODELAY`.
#[cfg(unix)]
fn no_delay(listener: &std::net::TcpListener) {
    let _ = nix::sys::socket::setsockopt(listener, nix::sys::socket::sockopt::TcpNoDelay, &true);
}

#[cfg(not(unix))]
fn no_delay(_listener: &std::net::TcpListener) {}

fn header<'a>(request: &'a Request, name: &'static str) -> Option<&'a str> {
    request
        .headers()
        .iter()
        .find(|header| header.field.equiv(name))
        .map(|header| header.value.as_str())
}

fn header_of(name: &str, value: &str) -> Header {
    Header::from_bytes(name.as_bytes(), value.as_bytes()).unwrap_or_else(|()| {
        // Only names and values written here, all ASCII.
        Header::from_bytes(&b"X-Kiln"[..], &b"header"[..]).unwrap_or_else(|()| unreachable!())
    })
}

/// An HTTP error with a JSON-RPC error body naming what was wrong.
fn refuse(request: Request, status: u16, message: &str) {
    let _ = request.respond(refusal(status, message));
}

fn refusal(status: u16, message: &str) -> Response<std::io::Cursor<Vec<u8>>> {
    let body =
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32_000, "message": message}});
    Response::from_string(body.to_string())
        .with_status_code(status)
        .with_header(header_of("Content-Type", "application/json"))
}

/// Where a refusal of the token says the token comes from.
const TOKEN_SOURCE: &str = "printed on its stderr at start, or given by --token or KILN_MCP_TOKEN";

/// Why `authorization` (an `Authorization` header) does not admit the
/// request, when it does not.
fn unauthorized(authorization: Option<&str>, token: &AccessToken) -> Option<String> {
    let offered = authorization
        .and_then(|value| value.trim().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, offered)| offered.trim())
        .filter(|offered| !offered.is_empty());
    match offered {
        None => Some(format!(
            "Unauthorized: the request carries no `Authorization: Bearer` token; this server answers only requests with its access token ({TOKEN_SOURCE})"
        )),
        Some(offered) if !token.admits(offered) => Some(format!(
            "Unauthorized: the bearer token is not this server's access token ({TOKEN_SOURCE})"
        )),
        Some(_) => None,
    }
}

/// Whether `host` (a `Host` header) names this loopback listener.
fn host_is_ours(host: &str, address: SocketAddr) -> bool {
    let port = address.port();
    ["127.0.0.1", "localhost", "[::1]"]
        .iter()
        .any(|name| host == *name || host == format!("{name}:{port}"))
}

/// Whether `origin` is a page on this machine's loopback.
fn origin_is_loopback(origin: &str) -> bool {
    let Some(rest) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    let host = rest.rsplit_once(':').map_or(rest, |(host, port)| {
        if port.bytes().all(|byte| byte.is_ascii_digit()) {
            host
        } else {
            rest
        }
    });
    matches!(host, "127.0.0.1" | "localhost" | "[::1]")
}

fn serve(
    request: Request,
    address: SocketAddr,
    token: &AccessToken,
    events: &UnboundedSender<Event>,
) {
    match header(&request, "Host") {
        Some(host) if host_is_ours(host, address) => {}
        host => {
            let message = format!(
                "Forbidden: the Host header {} is not this server's address ({address}); a loopback server answers only requests made to it by name",
                host.map_or_else(|| "(missing)".to_owned(), |host| format!("`{host}`"))
            );
            return refuse(request, 403, &message);
        }
    }
    if let Some(origin) = header(&request, "Origin")
        && !origin_is_loopback(origin)
    {
        let message = format!(
            "Forbidden: the Origin `{origin}` is not a page on this machine; a loopback MCP server answers only local clients"
        );
        return refuse(request, 403, &message);
    }
    if let Some(message) = unauthorized(header(&request, "Authorization"), token) {
        let response = refusal(401, &message).with_header(header_of("WWW-Authenticate", "Bearer"));
        let _ = request.respond(response);
        return;
    }
    if request.url().split('?').next() != Some("/mcp") {
        let message = format!("Not Found: `{}`; the MCP endpoint is /mcp", request.url());
        return refuse(request, 404, &message);
    }
    let session = header(&request, "Mcp-Session-Id").map(str::to_owned);
    match request.method() {
        Method::Post => post(request, session, events),
        Method::Delete => match session {
            None => refuse(
                request,
                400,
                "Bad Request: DELETE needs the Mcp-Session-Id header",
            ),
            Some(session) => {
                let (tx, rx) = std::sync::mpsc::channel();
                let end = Event::End {
                    session,
                    answer: Box::new(move |known| {
                        let _ = tx.send(known);
                    }),
                };
                if events.unbounded_send(end).is_err() {
                    return refuse(request, 503, "Service Unavailable: the server is stopping");
                }
                match rx.recv() {
                    Ok(true) => {
                        let _ = request.respond(Response::empty(200));
                    }
                    Ok(false) => refuse(request, 404, NO_SESSION),
                    Err(_) => refuse(request, 503, "Service Unavailable: the server is stopping"),
                }
            }
        },
        Method::Get => {
            let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32_000, "message": "Method Not Allowed: this server opens no stream of its own; POST messages to /mcp"}});
            let _ = request.respond(
                Response::from_string(body.to_string())
                    .with_status_code(405)
                    .with_header(header_of("Allow", "POST, DELETE"))
                    .with_header(header_of("Content-Type", "application/json")),
            );
        }
        other => {
            let message = format!("Method Not Allowed: {other}; /mcp takes POST, DELETE");
            refuse(request, 405, &message);
        }
    }
}

/// What a message naming a session that is not open hears.
const NO_SESSION: &str = "Not Found: no such session (it ended, was closed after being idle or to make way for a newer one, or was never opened); send initialize again";

fn post(mut request: Request, session: Option<String>, events: &UnboundedSender<Event>) {
    let accept = header(&request, "Accept").unwrap_or("*/*").to_owned();
    if ![
        "application/json",
        "text/event-stream",
        "*/*",
        "application/*",
    ]
    .iter()
    .any(|kind| accept.contains(kind))
    {
        let message = format!(
            "Not Acceptable: the Accept header `{accept}` takes neither application/json nor text/event-stream"
        );
        return refuse(request, 406, &message);
    }
    let content_type = header(&request, "Content-Type").unwrap_or("").to_owned();
    if !content_type.starts_with("application/json") {
        let message =
            format!("Unsupported Media Type: a message is application/json, not `{content_type}`");
        return refuse(request, 415, &message);
    }
    if let Some(version) = header(&request, "MCP-Protocol-Version")
        && !kiln_mcp::SUPPORTED_PROTOCOL_VERSIONS.contains(&version)
    {
        let message = format!(
            "Bad Request: MCP-Protocol-Version `{version}` is not one this server speaks ({})",
            kiln_mcp::SUPPORTED_PROTOCOL_VERSIONS.join(", ")
        );
        return refuse(request, 400, &message);
    }
    let mut body = String::new();
    let read = request
        .as_reader()
        .take(MAX_BODY_BYTES + 1)
        .read_to_string(&mut body);
    if read.is_err() {
        return refuse(request, 400, "Bad Request: the body is not UTF-8 text");
    }
    if body.len() as u64 > MAX_BODY_BYTES {
        return refuse(
            request,
            413,
            "Content Too Large: a message is at most 4 MiB",
        );
    }
    let parsed: Option<Value> = serde_json::from_str(&body).ok();
    let method = parsed
        .as_ref()
        .and_then(|message| message.get("method"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let session = if method.as_deref() == Some("initialize") {
        SessionOf::Opening
    } else {
        match session {
            None if parsed.is_some() => {
                return refuse(
                    request,
                    400,
                    "Bad Request: the Mcp-Session-Id header is missing; send initialize first and echo the session id it answers with",
                );
            }
            // A body that does not read is answered as the protocol says (a parse error).
            None => SessionOf::Unread,
            Some(session) => SessionOf::Named(session),
        }
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let message = Message {
        session,
        text: body,
        answer: Box::new(move |reply| {
            let _ = tx.send(reply);
        }),
    };
    if events.unbounded_send(Event::Message(message)).is_err() {
        return refuse(request, 503, "Service Unavailable: the server is stopping");
    }
    let Ok(reply) = rx.recv() else {
        return refuse(request, 503, "Service Unavailable: the server is stopping");
    };
    let (answer, opened) = match reply {
        Reply::Answer { response, opened } => (response, opened),
        Reply::NoSession => return refuse(request, 404, NO_SESSION),
        Reply::Full(message) => return refuse(request, 503, &message),
    };
    let response = match answer {
        None => Response::from_string(String::new()).with_status_code(202),
        Some(answer) if method.as_deref() == Some("tools/call") => {
            Response::from_string(format!("event: message\ndata: {answer}\n\n"))
                .with_header(header_of("Content-Type", "text/event-stream"))
                .with_header(header_of("Cache-Control", "no-cache"))
        }
        Some(answer) => Response::from_string(answer.to_string())
            .with_header(header_of("Content-Type", "application/json")),
    };
    let response = match opened {
        Some(session) => response.with_header(header_of("Mcp-Session-Id", &session)),
        None => response,
    };
    let _ = request.respond(response);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_loopback_address_and_loopback_origins_are_served() {
        let address: SocketAddr = "127.0.0.1:4100".parse().unwrap_or_else(|_| unreachable!());
        for host in [
            "127.0.0.1:4100",
            "localhost:4100",
            "[::1]:4100",
            "127.0.0.1",
        ] {
            assert!(host_is_ours(host, address), "{host}");
        }
        for host in [
            "evil.example:4100",
            "127.0.0.1:4101",
            "127.0.0.1.evil.example:4100",
            "",
        ] {
            assert!(!host_is_ours(host, address), "{host}");
        }
        for origin in [
            "http://127.0.0.1:4100",
            "http://localhost",
            "https://[::1]:8443",
        ] {
            assert!(origin_is_loopback(origin), "{origin}");
        }
        for origin in [
            "http://evil.example",
            "http://localhost.evil.example",
            "null",
            "file://",
        ] {
            assert!(!origin_is_loopback(origin), "{origin}");
        }
    }

    #[test]
    fn only_the_servers_bearer_token_is_admitted() {
        let token = AccessToken::given("kiln-test-token-0123456789")
            .unwrap_or_else(|error| panic!("{error}"));
        for admitted in [
            "Bearer kiln-test-token-0123456789",
            "bearer kiln-test-token-0123456789",
            "  BEARER   kiln-test-token-0123456789 ",
        ] {
            assert_eq!(unauthorized(Some(admitted), &token), None, "{admitted}");
        }
        let missing = "Unauthorized: the request carries no `Authorization: Bearer` token";
        let wrong = "Unauthorized: the bearer token is not this server's access token";
        for (refused, why) in [
            (None, missing),
            (Some(""), missing),
            (Some("Bearer"), missing),
            (Some("Bearer   "), missing),
            (Some("Basic kiln-test-token-0123456789"), missing),
            (Some("kiln-test-token-0123456789"), missing),
            (Some("Bearer kiln-test-token-012345678"), wrong),
            (Some("Bearer kiln-test-token-0123456789x"), wrong),
            (Some("Bearer kiln-test-token-0123456789 x"), wrong),
        ] {
            let refusal = unauthorized(refused, &token).unwrap_or_default();
            assert!(refusal.starts_with(why), "{refused:?}: {refusal}");
        }
    }
}

//! The native client against a one-connection server written here: what goes on the wire,
//! and each way an exchange can end.

use std::io::Write as _;
use std::net::TcpListener;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use futures::executor::block_on;

use super::UreqClient;
use crate::{HttpClient, HttpError, Request};

/// Serves one connection: reads one request, then writes `answer` (raw bytes) and, after
/// `hold`, closes. Joining gives the request as received.
fn serve_once(answer: Vec<u8>, hold: Duration) -> (String, JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let handle = thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let request = kiln_testkit::read_http_request(&mut stream);
        stream.write_all(&answer).unwrap();
        stream.flush().unwrap();
        thread::sleep(hold);
        request
    });
    (url, handle)
}

fn request(url: &str) -> Request {
    Request {
        method: "POST".into(),
        url: url.into(),
        headers: vec![("X-Kiln-Test".into(), "yes".into())],
        body: Some(b"{\"ping\":1}".to_vec()),
        timeout_ms: 5_000,
        max_body_bytes: 1024,
    }
}

fn send(request: Request) -> Result<crate::Response, HttpError> {
    block_on(UreqClient::new().send(request))
}

#[test]
fn non_2xx_status_headers_and_body_come_back_as_a_response() {
    let answer = b"HTTP/1.1 404 Not Found\r\nX-Thing: a\r\nContent-Type: text/plain\r\n\
                   Content-Length: 8\r\nConnection: close\r\n\r\nnot here"
        .to_vec();
    let (url, server) = serve_once(answer, Duration::ZERO);
    let response = send(request(&url)).unwrap();
    assert_eq!(response.status, 404);
    assert_eq!(response.header("X-THING"), Some("a"));
    assert!(
        response
            .headers
            .iter()
            .any(|(name, _)| name == "content-type")
    );
    assert_eq!(response.body, b"not here");
    assert!(!response.truncated);

    let received = server.join().unwrap();
    assert!(received.starts_with("POST /mcp HTTP/1.1\r\n"), "{received}");
    assert!(
        received.to_ascii_lowercase().contains("x-kiln-test: yes"),
        "{received}"
    );
    assert!(received.ends_with("{\"ping\":1}"), "{received}");
}

#[test]
fn a_body_longer_than_the_cap_is_cut_and_flagged() {
    let cases = [
        (4, b"0123".as_slice(), true),
        (10, b"0123456789".as_slice(), false),
    ];
    for (max_body_bytes, expected, truncated) in cases {
        let answer =
            b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nConnection: close\r\n\r\n0123456789";
        let (url, server) = serve_once(answer.to_vec(), Duration::ZERO);
        let response = send(Request {
            max_body_bytes,
            ..request(&url)
        })
        .unwrap();
        assert_eq!(
            (response.body.as_slice(), response.truncated),
            (expected, truncated)
        );
        server.join().unwrap();
    }
}

#[test]
fn a_body_cut_midway_is_a_body_error() {
    let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\nonly ten b";
    let (url, server) = serve_once(answer.to_vec(), Duration::ZERO);
    let error = send(request(&url)).unwrap_err();
    server.join().unwrap();
    assert!(
        matches!(&error, HttpError::Body { url: got, .. } if *got == url),
        "{error:?}"
    );
}

#[test]
fn a_silent_server_times_out_naming_the_url() {
    // Headers promise more than is sent: the timeout must cover the body too.
    let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nsome".to_vec();
    let (url, _server) = serve_once(answer, Duration::from_secs(3));
    let error = send(Request {
        timeout_ms: 300,
        ..request(&url)
    })
    .unwrap_err();
    assert_eq!(
        error,
        HttpError::Timeout {
            url: url.clone(),
            timeout_ms: 300
        }
    );
    assert_eq!(
        error.to_string(),
        format!("no complete response from `{url}` within 300 ms")
    );
}

#[test]
fn a_refused_port_is_unreachable() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let error = send(request(&url)).unwrap_err();
    assert!(
        matches!(&error, HttpError::Unreachable { url: got, .. } if *got == url),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .starts_with(&format!("cannot reach `{url}`: ")),
        "{error}"
    );
}

#[test]
fn other_schemes_are_refused_before_sending() {
    let error = send(request("file:///etc/passwd")).unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid URL `file:///etc/passwd`: scheme `file` is not allowed: only http and https are"
    );
}

#[test]
fn a_request_without_a_body_is_sent_without_one() {
    let answer = b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n".to_vec();
    let (url, server) = serve_once(answer, Duration::ZERO);
    let response = send(Request {
        method: "DELETE".into(),
        body: None,
        ..request(&url)
    })
    .unwrap();
    assert_eq!((response.status, response.body.len()), (405, 0));
    let received = server.join().unwrap();
    assert!(
        received.starts_with("DELETE /mcp HTTP/1.1\r\n"),
        "{received}"
    );
}

//! The native client against a one-connection server written here: what goes on the wire,
//! and each way an exchange, or a streamed body, can end.

#![expect(
    clippy::disallowed_methods,
    reason = "a test's own deadline and timings are real time: they bound and check what ran, not the code's clock"
)]

use std::io::{ErrorKind, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use futures::executor::block_on;

use super::UreqClient;
use crate::{BodyStream, HttpClient, HttpError, Redirect, Request, StreamingResponse};

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
        redirect: Redirect::Follow,
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

// `open`: the head as soon as it is in, then the body chunk by chunk.

/// Serves one connection: reads one request, then hands the connection to `script`.
/// Joining gives what `script` returned.
fn serve_with<R: Send + 'static>(
    script: impl FnOnce(TcpStream) -> R + Send + 'static,
) -> (String, JoinHandle<R>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/stream", listener.local_addr().unwrap());
    let handle = thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let _request = kiln_testkit::read_http_request(&mut stream);
        script(stream)
    });
    (url, handle)
}

const CHUNKED_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                               Transfer-Encoding: chunked\r\n\r\n";

/// One chunk of a chunked body, framed.
fn chunk(data: &str) -> Vec<u8> {
    format!("{:x}\r\n{data}\r\n", data.len()).into_bytes()
}

fn write(stream: &mut TcpStream, bytes: &[u8]) {
    stream.write_all(bytes).unwrap();
    stream.flush().unwrap();
}

/// Waits up to `limit` for the client to close the connection: how long it took, or `None`.
fn wait_for_close(stream: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buffer = [0_u8; 256];
    while let Some(left) = limit.checked_sub(started.elapsed()) {
        stream
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        match stream.read(&mut buffer) {
            Ok(0) => return Some(started.elapsed()),
            Ok(_) => {}
            Err(error) if error.kind() == ErrorKind::ConnectionReset => {
                return Some(started.elapsed());
            }
            Err(_) => return None,
        }
    }
    None
}

fn open(request: Request, idle_timeout_ms: u64) -> Result<StreamingResponse, HttpError> {
    block_on(UreqClient::new().open(request, idle_timeout_ms))
}

fn next(body: &mut BodyStream) -> Option<Result<Vec<u8>, HttpError>> {
    block_on(body.next())
}

/// The rest of a body: its bytes, and the error it ended on, if any. Checks that nothing
/// follows an error.
fn drain(mut body: BodyStream) -> (Vec<u8>, Option<HttpError>) {
    let mut bytes = Vec::new();
    while let Some(item) = next(&mut body) {
        match item {
            Ok(chunk) => bytes.extend_from_slice(&chunk),
            Err(error) => {
                assert!(next(&mut body).is_none(), "an item after {error:?}");
                return (bytes, Some(error));
            }
        }
    }
    (bytes, None)
}

fn get(url: &str, timeout_ms: u64) -> Request {
    Request {
        method: "GET".into(),
        body: None,
        timeout_ms,
        ..request(url)
    }
}

#[test]
fn chunks_arrive_before_the_body_ends() {
    // (framing, the head and first event, the second event and the end)
    let cases: [(&str, Vec<u8>, Vec<u8>); 2] = [
        (
            "chunked",
            [CHUNKED_HEAD, &chunk("data: one\n\n")].concat(),
            [chunk("data: two\n\n"), b"0\r\n\r\n".to_vec()].concat(),
        ),
        (
            "until close",
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n\
              data: one\n\n"
                .to_vec(),
            b"data: two\n\n".to_vec(),
        ),
    ];
    for (framing, first, rest) in cases {
        let (go_on, gate) = mpsc::channel::<()>();
        let (url, server) = serve_with(move |mut stream| {
            write(&mut stream, &first);
            // The second event is written only once the client has the first.
            let _ = gate.recv();
            write(&mut stream, &rest);
        });
        let mut response = open(get(&url, 5_000), 5_000).unwrap();
        assert_eq!(response.status, 200, "{framing}");
        assert_eq!(
            response.header("content-type"),
            Some("text/event-stream"),
            "{framing}"
        );
        let first_chunk = next(&mut response.body).unwrap().unwrap();
        assert_eq!(first_chunk, b"data: one\n\n", "{framing}");
        go_on.send(()).unwrap();
        assert_eq!(
            drain(response.body),
            (b"data: two\n\n".to_vec(), None),
            "{framing}"
        );
        server.join().unwrap();
    }
}

#[test]
fn a_silent_stream_stalls_after_the_idle_timeout_and_is_closed() {
    let (url, server) = serve_with(|mut stream| {
        write(
            &mut stream,
            &[CHUNKED_HEAD, &chunk("data: one\n\n")].concat(),
        );
        wait_for_close(&mut stream, Duration::from_secs(10))
    });
    let mut response = open(get(&url, 300), 200).unwrap();
    assert_eq!(next(&mut response.body).unwrap().unwrap(), b"data: one\n\n");
    let asked = Instant::now();
    let error = next(&mut response.body).unwrap().unwrap_err();
    assert!(asked.elapsed() >= Duration::from_millis(200));
    assert_eq!(
        error,
        HttpError::Stalled {
            url: url.clone(),
            idle_ms: 200
        }
    );
    assert_eq!(
        error.to_string(),
        format!("the response from `{url}` stalled: no data for 200 ms")
    );
    assert!(next(&mut response.body).is_none());
    drop(response);
    // The reading thread gives up after the longer of the two timeouts without data.
    assert!(
        server.join().unwrap().is_some(),
        "the connection stayed open"
    );
}

#[test]
fn a_stream_outlives_the_request_timeout_while_chunks_come() {
    let events: Vec<String> = (0..8).map(|n| format!("data: {n}\n\n")).collect();
    let expected = events.concat().into_bytes();
    let (url, server) = serve_with(move |mut stream| {
        write(&mut stream, CHUNKED_HEAD);
        for event in &events {
            thread::sleep(Duration::from_millis(100));
            write(&mut stream, &chunk(event));
        }
        write(&mut stream, b"0\r\n\r\n");
    });
    // 800 ms of body against a 200 ms request timeout.
    let response = open(get(&url, 200), 2_000).unwrap();
    assert_eq!(drain(response.body), (expected, None));
    server.join().unwrap();
}

#[test]
fn a_head_slower_than_the_idle_timeout_still_comes() {
    let (url, server) = serve_with(|mut stream| {
        thread::sleep(Duration::from_millis(300));
        write(
            &mut stream,
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
        );
    });
    let response = open(get(&url, 5_000), 100).unwrap();
    assert_eq!(drain(response.body), (b"ok".to_vec(), None));
    server.join().unwrap();
}

#[test]
fn a_head_that_does_not_come_in_time_is_a_timeout() {
    let (url, _server) = serve_with(|stream| {
        thread::sleep(Duration::from_secs(3));
        drop(stream);
    });
    let error = open(get(&url, 300), 5_000).err().unwrap();
    assert_eq!(
        error,
        HttpError::Timeout {
            url,
            timeout_ms: 300
        }
    );
}

#[test]
fn a_streamed_body_past_the_cap_is_too_large() {
    let cases = [(10, None), (100, None), (9, Some(9)), (0, Some(0))];
    for (max_body_bytes, too_large) in cases {
        let answer =
            b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nConnection: close\r\n\r\n0123456789";
        let (url, server) = serve_once(answer.to_vec(), Duration::ZERO);
        let response = open(
            Request {
                max_body_bytes,
                ..get(&url, 5_000)
            },
            5_000,
        )
        .unwrap();
        let (bytes, error) = drain(response.body);
        let expected_error = too_large.map(|limit| HttpError::TooLarge {
            url: url.clone(),
            limit,
        });
        assert_eq!(error, expected_error, "cap {max_body_bytes}");
        if too_large.is_none() {
            assert_eq!(bytes, b"0123456789", "cap {max_body_bytes}");
        } else {
            assert!(bytes.len() <= max_body_bytes, "cap {max_body_bytes}");
        }
        server.join().unwrap();
    }
}

#[test]
fn a_streamed_body_cut_midway_is_a_body_error() {
    let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\nonly ten b";
    let (url, server) = serve_once(answer.to_vec(), Duration::ZERO);
    let response = open(get(&url, 5_000), 5_000).unwrap();
    let (bytes, error) = drain(response.body);
    server.join().unwrap();
    assert!(b"only ten b".starts_with(&bytes), "{bytes:?}");
    assert!(
        matches!(&error, Some(HttpError::Body { url: got, .. }) if *got == url),
        "{error:?}"
    );
}

#[test]
fn dropping_the_body_closes_the_connection() {
    // A server still sending: the reading thread stops at the next chunk.
    let (dropped, told) = mpsc::channel::<()>();
    let (url, server) = serve_with(move |mut stream| {
        write(
            &mut stream,
            &[CHUNKED_HEAD, &chunk("data: one\n\n")].concat(),
        );
        told.recv().unwrap();
        let since = Instant::now();
        while since.elapsed() < Duration::from_secs(10) {
            if stream.write_all(&chunk("data: more\n\n")).is_err() {
                return Some(since.elapsed());
            }
            thread::sleep(Duration::from_millis(20));
        }
        None
    });
    let mut response = open(get(&url, 5_000), 5_000).unwrap();
    assert_eq!(next(&mut response.body).unwrap().unwrap(), b"data: one\n\n");
    drop(response);
    dropped.send(()).unwrap();
    let closed_after = server.join().unwrap();
    assert!(closed_after.is_some(), "writes still succeed after 10 s");

    // A silent server: the thread stops after the longer of the two timeouts.
    let (url, server) = serve_with(|mut stream| {
        write(
            &mut stream,
            &[CHUNKED_HEAD, &chunk("data: one\n\n")].concat(),
        );
        wait_for_close(&mut stream, Duration::from_secs(10))
    });
    let mut response = open(get(&url, 200), 200).unwrap();
    assert_eq!(next(&mut response.body).unwrap().unwrap(), b"data: one\n\n");
    drop(response);
    assert!(
        server.join().unwrap().is_some(),
        "the connection stayed open"
    );
}

#[test]
fn a_non_2xx_status_streams_its_body() {
    let answer = b"HTTP/1.1 503 Service Unavailable\r\nX-Thing: a\r\nContent-Length: 11\r\n\
                   Connection: close\r\n\r\nunavailable"
        .to_vec();
    let (url, server) = serve_once(answer, Duration::ZERO);
    let response = open(request(&url), 5_000).unwrap();
    assert_eq!(response.status, 503);
    assert_eq!(response.header("X-THING"), Some("a"));
    assert_eq!(drain(response.body), (b"unavailable".to_vec(), None));
    let received = server.join().unwrap();
    assert!(received.starts_with("POST /mcp HTTP/1.1\r\n"), "{received}");
    assert!(received.ends_with("{\"ping\":1}"), "{received}");
}

#[test]
fn opening_fails_before_any_response() {
    let refused = format!("http://127.0.0.1:{}/mcp", kiln_testkit::free_port());
    let cases = [
        (
            "file:///etc/passwd".to_owned(),
            "invalid URL `file:///etc/passwd`: scheme `file` is not allowed: only http and https are"
                .to_owned(),
        ),
        (refused.clone(), format!("cannot reach `{refused}`: ")),
    ];
    for (url, expected) in cases {
        let error = open(request(&url), 5_000).err().unwrap();
        assert!(error.to_string().starts_with(&expected), "{error}");
    }
}

// Redirects, and `send_public`: loopback servers only; every other class is refused before
// any connection (`check_resolved` is tested as a table).

/// Serves every connection with `answer` until dropped with the process; counts requests.
fn serve_all(answer: Vec<u8>) -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = std::sync::Arc::new(AtomicUsize::new(0));
    let seen = std::sync::Arc::clone(&count);
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            if kiln_testkit::read_http_request(&mut stream).is_empty() {
                continue;
            }
            seen.fetch_add(1, Ordering::SeqCst);
            let _ = stream.write_all(&answer);
        }
    });
    (port, count)
}

#[test]
fn a_redirect_is_followed_or_handed_back_as_the_request_says() {
    let (final_port, reached) = serve_all(
        b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\nlast".to_vec(),
    );
    let location = format!(
        "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{final_port}/last\r\n\
         Content-Length: 5\r\nConnection: close\r\n\r\nmoved"
    );
    let cases = [
        (Redirect::Follow, 200, b"last".as_slice(), 1),
        (Redirect::Stop, 302, b"moved".as_slice(), 0),
    ];
    for (redirect, status, body, hops) in cases {
        let before = reached.load(std::sync::atomic::Ordering::SeqCst);
        let (url, server) = serve_once(location.clone().into_bytes(), Duration::ZERO);
        let response = send(Request {
            redirect,
            ..get(&url, 5_000)
        })
        .unwrap();
        server.join().unwrap();
        assert_eq!(
            (response.status, response.body.as_slice()),
            (status, body),
            "{redirect:?}"
        );
        if redirect == Redirect::Stop {
            assert_eq!(
                response.header("location"),
                Some(format!("http://127.0.0.1:{final_port}/last").as_str())
            );
        }
        let after = reached.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(after - before, hops, "{redirect:?}");
    }
}

#[test]
fn send_public_refuses_this_machine_before_connecting() {
    use std::sync::atomic::Ordering;
    let (port, reached) =
        serve_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok".to_vec());
    let client = UreqClient::new();
    // (URL, host, address) as the refusal names them.
    let cases = [
        (
            format!("http://127.0.0.1:{port}/"),
            "127.0.0.1",
            Some("127.0.0.1"),
        ),
        (
            format!("http://0x7f.1:{port}/"),
            "127.0.0.1",
            Some("127.0.0.1"),
        ),
        (format!("http://localhost:{port}/"), "localhost", None),
        (format!("http://[::1]:{port}/"), "[::1]", Some("::1")),
    ];
    for (url, host, address) in cases {
        let error = block_on(client.send_public(get(&url, 5_000))).unwrap_err();
        let HttpError::AddressRefused {
            host: got_host,
            address: got_address,
            class,
            ..
        } = &error
        else {
            panic!("{url}: {error:?}");
        };
        assert_eq!(
            (
                got_host.as_str(),
                got_address.map(|ip| ip.to_string()),
                *class
            ),
            (
                host,
                address.map(str::to_owned),
                crate::address::AddressClass::Loopback
            ),
            "{url}"
        );
    }
    // Past the checks that need no DNS, a name is checked where it resolves, as the public
    // agent connects: `localhost` (from the hosts file) is refused by the resolver itself.
    let url = format!("http://localhost:{port}/");
    let error = block_on(super::send_on(client.public.clone(), get(&url, 5_000))).unwrap_err();
    match &error {
        HttpError::AddressRefused {
            host,
            address: Some(ip),
            class: crate::address::AddressClass::Loopback,
            ..
        } => {
            assert_eq!(host, "localhost");
            assert!(ip.is_loopback(), "{ip}");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        error.to_string().starts_with(&format!(
            "refused `{url}` before connecting: `localhost` resolves to "
        )),
        "{error}"
    );
    assert_eq!(reached.load(Ordering::SeqCst), 0);
    // The same server through `send`: it is there, and the refusals were not for want of it.
    let response = send(get(&format!("http://127.0.0.1:{port}/"), 5_000)).unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(reached.load(Ordering::SeqCst), 1);
}

#[test]
fn resolved_addresses_pass_only_when_all_are_public() {
    let ip = |text: &str| -> std::net::IpAddr { text.parse().unwrap() };
    let cases = [
        (vec!["93.184.215.14"], None),
        (
            vec!["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"],
            None,
        ),
        (vec!["127.0.0.1"], Some("127.0.0.1")),
        (vec!["93.184.215.14", "10.0.0.5"], Some("10.0.0.5")),
        (vec!["169.254.169.254"], Some("169.254.169.254")),
        (vec!["::ffff:192.168.0.1"], Some("::ffff:192.168.0.1")),
        (vec!["fd00::1", "127.0.0.1"], Some("fd00::1")),
    ];
    for (addresses, refused) in cases {
        let got = super::check_resolved("db.example", addresses.iter().map(|text| ip(text)));
        assert_eq!(
            got.err().map(|refused| refused.address.to_string()),
            refused.map(str::to_owned),
            "{addresses:?}"
        );
    }
    let refused = super::check_resolved("db.example", [ip("10.0.0.5")]).unwrap_err();
    assert_eq!(
        refused.to_string(),
        "`db.example` resolves to 10.0.0.5, a private address"
    );
}

/// Serves every connection until dropped with the process: `/first` redirects (`status`) to
/// `location`, anything else answers 200 with the request line. Records every request's head.
fn serve_redirecting(
    status: u16,
    location: &'static str,
) -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = std::sync::Arc::clone(&seen);
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let head = kiln_testkit::read_http_request(&mut stream);
            if head.is_empty() {
                continue;
            }
            let line = head.lines().next().unwrap_or_default().to_owned();
            log.lock().unwrap().push(head);
            let answer = if line.contains(" /first ") {
                format!(
                    "HTTP/1.1 {status} Moved\r\nLocation: {location}\r\nContent-Length: 0\r\n\
                     Connection: close\r\n\r\n"
                )
            } else {
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{line}",
                    line.len()
                )
            };
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    (port, seen)
}

#[test]
fn a_same_origin_request_follows_only_redirects_that_stay_on_its_origin() {
    let keyed = |url: String| Request {
        method: "POST".to_owned(),
        headers: vec![("x-api-key".to_owned(), "sk-secret-1".to_owned())],
        body: Some(b"{}".to_vec()),
        redirect: Redirect::SameOrigin,
        ..get(&url, 5_000)
    };
    // Within the origin: followed, the method kept by a 307 and turned into GET by a 303.
    for (status, line) in [(307, "POST /last HTTP/1.1"), (303, "GET /last HTTP/1.1")] {
        let (port, seen) = serve_redirecting(status, "/last");
        let response = send(keyed(format!("http://127.0.0.1:{port}/first"))).unwrap();
        assert_eq!(
            (response.status, String::from_utf8_lossy(&response.body)),
            (200, line.into()),
            "{status}"
        );
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2, "{status}");
        assert!(seen[1].contains("x-api-key: sk-secret-1"), "{}", seen[1]);
    }

    // To another origin (here another port): refused, and that origin never sees a request,
    // through `send` and through `open` alike.
    let (other_port, other_seen) = serve_redirecting(302, "/never");
    let location: &'static str =
        Box::leak(format!("http://127.0.0.1:{other_port}/steal").into_boxed_str());
    for streamed in [false, true] {
        let (port, seen) = serve_redirecting(307, location);
        let url = format!("http://127.0.0.1:{port}/first");
        let error = if streamed {
            open(keyed(url.clone()), 5_000).err().unwrap()
        } else {
            send(keyed(url.clone())).unwrap_err()
        };
        assert_eq!(
            error,
            HttpError::CrossOriginRedirect {
                url,
                to: location.to_owned()
            }
        );
        assert_eq!(seen.lock().unwrap().len(), 1);
    }
    assert!(other_seen.lock().unwrap().is_empty());
}

//! `http_request`'s network reach: the policy as a table (pure), the tool over
//! a client that sends nothing (every refusal and every redirect to a
//! non-loopback address is decided there, so no test can reach one), and end
//! to end against servers on 127.0.0.1 only.

#![allow(
    clippy::unwrap_used,
    clippy::result_large_err,
    reason = "a test: a panic is a failed test with a line number, and its tools answer the contract's error"
)]

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Write as _;
use std::net::TcpListener;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use futures::executor::block_on;
use futures::future::LocalBoxFuture;
use kiln_capabilities::{
    Dispatcher, Gate, GateSettings, HeldSignal, Mode, NetPolicy, Registry, Secret, SecretScope,
};
use kiln_http::{HttpClient, HttpError, Redirect, Request, Response, StreamingResponse};
use kiln_types::protocol::CallRequest;
use kiln_types::run::RunLimits;
use kiln_types::tool_result::{CallOutcome, ToolReply};
use serde_json::{Value, json};

fn origins(list: &[&str]) -> NetPolicy {
    NetPolicy::parse_origins(
        &list
            .iter()
            .map(|entry| (*entry).to_owned())
            .collect::<Vec<_>>(),
    )
    .unwrap()
}

/// An allow list, and the origins it parses to or a phrase of the error.
type ListCase<'a> = (&'a [&'a str], Result<&'a [&'a str], &'a str>);

#[test]
fn allow_lists_parse_to_origins_or_name_the_bad_entry() {
    let cases: &[ListCase] = &[
        (&["http://127.0.0.1:8080"], Ok(&["http://127.0.0.1:8080"])),
        (&["HTTP://LocalHost:80/"], Ok(&["http://localhost"])),
        (&["https://[::1]:443"], Ok(&["https://[::1]"])),
        (&["http://0x7f.1:9"], Ok(&["http://127.0.0.1:9"])),
        (
            &["example.com"],
            Ok(&["http://example.com", "https://example.com"]),
        ),
        (
            &["127.0.0.1:8080"],
            Ok(&["http://127.0.0.1:8080", "https://127.0.0.1:8080"]),
        ),
        (
            &[
                "http://a.example",
                "http://A.example:80",
                " https://b.example ",
            ],
            Ok(&["http://a.example", "https://b.example"]),
        ),
        (&[], Ok(&[])),
        (
            &["http://ok.example", "http://x.example/path"],
            Err("`http://x.example/path` is not an origin: it has a path"),
        ),
        (&["ftp://x.example"], Err("scheme `ftp` is not allowed")),
        (&[""], Err("`` is not an origin")),
        (&["not a host"], Err("`not a host` is not an origin")),
        (&["example.com/x"], Err("`example.com/x` is not an origin")),
        (
            &["http://u:p@x.example"],
            Err("it has a user name or password"),
        ),
    ];
    for (list, expected) in cases {
        let list: Vec<String> = list.iter().map(|entry| (*entry).to_owned()).collect();
        match (NetPolicy::parse_origins(&list), expected) {
            (Ok(NetPolicy::Only(got)), Ok(want)) => assert_eq!(got, *want, "{list:?}"),
            (Err(error), Err(part)) => assert!(error.contains(part), "{list:?}: {error}"),
            (got, _) => panic!("{list:?}: {got:?}"),
        }
    }
}

#[test]
fn the_policy_decides_every_url_before_anything_is_sent() {
    let named = origins(&[
        "http://127.0.0.1:8080",
        "https://api.example.com",
        "db.internal:5984",
    ]);
    let unset = NetPolicy::Only(vec!["not an origin".into()]);
    // (policy, URL, None when allowed, else a phrase of the refusal)
    let cases: &[(&NetPolicy, &str, Option<&str>)] = &[
        (&NetPolicy::Public, "https://example.com/a", None),
        (&NetPolicy::Public, "http://8.8.8.8/", None),
        (&NetPolicy::Public, "http://[2606:4700:4700::1111]/", None),
        (
            &NetPolicy::Public,
            "http://127.0.0.1:8080/x",
            Some(
                "http_request to `http://127.0.0.1:8080/x` was refused before sending: \
                 `127.0.0.1` is a loopback address, and only public addresses are reached \
                 unless the run names them. To allow it, name it: \
                 `--allow-net=http://127.0.0.1:8080`, or the run's allow list",
            ),
        ),
        (
            &NetPolicy::Public,
            "http://localhost:3000/",
            Some("`localhost` is a loopback name, and only public addresses"),
        ),
        (
            &NetPolicy::Public,
            "http://api.localhost/",
            Some("`api.localhost` is a loopback name"),
        ),
        (
            &NetPolicy::Public,
            "http://[::1]:9/",
            Some("`[::1]` is a loopback address"),
        ),
        (
            &NetPolicy::Public,
            "http://2130706433/",
            Some("`127.0.0.1` is a loopback address"),
        ),
        (
            &NetPolicy::Public,
            "http://0x7f.1/",
            Some("`--allow-net=http://127.0.0.1`"),
        ),
        (
            &NetPolicy::Public,
            "http://169.254.169.254/latest/meta-data/",
            Some("`169.254.169.254` is a link-local address"),
        ),
        (
            &NetPolicy::Public,
            "http://[::ffff:169.254.169.254]/",
            Some("`[::ffff:169.254.169.254]` is a link-local address"),
        ),
        (
            &NetPolicy::Public,
            "http://10.0.0.1/",
            Some("`10.0.0.1` is a private address"),
        ),
        (
            &NetPolicy::Public,
            "http://192.168.1.1/",
            Some("`192.168.1.1` is a private address"),
        ),
        (
            &NetPolicy::Public,
            "http://[fd00::1]/",
            Some("`[fd00::1]` is a private address"),
        ),
        (
            &NetPolicy::Public,
            "http://100.64.0.1/",
            Some("is a shared (carrier-grade NAT) address"),
        ),
        (
            &NetPolicy::Public,
            "http://0.0.0.0:8080/",
            Some("`0.0.0.0` is an unspecified address"),
        ),
        (
            &NetPolicy::Public,
            "ftp://example.com/",
            Some("scheme `ftp` is not allowed"),
        ),
        // Named: reached whatever the address; nothing else is.
        (&named, "http://127.0.0.1:8080/anything?x=1", None),
        (&named, "HTTP://127.0.0.1:8080", None),
        (&named, "http://0x7f.0.0.1:8080/", None),
        (&named, "https://API.example.com/v1", None),
        (&named, "https://api.example.com:443/v1", None),
        (&named, "http://db.internal:5984/", None),
        (&named, "https://db.internal:5984/", None),
        (
            &named,
            "http://127.0.0.1:8081/",
            Some(
                "http_request to `http://127.0.0.1:8081/` was refused before sending: the \
                 origin `http://127.0.0.1:8081` is not one this run allows (it names \
                 http://127.0.0.1:8080, https://api.example.com, http://db.internal:5984, \
                 https://db.internal:5984); `127.0.0.1` is a loopback address. To allow it, \
                 name it: `--allow-net=http://127.0.0.1:8081`, or the run's allow list",
            ),
        ),
        (
            &named,
            "http://api.example.com/",
            Some("the origin `http://api.example.com` is not one this run allows"),
        ),
        (
            &named,
            "http://localhost:8080/",
            Some("`localhost` is a loopback name. To allow it"),
        ),
        (
            &named,
            "https://example.com/",
            Some("`https://example.com` is not one this run allows"),
        ),
        (
            &named,
            "http://169.254.169.254/",
            Some("`169.254.169.254` is a link-local address"),
        ),
        (
            &NetPolicy::Only(Vec::new()),
            "https://example.com/",
            Some("(it names none)"),
        ),
        (
            &unset,
            "https://example.com/",
            Some("it names not an origin"),
        ),
    ];
    for (policy, url, expected) in cases {
        match (policy.check(url), expected) {
            (Ok(()), None) => {}
            (Err(why), Some(part)) => assert!(why.contains(part), "{url}: {why}"),
            (got, _) => panic!("{url} under {policy:?}: {got:?}"),
        }
    }
}

fn dispatcher(policy: NetPolicy, http: Rc<dyn HttpClient>, limits: RunLimits) -> Dispatcher {
    dispatcher_with(policy, http, limits, SecretScope::new())
}

fn dispatcher_with(
    policy: NetPolicy,
    http: Rc<dyn HttpClient>,
    limits: RunLimits,
    secrets: SecretScope,
) -> Dispatcher {
    let mut registry = Registry::new();
    kiln_capabilities::builtin::add_http_request(&mut registry, &http, policy);
    dispatcher_over(registry, limits, secrets)
}

/// A dispatcher in mode `auto` over `registry`.
fn dispatcher_over(registry: Registry, limits: RunLimits, secrets: SecretScope) -> Dispatcher {
    let settings = GateSettings {
        mode: Mode::Auto,
        ..GateSettings::default()
    };
    let gate = Gate::headless("net test", settings).unwrap();
    Dispatcher::new(Rc::new(registry), Some(gate), secrets, limits, "net test")
}

fn call(dispatcher: &Dispatcher, number: u32, args: Value) -> ToolReply {
    let held: HeldSignal = Rc::new(|_| {});
    block_on(dispatcher.call(
        CallRequest {
            call_number: number,
            tool: "http_request".into(),
            args,
        },
        held,
    ))
}

/// An `HttpClient` that sends nothing anywhere: it answers from a script by
/// URL and records what it was asked, and how (`send` or `send_public`, whose
/// default checks are the browser's).
#[derive(Default)]
struct Offline {
    answers: HashMap<String, Response>,
    asked: RefCell<Vec<(&'static str, Request)>>,
}

impl Offline {
    fn answering(answers: &[(&str, u16, Option<&str>)]) -> Rc<Self> {
        let answers = answers
            .iter()
            .map(|(url, status, location)| {
                let headers = location
                    .map(|to| ("location".to_owned(), to.to_owned()))
                    .into_iter()
                    .collect();
                let response = Response {
                    status: *status,
                    headers,
                    body: b"offline".to_vec(),
                    truncated: false,
                };
                ((*url).to_owned(), response)
            })
            .collect();
        Rc::new(Self {
            answers,
            asked: RefCell::default(),
        })
    }

    fn asked(&self) -> Vec<(&'static str, String)> {
        self.asked
            .borrow()
            .iter()
            .map(|(how, request)| (*how, request.url.clone()))
            .collect()
    }
}

impl HttpClient for Offline {
    fn send(&self, request: Request) -> LocalBoxFuture<'static, Result<Response, HttpError>> {
        let how = if request.redirect == Redirect::Stop {
            "stop"
        } else {
            "follow"
        };
        let answer = self.answers.get(&request.url).cloned();
        let url = request.url.clone();
        self.asked.borrow_mut().push((how, request));
        Box::pin(async move {
            answer.ok_or(HttpError::Unreachable {
                url,
                message: "not scripted".into(),
            })
        })
    }

    fn open(
        &self,
        request: Request,
        _idle_timeout_ms: u64,
    ) -> LocalBoxFuture<'static, Result<StreamingResponse, HttpError>> {
        Box::pin(async move {
            Err(HttpError::Unreachable {
                url: request.url,
                message: "not scripted".into(),
            })
        })
    }
}

#[test]
fn refusals_and_redirects_to_any_address_class_are_decided_before_sending() {
    let public = "http://93.184.215.14/";
    // (policy, URL called, the scripted answers, the code, what was sent)
    type Case<'a> = (
        NetPolicy,
        &'a str,
        Vec<(&'a str, u16, Option<&'a str>)>,
        Result<&'a str, &'a str>,
        Vec<&'a str>,
    );
    let cases: Vec<Case> = vec![
        (
            NetPolicy::Public,
            "http://10.0.0.1/",
            vec![],
            Err("address_refused"),
            vec![],
        ),
        (
            NetPolicy::Public,
            "http://169.254.169.254/latest/",
            vec![],
            Err("address_refused"),
            vec![],
        ),
        (
            NetPolicy::Public,
            "http://192.168.1.1/",
            vec![],
            Err("address_refused"),
            vec![],
        ),
        (
            NetPolicy::Public,
            "http://[fe80::1]/",
            vec![],
            Err("address_refused"),
            vec![],
        ),
        (
            NetPolicy::Public,
            "http://0xa9fea9fe/",
            vec![],
            Err("address_refused"),
            vec![],
        ),
        (
            origins(&["http://10.0.0.1"]),
            "http://10.0.0.2/",
            vec![],
            Err("address_refused"),
            vec![],
        ),
        // A public server redirecting to the metadata service, to a private host, to
        // loopback: the first request goes, the redirect does not.
        (
            NetPolicy::Public,
            public,
            vec![(
                public,
                302,
                Some("http://169.254.169.254/latest/meta-data/"),
            )],
            Err("address_refused"),
            vec![public],
        ),
        (
            NetPolicy::Public,
            public,
            vec![(public, 301, Some("http://192.168.1.1/admin"))],
            Err("address_refused"),
            vec![public],
        ),
        (
            NetPolicy::Public,
            public,
            vec![(public, 307, Some("http://[::ffff:127.0.0.1]:8080/"))],
            Err("address_refused"),
            vec![public],
        ),
        (
            NetPolicy::Public,
            public,
            vec![(public, 308, Some("http://localhost/"))],
            Err("address_refused"),
            vec![public],
        ),
        (
            NetPolicy::Public,
            public,
            vec![(public, 302, Some("file:///etc/passwd"))],
            Err("redirect_refused"),
            vec![public],
        ),
        // A public redirect is followed, relative or not.
        (
            NetPolicy::Public,
            public,
            vec![
                (public, 302, Some("/next")),
                (
                    "http://93.184.215.14/next",
                    303,
                    Some("https://example.com/"),
                ),
                ("https://example.com/", 200, None),
            ],
            Ok("https://example.com/"),
            vec![public, "http://93.184.215.14/next", "https://example.com/"],
        ),
        // Not a redirect fetch follows: answered as it is.
        (
            NetPolicy::Public,
            public,
            vec![(public, 300, Some("http://10.0.0.1/"))],
            Ok(public),
            vec![public],
        ),
        (
            NetPolicy::Public,
            public,
            vec![(public, 304, Some("http://10.0.0.1/"))],
            Ok(public),
            vec![public],
        ),
        // Named private origins: reached, and a redirect out of them is not.
        (
            origins(&["http://10.0.0.1"]),
            "http://10.0.0.1/a",
            vec![
                ("http://10.0.0.1/a", 302, Some("http://10.0.0.1/b")),
                ("http://10.0.0.1/b", 200, None),
            ],
            Ok("http://10.0.0.1/b"),
            vec!["http://10.0.0.1/a", "http://10.0.0.1/b"],
        ),
        (
            origins(&["http://10.0.0.1"]),
            "http://10.0.0.1/a",
            vec![("http://10.0.0.1/a", 302, Some("http://10.0.0.2/"))],
            Err("address_refused"),
            vec!["http://10.0.0.1/a"],
        ),
        (
            origins(&["http://10.0.0.1"]),
            "http://10.0.0.1/a",
            vec![("http://10.0.0.1/a", 302, Some("https://example.com/"))],
            Err("address_refused"),
            vec!["http://10.0.0.1/a"],
        ),
    ];
    for (policy, url, answers, expected, sent) in cases {
        let http = Offline::answering(&answers);
        let dispatcher = dispatcher(policy.clone(), http.clone(), RunLimits::default());
        let reply = call(&dispatcher, 1, json!({"url": url}));
        let label = format!("{url} under {policy:?}");
        match (reply, expected) {
            (Ok(answer), Ok(last)) => assert_eq!(answer["url"], last, "{label}"),
            (Err(failure), Err(code)) => {
                assert_eq!(failure.code, code, "{label}: {}", failure.message);
                if code == "address_refused" {
                    assert_eq!(failure.outcome, CallOutcome::Refused, "{label}");
                    assert!(
                        failure
                            .message
                            .contains("To allow it, name it: `--allow-net="),
                        "{label}: {}",
                        failure.message
                    );
                }
            }
            (got, _) => panic!("{label}: {got:?}"),
        }
        let asked = http.asked();
        let urls: Vec<&str> = asked.iter().map(|(_, url)| url.as_str()).collect();
        assert_eq!(urls, sent, "{label}");
        assert!(
            asked.iter().all(|(how, _)| *how == "stop"),
            "{label}: the tool follows redirects itself: {asked:?}"
        );
        assert_eq!(
            dispatcher.run_state().fetch_calls(),
            u32::try_from(sent.len()).unwrap(),
            "{label}: each request sent, and only those, spends the budget"
        );
    }
}

#[test]
fn a_refusal_names_host_address_and_class_in_its_detail() {
    let http = Offline::answering(&[]);
    let dispatcher = dispatcher(NetPolicy::Public, http.clone(), RunLimits::default());
    let failure = call(
        &dispatcher,
        1,
        json!({"url": "http://169.254.169.254/latest/meta-data/?token=T"}),
    )
    .unwrap_err();
    assert_eq!(
        failure.detail,
        Some(json!({
            "url": "http://169.254.169.254/latest/meta-data/?…",
            "origin": "http://169.254.169.254",
            "host": "169.254.169.254",
            "address": "169.254.169.254",
            "class": "link-local",
        }))
    );
    assert!(http.asked().is_empty());
}

// End to end: servers on 127.0.0.1, the platform's real client.

/// A loopback server that answers every connection by `answer(request head)`
/// and keeps every request it received.
struct Server {
    port: u16,
    received: Arc<Mutex<Vec<String>>>,
}

impl Server {
    fn start(answer: impl Fn(&str, u16) -> String + Send + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&received);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let request = kiln_testkit::read_http_request(&mut stream);
                if request.is_empty() {
                    continue;
                }
                let reply = answer(&request, port);
                log.lock().unwrap().push(request);
                let _ = stream.write_all(reply.as_bytes());
            }
        });
        Self { port, received }
    }

    fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn received(&self) -> Vec<String> {
        self.received.lock().unwrap().clone()
    }
}

fn ok(body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn redirect(status: u16, location: &str) -> String {
    format!(
        "HTTP/1.1 {status} Redirect\r\nlocation: {location}\r\ncontent-length: 0\r\n\
         connection: close\r\n\r\n"
    )
}

/// The request line's path.
fn path(request: &str) -> &str {
    request.split(' ').nth(1).unwrap_or_default()
}

fn real() -> Rc<dyn HttpClient> {
    kiln_http::default_client()
}

#[test]
fn public_reach_refuses_this_machine_and_sends_nothing() {
    let server = Server::start(|_, _| ok("reached"));
    let port = server.port;
    let dispatcher = dispatcher(NetPolicy::Public, real(), RunLimits::default());
    let urls = [
        format!("http://127.0.0.1:{port}/"),
        format!("http://localhost:{port}/"),
        format!("http://LOCALHOST.:{port}/"),
        format!("http://2130706433:{port}/"),
        format!("http://0x7f.1:{port}/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
        format!("http://[::1]:{port}/"),
    ];
    for (number, url) in (1..).zip(&urls) {
        let failure = call(&dispatcher, number, json!({"url": url})).unwrap_err();
        assert_eq!(
            failure.code, "address_refused",
            "{url}: {}",
            failure.message
        );
        assert!(
            failure.message.contains("loopback"),
            "{url}: {}",
            failure.message
        );
        assert!(
            failure.message.contains("--allow-net=http://"),
            "{url}: {}",
            failure.message
        );
    }
    assert!(server.received().is_empty(), "{:?}", server.received());
    assert_eq!(dispatcher.run_state().fetch_calls(), 0);
}

#[test]
fn a_named_loopback_origin_is_reached_and_its_redirects_checked_hop_by_hop() {
    let other = Server::start(|_, _| ok("other"));
    let other_origin = other.origin();
    let server = Server::start(move |request, port| match path(request) {
        "/hello" => ok("hello"),
        "/moved" => redirect(302, "/hello"),
        "/absolute" => redirect(301, &format!("http://localhost:{port}/hello")),
        "/away" => redirect(302, &format!("{other_origin}/stolen")),
        "/loop" => redirect(302, "/loop"),
        _ => ok("?"),
    });
    let origin = server.origin();
    let dispatcher = dispatcher(
        origins(&[&origin, &format!("http://localhost:{}", server.port)]),
        real(),
        RunLimits::default(),
    );

    let reply = call(&dispatcher, 1, json!({"url": format!("{origin}/hello")})).unwrap();
    assert_eq!(
        (reply["status"].as_u64(), reply["body"].as_str()),
        (Some(200), Some("hello"))
    );

    let reply = call(&dispatcher, 2, json!({"url": format!("{origin}/moved")})).unwrap();
    assert_eq!(reply["url"], format!("{origin}/hello"));
    assert_eq!(reply["body"], "hello");

    // To another named origin (localhost on the same port) and back to a path there.
    let reply = call(&dispatcher, 3, json!({"url": format!("{origin}/absolute")})).unwrap();
    assert_eq!(
        reply["url"],
        format!("http://localhost:{}/hello", server.port)
    );

    // Out to another loopback port the run did not name: refused, never sent.
    let failure = call(&dispatcher, 4, json!({"url": format!("{origin}/away")})).unwrap_err();
    assert_eq!(failure.code, "address_refused", "{}", failure.message);
    assert!(
        failure.message.contains(&format!(
            "the origin `{}` is not one this run allows",
            other.origin()
        )),
        "{}",
        failure.message
    );
    assert!(other.received().is_empty(), "{:?}", other.received());

    let before = dispatcher.run_state().fetch_calls();
    let failure = call(&dispatcher, 5, json!({"url": format!("{origin}/loop")})).unwrap_err();
    assert_eq!(failure.code, "too_many_redirects", "{}", failure.message);
    assert!(
        failure.message.contains("stopped after 10 redirects"),
        "{}",
        failure.message
    );
    assert_eq!(dispatcher.run_state().fetch_calls() - before, 11);

    let paths: Vec<String> = server
        .received()
        .iter()
        .map(|request| path(request).to_owned())
        .collect();
    let mut expected = vec!["/hello", "/moved", "/hello", "/absolute", "/hello", "/away"];
    expected.extend(["/loop"; 11]);
    assert_eq!(paths, expected);
}

#[test]
fn a_redirect_changes_method_and_drops_credentials_as_fetch_does() {
    let other = Server::start(|_, _| ok("other"));
    let other_origin = other.origin();
    let server = Server::start(move |request, _| match path(request) {
        "/see-other" => redirect(303, "/landing"),
        "/found" => redirect(302, "/landing"),
        "/temporary" => redirect(307, "/landing"),
        "/cross" => redirect(307, &format!("{other_origin}/landing")),
        _ => ok("landed"),
    });
    let origin = server.origin();
    let mut secrets = SecretScope::new();
    secrets.insert("KEY", Secret::new("sk-0123456789"));
    let dispatcher = dispatcher_with(
        origins(&[&origin, &other.origin()]),
        real(),
        RunLimits::default(),
        secrets,
    );
    let post = |number: u32, path: &str| {
        call(
            &dispatcher,
            number,
            json!({
                "url": format!("{origin}{path}"),
                "method": "POST",
                "headers": {"content-type": "text/plain", "x-plain": "kept", "Cookie": "c=1"},
                "secret_headers": {"x-key": "${KEY}"},
                "body": "the body",
            }),
        )
        .unwrap()
    };
    // (path, what the hop after the redirect sends)
    let cases = [
        ("/see-other", "GET /landing", false),
        ("/found", "GET /landing", false),
        ("/temporary", "POST /landing", true),
    ];
    for (number, (path, line, has_body)) in (1..).zip(cases) {
        post(number, path);
        let received = server.received();
        let hop = received.last().unwrap().to_ascii_lowercase();
        assert!(hop.starts_with(&line.to_ascii_lowercase()), "{path}: {hop}");
        assert_eq!(hop.ends_with("the body"), has_body, "{path}: {hop}");
        assert_eq!(
            hop.contains("content-type: text/plain"),
            has_body,
            "{path}: {hop}"
        );
        // The same origin: credentials stay.
        for header in ["x-plain: kept", "x-key: sk-0123456789", "cookie: c=1"] {
            assert!(hop.contains(header), "{path}: {header} in {hop}");
        }
    }
    post(4, "/cross");
    let hop = other.received().last().unwrap().to_ascii_lowercase();
    assert!(hop.starts_with("post /landing"), "{hop}");
    assert!(hop.contains("x-plain: kept"), "{hop}");
    for header in ["x-key", "cookie"] {
        assert!(
            !hop.contains(header),
            "{header} followed to another origin: {hop}"
        );
    }
}

#[test]
fn every_hop_spends_the_fetch_budget() {
    let server = Server::start(|request, _| match path(request) {
        "/1" => redirect(302, "/2"),
        "/2" => redirect(302, "/3"),
        _ => ok("end"),
    });
    let limits = RunLimits {
        fetch_calls: 2,
        ..RunLimits::default()
    };
    let dispatcher = dispatcher(origins(&[&server.origin()]), real(), limits);
    let failure = call(
        &dispatcher,
        1,
        json!({"url": format!("{}/1", server.origin())}),
    )
    .unwrap_err();
    assert_eq!(failure.code, "budget_exhausted:fetch_calls");
    assert_eq!(server.received().len(), 2);
}

/// The `x-key` header a reflecting server was sent.
fn sent_key(request: &str) -> String {
    request
        .lines()
        .find_map(|line| line.strip_prefix("x-key: "))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// A server on the allowed origin that reflects the secret back: the program
/// gets it scrubbed whether the body comes as text or as base64 bytes, and
/// whether the body budget cuts through the secret or not (issue 15 #14).
#[test]
fn a_reflected_secret_comes_back_scrubbed_as_bytes_and_across_the_cut() {
    const SECRET: &str = "sk-reflected-0123456789";
    let server = Server::start(|request, _| {
        let key = sent_key(request);
        // 20 bytes, the key, then more.
        ok(&format!("0123456789abcdefghij{key}-and-the-rest"))
    });
    let mut secrets = SecretScope::new();
    secrets.insert("KEY", Secret::new(SECRET));
    // (body budget, response_type, what the program may see)
    let cases: [(usize, &str, &str, bool); 5] = [
        (
            1_000,
            "text",
            "0123456789abcdefghij[redacted:KEY]-and-the-rest",
            false,
        ),
        (
            1_000,
            "bytes",
            "0123456789abcdefghij[redacted:KEY]-and-the-rest",
            false,
        ),
        // The cut falls inside the secret: no prefix of it is left.
        (30, "text", "0123456789abcdefghij[redacted:KEY]", true),
        (30, "bytes", "0123456789abcdefghij[redacted:KEY]", true),
        // The cut falls before it: nothing of it.
        (20, "text", "0123456789abcdefghij", true),
    ];
    for (number, (budget, kind, seen, cut)) in (1..).zip(cases) {
        let limits = RunLimits {
            fetch_body_bytes: budget,
            ..RunLimits::default()
        };
        let dispatcher = dispatcher_with(
            origins(&[&server.origin()]),
            real(),
            limits,
            secrets.clone(),
        );
        let reply = call(
            &dispatcher,
            number,
            json!({
                "url": format!("{}/reflect", server.origin()),
                "secret_headers": {"x-key": "${KEY}"},
                "response_type": kind,
            }),
        )
        .unwrap();
        let body = if kind == "bytes" {
            let encoded = reply["body"]["$bytes"].as_str().unwrap();
            String::from_utf8(
                base64::engine::general_purpose::STANDARD
                    .decode(encoded)
                    .unwrap(),
            )
            .unwrap()
        } else {
            reply["body"].as_str().unwrap().to_owned()
        };
        assert_eq!(body, seen, "budget {budget}, {kind}");
        assert_eq!(reply["truncated"], cut, "budget {budget}, {kind}");
        assert!(!body.contains("sk-refl"), "budget {budget}, {kind}: {body}");
    }
}

/// A server on the allowed origin that reflects the secret transformed
/// (percent-encoded, JSON or HTML escapes, upper-cased, base64, hex, in a
/// header): the exact scrub would miss each, so the program gets none of the
/// response, a `secret_reflected` failure naming where it was found. An exact
/// echo is scrubbed in place as before; an answer without the secret is whole
/// (issue 15 #14).
#[test]
fn a_secret_reflected_in_any_common_encoding_withholds_the_response() {
    const SECRET: &str = "sk-Reflected/0123456789";
    let server = Server::start(|request, _| {
        let key = sent_key(request);
        let form = request
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .trim_start_matches('/')
            .to_owned();
        let percent: String = key.bytes().map(|b| format!("%{b:02X}")).collect();
        let body = match form.split('?').next().unwrap_or_default() {
            "plain" => format!("you sent {key}"),
            "percent" => format!("next=https://x.example/?k={percent}"),
            "json" => {
                let escaped: String = key
                    .chars()
                    .map(|c| format!("\\u{:04x}", c as u32))
                    .collect();
                format!(r#"{{"echo": "{escaped}"}}"#)
            }
            "html" => key.chars().map(|c| format!("&#x{:x};", c as u32)).collect(),
            "upper" => key.to_uppercase(),
            "base64" => base64::engine::general_purpose::STANDARD.encode(format!("k={key}")),
            "hex" => key.bytes().map(|b| format!("{b:02x}")).collect(),
            "header" => {
                let body = "see the header";
                return format!(
                    "HTTP/1.1 200 OK\r\nx-echo: {percent}\r\ncontent-length: {}\r\n\
                     connection: close\r\n\r\n{body}",
                    body.len()
                );
            }
            // Echoes the query the program wrote, and nothing it was not given.
            "query" => form
                .split_once('?')
                .map(|(_, q)| q.to_owned())
                .unwrap_or_default(),
            _ => "nothing of yours".to_owned(),
        };
        ok(&body)
    });
    let mut secrets = SecretScope::new();
    secrets.insert("KEY", Secret::new(SECRET));
    let guess: String = SECRET.bytes().map(|b| format!("%{b:02X}")).collect();
    let wrong: String = "sk-Reflected/0123456780"
        .bytes()
        .map(|b| format!("%{b:02X}"))
        .collect();
    // (path, the body the program gets, or where the secret was found)
    let cases: Vec<(String, Result<&str, &str>)> = vec![
        ("plain".into(), Ok("you sent [redacted:KEY]")),
        ("none".into(), Ok("nothing of yours")),
        ("percent".into(), Err("the body")),
        ("json".into(), Err("the body")),
        ("html".into(), Err("the body")),
        ("upper".into(), Err("the body")),
        ("base64".into(), Err("the body")),
        ("hex".into(), Err("the body")),
        ("header".into(), Err("the header `x-echo`")),
        // The program's own guess, echoed: the same answer right or wrong,
        // so no refusal confirms it.
        (format!("query?{guess}"), Ok(guess.as_str())),
        (format!("query?{wrong}"), Ok(wrong.as_str())),
    ];
    let dispatcher = dispatcher_with(
        origins(&[&server.origin()]),
        real(),
        RunLimits::default(),
        secrets.clone(),
    );
    for (number, (path, expected)) in (1..).zip(cases) {
        let reply = call(
            &dispatcher,
            number,
            json!({
                "url": format!("{}/{path}", server.origin()),
                "secret_headers": {"x-key": "${KEY}"},
            }),
        );
        match (reply, expected) {
            (Ok(reply), Ok(body)) => assert_eq!(reply["body"], body, "{path}"),
            (Err(failure), Err(place)) => {
                assert_eq!(failure.code, "secret_reflected", "{path}");
                assert_eq!(failure.detail.as_ref().unwrap()["where"], place, "{path}");
                assert!(
                    failure.message.contains("status 200"),
                    "{path}: {}",
                    failure.message
                );
                assert!(!failure.message.contains("sk-R"), "{path}");
            }
            (got, want) => panic!("{path}: got {got:?}, want {want:?}"),
        }
    }
    // A cut through the encoded secret leaves no prefix of it either.
    let cut = dispatcher_with(
        origins(&[&server.origin()]),
        real(),
        RunLimits {
            fetch_body_bytes: 40,
            ..RunLimits::default()
        },
        secrets,
    );
    let failure = call(
        &cut,
        1,
        json!({"url": format!("{}/percent", server.origin()), "secret_headers": {"x-key": "${KEY}"}}),
    )
    .unwrap_err();
    assert_eq!(failure.code, "secret_reflected");
}

/// A run never reaches its own MCP servers through http_request, even at an
/// origin it names: their tools go through the ladder one by one, and JSON-RPC
/// sent straight to them would step around a blocked tool (issue 15 #19).
#[test]
fn a_runs_mcp_servers_are_not_reached_directly() {
    let mcp = Server::start(|_, _| ok(r#"{"jsonrpc": "2.0", "id": 1, "result": {}}"#));
    let other = Server::start(|_, _| ok("other"));
    let mut registry = Registry::new();
    kiln_capabilities::builtin::add_http_request_beside_mcp(
        &mut registry,
        &real(),
        origins(&[&mcp.origin(), &other.origin()]),
        &[format!("{}/mcp", mcp.origin())],
    );
    let dispatcher = dispatcher_over(registry, RunLimits::default(), SecretScope::new());
    for (number, path) in [(1, "/mcp"), (2, "/elsewhere")] {
        let failure = call(
            &dispatcher,
            number,
            json!({"url": format!("{}{path}", mcp.origin()), "method": "POST",
                   "body": r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"blocked"}}"#}),
        )
        .unwrap_err();
        assert_eq!(failure.code, "address_refused", "{}", failure.message);
        assert!(
            failure.message.contains("is an MCP server this run mounts"),
            "{}",
            failure.message
        );
    }
    assert!(mcp.received().is_empty(), "{:?}", mcp.received());
    let reached = call(
        &dispatcher,
        3,
        json!({"url": format!("{}/x", other.origin())}),
    )
    .unwrap();
    assert_eq!(reached["body"], "other");
}

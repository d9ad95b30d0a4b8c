//! `web_search` through the real ladder against servers on 127.0.0.1 that
//! answer in the search APIs' own shapes: SearXNG's JSON API (no key) and
//! Brave's Web Search API (its key in `X-Subscription-Token`). The key goes
//! to the API and comes back in nothing: a server that quotes it in an error
//! or in a result is answered with it redacted.

#![allow(
    clippy::unwrap_used,
    clippy::result_large_err,
    reason = "a test: a panic is a failed test with a line number, and its tools answer the contract's error"
)]

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpListener;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use futures::executor::block_on;
use kiln_capabilities::{Dispatcher, Gate, GateSettings, HeldSignal, Mode, Registry, SecretScope};
use kiln_types::Redacted;
use kiln_types::protocol::CallRequest;
use kiln_types::run::RunLimits;
use kiln_types::search::{SearchProvider, WebSearch};
use kiln_types::tool_result::ToolReply;
use serde_json::{Value, json};

const KEY: &str = "brave-key-s3cret-42";

/// Each request line a server saw, with the subscription token it carried.
type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// A loopback server answering every request with `answer(request line,
/// subscription token)` as `(status, body)`; keeps each request line and token.
fn server(answer: impl Fn(&str, &str) -> (u16, String) + Send + 'static) -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let root = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut first = String::new();
            let _ = reader.read_line(&mut first);
            let mut token = String::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some((name, value)) = line.split_once(':')
                    && name.eq_ignore_ascii_case("x-subscription-token")
                {
                    value.trim().clone_into(&mut token);
                }
            }
            let first = first.trim().to_owned();
            let (status, body) = answer(&first, &token);
            kept.lock().unwrap().push((first, token));
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (root, seen)
}

fn call(setting: &WebSearch, key: Option<&str>, args: Value) -> ToolReply {
    let mut registry = Registry::new();
    kiln_capabilities::web_search::add_web_search(
        &mut registry,
        &kiln_http::default_client(),
        setting,
        key.map(Redacted::new),
    );
    let gate = Gate::headless(
        "search test",
        GateSettings {
            mode: Mode::Auto,
            ..GateSettings::default()
        },
    )
    .unwrap();
    let dispatcher = Dispatcher::new(
        Rc::new(registry),
        Some(gate),
        SecretScope::new(),
        RunLimits::default(),
        "search test",
    );
    let held: HeldSignal = Rc::new(|_| {});
    block_on(dispatcher.call(
        CallRequest {
            call_number: 1,
            tool: "web_search".into(),
            args,
        },
        held,
    ))
}

#[test]
fn searxng_is_asked_for_json_and_its_results_answered() {
    let (root, seen) = server(|_, _| {
        (
            200,
            json!({"query": "kiln", "results": [
                {"title": "Kiln", "url": "https://kiln.example/", "content": "An agent runtime in the browser.", "engine": "duckduckgo"},
                {"title": "Kilns", "url": "https://en.wikipedia.org/wiki/Kiln", "content": "A kiln is an oven."},
                {"title": "Third", "url": "https://third.example/", "content": "c"}
            ]})
            .to_string(),
        )
    });
    let setting = WebSearch {
        provider: SearchProvider::Searxng,
        base_url: root,
        key_secret: None,
    };
    let found = call(&setting, None, json!({"query": "kiln runtime", "count": 2})).unwrap();
    assert_eq!(
        found,
        json!([
            {"title": "Kiln", "url": "https://kiln.example/", "snippet": "An agent runtime in the browser."},
            {"title": "Kilns", "url": "https://en.wikipedia.org/wiki/Kiln", "snippet": "A kiln is an oven."}
        ])
    );
    assert_eq!(
        seen.lock().unwrap()[0].0,
        "GET /search?q=kiln+runtime&format=json HTTP/1.1"
    );
    let empty = call(&setting, None, json!({"query": " "})).unwrap_err();
    assert_eq!(empty.code, "invalid_arguments");
}

#[test]
fn brave_gets_its_key_and_nothing_it_answers_carries_it() {
    let (root, seen) = server(|line, token| {
        if token != KEY {
            return (
                401,
                json!({"error": format!("bad token {token}")}).to_string(),
            );
        }
        if line.contains("q=echo") {
            // A careless API quoting the key back in a result.
            return (
                200,
                json!({"web": {"results": [{"title": "Echo", "url": "https://e.example/", "description": format!("your key is {token}")}]}})
                    .to_string(),
            );
        }
        (
            200,
            json!({"web": {"results": [{"title": "Brave result", "url": "https://b.example/", "description": "Found."}]}})
                .to_string(),
        )
    });
    let setting = WebSearch {
        provider: SearchProvider::Brave,
        base_url: root,
        key_secret: Some("BRAVE_KEY".into()),
    };
    let found = call(&setting, Some(KEY), json!({"query": "kiln"})).unwrap();
    assert_eq!(found[0]["title"], "Brave result");
    assert_eq!(seen.lock().unwrap()[0].1, KEY, "the key went to the API");
    let echoed = call(&setting, Some(KEY), json!({"query": "echo"})).unwrap();
    assert!(!echoed.to_string().contains(KEY), "{echoed}");
    let wrong = call(
        &setting,
        Some("brave-key-wrong-99"),
        json!({"query": "kiln"}),
    )
    .unwrap_err();
    assert_eq!(wrong.code, "search_unauthorized");
    assert!(
        wrong.message.contains("brave answered 401")
            && !wrong.message.contains("brave-key-wrong-99"),
        "{}",
        wrong.message
    );
}

#[test]
fn a_setting_is_held_to_its_rules() {
    let missing_key = WebSearch {
        provider: SearchProvider::Tavily,
        base_url: String::new(),
        key_secret: None,
    };
    assert!(missing_key.check().unwrap_err().contains("needs its key"));
    let no_instance = WebSearch {
        provider: SearchProvider::Searxng,
        base_url: String::new(),
        key_secret: None,
    };
    assert!(
        no_instance
            .check()
            .unwrap_err()
            .contains("needs `base_url`")
    );
}

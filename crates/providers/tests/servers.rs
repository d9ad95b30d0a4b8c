//! The three adapters against real servers: aimock (one instance per test, its fixtures
//! described in `servers/aimock/README.md`) for every success and failure a provider can
//! answer with, and SmolLM2 behind llama.cpp for a model that really writes. Each case runs
//! for every adapter; the journal shows what reached the server (and that a refused turn
//! sent nothing).

#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a panic here is a failed test with its line"
)]

use std::io::Write as _;
use std::net::TcpListener;
use std::rc::Rc;

use futures::StreamExt as _;
use futures::executor::block_on;
use kiln_http::{Clock as _, FakeClock};
use kiln_providers::budget::{BudgetLimits, RunBudget};
use kiln_providers::cost::PriceCatalog;
use kiln_providers::{
    AbortSignal, ApiKey, ChatOptions, ChatRequest, Event, EventStream, FinalMessage, HttpProvider,
    Message, Provider, ProviderConfig, ProviderError, ProviderKind, ResponseFormat, RetryPolicy,
    StopReason, Timeouts, ToolCall, ToolDef, Usage,
};
use kiln_testkit::{Aimock, LocalModel};
use serde_json::{Value, json};

type Item = Result<Event, ProviderError>;

/// Retries that keep the tests quick: backoff of a few milliseconds, but a provider's
/// `Retry-After: 1` is still honoured.
const QUICK_RETRY: RetryPolicy = RetryPolicy {
    max_retries: 2,
    base_delay_ms: 5,
    max_delay_ms: 5_000,
};

/// The API root each adapter is configured with, for a server at `root`.
fn base_url(kind: ProviderKind, root: &str) -> String {
    match kind {
        ProviderKind::OpenAi => format!("{root}/v1"),
        ProviderKind::Anthropic | ProviderKind::Ollama | ProviderKind::InProcess => root.to_owned(),
    }
}

/// The path each adapter posts a turn to.
fn chat_path(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::OpenAi => "/v1/chat/completions",
        ProviderKind::Anthropic => "/v1/messages",
        ProviderKind::Ollama | ProviderKind::InProcess => "/api/chat",
    }
}

/// A model id of each provider's own (the ones `kiln-which-model` and the price catalog
/// know).
fn model_of(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::OpenAi => "gpt-4o-mini",
        ProviderKind::Anthropic => "claude-sonnet-4-5",
        ProviderKind::Ollama | ProviderKind::InProcess => "llama3.2",
    }
}

fn provider_with_key(kind: ProviderKind, root: &str, key: Option<&str>) -> HttpProvider {
    HttpProvider::new(
        ProviderConfig {
            kind,
            base_url: base_url(kind, root),
            key: key.map(ApiKey::new),
        },
        kiln_http::default_client(),
    )
    .with_retry(QUICK_RETRY)
}

fn provider(kind: ProviderKind, root: &str) -> HttpProvider {
    provider_with_key(kind, root, Some("sk-kiln-test"))
}

fn ask(kind: ProviderKind, text: &str) -> ChatRequest {
    ChatRequest {
        messages: vec![
            Message::System {
                text: "You are terse.".into(),
            },
            Message::User { text: text.into() },
        ],
        tools: Vec::new(),
        options: ChatOptions {
            max_tokens: 100,
            ..ChatOptions::new(model_of(kind))
        },
    }
}

fn weather_tool() -> ToolDef {
    ToolDef {
        name: "get_weather".into(),
        description: "The weather in a city.".into(),
        input_schema: json!({
            "type": "object",
            "properties": {"city": {"type": "string"}, "units": {"type": "string"}},
            "required": ["city"]
        }),
    }
}

fn everything(stream: EventStream) -> Vec<Item> {
    block_on(stream.collect())
}

fn stream_of(kind: ProviderKind, root: &str, request: ChatRequest) -> Vec<Item> {
    everything(provider(kind, root).stream(request))
}

/// The turn ended as every turn must: no error, exactly one `Stop`, right before `Done`,
/// which is last and holds what the events said. Answers `Done`'s message.
fn finished(kind: ProviderKind, items: &[Item]) -> FinalMessage {
    let events: Vec<&Event> = items
        .iter()
        .map(|item| {
            item.as_ref()
                .unwrap_or_else(|error| panic!("{kind}: {} {error}", error.code()))
        })
        .collect();
    let stops = events
        .iter()
        .filter(|event| matches!(event, Event::Stop { .. }))
        .count();
    assert_eq!(stops, 1, "{kind}: {events:#?}");
    let [.., Event::Stop { .. }, Event::Done { message }] = events.as_slice() else {
        panic!("{kind}: the turn does not end with a stop and done: {events:#?}");
    };
    let mut folded = FinalMessage::default();
    events.iter().for_each(|event| folded.absorb(event));
    assert_eq!(
        (
            &message.text,
            &message.tool_calls,
            message.usage,
            &message.stop
        ),
        (&folded.text, &folded.tool_calls, folded.usage, &folded.stop),
        "{kind}: done's message is not what the events said"
    );
    message.clone()
}

/// The one error a failed turn ends with (nothing after it, no stop or done before it).
fn failed(kind: ProviderKind, items: &[Item]) -> ProviderError {
    let Some((Err(error), before)) = items.split_last() else {
        panic!("{kind}: the turn did not end with an error: {items:#?}");
    };
    assert!(
        before.iter().all(|item| matches!(
            item,
            Ok(event) if !matches!(event, Event::Stop { .. } | Event::Done { .. })
        )),
        "{kind}: {items:#?}"
    );
    error.clone()
}

fn usage_events(items: &[Item]) -> Vec<Usage> {
    items
        .iter()
        .filter_map(|item| match item {
            Ok(Event::Usage { usage }) => Some(*usage),
            _ => None,
        })
        .collect()
}

fn stop_reason(message: &FinalMessage) -> Option<StopReason> {
    message.stop.as_ref().map(|stop| stop.reason.clone())
}

/// The journal's requests to `path` whose body says `text` (as a whole JSON string).
fn requests_saying(journal: &Value, path: &str, text: &str) -> Vec<Value> {
    let quoted = serde_json::to_string(text).unwrap();
    journal
        .as_array()
        .unwrap()
        .iter()
        .filter(|entry| entry["path"] == path && entry["body"].to_string().contains(&quoted))
        .cloned()
        .collect()
}

fn usage(input_tokens: u64, output_tokens: u64) -> Usage {
    Usage {
        input_tokens,
        output_tokens,
    }
}

fn budget(limits: BudgetLimits) -> RunBudget {
    RunBudget::new(
        limits,
        Rc::new(PriceCatalog::builtin()),
        Rc::new(kiln_http::SystemClock),
    )
}

/// The stop of a turn the budget refused: exactly a stop and an empty done.
fn refused(kind: ProviderKind, items: &[Item]) -> kiln_providers::Stop {
    let message = finished(kind, items);
    assert_eq!(items.len(), 2, "{kind}: {items:#?}");
    assert_eq!(
        (message.text.as_str(), message.usage),
        ("", Usage::default())
    );
    message.stop.unwrap()
}

#[test]
fn text_streams_on_every_adapter() {
    let aimock = Aimock::start();
    // Usage as each endpoint reports it: the fixture's on OpenAI and Anthropic, aimock's
    // zero counts on Ollama.
    let cases = [
        (ProviderKind::OpenAi, usage(12, 5)),
        (ProviderKind::Anthropic, usage(12, 5)),
        (ProviderKind::Ollama, usage(0, 0)),
    ];
    for (kind, expected_usage) in cases {
        let items = stream_of(kind, &aimock.url(), ask(kind, "kiln-hello"));
        let message = finished(kind, &items);
        let deltas: String = items
            .iter()
            .filter_map(|item| match item {
                Ok(Event::TextDelta { text }) => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(deltas, "Hello from the mock.", "{kind}");
        assert_eq!(message.text, "Hello from the mock.", "{kind}");
        assert!(message.tool_calls.is_empty(), "{kind}");
        assert_eq!(stop_reason(&message), Some(StopReason::EndTurn), "{kind}");
        assert!(!usage_events(&items).is_empty(), "{kind}: no usage event");
        assert_eq!(message.usage, expected_usage, "{kind}");
        assert_eq!(message.model.as_deref(), Some(model_of(kind)), "{kind}");
    }
}

#[test]
fn the_answering_model_is_the_one_the_provider_names() {
    let aimock = Aimock::start();
    for kind in ProviderKind::ALL {
        let items = stream_of(kind, &aimock.url(), ask(kind, "kiln-which-model"));
        let message = finished(kind, &items);
        let model = model_of(kind);
        assert_eq!(message.text, format!("You asked for {model}."), "{kind}");
        assert_eq!(message.model.as_deref(), Some(model), "{kind}");
    }
}

#[test]
fn a_tool_call_and_its_answer_on_every_adapter() {
    let aimock = Aimock::start();
    for kind in ProviderKind::ALL {
        let mut request = ask(kind, "kiln-weather");
        request.tools = vec![weather_tool()];
        let items = stream_of(kind, &aimock.url(), request.clone());
        let message = finished(kind, &items);
        assert_eq!(stop_reason(&message), Some(StopReason::ToolUse), "{kind}");
        assert_eq!(message.text, "", "{kind}");
        // Ollama gives no id: the adapter numbers the calls.
        let id = match kind {
            ProviderKind::Ollama => "call_1",
            _ => "call_kiln_weather",
        };
        let call = ToolCall {
            id: id.into(),
            name: "get_weather".into(),
            arguments: json!({"city": "Paris", "units": "celsius"}),
        };
        assert_eq!(message.tool_calls, vec![call.clone()], "{kind}");
        // The call was announced before it ended, under the same index.
        let starts: Vec<_> = items
            .iter()
            .filter_map(|item| match item {
                Ok(Event::ToolCallStart { index, id, name }) => {
                    Some((*index, id.as_str(), name.as_str()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(starts, vec![(0, id, "get_weather")], "{kind}");

        // The second leg: the call and its result go back; the model answers in words.
        request.messages.push(Message::Assistant {
            text: message.text,
            tool_calls: message.tool_calls,
        });
        request.messages.push(Message::Tool {
            call_id: call.id,
            name: call.name,
            content: json!({"temp": 18}).to_string(),
            is_error: false,
        });
        let items = stream_of(kind, &aimock.url(), request);
        let answer = finished(kind, &items);
        assert_eq!(answer.text, "It is 18 degrees in Paris.", "{kind}");
        assert!(answer.tool_calls.is_empty(), "{kind}");
        assert_eq!(stop_reason(&answer), Some(StopReason::EndTurn), "{kind}");
        let journal = aimock.journal();
        let legs = requests_saying(&journal, chat_path(kind), "kiln-weather");
        let has_result: Vec<_> = legs
            .iter()
            .map(|entry| entry["response"]["fixture"]["match"]["hasToolResult"].clone())
            .collect();
        assert_eq!(has_result, vec![json!(false), json!(true)], "{kind}");
    }
}

#[test]
fn two_tool_calls_come_in_order() {
    let aimock = Aimock::start();
    for kind in ProviderKind::ALL {
        let mut request = ask(kind, "kiln-two-tools");
        request.tools = vec![weather_tool()];
        let message = finished(kind, &stream_of(kind, &aimock.url(), request));
        let calls: Vec<_> = message
            .tool_calls
            .iter()
            .map(|call| (call.name.as_str(), call.arguments.clone()))
            .collect();
        assert_eq!(
            calls,
            vec![
                ("get_weather", json!({"city": "Paris"})),
                ("get_time", json!({"zone": "Europe/Paris"})),
            ],
            "{kind}"
        );
        let ids: Vec<_> = message
            .tool_calls
            .iter()
            .map(|call| call.id.as_str())
            .collect();
        let expected_ids = match kind {
            ProviderKind::Ollama => ["call_1", "call_2"],
            _ => ["call_kiln_weather", "call_kiln_time"],
        };
        assert_eq!(ids, expected_ids, "{kind}");
        assert_eq!(stop_reason(&message), Some(StopReason::ToolUse), "{kind}");
    }
}

/// A failure a server answers with, the same on every adapter.
struct ErrorCase {
    prompt: &'static str,
    /// Instead of the adapter's usual model.
    model: Option<&'static str>,
    code: &'static str,
    status: Option<u16>,
    /// Phrases the message holds.
    says: &'static [&'static str],
    /// A phrase the hint holds; `None`: there is no hint.
    hint: Option<&'static str>,
    /// Requests sent (more than one: retried).
    requests: usize,
}

const ERROR_CASES: &[ErrorCase] = &[
    ErrorCase {
        prompt: "kiln-401",
        model: None,
        code: "key_rejected",
        status: Some(401),
        says: &[
            "the key was rejected (HTTP 401)",
            "Incorrect API key provided",
        ],
        hint: Some("API key"),
        requests: 1,
    },
    ErrorCase {
        prompt: "kiln-hello",
        model: Some("no-such-model"),
        code: "model_not_found",
        status: Some(404),
        says: &["model `no-such-model` not found"],
        hint: Some("model list"),
        requests: 1,
    },
    ErrorCase {
        prompt: "kiln-overflow",
        model: None,
        code: "context_overflow",
        status: Some(400),
        says: &["context window", "maximum context length is 128000 tokens"],
        hint: Some("compact"),
        requests: 1,
    },
    ErrorCase {
        prompt: "kiln-overflow-anthropic",
        model: None,
        code: "context_overflow",
        status: Some(400),
        says: &["prompt is too long: 210000 tokens > 200000 maximum"],
        hint: Some("compact"),
        requests: 1,
    },
    ErrorCase {
        prompt: "kiln-500",
        model: None,
        code: "server_error",
        status: Some(500),
        says: &[
            "server error (HTTP 500)",
            "The server had an error",
            "still failing after 2 retries",
        ],
        hint: None,
        requests: 3,
    },
    ErrorCase {
        prompt: "kiln-cut",
        model: None,
        code: "stream",
        status: None,
        says: &["after 3 events"],
        hint: None,
        requests: 1,
    },
    ErrorCase {
        prompt: "kiln-malformed",
        model: None,
        code: "stream",
        status: None,
        says: &["{malformed json: <<<chaos>>>"],
        hint: None,
        requests: 1,
    },
];

#[test]
fn each_failure_a_server_answers_is_typed_on_every_adapter() {
    let aimock = Aimock::start();
    for case in ERROR_CASES {
        for kind in ProviderKind::ALL {
            let mut request = ask(kind, case.prompt);
            let model = case.model.unwrap_or(model_of(kind));
            request.options.model = model.to_owned();
            let items = stream_of(kind, &aimock.url(), request);
            let error = failed(kind, &items);
            let what = format!("{kind} {}: {error}", case.prompt);
            assert_eq!(error.code(), case.code, "{what}");
            assert_eq!(error.status, case.status, "{what}");
            for phrase in case.says {
                assert!(error.message.contains(phrase), "{phrase}: {what}");
            }
            match case.hint {
                Some(phrase) => assert!(
                    error.hint.as_deref().unwrap_or("").contains(phrase),
                    "{phrase}: {what}"
                ),
                None => assert_eq!(error.hint, None, "{what}"),
            }
            // The message names who was asked, where, for which model.
            let url = format!("{}{}", aimock.url(), chat_path(kind));
            let shown = error.to_string();
            for part in [kind.label(), url.as_str(), &format!("(model `{model}`)")] {
                assert!(shown.contains(part), "{part}: {what}");
            }
            let sent = requests_saying(&aimock.journal(), chat_path(kind), case.prompt)
                .into_iter()
                .filter(|entry| entry["body"]["model"] == model)
                .count();
            assert_eq!(sent, case.requests, "{what}");
        }
        // The cut stream gave what it had before it broke.
        if case.prompt == "kiln-cut" {
            let text: String = stream_of(
                ProviderKind::OpenAi,
                &aimock.url(),
                ask(ProviderKind::OpenAi, "kiln-cut"),
            )
            .iter()
            .filter_map(|item| match item {
                Ok(Event::TextDelta { text }) => Some(text.clone()),
                _ => None,
            })
            .collect();
            assert_eq!(text, "This answer is long on purpose so that i");
        }
    }
}

#[test]
fn a_rate_limit_is_waited_out_as_the_provider_asks() {
    // `kiln-429` counts per server across endpoints: one server per adapter, run at once.
    let runs = ProviderKind::ALL.map(|kind| async move {
        let aimock = Aimock::start();
        let clock = FakeClock::auto_advancing();
        let stream = provider(kind, &aimock.url())
            .with_clock(Rc::new(clock.clone()))
            .stream(ask(kind, "kiln-429"));
        let items: Vec<Item> = stream.collect().await;
        let message = finished(kind, &items);
        assert_eq!(message.text, "Served after a wait.", "{kind}");
        // Retried after 1,000 ms of the fake clock: `Retry-After: 1`, not the policy's
        // 5 ms backoff.
        assert_eq!(
            (clock.sleeps(), clock.now_ms()),
            (vec![1_000], 1_000.0),
            "{kind}"
        );
        let statuses: Vec<_> = aimock
            .journal()
            .as_array()
            .unwrap()
            .iter()
            .map(|entry| entry["response"]["status"].clone())
            .collect();
        assert_eq!(statuses, vec![json!(429), json!(200)], "{kind}");
    });
    block_on(futures::future::join_all(runs));
}

#[test]
fn a_rate_limit_that_never_lifts_is_an_error_after_bounded_retries() {
    // (policy, requests sent, the waits between them on the fake clock, phrase): a
    // `Retry-After` longer than the policy's longest wait is given back at once.
    let cases = [
        (
            QUICK_RETRY,
            3,
            vec![1_000, 1_000],
            "still failing after 2 retries",
        ),
        (
            RetryPolicy {
                max_delay_ms: 500,
                ..QUICK_RETRY
            },
            1,
            vec![],
            "asked to wait 1000 ms",
        ),
    ];
    for (retry, requests, waits, phrase) in cases {
        let aimock = Aimock::start();
        let root = aimock.url();
        let runs = ProviderKind::ALL.map(|kind| {
            let root = root.clone();
            async move {
                let clock = FakeClock::auto_advancing();
                let stream = provider(kind, &root)
                    .with_retry(retry)
                    .with_clock(Rc::new(clock.clone()))
                    .stream(ask(kind, "kiln-429-always"));
                let items: Vec<Item> = stream.collect().await;
                (kind, clock.sleeps(), failed(kind, &items))
            }
        });
        for (kind, slept, error) in block_on(futures::future::join_all(runs)) {
            assert_eq!(error.code(), "rate_limited", "{kind}: {error}");
            assert_eq!(
                error.kind,
                kiln_providers::ErrorKind::RateLimited {
                    retry_after_ms: Some(1_000)
                },
                "{kind}"
            );
            assert!(error.message.contains(phrase), "{kind}: {error}");
            assert_eq!(slept, waits, "{kind}");
        }
        let journal = aimock.journal();
        for kind in ProviderKind::ALL {
            let sent = requests_saying(&journal, chat_path(kind), "kiln-429-always").len();
            assert_eq!(sent, requests, "{kind}");
        }
    }
}

/// A loopback server that accepts every connection and reads its request, then answers
/// `head` (nothing when empty) and never another byte, holding the connection open.
fn stalling_server(head: &'static str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = kiln_testkit::read_http_request(&mut stream);
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.flush();
            held.push(stream);
        }
    });
    port
}

/// A loopback server that answers every request with `status` and a JSON `body`.
fn answering_server(status: &'static str, body: &'static str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = kiln_testkit::read_http_request(&mut stream);
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n\
                 content-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

#[test]
fn no_answer_is_a_network_error_or_a_timeout() {
    let quick = Timeouts {
        response_ms: 300,
        idle_ms: 300,
        max_body_bytes: 1 << 20,
    };
    let silent = stalling_server("");
    let stalled = stalling_server(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
    );
    // (port, code, phrase in the message, phrase in the hint)
    let cases = [
        (
            kiln_testkit::free_port(),
            "network",
            "cannot reach it",
            Some("check the base URL and that the server is up"),
        ),
        (silent, "timeout", "no response within 300 ms", None),
        (
            stalled,
            "timeout",
            "the stream stalled: no data for 300 ms",
            None,
        ),
    ];
    for (port, code, says, hint) in cases {
        for kind in ProviderKind::ALL {
            let root = format!("http://127.0.0.1:{port}");
            let clock = FakeClock::auto_advancing();
            let items = everything(
                provider(kind, &root)
                    .with_timeouts(quick)
                    .with_clock(Rc::new(clock.clone()))
                    .stream(ask(kind, "kiln-hello")),
            );
            let error = failed(kind, &items);
            assert_eq!(error.code(), code, "{kind}: {error}");
            assert!(error.message.contains(says), "{kind}: {error}");
            match hint {
                Some(hint) => assert!(
                    error.hint.as_deref().unwrap_or("").contains(hint),
                    "{kind}: {error}"
                ),
                None => assert_eq!(error.hint, None, "{kind}"),
            }
            // None is retried: no back-off was ever slept.
            assert_eq!(clock.sleeps(), Vec::<u64>::new(), "{kind}");
        }
    }
}

#[test]
fn a_request_that_cannot_be_right_is_refused_before_it_is_sent() {
    let aimock = Aimock::start();
    // (change, phrase)
    type Change = fn(&mut ChatRequest);
    let cases: [(Change, &str); 3] = [
        (
            |request| request.options.model = " ".into(),
            "no model was given",
        ),
        (
            |request| request.options.max_tokens = 0,
            "`max_tokens` must be at least 1",
        ),
        (
            |request| {
                request
                    .messages
                    .retain(|m| !matches!(m, Message::User { .. }))
            },
            "the conversation has no user message",
        ),
    ];
    for (change, says) in cases {
        for kind in ProviderKind::ALL {
            let mut request = ask(kind, "kiln-hello");
            change(&mut request);
            let error = failed(kind, &stream_of(kind, &aimock.url(), request));
            assert_eq!(error.code(), "bad_request", "{kind}: {error}");
            assert!(error.message.contains(says), "{kind}: {error}");
        }
    }
    assert_eq!(aimock.journal(), json!([]));
}

#[test]
fn an_abort_mid_stream_ends_the_turn_with_what_came() {
    let aimock = Aimock::start();
    for kind in ProviderKind::ALL {
        let budget = budget(BudgetLimits {
            max_usd: Some(1.0),
            ..BudgetLimits::default()
        });
        let provider = provider(kind, &aimock.url());
        let abort = AbortSignal::new();
        let mut aborted = false;
        let mut stream = kiln_providers::turn(
            &provider,
            ask(kind, "kiln-slow"),
            Some(budget.clone()),
            Some(abort.clone()),
        );
        let mut items = Vec::new();
        let mut partial = String::new();
        block_on(async {
            while let Some(item) = stream.next().await {
                if let Ok(Event::TextDelta { text }) = &item
                    && !aborted
                {
                    partial.push_str(text);
                    abort.abort();
                    aborted = true;
                }
                items.push(item);
            }
        });
        let message = finished(kind, &items);
        let stop = message.stop.clone().unwrap();
        assert_eq!(stop.reason, StopReason::Aborted, "{kind}");
        assert!(
            stop.message
                .as_deref()
                .unwrap_or("")
                .contains("stopped by the person"),
            "{kind}: {stop:?}"
        );
        // The abort ends the turn at once: it is seen before the next chunk, so the reply is
        // exactly the one delta that came before it (the whole reply is two dozen).
        assert_eq!(message.text, partial, "{kind}");
        assert!(
            !partial.is_empty() && partial.len() < 20,
            "{kind}: {partial}"
        );
        // The request went out, and what it used so far was booked (estimated where the
        // provider had not said yet), its hold released.
        let sent = requests_saying(&aimock.journal(), chat_path(kind), "kiln-slow").len();
        assert_eq!(sent, 1, "{kind}");
        let spend = budget.spend();
        assert_eq!((spend.calls.len(), spend.held_usd), (1, 0.0), "{kind}");
        assert!(spend.calls[0].usage.input_tokens > 0, "{kind}: {spend:?}");

        // Aborted before it was sent: nothing is sent.
        let items = everything(kiln_providers::turn(
            &provider,
            ask(kind, "kiln-slow"),
            Some(budget.clone()),
            Some(abort),
        ));
        assert_eq!(refused(kind, &items).reason, StopReason::Aborted, "{kind}");
        let sent = requests_saying(&aimock.journal(), chat_path(kind), "kiln-slow").len();
        assert_eq!(sent, 1, "{kind}");
    }
}

#[test]
fn a_deadline_that_passes_mid_stream_stops_the_turn() {
    let aimock = Aimock::start();
    for kind in ProviderKind::ALL {
        // The deadline passes when the test moves the fake clock: after the first delta.
        let clock = FakeClock::new();
        let budget = RunBudget::new(
            BudgetLimits {
                deadline_ms: Some(400.0),
                ..BudgetLimits::default()
            },
            Rc::new(PriceCatalog::builtin()),
            Rc::new(clock.clone()),
        );
        let provider = provider(kind, &aimock.url());
        let mut stream = kiln_providers::turn(
            &provider,
            ask(kind, "kiln-slow"),
            Some(budget.clone()),
            None,
        );
        let mut items = Vec::new();
        let mut before_deadline = String::new();
        block_on(async {
            while let Some(item) = stream.next().await {
                if let Ok(Event::TextDelta { text }) = &item
                    && before_deadline.is_empty()
                {
                    before_deadline.push_str(text);
                    clock.advance(400.0);
                }
                items.push(item);
            }
        });
        let message = finished(kind, &items);
        let stop = message.stop.unwrap();
        assert_eq!(stop.reason, StopReason::Deadline, "{kind}");
        assert_eq!(
            stop.message.as_deref(),
            Some("the run's deadline of 0.4 s has passed"),
            "{kind}"
        );
        // What came before the deadline, and nothing after: the turn's timer slept 400 ms of
        // the fake clock and was seen before the next chunk.
        assert!(message.text.starts_with("One"), "{kind}: {}", message.text);
        assert_eq!(message.text, before_deadline, "{kind}");
        assert_eq!(clock.sleeps(), vec![400], "{kind}");
        let spend = budget.spend();
        assert_eq!(spend.exhausted, Some(StopReason::Deadline), "{kind}");
        assert_eq!((spend.calls.len(), spend.held_usd), (1, 0.0), "{kind}");
    }
}

#[test]
fn a_failed_turn_books_nothing_and_releases_its_hold() {
    let aimock = Aimock::start();
    for kind in ProviderKind::ALL {
        let budget = budget(BudgetLimits {
            max_usd: Some(1.0),
            ..BudgetLimits::default()
        });
        let mut request = ask(kind, "kiln-500");
        request.options.model = "gpt-4o".into();
        let provider = provider(kind, &aimock.url());
        let items = everything(kiln_providers::turn(
            &provider,
            request,
            Some(budget.clone()),
            None,
        ));
        assert_eq!(failed(kind, &items).code(), "server_error", "{kind}");
        let spend = budget.spend();
        assert_eq!(spend.turns, 1, "{kind}");
        assert!(spend.calls.is_empty(), "{kind}: {spend:?}");
        assert_eq!((spend.spent_usd, spend.held_usd), (0.0, 0.0), "{kind}");
    }
}

#[test]
fn a_json_reply_is_asked_for_in_each_wire_format() {
    let aimock = Aimock::start();
    for kind in ProviderKind::ALL {
        let mut request = ask(kind, "kiln-json");
        request.options.response_format = Some(ResponseFormat {
            name: "answer".into(),
            schema: json!({
                "type": "object",
                "properties": {"answer": {"type": "integer"}},
                "required": ["answer"]
            }),
        });
        let message = finished(kind, &stream_of(kind, &aimock.url(), request));
        let reply: Value = serde_json::from_str(&message.text).unwrap();
        assert_eq!(reply, json!({"answer": 42}), "{kind}");
    }
    let journal = aimock.journal();
    // Only OpenAI's `response_format` is read by aimock; Anthropic's needs the beta header.
    assert_eq!(
        journal[0]["response"]["fixture"]["match"]["responseFormat"],
        "json_schema"
    );
    assert_eq!(
        journal[1]["headers"]["anthropic-beta"],
        "structured-outputs-2025-11-13"
    );
}

#[test]
fn the_budget_refuses_a_turn_it_cannot_cover_before_sending_it() {
    let aimock = Aimock::start();
    // (limits, model, max_tokens, reason, phrase)
    let cases = [
        (
            BudgetLimits {
                max_usd: Some(0.5),
                ..BudgetLimits::default()
            },
            // $10 per million output tokens: 100,000 may cost $1.
            "gpt-4o",
            100_000,
            StopReason::Budget,
            "the run's budget of $0.50 cannot cover this turn",
        ),
        (
            BudgetLimits {
                max_usd: Some(0.0),
                ..BudgetLimits::default()
            },
            "claude-sonnet-4-5",
            16,
            StopReason::Budget,
            "model `claude-sonnet-4-5`",
        ),
        (
            BudgetLimits {
                deadline_ms: Some(0.0),
                ..BudgetLimits::default()
            },
            "gpt-4o-mini",
            16,
            StopReason::Deadline,
            "the run's deadline of 0 s has passed",
        ),
        (
            BudgetLimits {
                max_turns: Some(0),
                ..BudgetLimits::default()
            },
            "gpt-4o-mini",
            16,
            StopReason::Turns,
            "the run has used all 0 of its turns",
        ),
    ];
    for (limits, model, max_tokens, reason, says) in cases {
        for kind in ProviderKind::ALL {
            let budget = budget(limits);
            let mut request = ask(kind, "kiln-hello");
            request.options.model = model.into();
            request.options.max_tokens = max_tokens;
            let provider = provider(kind, &aimock.url());
            let items = everything(kiln_providers::turn(
                &provider,
                request,
                Some(budget.clone()),
                None,
            ));
            let stop = refused(kind, &items);
            assert_eq!(stop.reason, reason, "{kind}");
            assert!(
                stop.message.as_deref().unwrap_or("").contains(says),
                "{kind}: {stop:?}"
            );
            let spend = budget.spend();
            assert_eq!((spend.turns, spend.exhausted), (0, Some(reason.clone())));
        }
    }
    assert_eq!(aimock.journal(), json!([]), "a refused turn sent something");
}

#[test]
fn the_turn_limit_refuses_the_second_turn() {
    let aimock = Aimock::start();
    for kind in ProviderKind::ALL {
        let budget = budget(BudgetLimits {
            max_turns: Some(1),
            ..BudgetLimits::default()
        });
        let provider = provider(kind, &aimock.url());
        let first = everything(kiln_providers::turn(
            &provider,
            ask(kind, "kiln-hello"),
            Some(budget.clone()),
            None,
        ));
        assert_eq!(finished(kind, &first).text, "Hello from the mock.");
        let second = everything(kiln_providers::turn(
            &provider,
            ask(kind, "kiln-which-model"),
            Some(budget.clone()),
            None,
        ));
        let stop = refused(kind, &second);
        assert_eq!(stop.reason, StopReason::Turns, "{kind}");
        assert_eq!(
            stop.message.as_deref(),
            Some("the run has used its only turn")
        );
        let journal = aimock.journal();
        assert_eq!(
            requests_saying(&journal, chat_path(kind), "kiln-hello").len(),
            1
        );
        assert!(requests_saying(&journal, chat_path(kind), "kiln-which-model").is_empty());
    }
}

#[test]
fn a_priced_turn_books_what_it_used() {
    let aimock = Aimock::start();
    // (adapter, model, usd: None when unpriced). kiln-hello reports 12 in, 5 out (Ollama: 0).
    let cases = [
        (
            ProviderKind::OpenAi,
            "gpt-4o-mini",
            Some((12.0 * 0.15 + 5.0 * 0.6) / 1e6),
        ),
        (
            ProviderKind::Anthropic,
            "claude-sonnet-4-5",
            Some((12.0 * 3.0 + 5.0 * 15.0) / 1e6),
        ),
        (ProviderKind::Ollama, "llama3.2", None),
    ];
    for (kind, model, usd) in cases {
        let budget = budget(BudgetLimits {
            max_usd: Some(1.0),
            ..BudgetLimits::default()
        });
        let mut request = ask(kind, "kiln-hello");
        request.options.model = model.into();
        let provider = provider(kind, &aimock.url());
        let items = everything(kiln_providers::turn(
            &provider,
            request,
            Some(budget.clone()),
            None,
        ));
        let message = finished(kind, &items);
        let spend = budget.spend();
        assert_eq!(spend.calls.len(), 1, "{kind}");
        let call = &spend.calls[0];
        assert_eq!(call.model, model);
        if message.usage == Usage::default() {
            // aimock's Ollama reports no counts: the turn is booked at an estimate.
            assert!(
                call.estimated && call.usage.output_tokens > 0,
                "{kind}: {call:?}"
            );
        } else {
            assert_eq!(
                (call.usage, call.estimated),
                (message.usage, false),
                "{kind}"
            );
        }
        assert_eq!(spend.held_usd, 0.0, "{kind}");
        match (usd, call.usd) {
            (Some(expected), Some(booked)) => {
                assert!((booked - expected).abs() < 1e-12, "{kind}: {booked}");
                assert!((spend.spent_usd - expected).abs() < 1e-12, "{kind}");
                assert!(!spend.lower_bound);
            }
            (None, None) => {
                assert_eq!((spend.unpriced_turns, spend.lower_bound), (1, true));
            }
            other => panic!("{kind}: {other:?}"),
        }
    }
}

#[test]
fn models_are_listed_and_their_failures_typed() {
    let aimock = Aimock::start();
    let listed = [
        "gpt-4o-mini",
        "claude-sonnet-4-5",
        "llama3.2",
        "no-such-model",
    ];
    for kind in ProviderKind::ALL {
        let models = block_on(provider(kind, &aimock.url()).models())
            .unwrap_or_else(|error| panic!("{kind}: {error}"));
        let ids: Vec<_> = models.iter().map(|model| model.id.as_str()).collect();
        assert_eq!(ids, listed, "{kind}");
    }
    let rejecting = answering_server(
        "401 Unauthorized",
        r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}"#,
    );
    let cases = [
        (rejecting, "key_rejected", "Incorrect API key provided"),
        (kiln_testkit::free_port(), "network", "cannot reach it"),
    ];
    for (port, code, says) in cases {
        for kind in ProviderKind::ALL {
            let root = format!("http://127.0.0.1:{port}");
            let error = block_on(provider(kind, &root).models()).unwrap_err();
            assert_eq!(error.code(), code, "{kind}: {error}");
            assert!(error.message.contains(says), "{kind}: {error}");
            assert!(error.hint.is_some(), "{kind}: {error}");
            assert!(error.url.starts_with(&root), "{kind}: {error}");
        }
    }
}

/// What one adapter must (and must not) send, with or without a key.
struct HeaderCase {
    kind: ProviderKind,
    key: Option<&'static str>,
    /// Names and values (a credential's value reads `[REDACTED]` in the journal).
    present: &'static [(&'static str, &'static str)],
    absent: &'static [&'static str],
}

const HEADER_CASES: [HeaderCase; 4] = [
    HeaderCase {
        kind: ProviderKind::OpenAi,
        key: Some("sk-openai"),
        present: &[
            ("authorization", "[REDACTED]"),
            ("content-type", "application/json"),
        ],
        absent: &["x-api-key"],
    },
    HeaderCase {
        kind: ProviderKind::OpenAi,
        key: None,
        present: &[],
        absent: &["authorization", "x-api-key"],
    },
    HeaderCase {
        kind: ProviderKind::Anthropic,
        key: Some("sk-ant"),
        present: &[
            ("x-api-key", "[REDACTED]"),
            ("anthropic-version", "2023-06-01"),
            ("anthropic-dangerous-direct-browser-access", "true"),
        ],
        absent: &["authorization", "anthropic-beta"],
    },
    HeaderCase {
        kind: ProviderKind::Ollama,
        key: Some("sk-ollama"),
        present: &[("authorization", "[REDACTED]")],
        absent: &["x-api-key"],
    },
];

#[test]
fn each_adapter_sends_its_key_and_version_headers() {
    let aimock = Aimock::start();
    for (number, case) in HEADER_CASES.iter().enumerate() {
        let (kind, key) = (case.kind, case.key);
        let provider = provider_with_key(kind, &aimock.url(), key);
        finished(kind, &everything(provider.stream(ask(kind, "kiln-hello"))));
        let journal = aimock.journal();
        let headers = &journal[number]["headers"];
        assert_eq!(journal[number]["path"], chat_path(kind));
        for (name, value) in case.present {
            assert_eq!(headers[name], *value, "{kind} {key:?}: {headers}");
        }
        for name in case.absent {
            assert!(headers.get(name).is_none(), "{kind} {key:?}: {headers}");
        }
    }
}

#[test]
fn the_local_model_writes_with_usage_on_both_apis() {
    let model = LocalModel::shared();
    for kind in [ProviderKind::OpenAi, ProviderKind::Anthropic] {
        let provider = provider_with_key(kind, &model.base_url(), None);
        let request = ChatRequest {
            messages: vec![Message::User {
                text: "Say hi.".into(),
            }],
            tools: Vec::new(),
            options: ChatOptions {
                max_tokens: 16,
                temperature: Some(0.0),
                ..ChatOptions::new(LocalModel::MODEL)
            },
        };
        let items = everything(provider.stream(request));
        let message = finished(kind, &items);
        assert!(!message.text.trim().is_empty(), "{kind}: {items:#?}");
        assert!(
            message.usage.input_tokens > 0 && message.usage.output_tokens > 0,
            "{kind}: {:?}",
            message.usage
        );
        assert!(
            message.usage.output_tokens <= 16,
            "{kind}: {:?}",
            message.usage
        );
        assert!(
            matches!(
                stop_reason(&message),
                Some(StopReason::EndTurn | StopReason::MaxTokens)
            ),
            "{kind}: {:?}",
            message.stop
        );
        assert!(message.tool_calls.is_empty(), "{kind}");
        assert!(message.model.is_some(), "{kind}: no model named");
    }
}

#[test]
fn the_local_model_is_in_its_model_list() {
    let model = LocalModel::shared();
    for kind in [ProviderKind::OpenAi, ProviderKind::Anthropic] {
        let provider = provider_with_key(kind, &model.base_url(), None);
        let models = block_on(provider.models()).unwrap_or_else(|error| panic!("{kind}: {error}"));
        assert!(
            models.iter().any(|listed| listed.id == LocalModel::MODEL),
            "{kind}: {models:?}"
        );
    }
}

#[test]
fn ollama_says_which_models_call_tools_and_the_others_do_not_say() {
    let (port, asked) = kiln_testkit::ollama_show_server(vec![
        ("llama3.2", Some(vec!["completion", "tools"])),
        ("gemma:2b", Some(vec!["completion"])),
        ("old", None),
    ]);
    let root = format!("http://127.0.0.1:{port}");
    let ollama = provider(ProviderKind::Ollama, &root);
    let cases = [
        ("llama3.2", Some(true)),
        ("gemma:2b", Some(false)),
        // No capabilities in the answer, or no such model: it does not say.
        ("old", None),
        ("missing", None),
    ];
    for (model, says) in cases {
        assert_eq!(block_on(ollama.calls_tools(model)), says, "{model}");
    }
    assert_eq!(
        *asked.lock().unwrap(),
        ["llama3.2", "gemma:2b", "old", "missing"]
    );
    // OpenAI-compatible servers and Anthropic list no capabilities: nothing is asked.
    for kind in [ProviderKind::OpenAi, ProviderKind::Anthropic] {
        assert_eq!(
            block_on(provider(kind, &root).calls_tools("gemma:2b")),
            None
        );
    }
    assert_eq!(asked.lock().unwrap().len(), 4);
    // Nobody there: it does not say either.
    let gone = format!("http://127.0.0.1:{}", kiln_testkit::free_port());
    assert_eq!(
        block_on(provider(ProviderKind::Ollama, &gone).calls_tools("llama3.2")),
        None
    );
}

/// A loopback server that records every request it reads (its head) and answers each with
/// `answer(port)`, its own port given.
fn recording_server(
    answer: impl Fn(u16) -> String + Send + 'static,
) -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = std::sync::Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let head = kiln_testkit::read_http_request(&mut stream);
            log.lock().unwrap().push(head);
            let _ = stream.write_all(answer(port).as_bytes());
        }
    });
    (port, seen)
}

#[test]
fn a_redirect_to_another_origin_never_carries_the_key() {
    let key = "sk-kiln-redirected-key";
    let (other, stolen) = recording_server(|_| {
        "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}".to_owned()
    });
    for kind in [
        ProviderKind::OpenAi,
        ProviderKind::Anthropic,
        ProviderKind::Ollama,
    ] {
        for status in [301, 302, 307, 308] {
            let (port, seen) = recording_server(move |_| {
                format!(
                    "HTTP/1.1 {status} Moved\r\nlocation: http://127.0.0.1:{other}/steal\r\n\
                     content-length: 0\r\nconnection: close\r\n\r\n"
                )
            });
            let root = format!("http://127.0.0.1:{port}");
            let provider = provider_with_key(kind, &root, Some(key));
            let error = failed(kind, &everything(provider.stream(ask(kind, "hello"))));
            assert_eq!(error.code(), "network", "{kind} {status}: {error}");
            assert!(
                error.message.contains("another origin"),
                "{kind} {status}: {error}"
            );
            assert!(error.hint.is_some(), "{kind} {status}: {error}");
            let listed = block_on(provider.models()).unwrap_err();
            assert!(
                listed.message.contains("another origin"),
                "{kind}: {listed}"
            );
            // Both reached the provider's own address, with its key, and nothing else.
            let seen = seen.lock().unwrap();
            assert_eq!(seen.len(), 2, "{kind} {status}: {seen:?}");
            assert!(seen.iter().all(|head| head.contains(key)), "{seen:?}");
        }
    }
    assert!(
        stolen.lock().unwrap().is_empty(),
        "another origin was sent: {:?}",
        stolen.lock().unwrap()
    );
}

#[test]
fn a_provider_that_echoes_its_key_gives_nobody_the_key() {
    let key = "sk-kiln-echoed-key-4242";
    // In an error, from every adapter, for a turn and for the model list.
    let port = kiln_testkit::key_echoing_server(401);
    for kind in [
        ProviderKind::OpenAi,
        ProviderKind::Anthropic,
        ProviderKind::Ollama,
    ] {
        let provider = provider_with_key(kind, &format!("http://127.0.0.1:{port}"), Some(key));
        let error = failed(kind, &everything(provider.stream(ask(kind, "hello"))));
        let listed = block_on(provider.models()).unwrap_err();
        for error in [error, listed] {
            let shown = format!("{error} {error:?}");
            assert!(!shown.contains(key), "{kind}: {shown}");
            assert!(
                shown.contains(kiln_providers::KEY_MARKER),
                "{kind}: {shown}"
            );
        }
    }
    // In a reply, cut across two deltas.
    let port = kiln_testkit::key_echoing_server(200);
    let kind = ProviderKind::OpenAi;
    let provider = provider_with_key(kind, &format!("http://127.0.0.1:{port}"), Some(key));
    let items = everything(provider.stream(ask(kind, "hello")));
    let message = finished(kind, &items);
    assert_eq!(
        message.text,
        format!("you sent {} as your key.", kiln_providers::KEY_MARKER)
    );
    assert!(!format!("{items:?}").contains(key), "{items:?}");
}

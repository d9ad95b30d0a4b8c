//! `FetchClient` in headless Chromium, inside a dedicated worker (where the runtime will
//! use it), against the test runner's own origin: what comes back, cut at the cap, the
//! failures that happen before any response, a body streamed chunk by chunk, and the
//! clock (`sleep`, `now_ms`).
//!
//! Run with `wasm-bindgen-test-runner` as the wasm32 runner (see `cargo xtask test`).
#![cfg(target_arch = "wasm32")]
#![expect(
    clippy::unwrap_used,
    reason = "clippy does not see `wasm_bindgen_test` functions as tests; a panic is a failed test"
)]

use futures::StreamExt as _;
use js_sys::Reflect;
use kiln_http::{BodyStream, FetchClient, HttpClient, HttpError, Redirect, Request, now_ms, sleep};
use wasm_bindgen::JsValue;
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_dedicated_worker);

/// `location.origin` of the worker: the runner's server.
fn origin() -> String {
    let location = Reflect::get(&js_sys::global(), &JsValue::from_str("location")).unwrap();
    Reflect::get(&location, &JsValue::from_str("origin"))
        .unwrap()
        .as_string()
        .unwrap()
}

fn get(url: String, max_body_bytes: usize) -> Request {
    Request {
        method: "GET".into(),
        url,
        headers: vec![("Accept".into(), "*/*".into())],
        body: None,
        timeout_ms: 10_000,
        max_body_bytes,
        redirect: Redirect::Follow,
    }
}

#[wasm_bindgen_test]
async fn a_page_comes_back_whole_or_cut_at_the_cap() {
    let whole = FetchClient::new()
        .send(get(format!("{}/", origin()), 1 << 20))
        .await
        .unwrap();
    assert_eq!(whole.status, 200);
    assert!(
        whole.header("Content-Type").is_some(),
        "{:?}",
        whole.headers
    );
    assert!(
        whole
            .headers
            .iter()
            .all(|(name, _)| *name == name.to_ascii_lowercase())
    );
    assert!(whole.body.len() > 10 && !whole.truncated);

    let cut = FetchClient::new()
        .send(get(format!("{}/", origin()), 10))
        .await
        .unwrap();
    assert_eq!(
        (cut.body.as_slice(), cut.truncated),
        (&whole.body[..10], true)
    );
}

#[wasm_bindgen_test]
async fn a_missing_path_is_a_404_response_not_an_error() {
    let url = format!("{}/no-such-file-{}", origin(), js_sys::Math::random());
    let response = FetchClient::new().send(get(url, 4096)).await.unwrap();
    assert_eq!(response.status, 404);
}

#[wasm_bindgen_test]
async fn a_refused_port_is_unreachable_and_says_cors_may_be_why() {
    let url = "http://127.0.0.1:9/mcp".to_owned();
    let error = FetchClient::new()
        .send(get(url.clone(), 4096))
        .await
        .unwrap_err();
    let HttpError::Unreachable { url: got, message } = &error else {
        panic!("{error:?}")
    };
    assert_eq!(got, &url);
    assert!(
        message.starts_with("network error or CORS refusal: "),
        "{message}"
    );
}

#[wasm_bindgen_test]
async fn other_schemes_are_refused_before_fetch() {
    let error = FetchClient::new()
        .send(get("data:text/plain,hi".into(), 4096))
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid URL `data:text/plain,hi`: scheme `data` is not allowed: only http and https are"
    );
}

/// Makes the test's own wasm module larger than any one chunk Chromium hands a
/// `ReadableStream`: a fetch body reaches the page through a 2 MiB data pipe (the
/// largest chunk seen), so a body past that comes in two reads at least, even when
/// the whole of it is already there (a local server, or the HTTP cache: a 577 KB
/// module came from the cache in one chunk).
static PADDING: [u8; 4 << 20] = [0x5a; 4 << 20];

/// The test's own wasm module, served by the runner: with [`PADDING`] in it, more
/// than the largest chunk.
fn wasm_module_url() -> String {
    std::hint::black_box(&PADDING);
    format!("{}/wasm-bindgen-test_bg.wasm", origin())
}

/// The chunks of a body, and the error it ended on, if any.
async fn drain(mut body: BodyStream) -> (Vec<Vec<u8>>, Option<HttpError>) {
    let mut chunks = Vec::new();
    while let Some(item) = body.next().await {
        match item {
            Ok(chunk) => chunks.push(chunk),
            Err(error) => {
                assert!(body.next().await.is_none(), "an item after {error:?}");
                return (chunks, Some(error));
            }
        }
    }
    (chunks, None)
}

#[wasm_bindgen_test]
async fn a_streamed_body_is_the_same_bytes_as_a_sent_one_in_chunks() {
    let whole = FetchClient::new()
        .send(get(wasm_module_url(), 1 << 30))
        .await
        .unwrap();
    assert_eq!((whole.status, whole.truncated), (200, false));
    assert!(whole.body.len() > 4 << 20, "{} bytes", whole.body.len());

    let streamed = FetchClient::new()
        .open(get(wasm_module_url(), 1 << 30), 10_000)
        .await
        .unwrap();
    assert_eq!(streamed.status, 200);
    assert_eq!(
        streamed.header("content-type"),
        whole.header("content-type")
    );
    let (chunks, error) = drain(streamed.body).await;
    assert_eq!(error, None);
    assert!(chunks.len() > 1, "{} chunk(s)", chunks.len());
    assert!(chunks.concat() == whole.body, "the streamed bytes differ");
}

#[wasm_bindgen_test]
async fn a_missing_path_streams_a_404() {
    let url = format!("{}/no-such-file-{}", origin(), js_sys::Math::random());
    let sent = FetchClient::new()
        .send(get(url.clone(), 4096))
        .await
        .unwrap();
    let streamed = FetchClient::new()
        .open(get(url, 4096), 10_000)
        .await
        .unwrap();
    assert_eq!(streamed.status, 404);
    let (chunks, error) = drain(streamed.body).await;
    assert_eq!((chunks.concat(), error), (sent.body, None));
}

#[wasm_bindgen_test]
async fn a_streamed_body_past_the_cap_is_too_large() {
    let url = format!("{}/", origin());
    let streamed = FetchClient::new()
        .open(get(url.clone(), 10), 10_000)
        .await
        .unwrap();
    let (chunks, error) = drain(streamed.body).await;
    assert!(chunks.concat().len() <= 10);
    assert_eq!(error, Some(HttpError::TooLarge { url, limit: 10 }));
}

#[wasm_bindgen_test]
async fn opening_a_refused_port_is_unreachable() {
    let url = "http://127.0.0.1:9/mcp".to_owned();
    let error = FetchClient::new()
        .open(get(url.clone(), 4096), 10_000)
        .await
        .err()
        .unwrap();
    assert!(
        matches!(&error, HttpError::Unreachable { url: got, .. } if *got == url),
        "{error:?}"
    );
}

#[wasm_bindgen_test]
async fn a_sleep_lasts_as_long_as_asked_by_now_ms() {
    let started = now_ms();
    sleep(50).await;
    let slept = now_ms() - started;
    // Timers and `performance.now()` are both coarsened in browsers; a millisecond of slack.
    assert!(slept >= 49.0, "slept {slept} ms");
}

//! `FetchClient` in headless Chromium, inside a dedicated worker (where the runtime will
//! use it), against the test runner's own origin: what comes back, cut at the cap, and
//! the failures that happen before any response.
//!
//! Run with `wasm-bindgen-test-runner` as the wasm32 runner (see `cargo xtask test`).
#![cfg(target_arch = "wasm32")]
#![expect(
    clippy::unwrap_used,
    reason = "clippy does not see `wasm_bindgen_test` functions as tests; a panic is a failed test"
)]

use js_sys::Reflect;
use kiln_http::{FetchClient, HttpClient, HttpError, Request};
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

//! The browser [`HttpClient`]: the global `fetch`, in a Window or a Worker alike.
//!
//! Everything is looked up on `globalThis` (`fetch`, `setTimeout`, `clearTimeout`) rather
//! than through `Window` or `WorkerGlobalScope`, so one code path serves both. The timeout
//! aborts the fetch through an `AbortController`, whichever phase it is in (headers or body).
//! A cross-origin response shows only the headers its server lists in
//! `Access-Control-Expose-Headers`.

use std::cell::Cell;
use std::rc::Rc;

use futures::future::LocalBoxFuture;
use js_sys::{Function, Promise, Reflect, Uint8Array};
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast as _, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{AbortController, Headers, RequestCredentials, RequestInit};

use crate::{HttpClient, HttpError, Request, Response, check_scheme};

/// `fetch` from `globalThis`. Holds nothing: every request looks the globals up afresh.
#[derive(Debug, Clone, Copy, Default)]
pub struct FetchClient;

impl FetchClient {
    pub fn new() -> Self {
        Self
    }
}

impl HttpClient for FetchClient {
    fn send(&self, request: Request) -> LocalBoxFuture<'static, Result<Response, HttpError>> {
        Box::pin(send(request))
    }
}

async fn send(request: Request) -> Result<Response, HttpError> {
    check_scheme(&request.url)?;
    let url = request.url.clone();
    let timeout_ms = request.timeout_ms;
    let invalid = |message: String| HttpError::InvalidRequest {
        url: url.clone(),
        message,
    };

    let global = js_sys::global();
    let fetch = global_function(&global, "fetch").map_err(&invalid)?;
    let controller = AbortController::new().map_err(|error| invalid(describe(&error)))?;
    let headers = Headers::new().map_err(|error| invalid(describe(&error)))?;
    for (name, value) in &request.headers {
        headers
            .append(name, value)
            .map_err(|error| invalid(format!("header `{name}` refused: {}", describe(&error))))?;
    }
    let init = RequestInit::new();
    init.set_method(&request.method);
    // Never the page's cookies or HTTP auth: a request carries only what
    // the caller put in it.
    init.set_credentials(RequestCredentials::Omit);
    init.set_headers(&headers);
    if let Some(body) = &request.body {
        init.set_body(&Uint8Array::from(body.as_slice()));
    }
    init.set_signal(Some(&controller.signal()));

    // Dropping the guard (done, failed, or the caller dropped this future) clears the timer
    // and aborts whatever is still in flight.
    let timer = Timer::start(&global, controller, timeout_ms).map_err(&invalid)?;

    let promise = fetch
        .call2(&global, &JsValue::from_str(&url), &init)
        .map_err(|error| invalid(describe(&error)))?;
    let response = match JsFuture::from(Promise::resolve(&promise)).await {
        Ok(value) => {
            value
                .dyn_into::<web_sys::Response>()
                .map_err(|value| HttpError::Unreachable {
                    url: url.clone(),
                    message: format!("fetch resolved to a non-Response: {}", describe(&value)),
                })?
        }
        Err(_) if timer.fired() => return Err(HttpError::Timeout { url, timeout_ms }),
        Err(error) => {
            return Err(HttpError::Unreachable {
                message: format!("network error or CORS refusal: {}", describe(&error)),
                url,
            });
        }
    };

    let status = response.status();
    let headers = response_headers(&response.headers());
    let body_error = |message: String| HttpError::Body {
        url: url.clone(),
        message,
    };
    let buffer_promise = response
        .array_buffer()
        .map_err(|error| body_error(describe(&error)))?;
    let buffer = match JsFuture::from(buffer_promise).await {
        Ok(buffer) => buffer,
        Err(_) if timer.fired() => return Err(HttpError::Timeout { url, timeout_ms }),
        Err(error) => return Err(body_error(describe(&error))),
    };
    drop(timer);
    let bytes = Uint8Array::new(&buffer);
    let length = usize::try_from(bytes.length()).unwrap_or(usize::MAX);
    let truncated = length > request.max_body_bytes;
    let kept = u32::try_from(request.max_body_bytes.min(length)).unwrap_or(u32::MAX);
    let body = bytes.subarray(0, kept).to_vec();
    Ok(Response {
        status,
        headers,
        body,
        truncated,
    })
}

/// The `setTimeout` that aborts the request, cleared on drop.
struct Timer {
    global: JsValue,
    handle: JsValue,
    fired: Rc<Cell<bool>>,
    controller: AbortController,
    _on_timeout: Closure<dyn FnMut()>,
}

impl Timer {
    fn start(
        global: &JsValue,
        controller: AbortController,
        timeout_ms: u64,
    ) -> Result<Self, String> {
        let set_timeout = global_function(global, "setTimeout")?;
        let fired = Rc::new(Cell::new(false));
        let on_timeout = {
            let fired = Rc::clone(&fired);
            let controller = controller.clone();
            Closure::<dyn FnMut()>::new(move || {
                fired.set(true);
                controller.abort();
            })
        };
        // Timers take an i32 of milliseconds in every engine; longer waits are clamped.
        let delay = i32::try_from(timeout_ms).unwrap_or(i32::MAX);
        let handle = set_timeout
            .call2(global, on_timeout.as_ref(), &JsValue::from(delay))
            .map_err(|error| format!("setTimeout failed: {}", describe(&error)))?;
        Ok(Self {
            global: global.clone(),
            handle,
            fired,
            controller,
            _on_timeout: on_timeout,
        })
    }

    fn fired(&self) -> bool {
        self.fired.get()
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        if let Ok(clear_timeout) = global_function(&self.global, "clearTimeout") {
            let _ = clear_timeout.call1(&self.global, &self.handle);
        }
        // A finished request ignores the abort; one still in flight (the future was dropped)
        // stops using the network.
        self.controller.abort();
    }
}

fn global_function(global: &JsValue, name: &str) -> Result<Function, String> {
    Reflect::get(global, &JsValue::from_str(name))
        .ok()
        .and_then(|value| value.dyn_into::<Function>().ok())
        .ok_or_else(|| format!("this JavaScript global scope has no `{name}` function"))
}

/// Header entries as the platform gives them (names already lower-cased by `fetch`).
fn response_headers(headers: &Headers) -> Vec<(String, String)> {
    let Ok(Some(entries)) = js_sys::try_iter(headers) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let pair = entry.dyn_into::<js_sys::Array>().ok()?;
            let name = pair.get(0).as_string()?;
            let value = pair.get(1).as_string()?;
            Some((name.to_ascii_lowercase(), value))
        })
        .collect()
}

/// A JavaScript error as one line: its `message` when it has one.
fn describe(value: &JsValue) -> String {
    if let Some(error) = value.dyn_ref::<js_sys::Error>() {
        return String::from(error.message());
    }
    value.as_string().unwrap_or_else(|| format!("{value:?}"))
}

//! The browser [`HttpClient`]: the global `fetch`, in a Window or a Worker alike.
//!
//! Everything is looked up on `globalThis` (`fetch`, `setTimeout`, `clearTimeout`) rather
//! than through `Window` or `WorkerGlobalScope`, so one code path serves both. The timeout
//! aborts the fetch through an `AbortController`, whichever phase it is in (headers or body;
//! for `open`, headers only). A streamed body is read with `response.body.getReader()`; when
//! the stream is dropped, the controller is aborted.
//! A cross-origin response shows only the headers its server lists in
//! `Access-Control-Expose-Headers`.
//!
//! [`Redirect::Stop`] is `redirect: "manual"`: `fetch` then answers a redirect with an opaque
//! response (type `opaqueredirect`, status 0, no headers), which is
//! [`HttpError::Redirected`]. [`HttpClient::send_public`] is the trait's default: no DNS here,
//! so only the addresses and `localhost` names written in URLs are checked (see
//! [`crate::address`]).

use std::cell::Cell;
use std::rc::Rc;

use futures::StreamExt as _;
use futures::future::LocalBoxFuture;
use futures::stream;
use js_sys::{Function, Promise, Reflect, Uint8Array};
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast as _, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    AbortController, Headers, ReadableStreamDefaultReader, RequestCredentials, RequestInit,
    RequestRedirect, ResponseType,
};

use crate::body::{BodyLimits, guard};
use crate::{
    BodyStream, HttpClient, HttpError, Redirect, Request, Response, StreamingResponse, check_scheme,
};

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

    fn open(
        &self,
        request: Request,
        idle_timeout_ms: u64,
    ) -> LocalBoxFuture<'static, Result<StreamingResponse, HttpError>> {
        Box::pin(open(request, idle_timeout_ms))
    }
}

async fn send(request: Request) -> Result<Response, HttpError> {
    let url = request.url.clone();
    let timeout_ms = request.timeout_ms;
    // Dropped at the end (done, failed, or the caller dropped this future): the timer is
    // cleared and whatever is still in flight aborted.
    let Fetched {
        response,
        timer,
        abort: _abort,
    } = fetch(&request).await?;

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
        status: response.status(),
        headers: response_headers(&response.headers()),
        body,
        truncated,
    })
}

async fn open(request: Request, idle_timeout_ms: u64) -> Result<StreamingResponse, HttpError> {
    let url = request.url.clone();
    let Fetched {
        response,
        timer,
        abort,
    } = fetch(&request).await?;
    // The timeout covers the head only: a stream lasts as long as chunks keep coming.
    drop(timer);
    let status = response.status();
    let headers = response_headers(&response.headers());
    let chunks = match response.body() {
        // No body at all (a 204, a HEAD): an empty stream.
        None => stream::empty().boxed_local(),
        Some(body) => {
            let reader =
                ReadableStreamDefaultReader::new(&body).map_err(|error| HttpError::Body {
                    url: url.clone(),
                    message: describe(&error),
                })?;
            read_chunks(Reading {
                reader,
                url: url.clone(),
                _abort: abort,
            })
        }
    };
    let limits = BodyLimits {
        url,
        idle_timeout_ms,
        max_body_bytes: request.max_body_bytes,
    };
    Ok(StreamingResponse {
        status,
        headers,
        body: guard(chunks, limits),
    })
}

/// A response whose head is in, with what keeps its request going.
struct Fetched {
    response: web_sys::Response,
    /// Aborts the request when `Request::timeout_ms` passes, until dropped.
    timer: Timer,
    /// Aborts the request when dropped.
    abort: AbortOnDrop,
}

/// Starts the request and waits for the status and headers.
async fn fetch(request: &Request) -> Result<Fetched, HttpError> {
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
    init.set_redirect(match request.redirect {
        Redirect::Follow => RequestRedirect::Follow,
        // `fetch` cannot show where a redirect leads before following it: a same-origin
        // request refuses every redirect.
        Redirect::Stop | Redirect::SameOrigin => RequestRedirect::Manual,
    });
    if let Some(body) = &request.body {
        init.set_body(&Uint8Array::from(body.as_slice()));
    }
    init.set_signal(Some(&controller.signal()));

    // Declared before the timer so it is dropped after it: whether this future finishes,
    // fails, or is dropped, the request is aborted unless the caller took the guard.
    let abort = AbortOnDrop(controller.clone());
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
    if response.type_() == ResponseType::Opaqueredirect {
        return Err(HttpError::Redirected { url });
    }
    Ok(Fetched {
        response,
        timer,
        abort,
    })
}

/// A streamed body being read. Dropping it (the caller dropped the body, or it ended on an
/// error) aborts the request.
struct Reading {
    reader: ReadableStreamDefaultReader,
    url: String,
    _abort: AbortOnDrop,
}

/// The body's chunks as the reader gives them; the idle timeout and the cap are
/// [`guard`]'s.
fn read_chunks(reading: Reading) -> BodyStream {
    stream::unfold(Some(reading), |reading| async move {
        let reading = reading?;
        match read_chunk(&reading).await {
            Ok(Some(chunk)) => Some((Ok(chunk), Some(reading))),
            Ok(None) => None,
            Err(message) => {
                let error = HttpError::Body {
                    url: reading.url.clone(),
                    message,
                };
                Some((Err(error), None))
            }
        }
    })
    .boxed_local()
}

/// One `read()`: a chunk, `None` at the end, or why it failed.
async fn read_chunk(reading: &Reading) -> Result<Option<Vec<u8>>, String> {
    let result = JsFuture::from(reading.reader.read())
        .await
        .map_err(|error| describe(&error))?;
    let done =
        Reflect::get(&result, &JsValue::from_str("done")).map_err(|error| describe(&error))?;
    if done.is_truthy() {
        return Ok(None);
    }
    let value =
        Reflect::get(&result, &JsValue::from_str("value")).map_err(|error| describe(&error))?;
    let chunk = value
        .dyn_into::<Uint8Array>()
        .map_err(|value| format!("the body gave a non-byte chunk: {}", describe(&value)))?;
    Ok(Some(chunk.to_vec()))
}

/// Aborts its request when dropped. A finished request ignores the abort; one still in
/// flight stops using the network.
struct AbortOnDrop(AbortController);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The `setTimeout` that aborts the request, cleared on drop.
struct Timer {
    global: JsValue,
    handle: JsValue,
    fired: Rc<Cell<bool>>,
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
            Closure::<dyn FnMut()>::new(move || {
                fired.set(true);
                controller.abort();
            })
        };
        let handle = set_timeout
            .call2(global, on_timeout.as_ref(), &timer_delay(timeout_ms))
            .map_err(|error| format!("setTimeout failed: {}", describe(&error)))?;
        Ok(Self {
            global: global.clone(),
            handle,
            fired,
            _on_timeout: on_timeout,
        })
    }

    fn fired(&self) -> bool {
        self.fired.get()
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        clear_timeout(&self.global, &self.handle);
    }
}

/// Timers take an i32 of milliseconds in every engine (a longer delay fires at once);
/// longer waits are clamped.
fn timer_delay(ms: u64) -> JsValue {
    JsValue::from(i32::try_from(ms).unwrap_or(i32::MAX))
}

fn clear_timeout(global: &JsValue, handle: &JsValue) {
    if let Ok(clear_timeout) = global_function(global, "clearTimeout") {
        let _ = clear_timeout.call1(global, handle);
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

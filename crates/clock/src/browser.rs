//! Browser time, in a Window or a Worker alike: [`sleep`] is `setTimeout` and [`now_ms`] is
//! `performance.now()`, both looked up on `globalThis`.
//!
//! `setTimeout` is called by hand rather than through `gloo-timers`: measured on the page
//! (`kiln-ui`, `wasm-ui` profile, after `wasm-bindgen` and `wasm-opt -Oz`), `gloo-timers`
//! cost 1,158 B (1,186 B gzipped) more and saved nothing in the sandbox worker (68 B
//! gzipped); and a scope without timers throws in `gloo-timers`, where this ends the sleep
//! at once, so a timeout fails early and visibly.

#![expect(
    clippy::disallowed_methods,
    reason = "the one clock seam: the platform's clocks are read here and nowhere else"
)]

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::future::{self, LocalBoxFuture};
use js_sys::{Function, Promise, Reflect};
use wasm_bindgen::{JsCast as _, JsValue};
use wasm_bindgen_futures::JsFuture;

pub(crate) fn sleep(ms: u64) -> LocalBoxFuture<'static, ()> {
    let global = js_sys::global();
    let Some(set_timeout) = global_function(&global, "setTimeout") else {
        // A scope without timers: the sleep ends at once, so a timeout fails early and
        // visibly rather than never.
        return Box::pin(future::ready(()));
    };
    // Timers take an i32 of milliseconds in every engine (a longer delay fires at once), so
    // longer waits are clamped.
    let delay = JsValue::from(i32::try_from(ms).unwrap_or(i32::MAX));
    let mut handle = JsValue::UNDEFINED;
    let promise = Promise::new(&mut |resolve: Function, _reject| {
        match set_timeout.call2(&global, &resolve, &delay) {
            Ok(timer) => handle = timer,
            // Same as having no timers.
            Err(_) => {
                let _ = resolve.call0(&JsValue::UNDEFINED);
            }
        }
    });
    Box::pin(Sleep {
        fired: JsFuture::from(promise),
        global: global.into(),
        handle,
    })
}

thread_local! {
    /// `performance` and its `now`, when this scope has them: the sandbox reads the clock
    /// each time the guest starts or stops, so the lookup is done once.
    static PERFORMANCE_NOW: Option<(JsValue, Function)> = {
        let global = js_sys::global();
        Reflect::get(&global, &JsValue::from_str("performance"))
            .ok()
            .filter(JsValue::is_object)
            .and_then(|performance| {
                let now = global_function(&performance, "now")?;
                Some((performance, now))
            })
    };
}

pub(crate) fn now_ms() -> f64 {
    PERFORMANCE_NOW
        .with(|found| {
            let (performance, now) = found.as_ref()?;
            now.call0(performance).ok()?.as_f64()
        })
        .unwrap_or_else(js_sys::Date::now)
}

/// A pending `setTimeout`, cleared if dropped before it fires.
struct Sleep {
    fired: JsFuture,
    global: JsValue,
    handle: JsValue,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<()> {
        // The promise only resolves (with `undefined`); there is nothing to look at.
        Pin::new(&mut self.fired).poll(context).map(|_| ())
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(clear_timeout) = global_function(&self.global, "clearTimeout") {
            let _ = clear_timeout.call1(&self.global, &self.handle);
        }
    }
}

/// `object[name]` when it is a function.
fn global_function(object: &JsValue, name: &str) -> Option<Function> {
    Reflect::get(object, &JsValue::from_str(name))
        .ok()?
        .dyn_into::<Function>()
        .ok()
}

/// Wall-clock milliseconds since the epoch: `Date.now()`.
pub(crate) fn epoch_ms() -> u64 {
    // A float of whole milliseconds, well inside u64 for the next 285,000 years.
    js_sys::Date::now() as u64
}

//! Browser time, in a Window or a Worker alike: [`sleep`] is `setTimeout` and [`now_ms`]
//! is `performance.now()`, both looked up on `globalThis`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::future::{self, LocalBoxFuture};
use js_sys::{Function, Promise, Reflect};
use wasm_bindgen::{JsCast as _, JsValue};
use wasm_bindgen_futures::JsFuture;

use super::{clear_timeout, global_function, timer_delay};

pub(crate) fn sleep(ms: u64) -> LocalBoxFuture<'static, ()> {
    let global = js_sys::global();
    let Ok(set_timeout) = global_function(&global, "setTimeout") else {
        // A scope without timers: the sleep ends at once, so a timeout fails early and
        // visibly rather than never.
        return Box::pin(future::ready(()));
    };
    let mut handle = JsValue::UNDEFINED;
    let promise = Promise::new(&mut |resolve: Function, _reject| {
        match set_timeout.call2(&global, &resolve, &timer_delay(ms)) {
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

pub(crate) fn now_ms() -> f64 {
    let global = js_sys::global();
    let performance_now = || {
        let performance = Reflect::get(&global, &JsValue::from_str("performance")).ok()?;
        let now = Reflect::get(&performance, &JsValue::from_str("now"))
            .ok()?
            .dyn_into::<Function>()
            .ok()?;
        now.call0(&performance).ok()?.as_f64()
    };
    performance_now().unwrap_or_else(js_sys::Date::now)
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
        clear_timeout(&self.global, &self.handle);
    }
}

//! The host's clock and timer, from the global scope, so that a pool works on
//! a page and in a worker alike.

use wasm_bindgen::prelude::*;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_name = setTimeout)]
    fn set_timeout(handler: &js_sys::Function, ms: i32) -> JsValue;
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    fn performance_now() -> f64;
}

/// Milliseconds on the host's monotonic clock.
#[must_use]
pub fn now_ms() -> f64 {
    performance_now()
}

/// A future that resolves after `ms` milliseconds on the host's timer.
pub async fn sleep_ms(ms: f64) {
    let promise = js_sys::Promise::new(&mut |resolve, _reject| {
        // Browsers clamp timers to 2^31 - 1 ms; a longer wait is re-armed by the caller.
        let ms = ms.clamp(0.0, f64::from(i32::MAX)) as i32;
        set_timeout(&resolve, ms);
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

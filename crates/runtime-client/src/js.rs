//! Browser helpers every client of the runtime needs.

use wasm_bindgen::JsCast as _;
use wasm_bindgen::prelude::*;

/// A thrown value as text: an `Error`'s message, a string, else its JSON.
#[must_use]
pub fn error_text(error: &JsValue) -> String {
    if let Some(error) = error.dyn_ref::<js_sys::Error>() {
        return String::from(error.message());
    }
    error
        .as_string()
        .or_else(|| {
            js_sys::JSON::stringify(error)
                .ok()
                .and_then(|text| text.as_string())
        })
        .unwrap_or_else(|| "an unreadable error".into())
}

#[wasm_bindgen]
extern "C" {
    /// The global `setTimeout`, a window's or a worker's.
    #[wasm_bindgen(js_name = setTimeout, catch)]
    fn set_timeout(callback: &js_sys::Function, ms: u32) -> Result<JsValue, JsValue>;
}

/// Resolves after `ms` milliseconds (`setTimeout`); at once where there is
/// no timer.
pub async fn sleep_ms(ms: u32) {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        if set_timeout(&resolve, ms).is_err() {
            let _ = resolve.call0(&JsValue::NULL);
        }
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

/// Writes `text` to the console's error log, where there is a console.
pub(crate) fn console_error(text: &str) {
    let global = js_sys::global();
    if let Ok(console) = js_sys::Reflect::get(&global, &JsValue::from_str("console"))
        && let Ok(error) = js_sys::Reflect::get(&console, &JsValue::from_str("error"))
        && let Ok(error) = error.dyn_into::<js_sys::Function>()
    {
        let _ = error.call1(&console, &JsValue::from_str(text));
    }
}

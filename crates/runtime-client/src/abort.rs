//! A page's `AbortSignal`, read by duck type so a signal from another realm
//! (an iframe's, a polyfill's) works too.

use js_sys::{Function, Reflect};
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};

/// A page's `AbortSignal`.
pub struct Signal(JsValue);

impl Signal {
    /// `value` when it looks like an `AbortSignal` (`aborted` and `addEventListener`).
    #[must_use]
    pub fn from_value(value: JsValue) -> Option<Self> {
        let has = |name: &str| Reflect::has(&value, &JsValue::from_str(name)).unwrap_or(false);
        (value.is_object() && has("aborted") && has("addEventListener")).then_some(Self(value))
    }

    /// Runs `action` when the signal fires (or at once if it already has), for as long
    /// as the returned guard lives.
    pub fn on_abort_do(&self, mut action: impl FnMut() + 'static) -> AbortListener {
        if Reflect::get(&self.0, &JsValue::from_str("aborted"))
            .ok()
            .and_then(|value| value.as_bool())
            .unwrap_or(false)
        {
            action();
        }
        let closure = Closure::<dyn FnMut()>::new(action);
        if let Ok(add) = Reflect::get(&self.0, &JsValue::from_str("addEventListener"))
            .and_then(JsCast::dyn_into::<Function>)
        {
            let _ = add.call2(&self.0, &JsValue::from_str("abort"), closure.as_ref());
        }
        AbortListener {
            signal: self.0.clone(),
            closure,
        }
    }
}

/// An `abort` listener on a page's signal, removed when dropped (the page may abort its
/// controller long after the exchange ended).
pub struct AbortListener {
    signal: JsValue,
    closure: Closure<dyn FnMut()>,
}

impl Drop for AbortListener {
    fn drop(&mut self) {
        if let Ok(remove) = Reflect::get(&self.signal, &JsValue::from_str("removeEventListener"))
            .and_then(JsCast::dyn_into::<Function>)
        {
            let _ = remove.call2(
                &self.signal,
                &JsValue::from_str("abort"),
                self.closure.as_ref(),
            );
        }
    }
}

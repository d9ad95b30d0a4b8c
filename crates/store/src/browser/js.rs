//! Small bridges to JavaScript that the IndexedDB and OPFS code share: what a
//! thrown value or a rejected promise says ([`JsFailure`]), a promise as a
//! result, and a timer. Everything is looked up on `globalThis`, so that it
//! works in a Window and in a Worker alike.

use std::fmt;

use js_sys::{Function, Promise, Reflect};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::DomException;

/// A JavaScript failure as its name (`QuotaExceededError`, `NotFoundError`,
/// …) and message: the parts the store maps to its own errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JsFailure {
    pub name: String,
    pub message: String,
}

impl JsFailure {
    pub fn new(name: &str, message: impl Into<String>) -> Self {
        Self {
            name: name.to_owned(),
            message: message.into(),
        }
    }

    /// Reads a thrown value: a `DOMException`, an `Error`, a string, or
    /// anything else (named `Error` then).
    pub fn from_value(value: &JsValue) -> Self {
        if let Some(exception) = value.dyn_ref::<DomException>() {
            return Self::new(&exception.name(), exception.message());
        }
        if let Some(error) = value.dyn_ref::<js_sys::Error>() {
            return Self::new(&String::from(error.name()), error.message());
        }
        if let Some(text) = value.as_string() {
            return Self::new("Error", text);
        }
        if value.is_null() || value.is_undefined() {
            return Self::new("Error", "no reason given");
        }
        Self::new("Error", "a value that is not an error")
    }

    pub fn is(&self, name: &str) -> bool {
        self.name == name
    }
}

impl fmt::Display for JsFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}: {}", self.name, self.message)
        }
    }
}

/// Awaits `promise`; a rejection becomes its [`JsFailure`].
pub(crate) async fn settle(promise: Promise) -> Result<JsValue, JsFailure> {
    JsFuture::from(promise)
        .await
        .map_err(|error| JsFailure::from_value(&error))
}

/// `value` as a `T`, or a `TypeError` failure naming what was expected.
pub(crate) fn cast<T: JsCast>(value: JsValue, expected: &str) -> Result<T, JsFailure> {
    value
        .dyn_into::<T>()
        .map_err(|_| JsFailure::new("TypeError", format!("expected {expected}")))
}

/// `globalThis[name]`, when it is an object.
pub(crate) fn global_object(name: &str) -> Option<JsValue> {
    let value = Reflect::get(&js_sys::global(), &JsValue::from_str(name)).ok()?;
    value.is_object().then_some(value)
}

/// Waits `ms` milliseconds on `setTimeout`. A scope without timers ends the
/// wait at once, so a timeout fails early and visibly rather than never.
pub(crate) async fn sleep(ms: u32) {
    let global = js_sys::global();
    let Some(set_timeout) = Reflect::get(&global, &JsValue::from_str("setTimeout"))
        .ok()
        .and_then(|value| value.dyn_into::<Function>().ok())
    else {
        return;
    };
    let promise = Promise::new(&mut |resolve: Function, _reject| {
        if set_timeout
            .call2(&global, &resolve, &JsValue::from(ms))
            .is_err()
        {
            let _ = resolve.call0(&JsValue::UNDEFINED);
        }
    });
    let _ = JsFuture::from(promise).await;
}

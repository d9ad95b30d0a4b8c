//! The page API's storage: one workspace's IndexedDB database and OPFS
//! folder, opened by the runtime worker when `Kiln.load` starts it, reached
//! through `kiln.store(op, args)` (which `kiln.js` spreads into
//! `kiln.memory`, `kiln.files`, `kiln.history`, `kiln.runMemory`,
//! `kiln.config`, `kiln.exportAll`, `kiln.importAll`) and
//! `kiln.onChange(callback)`. The operations and their arguments are
//! `kiln_runtime::store_op`', read in the worker; every `kiln.run` gets its job
//! record, run memory and storage tools there too.

use std::rc::Rc;

use js_sys::{Function, Promise};
use kiln_types::runtime::ToRuntime;
use serde_json::Value;
use wasm_bindgen::prelude::*;

use crate::{Kiln, from_json_text, rejection, to_json_text};

fn bad_request(op: &str, message: impl std::fmt::Display) -> JsValue {
    js_sys::TypeError::new(&format!("kiln.{op}: {message}")).into()
}

#[wasm_bindgen]
impl Kiln {
    /// One storage operation (`memory.save`, `files.read`, `export`, …) with
    /// its arguments object; resolves to its JSON answer. `kiln.js` gives
    /// each its own method. Rejects with a `TypeError` for a bad request, or
    /// an `Error` with `code` and `hint` from the store.
    pub fn store(&self, op: String, request: JsValue) -> Promise {
        let args = if request.is_undefined() || request.is_null() {
            Ok(Value::Null)
        } else {
            to_json_text(&request)
                .map_err(|why| bad_request(&op, format!("the arguments {why}")))
                .and_then(|text| {
                    serde_json::from_str(&text).map_err(|error| bad_request(&op, error))
                })
        };
        let answered = args.map(|args| {
            let message_op = op.clone();
            self.runtime.call(
                move |id| ToRuntime::Store {
                    id,
                    op: message_op,
                    args,
                },
                None,
                None,
            )
        });
        wasm_bindgen_futures::future_to_promise(async move {
            match answered?.await {
                Ok(Ok(value)) => Ok(from_json_text(&value.to_string())),
                Ok(Err(problem)) => Err(rejection(&format!("kiln.{op}"), &problem)),
                Err(_) => Err(bad_request(&op, "the runtime worker went away")),
            }
        })
    }

    /// Calls `callback([{table, key, version}])` after every committed change,
    /// from this page or another tab of the same workspace; answers a
    /// function that stops it.
    ///
    /// # Errors
    ///
    /// The store's error when storage is not available.
    #[wasm_bindgen(js_name = onChange)]
    pub fn on_change(&self, callback: Function) -> Result<Function, JsValue> {
        if let Some(problem) = &self.storage {
            return Err(rejection("kiln.onChange", problem));
        }
        let id = self.runtime.client.watch(Rc::new(move |changes: Value| {
            // A throwing callback loses nothing: the feed goes on.
            let _ = callback.call1(&JsValue::NULL, &from_json_text(&changes.to_string()));
        }));
        let runtime = self.runtime.clone();
        let stop = Closure::<dyn FnMut()>::new(move || runtime.client.unwatch(id));
        Ok(stop.into_js_value().unchecked_into())
    }
}

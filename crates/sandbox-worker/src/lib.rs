//! The sandbox Web Worker's wasm entry: reads [`ToSandbox`] messages, runs each
//! program with `kiln-sandbox`, and posts back [`FromSandbox`] reports.
//!
//! It holds no logic of its own. One run at a time: the host sends the next run
//! only after this one's report (or terminates the worker when a budget passes).

use kiln_types::protocol::{FromSandbox, ToSandbox, decode, encode};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{DedicatedWorkerGlobalScope, MessageEvent};

/// Runs when `workers/sandbox.js` instantiates the module: listens for runs and
/// tells the host it is ready.
#[wasm_bindgen(start)]
pub fn start() {
    console_error_panic_hook::set_once();
    let Ok(scope) = js_sys::global().dyn_into::<DedicatedWorkerGlobalScope>() else {
        // Loaded outside a dedicated worker (a test page, say): nothing to serve.
        return;
    };
    let onmessage = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
        on_message(&event);
    });
    scope.set_onmessage(Some(onmessage.as_ref().unchecked_ref()));
    // The handler lives as long as the worker does.
    onmessage.forget();
    post(&FromSandbox::Ready);
}

fn on_message(event: &MessageEvent) {
    let Some(text) = event.data().as_string() else {
        post(&FromSandbox::Rejected {
            problem: "a sandbox message must be a JSON string; this one was not a string".into(),
        });
        return;
    };
    match decode::<ToSandbox>(&text) {
        Ok(ToSandbox::Run {
            run_id,
            code,
            limits,
        }) => {
            wasm_bindgen_futures::spawn_local(async move {
                let report = kiln_sandbox::run(&code, &limits.clamped()).await;
                post(&FromSandbox::Report { run_id, report });
            });
        }
        Err(problem) => post(&FromSandbox::Rejected {
            problem: problem.to_string(),
        }),
    }
}

fn post(message: &FromSandbox) {
    if let Ok(scope) = js_sys::global().dyn_into::<DedicatedWorkerGlobalScope>() {
        // Posting a string cannot fail to clone; a closed port drops it, which is
        // what the host expects of a worker it terminated.
        let _ = scope.post_message(&JsValue::from_str(&encode(message)));
    }
}

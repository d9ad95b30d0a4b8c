//! The sandbox Web Worker's wasm entry: reads [`ToSandbox`] messages, runs each
//! program with `kiln-sandbox`, forwards its tool calls to the host over
//! `postMessage`, and posts back [`FromSandbox`] reports.
//!
//! It holds no logic of its own: admission and the run are the sandbox crate's,
//! what a tool does is the host's. One run at a time: the host sends the next
//! run only after this one's report (or terminates the worker when a budget
//! passes).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use futures::channel::oneshot;
use futures::future::LocalBoxFuture;
use kiln_sandbox::catalog::Admission;
use kiln_sandbox::tools::{ToolCall, ToolHost};
use kiln_types::RunReport;
use kiln_types::protocol::{FromSandbox, ToSandbox, decode, encode};
use kiln_types::tool_result::{CallOutcome, ToolFailure, ToolReply};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{DedicatedWorkerGlobalScope, MessageEvent};

thread_local! {
    /// Tool calls waiting for the host's reply, by (run, call number).
    static PENDING: RefCell<HashMap<(u64, u32), oneshot::Sender<ToolReply>>> = RefCell::new(HashMap::new());
}

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
            catalog,
        }) => {
            let admission = match Admission::admit(&catalog, "host") {
                Ok(admission) => admission,
                Err(invalid) => {
                    post(&FromSandbox::Rejected {
                        problem: invalid.to_string(),
                    });
                    return;
                }
            };
            wasm_bindgen_futures::spawn_local(async move {
                let warnings = admission.warnings.clone();
                let catalog_digest = admission.digest();
                let host = Rc::new(PostMessageTools { run_id });
                let report: RunReport = kiln_sandbox::run_with_tools(
                    &code,
                    &limits.clamped(),
                    Rc::new(admission),
                    host,
                )
                .await;
                PENDING.with(|pending| pending.borrow_mut().retain(|(run, _), _| *run != run_id));
                post(&FromSandbox::Report {
                    run_id,
                    report,
                    warnings,
                    catalog_digest,
                });
            });
        }
        Ok(ToSandbox::ToolReply {
            run_id,
            call_number,
            reply,
        }) => {
            let waiting =
                PENDING.with(|pending| pending.borrow_mut().remove(&(run_id, call_number)));
            if let Some(sender) = waiting {
                // The run may have ended meanwhile; then nobody is listening.
                let _ = sender.send(reply);
            }
        }
        Err(problem) => post(&FromSandbox::Rejected {
            problem: problem.to_string(),
        }),
    }
}

/// Sends each tool call to the host page and waits for its reply message.
struct PostMessageTools {
    run_id: u64,
}

impl ToolHost for PostMessageTools {
    fn call(&self, call: ToolCall) -> LocalBoxFuture<'static, ToolReply> {
        let (sender, receiver) = oneshot::channel();
        let run_id = self.run_id;
        PENDING.with(|pending| {
            pending
                .borrow_mut()
                .insert((run_id, call.call_number), sender)
        });
        post(&FromSandbox::ToolCall {
            run_id,
            call_number: call.call_number,
            tool: call.tool.clone(),
            args: call.args,
        });
        Box::pin(async move {
            match receiver.await {
                Ok(reply) => reply,
                Err(_) => Err(ToolFailure {
                    code: "outcome_unknown".into(),
                    message: format!("the host dropped the call to {}", call.tool),
                    detail: None,
                    outcome: CallOutcome::OutcomeUnknown,
                }),
            }
        })
    }
}

fn post(message: &FromSandbox) {
    if let Ok(scope) = js_sys::global().dyn_into::<DedicatedWorkerGlobalScope>() {
        // Posting a string cannot fail to clone; a closed port drops it, which is
        // what the host expects of a worker it terminated.
        let _ = scope.post_message(&JsValue::from_str(&encode(message)));
    }
}

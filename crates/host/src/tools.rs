//! What the host page serves: its tool catalog and the calls into it.

use std::cell::Cell;
use std::rc::Rc;

use futures::future::LocalBoxFuture;
use kiln_types::protocol::{CallRequest, ToSandbox, encode};
use kiln_types::tool_result::ToolReply;
use serde_json::Value;
use wasm_bindgen::JsValue;
use web_sys::Worker;

/// Serves the tool calls that a sandbox worker forwards to the host.
pub trait PageTools {
    /// The catalog sent with each run: `[{name, description, input_schema}]`.
    /// The worker admits it under the codemode rules.
    fn catalog(&self) -> Value;

    /// Starts one call. `person` is how the tool says that it is waiting on a
    /// person (an approval, a decision), which the run's person-wait budget counts.
    fn call(&self, call: CallRequest, person: PersonHold) -> LocalBoxFuture<'static, ToolReply>;
}

/// Tells the sandbox that one call is, or no longer is, held on a person.
#[derive(Clone)]
pub struct PersonHold {
    worker: Worker,
    run_id: u64,
    call_number: u32,
    held_ever: Rc<Cell<bool>>,
}

impl PersonHold {
    pub(crate) fn new(worker: Worker, run_id: u64, call_number: u32) -> Self {
        Self {
            worker,
            run_id,
            call_number,
            held_ever: Rc::new(Cell::new(false)),
        }
    }

    /// `true` while the call waits for a person, `false` once they answered.
    pub fn held(&self, held: bool) {
        if held {
            self.held_ever.set(true);
        }
        let message = encode(ToSandbox::ToolHeld {
            run_id: self.run_id,
            call_number: self.call_number,
            held,
        });
        // A worker terminated meanwhile drops the notice, as it should.
        let _ = self.worker.post_message(&JsValue::from_str(&message));
    }

    pub(crate) fn was_held(&self) -> Rc<Cell<bool>> {
        self.held_ever.clone()
    }
}

//! How a call that waits on a person tells its sandbox worker so.

use std::cell::Cell;
use std::rc::Rc;

use kiln_types::protocol::{ToSandbox, encode};
use wasm_bindgen::JsValue;
use web_sys::Worker;

/// Tells the sandbox that one call is, or no longer is, held on a person.
#[derive(Clone)]
pub(crate) struct PersonHold {
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
    pub(crate) fn held(&self, held: bool) {
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

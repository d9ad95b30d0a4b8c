//! `finish(value)`: ends the run at once with `value` as its result, from
//! wherever the program is (inside a callback, a loop, a `try`). The agent's
//! loop reads [`RunReport::finished`](kiln_types::RunReport) to tell a run
//! that finished its task from one that only returned an observation.
//!
//! The value is converted to JSON first, by the rules a returned value follows;
//! a value that does not convert is a catchable `TypeError` and the run goes
//! on. After that the stop is uncatchable: a `catch` or `finally` in the
//! program does not run, like a budget stop.

use std::cell::RefCell;
use std::rc::Rc;

use boa_engine::error::{EngineError, PanicError};
use boa_engine::property::Attribute;
use boa_engine::{Context, JsError, JsNativeError, JsResult, JsValue, NativeFunction, js_string};

use crate::inspect;

/// The value `finish` was given, once it was.
#[derive(Default, Clone)]
pub(crate) struct Finished(Rc<RefCell<Option<serde_json::Value>>>);

impl Finished {
    pub(crate) fn value(&self) -> Option<serde_json::Value> {
        self.0.borrow().clone()
    }
}

/// Defines the global `finish` over `slot`.
pub(crate) fn install(context: &mut Context, slot: &Finished) -> JsResult<()> {
    context.insert_data(slot.clone());
    let finish = NativeFunction::from_fn_ptr(finish).to_js_function(context.realm());
    let attributes = Attribute::WRITABLE | Attribute::CONFIGURABLE;
    context.register_global_property(js_string!("finish"), finish, attributes)
}

fn finish(_this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let value = args.first().cloned().unwrap_or_default();
    let json = match inspect::to_json(&value, context) {
        Ok(json) => json,
        // A budget stop inside a getter stays uncatchable.
        Err(error) if error.as_engine().is_some() => return Err(error),
        Err(error) => {
            let problem = inspect::error_message(&error, context);
            let problem = problem.strip_prefix("TypeError: ").unwrap_or(&problem);
            return Err(JsNativeError::typ()
                .with_message(format!("finish(value) takes JSON: {problem}"))
                .into());
        }
    };
    if let Some(slot) = context.get_data::<Finished>() {
        slot.0.borrow_mut().get_or_insert(json);
    }
    Err(JsError::from(EngineError::from(PanicError::new(
        "finish: the program finished".to_owned(),
    ))))
}

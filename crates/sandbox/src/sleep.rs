//! `sleep(ms)`, the guest's only way to wait on time, and `waitFor`, built on it.
//!
//! Following the codemode contract: `ms` is an integer from 0 to 10,000 and
//! anything else throws a `RangeError` naming the limit. The wait is a host
//! future (`kiln-clock`'s: a thread timer natively, `setTimeout` in a worker) that the job
//! executor awaits, so a sleeping run costs no CPU and never blocks the worker's
//! event loop. A sleep counts against the wall budget only.

use std::rc::Rc;
use std::time::Duration;

use crate::clock::{Moment, RunClock};
use boa_engine::job::NativeAsyncJob;
use boa_engine::object::FunctionObjectBuilder;
use boa_engine::object::builtins::JsPromise;
use boa_engine::property::Attribute;
use boa_engine::{Context, JsNativeError, JsObject, JsResult, JsValue, NativeFunction, js_string};
use boa_gc::{Gc, GcRefCell};

use crate::namespace::{made_once, originals};

/// The longest single sleep, in milliseconds.
pub const MAX_SLEEP_MS: f64 = 10_000.0;

/// `waitFor`, written in JavaScript over `sleep` (see `wait_for.js`).
const WAIT_FOR: &str = include_str!("wait_for.js");

/// The built-ins `wait_for.js` uses, by the names it takes them under.
const ORIGINALS: [(&str, &str); 10] = [
    ("now", "Date.now"),
    ("isInteger", "Number.isInteger"),
    ("isFinite", "Number.isFinite"),
    ("max", "Math.max"),
    ("min", "Math.min"),
    ("round", "Math.round"),
    ("text", "String"),
    ("Failure", "Error"),
    ("NotAFunction", "TypeError"),
    ("OutOfRange", "RangeError"),
];

/// What the `waitFor` global keeps: `sleep`, the built-ins, and once
/// called, the function `wait_for.js` makes.
type Kept = (JsObject, JsObject, Gc<GcRefCell<Option<JsValue>>>);

/// Defines the globals `sleep` and `waitFor`. `waitFor` evaluates its
/// JavaScript the first time a program calls it, with `sleep` and the
/// built-ins captured now, before any program could replace one.
pub(crate) fn install(context: &mut Context) -> JsResult<()> {
    let sleep = NativeFunction::from_fn_ptr(sleep).to_js_function(context.realm());
    let attributes = Attribute::WRITABLE | Attribute::CONFIGURABLE;
    context.register_global_property(js_string!("sleep"), sleep.clone(), attributes)?;

    let originals = originals(context, &ORIGINALS)?;
    let wait_for = NativeFunction::from_copy_closure_with_captures(
        |this, args, (sleep, originals, made): &Kept, context| {
            let wait_for = made_once(made, WAIT_FOR, "waitFor", context, || {
                vec![sleep.clone().into(), originals.clone().into()]
            })?;
            let wait_for = wait_for.as_callable().ok_or_else(|| {
                JsNativeError::typ().with_message("waitFor's definition made no function")
            })?;
            wait_for.call(this, args, context)
        },
        (sleep.into(), originals, Gc::new(GcRefCell::new(None))),
    );
    let wait_for = FunctionObjectBuilder::new(context.realm(), wait_for)
        .name(js_string!("waitFor"))
        .length(2)
        .build();
    context.register_global_property(js_string!("waitFor"), wait_for, attributes)
}

fn sleep(_this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let ms = args.first().cloned().unwrap_or_default();
    let valid = ms
        .as_number()
        .filter(|ms| ms.fract() == 0.0 && (0.0..=MAX_SLEEP_MS).contains(ms));
    let Some(ms) = valid else {
        let shown = crate::inspect::shown(&ms, context);
        return Err(JsNativeError::range()
            .with_message(format!(
                "sleep(ms) takes an integer number of milliseconds from 0 to 10000; got {shown}"
            ))
            .into());
    };
    // `ms` is an integer in 0..=10_000, so the conversion is exact.
    let duration = Duration::from_millis(ms as u64);
    let clock = context.get_data::<Rc<RunClock>>().cloned();
    let deadline = Moment::now() + duration;
    if let Some(clock) = &clock {
        clock.sleep_started(deadline);
    }
    let (promise, resolvers) = JsPromise::new_pending(context);
    context.enqueue_job(
        NativeAsyncJob::new(async move |context| {
            kiln_clock::sleep(ms as u64).await;
            if let Some(clock) = &clock {
                // The guest runs again from here: charged as it runs.
                clock.busy();
                clock.sleep_ended(deadline);
            }
            resolvers
                .resolve
                .call(&JsValue::undefined(), &[], &mut context.borrow_mut())
        })
        .into(),
    );
    Ok(promise.into())
}

//! The guest's tool namespaces (`workspace`, `agents`), written once: an
//! object whose every method is exactly one call of one tool, through the
//! function `tools.<name>` uses, so the host's ladder gates and counts it
//! like any call.
//!
//! Each namespace is a JavaScript factory (`workspace.js`, `agents.js`).
//! The global is defined per run, before any guest code, when the run's
//! catalog exposes at least one of its tools; otherwise reading it is a
//! `ReferenceError`, like any unknown global. It is an accessor that, the
//! first time a program reads it, evaluates the factory in a script of its
//! own (so positions in the program's messages are the program's) and calls
//! it with the built-ins it uses, captured when the context was built
//! ([`originals`]), and the run's tool functions in [`Namespace::tools`]
//! order (`undefined` for one the run does not have); later reads answer
//! the same object. A run that never reads it never parses it. The object
//! is frozen and has no prototype, its methods are frozen, and the global
//! is neither writable nor configurable: a program cannot replace it, and
//! replacing a built-in before the first read changes nothing in it.

use boa_engine::property::PropertyDescriptor;
use boa_engine::{
    Context, JsNativeError, JsObject, JsResult, JsString, JsValue, NativeFunction, Source,
};
use boa_gc::{Gc, GcRefCell};

use crate::catalog::Admission;
use crate::tools::tool_function;

/// One namespace: its global, its factory's source, and the tools it calls.
pub(crate) struct Namespace {
    pub(crate) global: &'static str,
    pub(crate) source: &'static str,
    /// In the order the factory takes them.
    pub(crate) tools: &'static [&'static str],
}

/// A namespace ready to install: the built-ins its factory uses, captured
/// while the context is built.
pub(crate) struct Factory {
    namespace: &'static Namespace,
    originals: JsObject,
}

/// The built-ins the namespaces' factories use, by the names they take them
/// under.
const ORIGINALS: [(&str, &str); 3] = [
    ("freeze", "Object.freeze"),
    ("isArray", "Array.isArray"),
    ("NoTool", "TypeError"),
];

impl Namespace {
    /// Captures the built-ins the factory will use; the factory itself is
    /// evaluated only when a program first reads the global.
    pub(crate) fn prepare(&'static self, context: &mut Context) -> JsResult<Factory> {
        Ok(Factory {
            namespace: self,
            originals: originals(context, &ORIGINALS)?,
        })
    }
}

/// What a namespace's accessor keeps: the built-ins, the run's tool
/// functions and, once read, the object.
type Kept = (JsObject, Vec<JsValue>, Gc<GcRefCell<Option<JsValue>>>);

impl Factory {
    /// Defines the global when `admission` exposes one of its tools.
    pub(crate) fn install(&self, context: &mut Context, admission: &Admission) -> JsResult<()> {
        let exposed = admission.exposed_names();
        let namespace = self.namespace;
        if !namespace.tools.iter().any(|name| exposed.contains(name)) {
            return Ok(());
        }
        let functions: Vec<JsValue> = namespace
            .tools
            .iter()
            .map(|name| {
                if exposed.contains(name) {
                    tool_function(name, context).into()
                } else {
                    JsValue::undefined()
                }
            })
            .collect();
        let read = NativeFunction::from_copy_closure_with_captures(
            move |_, _, (originals, functions, made): &Kept, context| {
                made_once(made, namespace.source, namespace.global, context, || {
                    let mut args = vec![originals.clone().into()];
                    args.extend(functions.iter().cloned());
                    args
                })
            },
            (
                self.originals.clone(),
                functions,
                Gc::new(GcRefCell::new(None)),
            ),
        )
        .to_js_function(context.realm());
        context.global_object().define_property_or_throw(
            JsString::from(namespace.global),
            PropertyDescriptor::builder()
                .get(read)
                .enumerable(false)
                .configurable(false),
            context,
        )?;
        Ok(())
    }
}

/// What a JavaScript factory made, made once: the first call evaluates
/// `source` (a function expression, in a script of its own, so positions in
/// a program's messages stay the program's), calls it with `args()` and
/// keeps the result in `made`; later calls answer what was kept. `what`
/// names the factory in the error when its source is not a function.
pub(crate) fn made_once(
    made: &GcRefCell<Option<JsValue>>,
    source: &str,
    what: &str,
    context: &mut Context,
    args: impl FnOnce() -> Vec<JsValue>,
) -> JsResult<JsValue> {
    if let Some(kept) = made.borrow().clone() {
        return Ok(kept);
    }
    let factory = context.eval(Source::from_bytes(source))?;
    let Some(factory) = factory.as_callable() else {
        return Err(JsNativeError::typ()
            .with_message(format!("{what}'s definition is not a function"))
            .into());
    };
    let value = factory.call(&JsValue::undefined(), &args(), context)?;
    *made.borrow_mut() = Some(value.clone());
    Ok(value)
}

/// An object with no prototype holding, under each `(name, path)`'s name,
/// the built-in at `path` (`"Object.freeze"`) as the global object has it
/// now: called while the context is built, before any program could change
/// one, so a factory evaluated later still uses the engine's own.
pub(crate) fn originals(context: &mut Context, wanted: &[(&str, &str)]) -> JsResult<JsObject> {
    let found = JsObject::with_null_proto();
    for (name, path) in wanted {
        let mut value: JsValue = context.global_object().into();
        for part in path.split('.') {
            let holder = value.as_object().ok_or_else(|| {
                JsNativeError::typ().with_message(format!("`{path}` is not a built-in"))
            })?;
            value = holder.get(JsString::from(part), context)?;
        }
        found.create_data_property_or_throw(JsString::from(*name), value, context)?;
    }
    Ok(found)
}

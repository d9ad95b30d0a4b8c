//! The guest's tool namespaces (`workspace`, `agents`), written once: an
//! object whose every method is exactly one call of one tool, through the
//! function `tools.<name>` uses, so the host's ladder gates and counts it
//! like any call.
//!
//! Each namespace is a JavaScript factory (`workspace.js`, `agents.js`),
//! evaluated once per context in a script of its own (so positions in the
//! program's messages are the program's), then called per run, before any
//! guest code, with the run's tool functions in [`Namespace::tools`] order
//! (`undefined` for one the run does not have). The global is defined only
//! when the run's catalog exposes at least one of its tools; otherwise
//! reading it is a `ReferenceError`, like any unknown global. The object is
//! frozen and has no prototype, its methods are frozen, and the global is
//! neither writable nor configurable: a program cannot replace it.

use boa_engine::property::Attribute;
use boa_engine::{Context, JsNativeError, JsObject, JsResult, JsString, JsValue, Source};

use crate::catalog::Admission;
use crate::tools::tool_function;

/// One namespace: its global, its factory's source, and the tools it calls.
pub(crate) struct Namespace {
    pub(crate) global: &'static str,
    pub(crate) source: &'static str,
    /// In the order the factory takes them.
    pub(crate) tools: &'static [&'static str],
}

/// A namespace's factory, made while the context is built.
pub(crate) struct Factory {
    namespace: &'static Namespace,
    function: JsObject,
}

impl Namespace {
    /// Evaluates the factory in `context`.
    pub(crate) fn prepare(&'static self, context: &mut Context) -> JsResult<Factory> {
        let factory = context.eval(Source::from_bytes(self.source))?;
        match factory.as_callable() {
            Some(function) => Ok(Factory {
                namespace: self,
                function: function.clone(),
            }),
            None => Err(JsNativeError::typ()
                .with_message(format!("{}'s definition is not a function", self.global))
                .into()),
        }
    }
}

impl Factory {
    /// Defines the global when `admission` exposes one of its tools.
    pub(crate) fn install(&self, context: &mut Context, admission: &Admission) -> JsResult<()> {
        let exposed = admission.exposed_names();
        let tools = self.namespace.tools;
        if !tools.iter().any(|name| exposed.contains(name)) {
            return Ok(());
        }
        let functions: Vec<JsValue> = tools
            .iter()
            .map(|name| {
                if exposed.contains(name) {
                    tool_function(name, context).into()
                } else {
                    JsValue::undefined()
                }
            })
            .collect();
        let object = self
            .function
            .call(&JsValue::undefined(), &functions, context)?;
        context.register_global_property(
            JsString::from(self.namespace.global),
            object,
            Attribute::empty(),
        )
    }
}

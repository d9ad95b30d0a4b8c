//! The guest's `workspace` object: the workspace's files for programs, as a
//! thin layer over the file capabilities.
//!
//! `workspace.read(path)` → the text, `write(path, content)` → a stat,
//! `list(path = "")` → entries, `stat(path)` →
//! `{exists, size, isDirectory, isFile, modifiedMs}` (a missing path is
//! `exists: false`, not a rejection), `mkdir(path)` and `remove(path)` (one
//! file or one empty folder). Each method is exactly one call of one tool
//! (`file_read`, `file_write`, `file_list`, `file_stat`, `file_mkdir`,
//! `file_remove`) through the same function `tools.<name>` uses, so it goes
//! to the [`crate::tools::ToolHost`] like any call: the host's ladder gates
//! it, it counts against the run's call budget and appears in the call
//! summaries, and a refusal rejects with the tool's `Error` (`code`,
//! `message`, `detail`), catchable, and failing the run with that code when
//! uncaught.
//!
//! `workspace` is defined only when the run's catalog exposes at least one of
//! those tools; otherwise reading it is a `ReferenceError`, like any unknown
//! global. When only some are exposed, the methods of the missing ones reject
//! with a `TypeError` naming the tool (`workspace.write needs
//! tools.file_write, which this run does not have`) and make no call. The
//! methods bind to whatever tool of that name the run has: a host that
//! serves its own `file_stat` gets its answers mapped the same way.
//!
//! The object is written in JavaScript (`workspace.js`): evaluated once per
//! context in a script of its own (so positions in the program's messages
//! are the program's), then called per run, before any guest code, with the
//! run's tool functions. It is frozen and has no prototype, its methods are
//! frozen, and the global is neither writable nor configurable: a program
//! cannot replace `workspace` or its methods.

use boa_engine::property::Attribute;
use boa_engine::{Context, JsNativeError, JsObject, JsResult, JsValue, Source, js_string};

use crate::catalog::Admission;
use crate::tools::tool_function;

/// The tools `workspace` calls, in the order `workspace.js` takes them.
pub const FILE_TOOLS: [&str; 6] = [
    "file_read",
    "file_write",
    "file_list",
    "file_stat",
    "file_mkdir",
    "file_remove",
];

const WORKSPACE: &str = include_str!("workspace.js");

/// `workspace.js`'s factory, made while the context is built.
pub(crate) struct Factory(JsObject);

/// Evaluates `workspace.js` in `context`.
pub(crate) fn prepare(context: &mut Context) -> JsResult<Factory> {
    let factory = context.eval(Source::from_bytes(WORKSPACE))?;
    match factory.as_callable() {
        Some(factory) => Ok(Factory(factory.clone())),
        None => Err(JsNativeError::typ()
            .with_message("workspace's definition is not a function")
            .into()),
    }
}

/// Defines the global `workspace` when `admission` exposes a file tool.
pub(crate) fn install(
    context: &mut Context,
    factory: &Factory,
    admission: &Admission,
) -> JsResult<()> {
    let exposed = admission.exposed_names();
    if !FILE_TOOLS.iter().any(|name| exposed.contains(name)) {
        return Ok(());
    }
    let functions: Vec<JsValue> = FILE_TOOLS
        .iter()
        .map(|name| {
            if exposed.contains(name) {
                tool_function(name, context).into()
            } else {
                JsValue::undefined()
            }
        })
        .collect();
    let workspace = factory.0.call(&JsValue::undefined(), &functions, context)?;
    context.register_global_property(js_string!("workspace"), workspace, Attribute::empty())
}

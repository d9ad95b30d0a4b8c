//! The guest's library modules that run outside the engine, a module each:
//! `html` (`kiln:html`: `scraper`, the html5ever parser and Servo's selector
//! engine, and a Markdown writer over its tree), `markdown` (`kiln:markdown`:
//! `pulldown-cmark`), `diff` (`kiln:diff`: `similar`) and `zip` (`kiln:zip`:
//! `zip`, deflate only, through `flate2`'s pure-Rust backend).
//!
//! Each takes a [`LibraryCall`] the sandbox read from the program (text
//! coerced and bounded, bytes copied out, options as JSON) and answers a
//! [`LibraryReply`]; it knows no engine. Natively the sandbox links this crate
//! and calls [`call`]; in the browser it is its own wasm (`kiln-modules-wasm`),
//! which the sandbox worker instantiates on the first program that imports one
//! of these modules, so a program that imports none downloads none of it
//! (ARCHITECTURE.md, "The guest's library"). They are the modules whose code
//! is large and whose answers are small or flat; `kiln:csv`, `kiln:yaml`,
//! `kiln:xml` and `kiln:dates` stay in the sandbox, where they build their
//! answers straight into the engine's objects.
//!
//! Every bound lives here or in the sandbox's reading of the arguments, and
//! every refusal is a [`Failure`] naming it.

use kiln_types::library::{Answer, Failure, LibraryCall, LibraryReply};
use serde_json::{Map, Value};

mod diff;
mod html;
mod markdown;
mod zip;

pub use diff::MAX_DIFF_TOKENS;
pub use html::{DEFAULT_SELECT, MAX_HTML_DEPTH, MAX_SELECT};
pub use zip::MAX_UNZIP_BYTES;

/// The modules this crate answers for.
pub const SPECIFIERS: [&str; 4] = ["kiln:html", "kiln:markdown", "kiln:diff", "kiln:zip"];

/// Whether `specifier` is one of [`SPECIFIERS`].
pub fn answers_for(specifier: &str) -> bool {
    SPECIFIERS.contains(&specifier)
}

/// Runs one call.
pub fn call(call: &LibraryCall) -> LibraryReply {
    let mut inflated = call.inflated;
    let answer = match (call.specifier.as_str(), call.export.as_str()) {
        ("kiln:html", "select") => html::select(call),
        ("kiln:html", "toMarkdown") => html::to_markdown(call),
        ("kiln:markdown", "toHtml") => markdown::to_html(call),
        ("kiln:diff", "lines") => diff::lines(call),
        ("kiln:diff", "words") => diff::words(call),
        ("kiln:diff", "unified") => diff::unified(call),
        ("kiln:zip", "list") => zip::list(call),
        ("kiln:zip", "read") => zip::read(call, &mut inflated),
        ("kiln:zip", "write") => zip::write(call),
        (specifier, export) => Err(Failure::type_error(format!(
            "there is no export `{export}` of `{specifier}` in this library"
        ))),
    };
    LibraryReply { answer, inflated }
}

/// Runs the call in `frame` and answers its reply's frame: the entry of the
/// browser's second wasm instance. A frame that does not decode answers a
/// failure naming what was wrong.
pub fn call_frame(frame: &[u8]) -> Vec<u8> {
    let reply = match LibraryCall::decode(frame) {
        Ok(library_call) => call(&library_call),
        Err(problem) => LibraryReply {
            answer: Err(Failure::error(format!(
                "the library could not read the call: {problem}"
            ))),
            inflated: 0,
        },
    };
    reply.encode()
}

fn flag(options: &Map<String, Value>, name: &str, default: bool) -> Result<bool, Failure> {
    match options.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(value)) => Ok(*value),
        Some(other) => Err(Failure::type_error(format!(
            "`{name}` must be true or false; got {other}"
        ))),
    }
}

fn json(value: Value) -> Result<Answer, Failure> {
    Ok(Answer::Json(value))
}

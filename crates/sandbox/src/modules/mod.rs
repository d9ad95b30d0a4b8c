//! The modules a program imports (`kiln_types::guest::MODULES`), each over a
//! well-kept Rust crate, identical natively and in the browser. Compiled into
//! the sandbox, building their answers straight into the engine's objects:
//! `kiln:csv` (the `csv` crate), `kiln:yaml` (`serde_norway`, serde_yaml's
//! maintained fork), `kiln:xml` (`quick-xml`), `kiln:dates` (`jiff`, its IANA
//! zone database compiled in). Outside the engine, in `kiln-modules`
//! (`library`: linked natively, the sandbox worker's second wasm instance in
//! the browser): `kiln:html`, `kiln:markdown`, `kiln:diff`, `kiln:zip`.
//!
//! The run's importer (`imports` rewrites declarations into calls of it)
//! builds a module's namespace the first time the run imports it and keeps
//! it for the run. Every export takes text through the standard library's
//! bound ([`crate::stdlib::MAX_TEXT_CHARS`]) and answers plain data; bad
//! input is a catchable error naming what was wrong.

use boa_engine::object::ObjectInitializer;
use boa_engine::property::Attribute;
use boa_engine::{Context, JsNativeError, JsObject, JsResult, JsString, JsValue, NativeFunction};
use serde_json::{Map, Value};

use crate::stdlib::{argument, string_argument};

mod csv;
mod dates;
mod library;
mod xml;
mod yaml;

pub(crate) use dates::{date_argument, time_zone};
/// For `format.date`'s ICU4X backend, which reads the same zones.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) use dates::{no_zone, zone_named};
pub use kiln_modules::{
    DEFAULT_SELECT, MAX_DIFF_TOKENS, MAX_HTML_DEPTH, MAX_SELECT, MAX_UNZIP_BYTES,
};

/// Whether `code` begins by importing a module of the library that runs
/// outside the engine (`kiln-modules`), which the sandbox worker then loads
/// before the run.
pub fn imports_library(code: &str) -> bool {
    kiln_jscheck::imports::leading(code).is_ok_and(|imports| {
        imports
            .iter()
            .any(|import| kiln_modules::answers_for(&import.specifier))
    })
}

/// The run's importer: `__kiln_import(specifier)` answers the module's
/// namespace, made once per run.
pub(crate) fn importer(context: &mut Context) -> JsObject {
    let cache = JsObject::with_null_proto();
    NativeFunction::from_copy_closure_with_captures(
        |_, args, cache: &JsObject, context| {
            let specifier = string_argument(args, 0, context)?;
            let key = JsString::from(specifier.as_str());
            if cache.has_own_property(key.clone(), context)? {
                return cache.get(key, context);
            }
            let namespace = namespace(&specifier, context)?;
            cache.create_data_property_or_throw(key, namespace.clone(), context)?;
            Ok(namespace.into())
        },
        cache,
    )
    .to_js_function(context.realm())
    .into()
}

/// A module's namespace: a frozen object of its exports.
fn namespace(specifier: &str, context: &mut Context) -> JsResult<JsObject> {
    if let Some(specifier) = kiln_modules::SPECIFIERS
        .iter()
        .find(|known| **known == specifier)
        && let Some(exports) = library::exports(specifier)
    {
        let functions: Vec<(&str, NativeFunction, usize)> = exports
            .iter()
            .map(|(export, params)| {
                let (export, params) = (*export, *params);
                let function = NativeFunction::from_copy_closure(move |_, args, context| {
                    library::call_export(specifier, export, params, args, context)
                });
                (export, function, params.len())
            })
            .collect();
        return frozen(&functions, context);
    }
    let exports: &[(&str, NativeFunction, usize)] = match specifier {
        "kiln:csv" => &[
            ("parse", NativeFunction::from_fn_ptr(csv::parse), 2),
            ("stringify", NativeFunction::from_fn_ptr(csv::stringify), 2),
        ],
        "kiln:yaml" => &[
            ("parse", NativeFunction::from_fn_ptr(yaml::parse), 1),
            ("stringify", NativeFunction::from_fn_ptr(yaml::stringify), 1),
        ],
        "kiln:xml" => &[
            ("parse", NativeFunction::from_fn_ptr(xml::parse), 2),
            ("stringify", NativeFunction::from_fn_ptr(xml::stringify), 2),
        ],
        "kiln:dates" => &[
            ("parse", NativeFunction::from_fn_ptr(dates::parse), 2),
            ("format", NativeFunction::from_fn_ptr(dates::format), 3),
            ("add", NativeFunction::from_fn_ptr(dates::add), 3),
            (
                "difference",
                NativeFunction::from_fn_ptr(dates::difference),
                3,
            ),
            ("startOf", NativeFunction::from_fn_ptr(dates::start_of), 3),
            ("endOf", NativeFunction::from_fn_ptr(dates::end_of), 3),
            ("toZone", NativeFunction::from_fn_ptr(dates::to_zone), 2),
            ("toDate", NativeFunction::from_fn_ptr(dates::to_date), 1),
        ],
        _ => {
            return Err(JsNativeError::typ()
                .with_message(format!("there is no module `{specifier}`"))
                .into());
        }
    };
    frozen(exports, context)
}

/// A frozen namespace object of `exports`, tagged `Module`.
fn frozen(exports: &[(&str, NativeFunction, usize)], context: &mut Context) -> JsResult<JsObject> {
    let mut object = ObjectInitializer::new(context);
    for (name, function, length) in exports {
        object.function(function.clone(), JsString::from(*name), *length);
    }
    object.property(
        boa_engine::JsSymbol::to_string_tag(),
        JsString::from("Module"),
        Attribute::empty(),
    );
    let object = object.build();
    object.set_integrity_level(boa_engine::object::IntegrityLevel::Frozen, context)?;
    Ok(object)
}

/// Argument `index` as JSON (an options object; `{}` when absent).
fn options(args: &[JsValue], index: usize, context: &mut Context) -> JsResult<Map<String, Value>> {
    let value = argument(args, index);
    if value.is_undefined() || value.is_null() {
        return Ok(Map::new());
    }
    match crate::inspect::to_json(&value, context)? {
        Value::Object(map) => Ok(map),
        other => Err(JsNativeError::typ()
            .with_message(format!("the options must be an object; got {other}"))
            .into()),
    }
}

fn flag(options: &Map<String, Value>, name: &str, default: bool) -> JsResult<bool> {
    match options.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(value)) => Ok(*value),
        Some(other) => Err(JsNativeError::typ()
            .with_message(format!("`{name}` must be true or false; got {other}"))
            .into()),
    }
}

/// A one-character option (`delimiter`, `quote`) as its byte.
fn byte(options: &Map<String, Value>, name: &str, default: u8) -> JsResult<u8> {
    match options.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::String(text)) if text.len() == 1 && text.is_ascii() => Ok(text.as_bytes()[0]),
        Some(other) => Err(JsNativeError::typ()
            .with_message(format!(
                "`{name}` must be one ASCII character, such as \",\" or \"\\t\"; got {other}"
            ))
            .into()),
    }
}

fn to_js(value: &Value, context: &mut Context) -> JsResult<JsValue> {
    JsValue::from_json(value, context)
}

/// A cell as CSV text: strings as they are, `null` empty, anything else its JSON.
pub(super) fn cell(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

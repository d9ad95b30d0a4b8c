//! `kiln:yaml`: YAML over `serde_norway`, serde_yaml's maintained fork.

use boa_engine::{Context, JsNativeError, JsResult, JsString, JsValue};
use serde_json::Value;

use super::to_js;
use crate::stdlib::{argument, string_argument};

/// `parse(text)`: YAML to plain data.
pub(super) fn parse(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let text = string_argument(args, 0, context)?;
    let value: Value = serde_norway::from_str(&text).map_err(|error| {
        JsNativeError::syntax().with_message(format!("kiln:yaml parse: {error}"))
    })?;
    kiln_types::check_depth(&value).map_err(|why| {
        JsNativeError::range().with_message(format!("kiln:yaml parse: the document {why}"))
    })?;
    to_js(&value, context)
}

/// `stringify(value)`: plain data to YAML.
pub(super) fn stringify(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let value = crate::inspect::to_json(&argument(args, 0), context)?;
    let text = serde_norway::to_string(&value).map_err(|error| {
        JsNativeError::typ().with_message(format!("kiln:yaml stringify: {error}"))
    })?;
    Ok(JsString::from(text).into())
}

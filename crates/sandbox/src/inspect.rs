//! Turning guest values into text and JSON for the host.
//!
//! Everything here runs guest code (getters, proxies) inside the guest's context,
//! so it is bounded by the same engine limits as the program, and it never panics.

use boa_engine::{Context, JsError, JsObject, JsResult, JsValue, JsVariant, js_string};

/// How deep `console.log` descends before printing `[Object]`.
const MAX_DEPTH: usize = 4;
/// How many entries of one object or array `console.log` prints.
const MAX_ENTRIES: usize = 100;

/// Formats a value the way `console.log` prints an argument: strings verbatim,
/// functions as `[Function: name]`, cycles as `[Circular]`.
pub(crate) fn display(value: &JsValue, context: &mut Context) -> JsResult<String> {
    if let Some(text) = value.as_string() {
        return Ok(text.to_std_string_escaped());
    }
    let mut out = String::new();
    let mut seen = Vec::new();
    write_value(value, context, &mut out, &mut seen, 0)?;
    Ok(out)
}

fn write_value(
    value: &JsValue,
    context: &mut Context,
    out: &mut String,
    seen: &mut Vec<JsObject>,
    depth: usize,
) -> JsResult<()> {
    match value.variant() {
        JsVariant::String(text) => {
            let text = text.to_std_string_escaped();
            out.push_str(&serde_json::Value::String(text).to_string());
        }
        JsVariant::Object(object) => write_object(&object, context, out, seen, depth)?,
        JsVariant::BigInt(number) => {
            out.push_str(&number.to_string());
            out.push('n');
        }
        JsVariant::Symbol(symbol) => {
            out.push_str(&symbol.descriptive_string().to_std_string_escaped())
        }
        _ => out.push_str(&value.to_string(context)?.to_std_string_escaped()),
    }
    Ok(())
}

fn write_object(
    object: &JsObject,
    context: &mut Context,
    out: &mut String,
    seen: &mut Vec<JsObject>,
    depth: usize,
) -> JsResult<()> {
    if object.is_callable() {
        let name = object.get(js_string!("name"), context)?;
        let name = name
            .as_string()
            .map(|name| name.to_std_string_escaped())
            .unwrap_or_default();
        if name.is_empty() {
            out.push_str("[Function (anonymous)]");
        } else {
            out.push_str(&format!("[Function: {name}]"));
        }
        return Ok(());
    }
    if seen.iter().any(|other| JsObject::equals(other, object)) {
        out.push_str("[Circular]");
        return Ok(());
    }
    if let Some(error) = error_summary(object, context)? {
        out.push_str(&error);
        return Ok(());
    }
    let is_array = object.is_array();
    if depth >= MAX_DEPTH {
        out.push_str(if is_array { "[Array]" } else { "[Object]" });
        return Ok(());
    }
    seen.push(object.clone());
    let keys = object_keys(object, context)?;
    out.push_str(if is_array { "[" } else { "{" });
    for (index, key) in keys.iter().enumerate() {
        if index == MAX_ENTRIES {
            out.push_str(&format!(", … {} more", keys.len() - MAX_ENTRIES));
            break;
        }
        out.push_str(if index == 0 { " " } else { ", " });
        if !is_array {
            let key_text = key.to_std_string_escaped();
            if is_identifier(&key_text) {
                out.push_str(&key_text);
            } else {
                out.push_str(&serde_json::Value::String(key_text).to_string());
            }
            out.push_str(": ");
        }
        let value = object.get(key.clone(), context)?;
        write_value(&value, context, out, seen, depth + 1)?;
    }
    out.push_str(match (is_array, keys.is_empty()) {
        (true, true) => "]",
        (false, true) => "}",
        (true, false) => " ]",
        (false, false) => " }",
    });
    seen.pop();
    Ok(())
}

/// `Object.keys(object)`, through the realm's own `Object.keys`.
fn object_keys(object: &JsObject, context: &mut Context) -> JsResult<Vec<boa_engine::JsString>> {
    let constructor = context.intrinsics().constructors().object().constructor();
    let keys_fn = constructor.get(js_string!("keys"), context)?;
    let Some(keys_fn) = keys_fn.as_callable() else {
        return Ok(Vec::new());
    };
    let keys = keys_fn.call(&JsValue::undefined(), &[object.clone().into()], context)?;
    let Some(keys) = keys.as_object() else {
        return Ok(Vec::new());
    };
    let length = keys
        .get(js_string!("length"), context)?
        .to_length(context)?;
    let mut out = Vec::new();
    for index in 0..length {
        let key = keys.get(index, context)?;
        out.push(key.to_string(context)?);
    }
    Ok(out)
}

/// `Name: message` for an Error object, `None` for anything else.
fn error_summary(object: &JsObject, context: &mut Context) -> JsResult<Option<String>> {
    let error_prototype = context.intrinsics().constructors().error().prototype();
    let mut proto = object.prototype();
    let mut hops = 0;
    let is_error = loop {
        match proto {
            Some(candidate) if JsObject::equals(&candidate, &error_prototype) => break true,
            Some(candidate) if hops < 64 => {
                proto = candidate.prototype();
                hops += 1;
            }
            _ => break false,
        }
    };
    if !is_error {
        return Ok(None);
    }
    let name = object
        .get(js_string!("name"), context)?
        .to_string(context)?
        .to_std_string_escaped();
    let message = object
        .get(js_string!("message"), context)?
        .to_string(context)?
        .to_std_string_escaped();
    Ok(Some(if message.is_empty() {
        name
    } else {
        format!("{name}: {message}")
    }))
}

fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    matches!(chars.next(), Some(c) if c == '_' || c == '$' || c.is_alphabetic())
        && chars.all(|c| c == '_' || c == '$' || c.is_alphanumeric())
}

/// The one-line message of an uncaught error: `Name: message`, no stack.
pub(crate) fn error_message(error: &JsError, context: &mut Context) -> String {
    if let Some(value) = error.as_opaque() {
        if let Some(object) = value.as_object()
            && let Ok(Some(summary)) = error_summary(&object, context)
        {
            return summary;
        }
        return match display(value, context) {
            Ok(text) => format!("Uncaught {text}"),
            Err(_) => "Uncaught exception (its value could not be printed)".to_owned(),
        };
    }
    match error.try_native(context) {
        Ok(native) => {
            let message = native.message();
            let name = native.kind().to_string();
            if message.is_empty() {
                name
            } else {
                format!("{name}: {message}")
            }
        }
        Err(engine) => format!("the engine stopped the program: {engine}"),
    }
}

/// The returned value as JSON: `undefined` becomes `null`; a cycle is refused.
pub(crate) fn to_json(value: &JsValue, context: &mut Context) -> JsResult<serde_json::Value> {
    let mut json = value.to_json(context)?.unwrap_or(serde_json::Value::Null);
    integral_numbers(&mut json);
    Ok(json)
}

/// JavaScript has one number type; Boa hands integers past `i32` over as `f64`,
/// which serde writes as `4999950000.0`. Write them as `JSON.stringify` does.
/// Iterative, so a deep value cannot exhaust the host's stack here.
fn integral_numbers(json: &mut serde_json::Value) {
    /// Integers up to 2^53 are exact in an `f64`.
    const MAX_SAFE: f64 = 9_007_199_254_740_991.0;
    let mut stack = vec![json];
    while let Some(value) = stack.pop() {
        match value {
            serde_json::Value::Number(number) => {
                let integral = number.as_f64().filter(|float| {
                    number.is_f64() && float.fract() == 0.0 && float.abs() <= MAX_SAFE
                });
                if let Some(float) = integral {
                    // Exact: |float| <= 2^53 and integral.
                    *number = serde_json::Number::from(float as i64);
                }
            }
            serde_json::Value::Array(items) => stack.extend(items.iter_mut()),
            serde_json::Value::Object(map) => stack.extend(map.values_mut()),
            _ => {}
        }
    }
}

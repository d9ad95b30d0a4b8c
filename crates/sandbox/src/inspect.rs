//! Turning guest values into text and JSON for the host.
//!
//! Everything here runs guest code (getters, proxies) inside the guest's context,
//! so it is bounded by the same engine limits as the program, and it never panics.

use base64::Engine as _;
use base64::prelude::BASE64_STANDARD;
use boa_engine::object::builtins::{JsArray, JsArrayBuffer, JsUint8Array};
use boa_engine::property::PropertyDescriptor;
use boa_engine::{
    Context, JsError, JsNativeError, JsObject, JsResult, JsString, JsValue, JsVariant, js_string,
};
use kiln_types::BYTES_KEY;
use kiln_types::words::json_type;

use crate::catalog::is_identifier;

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

/// `Object.keys` as the realm had it before the program ran, so a program
/// that replaces it changes nothing the host reads of its values.
pub(crate) struct IntrinsicKeys(JsObject);

/// Captures what the host's conversions call, before any program runs.
///
/// # Errors
///
/// The realm has no `Object.keys` function (it always has one).
pub(crate) fn capture_intrinsics(context: &mut Context) -> JsResult<()> {
    let constructor = context.intrinsics().constructors().object().constructor();
    let keys = function_of(&constructor, "keys", "Object.keys", context)?;
    context.insert_data(IntrinsicKeys(keys));
    Ok(())
}

/// `holder[name]` when it is a function; `what` names it in the error
/// when it is not.
pub(crate) fn function_of(
    holder: &JsObject,
    name: &str,
    what: &str,
    context: &mut Context,
) -> JsResult<JsObject> {
    holder
        .get(boa_engine::JsString::from(name), context)?
        .as_object()
        .filter(JsObject::is_callable)
        .ok_or_else(|| {
            JsNativeError::typ()
                .with_message(format!("{what} is not a function"))
                .into()
        })
}

fn intrinsic_keys(context: &Context) -> JsResult<JsObject> {
    context
        .get_data::<IntrinsicKeys>()
        .map(|keys| keys.0.clone())
        .ok_or_else(|| {
            JsNativeError::typ()
                .with_message("Object.keys was not captured")
                .into()
        })
}

/// `Object.keys(object)`, through the realm's own `Object.keys`.
fn object_keys(object: &JsObject, context: &mut Context) -> JsResult<Vec<boa_engine::JsString>> {
    let keys_fn = intrinsic_keys(context)?;
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

/// How deep a value crossing to the host may nest: Kiln's one bound
/// ([`kiln_types::MAX_VALUE_DEPTH`]), which leaves room for every envelope a
/// reader reads around it and keeps a hostile value from exhausting the stack.
pub const MAX_JSON_DEPTH: usize = kiln_types::MAX_VALUE_DEPTH;

/// A guest value as JSON, by `JSON.stringify`'s rules, converted inside the
/// guest's context so getters, proxies and `toJSON` run under its limits:
/// `undefined`, functions and symbols become `null` at the top and in arrays and
/// are left out of objects; non-finite numbers become `null`; a `BigInt`, a
/// cycle or nesting past [`MAX_JSON_DEPTH`] is refused with a `TypeError` that
/// names where it is.
pub(crate) fn to_json(value: &JsValue, context: &mut Context) -> JsResult<serde_json::Value> {
    let mut writer = JsonWriter {
        ancestors: Vec::new(),
        path: Vec::new(),
        keys: None,
    };
    Ok(writer
        .value(value, context)?
        .unwrap_or(serde_json::Value::Null))
}

/// Where a value sits in the one being converted: a property name or an index.
enum Segment {
    Key(JsString),
    Index(u64),
}

/// The state of one conversion. The path is kept as segments and rendered only
/// for an error message: a value of many properties costs no strings.
struct JsonWriter {
    /// The objects being converted, outermost first, with the path length at each.
    ancestors: Vec<(JsObject, usize)>,
    path: Vec<Segment>,
    /// `Object.keys`, looked up once per conversion.
    keys: Option<JsObject>,
}

impl JsonWriter {
    /// The path of the value at `depth` segments, as `value.a[2].b`.
    fn path_at(&self, depth: usize) -> String {
        let mut path = String::from("value");
        for segment in &self.path[..depth.min(self.path.len())] {
            match segment {
                Segment::Key(key) => {
                    path.push('.');
                    path.push_str(&key.to_std_string_escaped());
                }
                Segment::Index(index) => path.push_str(&format!("[{index}]")),
            }
        }
        short(&path)
    }

    fn error(&self, message: String) -> JsError {
        JsNativeError::typ().with_message(message).into()
    }

    /// `None` for what JSON leaves out (`undefined`, functions, symbols).
    fn value(
        &mut self,
        value: &JsValue,
        context: &mut Context,
    ) -> JsResult<Option<serde_json::Value>> {
        let mut value = value.clone();
        if let Some(object) = value.as_object() {
            // Bytes stay bytes: checked before `toJSON`, which a guest may define.
            if let Ok(bytes) = JsUint8Array::from_object(object.clone()) {
                return self.bytes(&bytes, context).map(Some);
            }
            let to_json = object.get(js_string!("toJSON"), context)?;
            if let Some(to_json) = to_json.as_callable() {
                // `JSON.stringify` passes the property's key; the top-level key is "".
                let key = match self.path.last() {
                    None => JsString::default(),
                    Some(Segment::Key(key)) => key.clone(),
                    Some(Segment::Index(index)) => JsString::from(index.to_string()),
                };
                value = to_json.call(&value, &[key.into()], context)?;
            }
        }
        Ok(match value.variant() {
            JsVariant::Null => Some(serde_json::Value::Null),
            JsVariant::Undefined | JsVariant::Symbol(_) => None,
            JsVariant::Boolean(flag) => Some(serde_json::Value::Bool(flag)),
            JsVariant::Integer32(number) => Some(serde_json::Value::from(number)),
            JsVariant::Float64(number) => Some(json_number(number)),
            JsVariant::String(text) => {
                Some(serde_json::Value::String(text.to_std_string_escaped()))
            }
            JsVariant::BigInt(_) => {
                return Err(self.error(format!(
                    "`{}` is a BigInt, which JSON cannot carry",
                    self.path_at(self.path.len())
                )));
            }
            JsVariant::Object(object) => {
                if object.is_callable() {
                    return Ok(None);
                }
                if let Some((_, depth)) = self
                    .ancestors
                    .iter()
                    .find(|(other, _)| JsObject::equals(other, &object))
                {
                    return Err(self.error(format!(
                        "cyclic value: `{}` refers back to `{}`",
                        self.path_at(self.path.len()),
                        self.path_at(*depth)
                    )));
                }
                if self.ancestors.len() >= MAX_JSON_DEPTH {
                    return Err(self.error(format!(
                        "`{}` is nested more than {MAX_JSON_DEPTH} levels deep, deeper than Kiln carries a value",
                        self.path_at(self.path.len())
                    )));
                }
                self.ancestors.push((object.clone(), self.path.len()));
                let converted = if object.is_array() {
                    self.array(&object, context)
                } else {
                    self.object(&object, context)
                };
                self.ancestors.pop();
                Some(converted?)
            }
        })
    }

    fn array(&mut self, array: &JsObject, context: &mut Context) -> JsResult<serde_json::Value> {
        let length = array
            .get(js_string!("length"), context)?
            .to_length(context)?;
        let mut items = Vec::new();
        for index in 0..length {
            let item = array.get(index, context)?;
            self.path.push(Segment::Index(index));
            let item = self.value(&item, context);
            self.path.pop();
            items.push(item?.unwrap_or(serde_json::Value::Null));
        }
        Ok(serde_json::Value::Array(items))
    }

    fn object(&mut self, object: &JsObject, context: &mut Context) -> JsResult<serde_json::Value> {
        let mut map = serde_json::Map::new();
        for key in self.own_keys(object, context)? {
            let item = object.get(key.clone(), context)?;
            let name = key.to_std_string_escaped();
            self.path.push(Segment::Key(key));
            let item = self.value(&item, context);
            self.path.pop();
            if let Some(item) = item? {
                map.insert(name, item);
            }
        }
        Ok(serde_json::Value::Object(map))
    }

    /// The object's own enumerable string keys, in order, as `Object.keys`
    /// gives them (a Proxy's traps run).
    fn own_keys(&mut self, object: &JsObject, context: &mut Context) -> JsResult<Vec<JsString>> {
        let keys_fn = match &self.keys {
            Some(keys_fn) => keys_fn.clone(),
            None => {
                let keys_fn = intrinsic_keys(context)?;
                self.keys = Some(keys_fn.clone());
                keys_fn
            }
        };
        let keys = keys_fn.call(&JsValue::undefined(), &[object.clone().into()], context)?;
        let Some(keys) = keys
            .as_object()
            .and_then(|keys| JsArray::from_object(keys).ok())
        else {
            return Ok(Vec::new());
        };
        let length = keys.length(context)?;
        let mut out = Vec::with_capacity(usize::try_from(length).unwrap_or(0));
        for index in 0..length {
            out.push(keys.get(index, context)?.to_string(context)?);
        }
        Ok(out)
    }

    /// A `Uint8Array` as `{"$bytes": "<base64>"}` ([`kiln_types::BYTES_KEY`]).
    fn bytes(&self, bytes: &JsUint8Array, context: &mut Context) -> JsResult<serde_json::Value> {
        let offset = bytes.byte_offset(context)?;
        let length = bytes.byte_length(context)?;
        let buffer = bytes
            .buffer(context)?
            .as_object()
            .and_then(|buffer| JsArrayBuffer::from_object(buffer.clone()).ok());
        let data = buffer.as_ref().and_then(JsArrayBuffer::data);
        let Some(slice) = data
            .as_ref()
            .and_then(|data| data.get(offset..offset + length))
        else {
            return Err(self.error(format!(
                "`{}` is a Uint8Array whose buffer is detached",
                self.path_at(self.path.len())
            )));
        };
        let mut map = serde_json::Map::new();
        map.insert(
            BYTES_KEY.to_owned(),
            serde_json::Value::String(BASE64_STANDARD.encode(slice)),
        );
        Ok(serde_json::Value::Object(map))
    }
}

/// A JSON value from the host as a guest value, built directly (no JSON text):
/// `{"$bytes": "<base64>"}` becomes a `Uint8Array`.
///
/// # Errors
///
/// A one-key `{"$bytes": …}` object whose value is not base64 text (a
/// number, say, or text with a stray symbol): a `TypeError` naming where it
/// is (`value.rows[1]`). The caller refuses the call with it, catchably.
pub(crate) fn from_json(value: &serde_json::Value, context: &mut Context) -> JsResult<JsValue> {
    let mut path = Vec::new();
    from_json_at(value, &mut path, context)
}

/// Where a host value sits in the one being built: a key or an index. Kept
/// as borrowed segments and rendered only for an error message.
enum HostSegment<'a> {
    Key(&'a str),
    Index(usize),
}

/// The path of `segments`, as `value.a[2]["b c"]`.
fn host_path(segments: &[HostSegment<'_>]) -> String {
    let mut path = String::from("value");
    for segment in segments {
        match segment {
            HostSegment::Key(key) if is_identifier(key) => {
                path.push('.');
                path.push_str(key);
            }
            HostSegment::Key(key) => {
                path.push_str(&format!(
                    "[{}]",
                    serde_json::Value::String((*key).to_owned())
                ));
            }
            HostSegment::Index(index) => path.push_str(&format!("[{index}]")),
        }
    }
    short(&path)
}

fn from_json_at<'a>(
    value: &'a serde_json::Value,
    path: &mut Vec<HostSegment<'a>>,
    context: &mut Context,
) -> JsResult<JsValue> {
    Ok(match value {
        serde_json::Value::Null => JsValue::null(),
        serde_json::Value::Bool(flag) => JsValue::from(*flag),
        serde_json::Value::Number(number) => match number.as_i64() {
            Some(integer) => match i32::try_from(integer) {
                Ok(small) => JsValue::from(small),
                // Beyond i32 a JS number is an f64, as JSON.parse would read it.
                Err(_) => JsValue::from(integer as f64),
            },
            None => JsValue::from(number.as_f64().unwrap_or(f64::NAN)),
        },
        serde_json::Value::String(text) => JsValue::from(JsString::from(text.as_str())),
        serde_json::Value::Array(items) => {
            let mut values = Vec::with_capacity(items.len());
            for (index, item) in items.iter().enumerate() {
                path.push(HostSegment::Index(index));
                values.push(from_json_at(item, path, context)?);
                path.pop();
            }
            JsArray::from_iter(values, context).into()
        }
        serde_json::Value::Object(map) => {
            if let Some(bytes) = as_bytes(map) {
                // The one-key `$bytes` object is the bytes envelope: its value
                // is base64 text or the answer is malformed, never a plain object.
                let bytes = match bytes {
                    serde_json::Value::String(text) => {
                        BASE64_STANDARD.decode(text).map_err(|error| {
                            JsNativeError::typ().with_message(format!(
                                "`{}` is a `{BYTES_KEY}` value that is not base64: {error}",
                                host_path(path)
                            ))
                        })?
                    }
                    other => {
                        return Err(JsNativeError::typ()
                            .with_message(format!(
                                "`{}` is a `{BYTES_KEY}` value that is not a base64 string but {}",
                                host_path(path),
                                json_type(other)
                            ))
                            .into());
                    }
                };
                return Ok(JsUint8Array::from_iter(bytes, context)?.into());
            }
            let object = JsObject::with_object_proto(context.intrinsics());
            for (key, item) in map {
                path.push(HostSegment::Key(key));
                let item = from_json_at(item, path, context)?;
                path.pop();
                // A fresh ordinary object: inserting the data property directly
                // is what `CreateDataProperty` would do, without its checks.
                let property = PropertyDescriptor::builder()
                    .value(item)
                    .writable(true)
                    .enumerable(true)
                    .configurable(true);
                object.insert_property(JsString::from(key.as_str()), property);
            }
            object.into()
        }
    })
}

/// The value of `{"$bytes": …}`, if that is what `map` is: one key, `$bytes`.
fn as_bytes(map: &serde_json::Map<String, serde_json::Value>) -> Option<&serde_json::Value> {
    match map.get(BYTES_KEY) {
        Some(value) if map.len() == 1 => Some(value),
        _ => None,
    }
}

/// A path short enough for a one-line message: its end, which says the most.
fn short(path: &str) -> String {
    const KEEP: usize = 60;
    match path.char_indices().rev().nth(KEEP) {
        Some((cut, _)) if path.len() > KEEP + 20 => format!("…{}", &path[cut..]),
        _ => path.to_owned(),
    }
}

/// A number as `JSON.stringify` writes it: integers without a fraction,
/// non-finite numbers as `null`.
fn json_number(number: f64) -> serde_json::Value {
    /// Integers up to 2^53 are exact in an `f64`.
    const MAX_SAFE: f64 = 9_007_199_254_740_991.0;
    if number.fract() == 0.0 && number.abs() <= MAX_SAFE {
        // Exact: |number| <= 2^53 and integral (and -0 becomes 0, as in JSON).
        serde_json::Value::from(number as i64)
    } else {
        serde_json::Number::from_f64(number)
            .map_or(serde_json::Value::Null, serde_json::Value::Number)
    }
}

/// `value` as an error message shows what it was given: a string quoted and
/// named so (`the string "10"`), anything else as JavaScript writes it.
pub(crate) fn shown(value: &JsValue, context: &mut Context) -> String {
    match value.as_string() {
        Some(text) => format!("the string {:?}", text.to_std_string_escaped()),
        None => value
            .to_string(context)
            .map(|text| text.to_std_string_escaped())
            .unwrap_or_default(),
    }
}

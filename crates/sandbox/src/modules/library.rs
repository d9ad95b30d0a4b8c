//! The modules that run outside the engine (`kiln-modules`: `kiln:html`,
//! `kiln:markdown`, `kiln:diff`, `kiln:zip`): each export reads the program's
//! arguments into a [`LibraryCall`] by its signature here (text coerced and
//! bounded, options as JSON, bytes copied out of their buffer within the
//! bytes bound), hands it to the library and makes its answer the program's
//! value. Natively the library is linked in; with the `library-instance`
//! feature (the sandbox worker's build) it is the second wasm instance the
//! worker loaded before the run, reached through `globalThis.__kilnLibrary`.

use std::collections::HashSet;

use boa_engine::object::builtins::{JsArray, JsArrayBuffer, JsDataView, JsTypedArray};
use boa_engine::property::PropertyKey;
use boa_engine::{Context, JsNativeError, JsObject, JsResult, JsString, JsValue, js_string};
use kiln_types::library::{Answer, Arg, Failure, FailureKind, LibraryCall, LibraryReply};

use super::options;
use crate::stdlib::{MAX_BYTES, MAX_TEXT_CHARS, argument, string_argument, uint8_array};

/// How a program's argument is read.
#[derive(Clone, Copy)]
pub(super) enum Param {
    /// Text, coerced as JavaScript does and bounded.
    Text,
    /// An options object (absent when `undefined` or `null`).
    Options,
    /// Bytes: a typed array, a `DataView` or an `ArrayBuffer`, named in errors
    /// as the given noun.
    Bytes(&'static str),
    /// `kiln:zip`'s entries: `{name: data}` or `[{name, data}]`.
    Entries,
}

/// Each export of the library's modules, with its parameters.
pub(super) fn exports(specifier: &str) -> Option<&'static [(&'static str, &'static [Param])]> {
    use Param::{Bytes, Entries, Options, Text};
    Some(match specifier {
        "kiln:html" => &[("select", &[Text, Text, Options]), ("toMarkdown", &[Text])],
        "kiln:markdown" => &[("toHtml", &[Text, Options])],
        "kiln:diff" => &[
            ("lines", &[Text, Text]),
            ("words", &[Text, Text]),
            ("unified", &[Text, Text, Options]),
        ],
        "kiln:zip" => &[
            ("list", &[Bytes("the archive")]),
            ("read", &[Bytes("the archive"), Text, Options]),
            ("write", &[Entries, Options]),
        ],
        _ => return None,
    })
}

/// Bytes taken out of archives so far in this run (in the run's context,
/// which a run never shares).
struct Inflated(u64);

/// One export, called with the program's arguments.
pub(super) fn call_export(
    specifier: &'static str,
    export: &'static str,
    params: &'static [Param],
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    let what = format!("{specifier} {export}");
    let mut read = Vec::with_capacity(params.len());
    for (index, param) in params.iter().enumerate() {
        read.push(match param {
            Param::Text => Arg::Text(string_argument(args, index, context)?),
            Param::Options => {
                let value = argument(args, index);
                if value.is_undefined() || value.is_null() {
                    Arg::Absent
                } else {
                    Arg::Json(serde_json::Value::Object(options(args, index, context)?))
                }
            }
            Param::Bytes(noun) => Arg::Bytes(bytes(&argument(args, index), &what, noun, context)?),
            Param::Entries => entries(&argument(args, index), context)?,
        });
    }
    let call = LibraryCall {
        specifier: specifier.to_owned(),
        export: export.to_owned(),
        args: read,
        inflated: context
            .get_data::<Inflated>()
            .map_or(0, |inflated| inflated.0),
    };
    let reply = run(&call)?;
    context.insert_data(Inflated(reply.inflated));
    match reply.answer {
        Ok(Answer::Text(text)) => Ok(JsString::from(text).into()),
        Ok(Answer::Bytes(bytes)) => uint8_array(&bytes, context),
        Ok(Answer::Json(value)) => JsValue::from_json(&value, context),
        Err(failure) => Err(thrown(failure).into()),
    }
}

fn thrown(failure: Failure) -> JsNativeError {
    let error = match failure.kind {
        FailureKind::Type => JsNativeError::typ(),
        FailureKind::Range => JsNativeError::range(),
        FailureKind::Syntax => JsNativeError::syntax(),
        FailureKind::Error => JsNativeError::error(),
    };
    error.with_message(failure.message)
}

/// The library, linked in.
#[cfg(not(all(feature = "library-instance", target_arch = "wasm32")))]
fn run(call: &LibraryCall) -> JsResult<LibraryReply> {
    Ok(kiln_modules::call(call))
}

/// The library's own wasm instance, which the sandbox worker loaded before
/// the run: the call crosses as a byte frame. An instance that throws (it
/// ran out of its memory budget, or trapped) is dropped, so the next run
/// loads a fresh one, and the program gets an error that says so.
#[cfg(all(feature = "library-instance", target_arch = "wasm32"))]
fn run(call: &LibraryCall) -> JsResult<LibraryReply> {
    use wasm_bindgen::prelude::*;
    #[wasm_bindgen(inline_js = r#"
export function library_call(frame, room) {
  const library = globalThis.__kilnLibrary;
  if (!library) {
    const why = globalThis.__kilnLibraryError ?? "it was not loaded";
    throw new Error(`the library's wasm (kiln_modules.js) could not be loaded: ${why}`);
  }
  try {
    return library.call(frame, room);
  } catch (error) {
    // A trap leaves the instance unusable: the next run loads a fresh one.
    globalThis.__kilnLibrary = undefined;
    let exhausted = false;
    try { exhausted = library.exhausted(); } catch {}
    throw new Error(exhausted
      ? `it ran past what is left of the run's memory budget (${room} bytes)`
      : `it failed (${error}) and is loaded again for the next run`);
  }
}
"#)]
    extern "C" {
        #[wasm_bindgen(catch)]
        fn library_call(frame: &[u8], room: usize) -> Result<Vec<u8>, JsValue>;
    }
    let room = kiln_alloc::limit().saturating_sub(kiln_alloc::in_use());
    let frame = library_call(&call.encode(), room).map_err(|error| {
        let error = js_sys::Error::from(error);
        JsNativeError::range().with_message(format!(
            "{} {}: {}",
            call.specifier,
            call.export,
            String::from(error.message())
        ))
    })?;
    LibraryReply::decode(&frame).map_err(|problem| {
        JsNativeError::error()
            .with_message(format!("{} {}: {problem}", call.specifier, call.export))
            .into()
    })
}

/// The bytes of `value` (a typed array, a `DataView` or an `ArrayBuffer`),
/// at most [`MAX_BYTES`], copied out.
fn bytes(value: &JsValue, what: &str, noun: &str, context: &mut Context) -> JsResult<Vec<u8>> {
    let not_bytes = || {
        JsNativeError::typ().with_message(format!(
            "{what} takes {noun} as bytes (a Uint8Array, another typed array, a DataView or an ArrayBuffer); got {}",
            value.type_of()
        ))
    };
    let object = value.as_object().ok_or_else(not_bytes)?;
    let (buffer, offset, length) = view(&object, context).ok_or_else(not_bytes)??;
    if length > MAX_BYTES {
        return Err(JsNativeError::range()
            .with_message(format!(
                "{what}: {noun} is {length} bytes, more than the {MAX_BYTES} bytes one call may take"
            ))
            .into());
    }
    let data = buffer.data().ok_or_else(detached)?;
    Ok(data
        .get(offset..offset + length)
        .ok_or_else(outside)?
        .to_vec())
}

/// The entries `kiln:zip`'s `write` was given, as names and data (text or
/// bytes), the data at most [`MAX_BYTES`] in all. The names are the
/// library's to check.
fn entries(value: &JsValue, context: &mut Context) -> JsResult<Arg> {
    let shape = || {
        JsNativeError::typ().with_message(
            "kiln:zip write takes an object {name: data} or an array [{name, data}], each data a string or bytes",
        )
    };
    let object = value.as_object().ok_or_else(shape)?;
    let mut pairs: Vec<(String, JsValue)> = Vec::new();
    if object.is_array() {
        let array = JsArray::from_object(object.clone())?;
        for index in 0..array.length(context)? {
            let item = array.get(index, context)?;
            let item = item.as_object().ok_or_else(|| {
                JsNativeError::typ().with_message(format!(
                    "kiln:zip write: entry {index} is not an object {{name, data}}"
                ))
            })?;
            let name = item.get(js_string!("name"), context)?;
            let Some(name) = name.as_string() else {
                return Err(JsNativeError::typ()
                    .with_message(format!(
                        "kiln:zip write: entry {index} has no string `name`"
                    ))
                    .into());
            };
            let data = item.get(js_string!("data"), context)?;
            pairs.push((name.to_std_string_lossy(), data));
        }
    } else {
        for key in object.own_property_keys(context)? {
            let name = match &key {
                PropertyKey::String(name) => name.to_std_string_lossy(),
                PropertyKey::Index(index) => index.get().to_string(),
                PropertyKey::Symbol(_) => continue,
            };
            let data = object.get(key, context)?;
            pairs.push((name, data));
        }
    }
    let mut seen = HashSet::new();
    let mut total = 0_usize;
    let mut entries = Vec::with_capacity(pairs.len());
    for (name, data) in pairs {
        // A name given twice is refused before its data is copied again.
        if !seen.insert(name.clone()) {
            return Err(JsNativeError::typ()
                .with_message(format!("kiln:zip write: the entry `{name}` is given twice"))
                .into());
        }
        let data = entry_data(&name, &data, MAX_BYTES - total, context)?;
        total += match &data {
            Arg::Text(text) => text.len(),
            Arg::Bytes(bytes) => bytes.len(),
            _ => 0,
        };
        entries.push((name, data));
    }
    Ok(Arg::Entries(entries))
}

/// The data of the entry `name`: text (written as UTF-8), bytes, or nothing,
/// at most `room` bytes (what is left of [`MAX_BYTES`]).
fn entry_data(name: &str, data: &JsValue, room: usize, context: &mut Context) -> JsResult<Arg> {
    let too_many = |length: usize| {
        JsNativeError::range().with_message(format!(
            "kiln:zip write: the entries come to more than the {MAX_BYTES} bytes one call may take (at `{name}`, {length} bytes)"
        ))
    };
    if data.is_undefined() || data.is_null() {
        return Ok(Arg::Absent);
    }
    if let Some(text) = data.as_string() {
        if text.len() > MAX_TEXT_CHARS {
            return Err(JsNativeError::range()
                .with_message(format!(
                    "kiln:zip write: `{name}` is {} characters, more than the {MAX_TEXT_CHARS} characters one call may take",
                    text.len()
                ))
                .into());
        }
        let text = text.to_std_string_lossy();
        if text.len() > room {
            return Err(too_many(text.len()).into());
        }
        return Ok(Arg::Text(text));
    }
    let not_data = || {
        JsNativeError::typ().with_message(format!(
            "kiln:zip write: the data of `{name}` must be a string or bytes (a Uint8Array, another typed array, a DataView or an ArrayBuffer); got {}",
            data.type_of()
        ))
    };
    let object = data.as_object().ok_or_else(not_data)?;
    let (buffer, offset, length) = view(&object, context).ok_or_else(not_data)??;
    if length > room {
        return Err(too_many(length).into());
    }
    let bytes = buffer.data().ok_or_else(detached)?;
    Ok(Arg::Bytes(
        bytes
            .get(offset..offset + length)
            .ok_or_else(outside)?
            .to_vec(),
    ))
}

/// The buffer, offset and length of `object`'s bytes, when it is a typed
/// array, a `DataView` or an `ArrayBuffer` (`None` when it is none of them).
fn view(
    object: &JsObject,
    context: &mut Context,
) -> Option<JsResult<(JsArrayBuffer, usize, usize)>> {
    let buffer_of = |buffer: JsValue| -> JsResult<JsArrayBuffer> {
        buffer
            .as_object()
            .and_then(|buffer| JsArrayBuffer::from_object(buffer.clone()).ok())
            .ok_or_else(|| {
                JsNativeError::typ()
                    .with_message(
                        "bytes over a SharedArrayBuffer are refused; give an ArrayBuffer's",
                    )
                    .into()
            })
    };
    if let Ok(array) = JsTypedArray::from_object(object.clone()) {
        return Some((|| {
            let offset = array.byte_offset(context)?;
            let length = array.byte_length(context)?;
            Ok((buffer_of(array.buffer(context)?)?, offset, length))
        })());
    }
    if let Ok(view) = JsDataView::from_object(object.clone()) {
        return Some((|| {
            let offset = usize::try_from(view.byte_offset(context)?).map_err(|_| outside())?;
            let length = usize::try_from(view.byte_length(context)?).map_err(|_| outside())?;
            Ok((buffer_of(view.buffer(context)?)?, offset, length))
        })());
    }
    if let Ok(buffer) = JsArrayBuffer::from_object(object.clone()) {
        let length = buffer.byte_length();
        return Some(Ok((buffer, 0, length)));
    }
    None
}

fn detached() -> JsNativeError {
    JsNativeError::typ().with_message("the bytes' buffer was detached")
}

fn outside() -> JsNativeError {
    JsNativeError::range().with_message("the bytes lie outside their buffer")
}

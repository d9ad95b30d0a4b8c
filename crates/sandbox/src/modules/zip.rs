//! `kiln:zip`: archives listed, read and written in memory over the `zip`
//! crate, deflate only (through `flate2`'s pure-Rust backend).
//!
//! An archive is bytes in and bytes out; nothing touches a file system. The
//! bounds live here: an archive read, and the data written, at most
//! [`MAX_BYTES`] a call; and at most [`MAX_UNZIP_BYTES`] taken out of
//! archives in a whole run, counted as the bytes come out of the
//! decompressor (what an archive declares is never trusted), so neither one
//! bomb nor many reads of a modest one can fill the host's memory.

use std::collections::HashSet;
use std::io::{Cursor, Write as _};

use boa_engine::object::builtins::{
    AlignedVec, JsArray, JsArrayBuffer, JsDataView, JsTypedArray, JsUint8Array,
};
use boa_engine::property::PropertyKey;
use boa_engine::{Context, JsNativeError, JsObject, JsResult, JsString, JsValue, js_string};
use serde_json::{Value, json};
use zip::result::ZipError;
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipArchive, ZipWriter};

use super::{flag, options, to_js};
use crate::stdlib::{MAX_BYTES, MAX_TEXT_CHARS, argument, string_argument};

/// The most bytes a run may take out of archives, over all its `read`s: a
/// zip bomb ends here, however small it is.
pub const MAX_UNZIP_BYTES: usize = 50 << 20;

/// How many names a missing entry's error lists.
const NAMES_SHOWN: usize = 5;

/// Bytes taken out of archives so far in this run (in the run's context,
/// which a run never shares).
struct Inflated(usize);

/// `list(bytes)`: `[{name, size, compressedSize, isDirectory, modified}]`.
pub(super) fn list(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let entries = with_archive(&argument(args, 0), "list", context, |archive| {
        let mut entries = Vec::with_capacity(archive.len());
        for index in 0..archive.len() {
            let entry = archive
                .by_index_data(index)
                .map_err(|error| damaged("list", &error))?;
            let modified = entry
                .last_modified()
                .filter(zip::DateTime::is_valid)
                .map(|time| {
                    format!(
                        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
                        time.year(),
                        time.month(),
                        time.day(),
                        time.hour(),
                        time.minute(),
                        time.second()
                    )
                });
            entries.push(json!({
                "name": entry_name(entry.name(), entry.name_raw()),
                "size": entry.size(),
                "compressedSize": entry.compressed_size(),
                "isDirectory": entry.is_dir(),
                "modified": modified,
            }));
        }
        Ok(Value::Array(entries))
    })?;
    to_js(&entries, context)
}

/// `read(bytes, name, {text = false})`: the entry's bytes, or its UTF-8 text.
pub(super) fn read(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let name = string_argument(args, 1, context)?;
    let options = options(args, 2, context)?;
    let text = flag(&options, "text", false)?;
    let inflated_before = context
        .get_data::<Inflated>()
        .map_or(0, |inflated| inflated.0);
    let allowed = MAX_UNZIP_BYTES.saturating_sub(inflated_before);
    let (bytes, taken) = with_archive(&argument(args, 0), "read", context, |archive| {
        let index = archive
            .index_for_name(&name)
            .ok_or_else(|| missing(archive, &name))?;
        let entry = archive
            .by_index_data(index)
            .map_err(|error| damaged("read", &error))?;
        if entry.encrypted() {
            return Err(JsNativeError::typ()
                .with_message(format!(
                    "kiln:zip read: `{name}` is encrypted, and kiln:zip reads no encrypted entry"
                ))
                .into());
        }
        let method = entry.compression();
        if !matches!(
            method,
            CompressionMethod::Stored | CompressionMethod::Deflated
        ) {
            return Err(JsNativeError::typ()
                .with_message(format!(
                    "kiln:zip read: `{name}` is compressed with {method}; kiln:zip reads only stored and deflated entries"
                ))
                .into());
        }
        let mut file = archive
            .by_index(index)
            .map_err(|error| damaged("read", &error))?;
        Ok(inflate(&mut file, &name, allowed))
    })?;
    context.insert_data(Inflated(inflated_before.saturating_add(taken)));
    let bytes = bytes?;
    if text {
        return Ok(JsString::from(String::from_utf8_lossy(&bytes).as_ref()).into());
    }
    let buffer = JsArrayBuffer::from_byte_block(bytes, context)?;
    Ok(JsUint8Array::from_array_buffer(buffer, context)?.into())
}

/// What one `read` took out of its entry: the bytes (or the error that ended
/// it), and how many bytes were inflated either way, for the run's count.
type Taken = (JsResult<AlignedVec<u8>>, usize);

/// The entry's bytes, read a chunk at a time and refused the moment they
/// would pass `allowed`.
fn inflate(file: &mut impl std::io::Read, name: &str, allowed: usize) -> Taken {
    let mut bytes = AlignedVec::new(0);
    let mut chunk = vec![0_u8; 64 << 10];
    loop {
        let count = match file.read(&mut chunk) {
            Ok(0) => {
                let taken = bytes.len();
                return (Ok(bytes), taken);
            }
            Ok(count) => count,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => {
                let taken = bytes.len();
                let error = JsNativeError::syntax()
                    .with_message(format!("kiln:zip read: `{name}` is damaged: {error}"));
                return (Err(error.into()), taken);
            }
        };
        if bytes.len() + count > allowed {
            let error = JsNativeError::range().with_message(format!(
                "kiln:zip read: inflating `{name}` would pass the {MAX_UNZIP_BYTES} bytes a run may inflate"
            ));
            // The run has used its allowance: what is left of it is no use
            // to anything but an empty entry.
            return (Err(error.into()), allowed);
        }
        bytes.extend_from_slice(&chunk[..count]);
    }
}

/// The error for `name`, which `archive` lacks, with a few names it has.
fn missing(archive: &ZipArchive<Cursor<&[u8]>>, name: &str) -> JsNativeError {
    let count = archive.len();
    if count == 0 {
        return JsNativeError::error().with_message(format!(
            "kiln:zip read: the archive has no entry `{name}`; it is empty"
        ));
    }
    let shown: Vec<String> = archive
        .file_names_raw()
        .take(NAMES_SHOWN)
        .map(|raw| format!("`{}`", String::from_utf8_lossy(raw)))
        .collect();
    let more = if count > NAMES_SHOWN {
        format!(" and {} more", count - NAMES_SHOWN)
    } else {
        String::new()
    };
    JsNativeError::error().with_message(format!(
        "kiln:zip read: the archive has no entry `{name}`; it has {}{more}",
        shown.join(", ")
    ))
}

/// `write(entries, {level = 6})`: a deflate archive of `entries`, an object
/// `{name: data}` or an array `[{name, data}]`, each data a string (written
/// as UTF-8) or bytes; a name ending in `/` is a directory.
pub(super) fn write(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let entries = entries(&argument(args, 0), context)?;
    let options = options(args, 1, context)?;
    let level = match options.get("level") {
        None | Some(Value::Null) => 6,
        Some(Value::Number(number)) => number.as_i64().filter(|level| (0..=9).contains(level)).ok_or_else(|| {
            JsNativeError::range().with_message(format!(
                "kiln:zip write: `level` is a whole number from 0 (stored) to 9 (smallest); got {number}"
            ))
        })?,
        Some(other) => {
            return Err(JsNativeError::typ()
                .with_message(format!(
                    "kiln:zip write: `level` is a number from 0 to 9; got {other}"
                ))
                .into());
        }
    };
    let file_options = if level == 0 {
        SimpleFileOptions::default().compression_method(CompressionMethod::Stored)
    } else {
        SimpleFileOptions::default()
            .compression_method(CompressionMethod::Deflated)
            .compression_level(Some(level))
    }
    // The zip epoch, whatever build: the same entries make the same archive.
    .last_modified_time(zip::DateTime::default());
    let failed =
        |error: ZipError| JsNativeError::error().with_message(format!("kiln:zip write: {error}"));
    let mut writer = ZipWriter::new(Cursor::new(Vec::new()));
    for (name, data) in &entries {
        if name.ends_with('/') {
            writer
                .add_directory(name.as_str(), file_options)
                .map_err(failed)?;
        } else {
            writer
                .start_file(name.as_str(), file_options)
                .map_err(failed)?;
            writer
                .write_all(data)
                .map_err(|error| failed(ZipError::Io(error)))?;
        }
    }
    let archive = writer.finish().map_err(failed)?.into_inner();
    let block = AlignedVec::from_iter(0, archive.iter().copied());
    let buffer = JsArrayBuffer::from_byte_block(block, context)?;
    Ok(JsUint8Array::from_array_buffer(buffer, context)?.into())
}

/// The entries `write` was given, as names and bytes, each name checked and
/// the data at most [`MAX_BYTES`] in all.
fn entries(value: &JsValue, context: &mut Context) -> JsResult<Vec<(String, Vec<u8>)>> {
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
        check_name(&name)?;
        if !seen.insert(name.clone()) {
            return Err(JsNativeError::typ()
                .with_message(format!("kiln:zip write: the entry `{name}` is given twice"))
                .into());
        }
        let bytes = entry_bytes(&name, &data, MAX_BYTES - total, context)?;
        total += bytes.len();
        entries.push((name, bytes));
    }
    Ok(entries)
}

/// Refuses a name that would land outside the folder an archive is
/// extracted into, or that names nothing.
fn check_name(name: &str) -> JsResult<()> {
    let why = if name.is_empty() || name == "/" {
        Some("is empty")
    } else if name.starts_with('/') || name.starts_with('\\') {
        Some("is an absolute path")
    } else if name.as_bytes().get(1) == Some(&b':') && name.as_bytes()[0].is_ascii_alphabetic() {
        Some("starts with a drive letter")
    } else if name.split(['/', '\\']).any(|part| part == "..") {
        Some("has a `..` component, which escapes the archive")
    } else if name.contains('\0') {
        Some("has a NUL character")
    } else {
        None
    };
    match why {
        None => Ok(()),
        Some(why) => Err(JsNativeError::typ()
            .with_message(format!(
                "kiln:zip write: the entry name `{name}` {why}; names are relative paths such as `docs/a.txt`"
            ))
            .into()),
    }
}

/// The bytes of the entry `name`: its data as UTF-8 or as bytes, at most
/// `room` of them (what is left of [`MAX_BYTES`]); a directory has none.
fn entry_bytes(
    name: &str,
    data: &JsValue,
    room: usize,
    context: &mut Context,
) -> JsResult<Vec<u8>> {
    let too_many = |length: usize| {
        JsNativeError::range().with_message(format!(
            "kiln:zip write: the entries come to more than the {MAX_BYTES} bytes one call may take (at `{name}`, {length} bytes)"
        ))
    };
    if name.ends_with('/') {
        if data.is_undefined()
            || data.is_null()
            || data.as_string().is_some_and(|text| text.is_empty())
        {
            return Ok(Vec::new());
        }
        return Err(JsNativeError::typ()
            .with_message(format!(
                "kiln:zip write: `{name}` is a directory (its name ends in `/`) and holds no data"
            ))
            .into());
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
        let bytes = text.to_std_string_lossy().into_bytes();
        if bytes.len() > room {
            return Err(too_many(bytes.len()).into());
        }
        return Ok(bytes);
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
    Ok(bytes
        .get(offset..offset + length)
        .ok_or_else(outside)?
        .to_vec())
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
                        "kiln:zip takes bytes over an ArrayBuffer, not a SharedArrayBuffer",
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
    JsNativeError::typ().with_message("kiln:zip: the bytes' buffer was detached")
}

fn outside() -> JsNativeError {
    JsNativeError::range().with_message("kiln:zip: the bytes lie outside their buffer")
}

/// Opens the archive in `value` (bytes, at most [`MAX_BYTES`]) and hands it
/// to `work`, which runs no JavaScript.
fn with_archive<R>(
    value: &JsValue,
    what: &str,
    context: &mut Context,
    work: impl FnOnce(&mut ZipArchive<Cursor<&[u8]>>) -> JsResult<R>,
) -> JsResult<R> {
    let not_bytes = || {
        JsNativeError::typ().with_message(format!(
            "kiln:zip {what} takes the archive as bytes (a Uint8Array, another typed array, a DataView or an ArrayBuffer); got {}",
            value.type_of()
        ))
    };
    let object = value.as_object().ok_or_else(not_bytes)?;
    let (buffer, offset, length) = view(&object, context).ok_or_else(not_bytes)??;
    if length > MAX_BYTES {
        return Err(JsNativeError::range()
            .with_message(format!(
                "kiln:zip {what}: the archive is {length} bytes, more than the {MAX_BYTES} bytes one call may take"
            ))
            .into());
    }
    let data = buffer.data().ok_or_else(detached)?;
    let bytes = data.get(offset..offset + length).ok_or_else(outside)?;
    let mut archive = ZipArchive::new(Cursor::new(bytes)).map_err(|error| {
        JsNativeError::syntax().with_message(format!(
            "kiln:zip {what}: the bytes are not a zip archive: {error}"
        ))
    })?;
    work(&mut archive)
}

/// An entry's name: as the archive spells it, or its bytes read leniently.
fn entry_name(name: zip::result::ZipResult<std::borrow::Cow<'_, str>>, raw: &[u8]) -> String {
    name.map_or_else(
        |_| String::from_utf8_lossy(raw).into_owned(),
        std::borrow::Cow::into_owned,
    )
}

fn damaged(what: &str, error: &ZipError) -> JsNativeError {
    JsNativeError::syntax()
        .with_message(format!("kiln:zip {what}: the archive is damaged: {error}"))
}

//! `kiln:zip`: archives listed, read and written in memory over the `zip`
//! crate, deflate only (through `flate2`'s pure-Rust backend).
//!
//! An archive is bytes in and bytes out; nothing touches a file system. The
//! bounds: an archive read, and the data written, at most the sandbox's bytes
//! bound a call (checked as it copies them out of the program's buffers); and
//! at most [`MAX_UNZIP_BYTES`] taken out of archives in a whole run, counted
//! as the bytes come out of the decompressor (what an archive declares is
//! never trusted), so neither one bomb nor many reads of a modest one can fill
//! the host's memory.

use std::collections::HashSet;
use std::io::{Cursor, Write as _};

use kiln_types::library::{Answer, Arg, Failure, LibraryCall};
use serde_json::{Value, json};
use zip::result::ZipError;
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipArchive, ZipWriter};

use super::flag;

/// The most bytes a run may take out of archives, over all its `read`s: a
/// zip bomb ends here, however small it is.
pub const MAX_UNZIP_BYTES: usize = 50 << 20;

/// How many names a missing entry's error lists.
const NAMES_SHOWN: usize = 5;

/// `list(bytes)`: `[{name, size, compressedSize, isDirectory, modified}]`.
pub(super) fn list(call: &LibraryCall) -> Result<Answer, Failure> {
    let entries = with_archive(call, "list", |archive| {
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
    Ok(Answer::Json(entries))
}

/// `read(bytes, name, {text = false})`: the entry's bytes, or its UTF-8 text.
/// `inflated` is the run's count before the call and after it.
pub(super) fn read(call: &LibraryCall, inflated: &mut u64) -> Result<Answer, Failure> {
    let name = call.text(1);
    let text = flag(&call.options(2), "text", false)?;
    let inflated_before = usize::try_from(*inflated).unwrap_or(usize::MAX);
    let allowed = MAX_UNZIP_BYTES.saturating_sub(inflated_before);
    let (bytes, taken) = with_archive(call, "read", |archive| {
        let index = archive
            .index_for_name(name)
            .ok_or_else(|| missing(archive, name))?;
        let entry = archive
            .by_index_data(index)
            .map_err(|error| damaged("read", &error))?;
        if entry.encrypted() {
            return Err(Failure::type_error(format!(
                "kiln:zip read: `{name}` is encrypted, and kiln:zip reads no encrypted entry"
            )));
        }
        let method = entry.compression();
        if !matches!(
            method,
            CompressionMethod::Stored | CompressionMethod::Deflated
        ) {
            return Err(Failure::type_error(format!(
                "kiln:zip read: `{name}` is compressed with {method}; kiln:zip reads only stored and deflated entries"
            )));
        }
        let mut file = archive
            .by_index(index)
            .map_err(|error| damaged("read", &error))?;
        Ok(inflate(&mut file, name, allowed))
    })?;
    *inflated = inflated.saturating_add(u64::try_from(taken).unwrap_or(u64::MAX));
    let bytes = bytes?;
    if text {
        return Ok(Answer::Text(match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(error) => String::from_utf8_lossy(error.as_bytes()).into_owned(),
        }));
    }
    Ok(Answer::Bytes(bytes))
}

/// What one `read` took out of its entry: the bytes (or the error that ended
/// it), and how many bytes were inflated either way, for the run's count.
type Taken = (Result<Vec<u8>, Failure>, usize);

/// The entry's bytes, read a chunk at a time and refused the moment they
/// would pass `allowed`.
fn inflate(file: &mut impl std::io::Read, name: &str, allowed: usize) -> Taken {
    let mut bytes = Vec::new();
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
                let error = Failure::syntax(format!("kiln:zip read: `{name}` is damaged: {error}"));
                return (Err(error), taken);
            }
        };
        if bytes.len() + count > allowed {
            let error = Failure::range(format!(
                "kiln:zip read: inflating `{name}` would pass the {MAX_UNZIP_BYTES} bytes a run may inflate"
            ));
            // The run has used its allowance: what is left of it is no use
            // to anything but an empty entry.
            return (Err(error), allowed);
        }
        bytes.extend_from_slice(&chunk[..count]);
    }
}

/// The error for `name`, which `archive` lacks, with a few names it has.
fn missing(archive: &ZipArchive<Cursor<&[u8]>>, name: &str) -> Failure {
    let count = archive.len();
    if count == 0 {
        return Failure::error(format!(
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
    Failure::error(format!(
        "kiln:zip read: the archive has no entry `{name}`; it has {}{more}",
        shown.join(", ")
    ))
}

/// `write(entries, {level = 6})`: a deflate archive of `entries`, an object
/// `{name: data}` or an array `[{name, data}]`, each data a string (written
/// as UTF-8) or bytes; a name ending in `/` is a directory.
pub(super) fn write(call: &LibraryCall) -> Result<Answer, Failure> {
    let entries = entries(call)?;
    let options = call.options(1);
    let level = match options.get("level") {
        None | Some(Value::Null) => 6,
        Some(Value::Number(number)) => number.as_i64().filter(|level| (0..=9).contains(level)).ok_or_else(|| {
            Failure::range(format!(
                "kiln:zip write: `level` is a whole number from 0 (stored) to 9 (smallest); got {number}"
            ))
        })?,
        Some(other) => {
            return Err(Failure::type_error(format!(
                "kiln:zip write: `level` is a number from 0 to 9; got {other}"
            )));
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
    let failed = |error: ZipError| Failure::error(format!("kiln:zip write: {error}"));
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
    Ok(Answer::Bytes(writer.finish().map_err(failed)?.into_inner()))
}

/// The entries `write` was given (the sandbox has read each data as text or
/// bytes, within the call's bytes bound), each name checked.
fn entries(call: &LibraryCall) -> Result<Vec<(String, Vec<u8>)>, Failure> {
    let Some(Arg::Entries(given)) = call.args.first() else {
        return Err(Failure::type_error(
            "kiln:zip write takes an object {name: data} or an array [{name, data}], each data a string or bytes",
        ));
    };
    let mut seen = HashSet::new();
    let mut entries = Vec::with_capacity(given.len());
    for (name, data) in given {
        check_name(name)?;
        if !seen.insert(name.as_str()) {
            return Err(Failure::type_error(format!(
                "kiln:zip write: the entry `{name}` is given twice"
            )));
        }
        let bytes = match data {
            Arg::Text(text) if name.ends_with('/') && text.is_empty() => Vec::new(),
            Arg::Absent | Arg::Json(Value::Null) if name.ends_with('/') => Vec::new(),
            _ if name.ends_with('/') => {
                return Err(Failure::type_error(format!(
                    "kiln:zip write: `{name}` is a directory (its name ends in `/`) and holds no data"
                )));
            }
            Arg::Text(text) => text.clone().into_bytes(),
            Arg::Bytes(bytes) => bytes.clone(),
            _ => {
                return Err(Failure::type_error(format!(
                    "kiln:zip write: the data of `{name}` must be a string or bytes (a Uint8Array, another typed array, a DataView or an ArrayBuffer)"
                )));
            }
        };
        entries.push((name.clone(), bytes));
    }
    Ok(entries)
}

/// Refuses a name that would land outside the folder an archive is
/// extracted into, or that names nothing.
fn check_name(name: &str) -> Result<(), Failure> {
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
        Some(why) => Err(Failure::type_error(format!(
            "kiln:zip write: the entry name `{name}` {why}; names are relative paths such as `docs/a.txt`"
        ))),
    }
}

/// Opens the archive the sandbox copied out of the program's bytes and hands
/// it to `work`.
fn with_archive<R>(
    call: &LibraryCall,
    what: &str,
    work: impl FnOnce(&mut ZipArchive<Cursor<&[u8]>>) -> Result<R, Failure>,
) -> Result<R, Failure> {
    let Some(Arg::Bytes(bytes)) = call.args.first() else {
        return Err(Failure::type_error(format!(
            "kiln:zip {what} takes the archive as bytes (a Uint8Array, another typed array, a DataView or an ArrayBuffer)"
        )));
    };
    let mut archive = ZipArchive::new(Cursor::new(bytes.as_slice())).map_err(|error| {
        Failure::syntax(format!(
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

fn damaged(what: &str, error: &ZipError) -> Failure {
    Failure::syntax(format!("kiln:zip {what}: the archive is damaged: {error}"))
}

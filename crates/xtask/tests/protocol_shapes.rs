//! Each protocol's version moves when its shape does. A protocol file
//! (`crates/types/src/{protocol,runtime,model,widget}.rs`) records, on its version
//! constant, the hash of its message types and the version it was taken at
//! (`/// Shape: 0x… at version N`). The hash is of the file's types as text
//! (structs and enums with their `serde` attributes and fields; comments,
//! derives, functions and tests left out): when it no longer matches, the
//! shape changed, and the test fails until the version has moved and the new
//! hash is recorded beside it. Tried on fixtures first.

use std::path::{Path, PathBuf};

/// A protocol file and the name of its version constant.
const PROTOCOLS: [(&str, &str); 4] = [
    ("crates/types/src/protocol.rs", "PROTOCOL_VERSION"),
    ("crates/types/src/runtime.rs", "RUNTIME_PROTOCOL_VERSION"),
    ("crates/types/src/model.rs", "MODEL_PROTOCOL_VERSION"),
    ("crates/types/src/widget.rs", "WIDGET_PROTOCOL_VERSION"),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// FNV-1a, 64 bits: stable everywhere, no dependency.
fn fnv1a(text: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The type items of a Rust file, as one normalized text: each `struct` or
/// `enum` with the attributes above it (but `derive`s), comments dropped,
/// white space folded; nothing after the first `#[cfg(test)]`.
fn shape(source: &str) -> String {
    let mut lines: Vec<&str> = Vec::new();
    for line in source.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("#[cfg(test)]") {
            break;
        }
        if trimmed.starts_with("//") || trimmed.is_empty() {
            continue;
        }
        lines.push(trimmed);
    }
    let is_type = |line: &str| {
        let line = line
            .strip_prefix("pub(crate) ")
            .or_else(|| line.strip_prefix("pub "))
            .unwrap_or(line);
        line.starts_with("struct ") || line.starts_with("enum ")
    };
    let mut out = Vec::new();
    let mut at = 0;
    while at < lines.len() {
        if !is_type(lines[at]) {
            at += 1;
            continue;
        }
        // The attributes right above it, but derives (they change no wire shape).
        let mut first = at;
        while first > 0 && lines[first - 1].starts_with("#[") {
            first -= 1;
        }
        for attribute in &lines[first..at] {
            if !attribute.starts_with("#[derive(") {
                out.push((*attribute).to_owned());
            }
        }
        // The item to its end: braces balanced, or a `;` for a tuple or unit struct.
        let mut depth = 0_i32;
        loop {
            let line = lines[at];
            out.push(line.to_owned());
            depth += line.matches('{').count() as i32 - line.matches('}').count() as i32;
            at += 1;
            let opened = out.iter().any(|line| line.contains('{'));
            if (opened && depth <= 0) || (!opened && line.ends_with(';')) || at >= lines.len() {
                break;
            }
        }
    }
    out.join("\n")
}

/// The `Shape: 0x… at version N` record on the version constant, and the
/// constant's value.
fn recorded(source: &str, constant: &str) -> Result<(u64, u32, u32), String> {
    let lines: Vec<&str> = source.lines().collect();
    let at = lines
        .iter()
        .position(|line| line.contains(&format!("pub const {constant}: u32 = ")))
        .ok_or_else(|| format!("no `pub const {constant}: u32 = …;`"))?;
    let version: u32 = lines[at]
        .split('=')
        .nth(1)
        .and_then(|value| value.trim().trim_end_matches(';').trim().parse().ok())
        .ok_or_else(|| format!("`{constant}` is not a number"))?;
    let mut above = at;
    while above > 0 && lines[above - 1].trim_start().starts_with("///") {
        above -= 1;
        if let Some(record) = lines[above].trim_start().strip_prefix("/// Shape: ") {
            let mut words = record.split_whitespace();
            let hash = words
                .next()
                .and_then(|hash| hash.strip_prefix("0x"))
                .and_then(|hash| u64::from_str_radix(hash, 16).ok());
            let at_version = match (words.next(), words.next(), words.next()) {
                (Some("at"), Some("version"), Some(number)) => {
                    number.trim_end_matches('.').parse::<u32>().ok()
                }
                _ => None,
            };
            return match (hash, at_version) {
                (Some(hash), Some(at_version)) => Ok((hash, at_version, version)),
                _ => Err(format!(
                    "`/// Shape: {record}` is not `/// Shape: 0x<16 hex digits> at version N`"
                )),
            };
        }
    }
    Err(format!(
        "`{constant}` has no `/// Shape: 0x… at version N` line in its doc comment"
    ))
}

/// What is wrong with one protocol file, if anything.
fn check(path: &str, source: &str, constant: &str) -> Option<String> {
    let now = fnv1a(&shape(source));
    let (hash, at_version, version) = match recorded(source, constant) {
        Ok(record) => record,
        Err(problem) => {
            return Some(format!(
                "{path}: {problem}\n    hint: add `/// Shape: 0x{now:016x} at version N` (N the current version) above `{constant}`"
            ));
        }
    };
    if hash == now {
        return (at_version != version).then(|| {
            format!(
                "{path}: `{constant}` is {version} but its shape was recorded at version {at_version}, and the shape did not change\n    hint: a version moves with the shape: set it back to {at_version}, or record `at version {version}`"
            )
        });
    }
    Some(if version == at_version {
        format!(
            "{path}: the messages' shape changed (0x{hash:016x} → 0x{now:016x}) but `{constant}` is still {version}\n    hint: move `{constant}` past {version} and record `/// Shape: 0x{now:016x} at version <the new version>`"
        )
    } else {
        format!(
            "{path}: `{constant}` moved to {version}; record the new shape\n    hint: `/// Shape: 0x{now:016x} at version {version}`"
        )
    })
}

#[test]
fn each_protocols_version_moves_with_its_shape() {
    let mut problems = Vec::new();
    for (path, constant) in PROTOCOLS {
        let file = root().join(path);
        let source = std::fs::read_to_string(&file)
            .unwrap_or_else(|error| panic!("{}: {error}", file.display()));
        problems.extend(check(path, &source, constant));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

const FIXTURE: &str = r#"//! A protocol.
use serde::Serialize;

/// Bumped with the shape.
/// Shape: 0xHASH at version 7
pub const V: u32 = 7;

/// A message.
#[derive(Debug, Serialize)]
#[serde(tag = "type")]
pub enum Msg {
    /// Doc comments do not count.
    Run { id: u64 },
    Stop,
}

pub struct Id(pub u64);

impl Msg {
    pub fn id(&self) -> u64 { 0 }
}

#[cfg(test)]
mod tests {
    struct Ignored { x: u8 }
}
"#;

fn fixture(hash: u64, version: u32, body: &str) -> String {
    FIXTURE
        .replace("0xHASH", &format!("0x{hash:016x}"))
        .replace("at version 7", &format!("at version {version}"))
        .replace("Run { id: u64 }", body)
}

#[test]
fn the_shape_is_the_types_and_their_serde_attributes_only() {
    let shape = shape(FIXTURE);
    assert_eq!(
        shape,
        "#[serde(tag = \"type\")]\npub enum Msg {\nRun { id: u64 },\nStop,\n}\npub struct Id(pub u64);"
    );
    // Comments, derives, functions and tests change nothing.
    let reworded = FIXTURE
        .replace("/// Doc comments do not count.", "/// Other words.")
        .replace("#[derive(Debug, Serialize)]", "#[derive(Serialize)]")
        .replace("pub fn id(&self) -> u64 { 0 }", "")
        .replace("x: u8", "y: u16");
    assert_eq!(self::shape(&reworded), shape);
}

#[test]
fn a_changed_shape_needs_a_new_version_and_its_record() {
    let now = fnv1a(&shape(&fixture(0, 7, "Run { id: u64 }")));
    // Recorded and unchanged: nothing to say.
    assert_eq!(
        check("p.rs", &fixture(now, 7, "Run { id: u64 }"), "V"),
        None
    );
    // A field added, the version not moved.
    let changed = fixture(now, 7, "Run { id: u64, code: String }");
    let said = check("p.rs", &changed, "V").unwrap_or_default();
    assert!(
        said.contains("the messages' shape changed") && said.contains("is still 7"),
        "{said}"
    );
    // The version moved but the record was not updated.
    let moved = changed.replace("pub const V: u32 = 7;", "pub const V: u32 = 8;");
    let said = check("p.rs", &moved, "V").unwrap_or_default();
    assert!(said.contains("moved to 8; record the new shape"), "{said}");
    // Both done: accepted.
    let new = fnv1a(&shape(&moved));
    let recorded = moved.replace(
        &format!("0x{now:016x} at version 7"),
        &format!("0x{new:016x} at version 8"),
    );
    assert_eq!(check("p.rs", &recorded, "V"), None);
    // A version moved with no change of shape is refused too.
    let bumped = fixture(now, 7, "Run { id: u64 }")
        .replace("pub const V: u32 = 7;", "pub const V: u32 = 9;");
    let said = check("p.rs", &bumped, "V").unwrap_or_default();
    assert!(said.contains("the shape did not change"), "{said}");
    // No record at all.
    let bare = fixture(now, 7, "Run { id: u64 }")
        .replace(&format!("/// Shape: 0x{now:016x} at version 7\n"), "");
    let said = check("p.rs", &bare, "V").unwrap_or_default();
    assert!(said.contains("has no `/// Shape:"), "{said}");
}

/// The JavaScript files that write an envelope by hand (the workers' bootstraps reporting a
/// failed load, the bench's and specs' hand-made messages).
fn scripts(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() && name != "node_modules" {
            scripts(&path, found);
        } else if path
            .extension()
            .is_some_and(|extension| extension == "js" || extension == "mjs")
        {
            found.push(path);
        }
    }
}

/// Every `v: N` a script writes is some protocol's current version: a bumped protocol
/// whose hand-written messages kept the old number is refused by its peer, and a
/// bootstrap's failure report would read as a version mismatch instead of the failure.
#[test]
fn hand_written_envelopes_carry_their_protocols_current_version() {
    let current: Vec<u32> = PROTOCOLS
        .iter()
        .map(|(path, constant)| {
            let source = std::fs::read_to_string(root().join(path)).unwrap();
            recorded(&source, constant).unwrap().2
        })
        .collect();
    let mut found = Vec::new();
    for dir in ["workers", "playwright"] {
        scripts(&root().join(dir), &mut found);
    }
    let mut problems = Vec::new();
    for path in found {
        let source = std::fs::read_to_string(&path).unwrap();
        for (at, _) in source.match_indices("{ v: ") {
            let number: String = source[at + 5..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if let Ok(version) = number.parse::<u32>()
                && !current.contains(&version)
            {
                problems.push(format!(
                    "{}: writes `v: {version}`, which is no protocol's current version ({current:?})",
                    path.display()
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

//! A call into the guest's library modules that run outside the engine
//! (`kiln-modules`: `kiln:html`, `kiln:markdown`, `kiln:diff`, `kiln:zip`), and
//! its reply.
//!
//! The sandbox reads a program's arguments into [`Arg`]s (text coerced and
//! bounded, bytes copied out of their buffer, options as JSON) and hands the
//! [`LibraryCall`] to the library: natively a function call, in the browser a
//! second wasm instance the sandbox worker loads on a program's first such
//! import. Across that boundary both travel as one byte frame
//! ([`LibraryCall::encode`], [`LibraryReply::encode`]): text and bytes raw,
//! never escaped, so a 5 MB page crosses as a copy.

use serde_json::{Map, Value};

/// One argument of a library call, as the sandbox read it.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    /// `undefined`, or an argument the program left out.
    Absent,
    Text(String),
    Bytes(Vec<u8>),
    /// An options object, or any other plain value.
    Json(Value),
    /// Named data, in the program's order (`kiln:zip`'s entries): each a
    /// [`Arg::Text`], [`Arg::Bytes`] or [`Arg::Absent`].
    Entries(Vec<(String, Arg)>),
}

/// What a library export answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Text(String),
    Bytes(Vec<u8>),
    Json(Value),
}

/// The JavaScript error a failed call throws in the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    Type,
    Range,
    Syntax,
    Error,
}

/// A call refused or failed, with the sentence the program's error carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
}

impl Failure {
    pub fn type_error(message: impl Into<String>) -> Self {
        Self {
            kind: FailureKind::Type,
            message: message.into(),
        }
    }

    pub fn range(message: impl Into<String>) -> Self {
        Self {
            kind: FailureKind::Range,
            message: message.into(),
        }
    }

    pub fn syntax(message: impl Into<String>) -> Self {
        Self {
            kind: FailureKind::Syntax,
            message: message.into(),
        }
    }

    pub fn error(message: impl Into<String>) -> Self {
        Self {
            kind: FailureKind::Error,
            message: message.into(),
        }
    }
}

/// One call of a module's export.
#[derive(Debug, Clone, PartialEq)]
pub struct LibraryCall {
    /// `kiln:zip`.
    pub specifier: String,
    /// `read`.
    pub export: String,
    pub args: Vec<Arg>,
    /// Bytes the run has taken out of archives so far (`kiln:zip`'s bound
    /// is a run's, and the library keeps no state between calls).
    pub inflated: u64,
}

/// The answer to a [`LibraryCall`].
#[derive(Debug, Clone, PartialEq)]
pub struct LibraryReply {
    pub answer: Result<Answer, Failure>,
    /// The run's inflated bytes after the call, failed or not.
    pub inflated: u64,
}

impl LibraryCall {
    /// The options object at `index` (`{}` when absent or null; the sandbox
    /// has already refused anything but an object).
    pub fn options(&self, index: usize) -> Map<String, Value> {
        match self.args.get(index) {
            Some(Arg::Json(Value::Object(map))) => map.clone(),
            _ => Map::new(),
        }
    }

    /// The text at `index` (empty when absent: the sandbox coerces every text
    /// argument, `undefined` to `"undefined"` as JavaScript does).
    pub fn text(&self, index: usize) -> &str {
        match self.args.get(index) {
            Some(Arg::Text(text)) => text,
            _ => "",
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Writer::default();
        out.text(&self.specifier);
        out.text(&self.export);
        out.number(self.inflated);
        out.count(self.args.len());
        for arg in &self.args {
            out.arg(arg);
        }
        out.0
    }

    pub fn decode(frame: &[u8]) -> Result<Self, String> {
        let mut reader = Reader { frame, at: 0 };
        let specifier = reader.text()?;
        let export = reader.text()?;
        let inflated = reader.number()?;
        let count = reader.count()?;
        let mut args = Vec::with_capacity(count.min(16));
        for _ in 0..count {
            args.push(reader.arg(0)?);
        }
        reader.end()?;
        Ok(Self {
            specifier,
            export,
            args,
            inflated,
        })
    }
}

impl LibraryReply {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Writer::default();
        out.number(self.inflated);
        match &self.answer {
            Ok(Answer::Text(text)) => {
                out.tag(1);
                out.text(text);
            }
            Ok(Answer::Bytes(bytes)) => {
                out.tag(2);
                out.bytes(bytes);
            }
            Ok(Answer::Json(value)) => {
                out.tag(3);
                out.text(&value.to_string());
            }
            Err(failure) => {
                out.tag(4);
                out.tag(match failure.kind {
                    FailureKind::Type => 0,
                    FailureKind::Range => 1,
                    FailureKind::Syntax => 2,
                    FailureKind::Error => 3,
                });
                out.text(&failure.message);
            }
        }
        out.0
    }

    pub fn decode(frame: &[u8]) -> Result<Self, String> {
        let mut reader = Reader { frame, at: 0 };
        let inflated = reader.number()?;
        let answer = match reader.tag()? {
            1 => Ok(Answer::Text(reader.text()?)),
            2 => Ok(Answer::Bytes(reader.bytes()?.to_vec())),
            3 => Ok(Answer::Json(reader.json()?)),
            4 => {
                let kind = match reader.tag()? {
                    0 => FailureKind::Type,
                    1 => FailureKind::Range,
                    2 => FailureKind::Syntax,
                    3 => FailureKind::Error,
                    other => return Err(format!("a library reply names error kind {other}")),
                };
                Err(Failure {
                    kind,
                    message: reader.text()?,
                })
            }
            other => return Err(format!("a library reply has answer tag {other}")),
        };
        reader.end()?;
        Ok(Self { answer, inflated })
    }
}

/// Writes a frame: tags as one byte, lengths as four little-endian bytes,
/// numbers as eight, text as its UTF-8 and JSON as its text.
#[derive(Default)]
struct Writer(Vec<u8>);

impl Writer {
    fn tag(&mut self, tag: u8) {
        self.0.push(tag);
    }

    fn count(&mut self, count: usize) {
        // Every length is bounded far below 4 GiB by the sandbox's limits.
        let count = u32::try_from(count).unwrap_or(u32::MAX);
        self.0.extend_from_slice(&count.to_le_bytes());
    }

    fn number(&mut self, number: u64) {
        self.0.extend_from_slice(&number.to_le_bytes());
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.count(bytes.len());
        self.0.extend_from_slice(bytes);
    }

    fn text(&mut self, text: &str) {
        self.bytes(text.as_bytes());
    }

    fn arg(&mut self, arg: &Arg) {
        match arg {
            Arg::Absent => self.tag(0),
            Arg::Text(text) => {
                self.tag(1);
                self.text(text);
            }
            Arg::Bytes(bytes) => {
                self.tag(2);
                self.bytes(bytes);
            }
            Arg::Json(value) => {
                self.tag(3);
                self.text(&value.to_string());
            }
            Arg::Entries(entries) => {
                self.tag(4);
                self.count(entries.len());
                for (name, data) in entries {
                    self.text(name);
                    self.arg(data);
                }
            }
        }
    }
}

/// Reads a frame [`Writer`] wrote; a short or malformed frame is an error
/// that says where.
struct Reader<'a> {
    frame: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, length: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(length)
            .filter(|end| *end <= self.frame.len())
            .ok_or_else(|| {
                format!(
                    "a library frame of {} bytes ends before the {length} bytes at byte {}",
                    self.frame.len(),
                    self.at
                )
            })?;
        let taken = &self.frame[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn tag(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn count(&mut self) -> Result<usize, String> {
        let bytes: [u8; 4] = self.take(4)?.try_into().map_err(|_| "a short count")?;
        usize::try_from(u32::from_le_bytes(bytes)).map_err(|error| error.to_string())
    }

    fn number(&mut self) -> Result<u64, String> {
        let bytes: [u8; 8] = self.take(8)?.try_into().map_err(|_| "a short number")?;
        Ok(u64::from_le_bytes(bytes))
    }

    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let length = self.count()?;
        self.take(length)
    }

    fn text(&mut self) -> Result<String, String> {
        let at = self.at;
        String::from_utf8(self.bytes()?.to_vec())
            .map_err(|error| format!("a library frame's text at byte {at} is not UTF-8: {error}"))
    }

    fn json(&mut self) -> Result<Value, String> {
        let at = self.at;
        serde_json::from_slice(self.bytes()?)
            .map_err(|error| format!("a library frame's JSON at byte {at} does not parse: {error}"))
    }

    /// An argument; entries hold data, never entries of their own.
    fn arg(&mut self, depth: usize) -> Result<Arg, String> {
        Ok(match self.tag()? {
            0 => Arg::Absent,
            1 => Arg::Text(self.text()?),
            2 => Arg::Bytes(self.bytes()?.to_vec()),
            3 => Arg::Json(self.json()?),
            4 if depth == 0 => {
                let count = self.count()?;
                let mut entries = Vec::with_capacity(count.min(1024));
                for _ in 0..count {
                    let name = self.text()?;
                    entries.push((name, self.arg(depth + 1)?));
                }
                Arg::Entries(entries)
            }
            4 => return Err("a library frame nests entries inside entries".into()),
            other => return Err(format!("a library frame has argument tag {other}")),
        })
    }

    fn end(&self) -> Result<(), String> {
        if self.at == self.frame.len() {
            Ok(())
        } else {
            Err(format!(
                "a library frame has {} bytes after its end",
                self.frame.len() - self.at
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_call_and_its_reply_cross_as_frames_unchanged() {
        let call = LibraryCall {
            specifier: "kiln:zip".into(),
            export: "write".into(),
            args: vec![
                Arg::Entries(vec![
                    ("a.txt".into(), Arg::Text("héllo \"quoted\"\n".into())),
                    ("b.bin".into(), Arg::Bytes(vec![0, 255, 7])),
                    ("dir/".into(), Arg::Absent),
                ]),
                Arg::Json(json!({"level": 9})),
                Arg::Absent,
            ],
            inflated: 1 << 40,
        };
        assert_eq!(LibraryCall::decode(&call.encode()).unwrap(), call);
        for answer in [
            Ok(Answer::Text("# Title".into())),
            Ok(Answer::Bytes(vec![1, 2, 3])),
            Ok(Answer::Json(
                json!([{"tag": "a", "attributes": {"href": "/"}}]),
            )),
            Err(Failure::range("kiln:zip read: too big")),
        ] {
            let reply = LibraryReply {
                answer,
                inflated: 42,
            };
            assert_eq!(LibraryReply::decode(&reply.encode()).unwrap(), reply);
        }
    }

    #[test]
    fn a_broken_frame_is_an_error_that_says_where() {
        let frame = LibraryCall {
            specifier: "kiln:html".into(),
            export: "select".into(),
            args: vec![Arg::Text("<p>hi</p>".into())],
            inflated: 0,
        }
        .encode();
        let cut = LibraryCall::decode(&frame[..frame.len() - 3]).unwrap_err();
        assert!(cut.contains("ends before"), "{cut}");
        let mut longer = frame.clone();
        longer.push(0);
        let extra = LibraryCall::decode(&longer).unwrap_err();
        assert!(extra.contains("1 bytes after its end"), "{extra}");
        assert!(LibraryReply::decode(&[]).is_err());
        assert!(
            LibraryReply::decode(&[0; 8])
                .unwrap_err()
                .contains("ends before")
        );
        let mut nested = Writer::default();
        nested.text("kiln:zip");
        nested.text("write");
        nested.number(0);
        nested.count(1);
        nested.tag(4);
        nested.count(1);
        nested.text("a");
        nested.tag(4);
        nested.count(0);
        let refused = LibraryCall::decode(&nested.0).unwrap_err();
        assert!(refused.contains("nests entries"), "{refused}");
    }
}

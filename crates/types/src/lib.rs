//! Data shared by every Kiln crate and carried across the worker boundary.
//!
//! Nothing here does I/O or knows an engine: these are plain values with serde
//! derives, so the page, the workers and the CLI agree on them by construction.

pub mod cancel;
pub mod chat;
pub mod permission;
pub mod protocol;
pub mod records;
pub mod redacted;
pub mod run;
pub mod runtime;
pub mod tool_result;
pub mod words;

/// How bytes cross every JSON boundary (guest ⇄ host, worker ⇄ page, the
/// result): a `Uint8Array` travels as an object with this one key and its
/// contents in standard base64 with padding, `{"$bytes": "AQID"}`, and becomes
/// a `Uint8Array` again on the other side. An object of exactly this one
/// string-valued key is read as bytes wherever it arrives.
pub const BYTES_KEY: &str = "$bytes";

pub use redacted::Redacted;
pub use run::{
    ConsoleLevel, ConsoleLine, RunError, RunErrorKind, RunLimits, RunOutcome, RunReport, RunResult,
};

//! Data shared by every Kiln crate and carried across the worker boundary.
//!
//! Nothing here does I/O or knows an engine: these are plain values with serde
//! derives, so the page, the workers and the CLI agree on them by construction.

pub mod protocol;
pub mod run;
pub mod tool_result;

pub use run::{
    ConsoleLevel, ConsoleLine, RunError, RunErrorKind, RunLimits, RunOutcome, RunReport,
};

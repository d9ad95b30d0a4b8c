//! The host's side of Kiln's sandbox: what a page (or, later, the runtime
//! worker) links to run programs in sandbox workers.
//!
//! - [`SandboxPool`] starts sandbox workers, runs one program per worker at a
//!   time, sends every tool call up the caller's ladder
//!   (`kiln_capabilities::Dispatcher`), and ends a run
//!   that passes its wall or JS CPU budget by terminating its worker.
//! - [`RunResult::into_tool_result`] turns a run into the `tool-result/v1`
//!   object a model reads and a program parses.
//!
//! It speaks only the protocol of `kiln_types::protocol`; it knows nothing of
//! Boa or of what a tool does.

mod pool;
mod time;
mod tools;

pub use pool::{RunResult, SandboxPool};
pub use time::{now_ms, sleep_ms};

use kiln_types::tool_result::{ToolResult, run_id_from};

impl RunResult {
    /// The `tool-result/v1` object of this run, under a fresh keyless run id.
    #[must_use]
    pub fn into_tool_result(self) -> ToolResult {
        let mut bytes = [0_u8; 8];
        // Without crypto randomness the id is still unique on this page.
        if getrandom::fill(&mut bytes).is_err() {
            bytes = now_ms().to_bits().to_le_bytes();
        }
        self.report
            .into_summary(run_id_from(bytes), self.warnings, self.catalog_digest, true)
            .into_result()
    }
}

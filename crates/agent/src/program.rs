//! One program run, for every entrance: assemble the ladder, run the program
//! in the entrance's sandbox, close the MCP sessions, settle the history
//! record, and answer the `tool-result/v1` object.

use kiln_store::StoreError;
use kiln_types::RunResult;
use kiln_types::cancel::AbortSignal;
use kiln_types::tool_result::{ToolResult, run_id_from};

use crate::SandboxRunner;
use crate::ladder::{Environment, assemble};
use crate::request::{RequestError, RunRequest};

/// A run's id and whether a call key named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunId {
    /// `codemode:` and 16 hex digits.
    pub id: String,
    /// No call key: a lost reply cannot be recovered (the `keyless` warning).
    pub keyless: bool,
}

impl RunId {
    /// The id of `request`'s run: derived from its agent and call key when it
    /// has one (a retry with the same key names the same run), else random.
    #[must_use]
    pub fn for_request(request: &RunRequest, random: &dyn Fn() -> [u8; 8]) -> Self {
        match &request.key {
            Some(key) => Self::keyed(&request.agent, key),
            None => Self {
                id: run_id_from(random()),
                keyless: true,
            },
        }
    }

    /// The id of `agent`'s run called with `key`: the same everywhere, every time.
    #[must_use]
    pub fn keyed(agent: &str, key: &str) -> Self {
        // FNV-1a over agent, a separator and key: stable everywhere.
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in agent.bytes().chain([0]).chain(key.bytes()) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        Self {
            id: run_id_from(hash.to_be_bytes()),
            keyless: false,
        }
    }

    /// The `tool-result/v1` object of `run` under this id.
    #[must_use]
    pub fn result_of(&self, run: RunResult) -> ToolResult {
        run.report
            .into_summary(
                self.id.clone(),
                run.warnings,
                run.catalog_digest,
                self.keyless,
            )
            .into_result()
    }
}

/// What one program run gave.
#[derive(Debug)]
pub struct ProgramRun {
    /// The `tool-result/v1` object a model reads and a page receives.
    pub result: ToolResult,
    /// The sandbox's own account (for `--report` and benchmarks), with the
    /// ladder's warnings ahead of admission's.
    pub run: RunResult,
    /// The run's job in the history, when it has one.
    pub job_id: Option<String>,
    /// Why the job could not be settled, when it could not (the result
    /// stands either way).
    pub record_error: Option<StoreError>,
}

/// Runs `request` in `environment` on `runner`; `cancel` ends it at once
/// (status `cancelled`, recorded so).
///
/// # Errors
///
/// Only a request the gate refuses; everything the program does is in the
/// result.
pub async fn run_program(
    request: RunRequest,
    environment: &Environment,
    runner: &dyn SandboxRunner,
    cancel: AbortSignal,
) -> Result<ProgramRun, RequestError> {
    let run_id = RunId::for_request(&request, environment.random.as_ref());
    let ladder = assemble(&request, environment).await?;
    let dispatcher = ladder.dispatcher.clone();
    let mut run = runner
        .run(
            request.code,
            request.limits.get(),
            ladder.dispatcher,
            cancel,
        )
        .await;
    // The ladder's warnings (sources that did not answer, entries the
    // registry refused) come ahead of admission's, once.
    let mut warnings = dispatcher.warnings().to_vec();
    warnings.append(&mut run.warnings);
    run.warnings = warnings;
    for server in ladder.servers {
        // A server that is already gone is fine.
        let _ = server.client.close().await;
    }
    let result = run_id.result_of(run.clone());
    let (job_id, record_error) = match &ladder.record {
        Some(record) => (
            Some(record.job_id().to_owned()),
            record.finish(&result).await.err(),
        ),
        None => (None, None),
    };
    Ok(ProgramRun {
        result,
        run,
        job_id,
        record_error,
    })
}

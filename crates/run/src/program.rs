//! One program run, for every entrance: assemble the ladder, run the program
//! in the entrance's sandbox, close the MCP sessions, settle the history
//! record, and answer the `tool-result/v1` object.

use kiln_store::StoreError;
use kiln_types::RunResult;
use kiln_types::cancel::AbortSignal;
use kiln_types::tool_result::ToolResult;

use crate::SandboxRunner;
use crate::environment::Environment;
use crate::ladder::assemble;
use crate::record::RunId;
use crate::request::{RequestError, RunRequest};

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
    if let Some(observer) = &environment.on_progress {
        dispatcher.run_state().on_progress(observer.clone());
    }
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

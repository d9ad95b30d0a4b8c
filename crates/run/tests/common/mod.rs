//! What the tests and benchmark examples of kiln-run, kiln-agent, kiln-nodes
//! and kiln-evals share (each includes this file by path): the real sandbox in this process as the
//! runner, every call up the run's ladder.

use std::rc::Rc;

use futures::future::LocalBoxFuture;
use futures::future::{Either, select};
use kiln_capabilities::{Dispatcher, HeldSignal};
use kiln_run::SandboxRunner;
use kiln_sandbox::catalog::Admission;
use kiln_sandbox::clock::PersonSignal;
use kiln_sandbox::tools::{ToolCall, ToolHost};
use kiln_types::cancel::AbortSignal;
use kiln_types::protocol::CallRequest;
use kiln_types::tool_result::ToolReply;
use kiln_types::{Progress, RunError, RunLimits, RunReport, RunResult};

/// The sandbox in this process, every call up the run's ladder.
pub struct InProcess;

struct Ladder(Rc<Dispatcher>);

impl ToolHost for Ladder {
    fn call(&self, call: ToolCall, person: PersonSignal) -> LocalBoxFuture<'static, ToolReply> {
        let held: HeldSignal = Rc::new(move |on| person.held(on));
        self.0.call(
            CallRequest {
                call_number: call.call_number,
                tool: call.tool,
                args: call.args,
            },
            held,
        )
    }

    fn progress(&self, progress: &Progress) {
        self.0.run_state().progress(progress);
    }
}

impl SandboxRunner for InProcess {
    fn run(
        &self,
        code: String,
        limits: RunLimits,
        tools: Rc<Dispatcher>,
        cancel: AbortSignal,
    ) -> LocalBoxFuture<'static, RunResult> {
        Box::pin(async move {
            let admission = Admission::admit(&tools.catalog(), "test")
                .unwrap_or_else(|refused| panic!("the ladder's catalog was refused: {refused}"));
            let warnings = admission.warnings.clone();
            let digest = admission.digest();
            let run = kiln_sandbox::run_with_tools(
                &code,
                &limits,
                Rc::new(admission),
                Rc::new(Ladder(tools)),
            );
            // Dropping the run's future ends it: this runner's way to cancel.
            let report = match select(Box::pin(run), cancel.aborted()).await {
                Either::Left((report, _)) => report,
                Either::Right(((), _)) => {
                    RunReport::stopped(RunError::cancelled("the test stopped the run"), 0.0)
                }
            };
            RunResult {
                report,
                warnings,
                catalog_digest: digest,
            }
        })
    }
}

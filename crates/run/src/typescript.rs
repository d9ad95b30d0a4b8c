//! Programs written in TypeScript. Models often write it; Boa reads only
//! JavaScript. A [`TypeScript`] runner runs a program as it is, and only
//! when the sandbox refused to parse it (so nothing of it ran) asks the
//! entrance's [`Stripper`] for the program with its types blanked, then runs
//! that. Plain JavaScript never pays for the stripper, which in the browser
//! is a wasm of its own loaded on first need; the stripper keeps every line
//! and column, so an error still points at the source the model wrote.

use std::rc::Rc;

use futures::future::LocalBoxFuture;
use kiln_capabilities::Dispatcher;
use kiln_types::cancel::AbortSignal;
use kiln_types::run::{RunError, RunErrorKind, RunOutcome};
use kiln_types::{RunLimits, RunResult};

use crate::SandboxRunner;

/// Blanks a program's TypeScript types (`kiln-ts`: natively a call, in the
/// browser a second wasm).
pub trait Stripper {
    /// `Ok(Some(javascript))` with every type replaced by white space;
    /// `Ok(None)` when `source` is not TypeScript either (then the engine's
    /// own syntax error stands); `Err(sentence)` for TypeScript that cannot
    /// run as JavaScript (an `enum`), the sentence with its hint, or for
    /// TypeScript whose syntax error lies past its first annotation (where the
    /// engine stopped), which replaces the engine's syntax error.
    fn strip(&self, source: String) -> LocalBoxFuture<'static, Result<Option<String>, String>>;
}

/// A runner that runs TypeScript programs too: `runner` with `stripper`
/// asked when a program does not parse.
pub struct TypeScript {
    pub runner: Rc<dyn SandboxRunner>,
    pub stripper: Rc<dyn Stripper>,
}

impl SandboxRunner for TypeScript {
    fn run(
        &self,
        code: String,
        limits: RunLimits,
        tools: Rc<Dispatcher>,
        cancel: AbortSignal,
    ) -> LocalBoxFuture<'static, RunResult> {
        let runner = self.runner.clone();
        let stripper = self.stripper.clone();
        Box::pin(async move {
            let first = runner
                .run(code.clone(), limits, tools.clone(), cancel.clone())
                .await;
            if !did_not_parse(&first) {
                return first;
            }
            match stripper.strip(code).await {
                Ok(Some(javascript)) => runner.run(javascript, limits, tools, cancel).await,
                Ok(None) => first,
                Err(sentence) => {
                    let mut refused = first;
                    refused.report.outcome =
                        RunOutcome::Failed(RunError::new(RunErrorKind::Syntax, sentence));
                    refused
                }
            }
        })
    }

    fn stripper(&self) -> Option<Rc<dyn Stripper>> {
        Some(self.stripper.clone())
    }
}

/// The sandbox refused the program before any of it ran.
fn did_not_parse(run: &RunResult) -> bool {
    matches!(
        &run.report.outcome,
        RunOutcome::Failed(RunError {
            kind: RunErrorKind::Syntax,
            ..
        })
    ) && run.report.calls.is_empty()
        && run.report.console.is_empty()
}

//! What the result panel says about a run report, as plain strings: pure, so it
//! is tested natively.

use kiln_types::tool_result::Budget;
use kiln_types::{RunErrorKind, RunOutcome, RunReport};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tone {
    Success,
    Failure,
}

/// The panel's text for one finished run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ResultView {
    pub tone: Tone,
    /// One plain sentence: what happened.
    pub status: String,
    /// The error message, when the run failed.
    pub detail: Option<String>,
    /// The returned value as pretty JSON, when the run completed.
    pub value: Option<String>,
    /// Console lines as `(level, text)`.
    pub console: Vec<(&'static str, String)>,
    /// Tool calls as `(tool, outcome, waited on a person, duration)`, in call order.
    pub calls: Vec<(String, &'static str, bool, String)>,
}

impl ResultView {
    pub(crate) fn from_report(report: &RunReport) -> Self {
        let mut console: Vec<(&'static str, String)> = report
            .console
            .iter()
            .map(|line| (line.level.method(), line.text.clone()))
            .collect();
        if report.console_dropped > 0 {
            console.push((
                "warn",
                format!(
                    "… {} more lines dropped (console budget spent)",
                    report.console_dropped
                ),
            ));
        }
        let duration = format_ms(report.duration_ms);
        let calls = report
            .calls
            .iter()
            .map(|call| {
                (
                    call.tool.clone(),
                    call.outcome.as_str(),
                    call.waited_on_person,
                    format!("{} ms", call.duration_ms),
                )
            })
            .collect();
        match &report.outcome {
            RunOutcome::Completed { value } => Self {
                tone: Tone::Success,
                status: format!("Completed in {duration}."),
                detail: None,
                value: Some(
                    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string()),
                ),
                console,
                calls,
            },
            RunOutcome::Failed(error) => {
                let status = match error.kind {
                    RunErrorKind::Syntax => "The program has a syntax error.".to_owned(),
                    RunErrorKind::Script => format!("The program threw an error after {duration}."),
                    RunErrorKind::Tool => {
                        format!("A tool call failed and the program did not catch it ({duration}).")
                    }
                    RunErrorKind::NeverSettled => {
                        "The program never finished: it awaits something that cannot happen."
                            .to_owned()
                    }
                    RunErrorKind::BudgetExhausted => {
                        const RESTARTED: &str = "The sandbox was restarted; you can run again.";
                        match error.budget {
                            Some(Budget::ToolCalls) => {
                                "Stopped: the program made more tool calls than its budget allows."
                                    .to_owned()
                            }
                            Some(Budget::JsCpu) => format!(
                                "Stopped after {duration}: the program ran JavaScript for longer than its CPU budget. {RESTARTED}"
                            ),
                            Some(Budget::Wall) | None => format!(
                                "Stopped after {duration}: the program ran past its wall-clock budget. {RESTARTED}"
                            ),
                            Some(Budget::PersonWait) => format!(
                                "Stopped after {duration}: the program waited on a person for longer than its budget."
                            ),
                            Some(Budget::Memory) => format!(
                                "Stopped: the program needed more memory than its budget allows. {RESTARTED}"
                            ),
                            Some(Budget::ReturnValue) => {
                                "Stopped: the returned value is larger than a run may return."
                                    .to_owned()
                            }
                            Some(Budget::Recursion | Budget::Stack) => {
                                "Stopped: the program recursed deeper than the sandbox allows."
                                    .to_owned()
                            }
                        }
                    }
                    RunErrorKind::Engine => "The sandbox failed to run the program.".to_owned(),
                    RunErrorKind::Cancelled => format!(
                        "Stopped after {duration}: you stopped the program. The sandbox was restarted; you can run again."
                    ),
                };
                Self {
                    tone: Tone::Failure,
                    status,
                    detail: Some(error.message.clone()),
                    value: None,
                    console,
                    calls,
                }
            }
        }
    }
}

fn format_ms(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.1} s", ms / 1000.0)
    } else {
        format!("{ms:.1} ms")
    }
}

#[cfg(test)]
mod tests {
    use kiln_types::{ConsoleLevel, ConsoleLine, RunError};

    use super::*;

    fn report(outcome: RunOutcome, duration_ms: f64) -> RunReport {
        RunReport {
            outcome,
            console: vec![ConsoleLine {
                level: ConsoleLevel::Log,
                text: "hi".into(),
            }],
            console_dropped: 2,
            duration_ms,
            person_wait_ms: 0.0,
            start_ms: 0.0,
            context_ms: 0.0,
            calls: Vec::new(),
            finished: false,
        }
    }

    #[test]
    fn panel_text_for_each_outcome() {
        let cases = [
            (
                report(
                    RunOutcome::Completed {
                        value: serde_json::json!({"a": 1}),
                    },
                    3.25,
                ),
                "Completed in 3.2 ms.",
                None,
                Some("{\n  \"a\": 1\n}"),
            ),
            (
                report(RunOutcome::Failed(RunError::wall_budget(5000)), 5003.0),
                "Stopped after 5.0 s: the program ran past its wall-clock budget. The sandbox was restarted; you can run again.",
                Some(
                    "budget_exhausted:wall: the program ran longer than its wall budget of 5000 ms and was stopped",
                ),
                None,
            ),
            (
                report(
                    RunOutcome::Failed(RunError::new(RunErrorKind::Script, "TypeError: x")),
                    1.0,
                ),
                "The program threw an error after 1.0 ms.",
                Some("TypeError: x"),
                None,
            ),
        ];
        for (report, status, detail, value) in cases {
            let view = ResultView::from_report(&report);
            assert_eq!(view.status, status);
            assert_eq!(view.detail.as_deref(), detail);
            assert_eq!(view.value.as_deref(), value);
            assert_eq!(
                view.console.len(),
                2,
                "the dropped-lines notice follows the kept lines"
            );
        }
    }
}

//! One program run: what is asked (limits) and what comes back (the report).

use serde::{Deserialize, Serialize};

use crate::tool_result::{Budget, CallSummary, RunFailure, RunStatus, RunSummary, Warning};

/// Limits of one run. Every default is the safe one; every value is clamped to
/// a documented ceiling ([`RunLimits::clamped`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunLimits {
    /// Wall-clock budget of the whole run, in milliseconds. In the browser the
    /// host terminates the sandbox worker when it passes; the CLI exits.
    /// Default and ceiling 30 minutes.
    pub wall_ms: u64,
    /// Guest JavaScript execution time, in milliseconds: time awaiting a tool,
    /// sleeping or waiting on a person does not count. Default 10 s, at most
    /// 30 minutes.
    pub js_cpu_ms: u64,
    /// Cumulative time the program was blocked with every in-flight call held
    /// on a person (never while it sleeps). Default 10 minutes, at most 30.
    pub person_wait_ms: u64,
    /// Most bytes the sandbox may hold on the heap during the run; more ends it
    /// `budget_exhausted:memory`. Default 256 MiB, from 16 MiB to 1 GiB.
    pub memory_bytes: u64,
    /// Most tool calls; the next one ends the run `budget_exhausted:tool_calls`.
    /// Default 200, at most 10,000.
    pub tool_calls: u32,
    /// Most bytes of the returned value as JSON; more ends the run
    /// `budget_exhausted:return_value`. Default 16 KiB, at most 1 MiB.
    pub return_bytes: usize,
    /// Most bytes of console text kept; later lines are dropped and counted.
    /// Default 64 KiB, at most 1 MiB.
    pub console_bytes: usize,
    /// Most `http_request` calls (the fetch capability), parallel ones
    /// counted alike. Default 20, at most 100.
    pub fetch_calls: u32,
    /// Most bytes of one response body kept; the rest is cut and the result
    /// says `truncated`. Default 1 MiB, at most 50 MiB.
    pub fetch_body_bytes: usize,
    /// Longest one request may take, in milliseconds. Default 15 s, at most 120 s.
    pub fetch_timeout_ms: u64,
}

impl RunLimits {
    /// The longest wall budget a caller may ask for (30 minutes), also the default.
    pub const MAX_WALL_MS: u64 = 30 * 60 * 1_000;
    pub const DEFAULT_WALL_MS: u64 = Self::MAX_WALL_MS;
    pub const DEFAULT_JS_CPU_MS: u64 = 10_000;
    pub const MAX_JS_CPU_MS: u64 = Self::MAX_WALL_MS;
    pub const DEFAULT_PERSON_WAIT_MS: u64 = 10 * 60 * 1_000;
    pub const MAX_PERSON_WAIT_MS: u64 = Self::MAX_WALL_MS;
    pub const DEFAULT_MEMORY_BYTES: u64 = 256 * 1024 * 1024;
    pub const MIN_MEMORY_BYTES: u64 = 16 * 1024 * 1024;
    pub const MAX_MEMORY_BYTES: u64 = 1024 * 1024 * 1024;
    pub const DEFAULT_TOOL_CALLS: u32 = 200;
    pub const MAX_TOOL_CALLS: u32 = 10_000;
    pub const DEFAULT_RETURN_BYTES: usize = 16 * 1024;
    pub const MAX_RETURN_BYTES: usize = 1024 * 1024;
    pub const DEFAULT_CONSOLE_BYTES: usize = 64 * 1024;
    pub const MAX_CONSOLE_BYTES: usize = 1024 * 1024;
    pub const DEFAULT_FETCH_CALLS: u32 = 20;
    pub const MAX_FETCH_CALLS: u32 = 100;
    pub const DEFAULT_FETCH_BODY_BYTES: usize = 1024 * 1024;
    pub const MAX_FETCH_BODY_BYTES: usize = 50 * 1024 * 1024;
    pub const DEFAULT_FETCH_TIMEOUT_MS: u64 = 15_000;
    pub const MAX_FETCH_TIMEOUT_MS: u64 = 120_000;

    /// The limits with every value clamped into its documented range.
    #[must_use]
    pub fn clamped(self) -> Self {
        Self {
            wall_ms: self.wall_ms.clamp(1, Self::MAX_WALL_MS),
            js_cpu_ms: self.js_cpu_ms.clamp(1, Self::MAX_JS_CPU_MS),
            person_wait_ms: self.person_wait_ms.min(Self::MAX_PERSON_WAIT_MS),
            memory_bytes: self
                .memory_bytes
                .clamp(Self::MIN_MEMORY_BYTES, Self::MAX_MEMORY_BYTES),
            tool_calls: self.tool_calls.min(Self::MAX_TOOL_CALLS),
            return_bytes: self.return_bytes.min(Self::MAX_RETURN_BYTES),
            console_bytes: self.console_bytes.min(Self::MAX_CONSOLE_BYTES),
            fetch_calls: self.fetch_calls.min(Self::MAX_FETCH_CALLS),
            fetch_body_bytes: self.fetch_body_bytes.min(Self::MAX_FETCH_BODY_BYTES),
            fetch_timeout_ms: self.fetch_timeout_ms.clamp(1, Self::MAX_FETCH_TIMEOUT_MS),
        }
    }
}

impl Default for RunLimits {
    fn default() -> Self {
        Self {
            wall_ms: Self::DEFAULT_WALL_MS,
            js_cpu_ms: Self::DEFAULT_JS_CPU_MS,
            person_wait_ms: Self::DEFAULT_PERSON_WAIT_MS,
            memory_bytes: Self::DEFAULT_MEMORY_BYTES,
            tool_calls: Self::DEFAULT_TOOL_CALLS,
            return_bytes: Self::DEFAULT_RETURN_BYTES,
            console_bytes: Self::DEFAULT_CONSOLE_BYTES,
            fetch_calls: Self::DEFAULT_FETCH_CALLS,
            fetch_body_bytes: Self::DEFAULT_FETCH_BODY_BYTES,
            fetch_timeout_ms: Self::DEFAULT_FETCH_TIMEOUT_MS,
        }
    }
}

/// What a sandbox run produced, as a runner hands it back: the sandbox's
/// report and what admission of the run's catalog found.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    pub report: RunReport,
    /// Admission's warnings (entries dropped); the ladder's own come first
    /// once the agent layer merges them.
    pub warnings: Vec<Warning>,
    /// `sha256:…` of the retained usable catalog entries; empty when the run
    /// ended before the sandbox could say.
    pub catalog_digest: String,
}

/// What a run produced: its outcome, its console lines and how long it took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    pub outcome: RunOutcome,
    pub console: Vec<ConsoleLine>,
    /// Console lines dropped because the console budget was spent.
    #[serde(default)]
    pub console_dropped: usize,
    /// Wall time of the run as the sandbox measured it, in milliseconds.
    pub duration_ms: f64,
    /// Time the program was blocked with every in-flight call held on a person.
    #[serde(default)]
    pub person_wait_ms: f64,
    /// Time from the run request reaching the sandbox to the program's first
    /// statement (parse included), in milliseconds; 0 when it never started.
    #[serde(default)]
    pub start_ms: f64,
    /// Time building the run's JavaScript context took, in milliseconds. A
    /// worker builds it before the run is asked for, so it is not in
    /// `start_ms` there; natively it is built on demand.
    #[serde(default)]
    pub context_ms: f64,
    /// The program's tool calls, in call order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<CallSummary>,
    /// The program called `finish(value)`: the outcome's value is the one it
    /// gave, and an agent's task is done.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub finished: bool,
}

impl RunReport {
    /// A report for a run that the host ended before the sandbox could answer.
    #[must_use]
    pub fn stopped(error: RunError, duration_ms: f64) -> Self {
        Self {
            outcome: RunOutcome::Failed(error),
            console: Vec::new(),
            console_dropped: 0,
            duration_ms,
            person_wait_ms: 0.0,
            start_ms: 0.0,
            context_ms: 0.0,
            calls: Vec::new(),
            finished: false,
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum RunOutcome {
    /// The program returned. `value` is the returned value as JSON (`null` for
    /// `undefined`).
    Completed {
        value: serde_json::Value,
    },
    Failed(RunError),
}

/// Why a run failed, in words a person can act on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunError {
    pub kind: RunErrorKind,
    /// One line, no stack trace: `TypeError: x is not a function`.
    pub message: String,
    /// For [`RunErrorKind::Tool`]: the failed call's own code (`tool_unavailable`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// For [`RunErrorKind::Tool`]: the provider's detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<serde_json::Value>,
    /// For [`RunErrorKind::BudgetExhausted`]: which budget ran out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
}

impl RunError {
    #[must_use]
    pub fn new(kind: RunErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            code: None,
            detail: None,
            budget: None,
        }
    }

    /// A budget ran out; `message` says how.
    #[must_use]
    pub fn budget(budget: Budget, message: impl Into<String>) -> Self {
        Self {
            budget: Some(budget),
            ..Self::new(RunErrorKind::BudgetExhausted, message)
        }
    }

    /// The wall budget ran out and the host stopped the program.
    #[must_use]
    pub fn wall_budget(wall_ms: u64) -> Self {
        Self::budget(
            Budget::Wall,
            format!(
                "budget_exhausted:wall: the program ran longer than its wall budget of {wall_ms} ms and was stopped"
            ),
        )
    }

    /// The guest ran JavaScript for longer than its CPU budget.
    #[must_use]
    pub fn js_cpu_budget(js_cpu_ms: u64) -> Self {
        Self::budget(
            Budget::JsCpu,
            format!(
                "budget_exhausted:js_cpu: the program ran JavaScript for more than its CPU budget of {js_cpu_ms} ms and was stopped"
            ),
        )
    }

    /// The program waited on people for longer than its person-wait budget.
    #[must_use]
    pub fn person_wait_budget(person_wait_ms: u64) -> Self {
        Self::budget(
            Budget::PersonWait,
            format!(
                "budget_exhausted:person_wait: the program waited on a person for more than {person_wait_ms} ms in all and was stopped"
            ),
        )
    }

    /// The guest's heap grew past its memory budget.
    #[must_use]
    pub fn memory_budget(memory_bytes: u64) -> Self {
        const MIB: u64 = 1024 * 1024;
        let budget = if memory_bytes.is_multiple_of(MIB) {
            format!("{} MiB", memory_bytes / MIB)
        } else {
            format!("{memory_bytes} bytes")
        };
        Self::budget(
            Budget::Memory,
            format!(
                "budget_exhausted:memory: the program needed more than its memory budget of {budget} and was stopped"
            ),
        )
    }

    /// The caller cancelled the run (a Stop button, an `AbortSignal`, Ctrl-C);
    /// `how` says so in a few words (`Ctrl-C stopped the run`).
    #[must_use]
    pub fn cancelled(how: &str) -> Self {
        Self::new(
            RunErrorKind::Cancelled,
            format!("cancelled: {how}; its output and call outcomes so far are kept"),
        )
    }
}

/// The stable category of a failed run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunErrorKind {
    /// The program did not parse.
    Syntax,
    /// The program threw (or its promise rejected) and nothing caught it.
    Script,
    /// A tool call's rejection was left uncaught; `code` is the call's code.
    Tool,
    /// The program's promise can never settle: nothing is left that could resolve it.
    NeverSettled,
    /// A budget ran out (`message` names which one).
    BudgetExhausted,
    /// The engine or the sandbox worker failed on its own account.
    Engine,
    /// The caller cancelled the run.
    Cancelled,
}

/// One `console.*` line as the program printed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsoleLine {
    pub level: ConsoleLevel,
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConsoleLevel {
    Log,
    Info,
    Warn,
    Error,
    Debug,
}

impl ConsoleLevel {
    pub const ALL: [Self; 5] = [Self::Log, Self::Info, Self::Warn, Self::Error, Self::Debug];

    /// The method name on `console`.
    #[must_use]
    pub const fn method(self) -> &'static str {
        match self {
            Self::Log => "log",
            Self::Info => "info",
            Self::Warn => "warn",
            Self::Error => "error",
            Self::Debug => "debug",
        }
    }
}

/// The most characters of a progress message; the rest is cut.
pub const MAX_PROGRESS_MESSAGE_CHARS: usize = 500;
/// The least time between two progress reports a run sends; one sooner is
/// dropped.
pub const PROGRESS_INTERVAL_MS: f64 = 100.0;
/// The most progress reports one run sends; later ones are dropped.
pub const MAX_PROGRESS_REPORTS: u32 = 1000;

/// How far a long program says it has come (`progress(percent, message)`):
/// fire-and-forget, already clamped and cut by the sandbox, at most one per
/// [`PROGRESS_INTERVAL_MS`] and [`MAX_PROGRESS_REPORTS`] a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Progress {
    /// From 0 to 100.
    pub percent: f64,
    /// At most [`MAX_PROGRESS_MESSAGE_CHARS`] characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl RunReport {
    /// The `tool-result/v1` summary of this run.
    ///
    /// `run_id` is the caller's (`codemode:<id>`); `warnings` and
    /// `catalog_digest` come from admission.
    #[must_use]
    pub fn into_summary(
        self,
        run_id: String,
        mut warnings: Vec<Warning>,
        catalog_digest: String,
        keyless: bool,
    ) -> RunSummary {
        if keyless {
            warnings.push(Warning {
                code: "keyless".into(),
                message: "this run has no call key, so its result cannot be recovered if this reply is lost"
                    .into(),
                module: None,
                tool: None,
                index: None,
                reason: None,
            });
        }
        let mut output = String::new();
        for line in &self.console {
            output.push_str(&line.text);
            output.push('\n');
        }
        if self.console_dropped > 0 {
            output.push_str(&format!(
                "[{} more console lines dropped: the console budget was spent]\n",
                self.console_dropped
            ));
        }
        let (status, termination_reason, value, error, budget) = match self.outcome {
            RunOutcome::Completed { value } => (
                RunStatus::Completed,
                "completed".to_owned(),
                value,
                None,
                None,
            ),
            RunOutcome::Failed(error) => {
                let code = match (error.kind, &error.budget, &error.code) {
                    (RunErrorKind::BudgetExhausted, Some(budget), _) => budget.error_code(),
                    (RunErrorKind::Tool, _, Some(code)) => code.clone(),
                    (kind, _, _) => kind.code().to_owned(),
                };
                let cancelled = error.kind == RunErrorKind::Cancelled;
                let termination_reason = if error.budget.is_some() || cancelled {
                    code.clone()
                } else {
                    "failed".to_owned()
                };
                let failure = RunFailure {
                    code,
                    message: error.message,
                    detail: error.detail,
                };
                (
                    if cancelled {
                        RunStatus::Cancelled
                    } else {
                        RunStatus::Failed
                    },
                    termination_reason,
                    serde_json::Value::Null,
                    Some(failure),
                    error.budget,
                )
            }
        };
        let duration_ms = self.duration_ms.max(0.0).round();
        let person_wait_ms = self.person_wait_ms.max(0.0).round();
        RunSummary {
            run_id,
            status,
            termination_reason,
            // Rounded, non-negative and far below 2^53 ms: the cast is exact.
            duration_ms: duration_ms as u64,
            // As for the duration: the cast is exact.
            person_wait_ms: person_wait_ms as u64,
            call_count: u32::try_from(self.calls.len()).unwrap_or(u32::MAX),
            calls: self.calls,
            value,
            output,
            warnings,
            keyless,
            catalog_digest,
            error,
            budget,
        }
    }
}

impl RunErrorKind {
    /// The stable run error code of this kind (a tool failure carries its own).
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            Self::Syntax => "syntax",
            Self::Script => "script",
            Self::Tool => "tool_failed",
            Self::NeverSettled => "never_settled",
            Self::BudgetExhausted => "budget_exhausted",
            Self::Engine => "engine",
            Self::Cancelled => "cancelled",
        }
    }
}

//! An agent turn as every surface sees it: the guards it runs under, the
//! events it streams and the result it ends with. One union for the CLI's
//! `--json` lines, the runtime protocol and the page's `onEvent`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::chat::Usage;
use crate::permission::{Answer, ApprovalRequest};
use crate::plan::{Plan, PlanningPhase, TaskEvent};

// The built-in tools of an agent turn, named once: `kiln-agent` defines them
// and every surface that shows a turn (the UI, the CLI) compares against the
// same words instead of restating them.

/// The tool whose calls are actions: a program run through the ladder,
/// offered to the model only.
pub const EXECUTE_CODE: &str = "execute_code";
/// Asks the person a question and waits for the answer.
pub const ASK_USER: &str = "ask_user";
/// How a job reports that it finished or got stuck; it cannot be blocked.
pub use crate::permission::RETURN_RESULT;
/// The models the turn's provider offers.
pub const LIST_MODELS: &str = "list_models";
/// The always-on tool that lists the agent's own schedules.
pub const LIST_SCHEDULES: &str = "list_schedules";
/// Finds the belt's tools by words of their name or description, for the
/// tools the prompt lists by name only.
pub const SEARCH_TOOLS: &str = "search_tools";
/// Runs a child loop and waits for its result.
pub const RUN_SUBTASK: &str = "run_subtask";
/// Runs a child loop over read-class tools only.
pub const RUN_SEARCH: &str = "run_search";
/// Starts a child loop in the background and answers with a receipt.
pub const START_SUBTASK: &str = "start_subtask";
/// Waits for background children to leave `running`.
pub const WAIT_SUBTASKS: &str = "wait_subtasks";
/// Plans an objective as tasks, running nothing (plan mode).
pub const CREATE_PLAN: &str = "create_plan";
/// Runs a plan's tasks and steps on the DAG scheduler.
pub const EXECUTE_PLAN: &str = "execute_plan";

/// The anti-loop guards of a job (reference/003's table). Each stops the
/// turn loudly with its own code ([`stop_code`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Guards {
    /// Model turns per job.
    pub max_turns: u32,
    /// Tool calls in one model turn.
    pub max_tool_calls_per_turn: u32,
    /// Input and output tokens over the job.
    pub max_tokens: u64,
    /// USD over the job, through the run budget's reserve and commit.
    pub max_cost: f64,
    /// Consecutive model turns whose calls only deliver (`return_result`,
    /// `share_result`).
    pub delivery_only: u32,
    /// Identical consecutive model turns: the same calls with the same
    /// arguments and the same results.
    pub no_progress: u32,
}

impl Default for Guards {
    fn default() -> Self {
        Self {
            max_turns: 50,
            max_tool_calls_per_turn: 50,
            max_tokens: 1_500_000,
            max_cost: 2.0,
            delivery_only: 3,
            no_progress: 12,
        }
    }
}

impl Guards {
    /// Refuses a guard that would stop every turn before it starts, or that
    /// is not a number.
    ///
    /// # Errors
    ///
    /// The guard's name and why.
    pub fn check(&self) -> Result<(), String> {
        let counts = [
            ("max_turns", u64::from(self.max_turns)),
            (
                "max_tool_calls_per_turn",
                u64::from(self.max_tool_calls_per_turn),
            ),
            ("max_tokens", self.max_tokens),
            ("delivery_only", u64::from(self.delivery_only)),
            ("no_progress", u64::from(self.no_progress)),
        ];
        if let Some((name, _)) = counts.iter().find(|(_, value)| *value == 0) {
            return Err(format!("guard `{name}` must be at least 1"));
        }
        if !(self.max_cost.is_finite() && self.max_cost >= 0.0) {
            return Err(format!(
                "guard `max_cost` must be a number of USD from 0 up, not {}",
                self.max_cost
            ));
        }
        Ok(())
    }
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model answered in prose (a turn with no output schema).
    Answered,
    /// A program called `finish(value)` (with a schema: a value that matched).
    Finished,
    /// A guard stopped it; `code` names which.
    Guard,
    /// The run budget refused a model turn (its cost cap, deadline or turn count).
    Budget,
    /// The provider failed.
    Provider,
    /// A turn with an output schema ended without a `finish` that matched it.
    Unfinished,
    /// The caller stopped it.
    Cancelled,
}

/// The stable codes of the stops that have one.
pub mod stop_code {
    pub const MAX_TURNS: &str = "max_turns";
    pub const MAX_TOOL_CALLS_PER_TURN: &str = "max_tool_calls_per_turn";
    pub const MAX_TOKENS: &str = "max_tokens";
    pub const MAX_COST: &str = "max_cost";
    pub const DELIVERY_ONLY: &str = "delivery_only";
    pub const NO_PROGRESS: &str = "no_progress";
    pub const WITHOUT_FINISH: &str = "without_finish";
    pub const CANCELLED: &str = "cancelled";
}

/// Why a turn stopped, in words a person can act on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentStop {
    pub reason: StopReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl AgentStop {
    /// Whether the turn did what it was asked (answered or finished).
    #[must_use]
    pub fn is_success(&self) -> bool {
        matches!(self.reason, StopReason::Answered | StopReason::Finished)
    }
}

/// What a turn ended with: the page API's `kiln.agent` result, the CLI's
/// last `--json` line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentResult {
    /// The model's last message (or the `return_result` value's text).
    pub text: String,
    /// The value `finish` (or `return_result`) gave, `null` when none did.
    pub value: Value,
    pub finished: bool,
    pub stop: AgentStop,
    pub usage: Usage,
    /// USD spent (a lower bound when some turn was unpriced).
    pub spend: f64,
    /// The turn's job in the history, when it has a workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// Model turns taken.
    pub turns: u32,
    /// `execute_code` actions run.
    pub actions: u32,
    /// The limits this turn ran under (the caller's guards, or its agent's),
    /// so a reply read back later is measured against its own. A result kept
    /// before they were recorded reads Kiln's defaults.
    #[serde(default)]
    pub guards: Guards,
}

/// One step of a turn, as it happens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    /// Text of the model's message, as it streams.
    TextDelta { text: String },
    /// The model called a tool; for `execute_code`, `code` is the program.
    ToolCallUpdate {
        call_id: String,
        name: String,
        args: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<String>,
    },
    /// The call's answer as the model reads it (cut to the history's bound);
    /// for `execute_code`, `run` is the `tool-result/v1` structured content
    /// (status, value, console, calls).
    ToolResultUpdate {
        call_id: String,
        name: String,
        content: String,
        is_error: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run: Option<Value>,
    },
    /// The ladder asks the person about a call.
    ApprovalRequest { request: ApprovalRequest },
    /// The person (or the headless gate) answered.
    ApprovalAnswer {
        call_number: u32,
        tool: String,
        answer: Answer,
    },
    /// The turn waits on the person's answer to `ask_user`.
    Question { question: String },
    /// Something the person may want to know that is not the model's.
    LogUpdate { message: String },
    /// One model call, priced.
    LlmCall {
        provider: String,
        model: String,
        input_tokens: u64,
        output_tokens: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
        duration_ms: f64,
    },
    /// Everything before the last user turns was replaced by a summary for
    /// the provider; the full thread stays in the history.
    Compaction { summary: String, replaced: usize },
    /// A guard or the budget stopped the turn.
    Stop { stop: AgentStop },
    /// Planning's progress (`create_plan`): `status` is `running`, `ok` or
    /// `failed`, `content` what happened ("Retry attempt 2/3...").
    PlanningUpdate {
        phase: PlanningPhase,
        status: String,
        content: String,
    },
    /// A plan's task or step changed (`execute_plan`). `plan_started`
    /// carries the plan; a step's events name it; a failure says why.
    TaskUpdate {
        event: TaskEvent,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        task_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        duration_ms: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        plan: Option<Plan>,
    },
    /// A step's result (written to `step:<id>`), or its failure.
    StepResult {
        task_id: String,
        step_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// An event of a child loop (a plan step, a sub-agent): `child` is its
    /// id, unique in the run; `parent` the child that spawned it (absent for
    /// the turn itself); `parent_call_id` the spawning call; `depth` 1 for a
    /// child of the turn. A grandchild's events arrive wrapped once, by its
    /// own loop, so every surface nests them by `child` and `parent`.
    Child {
        child: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent: Option<String>,
        parent_call_id: String,
        depth: u32,
        /// What the child is, for a person: "step fetch", "subtask".
        label: String,
        event: Box<AgentEvent>,
    },
    /// The turn's end, always the last event: the result's fields beside
    /// `type`.
    Done {
        #[serde(flatten)]
        result: AgentResult,
    },
}

//! An agent turn as the chat shows it, folded from the turn's `AgentEvent`s:
//! the model's text, each action (`execute_code`: its code, console, calls
//! and result), each direct tool call, the compaction card, the notes, the
//! caps line (turns, tokens and spend against the job's guards) and how the
//! turn ended. Pure, so it is tested natively.

use kiln_types::agent::{
    AgentEvent, AgentResult, AgentStop, CREATE_PLAN, EXECUTE_CODE, EXECUTE_PLAN, Guards, StopReason,
};
use kiln_types::chat::Usage;
use kiln_types::permission::{card_text, group_digits};
use kiln_types::plan::{NodeStatus, Plan, TaskEvent};
use serde_json::Value;

/// One call a program made, as its action's block lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CallRow {
    pub tool: String,
    pub outcome: String,
    pub duration_ms: u64,
}

/// An action's result, from its `tool-result/v1` structured content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ActionResult {
    /// `completed`, `failed`, `cancelled`.
    pub status: String,
    /// The returned value as JSON text, when it completed with one.
    pub value: Option<String>,
    /// The error's code and message, when it failed.
    pub error: Option<String>,
    pub console: String,
    pub calls: Vec<CallRow>,
    pub duration_ms: u64,
    /// What the model was given back (already cut to the history's bound).
    pub observation: String,
}

/// One step of a turn, in the order it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// The model's words (one model message's deltas, joined).
    Text(String),
    /// An `execute_code` call: the program, and its result once it ran.
    Action {
        call_id: String,
        code: String,
        result: Option<ActionResult>,
        /// The call was refused or could not run (no program ran).
        refused: Option<String>,
    },
    /// A direct tool call and its answer.
    Call {
        call_id: String,
        name: String,
        args: String,
        answer: Option<(String, bool)>,
    },
    /// The earlier conversation was summarized for the model.
    Compaction { summary: String, replaced: usize },
    /// `create_plan`'s plan: shown before anything runs.
    Planned { plan: PlanView, summary: String },
    /// `execute_plan`'s run: the plan's tree, live; `answer` once it ended.
    PlanRun {
        call_id: String,
        plan: PlanView,
        answer: Option<(String, bool)>,
    },
    /// `ask_user`'s question, while and after it was asked.
    Question(String),
    /// Kiln's note about the turn (not the model's).
    Note(String),
}

/// One step of a plan, as its node shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PlanStep {
    pub id: String,
    pub instructions: String,
    pub status: NodeStatus,
    pub error: Option<String>,
    /// Its result as JSON text.
    pub result: Option<String>,
    pub duration_ms: Option<u64>,
}

/// One task of a plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PlanTask {
    pub id: String,
    pub title: String,
    pub depends_on: Vec<String>,
    pub status: NodeStatus,
    pub error: Option<String>,
    pub duration_ms: Option<u64>,
    pub steps: Vec<PlanStep>,
}

/// A plan, as a card shows it (before it runs) and its tree (while and
/// after it runs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PlanView {
    pub title: String,
    pub tasks: Vec<PlanTask>,
    /// Every task settled.
    pub finished: bool,
}

impl PlanView {
    pub(crate) fn of(plan: &Plan) -> Self {
        Self {
            title: plan.title.clone(),
            tasks: plan
                .tasks
                .iter()
                .map(|task| PlanTask {
                    id: task.id.clone(),
                    title: task.title.clone(),
                    depends_on: task.depends_on.clone(),
                    status: NodeStatus::Waiting,
                    error: None,
                    duration_ms: None,
                    steps: task
                        .steps
                        .iter()
                        .map(|step| PlanStep {
                            id: step.id.clone(),
                            instructions: step.instructions.clone(),
                            status: NodeStatus::Waiting,
                            error: None,
                            result: None,
                            duration_ms: None,
                        })
                        .collect(),
                })
                .collect(),
            finished: false,
        }
    }

    /// `2/3 tasks`.
    pub(crate) fn progress(&self) -> String {
        let done = self
            .tasks
            .iter()
            .filter(|task| task.status == NodeStatus::Completed)
            .count();
        format!("{done}/{} tasks", self.tasks.len())
    }

    fn step_mut(&mut self, id: &str) -> Option<&mut PlanStep> {
        self.tasks
            .iter_mut()
            .flat_map(|task| task.steps.iter_mut())
            .find(|step| step.id == id)
    }

    fn update(
        &mut self,
        event: TaskEvent,
        task_id: &str,
        step_id: Option<&str>,
        error: Option<String>,
        duration_ms: Option<f64>,
    ) {
        let status = match event {
            TaskEvent::PlanFinished => {
                self.finished = true;
                return;
            }
            TaskEvent::TaskStarted | TaskEvent::StepStarted => NodeStatus::Running,
            TaskEvent::TaskCompleted | TaskEvent::StepCompleted => NodeStatus::Completed,
            TaskEvent::TaskFailed | TaskEvent::StepFailed => {
                if error.as_deref().is_some_and(|why| why.ends_with("aborted")) {
                    NodeStatus::Aborted
                } else {
                    NodeStatus::Failed
                }
            }
            TaskEvent::PlanStarted | TaskEvent::TaskCreated => return,
        };
        let duration_ms = duration_ms.map(|ms| ms.max(0.0) as u64);
        match step_id {
            Some(step_id) => {
                if let Some(step) = self.step_mut(step_id) {
                    step.status = status;
                    step.error = error;
                    step.duration_ms = duration_ms.or(step.duration_ms);
                }
            }
            None => {
                if let Some(task) = self.tasks.iter_mut().find(|task| task.id == task_id) {
                    task.status = status;
                    task.error = error;
                    task.duration_ms = duration_ms.or(task.duration_ms);
                }
            }
        }
    }
}

/// A child loop (a sub-agent, a plan step), folded like the turn.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ChildTurn {
    pub id: String,
    pub label: String,
    /// The call of the loop above that spawned it.
    pub parent_call_id: String,
    pub view: TurnView,
}

impl ChildTurn {
    /// The step id when this child runs a plan's step.
    pub(crate) fn step(&self) -> Option<&str> {
        self.label.strip_prefix("step ")
    }
}

/// Turns, tokens and spend so far, against the job's guards.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Caps {
    pub turns: u32,
    pub tokens: u64,
    pub spend: f64,
    /// Some model call had no price: the spend is a lower bound.
    pub unpriced: bool,
    pub guards: Guards,
}

impl Caps {
    pub(crate) fn new(guards: Guards) -> Self {
        Self {
            turns: 0,
            tokens: 0,
            spend: 0.0,
            unpriced: false,
            guards,
        }
    }

    /// `This reply: 2 of its 50 model calls · 1,234 of 1,500,000 tokens · $0.0012 of $2.00`:
    /// each message's turn has these limits of its own, so the line names the reply.
    pub(crate) fn line(&self) -> String {
        let spend = if self.unpriced && self.spend == 0.0 {
            "unpriced".to_owned()
        } else {
            format!(
                "{}${:.4}",
                if self.unpriced { "≥ " } else { "" },
                self.spend
            )
        };
        format!(
            "This reply: {} of its {} model calls · {} of {} tokens · {} of ${:.2}",
            self.turns,
            self.guards.max_turns,
            group_digits(self.tokens),
            group_digits(self.guards.max_tokens),
            spend,
            self.guards.max_cost
        )
    }
}

/// `text` cut to `max` characters, with a note saying how much was left
/// out, and its acting characters escaped (as on an approval card).
pub(crate) fn shown(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return card_text(text);
    }
    let kept: String = text.chars().take(max).collect();
    format!("{}… ({} more characters)", card_text(&kept), count - max)
}

/// How the turn ended, as the chat says it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Ending {
    /// A class for the style: the stop reason (`answered`, `guard`, …).
    pub class: &'static str,
    pub label: String,
    /// Kiln's sentence about the stop, when there is one.
    pub detail: Option<String>,
    /// The value `finish` gave, as JSON text.
    pub value: Option<String>,
}

/// The label and detail of a stop.
pub(crate) fn ending(stop: &AgentStop, value: &Value) -> Ending {
    let (class, label) = match stop.reason {
        StopReason::Answered => ("answered", "Answered".to_owned()),
        StopReason::Finished => ("finished", "Finished".to_owned()),
        StopReason::Guard => (
            "guard",
            format!(
                "Stopped by a guard ({})",
                stop.code.as_deref().unwrap_or("guard")
            ),
        ),
        StopReason::Budget => ("budget", "Stopped by the budget".to_owned()),
        StopReason::Provider => ("provider", "The provider failed".to_owned()),
        StopReason::Unfinished => ("unfinished", "Ended without finishing".to_owned()),
        StopReason::Cancelled => ("cancelled", "Stopped".to_owned()),
    };
    Ending {
        class,
        label,
        detail: stop.message.clone(),
        value: (!value.is_null()).then(|| pretty(value)),
    }
}

fn pretty(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// A provider's failure, split into its sentence and its hint.
pub(crate) fn provider_failure(stop: &AgentStop) -> (String, Option<String>) {
    let message = stop.message.clone().unwrap_or_else(|| {
        format!(
            "the provider failed ({})",
            stop.code.as_deref().unwrap_or("unknown")
        )
    });
    match message.split_once("\nhint: ") {
        Some((sentence, hint)) => (sentence.to_owned(), Some(format!("hint: {hint}"))),
        None => (message, None),
    }
}

/// The turn as it unfolds.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TurnView {
    pub steps: Vec<Step>,
    pub caps: Caps,
    pub end: Option<Ending>,
    /// The model of the last model call.
    pub model: Option<String>,
    /// The tokens of every model call so far.
    pub usage: Usage,
    /// The loops this turn spawned (its sub-agents, its plans' steps), each
    /// nesting its own.
    pub children: Vec<ChildTurn>,
    /// The running action's last progress report (`progress(percent,
    /// message)` in its program), until its result comes.
    pub progress: Option<kiln_types::Progress>,
}

impl TurnView {
    pub(crate) fn new(guards: Guards) -> Self {
        Self {
            steps: Vec::new(),
            caps: Caps::new(guards),
            end: None,
            model: None,
            usage: Usage::default(),
            children: Vec::new(),
            progress: None,
        }
    }

    /// The running action's program reported how far it has come.
    pub(crate) fn progressed(&mut self, progress: kiln_types::Progress) {
        self.progress = Some(progress);
    }

    /// The children spawned by the call `call_id`.
    pub(crate) fn children_of(&self, call_id: &str) -> Vec<ChildTurn> {
        self.children
            .iter()
            .filter(|child| child.parent_call_id == call_id && child.step().is_none())
            .cloned()
            .collect()
    }

    /// The child that runs the plan step `step`.
    pub(crate) fn step_child(&self, step: &str) -> Option<&ChildTurn> {
        self.children
            .iter()
            .find(|child| child.step() == Some(step))
    }

    /// The child `id`, anywhere below this turn.
    fn child_mut(&mut self, id: &str) -> Option<&mut ChildTurn> {
        let at = self.children.iter().position(|child| child.id == id);
        match at {
            Some(at) => self.children.get_mut(at),
            None => self
                .children
                .iter_mut()
                .find_map(|child| child.view.child_mut(id)),
        }
    }

    fn plan_run_mut(&mut self) -> Option<&mut PlanView> {
        self.steps.iter_mut().rev().find_map(|step| match step {
            Step::PlanRun {
                plan, answer: None, ..
            } => Some(plan),
            _ => None,
        })
    }

    /// Whether anything has come yet.
    pub(crate) fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// Folds one event in.
    pub(crate) fn apply(&mut self, event: AgentEvent) {
        match event {
            AgentEvent::TextDelta { text } => match self.steps.last_mut() {
                Some(Step::Text(so_far)) => so_far.push_str(&text),
                _ => self.steps.push(Step::Text(text)),
            },
            AgentEvent::ToolCallUpdate {
                call_id,
                name,
                args,
                code,
            } => {
                let plan = (name == EXECUTE_PLAN)
                    .then(|| serde_json::from_value::<Plan>(args.clone()).ok())
                    .flatten();
                if let Some(plan) = plan {
                    self.steps.push(Step::PlanRun {
                        call_id,
                        plan: PlanView::of(&plan),
                        answer: None,
                    });
                } else if name == EXECUTE_CODE {
                    self.steps.push(Step::Action {
                        call_id,
                        code: code.unwrap_or_else(|| args.to_string()),
                        result: None,
                        refused: None,
                    });
                } else {
                    self.steps.push(Step::Call {
                        call_id,
                        name,
                        args: args.to_string(),
                        answer: None,
                    });
                }
            }
            AgentEvent::ToolResultUpdate {
                call_id,
                content,
                is_error,
                run,
                ..
            } => self.answer(&call_id, content, is_error, run.as_ref()),
            AgentEvent::LlmCall {
                model,
                input_tokens,
                output_tokens,
                cost_usd,
                ..
            } => {
                self.caps.turns += 1;
                self.caps.tokens += input_tokens + output_tokens;
                self.usage.input_tokens += input_tokens;
                self.usage.output_tokens += output_tokens;
                match cost_usd {
                    Some(cost) => self.caps.spend += cost,
                    None => self.caps.unpriced = true,
                }
                self.model = Some(model);
            }
            AgentEvent::Compaction { summary, replaced } => {
                self.steps.push(Step::Compaction { summary, replaced });
            }
            AgentEvent::Question { question } => self.steps.push(Step::Question(question)),
            AgentEvent::LogUpdate { message } => self.steps.push(Step::Note(message)),
            AgentEvent::Done { result } => self.done(&result),
            // Approvals show as cards while they wait; a stop comes again in `done`.
            AgentEvent::ApprovalRequest { .. }
            | AgentEvent::ApprovalAnswer { .. }
            | AgentEvent::Stop { .. } => {}
            AgentEvent::PlanningUpdate { .. } => {}
            AgentEvent::TaskUpdate {
                event,
                task_id,
                step_id,
                error,
                duration_ms,
                plan,
                ..
            } => {
                if let (TaskEvent::PlanStarted, Some(plan)) = (event, &plan) {
                    // The plan as built (ordered) replaces the call's.
                    if let Some(shown) = self.plan_run_mut() {
                        *shown = PlanView::of(plan);
                    }
                } else if let Some(shown) = self.plan_run_mut() {
                    shown.update(event, &task_id, step_id.as_deref(), error, duration_ms);
                }
            }
            AgentEvent::StepResult {
                step_id, result, ..
            } => {
                if let Some(shown) = self.plan_run_mut()
                    && let Some(step) = shown.step_mut(&step_id)
                {
                    step.result = result.as_ref().map(pretty);
                }
            }
            AgentEvent::Child {
                child,
                parent,
                parent_call_id,
                label,
                event,
                ..
            } => {
                let guards = self.caps.guards;
                let event = *event;
                // A child's model calls are the run's: they count here too.
                if let AgentEvent::LlmCall { cost_usd, .. } = &event {
                    match cost_usd {
                        Some(cost) => self.caps.spend += cost,
                        None => self.caps.unpriced = true,
                    }
                }
                let home = match &parent {
                    None => Some(self),
                    Some(parent) => self.child_mut(parent).map(|turn| &mut turn.view),
                };
                if let Some(home) = home {
                    if !home.children.iter().any(|turn| turn.id == child) {
                        home.children.push(ChildTurn {
                            id: child.clone(),
                            label,
                            parent_call_id,
                            view: TurnView::new(guards),
                        });
                    }
                    if let Some(turn) = home.children.iter_mut().find(|turn| turn.id == child) {
                        turn.view.apply(event);
                    }
                }
            }
        }
    }

    fn answer(&mut self, id: &str, content: String, is_error: bool, run: Option<&Value>) {
        self.progress = None;
        for step in self.steps.iter_mut().rev() {
            match step {
                Step::Action {
                    call_id,
                    result,
                    refused,
                    ..
                } if call_id == id => {
                    match run {
                        Some(run) => *result = Some(action_result(run, content)),
                        None => *refused = Some(refusal(&content)),
                    }
                    return;
                }
                Step::Call {
                    call_id,
                    name,
                    answer,
                    ..
                } if call_id == id => {
                    if name == CREATE_PLAN
                        && !is_error
                        && let Some((plan, summary)) = planned(&content)
                    {
                        *step = Step::Planned { plan, summary };
                        return;
                    }
                    *answer = Some((content, is_error));
                    return;
                }
                Step::PlanRun {
                    call_id, answer, ..
                } if call_id == id => {
                    *answer = Some((content, is_error));
                    return;
                }
                _ => {}
            }
        }
    }

    /// The turn's end: the totals the result gives replace the running ones.
    pub(crate) fn done(&mut self, result: &AgentResult) {
        self.progress = None;
        self.caps.turns = result.turns;
        self.caps.tokens = result.usage.input_tokens + result.usage.output_tokens;
        self.caps.spend = result.spend;
        self.caps.guards = result.guards;
        self.usage = result.usage;
        self.end = Some(ending(&result.stop, &result.value));
        // An action the turn's end cut short has no result to wait for.
        for step in &mut self.steps {
            if let Step::Action {
                result: None,
                refused: refused @ None,
                ..
            } = step
            {
                *refused = Some("stopped before it finished".into());
            }
        }
    }
}

/// `create_plan`'s answer (`{plan, summary}`) as a card's plan.
fn planned(content: &str) -> Option<(PlanView, String)> {
    let value: Value = serde_json::from_str(content).ok()?;
    let plan: Plan = serde_json::from_value(value.get("plan")?.clone()).ok()?;
    let summary = value
        .get("summary")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    Some((PlanView::of(&plan), summary))
}

/// A refused call's `{"error": {"code", "message"}}` as a sentence.
fn refusal(content: &str) -> String {
    serde_json::from_str::<Value>(content)
        .ok()
        .and_then(|value| {
            let error = value.get("error")?;
            Some(format!(
                "{} ({})",
                error.get("message")?.as_str()?,
                error.get("code")?.as_str()?
            ))
        })
        .unwrap_or_else(|| content.to_owned())
}

/// An action's block from its run's structured content; a field that is
/// missing (a result cut to its bound) shows as nothing.
fn action_result(run: &Value, observation: String) -> ActionResult {
    let text = |key: &str| run.get(key).and_then(Value::as_str).unwrap_or_default();
    let calls = run
        .get("calls")
        .and_then(Value::as_array)
        .map(|calls| {
            calls
                .iter()
                .map(|call| CallRow {
                    tool: call
                        .get("tool")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    outcome: call
                        .get("outcome")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    duration_ms: call
                        .get("duration_ms")
                        .and_then(Value::as_u64)
                        .unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default();
    let status = text("status").to_owned();
    let value = run
        .get("value")
        .filter(|value| status == "completed" && !value.is_null())
        .map(pretty);
    let error = run.get("error").and_then(|error| {
        Some(format!(
            "{}: {}",
            error.get("code")?.as_str()?,
            error.get("message")?.as_str()?
        ))
    });
    ActionResult {
        status,
        value,
        error,
        console: text("output").trim_end_matches('\n').to_owned(),
        calls,
        duration_ms: run
            .get("duration_ms")
            .and_then(Value::as_u64)
            .unwrap_or_default(),
        observation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn agent_result(stop: AgentStop, value: Value) -> AgentResult {
        AgentResult {
            text: "Twice the sum is 100.".into(),
            value,
            finished: false,
            stop,
            usage: Usage {
                input_tokens: 1200,
                output_tokens: 34,
            },
            spend: 0.0021,
            job_id: None,
            turns: 2,
            actions: 1,
            guards: Guards::default(),
        }
    }

    #[test]
    fn a_reply_read_back_counts_against_the_limits_it_ran_under() {
        // A reopened thread starts each reply at Kiln's defaults; its end
        // names the limits the turn had.
        let mut view = TurnView::new(Guards::default());
        let mut result = agent_result(
            AgentStop {
                reason: StopReason::Answered,
                code: None,
                message: None,
            },
            Value::Null,
        );
        result.guards = Guards {
            max_turns: 8,
            max_tokens: 20_000,
            max_cost: 0.5,
            ..Guards::default()
        };
        view.apply(AgentEvent::Done { result });
        assert_eq!(
            view.caps.line(),
            "This reply: 2 of its 8 model calls · 1,234 of 20,000 tokens · $0.0021 of $0.50"
        );
        // A result kept before its guards were recorded reads the defaults.
        let old: AgentResult = serde_json::from_value(json!({
            "text": "", "value": null, "finished": false,
            "stop": {"reason": "answered"}, "usage": {"input_tokens": 1, "output_tokens": 1},
            "spend": 0.0, "turns": 1, "actions": 0
        }))
        .expect("an older result reads");
        assert_eq!(old.guards, Guards::default());
    }

    #[test]
    fn a_turn_folds_into_text_an_action_block_and_its_end() {
        let mut view = TurnView::new(Guards::default());
        view.apply(AgentEvent::TextDelta {
            text: "Let me ".into(),
        });
        view.apply(AgentEvent::TextDelta {
            text: "add.".into(),
        });
        view.apply(AgentEvent::LlmCall {
            provider: "openai".into(),
            model: "gpt-4o-mini".into(),
            input_tokens: 1000,
            output_tokens: 20,
            cost_usd: Some(0.0002),
            duration_ms: 30.0,
        });
        view.apply(AgentEvent::ToolCallUpdate {
            call_id: "c1".into(),
            name: "execute_code".into(),
            args: json!({"code": "return 1"}),
            code: Some("return 1".into()),
        });
        view.apply(AgentEvent::ToolResultUpdate {
            call_id: "c1".into(),
            name: "execute_code".into(),
            content: "completed · 3 ms".into(),
            is_error: false,
            run: Some(json!({
                "status": "completed", "value": {"sum": 50}, "output": "sum is 50",
                "duration_ms": 3, "calls": [{"tool": "add", "outcome": "ok", "waited_on_person": false, "duration_ms": 1}]
            })),
        });
        view.apply(AgentEvent::TextDelta {
            text: "Twice the sum is 100.".into(),
        });
        assert_eq!(view.steps[0], Step::Text("Let me add.".into()));
        assert_eq!(view.steps[2], Step::Text("Twice the sum is 100.".into()));
        let Step::Action {
            code,
            result: Some(result),
            ..
        } = &view.steps[1]
        else {
            panic!("{:?}", view.steps[1]);
        };
        assert_eq!(code, "return 1");
        assert_eq!(result.console, "sum is 50");
        assert_eq!(result.value.as_deref(), Some("{\n  \"sum\": 50\n}"));
        assert_eq!(
            result.calls,
            [CallRow {
                tool: "add".into(),
                outcome: "ok".into(),
                duration_ms: 1
            }]
        );
        assert_eq!(
            view.caps.line(),
            "This reply: 1 of its 50 model calls · 1,020 of 1,500,000 tokens · $0.0002 of $2.00"
        );
        view.apply(AgentEvent::Done {
            result: agent_result(
                AgentStop {
                    reason: StopReason::Answered,
                    code: None,
                    message: None,
                },
                Value::Null,
            ),
        });
        assert_eq!(
            view.caps.line(),
            "This reply: 2 of its 50 model calls · 1,234 of 1,500,000 tokens · $0.0021 of $2.00"
        );
        let end = view.end.clone().expect("ended");
        assert_eq!((end.class, end.label.as_str()), ("answered", "Answered"));
        // An action the end cut short says so instead of running for ever.
        view.apply(AgentEvent::ToolCallUpdate {
            call_id: "c2".into(),
            name: "execute_code".into(),
            args: json!({"code": "await tools.wait({ms: 1e4})"}),
            code: Some("await tools.wait({ms: 1e4})".into()),
        });
        view.done(&agent_result(
            AgentStop {
                reason: StopReason::Cancelled,
                code: Some("cancelled".into()),
                message: Some("the turn was stopped".into()),
            },
            Value::Null,
        ));
        assert!(
            matches!(view.steps.last(), Some(Step::Action { refused: Some(why), .. })
            if why == "stopped before it finished")
        );
    }

    #[test]
    fn a_refused_action_a_direct_call_and_a_compaction_show_as_such() {
        let mut view = TurnView::new(Guards::default());
        view.apply(AgentEvent::Compaction {
            summary: "We added numbers.".into(),
            replaced: 6,
        });
        view.apply(AgentEvent::ToolCallUpdate {
            call_id: "c1".into(),
            name: "execute_code".into(),
            args: json!({"code": "return 1"}),
            code: Some("return 1".into()),
        });
        view.apply(AgentEvent::ToolResultUpdate {
            call_id: "c1".into(),
            name: "execute_code".into(),
            content:
                json!({"error": {"code": "denied", "message": "the person denied execute_code"}})
                    .to_string(),
            is_error: true,
            run: None,
        });
        view.apply(AgentEvent::ToolCallUpdate {
            call_id: "c2".into(),
            name: "save_memory".into(),
            args: json!({"text": "x"}),
            code: None,
        });
        view.apply(AgentEvent::ToolResultUpdate {
            call_id: "c2".into(),
            name: "save_memory".into(),
            content: "{\"id\":\"m1\"}".into(),
            is_error: false,
            run: None,
        });
        assert_eq!(
            view.steps[0],
            Step::Compaction {
                summary: "We added numbers.".into(),
                replaced: 6
            }
        );
        assert!(
            matches!(&view.steps[1], Step::Action { refused: Some(why), .. }
            if why == "the person denied execute_code (denied)")
        );
        assert!(
            matches!(&view.steps[2], Step::Call { answer: Some((text, false)), .. }
            if text == "{\"id\":\"m1\"}")
        );
    }

    #[test]
    fn stops_are_labelled_and_a_provider_failure_keeps_its_hint() {
        let guard = AgentStop {
            reason: StopReason::Guard,
            code: Some("max_turns".into()),
            message: Some("stopped after 3 model turns".into()),
        };
        let end = ending(&guard, &Value::Null);
        assert_eq!(end.label, "Stopped by a guard (max_turns)");
        assert_eq!(end.detail.as_deref(), Some("stopped after 3 model turns"));
        let finished = ending(
            &AgentStop {
                reason: StopReason::Finished,
                code: None,
                message: None,
            },
            &json!({"answer": 42}),
        );
        assert_eq!(finished.value.as_deref(), Some("{\n  \"answer\": 42\n}"));
        let provider = AgentStop {
            reason: StopReason::Provider,
            code: Some("auth".into()),
            message: Some(
                "OpenAI-compatible at x: the key was rejected\nhint: check the key".into(),
            ),
        };
        assert_eq!(
            provider_failure(&provider),
            (
                "OpenAI-compatible at x: the key was rejected".to_owned(),
                Some("hint: check the key".to_owned())
            )
        );
        let mut caps = Caps::new(Guards::default());
        caps.unpriced = true;
        assert!(
            caps.line().ends_with("· unpriced of $2.00"),
            "{}",
            caps.line()
        );
        assert_eq!(shown("abc", 3), "abc");
        assert_eq!(shown("abcdef", 3), "abc… (3 more characters)");
        assert_eq!(shown("a\u{202E}b", 10), "a\\u{202E}b");
    }

    fn child(
        id: &str,
        parent: Option<&str>,
        call: &str,
        label: &str,
        event: AgentEvent,
    ) -> AgentEvent {
        AgentEvent::Child {
            child: id.into(),
            parent: parent.map(str::to_owned),
            parent_call_id: call.into(),
            depth: if parent.is_some() { 2 } else { 1 },
            label: label.into(),
            event: Box::new(event),
        }
    }

    fn task_update(
        event: TaskEvent,
        task: &str,
        step: Option<&str>,
        error: Option<&str>,
    ) -> AgentEvent {
        AgentEvent::TaskUpdate {
            event,
            task_id: task.into(),
            step_id: step.map(str::to_owned),
            title: None,
            error: error.map(str::to_owned),
            duration_ms: Some(12.0),
            plan: None,
        }
    }

    #[test]
    fn a_plan_run_folds_into_its_tree_with_each_steps_loop_under_it() {
        let plan = json!({"title": "Count", "tasks": [
            {"id": "a", "title": "A", "steps": [{"id": "a1", "instructions": "Count a"}]},
            {"id": "b", "title": "B", "depends_on": ["a"], "steps": [{"id": "b1", "instructions": "Count b"}]}
        ]});
        let mut view = TurnView::new(Guards::default());
        view.apply(AgentEvent::ToolCallUpdate {
            call_id: "call_plan".into(),
            name: "execute_plan".into(),
            args: plan,
            code: None,
        });
        view.apply(task_update(TaskEvent::TaskStarted, "a", None, None));
        view.apply(task_update(TaskEvent::StepStarted, "a", Some("a1"), None));
        view.apply(child(
            "c1",
            None,
            "call_plan",
            "step a1",
            AgentEvent::ToolCallUpdate {
                call_id: "k1".into(),
                name: "execute_code".into(),
                args: json!({"code": "finish(3)"}),
                code: Some("finish(3)".into()),
            },
        ));
        view.apply(AgentEvent::StepResult {
            task_id: "a".into(),
            step_id: "a1".into(),
            result: Some(json!({"words": 3})),
            error: None,
        });
        view.apply(task_update(TaskEvent::StepCompleted, "a", Some("a1"), None));
        view.apply(task_update(TaskEvent::TaskCompleted, "a", None, None));
        view.apply(task_update(
            TaskEvent::TaskFailed,
            "b",
            None,
            Some("dependency `a` failed"),
        ));
        let Step::PlanRun { plan, answer, .. } = &view.steps[0] else {
            panic!("{:?}", view.steps);
        };
        assert_eq!(answer, &None);
        assert_eq!(plan.progress(), "1/2 tasks");
        assert_eq!(plan.tasks[0].steps[0].status, NodeStatus::Completed);
        assert_eq!(
            plan.tasks[0].steps[0].result.as_deref(),
            Some("{\n  \"words\": 3\n}")
        );
        assert_eq!(plan.tasks[1].status, NodeStatus::Failed);
        assert_eq!(
            plan.tasks[1].error.as_deref(),
            Some("dependency `a` failed")
        );
        // The step's own loop is its child, not a sub-agent of the call.
        let step = view.step_child("a1").expect("the step's loop");
        assert!(matches!(step.view.steps[0], Step::Action { .. }));
        assert!(view.children_of("call_plan").is_empty());
        view.apply(AgentEvent::ToolResultUpdate {
            call_id: "call_plan".into(),
            name: "execute_plan".into(),
            content: json!({"status": "partial"}).to_string(),
            is_error: false,
            run: None,
        });
        assert!(matches!(
            &view.steps[0],
            Step::PlanRun {
                answer: Some(_),
                ..
            }
        ));
    }

    #[test]
    fn sub_agents_nest_under_the_call_that_spawned_them_and_a_created_plan_is_a_card() {
        let mut view = TurnView::new(Guards::default());
        view.apply(AgentEvent::ToolCallUpdate {
            call_id: "call_1".into(),
            name: "execute_code".into(),
            args: json!({}),
            code: Some("await agents.run('x')".into()),
        });
        view.apply(child(
            "c1",
            None,
            "call_1",
            "subtask",
            AgentEvent::TextDelta {
                text: "Working".into(),
            },
        ));
        view.apply(child(
            "c2",
            Some("c1"),
            "k9",
            "subtask",
            AgentEvent::TextDelta {
                text: "Deeper".into(),
            },
        ));
        let children = view.children_of("call_1");
        assert_eq!(children.len(), 1);
        assert_eq!(children[0].view.steps, [Step::Text("Working".into())]);
        let grandchildren = children[0].view.children_of("k9");
        assert_eq!(grandchildren[0].view.steps, [Step::Text("Deeper".into())]);

        view.apply(AgentEvent::ToolCallUpdate {
            call_id: "call_2".into(),
            name: "create_plan".into(),
            args: json!({"objective": "x"}),
            code: None,
        });
        view.apply(AgentEvent::ToolResultUpdate {
            call_id: "call_2".into(),
            name: "create_plan".into(),
            content: json!({"plan": {"title": "P", "tasks": [{"id": "t", "title": "T", "steps": [{"id": "s", "instructions": "Do"}]}]}, "summary": "1 task, 1 step, 1 parallelizable"}).to_string(),
            is_error: false,
            run: None,
        });
        let Step::Planned { plan, summary } = &view.steps[1] else {
            panic!("{:?}", view.steps[1]);
        };
        assert_eq!(plan.title, "P");
        assert_eq!(summary, "1 task, 1 step, 1 parallelizable");
    }
}

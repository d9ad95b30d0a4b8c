//! `execute_plan({title, tasks})` (reference/000, "create_plan /
//! execute_plan", "Step failure is terminal, not completion", "Final
//! synthesis: the calling loop's next turn"). The plan travels inline as the
//! call's arguments and is checked by [`crate::plan::build`] before anything
//! runs. Its category is `external`: plan mode refuses it, `default` asks
//! once — approving the plan is the permission gate.
//!
//! Tasks run on the scheduler as their dependencies allow, and each task's
//! steps the same way; each step is a CodeAct child ([`crate::subagent`],
//! role `Step`: the belt minus both plan tools, restricted to the step's
//! `tools`, finishing against its `output_schema`). A step's result is
//! written to `step:<id>`, a task's to `task:<id>` before its dependents
//! start; a step's prompt names its upstream keys and the child reads them
//! with `read_shared`. The answer is each task's status, a results map by
//! task id and a steps map by step id; the calling loop writes the answer
//! on its next turn.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use futures::future::LocalBoxFuture;
use kiln_capabilities::{CallContext, CapabilitySpec, Category, Implementation, Permit, Source};
use kiln_store::run::Describe;
use kiln_types::agent::{AgentEvent, EXECUTE_PLAN};
use kiln_types::plan::{Plan, Step, Task, TaskEvent, step_key, task_key};
use kiln_types::tool_result::{CallOutcome, ToolFailure, ToolReply};
use serde_json::{Map, Value, json};

use crate::codeact::Role;
use crate::subagent::{self, ChildOutcome, ChildSpec, Kin};
use kiln_run::dag::{self, Node, Settled};

/// The JSON Schema of a plan, as `execute_plan` takes it: the shape in
/// words (the builder checks every field and names what is wrong), so the
/// definition every turn carries stays small.
#[must_use]
pub(crate) fn plan_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "tasks": {
                "type": "array",
                "items": {"type": "object"},
                "description": "[{id, title, depends_on: [task ids], steps: [{id, instructions, depends_on?: [step ids of the task], tools?: [names], output_schema?}]}]"
            }
        },
        "required": ["title", "tasks"]
    })
}

/// The JSON Schema of one task (`add_task`'s arguments too).
#[must_use]
pub(crate) fn task_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "Unique in the plan: letters, digits, _ - ."},
            "title": {"type": "string"},
            "depends_on": {"type": "array", "items": {"type": "string"}, "description": "Ids of the tasks whose results this task needs; [] when independent."},
            "steps": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "description": "Unique in the whole plan."},
                        "instructions": {"type": "string", "description": "What the step does, complete on its own."},
                        "depends_on": {"type": "array", "items": {"type": "string"}, "description": "Ids of steps of this task whose results it needs."},
                        "tools": {"type": "array", "items": {"type": "string"}, "description": "The only tools the step may use; all when absent."},
                        "output_schema": {"description": "A JSON Schema the step's result must match."}
                    },
                    "required": ["id", "instructions"]
                }
            }
        },
        "required": ["id", "title", "steps"]
    })
}

/// `execute_plan`.
pub(crate) struct ExecutePlan(pub Rc<Kin>);

impl ExecutePlan {
    #[must_use]
    pub(crate) fn spec() -> CapabilitySpec {
        CapabilitySpec {
            name: EXECUTE_PLAN.into(),
            description: "Runs a plan of tasks (the plan itself, as create_plan answers it, or one you write), each task as soon as the tasks it depends on finish, each step a sub-agent. Checked first: invalid_plan names each problem. Answers {status, tasks, results: {task id: value}, steps: {step id: value}} (error plan_failed when every task failed); results stay readable as task:<id> / step:<id>. Then write the answer yourself from the results.".into(),
            input_schema: plan_schema(),
            category: Category::External,
            result: json!({}),
            source: Source::Builtin,
        }
    }
}

impl Implementation for ExecutePlan {
    fn call(
        &self,
        args: Value,
        _context: CallContext,
        _permit: Permit,
    ) -> LocalBoxFuture<'static, ToolReply> {
        let kin = self.0.clone();
        Box::pin(async move {
            let tools: Vec<String> = kin.base.specs().map(|spec| spec.name.clone()).collect();
            let plan = super::from_args(&args).and_then(|plan| super::build(plan, Some(&tools)));
            let plan = match plan {
                Ok(plan) => plan,
                Err(issues) => {
                    let refusal = super::rejection(&issues);
                    return Err(ToolFailure {
                        code: "invalid_plan".into(),
                        message: refusal["error"]["message"]
                            .as_str()
                            .unwrap_or("the plan was not run")
                            .to_owned(),
                        detail: Some(json!({"issues": issues})),
                        outcome: CallOutcome::Error,
                    });
                }
            };
            Ok(run_plan(&kin, &plan).await)
        })
    }
}

/// What a node's run left for the answer.
#[derive(Default)]
struct Outcomes {
    steps: BTreeMap<String, Value>,
    tasks: BTreeMap<String, Value>,
    failed_step: BTreeMap<String, String>,
}

/// Runs a built plan and answers what became of it.
pub(crate) async fn run_plan(kin: &Rc<Kin>, plan: &Plan) -> Value {
    let sink = kin.sink.clone();
    sink(AgentEvent::TaskUpdate {
        event: TaskEvent::PlanStarted,
        task_id: String::new(),
        step_id: None,
        title: Some(plan.title.clone()),
        error: None,
        duration_ms: None,
        plan: Some(plan.clone()),
    });
    for task in &plan.tasks {
        sink(task_event(TaskEvent::TaskCreated, task, None, None));
    }
    let outcomes = Rc::new(RefCell::new(Outcomes::default()));
    let nodes: Vec<Node> = plan
        .tasks
        .iter()
        .map(|task| Node {
            id: task.id.clone(),
            depends_on: task.depends_on.clone(),
        })
        .collect();
    let by_id: BTreeMap<&str, &Task> = plan
        .tasks
        .iter()
        .map(|task| (task.id.as_str(), task))
        .collect();
    let started: RefCell<BTreeMap<String, f64>> = RefCell::default();
    let settled = dag::run(
        &nodes,
        kin.max_concurrent,
        &kin.cancel,
        |id| {
            let task = by_id[id].clone();
            started
                .borrow_mut()
                .insert(task.id.clone(), kin.clock.now_ms());
            sink(task_event(TaskEvent::TaskStarted, &task, None, None));
            Box::pin(run_task(
                kin.clone(),
                plan.title.clone(),
                task,
                outcomes.clone(),
            ))
        },
        |id, how| {
            let task = by_id[id];
            let duration = started.borrow().get(id).map(|at| kin.clock.now_ms() - at);
            let (event, error) = match how {
                Settled::Completed(_) => (TaskEvent::TaskCompleted, None),
                Settled::Failed(why) => (TaskEvent::TaskFailed, Some(why.clone())),
                Settled::Aborted => (TaskEvent::TaskFailed, Some("Task aborted".to_owned())),
            };
            sink(task_event(event, task, error, duration));
        },
    )
    .await;
    let outcomes = outcomes.borrow();
    let mut tasks = Vec::new();
    let mut failures = Vec::new();
    for task in &plan.tasks {
        let how = &settled[&task.id];
        let mut entry = json!({"id": task.id, "title": task.title});
        match how {
            Settled::Completed(_) => entry["status"] = json!("completed"),
            Settled::Failed(why) => {
                entry["status"] = json!("failed");
                entry["error"] = json!(why);
                if let Some(step) = outcomes.failed_step.get(&task.id) {
                    entry["failed_step"] = json!(step);
                }
                failures.push(entry.clone());
            }
            Settled::Aborted => {
                entry["status"] = json!("aborted");
                entry["error"] = json!("Task aborted");
                failures.push(entry.clone());
            }
        }
        tasks.push(entry);
    }
    let completed = settled.values().filter(|how| how.is_completed()).count();
    let status = if kin.cancel.is_aborted() {
        "aborted"
    } else if completed == plan.tasks.len() {
        "completed"
    } else if completed == 0 {
        "failed"
    } else {
        "partial"
    };
    sink(AgentEvent::TaskUpdate {
        event: TaskEvent::PlanFinished,
        task_id: String::new(),
        step_id: None,
        title: Some(plan.title.clone()),
        error: None,
        duration_ms: None,
        plan: None,
    });
    let mut answer = json!({
        "title": plan.title,
        "status": status,
        "tasks": tasks,
        "results": outcomes.tasks,
        "steps": outcomes.steps,
    });
    if completed == 0 {
        answer["error"] = json!("plan_failed");
        answer["failures"] = Value::Array(failures);
    }
    answer
}

fn task_event(
    event: TaskEvent,
    task: &Task,
    error: Option<String>,
    duration_ms: Option<f64>,
) -> AgentEvent {
    AgentEvent::TaskUpdate {
        event,
        task_id: task.id.clone(),
        step_id: None,
        title: Some(task.title.clone()),
        error,
        duration_ms,
        plan: None,
    }
}

/// Runs one task's steps and writes its result to `task:<id>`.
async fn run_task(
    kin: Rc<Kin>,
    plan_title: String,
    task: Task,
    outcomes: Rc<RefCell<Outcomes>>,
) -> Settled {
    let sink = kin.sink.clone();
    let nodes: Vec<Node> = task
        .steps
        .iter()
        .map(|step| Node {
            id: step.id.clone(),
            depends_on: step.depends_on.clone(),
        })
        .collect();
    let by_id: BTreeMap<&str, &Step> = task
        .steps
        .iter()
        .map(|step| (step.id.as_str(), step))
        .collect();
    let started: RefCell<BTreeMap<String, f64>> = RefCell::default();
    let settled = dag::run(
        &nodes,
        kin.max_concurrent,
        &kin.cancel,
        |id| {
            let step = by_id[id].clone();
            started
                .borrow_mut()
                .insert(step.id.clone(), kin.clock.now_ms());
            sink(AgentEvent::TaskUpdate {
                event: TaskEvent::StepStarted,
                task_id: task.id.clone(),
                step_id: Some(step.id.clone()),
                title: Some(step.instructions.chars().take(120).collect()),
                error: None,
                duration_ms: None,
                plan: None,
            });
            Box::pin(run_step(
                kin.clone(),
                plan_title.clone(),
                task.clone(),
                step,
                outcomes.clone(),
            ))
        },
        |id, how| {
            let duration = started.borrow().get(id).map(|at| kin.clock.now_ms() - at);
            let (event, error) = match how {
                Settled::Completed(_) => (TaskEvent::StepCompleted, None),
                Settled::Failed(why) => (TaskEvent::StepFailed, Some(why.clone())),
                Settled::Aborted => (TaskEvent::StepFailed, Some("Step aborted".to_owned())),
            };
            if !matches!(how, Settled::Completed(_)) && !started.borrow().contains_key(id) {
                // A step that never ran still has a result: its failure.
                sink(AgentEvent::StepResult {
                    task_id: task.id.clone(),
                    step_id: id.to_owned(),
                    result: None,
                    error: error.clone(),
                });
            }
            sink(AgentEvent::TaskUpdate {
                event,
                task_id: task.id.clone(),
                step_id: Some(id.to_owned()),
                title: None,
                error,
                duration_ms: duration,
                plan: None,
            });
        },
    )
    .await;
    // The first failed step, in the task's order, is the task's failure.
    for step in &task.steps {
        match &settled[&step.id] {
            Settled::Completed(_) => {}
            Settled::Failed(why) => {
                outcomes
                    .borrow_mut()
                    .failed_step
                    .insert(task.id.clone(), step.id.clone());
                return Settled::Failed(format!("step `{}` failed: {why}", step.id));
            }
            Settled::Aborted => return Settled::Aborted,
        }
    }
    // The task's result: its last steps' (those no step depends on).
    let ends: Vec<&Step> = task
        .steps
        .iter()
        .filter(|step| {
            !task
                .steps
                .iter()
                .any(|other| other.depends_on.contains(&step.id))
        })
        .collect();
    let value = match ends.as_slice() {
        [only] => settled_value(&settled[&only.id]),
        many => Value::Object(
            many.iter()
                .map(|step| (step.id.clone(), settled_value(&settled[&step.id])))
                .collect::<Map<String, Value>>(),
        ),
    };
    remember(
        &kin,
        &task_key(&task.id),
        &value,
        &task.title,
        "task_result",
    )
    .await;
    outcomes
        .borrow_mut()
        .tasks
        .insert(task.id.clone(), value.clone());
    Settled::Completed(value)
}

fn settled_value(how: &Settled) -> Value {
    match how {
        Settled::Completed(value) => value.clone(),
        _ => Value::Null,
    }
}

/// Writes `key` to the run memory; a failure is logged, not fatal (the
/// value also travels in the answer).
async fn remember(kin: &Kin, key: &str, value: &Value, title: &str, kind: &str) {
    let Some(memory) = &kin.memory else { return };
    let describe = Describe {
        title: title.chars().take(120).collect(),
        description: String::new(),
        kind: kind.into(),
    };
    if let Err(error) = memory.set(key, value.clone(), describe).await {
        (kin.sink)(AgentEvent::LogUpdate {
            message: format!(
                "`{key}` was not kept in the run memory: {}",
                error.with_hint()
            ),
        });
    }
}

/// The prompt of one step: what to do, where its inputs are.
fn step_prompt(plan_title: &str, task: &Task, step: &Step) -> String {
    let mut text = format!(
        "You carry out one step of the plan \u{201c}{plan_title}\u{201d}, in its task \u{201c}{}\u{201d}.\n\nYour step (`{}`):\n{}\n",
        task.title, step.id, step.instructions
    );
    let upstream: Vec<String> = step
        .depends_on
        .iter()
        .map(|id| step_key(id))
        .chain(task.depends_on.iter().map(|id| task_key(id)))
        .collect();
    if !upstream.is_empty() {
        let keys: Vec<String> = upstream.iter().map(|key| format!("\"{key}\"")).collect();
        text.push_str(&format!(
            "\nResults of earlier work this step builds on are in the run memory: {}. \
             Read them when you need them with `await tools.read_shared({{keys: [{}]}})`.\n",
            upstream.join(", "),
            keys.join(", ")
        ));
    }
    text.push_str(if step.output_schema.is_some() {
        "\nDo only this step. End it by calling finish(value) in a program with a value matching the output schema."
    } else {
        "\nDo only this step, then answer with its result (that answer is what later steps read)."
    });
    text
}

/// Runs one step as a child and writes its result to `step:<id>`.
async fn run_step(
    kin: Rc<Kin>,
    plan_title: String,
    task: Task,
    step: Step,
    outcomes: Rc<RefCell<Outcomes>>,
) -> Settled {
    let outcome = subagent::spawn(
        &kin,
        ChildSpec {
            prompt: step_prompt(&plan_title, &task, &step),
            output_schema: step.output_schema.clone(),
            tools: step.tools.clone(),
            read_only: false,
            label: format!("step {}", step.id),
            role: Role::Step,
            preamble: None,
            id: None,
            agent: None,
        },
    )
    .await;
    let (result, error) = match &outcome {
        ChildOutcome::Completed { value, .. } => (Some(value.clone()), None),
        ChildOutcome::Failed { message, .. } => (None, Some(message.clone())),
    };
    (kin.sink)(AgentEvent::StepResult {
        task_id: task.id.clone(),
        step_id: step.id.clone(),
        result: result.clone(),
        error: error.clone(),
    });
    match (result, error) {
        (Some(value), _) => {
            remember(
                &kin,
                &step_key(&step.id),
                &value,
                &step.instructions,
                "step_result",
            )
            .await;
            outcomes
                .borrow_mut()
                .steps
                .insert(step.id.clone(), value.clone());
            Settled::Completed(value)
        }
        (None, error) => {
            if kin.cancel.is_aborted() {
                return Settled::Aborted;
            }
            let why = error.unwrap_or_else(|| "the step failed".into());
            outcomes
                .borrow_mut()
                .steps
                .insert(step.id.clone(), json!({"error": why}));
            Settled::Failed(why)
        }
    }
}

#[cfg(test)]
mod tests {
    use kiln_capabilities::args::InputSchema;
    use serde_json::Value;

    use super::*;

    /// The call a step's prompt shows for its inputs is one the real
    /// `read_shared` accepts: the hint once named `{key}`, which the tool
    /// refuses, and every step that followed it lost a round.
    #[test]
    fn a_steps_prompt_shows_a_read_shared_call_the_tool_accepts() {
        let step = Step {
            id: "report".into(),
            instructions: "Write the report.".into(),
            depends_on: vec!["fetch".into()],
            tools: None,
            output_schema: None,
        };
        let task = Task {
            id: "t2".into(),
            title: "Report".into(),
            depends_on: vec!["t1".into()],
            steps: vec![step.clone()],
        };
        let prompt = step_prompt("Quarterly", &task, &step);
        let call = "tools.read_shared(";
        let at = prompt
            .find(call)
            .unwrap_or_else(|| panic!("no read_shared call in:\n{prompt}"));
        let rest = &prompt[at + call.len()..];
        let arguments = &rest[..rest.find(")`").unwrap_or(rest.len())];
        // The prompt writes JavaScript; these keys are plain identifiers.
        let json = arguments.replacen("keys:", "\"keys\":", 1);
        let arguments: Value = serde_json::from_str(&json)
            .unwrap_or_else(|error| panic!("`{arguments}` is not the expected object: {error}"));
        assert_eq!(
            arguments,
            serde_json::json!({"keys": ["step:fetch", "task:t1"]})
        );
        let storage = kiln_capabilities::Storage::new(
            kiln_store::native::MemoryBackend::new(),
            kiln_store::native::MemoryTree::new(),
            "run",
            "default",
        );
        let mut registry = kiln_capabilities::Registry::new();
        kiln_capabilities::builtin::add_run_memory(&mut registry, &storage);
        let spec = registry
            .specs()
            .find(|spec| spec.name == kiln_capabilities::memory_tools::READ_SHARED)
            .unwrap_or_else(|| panic!("no read_shared spec"));
        let schema = InputSchema::compile(&spec.input_schema)
            .unwrap_or_else(|error| panic!("read_shared's schema: {error}"));
        assert!(
            schema.validate_value("the arguments", &arguments).is_ok(),
            "read_shared refuses the prompt's call {arguments}"
        );
    }
}

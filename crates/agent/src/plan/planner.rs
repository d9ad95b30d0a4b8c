//! `create_plan(objective)` (reference/000, "create_plan / execute_plan —
//! the chat's plan mode"): one model conversation through `add_task` and
//! `finish_plan` calls, each checked by the plan builder (a refusal is that
//! call's result, so the model fixes it), in bounded rounds, producing a plan
//! and stopping. Nothing runs: the person sees the plan first.
//!
//! Offered only in plan mode, where it is a direct tool. The planner sees
//! the belt minus `create_plan`; its contract depends on the belt (with no
//! tools it plans only what a model can do from its own knowledge); it is
//! told not to make an aggregation or synthesis task; the caller's system
//! text is a preamble. It runs on the caller's permit and the run's budget:
//! a refused turn stops planning with the budget's reason.

use std::fmt::Write as _;
use std::rc::Rc;

use futures::future::LocalBoxFuture;
use kiln_capabilities::{CallContext, CapabilitySpec, Category, Implementation, Permit, Source};
use kiln_providers::{ChatRequest, FinalMessage, Message, ToolCall, ToolDef};
use kiln_types::agent::{AgentEvent, CREATE_PLAN, EXECUTE_PLAN};
use kiln_types::plan::{Plan, PlanningPhase, Task};
use kiln_types::tool_result::ToolReply;
use serde_json::{Value, json};

use super::Builder;
use super::execute::task_schema;
use crate::codeact::tools::failure;
use crate::subagent::{Kin, LOOP_TOOLS};

const ADD_TASK: &str = "add_task";
const FINISH_PLAN: &str = "finish_plan";

/// Model turns one planning may take.
pub(crate) const MAX_ROUNDS: u32 = 8;
/// Refused `add_task` / `finish_plan` calls before planning gives up.
pub(crate) const MAX_RETRIES: u32 = 3;

/// `create_plan`.
pub(crate) struct CreatePlan(pub Rc<Kin>);

impl CreatePlan {
    #[must_use]
    pub(crate) fn spec() -> CapabilitySpec {
        CapabilitySpec {
            name: CREATE_PLAN.into(),
            description: "Plans the objective as tasks that run in parallel where they can (each task's steps are sub-agents over your tools), and answers the plan without running anything. Show it to the person; it runs only when they switch out of plan mode and you call execute_plan with it.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {"objective": {"type": "string", "description": "What the plan must achieve, in full."}},
                "required": ["objective"]
            }),
            category: Category::Read,
            result: json!({}),
            source: Source::Builtin,
        }
    }
}

impl Implementation for CreatePlan {
    fn call(
        &self,
        args: Value,
        _context: CallContext,
        _permit: Permit,
    ) -> LocalBoxFuture<'static, ToolReply> {
        let kin = self.0.clone();
        Box::pin(async move {
            let objective = args
                .get("objective")
                .and_then(Value::as_str)
                .filter(|text| !text.trim().is_empty())
                .ok_or_else(|| {
                    failure(
                        "invalid_arguments",
                        "create_plan needs `objective`, a string".into(),
                    )
                })?
                .to_owned();
            let plan = plan(&kin, &objective, kin.preamble.as_deref())
                .await
                .map_err(|why| failure("planning_failed", why))?
                .plan;
            Ok(json!({
                "plan": plan,
                "summary": summary(&plan),
                "note": format!("Nothing has run. Show this plan to the person. To run it, {EXECUTE_PLAN} takes the plan itself as its arguments ({{title, tasks}}), edited as they ask; plan mode does not allow it, so they must change the mode first."),
            }))
        })
    }
}

/// "5 tasks, 7 steps, 3 parallelizable": the parallel width is the most
/// tasks at one depth of the DAG.
#[must_use]
pub(crate) fn summary(plan: &Plan) -> String {
    let mut depth: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for task in &plan.tasks {
        let level = task
            .depends_on
            .iter()
            .map(|dep| depth.get(dep.as_str()).copied().unwrap_or(0) + 1)
            .max()
            .unwrap_or(0);
        depth.insert(&task.id, level);
    }
    let mut widths = std::collections::BTreeMap::new();
    for level in depth.values() {
        *widths.entry(*level).or_insert(0_usize) += 1;
    }
    let width = widths.values().copied().max().unwrap_or(0);
    format!(
        "{} task{}, {} step{}, {width} parallelizable",
        plan.tasks.len(),
        if plan.tasks.len() == 1 { "" } else { "s" },
        plan.step_count(),
        if plan.step_count() == 1 { "" } else { "s" },
    )
}

/// The planner's contract, over the tools steps can use.
#[must_use]
pub(crate) fn contract(tools: &[CapabilitySpec]) -> String {
    let mut text = String::from(
        "You are Kiln's task planner. Break the objective into a plan of tasks that can run in parallel, each made of steps. Every step is carried out by a sub-agent that acts by writing JavaScript over the tools below; it sees only its own instructions and the results it is pointed at.\n\n\
         ## How to plan\n\
         - Call add_task once per task: {id, title, depends_on, steps: [{id, instructions, depends_on, tools?, output_schema?}]}. A refused call says why: fix it and call add_task again.\n\
         - Ids are short snake_case names, unique across the whole plan; prefix a step's id with its task's (search_web in task search).\n\
         - A task depends on another only when it needs that task's result; independent tasks run at the same time, so keep dependencies real and the plan wide.\n\
         - A step depends only on steps of its own task. Write instructions complete on their own: what to do, with which tool, what to answer.\n\
         - Give a step an output_schema (a JSON Schema) when later work needs its result as data.\n\
         - Size the plan to the objective: a small objective is one task with one step.\n\
         - Do NOT add a task or step that aggregates, summarizes or synthesizes the other results into the final answer: the agent that runs the plan writes the answer itself from the results.\n\
         - When every task is added, call finish_plan({title}).\n",
    );
    let usable: Vec<&CapabilitySpec> = tools
        .iter()
        .filter(|spec| !LOOP_TOOLS.contains(&spec.name.as_str()) || spec.name == "run_subtask")
        .collect();
    if usable.is_empty() {
        text.push_str(
            "\n## No Execution Tools\nThe steps have no tools: plan only what a model can do from its own knowledge (reasoning, writing, recalling). Do not plan searches, file work or anything that needs the outside world.\n",
        );
    } else {
        text.push_str(
            "\n## Tools the steps can use (name them in a step's `tools` to restrict it)\n",
        );
        for spec in usable {
            let line: String = spec.description.chars().take(160).collect();
            let _ = writeln!(text, "- {}: {line}", spec.name);
        }
    }
    text
}

fn tool_defs() -> Vec<ToolDef> {
    vec![
        ToolDef {
            name: ADD_TASK.into(),
            description: "Adds one task to the plan (checked at once; a refusal says what to fix)."
                .into(),
            input_schema: task_schema(),
        },
        ToolDef {
            name: FINISH_PLAN.into(),
            description: "Ends planning once every task is added.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {"title": {"type": "string", "description": "The plan's title."}},
                "required": ["title"]
            }),
        },
    ]
}

fn planning(kin: &Kin, phase: PlanningPhase, status: &str, content: String) {
    (kin.sink)(AgentEvent::PlanningUpdate {
        phase,
        status: status.into(),
        content,
    });
}

/// A plan and how planning went.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    pub plan: Plan,
    /// `add_task` and `finish_plan` calls the model made.
    pub calls: u32,
    /// The calls the builder refused.
    pub rejected: u32,
    /// Model turns.
    pub rounds: u32,
}

/// Plans `objective` with the run's provider and model on the caller's
/// permit, `preamble` before the contract.
///
/// # Errors
///
/// Why no plan came: the budget's refusal, the provider's error, too many
/// refused calls, or rounds without a finished plan.
pub async fn plan(
    kin: &Rc<Kin>,
    objective: &str,
    preamble: Option<&str>,
) -> Result<Planned, String> {
    planning(
        kin,
        PlanningPhase::Initialization,
        "ok",
        "Starting parallel task planning...".into(),
    );
    let _permit = kin.permit.child().await;
    let belt: Vec<CapabilitySpec> = kin
        .base
        .specs()
        .filter(|spec| spec.name != CREATE_PLAN)
        .cloned()
        .collect();
    let tools: Vec<String> = belt.iter().map(|spec| spec.name.clone()).collect();
    let mut system = String::new();
    if let Some(preamble) = preamble.filter(|text| !text.trim().is_empty()) {
        system.push_str(preamble);
        system.push_str("\n\n");
    }
    system.push_str(&contract(&belt));
    let mut view = vec![Message::User {
        text: format!("Objective: {objective}"),
    }];
    let mut builder = Builder::new(Some(&tools));
    let mut retries = 0;
    let mut calls = 0;
    let mut nudged = false;
    for round in 1..=MAX_ROUNDS {
        planning(
            kin,
            PlanningPhase::Generation,
            "running",
            if retries == 0 {
                "Generating parallel plan...".into()
            } else {
                format!("Retry attempt {}/{}...", retries + 1, MAX_RETRIES + 1)
            },
        );
        let request = ChatRequest {
            messages: std::iter::once(Message::System {
                text: system.clone(),
            })
            .chain(view.iter().cloned())
            .collect(),
            tools: tool_defs(),
            options: kin.options.clone(),
        };
        let started = kin.clock.now_ms();
        let spent_before = kin.budget.spend().calls.len();
        let stream = kiln_providers::turn(
            &*kin.provider,
            request,
            Some(kin.budget.clone()),
            Some(kin.cancel.clone()),
        );
        let (done, failed): (Option<FinalMessage>, _) =
            match kiln_providers::final_message(stream).await {
                Ok(done) => (done, None),
                Err(error) => (None, Some(error)),
            };
        crate::codeact::announce_call(
            &kin.sink,
            &*kin.provider,
            &kin.options.model,
            &kin.budget,
            spent_before,
            done.as_ref(),
            started,
            &*kin.clock,
        );
        if let Some(error) = failed {
            let why = format!("planning stopped: the provider failed ({error})");
            planning(kin, PlanningPhase::Generation, "failed", why.clone());
            return Err(why);
        }
        let Some(message) = done else {
            return Err("planning stopped: the provider's stream ended without its message".into());
        };
        if let Some(stop) = message
            .stop
            .as_ref()
            .filter(|stop| stop.reason.is_refusal())
        {
            let why = format!(
                "planning stopped: {}",
                stop.message
                    .clone()
                    .unwrap_or_else(|| "the run's budget refused the turn".into())
            );
            planning(kin, PlanningPhase::Generation, "failed", why.clone());
            return Err(why);
        }
        planning(
            kin,
            PlanningPhase::Generation,
            "ok",
            format!("Round {round}: {} call(s)", message.tool_calls.len()),
        );
        view.push(Message::Assistant {
            text: message.text.clone(),
            tool_calls: message.tool_calls.clone(),
        });
        if message.tool_calls.is_empty() {
            if nudged {
                let said: String = message.text.trim().chars().take(200).collect();
                let why = format!(
                    "planning ended: the model answered in prose instead of calling add_task, twice (its last message: \u{201c}{said}\u{201d})"
                );
                planning(kin, PlanningPhase::Complete, "failed", why.clone());
                return Err(why);
            }
            nudged = true;
            view.push(Message::User {
                text: "Plan by calling add_task for each task, then finish_plan({title}). Do not answer in prose.".into(),
            });
            continue;
        }
        let mut finished = None;
        for call in &message.tool_calls {
            calls += 1;
            let (content, refused) = answer_call(call, &mut builder, finished.is_some());
            if let Some(issues) = &refused {
                retries += 1;
                planning(
                    kin,
                    PlanningPhase::Validation,
                    "failed",
                    format!("Plan validation failed: {issues}"),
                );
            } else if call.name == FINISH_PLAN {
                let title = call
                    .arguments
                    .get("title")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                finished = builder.finish(title).ok();
            }
            view.push(Message::Tool {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content: content.to_string(),
                is_error: refused.is_some(),
            });
        }
        if let Some(plan) = finished {
            planning(kin, PlanningPhase::Validation, "ok", "Plan is valid".into());
            planning(
                kin,
                PlanningPhase::Complete,
                "ok",
                format!("Plan created: {}", summary(&plan)),
            );
            return Ok(Planned {
                plan,
                calls,
                rejected: retries,
                rounds: round,
            });
        }
        if retries > MAX_RETRIES {
            let why = format!("planning gave up after {retries} refused calls");
            planning(kin, PlanningPhase::Complete, "failed", why.clone());
            return Err(why);
        }
    }
    let why = format!("planning ended after {MAX_ROUNDS} rounds without finish_plan");
    planning(kin, PlanningPhase::Complete, "failed", why.clone());
    Err(why)
}

/// Answers one planner call: the builder's verdict as the call's result,
/// and the issues when it refused.
fn answer_call(call: &ToolCall, builder: &mut Builder, already: bool) -> (Value, Option<String>) {
    if already {
        return (
            json!({"error": {"code": "not_run", "message": "the plan is already finished"}}),
            None,
        );
    }
    let refuse = |issues: Vec<kiln_types::plan::PlanIssue>| {
        let words: Vec<String> = issues.iter().map(|issue| issue.message.clone()).collect();
        let text = words.join("; ");
        (
            json!({"error": {"code": "invalid_plan", "message": text, "issues": issues}}),
            Some(text),
        )
    };
    match call.name.as_str() {
        ADD_TASK => match serde_json::from_value::<Task>(call.arguments.clone()) {
            Ok(task) => {
                let id = task.id.clone();
                match builder.add_task(task) {
                    Ok(()) => (
                        json!({"ok": true, "task": id, "tasks_so_far": builder.tasks().len()}),
                        None,
                    ),
                    Err(issues) => refuse(issues),
                }
            }
            Err(error) => {
                let text = format!(
                    "add_task's arguments are not a task ({{id, title, depends_on, steps}}): {error}"
                );
                (
                    json!({"error": {"code": "invalid_arguments", "message": text}}),
                    Some(text),
                )
            }
        },
        FINISH_PLAN => {
            let title = call
                .arguments
                .get("title")
                .and_then(Value::as_str)
                .unwrap_or_default();
            match builder.finish(title) {
                Ok(plan) => (json!({"ok": true, "summary": summary(&plan)}), None),
                Err(issues) => refuse(issues),
            }
        }
        other => {
            let text = format!("`{other}` is not a planning tool; call add_task or finish_plan");
            (
                json!({"error": {"code": "tool_unavailable", "message": text}}),
                Some(text),
            )
        }
    }
}

//! `kiln eval task-planner` and `kiln eval subtask` (reference/000, "Eval
//! suite"), runnable against any provider and scored structurally.
//!
//! - **task-planner** runs the planner behind `create_plan`
//!   ([`kiln_agent::create_plan`]) over a library of tools that are never
//!   executed, and scores the plan it commits: the builder already refused
//!   anything broken, so what is judged is shape — the number of tasks for
//!   the objective, parallel width, real dependencies, tool routing, and the
//!   rule that no task synthesizes the answer. Per case: tasks, steps,
//!   width, critical-path depth, planner calls, refused calls; in all, the
//!   success rate and the clean rate (plans made without one refused call).
//! - **subtask** runs CodeAct turns that have `run_subtask` over the
//!   deterministic tables of [`crate::codeact`], and scores the answer exactly
//!   and who did the work: a case passes only when its lookups were made by
//!   children (their calls are tagged with their depth in the events), at
//!   least as many as the case asks for.
//!
//! The cases are data: the planner's in `cases/planner.json`, the
//! sub-agent suite's in `cases/subtask.json` ([`crate::cases`]), each
//! sub-agent case with its tools in full, as a CodeAct case carries them.
//! The tool library the planner sees (never run), and the scoring, stay
//! code.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use futures::future::LocalBoxFuture;
use kiln_capabilities::{
    CallContext, CapabilitySpec, Category, Implementation, Permit, Registry, Source,
};
use kiln_providers::budget::{BudgetLimits, RunBudget};
use kiln_providers::cost::PriceCatalog;
use kiln_providers::{ChatOptions, Message, Provider};
use kiln_types::agent::{AgentEvent, Guards};
use kiln_types::cancel::AbortSignal;
use kiln_types::plan::Plan;
use kiln_types::tool_result::{CallOutcome, ToolFailure, ToolReply};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::cases::CasesError;
use crate::codeact::{EvalTool, normalize};
use kiln_agent::{AgentRequest, AgentSetup, Background, Compaction, Kin, run_agent};
use kiln_run::SandboxRunner;
use kiln_run::dag::{Node, critical_path};

/// A planner case: an objective, the tools on offer and what its plan must
/// show.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlannerCase {
    pub name: String,
    pub objective: String,
    /// The tool library's names on offer (none: the no-tools contract).
    pub tools: Vec<String>,
    pub min_tasks: usize,
    pub max_tasks: usize,
    /// The least parallel width (most tasks at one depth).
    pub min_width: usize,
    /// The least critical-path depth, in tasks.
    pub min_depth: usize,
    /// Tools some step must name.
    pub routes: Vec<String>,
}

/// The tool library a planner sees: names and descriptions only. They are
/// never executed here.
fn library() -> Vec<CapabilitySpec> {
    let tool = |name: &str, description: &str, category: Category| CapabilitySpec {
        name: name.into(),
        description: description.into(),
        input_schema: json!({"type": "object"}),
        category,
        result: json!({}),
        source: Source::Host {
            host: "eval".into(),
        },
    };
    vec![
        tool(
            "web_search",
            "Searches the web; answers [{title, url, snippet}].",
            Category::External,
        ),
        tool(
            "http_request",
            "Fetches a URL (GET or POST) and answers its status, headers and body.",
            Category::External,
        ),
        tool(
            "file_read",
            "Reads a workspace file as text.",
            Category::Read,
        ),
        tool("file_write", "Writes a workspace file.", Category::Write),
        tool("file_list", "Lists a workspace folder.", Category::Read),
    ]
}

struct Never;

impl Implementation for Never {
    fn call(&self, _: Value, _: CallContext, _: Permit) -> LocalBoxFuture<'static, ToolReply> {
        Box::pin(async {
            Err(ToolFailure {
                code: "not_run".into(),
                message: "the planner eval never runs a tool".into(),
                detail: None,
                outcome: CallOutcome::Error,
            })
        })
    }
}

const PLANNER_FILE: &str = "cases/planner.json";

const PLANNER: &str = include_str!("../cases/planner.json");

/// The planner suite: `cases/planner.json`, parsed.
///
/// # Errors
///
/// The file does not parse.
pub fn planner_cases() -> Result<Vec<PlannerCase>, CasesError> {
    crate::cases::parse(PLANNER_FILE, PLANNER)
}

/// How a planner case went.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannerResult {
    pub name: String,
    pub passed: bool,
    /// What did not hold, or why no plan came.
    pub problems: Vec<String>,
    pub tasks: usize,
    pub steps: usize,
    pub width: usize,
    pub depth: usize,
    pub calls: u32,
    pub rejected: u32,
}

/// Words that give away a task or step that assembles the final answer.
const SYNTHESIS: &[&str] = &[
    "synthes",
    "aggregat",
    "final answer",
    "final report",
    "summarize the results",
    "summarise the results",
    "combine the results",
    "compile the results",
];

/// The plan's width and depth (tasks at one depth; the longest chain).
#[must_use]
pub fn shape(plan: &Plan) -> (usize, usize) {
    let nodes: Vec<Node> = plan
        .tasks
        .iter()
        .map(|task| Node {
            id: task.id.clone(),
            depends_on: task.depends_on.clone(),
        })
        .collect();
    let depth = critical_path(&nodes, |_| 1.0) as usize;
    let mut level: BTreeMap<&str, usize> = BTreeMap::new();
    for task in &plan.tasks {
        let at = task
            .depends_on
            .iter()
            .map(|dep| level.get(dep.as_str()).copied().unwrap_or(0) + 1)
            .max()
            .unwrap_or(0);
        level.insert(&task.id, at);
    }
    let mut widths: BTreeMap<usize, usize> = BTreeMap::new();
    for at in level.values() {
        *widths.entry(*at).or_default() += 1;
    }
    (widths.values().copied().max().unwrap_or(0), depth)
}

/// Scores one committed plan against its case.
#[must_use]
pub fn score_plan(case: &PlannerCase, plan: &Plan) -> Vec<String> {
    let mut problems = Vec::new();
    let (width, depth) = shape(plan);
    let tasks = plan.tasks.len();
    if tasks < case.min_tasks || tasks > case.max_tasks {
        problems.push(format!(
            "{tasks} task(s), expected {} to {}",
            case.min_tasks, case.max_tasks
        ));
    }
    if width < case.min_width {
        problems.push(format!(
            "parallel width {width}, expected at least {}",
            case.min_width
        ));
    }
    if depth < case.min_depth {
        problems.push(format!(
            "critical path of {depth} task(s), expected at least {}",
            case.min_depth
        ));
    }
    for route in &case.routes {
        let routed = plan.tasks.iter().flat_map(|task| &task.steps).any(|step| {
            step.tools
                .as_ref()
                .is_some_and(|tools| tools.iter().any(|tool| tool == route))
                || step.instructions.contains(route.as_str())
        });
        if !routed {
            problems.push(format!("no step routes its work to `{route}`"));
        }
    }
    for task in &plan.tasks {
        let words = std::iter::once(task.title.to_lowercase()).chain(
            task.steps
                .iter()
                .map(|step| step.instructions.to_lowercase()),
        );
        if let Some(word) = words
            .flat_map(|text| SYNTHESIS.iter().filter(move |word| text.contains(**word)))
            .next()
        {
            problems.push(format!(
                "task `{}` synthesizes the answer (\u{201c}{word}\u{201d}): that is the calling loop's job",
                task.id
            ));
        }
    }
    if case.tools.is_empty() {
        let named: Vec<&str> = plan
            .tasks
            .iter()
            .flat_map(|task| &task.steps)
            .filter_map(|step| step.tools.as_ref())
            .flatten()
            .map(String::as_str)
            .collect();
        if !named.is_empty() {
            problems.push(format!(
                "the belt is empty but steps name tools: {}",
                named.join(", ")
            ));
        }
    }
    problems
}

/// A loop's kin for work outside a turn (the planner eval): `registry` as
/// its belt, the auto mode with nobody to ask, its own budget and permit.
pub async fn standalone_kin(
    provider: Rc<dyn Provider>,
    model: &str,
    registry: Registry,
    runner: Rc<dyn SandboxRunner>,
    sink: kiln_agent::Sink,
) -> Rc<Kin> {
    let clock: Rc<dyn kiln_http::Clock> = Rc::new(kiln_http::SystemClock);
    let budget = RunBudget::new(
        BudgetLimits::default(),
        Rc::new(PriceCatalog::builtin()),
        clock.clone(),
    );
    let permit = budget.permits().acquire().await;
    let settings = kiln_types::permission::GateSettings {
        mode: kiln_capabilities::Mode::Auto,
        ..Default::default()
    };
    let gate = kiln_capabilities::Gate::headless("kiln eval", settings)
        .unwrap_or_else(|_| kiln_capabilities::Gate::fail_closed("kiln eval"));
    Rc::new(Kin {
        provider,
        options: ChatOptions::new(model),
        runner,
        clock,
        budget,
        base: Rc::new(registry),
        gate,
        secrets: kiln_capabilities::SecretScope::new(),
        limits: kiln_types::RunLimits::default(),
        entrance: "kiln eval".into(),
        random: Rc::new(|| [3; 8]),
        memory: None,
        memory_tools: None,
        cancel: AbortSignal::new(),
        sink,
        depth: 0,
        max_depth: kiln_agent::MAX_DEPTH,
        me: None,
        ids: Rc::default(),
        permit: Rc::new(permit),
        background: Rc::new(Background::new()),
        current_call: RefCell::new(String::new()),
        guards: Guards::default(),
        child_turns: kiln_agent::DEFAULT_CHILD_TURNS,
        on_progress: None,
        max_concurrent: kiln_run::dag::DEFAULT_MAX_CONCURRENT,
        preamble: None,
        team: Rc::default(),
        bench: None,
        brought: Rc::default(),
    })
}

/// Runs the planner cases one after another.
pub async fn run_planner(
    cases: &[PlannerCase],
    provider: Rc<dyn Provider>,
    model: &str,
    runner: Rc<dyn SandboxRunner>,
) -> Vec<PlannerResult> {
    let mut results = Vec::new();
    for case in cases {
        let mut registry = Registry::new();
        for spec in library()
            .into_iter()
            .filter(|spec| case.tools.contains(&spec.name))
        {
            let _ = registry.add(spec, Rc::new(Never));
        }
        let kin = standalone_kin(
            provider.clone(),
            model,
            registry,
            runner.clone(),
            Rc::new(|_| {}),
        )
        .await;
        let result = match kiln_agent::create_plan(&kin, &case.objective, None).await {
            Ok(planned) => {
                let problems = score_plan(case, &planned.plan);
                let (width, depth) = shape(&planned.plan);
                PlannerResult {
                    name: case.name.clone(),
                    passed: problems.is_empty(),
                    problems,
                    tasks: planned.plan.tasks.len(),
                    steps: planned.plan.step_count(),
                    width,
                    depth,
                    calls: planned.calls,
                    rejected: planned.rejected,
                }
            }
            Err(why) => PlannerResult {
                name: case.name.clone(),
                passed: false,
                problems: vec![why],
                tasks: 0,
                steps: 0,
                width: 0,
                depth: 0,
                calls: 0,
                rejected: 0,
            },
        };
        results.push(result);
    }
    results
}

/// The planner table: a row per case, then the success and clean rates.
#[must_use]
pub fn planner_table(results: &[PlannerResult]) -> String {
    let mut text = String::from(
        "| case | result | tasks | steps | width | depth | calls | refused |\n|---|---|---|---|---|---|---|---|\n",
    );
    for result in results {
        let verdict = if result.passed {
            "pass".to_owned()
        } else {
            format!("FAIL ({})", result.problems.join("; ").replace('\n', " "))
        };
        text.push_str(&format!(
            "| {} | {verdict} | {} | {} | {} | {} | {} | {} |\n",
            result.name,
            result.tasks,
            result.steps,
            result.width,
            result.depth,
            result.calls,
            result.rejected
        ));
    }
    let count = results.len().max(1) as f64;
    let passed = results.iter().filter(|result| result.passed).count();
    let clean = results
        .iter()
        .filter(|result| result.tasks > 0 && result.rejected == 0)
        .count();
    text.push_str(&format!(
        "\nsuccess {passed}/{} ({:.0}%) · clean {clean}/{} ({:.0}%): plans made without one refused call\n",
        results.len(),
        100.0 * passed as f64 / count,
        results.len(),
        100.0 * clean as f64 / count
    ));
    text
}

/// A sub-agent case: a task the turn should hand to children.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubtaskCase {
    pub name: String,
    pub objective: String,
    /// Its tools in full, as a CodeAct case carries them.
    pub tools: Vec<EvalTool>,
    pub expected: String,
    /// The least number of children that must have made lookups.
    pub min_children: usize,
}

const SUBTASK_FILE: &str = "cases/subtask.json";

const SUBTASK: &str = include_str!("../cases/subtask.json");

/// The sub-agent suite, over the CodeAct eval's tables:
/// `cases/subtask.json`, parsed.
///
/// # Errors
///
/// The file does not parse.
pub fn subtask_cases() -> Result<Vec<SubtaskCase>, CasesError> {
    crate::cases::parse(SUBTASK_FILE, SUBTASK)
}

/// How a sub-agent case went.
#[derive(Debug, Clone, PartialEq)]
pub struct SubtaskResult {
    pub name: String,
    pub passed: bool,
    pub answer: String,
    /// Children whose own calls reached a case's tool.
    pub delegated: usize,
    /// Calls of a case's tool made by the turn itself (depth 0).
    pub own_calls: usize,
    pub children: usize,
    pub turns: u32,
    pub stop: Option<String>,
}

/// The tools each loop called, by child id (`""` for the turn): from
/// direct calls and the calls inside its actions.
fn calls_by_loop(events: &[AgentEvent]) -> BTreeMap<String, Vec<String>> {
    let mut calls: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for event in events {
        let (who, event) = match event {
            AgentEvent::Child { child, event, .. } => (child.clone(), event.as_ref()),
            other => (String::new(), other),
        };
        if let AgentEvent::ToolResultUpdate { name, run, .. } = event {
            let entry = calls.entry(who).or_default();
            match run {
                Some(run) => entry.extend(
                    run.get("calls")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|call| call.get("tool").and_then(Value::as_str))
                        .map(str::to_owned),
                ),
                None => entry.push(name.clone()),
            }
        }
    }
    calls
}

/// Runs the sub-agent cases one after another.
pub async fn run_subtasks(
    cases: &[SubtaskCase],
    provider: Rc<dyn Provider>,
    model: &str,
    runner: Rc<dyn SandboxRunner>,
    max_turns: u32,
) -> Vec<SubtaskResult> {
    let mut results = Vec::new();
    for case in cases {
        let tools = case.tools.clone();
        let names: Vec<String> = tools.iter().map(|tool| tool.name.clone()).collect();
        let environment = crate::codeact::table_environment(tools, 5);
        let events = Rc::new(RefCell::new(Vec::new()));
        let sink = {
            let events = events.clone();
            Rc::new(move |event| events.borrow_mut().push(event))
        };
        let mut run = kiln_run::RunRequest::new("");
        run.mode = Some(kiln_capabilities::Mode::Auto);
        let request = AgentRequest {
            run,
            provider: provider.clone(),
            options: ChatOptions::new(model),
            messages: vec![Message::User {
                text: format!(
                    "{} Answer with the answer alone: no words, no units.",
                    case.objective
                ),
            }],
            system: None,
            output_schema: None,
            guards: Guards {
                max_turns,
                ..Guards::default()
            },
            budget: BudgetLimits::default(),
            direct: Vec::new(),
            compaction: Compaction::default(),
            profile: None,
        };
        let setup = AgentSetup {
            environment: &environment,
            runner: runner.clone(),
            person: None,
            clock: Rc::new(kiln_http::SystemClock),
            sink,
            cancel: AbortSignal::new(),
        };
        let outcome = run_agent(request, setup).await;
        let events = events.borrow().clone();
        let calls = calls_by_loop(&events);
        let uses_case_tool =
            |called: &Vec<String>| called.iter().filter(|tool| names.contains(tool)).count();
        let delegated = calls
            .iter()
            .filter(|(who, called)| !who.is_empty() && uses_case_tool(called) > 0)
            .count();
        let own_calls = calls.get("").map_or(0, uses_case_tool);
        let children = calls.keys().filter(|who| !who.is_empty()).count();
        let (answer, turns, stop) = match outcome {
            Ok(outcome) => (
                normalize(&outcome.result.text),
                outcome.result.turns,
                (!outcome.result.stop.is_success()).then(|| {
                    outcome
                        .result
                        .stop
                        .code
                        .clone()
                        .unwrap_or_else(|| "stopped".into())
                }),
            ),
            Err(error) => (String::new(), 0, Some(error.to_string())),
        };
        results.push(SubtaskResult {
            name: case.name.clone(),
            passed: stop.is_none() && answer == case.expected && delegated >= case.min_children,
            answer,
            delegated,
            own_calls,
            children,
            turns,
            stop,
        });
    }
    results
}

/// The sub-agent table.
#[must_use]
pub fn subtask_table(results: &[SubtaskResult]) -> String {
    let mut text = String::from(
        "| case | result | answer | children that looked up | lookups by the turn itself | turns |\n|---|---|---|---|---|---|\n",
    );
    for result in results {
        let verdict = match (&result.stop, result.passed) {
            (_, true) => "pass".to_owned(),
            (Some(stop), _) => format!("FAIL ({stop})"),
            (None, false) => "FAIL".to_owned(),
        };
        text.push_str(&format!(
            "| {} | {verdict} | {} | {} of {} | {} | {} |\n",
            result.name,
            {
                let line: String = result.answer.replace('\n', " ").chars().take(60).collect();
                if result.answer.chars().count() > 60 {
                    format!("{line}…")
                } else {
                    line
                }
            },
            result.delegated,
            result.children,
            result.own_calls,
            result.turns
        ));
    }
    let passed = results.iter().filter(|result| result.passed).count();
    text.push_str(&format!(
        "\nsuccess {passed}/{} ({:.0}%)\n",
        results.len(),
        100.0 * passed as f64 / results.len().max(1) as f64
    ));
    text
}

//! The CodeAct loop's figures for `cargo xtask bench`, measured the same way
//! wherever the loop runs: natively over the sandbox in process
//! (`examples/codeact.rs`) and in the runtime worker over its pool of
//! sandbox workers (its `codeact` bench hook).
//!
//! A job of `turns` model turns, each a program calling one belt tool, runs
//! over a scripted provider; [`Timed`] wraps the runner to see when each
//! action enters and leaves it. The **loop overhead per turn** is the job's
//! wall time less the provider's (each `llm_call`'s duration) and the
//! runner's, divided by the turns. **`execute_code` → first statement** is
//! the time from the model's stream ending to the runner being entered, plus
//! the sandbox's own `start_ms` and `context_ms`, plus — when the sandbox is
//! another worker — half of the time the runner took beyond the run's own
//! duration (the messages' hops there and back, taken as equal).
//!
//! [`Timed`], [`belt`] and [`environment`] are `kiln_run::bench`'s, shared
//! with the code nodes' figures (`kiln-nodes`' `examples/nodes.rs`).

use std::cell::RefCell;
use std::rc::Rc;

use futures::future::LocalBoxFuture;
use kiln_providers::budget::BudgetLimits;
use kiln_providers::scripted::{Reply, Scripted};
use kiln_providers::{ChatOptions, Message};
use kiln_types::agent::{AgentEvent, Guards};
use kiln_types::cancel::AbortSignal;
use serde::Serialize;
use serde_json::{Value, json};

use crate::codeact::history::Compaction;
use crate::codeact::{AgentRequest, AgentSetup, run_agent};
pub use kiln_run::bench::{Inside, Now, Timed, belt, environment};
use kiln_run::{Environment, RunRequest, SandboxRunner};

/// A job of `turns` turns over `provider`, in the auto mode (nothing asks).
#[must_use]
pub fn request(provider: Rc<Scripted>, turns: u32) -> AgentRequest {
    let mut run = RunRequest::new("");
    run.mode = Some(kiln_capabilities::Mode::Auto);
    AgentRequest {
        run,
        provider,
        options: ChatOptions::new("scripted"),
        messages: vec![Message::User {
            text: "Count.".into(),
        }],
        system: None,
        output_schema: None,
        guards: Guards {
            max_turns: turns + 1,
            no_progress: turns + 1,
            ..Guards::default()
        },
        budget: BudgetLimits::default(),
        direct: Vec::new(),
        compaction: Compaction::default(),
        profile: None,
    }
}

/// The loop's figures, in milliseconds.
#[derive(Debug, Clone, Serialize)]
pub struct LoopFigures {
    pub turns: u32,
    pub actions: u32,
    pub total_ms: f64,
    pub sandbox_ms: f64,
    pub provider_ms: f64,
    pub overhead_per_turn_ms: f64,
    pub first_statement_median_ms: f64,
    pub first_statement_max_ms: f64,
}

/// Runs the job of `turns` program turns (then an answer) in `environment`,
/// whose belt must hold `server_tool_1` ([`belt`]), each action on `runner`;
/// `hops`: the sandbox is another worker, so the messages' time counts in
/// an action's start.
///
/// # Errors
///
/// The loop refused the request.
pub async fn codeact_loop(
    environment: &Environment,
    runner: Rc<dyn SandboxRunner>,
    turns: u32,
    hops: bool,
    now: Now,
) -> Result<LoopFigures, String> {
    let mut replies: Vec<Reply> = (0..turns)
        .map(|n| {
            Reply::code(&format!(
                "const r = await tools.server_tool_1({{id: '{n}'}}); return r.ok"
            ))
        })
        .collect();
    replies.push(Reply::text("Done."));
    let provider = Scripted::new(replies);
    let timed = Rc::new(Timed::new(runner, now.clone()));
    let llm = Rc::new(RefCell::new(Vec::<(f64, f64)>::new()));
    let setup = AgentSetup {
        environment,
        runner: timed.clone(),
        person: None,
        clock: Rc::new(kiln_http::SystemClock),
        sink: Rc::new({
            let llm = llm.clone();
            let now = now.clone();
            move |event| {
                if let AgentEvent::LlmCall { duration_ms, .. } = event {
                    llm.borrow_mut().push((now(), duration_ms));
                }
            }
        }),
        cancel: AbortSignal::new(),
    };
    let started = now();
    let outcome = run_agent(request(provider, turns), setup)
        .await
        .map_err(|error| error.0)?;
    let total_ms = now() - started;
    let inside = timed.take();
    let sandbox_ms: f64 = inside.iter().map(|action| action.took).sum();
    let provider_ms: f64 = llm.borrow().iter().map(|(_, ms)| ms).sum();
    let turns_taken = outcome.result.turns.max(1);
    let mut starts: Vec<f64> = llm
        .borrow()
        .iter()
        .zip(inside.iter())
        .map(|((streamed, _), action)| {
            let hop = if hops {
                ((action.took - action.duration) / 2.0).max(0.0)
            } else {
                0.0
            };
            action.entered - streamed + action.start + hop
        })
        .collect();
    starts.sort_by(f64::total_cmp);
    Ok(LoopFigures {
        turns: outcome.result.turns,
        actions: outcome.result.actions,
        total_ms,
        sandbox_ms,
        provider_ms,
        overhead_per_turn_ms: (total_ms - sandbox_ms - provider_ms) / f64::from(turns_taken),
        first_statement_median_ms: starts.get(starts.len() / 2).copied().unwrap_or_default(),
        first_statement_max_ms: starts.last().copied().unwrap_or_default(),
    })
}

/// A provider whose every reply waits its conversation's cost on `clock`
/// first: a plan step's cost is read from its prompt (`(`ID`)`), through
/// `cost`; the turn itself calls `execute_plan` with `plan`, then answers.
struct Costed {
    plan: Value,
    cost: Cost,
    clock: Rc<dyn kiln_http::Clock>,
}

impl kiln_providers::Provider for Costed {
    fn kind(&self) -> kiln_providers::ProviderKind {
        kiln_providers::ProviderKind::OpenAi
    }

    fn base_url(&self) -> &str {
        "bench:"
    }

    fn stream(&self, request: kiln_providers::ChatRequest) -> kiln_providers::EventStream {
        use futures::StreamExt as _;
        let asked = request
            .messages
            .iter()
            .find_map(|message| match message {
                Message::User { text } => Some(text.clone()),
                _ => None,
            })
            .unwrap_or_default();
        let step = asked
            .split_once("(`")
            .and_then(|(_, rest)| rest.split_once("`)"))
            .map(|(id, _)| id.to_owned());
        let answered = request
            .messages
            .iter()
            .any(|message| matches!(message, Message::Tool { .. }));
        let (reply, wait) = match step {
            Some(step) => (Reply::text("done"), (self.cost)(&step)),
            None if answered => (Reply::text("The plan ran."), 0.0),
            None => (
                Reply::call(kiln_types::agent::EXECUTE_PLAN, self.plan.clone()),
                0.0,
            ),
        };
        let inner = Scripted::new([reply]).stream(request);
        let sleep = self.clock.sleep(wait as u64);
        futures::stream::once(sleep)
            .filter_map(|()| async { None })
            .chain(inner)
            .boxed_local()
    }

    fn models(
        &self,
    ) -> LocalBoxFuture<
        'static,
        Result<Vec<kiln_providers::ModelInfo>, kiln_providers::ProviderError>,
    > {
        Box::pin(async { Ok(Vec::new()) })
    }
}

/// What each node of a bench plan costs, in milliseconds.
pub type Cost = Rc<dyn Fn(&str) -> f64>;

/// The plans' figures, in milliseconds.
#[derive(Debug, Clone, Serialize)]
pub struct PlanFigures {
    /// The scheduler alone: nodes of no work, in a chain and side by side.
    pub scheduler_per_node_ms: f64,
    pub scheduler_nodes: usize,
    /// A plan of `tasks` tasks of one step each, every step a CodeAct child
    /// whose one model turn takes its task's cost.
    pub tasks: usize,
    pub measured_ms: f64,
    pub critical_path_ms: f64,
    pub barrier_rounds_ms: f64,
    /// What the run took beyond the critical path, per task.
    pub overhead_per_task_ms: f64,
}

/// 50 tasks in ten layers of five, each after one or two of the layer
/// before, costing 10 to 50 ms; its task nodes and their costs.
#[must_use]
pub fn fifty_tasks() -> (Value, Vec<kiln_run::dag::Node>, Cost) {
    let mut tasks = Vec::new();
    let mut nodes = Vec::new();
    for layer in 0..10_usize {
        for slot in 0..5_usize {
            let id = format!("t{layer}_{slot}");
            let depends_on: Vec<String> = if layer == 0 {
                Vec::new()
            } else {
                let mut deps = vec![format!("t{}_{slot}", layer - 1)];
                if (layer + slot) % 2 == 0 {
                    deps.push(format!("t{}_{}", layer - 1, (slot + 1) % 5));
                }
                deps
            };
            tasks.push(json!({
                "id": id,
                "title": format!("Task {id}"),
                "depends_on": depends_on,
                "steps": [{"id": format!("{id}_s"), "instructions": format!("Do {id}.")}]
            }));
            nodes.push(kiln_run::dag::Node {
                id: id.clone(),
                depends_on,
            });
        }
    }
    let cost: Cost = Rc::new(|id: &str| {
        let digits: usize = id
            .chars()
            .filter(char::is_ascii_digit)
            .filter_map(|c| c.to_digit(10))
            .map(|d| d as usize)
            .sum();
        10.0 * ((digits * 7) % 5 + 1) as f64
    });
    (json!({"title": "Fifty tasks", "tasks": tasks}), nodes, cost)
}

/// Measures the scheduler and a 50-task plan (see [`PlanFigures`]) on the
/// system clock.
///
/// # Errors
///
/// The turn's request error, or a plan that did not complete.
pub async fn plans(
    runner: Rc<dyn SandboxRunner>,
    clock: Rc<dyn kiln_http::Clock>,
) -> Result<PlanFigures, String> {
    use kiln_run::dag::{self, Node, Settled};
    // The scheduler alone.
    let count = 2000;
    let nodes: Vec<Node> = (0..count)
        .map(|n| Node {
            id: format!("n{n}"),
            depends_on: if n % 2 == 0 && n > 1 {
                vec![format!("n{}", n - 2)]
            } else {
                Vec::new()
            },
        })
        .collect();
    let started = clock.now_ms();
    let settled = dag::run(
        &nodes,
        64,
        &AbortSignal::new(),
        |_| Box::pin(async { Settled::Completed(Value::Null) }),
        |_, _| {},
    )
    .await;
    let scheduler_ms = clock.now_ms() - started;
    if settled.len() != count {
        return Err("the scheduler lost nodes".into());
    }

    // A plan of scripted children.
    let (plan, task_nodes, cost) = fifty_tasks();
    let step_cost = {
        let cost = cost.clone();
        Rc::new(move |step: &str| cost(step.trim_end_matches("_s"))) as Cost
    };
    let provider = Rc::new(Costed {
        plan,
        cost: step_cost,
        clock: clock.clone(),
    });
    let job = environment(json!([]), kiln_http::default_client());
    let done = Rc::new(RefCell::new(None::<Value>));
    let sink = {
        let done = done.clone();
        Rc::new(move |event: AgentEvent| {
            if let AgentEvent::ToolResultUpdate { name, content, .. } = event
                && name == kiln_types::agent::EXECUTE_PLAN
            {
                *done.borrow_mut() = serde_json::from_str(&content).ok();
            }
        })
    };
    let mut run = RunRequest::new("");
    run.mode = Some(kiln_capabilities::Mode::Auto);
    let request = AgentRequest {
        run,
        provider,
        options: ChatOptions::new("scripted"),
        messages: vec![Message::User {
            text: "Run the fifty tasks.".into(),
        }],
        system: None,
        output_schema: None,
        guards: Guards::default(),
        budget: BudgetLimits {
            max_concurrency: Some(50),
            ..BudgetLimits::default()
        },
        direct: Vec::new(),
        compaction: Compaction::default(),
        profile: None,
    };
    let setup = AgentSetup {
        environment: &job,
        runner,
        person: None,
        clock: clock.clone(),
        sink,
        cancel: AbortSignal::new(),
    };
    let started = clock.now_ms();
    run_agent(request, setup)
        .await
        .map_err(|error| error.to_string())?;
    let measured_ms = clock.now_ms() - started;
    let status = done
        .borrow()
        .as_ref()
        .and_then(|answer| answer.get("status").cloned());
    if status != Some(json!("completed")) {
        return Err(format!("the plan did not complete: {status:?}"));
    }
    let critical_path_ms = dag::critical_path(&task_nodes, &*cost);
    Ok(PlanFigures {
        scheduler_per_node_ms: scheduler_ms / count as f64,
        scheduler_nodes: count,
        tasks: task_nodes.len(),
        measured_ms,
        critical_path_ms,
        barrier_rounds_ms: dag::barrier_rounds(&task_nodes, 50, &*cost),
        overhead_per_task_ms: (measured_ms - critical_path_ms) / task_nodes.len() as f64,
    })
}

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

use std::cell::RefCell;
use std::rc::Rc;

use futures::future::LocalBoxFuture;
use kiln_capabilities::gate::{Fixed, SessionAllow};
use kiln_capabilities::{Answer, Dispatcher};
use kiln_providers::budget::BudgetLimits;
use kiln_providers::scripted::{Reply, Scripted};
use kiln_providers::{ChatOptions, Message};
use kiln_types::agent::{AgentEvent, Guards};
use kiln_types::cancel::AbortSignal;
use kiln_types::{RunLimits, RunResult};
use serde::Serialize;
use serde_json::{Value, json};

use crate::codeact::history::Compaction;
use crate::codeact::{AgentRequest, AgentSetup, run_agent};
use crate::ladder::{Environment, People};
use crate::{RunRequest, SandboxRunner};

/// A clock in milliseconds.
pub type Now = Rc<dyn Fn() -> f64>;

/// When one action entered and left the runner, and the sandbox's own start.
#[derive(Debug, Clone, Copy)]
struct Inside {
    entered: f64,
    took: f64,
    /// `start_ms + context_ms` of the run's report.
    start: f64,
    /// The report's `duration_ms`.
    duration: f64,
}

/// A runner that times the runner it wraps.
pub struct Timed {
    inner: Rc<dyn SandboxRunner>,
    now: Now,
    inside: Rc<RefCell<Vec<Inside>>>,
}

impl SandboxRunner for Timed {
    fn run(
        &self,
        code: String,
        limits: RunLimits,
        tools: Rc<Dispatcher>,
        cancel: AbortSignal,
    ) -> LocalBoxFuture<'static, RunResult> {
        let now = self.now.clone();
        let inside = self.inside.clone();
        let entered = now();
        let ran = self.inner.run(code, limits, tools, cancel);
        Box::pin(async move {
            let result = ran.await;
            let took = now() - entered;
            inside.borrow_mut().push(Inside {
                entered,
                took,
                start: result.report.start_ms + result.report.context_ms,
                duration: result.report.duration_ms,
            });
            result
        })
    }
}

/// `n` MCP-style tools for a belt: `server_tool_0` … (read tools answering
/// `{ok: true}`), as a scripted catalog.
#[must_use]
pub fn belt(n: usize) -> Value {
    Value::Array(
        (0..n)
            .map(|i| {
                json!({
                    "name": format!("server_tool_{i}"),
                    "description": format!("Looks up record {i} of the server's catalog by id and returns its fields, with paging for long lists of results."),
                    "input_schema": {"type": "object", "properties": {
                        "id": {"type": "string", "description": "The record's id."},
                        "page": {"type": "integer", "description": "Which page of results."},
                        "fields": {"type": "array", "items": {"type": "string"}, "description": "Which fields to return."}
                    }, "required": ["id"]},
                    "category": "read",
                    "returns": {"ok": true}
                })
            })
            .collect(),
    )
}

/// Where a bench job is assembled: `tools` (a scripted catalog, such as
/// [`belt`]) as the job's own tools, every question approved, no workspace.
#[must_use]
pub fn environment(tools: Value, http: Rc<dyn kiln_http::HttpClient>) -> Environment {
    Environment {
        entrance: "bench".into(),
        tools_host: "bench".into(),
        http,
        people: People::Approver {
            host: "bench".into(),
            approver: Rc::new(Fixed(Answer::Approve)),
            session: SessionAllow::default(),
        },
        own_tools: Some(Rc::new(move |registry| {
            let _ = kiln_capabilities::scripted::add_catalog(registry, &tools, "bench");
        })),
        bridge: None,
        workspace: None,
        random: Rc::new(|| [1; 8]),
        on_gate: None,
    }
}

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
    let inside = Rc::new(RefCell::new(Vec::new()));
    let llm = Rc::new(RefCell::new(Vec::<(f64, f64)>::new()));
    let setup = AgentSetup {
        environment,
        runner: Rc::new(Timed {
            inner: runner,
            now: now.clone(),
            inside: inside.clone(),
        }),
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
    let inside = inside.borrow();
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

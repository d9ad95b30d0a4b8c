//! `cargo xtask bench`'s CodeAct figures, natively (release):
//!
//! - **loop overhead per model turn** and **`execute_code` → first
//!   statement**: `kiln_agent::bench::codeact_loop` (how each is measured is
//!   said there), over the real sandbox in process — natively a context is
//!   made per run, so its `context_ms` counts in an action's start;
//! - **prompt size**: for a belt of 10 and of 100 MCP-style tools, the tokens
//!   Kiln sends per turn (system prompt + `execute_code` + direct tools)
//!   beside the same tools sent as direct function definitions.

#![expect(clippy::disallowed_methods, reason = "a benchmark measures real time")]

use std::rc::Rc;
use std::time::Instant;

use kiln_agent::bench::{belt, codeact_loop, environment, request};
use kiln_agent::{AgentSetup, run_agent};
use kiln_providers::cost::estimate_prompt_tokens;
use kiln_providers::scripted::{Reply, Scripted};
use kiln_providers::{ChatRequest, Message, ToolDef};
use kiln_types::cancel::AbortSignal;

#[path = "../../run/tests/common/mod.rs"]
mod common;
use common::InProcess;

fn main() {
    const TURNS: u32 = 40;
    let epoch = Instant::now();
    let now: kiln_agent::bench::Now = Rc::new(move || epoch.elapsed().as_secs_f64() * 1e3);
    let job = environment(belt(10), kiln_http::default_client());
    let figures =
        futures::executor::block_on(codeact_loop(&job, Rc::new(InProcess), TURNS, false, now))
            .unwrap_or_else(|error| panic!("{error}"));
    println!(
        "  loop overhead per model turn (native): {:.3} ms ({} turns, {} actions; {:.1} ms in all, {:.1} ms in the sandbox, {:.1} ms in the provider)",
        figures.overhead_per_turn_ms,
        figures.turns,
        figures.actions,
        figures.total_ms,
        figures.sandbox_ms,
        figures.provider_ms
    );
    println!(
        "  execute_code call complete → guest's first statement (native, in process): median {:.3} ms, max {:.3} ms",
        figures.first_statement_median_ms, figures.first_statement_max_ms
    );

    let plans = futures::executor::block_on(kiln_agent::bench::plans(
        Rc::new(InProcess),
        Rc::new(kiln_http::SystemClock),
    ))
    .unwrap_or_else(|error| panic!("{error}"));
    println!(
        "  DAG scheduler overhead per node: {:.4} ms ({} nodes of no work)",
        plans.scheduler_per_node_ms, plans.scheduler_nodes
    );
    println!(
        "  plan of {} tasks, each step a scripted CodeAct child: {:.0} ms against a critical path of {:.0} ms ({:.2} ms per task beyond it); barrier rounds would take {:.0} ms ({:.0}% of that)",
        plans.tasks,
        plans.measured_ms,
        plans.critical_path_ms,
        plans.overhead_per_task_ms,
        plans.barrier_rounds_ms,
        100.0 * plans.measured_ms / plans.barrier_rounds_ms
    );

    for n in [10, 100] {
        let provider = Scripted::new([Reply::text("ok")]);
        let job = environment(belt(n), kiln_http::default_client());
        let setup = AgentSetup {
            environment: &job,
            runner: Rc::new(InProcess),
            person: None,
            clock: Rc::new(kiln_http::SystemClock),
            sink: Rc::new(|_| {}),
            cancel: AbortSignal::new(),
        };
        let _ = futures::executor::block_on(run_agent(request(provider.clone(), 1), setup));
        let sent = &provider.requests()[0];
        let kiln = estimate_prompt_tokens(&ChatRequest {
            messages: sent.messages[..1].to_vec(),
            tools: sent.tools.clone(),
            options: sent.options.clone(),
        });
        let tools = belt(n);
        let direct = estimate_prompt_tokens(&ChatRequest {
            messages: vec![Message::System {
                text: "You are a helpful assistant. Use the tools to answer.".into(),
            }],
            tools: tools
                .as_array()
                .into_iter()
                .flatten()
                .map(|entry| ToolDef {
                    name: entry["name"].as_str().unwrap_or_default().into(),
                    description: entry["description"].as_str().unwrap_or_default().into(),
                    input_schema: entry["input_schema"].clone(),
                })
                .collect(),
            options: sent.options.clone(),
        });
        println!(
            "  prompt per turn, {n} MCP-style tools: Kiln {kiln} tokens (system prompt + {} tool definitions) vs {direct} as direct function definitions: {:.0}%",
            sent.tools.len(),
            100.0 * kiln as f64 / direct as f64
        );
    }
}

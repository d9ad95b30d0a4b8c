//! `cargo xtask bench`'s CodeAct figures, natively (release):
//!
//! - **loop overhead per model turn**: a 40-turn job (a program per turn)
//!   over a scripted provider and the real sandbox in process, its wall time
//!   less the provider's (each `llm_call`'s duration) and the sandbox's (time
//!   inside the runner), divided by the turns;
//! - **`execute_code` → first statement**: from the model's stream ending to
//!   the guest's first statement (the loop's part, then the sandbox's
//!   `start_ms` and `context_ms`, since natively a context is made per run);
//! - **prompt size**: for a belt of 10 and of 100 MCP-style tools, the tokens
//!   Kiln sends per turn (system prompt + `execute_code` + direct tools)
//!   beside the same tools sent as direct function definitions.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

use futures::future::LocalBoxFuture;
use kiln_agent::codeact::history::Compaction;
use kiln_agent::codeact::{AgentRequest, AgentSetup, run_agent};
use kiln_agent::ladder::{Environment, People};
use kiln_agent::{RunRequest, SandboxRunner};
use kiln_capabilities::gate::{Fixed, SessionAllow};
use kiln_capabilities::{Answer, Dispatcher, HeldSignal};
use kiln_providers::budget::BudgetLimits;
use kiln_providers::cost::estimate_prompt_tokens;
use kiln_providers::scripted::{Reply, Scripted};
use kiln_providers::{ChatOptions, ChatRequest, Message, ToolDef};
use kiln_sandbox::catalog::Admission;
use kiln_sandbox::clock::PersonSignal;
use kiln_sandbox::tools::{ToolCall, ToolHost};
use kiln_types::agent::{AgentEvent, Guards};
use kiln_types::cancel::AbortSignal;
use kiln_types::protocol::CallRequest;
use kiln_types::tool_result::ToolReply;
use kiln_types::{RunLimits, RunResult};
use serde_json::{Value, json};

struct Ladder(Rc<Dispatcher>);

impl ToolHost for Ladder {
    fn call(&self, call: ToolCall, person: PersonSignal) -> LocalBoxFuture<'static, ToolReply> {
        let held: HeldSignal = Rc::new(move |on| person.held(on));
        self.0.call(
            CallRequest {
                call_number: call.call_number,
                tool: call.tool,
                args: call.args,
            },
            held,
        )
    }
}

/// The sandbox in process, timing what happens inside it.
struct Timed {
    inside_ms: Rc<RefCell<Vec<(f64, f64, f64)>>>,
    epoch: Instant,
}

impl SandboxRunner for Timed {
    fn run(
        &self,
        code: String,
        limits: RunLimits,
        tools: Rc<Dispatcher>,
        _cancel: AbortSignal,
    ) -> LocalBoxFuture<'static, RunResult> {
        let inside = self.inside_ms.clone();
        let epoch = self.epoch;
        Box::pin(async move {
            let entered = epoch.elapsed().as_secs_f64() * 1e3;
            let admission = Admission::admit(&tools.catalog(), "bench").unwrap_or_default();
            let warnings = admission.warnings.clone();
            let catalog_digest = admission.digest();
            let report = kiln_sandbox::run_with_tools(
                &code,
                &limits,
                Rc::new(admission),
                Rc::new(Ladder(tools)),
            )
            .await;
            let left = epoch.elapsed().as_secs_f64() * 1e3;
            inside.borrow_mut().push((
                entered,
                left - entered,
                report.start_ms + report.context_ms,
            ));
            RunResult {
                report,
                warnings,
                catalog_digest,
            }
        })
    }
}

fn environment(tools: Value) -> Environment {
    Environment {
        entrance: "bench".into(),
        tools_host: "bench".into(),
        http: kiln_http::default_client(),
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

fn belt(n: usize) -> Value {
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

fn request(provider: Rc<Scripted>, turns: u32) -> AgentRequest {
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

fn main() {
    const TURNS: u32 = 40;
    let epoch = Instant::now();
    let mut replies: Vec<Reply> = (0..TURNS)
        .map(|n| {
            Reply::code(&format!(
                "const r = await tools.server_tool_1({{id: '{n}'}}); return r.ok"
            ))
        })
        .collect();
    replies.push(Reply::text("Done."));
    let provider = Scripted::new(replies);
    let inside = Rc::new(RefCell::new(Vec::new()));
    let llm = Rc::new(RefCell::new(Vec::new()));
    let job = environment(belt(10));
    let setup = AgentSetup {
        environment: &job,
        runner: Rc::new(Timed {
            inside_ms: inside.clone(),
            epoch,
        }),
        person: None,
        clock: Rc::new(kiln_http::SystemClock),
        sink: Rc::new({
            let llm = llm.clone();
            move |event| {
                if let AgentEvent::LlmCall { duration_ms, .. } = event {
                    llm.borrow_mut()
                        .push((epoch.elapsed().as_secs_f64() * 1e3, duration_ms));
                }
            }
        }),
        cancel: AbortSignal::new(),
    };
    let started = Instant::now();
    let outcome = futures::executor::block_on(run_agent(request(provider, TURNS), setup))
        .unwrap_or_else(|error| panic!("{error}"));
    let total_ms = started.elapsed().as_secs_f64() * 1e3;
    let turns = f64::from(outcome.result.turns);
    let sandbox_ms: f64 = inside.borrow().iter().map(|(_, ms, _)| ms).sum();
    let provider_ms: f64 = llm.borrow().iter().map(|(_, ms)| ms).sum();
    let overhead = (total_ms - sandbox_ms - provider_ms) / turns;
    println!(
        "  loop overhead per model turn (native): {overhead:.3} ms ({} turns, {} actions; {total_ms:.1} ms in all, {sandbox_ms:.1} ms in the sandbox, {provider_ms:.1} ms in the provider)",
        outcome.result.turns, outcome.result.actions
    );
    // Each action's start: the model's stream ended (the llm_call event) →
    // the runner entered, then the sandbox's own start.
    let starts: Vec<f64> = llm
        .borrow()
        .iter()
        .zip(inside.borrow().iter())
        .map(|((streamed, _), (entered, _, sandbox_start))| entered - streamed + sandbox_start)
        .collect();
    let mut sorted = starts.clone();
    sorted.sort_by(f64::total_cmp);
    println!(
        "  execute_code call complete → guest's first statement (native, in process): median {:.3} ms, max {:.3} ms",
        sorted[sorted.len() / 2],
        sorted[sorted.len() - 1]
    );

    for n in [10, 100] {
        let provider = Scripted::new([Reply::text("ok")]);
        let job = environment(belt(n));
        let setup = AgentSetup {
            environment: &job,
            runner: Rc::new(Timed {
                inside_ms: Rc::default(),
                epoch,
            }),
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

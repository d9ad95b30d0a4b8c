//! One agent turn: the CodeAct loop. The model acts by writing programs
//! (`execute_code`, a sandbox run through the ladder with the job's belt on
//! `tools`) and through a few direct tools; `finish(value)` in a program ends
//! the turn (checked against the output schema when there is one); the
//! guards of reference/003 stop it loudly when it loops; one tool result is
//! cut at 25,000 characters and a long thread is compacted. Every step is an
//! [`AgentEvent`] on the entrance's sink.
//!
//! A turn has two ladders over the same belt, gate and secrets. The model's
//! calls walk a dispatcher over the belt plus `execute_code` (category
//! `execute`, so plan mode and the brake apply to it); the model is offered
//! `execute_code` and the belt's direct tools only, and a call of any other
//! belt tool is refused `tool_unavailable`, pointing it to `tools.NAME` in a
//! program. Each action is a program run over a fresh dispatcher (its own
//! call numbers and budgets) whose registry has no `execute_code`, so a
//! program cannot start another action.
//!
//! The model's view of the thread is compacted (`history::summarize`) when
//! its estimated prompt passes the threshold, or once when the provider
//! answers `context_overflow`; the person's thread keeps every message, with
//! the compaction row in place.
//!
//! Here a turn is assembled ([`run_agent`]: the job's ladder, its budget,
//! the `Kin` its children share) and settled; `driver` drives one loop, the
//! turn's or a child's, one method per step; `tools` holds the tools a turn
//! adds to its belt, `prompt` the system prompt, `history` the result cut
//! and compaction, and `request` a page's agent request.

mod driver;
pub(crate) mod history;
mod prompt;
pub(crate) mod request;
pub(crate) mod tools;

use std::cell::RefCell;
use std::rc::Rc;

use futures::future::LocalBoxFuture;
use kiln_capabilities::args::InputSchema;
use kiln_capabilities::{Answer, ApprovalRequest, Approver, Registry};
use kiln_http::Clock;
use kiln_providers::budget::{BudgetLimits, RunBudget};
use kiln_providers::cost::PriceCatalog;
use kiln_providers::{ChatOptions, Message, Provider};
use kiln_types::agent::{AgentEvent, AgentResult, Guards, StopReason};
use kiln_types::cancel::AbortSignal;
use serde_json::Value;

use crate::subagent::{self, Kin};
pub(crate) use driver::{Loop, Role, announce_call, drive};
use history::Compaction;
use kiln_run::JobOf;
use kiln_run::SandboxRunner;
use kiln_run::{Environment, People, assemble_job};
use kiln_run::{RequestError, RunRequest};
use tools::{AskUser, ListModels, Person, Sink};

/// One agent turn's request.
pub struct AgentRequest {
    /// The belt and its permissions, as a program run's request gives them
    /// (`code` unused): tools, MCP servers, built-ins, permission, the limits
    /// of each action, the agent, secrets, network.
    pub run: RunRequest,
    pub provider: Rc<dyn Provider>,
    /// Model, max tokens and temperature of every model turn.
    pub options: ChatOptions,
    /// The thread so far, ending with the person's message. System messages
    /// in it join the preamble.
    pub messages: Vec<Message>,
    /// The caller's system prompt: a preamble to Kiln's contract.
    pub system: Option<String>,
    pub output_schema: Option<Value>,
    pub guards: Guards,
    /// The run budget's other limits (deadline, turns); its USD cap is the
    /// lower of `max_usd` and the `max_cost` guard.
    pub budget: BudgetLimits,
    /// Belt tools also offered as functions, besides the always-on ones.
    pub direct: Vec<String>,
    pub compaction: Compaction,
    /// The agent the job runs as (its prompt, memories, autonomy, MCP
    /// servers) and its team; `None`: the request as it is.
    pub profile: Option<crate::profile::Profiled>,
}

/// What the entrance supplies to a turn.
pub struct AgentSetup<'a> {
    pub environment: &'a Environment,
    pub runner: Rc<dyn SandboxRunner>,
    /// Who answers `ask_user`; `None` headless.
    pub person: Option<Rc<dyn Person>>,
    pub clock: Rc<dyn Clock>,
    pub sink: Sink,
    /// Stops the turn: the model's stream, the action running, the wait.
    pub cancel: AbortSignal,
}

/// A turn's end and its whole thread (the person's view: nothing compacted
/// away, the compaction rows in place).
pub struct AgentOutcome {
    pub result: AgentResult,
    pub thread: Vec<Message>,
    /// The thread as the model saw it last (a compacted part replaced by its
    /// summary): what the next turn of the same conversation sends.
    pub view: Vec<Message>,
}

/// The output schema as the host holds a value to it: `additionalProperties:
/// false` on every object schema that does not say otherwise.
#[must_use]
pub(crate) fn strict_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut map: serde_json::Map<String, Value> = map
                .iter()
                .map(|(key, value)| {
                    let value = match key.as_str() {
                        // Keyword values that are maps of names to schemas.
                        "properties" | "patternProperties" | "$defs" | "definitions" => match value
                        {
                            Value::Object(inner) => Value::Object(
                                inner
                                    .iter()
                                    .map(|(name, schema)| (name.clone(), strict_schema(schema)))
                                    .collect(),
                            ),
                            other => other.clone(),
                        },
                        "const" | "enum" | "default" | "examples" | "required" => value.clone(),
                        _ => strict_schema(value),
                    };
                    (key.clone(), value)
                })
                .collect();
            let is_object = map.get("type").is_some_and(|kind| {
                kind == "object"
                    || kind
                        .as_array()
                        .is_some_and(|kinds| kinds.iter().any(|k| k == "object"))
            }) || map.contains_key("properties");
            if is_object && !map.contains_key("additionalProperties") {
                map.insert("additionalProperties".into(), Value::Bool(false));
            }
            Value::Object(map)
        }
        Value::Array(items) => Value::Array(items.iter().map(strict_schema).collect()),
        other => other.clone(),
    }
}

/// Tells the sink about every approval the ladder asks for, then asks the
/// entrance's own approver.
struct Announcing {
    inner: Rc<dyn Approver>,
    sink: Sink,
}

impl Approver for Announcing {
    fn ask(&self, request: ApprovalRequest) -> LocalBoxFuture<'static, Answer> {
        let sink = self.sink.clone();
        let (call_number, tool) = (request.call_number, request.tool.clone());
        sink(AgentEvent::ApprovalRequest {
            request: request.clone(),
        });
        let answer = self.inner.ask(request);
        Box::pin(async move {
            let answer = answer.await;
            sink(AgentEvent::ApprovalAnswer {
                call_number,
                tool,
                answer: answer.clone(),
            });
            answer
        })
    }

    fn is_person(&self) -> bool {
        self.inner.is_person()
    }
}

/// The title of a turn's job: the person's message, first line.
fn title_of(messages: &[Message]) -> (String, String) {
    let input = messages
        .iter()
        .rev()
        .find_map(|message| match message {
            Message::User { text } => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default();
    let line: String = input
        .lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(80)
        .collect();
    (line, input)
}

/// Runs one agent turn.
///
/// # Errors
///
/// Only a request the gate refuses (bad permission settings) or bad guards;
/// everything that happens in the turn is in the outcome.
#[allow(clippy::too_many_lines, reason = "one loop, read top to bottom")]
pub async fn run_agent(
    mut request: AgentRequest,
    setup: AgentSetup<'_>,
) -> Result<AgentOutcome, RequestError> {
    request.guards.check().map_err(RequestError)?;
    // The entrance's request before the profile shapes it: a team member's
    // belt is made from it, not from this agent's.
    let entrance = request.profile.as_ref().map(|_| request.run.clone());
    if let Some(profiled) = &mut request.profile {
        crate::profile::apply(&profiled.agent, &mut request.run, &mut request.system);
        crate::profile::add_secrets(&mut request.run, std::mem::take(&mut profiled.secrets));
    }
    // The skills: the catalog read now (the workspace's and the build's), the
    // tools the agent's assigned skills unlock, the block of this turn's prompt.
    let config = match setup.environment.workspace.as_deref() {
        Some(Ok(workspace)) => Some(kiln_store::config::Config::new(workspace.backend.clone())),
        _ => None,
    };
    let writable_skills = config.is_some();
    let schedule_config = config.clone();
    let skills = Rc::new(kiln_store::skills::Skills::new(config));
    let listed = match skills.list().await {
        Ok(listed) => listed,
        Err(error) => {
            (setup.sink)(AgentEvent::LogUpdate {
                message: format!("the skills could not be read: {}", error.with_hint()),
            });
            Vec::new()
        }
    };
    let assigned: Vec<String> = request
        .profile
        .as_ref()
        .map(|profiled| profiled.agent.skills.clone())
        .unwrap_or_default();
    for problem in crate::skills::unlock(&mut request.run, &listed, &assigned) {
        (setup.sink)(AgentEvent::LogUpdate { message: problem });
    }
    // Both gates of a team change: the workspace allows it, the agent may.
    let team_changes = match (&schedule_config, &request.profile) {
        (Some(config), Some(profiled)) if profiled.agent.may_change_team => config
            .settings()
            .await
            .is_ok_and(|settings| settings.allow_team_changes)
            .then(|| (config.clone(), profiled.agent.slug.clone())),
        _ => None,
    };
    let (_, message) = title_of(&request.messages);
    let skills_block = crate::skills::block(&listed, &assigned, &message);
    let docs = Rc::new(crate::docs::sections(&listed));
    let team = Rc::new(crate::profile::Team::of(request.profile.take()));
    let sink = setup.sink.clone();
    let mut environment = setup.environment.clone();
    if let People::Approver {
        host,
        approver,
        session,
    } = &environment.people
    {
        environment.people = People::Approver {
            host: host.clone(),
            approver: Rc::new(Announcing {
                inner: approver.clone(),
                sink: sink.clone(),
            }),
            session: session.clone(),
        };
    }
    let output_schema = request.output_schema.as_ref().map(strict_schema);
    if let Some(schema) = &output_schema {
        InputSchema::compile(schema)
            .map_err(|why| RequestError(format!("`output_schema` is not a JSON Schema: {why}")))?;
    }
    let (title, input) = title_of(&request.messages);
    let job = JobOf {
        kind: "agent".into(),
        title,
        input,
        run_id: None,
    };
    // The run memory of a run without a workspace: plan steps and children
    // still share results through it.
    let own_memory: RefCell<Option<Rc<kiln_capabilities::Storage>>> = RefCell::default();
    let extra = |registry: &mut Registry| {
        let _ = registry.add(
            AskUser::spec(),
            Rc::new(AskUser {
                person: setup.person.clone(),
                sink: sink.clone(),
            }),
        );
        let _ = registry.add(
            ListModels::spec(),
            Rc::new(ListModels(request.provider.clone())),
        );
        kiln_capabilities::skill_tools::add_skill_tools(registry, &skills, writable_skills);
        if let Some((config, by)) = &team_changes {
            let _ = registry.add(
                crate::profile::CreateAgent::spec(),
                Rc::new(crate::profile::CreateAgent {
                    config: config.clone(),
                    by: by.clone(),
                }),
            );
        }
        let _ = registry.add(
            crate::docs::KilnDocs::spec(),
            Rc::new(crate::docs::KilnDocs(docs.clone())),
        );
        let _ = registry.add(
            crate::schedule::ListSchedules::spec(),
            Rc::new(crate::schedule::ListSchedules {
                config: schedule_config.clone(),
                agent: request.run.agent.clone(),
            }),
        );
        if registry.lookup("read_shared").is_err() {
            // Not on the turn's belt (it pays for every tool it is offered):
            // only plan steps, which read their inputs from it, get its tools.
            let backend: Rc<dyn kiln_store::backend::Backend> =
                kiln_store::native::MemoryBackend::new();
            *own_memory.borrow_mut() = Some(Rc::new(kiln_capabilities::Storage::new(
                backend,
                kiln_store::native::MemoryTree::new(),
                "turn",
                &request.run.agent,
            )));
        }
    };
    let ladder = assemble_job(&request.run, &environment, &job, &extra).await?;
    // What a member's belt is made from, when this agent has a team.
    let (bench, brought) = match entrance {
        Some(entrance) if !team.is_empty() => (
            Some(Rc::new(crate::profile::Bench {
                environment: environment.clone(),
                listed: listed.clone(),
                entrance: entrance.clone(),
            })),
            crate::profile::brought(&ladder.registry, &entrance, &request.run),
        ),
        _ => (None, Vec::new()),
    };
    let own_memory = own_memory.take();
    let memory = ladder
        .run_memory
        .clone()
        .or_else(|| own_memory.as_ref().map(|storage| storage.run.clone()));

    // The job's guards bound the whole tree: its sub-agents and plan steps draw turns,
    // tokens and dollars from this one budget (each loop's own guard is a smaller extra
    // bound, never a fresh allowance).
    let mut limits = request.budget;
    let guards = request.guards;
    limits.max_usd = at_most(limits.max_usd, guards.max_cost);
    limits.max_turns = at_most(limits.max_turns, guards.max_turns);
    limits.max_tokens = at_most(limits.max_tokens, guards.max_tokens);
    let budget = RunBudget::new(
        limits,
        Rc::new(PriceCatalog::builtin()),
        setup.clock.clone(),
    );
    let permit = budget.permits().acquire().await;
    for warning in ladder.dispatcher.warnings() {
        sink(AgentEvent::LogUpdate {
            message: warning.message.clone(),
        });
    }
    let kin = Rc::new(Kin {
        provider: request.provider.clone(),
        options: request.options.clone(),
        runner: setup.runner.clone(),
        clock: setup.clock.clone(),
        budget: budget.clone(),
        base: ladder.registry.clone(),
        gate: ladder.gate.clone(),
        secrets: ladder.secrets.clone(),
        limits: request.run.limits.get(),
        entrance: environment.entrance.clone(),
        random: environment.random.clone(),
        memory,
        memory_tools: own_memory,
        cancel: setup.cancel.clone(),
        sink: sink.clone(),
        depth: 0,
        max_depth: subagent::MAX_DEPTH,
        me: None,
        ids: Rc::default(),
        permit: Rc::new(permit),
        background: Rc::new(subagent::Background::new()),
        current_call: RefCell::new(String::new()),
        guards: request.guards,
        child_turns: subagent::DEFAULT_CHILD_TURNS,
        on_progress: environment.on_progress.clone(),
        max_concurrent: budget.permits().capacity() as usize,
        preamble: request.system.clone(),
        team,
        bench,
        brought: Rc::new(brought),
    });
    let plan_mode = ladder.gate.settings().mode == kiln_capabilities::Mode::Plan;
    let driven = drive(Loop {
        kin: kin.clone(),
        role: Role::Turn { plan_mode },
        messages: request.messages,
        preamble: request.system.into_iter().collect(),
        output_schema,
        direct: request.direct,
        guards: request.guards,
        compaction: request.compaction,
        skills: skills_block,
    })
    .await
    .map_err(RequestError)?;

    for server in ladder.servers {
        let _ = server.client.close().await;
    }
    let job_id = ladder
        .record
        .as_ref()
        .map(|record| record.job_id().to_owned());
    let result = driven.result(job_id);
    if let Some(record) = &ladder.record {
        let status = match result.stop.reason {
            StopReason::Answered | StopReason::Finished => "ok",
            StopReason::Cancelled => "cancelled",
            _ => "error",
        };
        let output = if result.stop.is_success() {
            result.text.clone()
        } else {
            result.stop.message.clone().unwrap_or_default()
        };
        if let Err(error) = record.settle(status, &output).await {
            sink(AgentEvent::LogUpdate {
                message: format!(
                    "the job could not be settled in the history: {}",
                    error.with_hint()
                ),
            });
        }
    }
    sink(AgentEvent::Done {
        result: result.clone(),
    });
    Ok(AgentOutcome {
        result,
        thread: driven.thread,
        view: driven.view,
    })
}

/// The tighter of a budget's cap (when it has one) and a guard: a NaN cap
/// gives way to the guard, as `f64::min` would.
fn at_most<T: PartialOrd + Copy>(cap: Option<T>, guard: T) -> Option<T> {
    Some(match cap {
        Some(cap) if cap < guard => cap,
        _ => guard,
    })
}

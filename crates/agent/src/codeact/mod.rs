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

pub(crate) mod history;
mod prompt;
pub(crate) mod request;
pub(crate) mod tools;

use std::cell::RefCell;
use std::rc::Rc;

use futures::StreamExt as _;
use futures::future::LocalBoxFuture;
use kiln_capabilities::args::InputSchema;
use kiln_capabilities::{Answer, ApprovalRequest, Approver, Dispatcher, HeldSignal, Registry};
use kiln_http::Clock;
use kiln_providers::budget::{BudgetLimits, RunBudget};
use kiln_providers::cost::PriceCatalog;
use kiln_providers::{
    ChatOptions, ChatRequest, ErrorKind, Event, FinalMessage, Message, Provider, ToolCall, ToolDef,
};
use kiln_types::RunOutcome;
use kiln_types::agent::{
    AgentEvent, AgentResult, AgentStop, CREATE_PLAN, EXECUTE_CODE, EXECUTE_PLAN, Guards,
    RUN_SUBTASK, StopReason, stop_code,
};
use kiln_types::cancel::AbortSignal;
use kiln_types::chat::Usage;
use kiln_types::protocol::CallRequest;
use kiln_types::tool_result::{CallOutcome, ToolFailure};
use serde_json::{Value, json};

use crate::subagent::{self, Kin};
use history::Compaction;
use kiln_run::JobOf;
use kiln_run::SandboxRunner;
use kiln_run::{Environment, People, assemble_job};
use kiln_run::{RequestError, RunRequest};
use tools::{
    Action, Actions, AskUser, DELIVERY, ExecuteCode, ListModels, Person, ReturnResult, SearchTools,
    Sink,
};

/// How many times a schema'd turn that ended in prose is reminded of the
/// contract before it fails.
pub(crate) const MAX_FINISH_NUDGES: u32 = 2;

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

/// The loop's counters.
#[derive(Default)]
struct Tally {
    turns: u32,
    actions: u32,
    usage: Usage,
    delivery_streak: u32,
    same_streak: u32,
    last_signature: Option<String>,
    nudges: u32,
    last_text: String,
}

impl Tally {
    fn tokens(&self) -> u64 {
        self.usage.input_tokens + self.usage.output_tokens
    }
}

fn guard(code: &str, message: String) -> AgentStop {
    AgentStop {
        reason: StopReason::Guard,
        code: Some(code.into()),
        message: Some(message),
    }
}

fn quote(text: &str) -> String {
    let line: String = text.trim().chars().take(300).collect();
    if line.is_empty() {
        "its last message was empty".into()
    } else {
        format!("its last message: \u{201c}{line}\u{201d}")
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
    request: AgentRequest,
    setup: AgentSetup<'_>,
) -> Result<AgentOutcome, RequestError> {
    request.guards.check().map_err(RequestError)?;
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
        max_concurrent: budget.permits().capacity() as usize,
        preamble: request.system.clone(),
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

/// Which loop this is: the person's turn (in plan mode it can plan), a
/// sub-agent, or a plan's step (which can neither plan nor run a plan).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Turn { plan_mode: bool },
    Subtask,
    Step,
}

/// One CodeAct loop's inputs: the turn's, or a child's.
pub(crate) struct Loop {
    pub kin: Rc<Kin>,
    pub role: Role,
    /// The thread so far; system messages join the preamble.
    pub messages: Vec<Message>,
    pub preamble: Vec<String>,
    /// Already strict (`strict_schema`).
    pub output_schema: Option<Value>,
    /// Belt tools also offered as functions, besides the always-on ones.
    pub direct: Vec<String>,
    pub guards: Guards,
    pub compaction: Compaction,
}

/// How a loop ended.
pub(crate) struct Driven {
    pub stop: AgentStop,
    finished: Option<Value>,
    returned: Option<Value>,
    tally: Tally,
    pub thread: Vec<Message>,
    pub view: Vec<Message>,
    spend: f64,
}

impl Driven {
    /// The loop's result: the value `finish` or `return_result` gave, the
    /// text (the value's, when the loop finished or said nothing else).
    #[must_use]
    pub(crate) fn result(&self, job_id: Option<String>) -> AgentResult {
        let value = self
            .finished
            .clone()
            .or_else(|| self.returned.clone())
            .unwrap_or(Value::Null);
        let mut text = self.tally.last_text.clone();
        if self.stop.reason == StopReason::Finished || (text.trim().is_empty() && !value.is_null())
        {
            text = match &value {
                Value::String(text) => text.clone(),
                other => serde_json::to_string_pretty(other).unwrap_or_default(),
            };
        }
        AgentResult {
            text,
            value,
            finished: self.stop.reason == StopReason::Finished,
            stop: self.stop.clone(),
            usage: self.tally.usage,
            spend: self.spend,
            job_id,
            turns: self.tally.turns,
            actions: self.tally.actions,
        }
    }
}

/// Adds the tools a loop binds to itself: its own `return_result`, the
/// delegation tools over its [`Kin`], and the plan tools its role allows.
fn add_loop_tools(
    registry: &mut Registry,
    kin: &Rc<Kin>,
    role: Role,
    returned: &Rc<RefCell<Option<Value>>>,
    belt: &Rc<RefCell<Vec<kiln_capabilities::CapabilitySpec>>>,
) {
    let _ = registry.add(
        ReturnResult::spec(),
        Rc::new(ReturnResult(returned.clone())),
    );
    let _ = registry.add(SearchTools::spec(), Rc::new(SearchTools(belt.clone())));
    let _ = registry.add(
        subagent::RunSubtask::spec(),
        Rc::new(subagent::RunSubtask {
            kin: kin.clone(),
            search: false,
        }),
    );
    let _ = registry.add(
        subagent::RunSubtask::search_spec(),
        Rc::new(subagent::RunSubtask {
            kin: kin.clone(),
            search: true,
        }),
    );
    let _ = registry.add(
        subagent::StartSubtask::spec(),
        Rc::new(subagent::StartSubtask(kin.clone())),
    );
    let _ = registry.add(
        subagent::WaitSubtasks::spec(),
        Rc::new(subagent::WaitSubtasks(kin.clone())),
    );
    if role != Role::Step {
        let _ = registry.add(
            crate::plan::execute::ExecutePlan::spec(),
            Rc::new(crate::plan::execute::ExecutePlan(kin.clone())),
        );
    }
    if role == (Role::Turn { plan_mode: true }) {
        let _ = registry.add(
            crate::plan::planner::CreatePlan::spec(),
            Rc::new(crate::plan::planner::CreatePlan(kin.clone())),
        );
    }
}

/// Runs one CodeAct loop to its end, its background children driven beside
/// it and stopped when it ends.
///
/// # Errors
///
/// An output schema that is not a JSON Schema (checked before any turn).
pub(crate) async fn drive(spec: Loop) -> Result<Driven, String> {
    let kin = spec.kin.clone();
    let body = std::pin::pin!(drive_loop(spec));
    let pump = std::pin::pin!(kin.background.pump());
    let driven = match futures::future::select(body, pump).await {
        futures::future::Either::Left((driven, _)) => driven,
        futures::future::Either::Right(((), body)) => body.await,
    };
    let stopped = kin.background.end();
    if stopped > 0 {
        (kin.sink)(AgentEvent::LogUpdate {
            message: format!(
                "{stopped} background subtask(s) were still running when the turn ended; they were stopped"
            ),
        });
    }
    driven
}

#[allow(clippy::too_many_lines, reason = "one loop, read top to bottom")]
async fn drive_loop(spec: Loop) -> Result<Driven, String> {
    let Loop {
        kin,
        role,
        messages,
        mut preamble,
        output_schema,
        direct: asked_direct,
        guards,
        compaction,
    } = spec;
    let checker = match &output_schema {
        Some(schema) => Some(
            InputSchema::compile(schema)
                .map_err(|why| format!("`output_schema` is not a JSON Schema: {why}"))?,
        ),
        None => None,
    };
    let sink = kin.sink.clone();
    let returned = Rc::new(RefCell::new(None::<Value>));
    let mut registry = (*kin.base).clone();
    let searchable = Rc::new(RefCell::new(Vec::new()));
    add_loop_tools(&mut registry, &kin, role, &returned, &searchable);
    let registry = Rc::new(registry);
    let belt: Vec<_> = registry.specs().cloned().collect();
    searchable.borrow_mut().clone_from(&belt);
    let actions = Rc::new(Actions {
        runner: kin.runner.clone(),
        belt: registry.clone(),
        gate: kin.gate.clone(),
        secrets: kin.secrets.clone(),
        limits: kin.limits,
        entrance: kin.entrance.clone(),
        cancel: kin.cancel.clone(),
        random: kin.random.clone(),
        done: RefCell::default(),
        warned: std::cell::Cell::new(kin.me.is_some()),
    });
    // The model's side: the belt's direct tools and `execute_code`.
    let plan_mode = role == (Role::Turn { plan_mode: true });
    let is_direct = |name: &str| {
        tools::is_always_on(name)
            || asked_direct.iter().any(|asked| asked == name)
            || name == RUN_SUBTASK
            || (name == EXECUTE_PLAN && !plan_mode)
            || name == CREATE_PLAN
    };
    let direct: Vec<String> = belt
        .iter()
        .filter(|spec| is_direct(&spec.name))
        .map(|spec| spec.name.clone())
        .collect();
    for asked in &asked_direct {
        if !direct.contains(asked) {
            sink(AgentEvent::LogUpdate {
                message: format!("`{asked}` is not a tool of this job, so it is not offered"),
            });
        }
    }
    let mut model_registry = (*registry).clone();
    let _ = model_registry.add(Actions::spec(), Rc::new(ExecuteCode(actions.clone())));
    // A plan step's programs were approved with the plan (approving the plan
    // is the gate): its `execute_code` is allowed unless a rule says
    // otherwise or the brake is on; what its programs call stays gated.
    let model_gate = if role == Role::Step {
        kin.gate.derived(|settings| {
            settings
                .autonomy
                .entry(EXECUTE_CODE.to_owned())
                .or_insert(kiln_types::permission::Autonomy::Auto);
        })
    } else {
        kin.gate.clone()
    };
    let dispatcher = Dispatcher::new(
        Rc::new(model_registry),
        Some(model_gate),
        kin.secrets.clone(),
        kin.limits,
        &kin.entrance,
    );
    let mut offered: Vec<ToolDef> = vec![spec_def(&Actions::spec())];
    offered.extend(
        belt.iter()
            .filter(|spec| direct.contains(&spec.name))
            .map(spec_def),
    );

    // The prompt: the caller's system text first, as a preamble.
    let mut view: Vec<Message> = Vec::new();
    for message in messages {
        match message {
            Message::System { text } => preamble.push(text),
            other => view.push(other),
        }
    }
    let system = prompt::system_prompt(&prompt::PromptParts {
        preamble: &preamble.join("\n\n"),
        belt: &belt,
        direct: &direct,
        output_schema: output_schema.as_ref(),
    });
    let mut thread = view.clone();

    let budget = kin.budget.clone();
    let provider = kin.provider.clone();
    let options = kin.options.clone();
    let cancel = kin.cancel.clone();
    let clock = kin.clock.clone();
    let mut tally = Tally::default();
    let mut finished: Option<Value> = None;
    let mut overflow_retried = false;
    let mut call_number = 0_u32;
    let abort = Some(cancel.clone());

    let stop: AgentStop = 'turns: loop {
        if cancel.is_aborted() {
            break cancelled();
        }
        if tally.turns >= guards.max_turns {
            break guard(
                stop_code::MAX_TURNS,
                format!(
                    "stopped after {} model turns, the job's limit (max_turns)",
                    tally.turns
                ),
            );
        }
        if tally.tokens() >= guards.max_tokens {
            break guard(
                stop_code::MAX_TOKENS,
                format!(
                    "stopped after {} tokens, past the job's limit of {} (max_tokens)",
                    tally.tokens(),
                    guards.max_tokens
                ),
            );
        }
        let chat = |view: &[Message]| ChatRequest {
            messages: std::iter::once(Message::System {
                text: system.clone(),
            })
            .chain(view.iter().cloned())
            .collect(),
            tools: offered.clone(),
            options: options.clone(),
        };
        if kiln_providers::cost::estimate_prompt_tokens(&chat(&view)) > compaction.threshold_tokens
        {
            compact(
                &*provider,
                &options,
                &mut view,
                &mut thread,
                compaction.keep_turns,
                &budget,
                abort.clone(),
                &sink,
            )
            .await;
        }
        tally.turns += 1;
        let started = clock.now_ms();
        let spent_before = budget.spend().calls.len();
        let mut stream =
            kiln_providers::turn(&*provider, chat(&view), Some(budget.clone()), abort.clone());
        let mut done: Option<FinalMessage> = None;
        let mut failed = None;
        // What streamed, kept when the person stops the turn mid-message.
        let mut streamed = String::new();
        while let Some(item) = stream.next().await {
            match item {
                Ok(Event::TextDelta { text }) => {
                    streamed.push_str(&text);
                    sink(AgentEvent::TextDelta { text });
                }
                Ok(Event::Done { message }) => done = Some(message),
                Ok(_) => {}
                Err(error) => {
                    failed = Some(error);
                    break;
                }
            }
        }
        drop(stream);
        let used = announce_call(
            &sink,
            &*provider,
            &options.model,
            &budget,
            spent_before,
            done.as_ref(),
            started,
            &*clock,
        );
        tally.usage.input_tokens += used.input_tokens;
        tally.usage.output_tokens += used.output_tokens;
        if let Some(error) = failed {
            if cancel.is_aborted() {
                keep_partial(&mut view, &mut thread, streamed);
                break cancelled();
            }
            match error.kind {
                ErrorKind::ContextOverflow if !overflow_retried => {
                    overflow_retried = true;
                    tally.turns -= 1;
                    let before = view.len();
                    compact(
                        &*provider,
                        &options,
                        &mut view,
                        &mut thread,
                        compaction.keep_turns,
                        &budget,
                        abort.clone(),
                        &sink,
                    )
                    .await;
                    if view.len() < before {
                        continue 'turns;
                    }
                }
                ErrorKind::InvalidToolCall => {
                    let note = format!(
                        "Your last tool call could not be read: {error}. Call the tool again with its arguments as one JSON object; for {EXECUTE_CODE}, {{\"code\": \"...the program...\"}}."
                    );
                    sink(AgentEvent::LogUpdate {
                        message: format!(
                            "the model's tool call was malformed; it is told so: {error}"
                        ),
                    });
                    push(&mut view, &mut thread, Message::User { text: note });
                    continue 'turns;
                }
                _ => {}
            }
            break AgentStop {
                reason: StopReason::Provider,
                code: Some(error.kind.code().into()),
                message: Some(error.to_string()),
            };
        }
        let Some(message) = done else {
            break AgentStop {
                reason: StopReason::Provider,
                code: Some("incomplete".into()),
                message: Some("the provider's stream ended without its message".into()),
            };
        };
        if let Some(stop) = message.stop.clone().filter(|stop| stop.reason.is_refusal()) {
            use kiln_providers::StopReason as Model;
            // A turn the budget refused was never sent: it is not a model turn.
            if stop.reason != Model::Aborted {
                tally.turns -= 1;
            }
            let code = match stop.reason {
                Model::Aborted => {
                    keep_partial(&mut view, &mut thread, message.text);
                    break cancelled();
                }
                Model::Budget => stop_code::MAX_COST,
                Model::Deadline => "deadline",
                _ => "turns",
            };
            break AgentStop {
                reason: StopReason::Budget,
                code: Some(code.into()),
                message: stop.message,
            };
        }
        tally.last_text.clone_from(&message.text);
        push(
            &mut view,
            &mut thread,
            Message::Assistant {
                text: message.text.clone(),
                tool_calls: message.tool_calls.clone(),
            },
        );
        if message.tool_calls.is_empty() {
            if message
                .stop
                .as_ref()
                .is_some_and(|stop| stop.reason == kiln_providers::StopReason::MaxTokens)
            {
                sink(AgentEvent::LogUpdate {
                    message: format!(
                        "the model's message was cut at its limit of {} tokens",
                        options.max_tokens
                    ),
                });
            }
            if checker.is_some() {
                if tally.nudges < MAX_FINISH_NUDGES && tally.turns < guards.max_turns {
                    tally.nudges += 1;
                    push(
                        &mut view,
                        &mut thread,
                        Message::User {
                            text: prompt::finish_nudge(),
                        },
                    );
                    continue 'turns;
                }
                break AgentStop {
                    reason: StopReason::Unfinished,
                    code: Some(stop_code::WITHOUT_FINISH.into()),
                    message: Some(format!(
                        "ended after {} action(s) and {} model turn(s) without calling finish; {}",
                        tally.actions,
                        tally.turns,
                        quote(&message.text)
                    )),
                };
            }
            break AgentStop {
                reason: StopReason::Answered,
                code: None,
                message: None,
            };
        }
        let calls = message.tool_calls.clone();
        let too_many = calls.len() > guards.max_tool_calls_per_turn as usize;
        let mut signature = String::new();
        for call in &calls {
            if too_many || finished.is_some() {
                let why = if too_many {
                    format!(
                        "not run: the turn made {} tool calls, more than the job's {} (max_tool_calls_per_turn)",
                        calls.len(),
                        guards.max_tool_calls_per_turn
                    )
                } else {
                    "not run: the task already finished".into()
                };
                push(
                    &mut view,
                    &mut thread,
                    tool_message(
                        call,
                        json!({"error": {"code": "not_run", "message": why}}).to_string(),
                        true,
                    ),
                );
                continue;
            }
            call_number += 1;
            let code = (call.name == EXECUTE_CODE)
                .then(|| {
                    call.arguments
                        .get("code")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .flatten();
            sink(AgentEvent::ToolCallUpdate {
                call_id: call.id.clone(),
                name: call.name.clone(),
                args: call.arguments.clone(),
                code,
            });
            // `execute_plan` is on the belt in every mode: in plan mode it is
            // not offered, and a call is the ladder's to refuse by its words.
            let offered_here = offered.iter().any(|def| def.name == call.name)
                || (call.name == EXECUTE_PLAN && belt.iter().any(|spec| spec.name == call.name));
            kin.current_call.replace(call.id.clone());
            let reply = if offered_here {
                let held: HeldSignal = Rc::new(|_| {});
                dispatcher
                    .call(
                        CallRequest {
                            call_number,
                            tool: call.name.clone(),
                            args: call.arguments.clone(),
                        },
                        held,
                    )
                    .await
            } else {
                Err(unoffered(&call.name, &belt))
            };
            if cancel.is_aborted() {
                break 'turns cancelled();
            }
            let action = actions.done.borrow_mut().remove(&call_number);
            // What makes a turn the same as the last: an action's outcome and
            // console, not its timings.
            let same = action.as_ref().map(|action| {
                serde_json::to_string(&(&action.run.report.outcome, &action.run.report.console))
                    .unwrap_or_default()
            });
            let (content, is_error, run) = match (reply, action) {
                (Ok(_), Some(action)) => {
                    tally.actions += 1;
                    let (text, value) = observe(&action, checker.as_ref());
                    if value.is_some() {
                        finished = value;
                    }
                    (
                        text,
                        action.result.is_error,
                        Some(action.result.structured_content),
                    )
                }
                (Ok(Value::String(text)), None) => (text, false, None),
                (Ok(value), None) => (value.to_string(), false, None),
                (Err(failure), _) => {
                    let mut error = json!({"code": failure.code, "message": failure.message});
                    if let Some(detail) = failure.detail {
                        error["detail"] = detail;
                    }
                    (json!({ "error": error }).to_string(), true, None)
                }
            };
            let content = history::cut_result(content);
            let seen = same.as_deref().unwrap_or(&content);
            signature.push_str(&format!("{}{}{seen}\u{0}", call.name, call.arguments));
            sink(AgentEvent::ToolResultUpdate {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content: content.clone(),
                is_error,
                run,
            });
            push(
                &mut view,
                &mut thread,
                tool_message(call, content, is_error),
            );
        }
        if finished.is_some() {
            break AgentStop {
                reason: StopReason::Finished,
                code: None,
                message: None,
            };
        }
        if too_many {
            break guard(
                stop_code::MAX_TOOL_CALLS_PER_TURN,
                format!(
                    "the model made {} tool calls in one turn, more than the job's {} (max_tool_calls_per_turn)",
                    calls.len(),
                    guards.max_tool_calls_per_turn
                ),
            );
        }
        if calls
            .iter()
            .all(|call| DELIVERY.contains(&call.name.as_str()))
        {
            tally.delivery_streak += 1;
        } else {
            tally.delivery_streak = 0;
        }
        if tally.delivery_streak >= guards.delivery_only {
            break guard(
                stop_code::DELIVERY_ONLY,
                format!(
                    "stopped after {} turns in a row that only delivered results (delivery_only)",
                    tally.delivery_streak
                ),
            );
        }
        if tally.last_signature.as_deref() == Some(signature.as_str()) {
            tally.same_streak += 1;
        } else {
            tally.same_streak = 1;
            tally.last_signature = Some(signature);
        }
        if tally.same_streak >= guards.no_progress {
            break guard(
                stop_code::NO_PROGRESS,
                format!(
                    "stopped after {} identical turns: the same calls with the same arguments and results (no_progress)",
                    tally.same_streak
                ),
            );
        }
    };

    if !stop.is_success() {
        sink(AgentEvent::Stop { stop: stop.clone() });
    }
    close_calls(&mut view, &mut thread);
    let returned = returned.borrow().clone();
    Ok(Driven {
        stop,
        finished,
        returned,
        tally,
        thread,
        view,
        spend: budget.spend().spent_usd,
    })
}

/// The text of a message the person stopped, kept as the model's message
/// (as a chat keeps a reply cut short), when any had come.
fn keep_partial(view: &mut Vec<Message>, thread: &mut Vec<Message>, text: String) {
    if !text.is_empty() {
        push(
            view,
            thread,
            Message::Assistant {
                text,
                tool_calls: Vec::new(),
            },
        );
    }
}

/// Answers every tool call the turn left without a result (it was stopped,
/// or a guard ended it mid-turn), so that the thread can be sent again: a
/// provider refuses a call with no answer.
fn close_calls(view: &mut Vec<Message>, thread: &mut Vec<Message>) {
    let Some(at) = view
        .iter()
        .rposition(|message| matches!(message, Message::Assistant { .. }))
    else {
        return;
    };
    let Message::Assistant { tool_calls, .. } = &view[at] else {
        return;
    };
    let answered: Vec<&str> = view[at + 1..]
        .iter()
        .filter_map(|message| match message {
            Message::Tool { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
        .collect();
    let open: Vec<ToolCall> = tool_calls
        .iter()
        .filter(|call| !answered.contains(&call.id.as_str()))
        .cloned()
        .collect();
    for call in open {
        let content = json!({"error": {"code": "not_run", "message": "not run: the turn was stopped before this call ran"}}).to_string();
        push(view, thread, tool_message(&call, content, true));
    }
}

fn cancelled() -> AgentStop {
    AgentStop {
        reason: StopReason::Cancelled,
        code: Some(stop_code::CANCELLED.into()),
        message: Some("the turn was stopped".into()),
    }
}

fn spec_def(spec: &kiln_capabilities::CapabilitySpec) -> ToolDef {
    ToolDef {
        name: spec.name.clone(),
        description: spec.description.clone(),
        input_schema: spec.input_schema.clone(),
    }
}

fn push(view: &mut Vec<Message>, thread: &mut Vec<Message>, message: Message) {
    view.push(message.clone());
    thread.push(message);
}

fn tool_message(call: &ToolCall, content: String, is_error: bool) -> Message {
    Message::Tool {
        call_id: call.id.clone(),
        name: call.name.clone(),
        content,
        is_error,
    }
}

/// A call naming a tool the turn does not offer as a function.
fn unoffered(name: &str, belt: &[kiln_capabilities::CapabilitySpec]) -> ToolFailure {
    let message = if belt.iter().any(|spec| spec.name == name) {
        format!(
            "`{name}` is not offered as a function in this job: call it from a program, `await tools.{name}({{...}})` inside {EXECUTE_CODE}"
        )
    } else {
        format!(
            "`{name}` is not a tool of this job; the job's tools are on `tools` inside {EXECUTE_CODE}"
        )
    };
    ToolFailure {
        code: "tool_unavailable".into(),
        message,
        detail: None,
        outcome: CallOutcome::ToolUnavailable,
    }
}

/// The observation of one action, and the value it finished with when it
/// did (with a schema: only a value that matches).
fn observe(action: &Action, checker: Option<&InputSchema>) -> (String, Option<Value>) {
    let mut text = action.result.text();
    let completed = match &action.run.report.outcome {
        RunOutcome::Completed { value } => Some(value.clone()),
        RunOutcome::Failed(_) => None,
    };
    let Some(value) = completed else {
        return (text, None);
    };
    if action.run.report.finished {
        return match checker.map(|checker| checker.validate_value("finish(value)", &value)) {
            Some(Err(problem)) => {
                text.push_str(&format!(
                    "\n\nfinished: false. finish was refused: {problem}. The task is not done: fix the value and call finish again."
                ));
                (text, None)
            }
            _ => (text, Some(value)),
        };
    }
    if let Some(checker) = checker {
        let matched = checker.validate_value("the value", &value).is_ok();
        text.push_str(if matched {
            "\n\nfinished: false. The program returned a value but did not call finish, so the task is not done. The returned value already matches the output schema: call finish(value) with it."
        } else {
            "\n\nfinished: false. The program returned a value but did not call finish, so the task is not done: call finish(value) with a value matching the output schema."
        });
    }
    (text, None)
}

/// Emits the `llm_call` event of the model call that just ended and answers
/// its usage: the budget's account of it (Kiln's estimate where the provider
/// reported none), else the provider's own report.
#[allow(clippy::too_many_arguments, reason = "one event's parts")]
pub(crate) fn announce_call(
    sink: &Sink,
    provider: &dyn Provider,
    model: &str,
    budget: &RunBudget,
    spent_before: usize,
    done: Option<&FinalMessage>,
    started: f64,
    clock: &dyn Clock,
) -> Usage {
    let spend = budget.spend();
    let cost = spend.calls.get(spent_before);
    let usage = cost
        .map(|cost| cost.usage)
        .or_else(|| done.map(|message| message.usage))
        .unwrap_or_default();
    if cost.is_none() && done.is_none() {
        return usage;
    }
    sink(AgentEvent::LlmCall {
        provider: provider.kind().as_str().into(),
        model: done
            .and_then(|message| message.model.clone())
            .unwrap_or_else(|| model.to_owned()),
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        cost_usd: cost.and_then(|cost| cost.usd),
        duration_ms: clock.now_ms() - started,
    });
    usage
}

/// Replaces everything before the last `keep` user turns of `view` with a
/// summary; a failed summarizer leaves the view whole and says so.
#[allow(clippy::too_many_arguments, reason = "the turn's parts")]
async fn compact(
    provider: &dyn Provider,
    options: &ChatOptions,
    view: &mut Vec<Message>,
    thread: &mut Vec<Message>,
    keep: usize,
    budget: &RunBudget,
    abort: Option<kiln_providers::AbortSignal>,
    sink: &Sink,
) {
    let Some(cut) = history::split_point(view, keep) else {
        sink(AgentEvent::LogUpdate {
            message: "the thread is long, but there is nothing before its last turns to summarize"
                .into(),
        });
        return;
    };
    match history::summarize(provider, options, &view[..cut], budget, abort).await {
        Ok((summary, _)) => {
            let row = history::compaction_row(&summary);
            view.splice(..cut, [row.clone()]);
            // The person's thread keeps everything, with the row where the cut fell.
            let at = thread.len() - (view.len() - 1);
            thread.insert(at, row);
            sink(AgentEvent::Compaction {
                summary,
                replaced: cut,
            });
        }
        Err(why) => sink(AgentEvent::LogUpdate {
            message: format!(
                "the thread was not compacted: the summarizer failed ({why}); this turn runs against the whole thread"
            ),
        }),
    }
}

/// The tighter of a budget's cap (when it has one) and a guard: a NaN cap
/// gives way to the guard, as `f64::min` would.
fn at_most<T: PartialOrd + Copy>(cap: Option<T>, guard: T) -> Option<T> {
    Some(match cap {
        Some(cap) if cap < guard => cap,
        _ => guard,
    })
}

//! Sub-agents (reference/000, "Sub-Agent Core"): the one place that spawns,
//! streams and settles a child loop. A child is a CodeAct loop
//! ([`crate::codeact`]) over its parent's belt (or the part of it asked
//! for), on the run's one [`RunBudget`] and permit pool, one level deeper.
//!
//! - [`Kin`] is what a loop hands its children: the belt before the loop's
//!   own tools, the gate, the provider and model (one model per run), the
//!   budget, the cancel switch, its depth, its permit and its background
//!   registry.
//! - [`spawn`] runs one child: the depth gate (the guard's default 3, by
//!   name past it), a permit (the parent's while it waits in the spawning
//!   call, else the pool's), the child's events tagged
//!   ([`AgentEvent::Child`]) with its id, its parent and the spawning call,
//!   and the settlement ([`ChildOutcome`]) — a child's failure is its
//!   outcome, never a throw.
//! - The tools: `run_subtask` (a child on the belt or the subset named),
//!   `run_search` (read-class tools only), `start_subtask` (a receipt at
//!   once; the child runs in the loop's [`Background`] registry) and
//!   `wait_subtasks` (until the named children leave `running`, or the
//!   timeout, or the abort: then the current statuses). In a program the
//!   same are `agents.run`, `agents.start` and `agents.wait`.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use futures::future::{self, Either, LocalBoxFuture};
use futures::stream::{FuturesUnordered, StreamExt as _};
use kiln_capabilities::{
    CallContext, CapabilitySpec, Category, Gate, Implementation, Permit, Registry, SecretScope,
};
use kiln_http::Clock;
use kiln_providers::budget::RunBudget;
use kiln_providers::permits::Held;
use kiln_providers::{ChatOptions, Message, Provider};
use kiln_store::run::RunMemory;
use kiln_types::RunLimits;
use kiln_types::agent::{
    ASK_USER, AgentEvent, AgentStop, CREATE_PLAN, EXECUTE_PLAN, Guards, LIST_MODELS, RETURN_RESULT,
    RUN_SEARCH, RUN_SUBTASK, SEARCH_TOOLS, START_SUBTASK, StopReason, WAIT_SUBTASKS,
};
use kiln_types::cancel::AbortSignal;
use kiln_types::tool_result::{ToolFailure, ToolReply};
use serde_json::{Value, json};

use crate::codeact::history::Compaction;
use kiln_run::SandboxRunner;

/// A child's arguments as the delegation tools read them.
struct ChildArgs {
    prompt: String,
    output_schema: Option<Value>,
    tools: Option<Vec<String>>,
    /// A team member's slug.
    agent: Option<String>,
}
use crate::codeact::tools::{Sink, builtin, failure};
use crate::codeact::{Loop, Role};

/// How deep children may nest (reference/003's "Max delegation depth"): the
/// turn is depth 0, its children 1.
pub const MAX_DEPTH: u32 = 3;
/// How many `start_subtask` children one loop may start.
pub(crate) const MAX_BACKGROUND: usize = 8;
/// Model turns a child (a step, a sub-agent) may take when nothing says
/// otherwise (the reference's `DEFAULT_MAX_STEP_ITERATIONS`).
pub const DEFAULT_CHILD_TURNS: u32 = 15;
/// The longest `wait_subtasks` waits when it names no timeout.
pub(crate) const DEFAULT_WAIT_MS: u64 = 300_000;

/// What a loop hands its children.
pub struct Kin {
    pub provider: Rc<dyn Provider>,
    pub options: ChatOptions,
    pub runner: Rc<dyn SandboxRunner>,
    pub clock: Rc<dyn Clock>,
    /// The run's one budget (and permit pool): never re-created by a child.
    pub budget: RunBudget,
    /// The belt before the loop's own tools (`return_result`, the
    /// delegation and plan tools), which each loop adds for itself.
    pub base: Rc<Registry>,
    pub gate: Rc<Gate>,
    pub secrets: SecretScope,
    pub limits: RunLimits,
    pub entrance: String,
    pub random: Rc<dyn Fn() -> [u8; 8]>,
    /// The run memory plan steps write `step:` and `task:` results to.
    pub memory: Option<RunMemory>,
    /// A run without a workspace keeps its run memory in memory; its tools
    /// (`list_shared`, `read_shared`, `share_result`) go to the plan steps.
    pub memory_tools: Option<Rc<kiln_capabilities::Storage>>,
    pub cancel: AbortSignal,
    /// This loop's sink (a child's wraps its events before its parent's).
    pub sink: Sink,
    /// This loop's depth: 0 for the turn.
    pub depth: u32,
    pub max_depth: u32,
    /// This loop's child id; `None` for the turn.
    pub me: Option<String>,
    /// The run's child counter.
    pub ids: Rc<Cell<u32>>,
    /// This loop's permit.
    pub permit: Rc<Held>,
    /// This loop's `start_subtask` children.
    pub background: Rc<Background>,
    /// The model call this loop is in (the spawning call of its children).
    pub current_call: RefCell<String>,
    /// The run's guards; a child takes them with its own turn cap.
    pub guards: Guards,
    /// Model turns each child may take.
    pub child_turns: u32,
    /// Told each progress report of this loop's programs (and its
    /// children's): the entrance shows it on the running action.
    pub on_progress: Option<kiln_capabilities::ProgressObserver>,
    /// The concurrency bound of one plan's tasks and one task's steps.
    pub max_concurrent: usize,
    /// The caller's system text: a preamble to every child's contract and
    /// to the planner's, never a replacement.
    pub preamble: Option<String>,
    /// The agents this loop may hand work to by slug (empty unless it runs
    /// as an orchestrator).
    pub team: Rc<crate::profile::Team>,
    /// What a member's belt is made from; `None` without a team.
    pub bench: Option<Rc<crate::profile::Bench>>,
    /// The names on `base` this loop's agent's profile brought (its MCP
    /// servers' tools, what its skills unlocked): a member's belt leaves them
    /// off and mounts its own.
    pub brought: Rc<Vec<String>>,
}

/// What a child is asked to do.
pub(crate) struct ChildSpec {
    pub prompt: String,
    /// Held to [`crate::codeact::strict_schema`]; the child must `finish`.
    pub output_schema: Option<Value>,
    /// The belt's tools the child may use (all when `None`); the agent's own
    /// (`ask_user`, the run memory, `search_tools`) stay.
    pub tools: Option<Vec<String>>,
    /// Only read-class tools (`run_search`).
    pub read_only: bool,
    /// For a person: "subtask", "search", "step fetch".
    pub label: String,
    pub role: Role,
    /// The caller's text layered before the child's contract.
    pub preamble: Option<String>,
    /// The child's id when the caller reserved one (a receipt names it);
    /// else the run's next.
    pub id: Option<String>,
    /// The team member that does it, with its own prompt, model and
    /// autonomy; `None`: a child of the caller's own kind.
    pub agent: Option<Rc<crate::profile::Member>>,
}

/// How a child settled. Never a throw: a failure is an outcome.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ChildOutcome {
    /// Its value (`finish`'s, `return_result`'s, or its last message).
    Completed {
        child: String,
        value: Value,
        turns: u32,
    },
    Failed {
        child: String,
        code: String,
        message: String,
    },
}

impl ChildOutcome {
    /// As a tool answers it: `{status: "completed", value}` or `{status:
    /// "failed", error: {code, message}}`, with the child's id.
    #[must_use]
    pub(crate) fn to_json(&self) -> Value {
        match self {
            Self::Completed {
                child,
                value,
                turns,
            } => {
                json!({"status": "completed", "subtask_id": child, "value": value, "turns": turns})
            }
            Self::Failed {
                child,
                code,
                message,
            } => {
                json!({"status": "failed", "subtask_id": child, "error": {"code": code, "message": message}})
            }
        }
    }
}

/// The tools a loop of `role` adds names for, so a child's belt never
/// carries its parent's bindings.
pub(crate) const LOOP_TOOLS: &[&str] = &[
    RETURN_RESULT,
    SEARCH_TOOLS,
    RUN_SUBTASK,
    RUN_SEARCH,
    START_SUBTASK,
    WAIT_SUBTASKS,
    EXECUTE_PLAN,
    CREATE_PLAN,
];

/// The agent's own tools, which a child keeps whatever `tools` it is given.
const KEPT: &[&str] = &[
    ASK_USER,
    LIST_MODELS,
    "list_shared",
    "read_shared",
    "share_result",
];

impl Kin {
    /// A loop's next child id: `c1`, `c2`, … over the whole run.
    pub(crate) fn next_id(&self) -> String {
        let next = self.ids.get() + 1;
        self.ids.set(next);
        format!("c{next}")
    }

    /// The sink of a child `child` of this loop: its own events wrapped once,
    /// a grandchild's (already wrapped) passed on as they are.
    fn child_sink(&self, child: &str, label: &str, parent_call_id: &str) -> Sink {
        let parent = self.sink.clone();
        let (child, label, parent_call_id) = (
            child.to_owned(),
            label.to_owned(),
            parent_call_id.to_owned(),
        );
        let me = self.me.clone();
        let depth = self.depth + 1;
        Rc::new(move |event| match event {
            AgentEvent::Child { .. } => parent(event),
            other => parent(AgentEvent::Child {
                child: child.clone(),
                parent: me.clone(),
                parent_call_id: parent_call_id.clone(),
                depth,
                label: label.clone(),
                event: Box::new(other),
            }),
        })
    }
}

/// Runs one child of `parent` and settles it; its events reach the
/// parent's sink tagged, ending with its (tagged) `done`.
pub(crate) async fn spawn(parent: &Rc<Kin>, mut spec: ChildSpec) -> ChildOutcome {
    let child = spec.id.take().unwrap_or_else(|| parent.next_id());
    let depth = parent.depth + 1;
    if depth > parent.max_depth {
        return ChildOutcome::Failed {
            child,
            code: "max_delegation_depth".into(),
            message: format!(
                "not started: a {} at depth {depth} would pass the run's delegation limit of {} (max_delegation_depth); do this part yourself",
                spec.label, parent.max_depth
            ),
        };
    }
    let parent_call_id = parent.current_call.borrow().clone();
    let sink = parent.child_sink(&child, &spec.label, &parent_call_id);
    // A permit: the parent's own while it waits here, else the pool's.
    let permit = match future::select(parent.permit.child(), parent.cancel.aborted()).await {
        Either::Left((permit, _)) => permit,
        Either::Right(_) => {
            return ChildOutcome::Failed {
                child,
                code: "cancelled".into(),
                message: "not started: the run was stopped".into(),
            };
        }
    };
    let keep = |spec_of: &CapabilitySpec| {
        if KEPT.contains(&spec_of.name.as_str()) {
            return true;
        }
        if spec.read_only && spec_of.category != Category::Read {
            return false;
        }
        spec.tools
            .as_ref()
            .is_none_or(|tools| tools.contains(&spec_of.name))
    };
    let mut base = parent.base.filtered(keep);
    if spec.role == Role::Step
        && base.lookup("read_shared").is_err()
        && let Some(storage) = &parent.memory_tools
    {
        kiln_capabilities::builtin::add_run_memory(&mut base, storage);
    }
    // A team member works with its own prompt, model, autonomy (never looser
    // than the caller's), tools and secrets, under the caller's budget.
    let member = spec.agent.take();
    let (base, servers, secrets, brought) = match (&member, &parent.bench) {
        (Some(member), Some(bench)) => {
            let theirs = base.filtered(|spec_of| !parent.brought.contains(&spec_of.name));
            let belt = crate::profile::belt(bench, member, theirs).await;
            for message in belt.problems {
                sink(AgentEvent::LogUpdate { message });
            }
            (belt.registry, belt.servers, belt.secrets, Rc::new(belt.own))
        }
        _ => (
            base,
            Vec::new(),
            parent.secrets.clone(),
            parent.brought.clone(),
        ),
    };
    let base = Rc::new(base);
    let (provider, options, gate, preamble, team) = match &member {
        Some(member) => (
            member.provider.clone(),
            member.options.clone(),
            parent.gate.derived(|settings| {
                crate::profile::tighten(&mut settings.autonomy, &member.profile)
            }),
            Some(member.profile.system_prompt.trim().to_owned()).filter(|text| !text.is_empty()),
            Rc::new(parent.team.for_member(member)),
        ),
        None => (
            parent.provider.clone(),
            parent.options.clone(),
            parent.gate.clone(),
            parent.preamble.clone(),
            parent.team.clone(),
        ),
    };
    let kin = Rc::new(Kin {
        provider,
        options,
        runner: parent.runner.clone(),
        clock: parent.clock.clone(),
        budget: parent.budget.clone(),
        base,
        gate,
        secrets,
        limits: parent.limits,
        entrance: parent.entrance.clone(),
        random: parent.random.clone(),
        memory: parent.memory.clone(),
        memory_tools: parent.memory_tools.clone(),
        cancel: parent.cancel.clone(),
        sink: sink.clone(),
        depth,
        max_depth: parent.max_depth,
        me: Some(child.clone()),
        ids: parent.ids.clone(),
        permit: Rc::new(permit),
        background: Rc::new(Background::new()),
        current_call: RefCell::new(String::new()),
        guards: parent.guards,
        child_turns: parent.child_turns,
        on_progress: parent.on_progress.clone(),
        max_concurrent: parent.max_concurrent,
        preamble: preamble.clone(),
        team,
        bench: parent.bench.clone(),
        brought,
    });
    let guards = Guards {
        max_turns: parent.child_turns.min(parent.guards.max_turns),
        ..parent.guards
    };
    let output_schema = spec
        .output_schema
        .as_ref()
        .map(crate::codeact::strict_schema);
    let driven = crate::codeact::drive(Loop {
        kin: kin.clone(),
        role: spec.role,
        messages: vec![Message::User { text: spec.prompt }],
        preamble: preamble.into_iter().chain(spec.preamble).collect(),
        output_schema,
        direct: Vec::new(),
        guards,
        compaction: Compaction::default(),
        skills: String::new(),
    })
    .await;
    for server in servers {
        let _ = server.client.close().await;
    }
    let driven = match driven {
        Ok(driven) => driven,
        Err(why) => {
            return ChildOutcome::Failed {
                child,
                code: "invalid_arguments".into(),
                message: why,
            };
        }
    };
    let result = driven.result(None);
    sink(AgentEvent::Done {
        result: result.clone(),
    });
    settle(
        child,
        spec.output_schema.is_some(),
        &result.stop,
        result.value,
        result.text,
        result.turns,
    )
}

/// A child's result as its outcome (reference/000's `settleStepResult`): a
/// stop that is not a success fails; so does a sole-key `{error}` value,
/// and (schemaless) a value whose `error` is a string.
fn settle(
    child: String,
    schema: bool,
    stop: &AgentStop,
    value: Value,
    text: String,
    turns: u32,
) -> ChildOutcome {
    if !stop.is_success() {
        let code = stop.code.clone().unwrap_or_else(|| match stop.reason {
            StopReason::Provider => "provider".into(),
            StopReason::Budget => "budget".into(),
            _ => "failed".into(),
        });
        return ChildOutcome::Failed {
            child,
            code,
            message: stop
                .message
                .clone()
                .unwrap_or_else(|| "the child stopped".into()),
        };
    }
    let error = match &value {
        Value::Object(map) if map.len() == 1 && map.contains_key("error") => {
            Some(map["error"].clone())
        }
        Value::Object(map) if !schema => {
            map.get("error").filter(|error| error.is_string()).cloned()
        }
        _ => None,
    };
    if let Some(error) = error {
        let message = match &error {
            Value::String(text) => text.clone(),
            Value::Object(map) => map
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| error.to_string(), str::to_owned),
            other => other.to_string(),
        };
        return ChildOutcome::Failed {
            child,
            code: "child_error".into(),
            message,
        };
    }
    let value = if value.is_null() {
        Value::String(text)
    } else {
        value
    };
    ChildOutcome::Completed {
        child,
        value,
        turns,
    }
}

/// The delegation tools' arguments; `agent` only for a loop with a team.
fn child_args(team: &crate::profile::Team) -> Value {
    let mut schema = json!({
        "type": "object",
        "properties": {
            "prompt": {"type": "string", "description": "The whole task: the child sees nothing else."},
            "output_schema": {"type": "object", "description": "A JSON Schema its result must match."},
            "tools": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["prompt"]
    });
    if !team.is_empty() {
        schema["properties"]["agent"] = json!({
            "type": "string",
            "description": format!(
                "A member of your team, by slug ({}): it does the part with its own instructions and model.",
                team.slugs()
            )
        });
    }
    schema
}

/// How the delegation tools' descriptions end: the program form, with
/// `agent` when the loop has a team.
fn program_form(method: &str, team: &crate::profile::Team) -> String {
    if team.is_empty() {
        format!("In a program: agents.{method}(prompt, {{outputSchema, tools}}).")
    } else {
        format!(
            "In a program: agents.{method}(prompt, {{outputSchema, tools, agent}}); `agent` hands it to a member of your team ({}).",
            team.slugs()
        )
    }
}

/// Reads `{prompt, output_schema?, tools?, agent?}`.
fn read_child_args(args: &Value) -> Result<ChildArgs, ToolFailure> {
    let prompt = args
        .get("prompt")
        .and_then(Value::as_str)
        .filter(|prompt| !prompt.trim().is_empty())
        .ok_or_else(|| {
            failure(
                "invalid_arguments",
                "a child needs `prompt`: the task, as a string".into(),
            )
        })?
        .to_owned();
    let schema = args
        .get("output_schema")
        .filter(|schema| !schema.is_null())
        .cloned();
    let tools = match args.get("tools") {
        None | Some(Value::Null) => None,
        Some(Value::Array(names)) => Some(
            names
                .iter()
                .map(|name| name.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| {
                    failure(
                        "invalid_arguments",
                        "`tools` must be an array of tool names".into(),
                    )
                })?,
        ),
        Some(_) => {
            return Err(failure(
                "invalid_arguments",
                "`tools` must be an array of tool names".into(),
            ));
        }
    };
    let agent = match args.get("agent") {
        None | Some(Value::Null) => None,
        Some(Value::String(slug)) => Some(slug.clone()),
        Some(_) => {
            return Err(failure(
                "invalid_arguments",
                "`agent` must be the slug of an agent of your team, a string".into(),
            ));
        }
    };
    Ok(ChildArgs {
        prompt,
        output_schema: schema,
        tools,
        agent,
    })
}

/// The team member `agent` names, if any: refused by name when the loop has
/// no team or the team has no such agent.
fn member_of(
    kin: &Kin,
    agent: Option<&str>,
) -> Result<Option<Rc<crate::profile::Member>>, ToolFailure> {
    let Some(slug) = agent else { return Ok(None) };
    kin.team.find(slug).map(Some).map_err(|why| {
        let code = if kin.team.is_empty() {
            "not_orchestrator"
        } else {
            "unknown_agent"
        };
        failure(code, why)
    })
}

/// Names the tools of `tools` that are not on `kin`'s belt.
fn unknown_tools(kin: &Kin, tools: Option<&Vec<String>>) -> Result<(), ToolFailure> {
    let Some(tools) = tools else { return Ok(()) };
    let missing: Vec<&str> = tools
        .iter()
        .filter(|name| kin.base.lookup(name).is_err())
        .map(String::as_str)
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(failure(
            "tool_unavailable",
            format!(
                "the child cannot be given {}: not a tool of this job",
                missing
                    .iter()
                    .map(|name| format!("`{name}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ))
    }
}

/// `run_subtask` and `run_search`.
pub(crate) struct RunSubtask {
    pub kin: Rc<Kin>,
    pub search: bool,
}

impl RunSubtask {
    #[must_use]
    pub(crate) fn spec(team: &crate::profile::Team) -> CapabilitySpec {
        builtin(
            RUN_SUBTASK,
            &format!(
                "Hands a self-contained part of the work to a sub-agent with your tools (or those named) and waits: {{status: \"completed\", value}} or {{status: \"failed\", error}}. {}",
                program_form("run", team)
            ),
            child_args(team),
            Category::Read,
        )
    }

    #[must_use]
    pub(crate) fn search_spec() -> CapabilitySpec {
        builtin(
            RUN_SEARCH,
            "A read-only sub-agent (read tools only) looks something up and answers its findings: {status, value | error}.",
            json!({
                "type": "object",
                "properties": {"query": {"type": "string", "description": "What to find out, in full."}},
                "required": ["query"]
            }),
            Category::Read,
        )
    }
}

impl Implementation for RunSubtask {
    fn call(
        &self,
        args: Value,
        _context: CallContext,
        _permit: Permit,
    ) -> LocalBoxFuture<'static, ToolReply> {
        let kin = self.kin.clone();
        let search = self.search;
        Box::pin(async move {
            let spec = if search {
                let query = args
                    .get("query")
                    .and_then(Value::as_str)
                    .filter(|query| !query.trim().is_empty())
                    .ok_or_else(|| {
                        failure(
                            "invalid_arguments",
                            "run_search needs `query`, a string".into(),
                        )
                    })?;
                ChildSpec {
                    prompt: format!(
                        "Find out, using only your read tools, and answer with what you found and where: {query}"
                    ),
                    output_schema: None,
                    tools: None,
                    read_only: true,
                    label: "search".into(),
                    role: Role::Subtask,
                    preamble: None,
                    id: None,
                    agent: None,
                }
            } else {
                let child = read_child_args(&args)?;
                unknown_tools(&kin, child.tools.as_ref())?;
                let agent = member_of(&kin, child.agent.as_deref())?;
                ChildSpec {
                    prompt: child.prompt,
                    output_schema: child.output_schema,
                    tools: child.tools,
                    read_only: false,
                    label: agent.as_ref().map_or_else(
                        || "subtask".into(),
                        |member| format!("agent {}", member.profile.slug),
                    ),
                    role: Role::Subtask,
                    preamble: None,
                    id: None,
                    agent,
                }
            };
            Ok(spawn(&kin, spec).await.to_json())
        })
    }
}

/// One `start_subtask` child's record.
#[derive(Debug, Clone)]
struct Record {
    status: &'static str,
    outcome: Option<Value>,
}

/// A loop's `start_subtask` children: their futures (driven beside the loop
/// by `Background::pump`) and their records. When the loop ends, the
/// children still running are stopped and recorded `aborted`.
pub struct Background {
    incoming: RefCell<Vec<LocalBoxFuture<'static, ()>>>,
    records: RefCell<BTreeMap<String, Record>>,
    order: RefCell<Vec<String>>,
    pump: RefCell<Option<Waker>>,
    waiting: RefCell<Vec<Waker>>,
    /// Thrown when the loop ends: its background children stop.
    pub(crate) cancel: AbortSignal,
}

impl Background {
    #[must_use]
    pub fn new() -> Self {
        Self {
            incoming: RefCell::default(),
            records: RefCell::default(),
            order: RefCell::default(),
            pump: RefCell::default(),
            waiting: RefCell::default(),
            cancel: AbortSignal::new(),
        }
    }

    fn wake_waiters(&self) {
        for waker in self.waiting.borrow_mut().drain(..) {
            waker.wake();
        }
    }

    fn start(&self, id: String, work: LocalBoxFuture<'static, ()>) {
        self.records.borrow_mut().insert(
            id.clone(),
            Record {
                status: "running",
                outcome: None,
            },
        );
        self.order.borrow_mut().push(id);
        self.incoming.borrow_mut().push(work);
        if let Some(waker) = self.pump.borrow_mut().take() {
            waker.wake();
        }
    }

    fn settle(&self, id: &str, outcome: &ChildOutcome) {
        if let Some(record) = self.records.borrow_mut().get_mut(id) {
            record.status = match outcome {
                ChildOutcome::Completed { .. } => "completed",
                ChildOutcome::Failed { code, .. } if code == "cancelled" => "aborted",
                ChildOutcome::Failed { .. } => "failed",
            };
            record.outcome = Some(outcome.to_json());
        }
        self.wake_waiters();
    }

    /// How many children were started.
    #[must_use]
    pub(crate) fn started(&self) -> usize {
        self.order.borrow().len()
    }

    /// Drives the children; never ends (the loop it runs beside does).
    pub(crate) async fn pump(&self) {
        let mut running: FuturesUnordered<LocalBoxFuture<'static, ()>> = FuturesUnordered::new();
        future::poll_fn(|cx| {
            running.extend(self.incoming.borrow_mut().drain(..));
            while let Poll::Ready(Some(())) = running.poll_next_unpin(cx) {}
            *self.pump.borrow_mut() = Some(cx.waker().clone());
            Poll::<()>::Pending
        })
        .await;
    }

    /// Ends the registry with its loop: the children still running are
    /// stopped and recorded `aborted`. Answers how many.
    pub(crate) fn end(&self) -> usize {
        self.cancel.abort();
        self.incoming.borrow_mut().clear();
        let mut stopped = 0;
        for record in self.records.borrow_mut().values_mut() {
            if record.status == "running" {
                record.status = "aborted";
                record.outcome = Some(
                    json!({"status": "aborted", "error": {"code": "cancelled", "message": "stopped: the turn that started it ended"}}),
                );
                stopped += 1;
            }
        }
        self.wake_waiters();
        stopped
    }

    fn statuses(&self, ids: &[String]) -> Vec<Value> {
        let records = self.records.borrow();
        ids.iter()
            .filter_map(|id| {
                records.get(id).map(|record| {
                    let mut entry = record
                        .outcome
                        .clone()
                        .unwrap_or_else(|| json!({"status": record.status}));
                    entry["subtask_id"] = json!(id);
                    entry["status"] = json!(record.status);
                    entry
                })
            })
            .collect()
    }

    fn all_settled(&self, ids: &[String]) -> bool {
        let records = self.records.borrow();
        ids.iter().all(|id| {
            records
                .get(id)
                .is_none_or(|record| record.status != "running")
        })
    }
}

impl Default for Background {
    fn default() -> Self {
        Self::new()
    }
}

/// Resolves once every one of `ids` left `running`.
struct Settled<'a> {
    background: &'a Background,
    ids: Vec<String>,
}

impl Future for Settled<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.background.all_settled(&self.ids) {
            return Poll::Ready(());
        }
        self.background
            .waiting
            .borrow_mut()
            .push(cx.waker().clone());
        Poll::Pending
    }
}

/// `start_subtask`.
pub(crate) struct StartSubtask(pub Rc<Kin>);

impl StartSubtask {
    #[must_use]
    pub(crate) fn spec(team: &crate::profile::Team) -> CapabilitySpec {
        builtin(
            START_SUBTASK,
            &format!(
                "Starts a sub-agent in the background and answers {{subtask_id}} at once, so you keep working; collect it with wait_subtasks. {} Children still running when your turn ends are stopped.",
                program_form("start", team)
            ),
            child_args(team),
            Category::Read,
        )
    }
}

impl Implementation for StartSubtask {
    fn call(
        &self,
        args: Value,
        _context: CallContext,
        _permit: Permit,
    ) -> LocalBoxFuture<'static, ToolReply> {
        let kin = self.0.clone();
        Box::pin(async move {
            let child = read_child_args(&args)?;
            unknown_tools(&kin, child.tools.as_ref())?;
            let agent = member_of(&kin, child.agent.as_deref())?;
            if kin.background.started() >= MAX_BACKGROUND {
                return Err(failure(
                    "background_limit_reached",
                    format!(
                        "not started: this turn already started {MAX_BACKGROUND} background subtasks, the limit; wait for them with wait_subtasks, or use run_subtask"
                    ),
                ));
            }
            // The child's id is known before it runs: the receipt names it.
            let id = kin.next_id();
            let spec = ChildSpec {
                prompt: child.prompt,
                output_schema: child.output_schema,
                tools: child.tools,
                read_only: false,
                label: agent.as_ref().map_or_else(
                    || "background subtask".into(),
                    |member| format!("agent {} (background)", member.profile.slug),
                ),
                role: Role::Subtask,
                preamble: None,
                id: Some(id.clone()),
                agent,
            };
            let background = Rc::downgrade(&kin.background);
            let stop = kin.background.cancel.clone();
            let parent = kin.clone();
            let key = id.clone();
            let work = Box::pin(async move {
                let child = spawn_background(&parent, spec, stop);
                let outcome = child.await;
                if let Some(background) = background.upgrade() {
                    background.settle(&key, &outcome);
                }
            });
            kin.background.start(id.clone(), work);
            Ok(json!({"subtask_id": id, "status": "running"}))
        })
    }
}

/// A background child: the same spawn, stopped by its loop's end as well as
/// by the run's cancel switch.
async fn spawn_background(parent: &Rc<Kin>, spec: ChildSpec, stop: AbortSignal) -> ChildOutcome {
    let child = std::pin::pin!(spawn(parent, spec));
    match future::select(child, stop.aborted()).await {
        Either::Left((outcome, _)) => outcome,
        Either::Right(_) => ChildOutcome::Failed {
            child: String::new(),
            code: "cancelled".into(),
            message: "stopped: the turn that started it ended".into(),
        },
    }
}

/// `wait_subtasks`.
pub(crate) struct WaitSubtasks(pub Rc<Kin>);

impl WaitSubtasks {
    #[must_use]
    pub(crate) fn spec() -> CapabilitySpec {
        builtin(
            WAIT_SUBTASKS,
            "Waits until the named background subtasks (all of this turn's when `ids` is absent) have finished, or `timeout_ms` passes; answers {subtasks: [{subtask_id, status, value | error}], timed_out}. In a program: agents.wait({ids, timeoutMs}).",
            json!({
                "type": "object",
                "properties": {
                    "ids": {"type": "array", "items": {"type": "string"}},
                    "timeout_ms": {"type": "integer", "minimum": 0}
                }
            }),
            Category::Read,
        )
    }
}

impl Implementation for WaitSubtasks {
    fn call(
        &self,
        args: Value,
        _context: CallContext,
        _permit: Permit,
    ) -> LocalBoxFuture<'static, ToolReply> {
        let kin = self.0.clone();
        Box::pin(async move {
            let background = kin.background.clone();
            let ids: Vec<String> = match args.get("ids") {
                None | Some(Value::Null) => background.order.borrow().clone(),
                Some(Value::Array(ids)) => ids
                    .iter()
                    .map(|id| id.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| {
                        failure(
                            "invalid_arguments",
                            "`ids` must be an array of subtask ids".into(),
                        )
                    })?,
                Some(_) => {
                    return Err(failure(
                        "invalid_arguments",
                        "`ids` must be an array of subtask ids".into(),
                    ));
                }
            };
            let unknown: Vec<&String> = ids
                .iter()
                .filter(|id| !background.records.borrow().contains_key(*id))
                .collect();
            if !unknown.is_empty() {
                return Err(failure(
                    "unknown_subtask",
                    format!(
                        "no background subtask of this turn has the id {}",
                        unknown
                            .iter()
                            .map(|id| format!("`{id}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
            let timeout = args
                .get("timeout_ms")
                .and_then(Value::as_u64)
                .unwrap_or(DEFAULT_WAIT_MS);
            let settled = Settled {
                background: &background,
                ids: ids.clone(),
            };
            let timer = kin.clock.sleep(timeout);
            let abort = kin.cancel.aborted();
            let timed_out = match future::select(settled, future::select(timer, abort)).await {
                Either::Left(_) => false,
                Either::Right(_) => true,
            };
            Ok(json!({
                "subtasks": background.statuses(&ids),
                "timed_out": timed_out,
            }))
        })
    }
}

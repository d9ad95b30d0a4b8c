//! One CodeAct loop, the turn's or a child's, driven to its end. `drive`
//! runs the loop beside its background children; `Driver` holds the loop's
//! state (the model's ladder and offered functions, the model's view and the
//! person's thread, the counters the guards read) with one method per step
//! of a turn, and `Driver::turn` is the outline: the limits, compaction,
//! asking the model, reading its reply, running its calls, the finish check
//! and the guards.

use std::cell::RefCell;
use std::ops::ControlFlow::{self, Break, Continue};
use std::rc::Rc;

use futures::StreamExt as _;
use kiln_capabilities::args::InputSchema;
use kiln_capabilities::{CapabilitySpec, Dispatcher, HeldSignal, Registry};
use kiln_http::Clock;
use kiln_providers::budget::RunBudget;
use kiln_providers::{
    ChatRequest, ErrorKind, Event, FinalMessage, Message, Provider, ProviderError, ToolCall,
    ToolDef,
};
use kiln_types::RunOutcome;
use kiln_types::agent::{
    AgentEvent, AgentResult, AgentStop, CREATE_PLAN, EXECUTE_CODE, EXECUTE_PLAN, Guards,
    RUN_SUBTASK, StopReason, stop_code,
};
use kiln_types::chat::Usage;
use kiln_types::protocol::CallRequest;
use kiln_types::tool_result::{CallOutcome, ToolFailure, ToolReply};
use serde_json::{Value, json};

use super::history::{self, Compaction};
use super::prompt;
use super::tools::{self, Action, Actions, DELIVERY, ExecuteCode, ReturnResult, SearchTools, Sink};
use crate::subagent::{self, Kin};

/// How many times a schema'd turn that ended in prose is reminded of the
/// contract before it fails.
const MAX_FINISH_NUDGES: u32 = 2;

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
    /// The skills block of the turn's prompt (the catalog, and the bodies
    /// the person's message asked for with `/name`): read fresh each turn,
    /// never kept in the thread; empty for a child.
    pub skills: String,
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
    guards: Guards,
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
            guards: self.guards,
        }
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

/// The loop itself: set up, then one turn after another (`Driver::turn`)
/// until one ends it, then the end.
async fn drive_loop(spec: Loop) -> Result<Driven, String> {
    let mut driver = Driver::new(spec)?;
    let stop = loop {
        if let Break(stop) = driver.turn().await {
            break stop;
        }
    };
    Ok(driver.end(stop))
}

/// One loop under way. A step that returns `ControlFlow` ends the loop with
/// `Break(stop)`; `Continue` goes on.
struct Driver {
    kin: Rc<Kin>,
    sink: Sink,
    guards: Guards,
    compaction: Compaction,
    /// The output schema, compiled: with one, only `finish` ends the loop
    /// well.
    checker: Option<InputSchema>,
    /// What the loop's `return_result` was given.
    returned: Rc<RefCell<Option<Value>>>,
    /// The loop's belt: the kin's tools and the loop's own.
    belt: Vec<CapabilitySpec>,
    /// Where `execute_code` leaves each action's run, by call number.
    actions: Rc<Actions>,
    /// The model's ladder: the belt plus `execute_code`.
    dispatcher: Dispatcher,
    /// The functions the model is offered: `execute_code` and the direct
    /// tools.
    offered: Vec<ToolDef>,
    system: String,
    /// The thread as the model sees it (a compacted part replaced by its
    /// summary).
    view: Vec<Message>,
    /// The person's thread: every message, the compaction rows in place.
    thread: Vec<Message>,
    tally: Tally,
    /// The value a program finished with (one that matched the schema).
    finished: Option<Value>,
    /// Whether a `context_overflow` was already answered by compacting.
    overflow_retried: bool,
    /// The number of the model's last call up its ladder.
    call_number: u32,
}

/// What one model call answered.
struct Reply {
    done: Option<FinalMessage>,
    failed: Option<ProviderError>,
    /// What streamed, kept when the person stops the turn mid-message.
    streamed: String,
}

/// What the model is told of one call, and the action's run when it was
/// one.
struct Observation {
    content: String,
    is_error: bool,
    run: Option<Value>,
}

impl Driver {
    /// Sets a loop up: its belt (the kin's tools and the loop's own), the
    /// model's ladder with `execute_code` on it, the functions offered to
    /// the model, the system prompt and the thread.
    fn new(spec: Loop) -> Result<Self, String> {
        let Loop {
            kin,
            role,
            messages,
            mut preamble,
            output_schema,
            direct: asked_direct,
            guards,
            compaction,
            skills,
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
            on_progress: kin.on_progress.clone(),
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
        let all_direct: Vec<String> = belt
            .iter()
            .filter(|spec| is_direct(&spec.name))
            .map(|spec| spec.name.clone())
            .collect();
        for asked in &asked_direct {
            if !all_direct.contains(asked) {
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
        // The prompt: the caller's system text first, as a preamble.
        let mut view: Vec<Message> = Vec::new();
        for message in messages {
            match message {
                Message::System { text } => preamble.push(text),
                other => view.push(other),
            }
        }
        let team: Vec<(String, String, String)> = kin
            .team
            .members()
            .iter()
            .map(|member| {
                let profile = &member.profile;
                (
                    profile.slug.clone(),
                    profile.name.clone(),
                    profile.system_prompt.clone(),
                )
            })
            .collect();
        // The contract, as full as the model's context has room for.
        let preamble = preamble.join("\n\n");
        let context = kin.provider.context_tokens(&kin.options.model);
        let mut contract = None;
        for detail in prompt::Detail::ALL {
            let direct: Vec<String> = if detail == prompt::Detail::Least {
                all_direct
                    .iter()
                    .filter(|name| asked_direct.contains(name))
                    .cloned()
                    .collect()
            } else {
                all_direct.clone()
            };
            let mut offered: Vec<ToolDef> = vec![spec_def(&Actions::spec())];
            offered.extend(
                belt.iter()
                    .filter(|spec| direct.contains(&spec.name))
                    .map(spec_def),
            );
            let system = prompt::system_prompt(&prompt::PromptParts {
                preamble: &preamble,
                belt: &belt,
                direct: &direct,
                output_schema: output_schema.as_ref(),
                team: &team,
                skills: &skills,
                detail,
            });
            let fits = context.is_none_or(|context| {
                prompt::contract_tokens(&system, &offered) <= prompt::contract_room(context)
            });
            contract = Some((offered, system));
            if fits {
                break;
            }
        }
        let (offered, system) = contract.unwrap_or_default();
        // A small context is compacted before it is full, not after.
        let compaction = match context {
            Some(context) => Compaction {
                threshold_tokens: compaction.threshold_tokens.min((context * 5 / 8) as u64),
                ..compaction
            },
            None => compaction,
        };
        let thread = view.clone();
        Ok(Self {
            kin,
            sink,
            guards,
            compaction,
            checker,
            returned,
            belt,
            actions,
            dispatcher,
            offered,
            system,
            view,
            thread,
            tally: Tally::default(),
            finished: None,
            overflow_retried: false,
            call_number: 0,
        })
    }

    /// One turn: the model asked, and the calls it makes run. `Continue`
    /// goes on to the next turn (after an answered call, a nudge or a
    /// retry); `Break` ends the loop.
    async fn turn(&mut self) -> ControlFlow<AgentStop> {
        self.within_limits()?;
        self.compact_when_long().await;
        let reply = self.ask_model().await;
        if let Some(error) = reply.failed {
            return self.recover(error, reply.streamed).await;
        }
        let message = self.accept(reply.done)?;
        if message.tool_calls.is_empty() {
            return self.answer_prose(&message);
        }
        let signature = self.run_calls(&message.tool_calls).await?;
        self.finish_check()?;
        self.guard_turn(&message.tool_calls, signature)
    }

    /// Whether another turn may start: not once the person stopped the
    /// loop, nor past its `max_turns` or `max_tokens` guard.
    fn within_limits(&self) -> ControlFlow<AgentStop> {
        if self.kin.cancel.is_aborted() {
            return Break(cancelled());
        }
        if self.tally.turns >= self.guards.max_turns {
            return Break(guard(
                stop_code::MAX_TURNS,
                format!(
                    "stopped after {} model turns, the job's limit (max_turns)",
                    self.tally.turns
                ),
            ));
        }
        if self.tally.tokens() >= self.guards.max_tokens {
            return Break(guard(
                stop_code::MAX_TOKENS,
                format!(
                    "stopped after {} tokens, past the job's limit of {} (max_tokens)",
                    self.tally.tokens(),
                    self.guards.max_tokens
                ),
            ));
        }
        Continue(())
    }

    /// The next model call's request: the system prompt, the view and the
    /// offered functions.
    fn request(&self) -> ChatRequest {
        ChatRequest {
            messages: std::iter::once(Message::System {
                text: self.system.clone(),
            })
            .chain(self.view.iter().cloned())
            .collect(),
            tools: self.offered.clone(),
            options: self.kin.options.clone(),
        }
    }

    /// Compacts the view before a turn whose estimated prompt passes the
    /// threshold.
    async fn compact_when_long(&mut self) {
        if kiln_providers::cost::estimate_prompt_tokens(&self.request())
            > self.compaction.threshold_tokens
        {
            self.compact().await;
        }
    }

    /// Asks the model for its next message, its text streamed to the sink
    /// as it comes; counts the turn, announces the call and counts its
    /// usage.
    async fn ask_model(&mut self) -> Reply {
        let kin = self.kin.clone();
        self.tally.turns += 1;
        let started = kin.clock.now_ms();
        let spent_before = kin.budget.spend().calls.len();
        let mut stream = kiln_providers::turn(
            &*kin.provider,
            self.request(),
            Some(kin.budget.clone()),
            Some(kin.cancel.clone()),
        );
        let mut reply = Reply {
            done: None,
            failed: None,
            streamed: String::new(),
        };
        while let Some(item) = stream.next().await {
            match item {
                Ok(Event::TextDelta { text }) => {
                    reply.streamed.push_str(&text);
                    (self.sink)(AgentEvent::TextDelta { text });
                }
                Ok(Event::Done { message }) => reply.done = Some(message),
                Ok(_) => {}
                Err(error) => {
                    reply.failed = Some(error);
                    break;
                }
            }
        }
        drop(stream);
        let used = announce_call(
            &self.sink,
            &*kin.provider,
            &kin.options.model,
            &kin.budget,
            spent_before,
            reply.done.as_ref(),
            started,
            &*kin.clock,
        );
        self.tally.usage.input_tokens += used.input_tokens;
        self.tally.usage.output_tokens += used.output_tokens;
        reply
    }

    /// Answers a model call that failed. Stopped by the person, the loop
    /// keeps what streamed and ends; a first `context_overflow` compacts the
    /// view and tries again, the turn not counted; a malformed tool call is
    /// told to the model, which tries again; any other error ends the loop
    /// with the provider's code.
    async fn recover(&mut self, error: ProviderError, streamed: String) -> ControlFlow<AgentStop> {
        if self.kin.cancel.is_aborted() {
            self.keep_partial(streamed);
            return Break(cancelled());
        }
        match error.kind {
            ErrorKind::ContextOverflow if !self.overflow_retried => {
                self.overflow_retried = true;
                self.tally.turns -= 1;
                let before = self.view.len();
                self.compact().await;
                if self.view.len() < before {
                    return Continue(());
                }
            }
            ErrorKind::InvalidToolCall => {
                let note = format!(
                    "Your last tool call could not be read: {error}. Call the tool again with its arguments as one JSON object; for {EXECUTE_CODE}, {{\"code\": \"...the program...\"}}."
                );
                (self.sink)(AgentEvent::LogUpdate {
                    message: format!("the model's tool call was malformed; it is told so: {error}"),
                });
                self.push(Message::User { text: note });
                return Continue(());
            }
            _ => {}
        }
        Break(AgentStop {
            reason: StopReason::Provider,
            code: Some(error.kind.code().into()),
            message: Some(error.to_string()),
        })
    }

    /// Takes the model's message into the thread. A stream that ended
    /// without one ends the loop, and so does a turn the budget refused (it
    /// was never sent, so it is not counted) or the person stopped (what
    /// came of it is kept).
    fn accept(&mut self, done: Option<FinalMessage>) -> ControlFlow<AgentStop, FinalMessage> {
        let Some(message) = done else {
            return Break(AgentStop {
                reason: StopReason::Provider,
                code: Some("incomplete".into()),
                message: Some("the provider's stream ended without its message".into()),
            });
        };
        if let Some(stop) = message.stop.clone().filter(|stop| stop.reason.is_refusal()) {
            use kiln_providers::StopReason as Model;
            // A turn the budget refused was never sent: it is not a model turn.
            if stop.reason != Model::Aborted {
                self.tally.turns -= 1;
            }
            let code = match stop.reason {
                Model::Aborted => {
                    self.keep_partial(message.text);
                    return Break(cancelled());
                }
                Model::Budget => stop_code::MAX_COST,
                Model::Deadline => "deadline",
                _ => "turns",
            };
            return Break(AgentStop {
                reason: StopReason::Budget,
                code: Some(code.into()),
                message: stop.message,
            });
        }
        self.tally.last_text.clone_from(&message.text);
        self.push(Message::Assistant {
            text: message.text.clone(),
            tool_calls: message.tool_calls.clone(),
        });
        Continue(message)
    }

    /// A message without tool calls. Without an output schema it is the
    /// answer; with one, the model is reminded of `finish` (at most
    /// `MAX_FINISH_NUDGES` times, and while turns remain), then the loop
    /// ends unfinished.
    fn answer_prose(&mut self, message: &FinalMessage) -> ControlFlow<AgentStop> {
        if let Some(stop) = message
            .stop
            .as_ref()
            .filter(|stop| stop.reason == kiln_providers::StopReason::MaxTokens)
        {
            // The provider says why when it was not the limit (a small
            // model's context that filled first).
            let message = match &stop.message {
                Some(why) => format!("the model's message was cut: {why}"),
                None => format!(
                    "the model's message was cut at its limit of {} tokens",
                    self.kin.options.max_tokens
                ),
            };
            (self.sink)(AgentEvent::LogUpdate { message });
        }
        if self.checker.is_none() {
            return Break(AgentStop {
                reason: StopReason::Answered,
                code: None,
                message: None,
            });
        }
        if self.tally.nudges < MAX_FINISH_NUDGES && self.tally.turns < self.guards.max_turns {
            self.tally.nudges += 1;
            self.push(Message::User {
                text: prompt::finish_nudge(),
            });
            return Continue(());
        }
        Break(AgentStop {
            reason: StopReason::Unfinished,
            code: Some(stop_code::WITHOUT_FINISH.into()),
            message: Some(format!(
                "ended after {} action(s) and {} model turn(s) without calling finish; {}",
                self.tally.actions,
                self.tally.turns,
                quote(&message.text)
            )),
        })
    }

    /// Whether a turn made more calls than the job allows in one turn.
    fn too_many(&self, calls: &[ToolCall]) -> bool {
        calls.len() > self.guards.max_tool_calls_per_turn as usize
    }

    /// Runs a turn's calls in order, each answered in the thread; past the
    /// per-turn limit, or once the task finished, a call is answered
    /// `not_run` instead. Answers the turn's signature (each call that ran
    /// with what it saw), or the person's stop.
    async fn run_calls(&mut self, calls: &[ToolCall]) -> ControlFlow<AgentStop, String> {
        let too_many = self.too_many(calls);
        let mut signature = String::new();
        for call in calls {
            if too_many || self.finished.is_some() {
                let why = if too_many {
                    format!(
                        "not run: the turn made {} tool calls, more than the job's {} (max_tool_calls_per_turn)",
                        calls.len(),
                        self.guards.max_tool_calls_per_turn
                    )
                } else {
                    "not run: the task already finished".into()
                };
                self.push(tool_message(
                    call,
                    json!({"error": {"code": "not_run", "message": why}}).to_string(),
                    true,
                ));
                continue;
            }
            signature.push_str(&self.run_call(call).await?);
        }
        Continue(signature)
    }

    /// Runs one call up the model's ladder (a tool the model is not offered
    /// is refused `tool_unavailable`) and answers it in the thread. Answers
    /// the call's part of the turn's signature, or the person's stop.
    async fn run_call(&mut self, call: &ToolCall) -> ControlFlow<AgentStop, String> {
        self.call_number += 1;
        let code = (call.name == EXECUTE_CODE)
            .then(|| {
                call.arguments
                    .get("code")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .flatten();
        (self.sink)(AgentEvent::ToolCallUpdate {
            call_id: call.id.clone(),
            name: call.name.clone(),
            args: call.arguments.clone(),
            code,
        });
        // `execute_plan` is on the belt in every mode: in plan mode it is
        // not offered, and a call is the ladder's to refuse by its words.
        let offered_here = self.offered.iter().any(|def| def.name == call.name)
            || (call.name == EXECUTE_PLAN && self.belt.iter().any(|spec| spec.name == call.name));
        self.kin.current_call.replace(call.id.clone());
        let reply = if offered_here {
            let held: HeldSignal = Rc::new(|_| {});
            self.dispatcher
                .call(
                    CallRequest {
                        call_number: self.call_number,
                        tool: call.name.clone(),
                        args: call.arguments.clone(),
                    },
                    held,
                )
                .await
        } else {
            Err(unoffered(&call.name, &self.belt))
        };
        if self.kin.cancel.is_aborted() {
            return Break(cancelled());
        }
        let action = self.actions.done.borrow_mut().remove(&self.call_number);
        // What makes a turn the same as the last: an action's outcome and
        // console, not its timings.
        let same = action.as_ref().map(|action| {
            serde_json::to_string(&(&action.run.report.outcome, &action.run.report.console))
                .unwrap_or_default()
        });
        let Observation {
            content,
            is_error,
            run,
        } = self.observe(reply, action);
        let content = history::cut_result(content);
        let seen = same.as_deref().unwrap_or(&content);
        let part = format!("{}{}{seen}\u{0}", call.name, call.arguments);
        (self.sink)(AgentEvent::ToolResultUpdate {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content: content.clone(),
            is_error,
            run,
        });
        self.push(tool_message(call, content, is_error));
        Continue(part)
    }

    /// What the model is told of a call: an `execute_code` action's
    /// observation (counting the action, and keeping the value it finished
    /// with), a direct tool's answer, or the ladder's refusal.
    fn observe(&mut self, reply: ToolReply, action: Option<Action>) -> Observation {
        match (reply, action) {
            (Ok(_), Some(action)) => {
                self.tally.actions += 1;
                let (text, value) = observe_action(&action, self.checker.as_ref());
                if value.is_some() {
                    self.finished = value;
                }
                Observation {
                    content: text,
                    is_error: action.result.is_error,
                    run: Some(action.result.structured_content),
                }
            }
            (Ok(Value::String(text)), None) => Observation {
                content: text,
                is_error: false,
                run: None,
            },
            (Ok(value), None) => Observation {
                content: value.to_string(),
                is_error: false,
                run: None,
            },
            (Err(failure), _) => {
                let mut error = json!({"code": failure.code, "message": failure.message});
                if let Some(detail) = failure.detail {
                    error["detail"] = detail;
                }
                Observation {
                    content: json!({ "error": error }).to_string(),
                    is_error: true,
                    run: None,
                }
            }
        }
    }

    /// A program that called `finish` with a value the schema holds ends
    /// the loop, finished.
    fn finish_check(&self) -> ControlFlow<AgentStop> {
        if self.finished.is_some() {
            return Break(AgentStop {
                reason: StopReason::Finished,
                code: None,
                message: None,
            });
        }
        Continue(())
    }

    /// The guards of reference/003 after a turn's calls: too many calls in
    /// one turn, too many turns in a row that only delivered results, too
    /// many identical turns in a row (by the turn's `signature`).
    fn guard_turn(&mut self, calls: &[ToolCall], signature: String) -> ControlFlow<AgentStop> {
        if self.too_many(calls) {
            return Break(guard(
                stop_code::MAX_TOOL_CALLS_PER_TURN,
                format!(
                    "the model made {} tool calls in one turn, more than the job's {} (max_tool_calls_per_turn)",
                    calls.len(),
                    self.guards.max_tool_calls_per_turn
                ),
            ));
        }
        let tally = &mut self.tally;
        if calls
            .iter()
            .all(|call| DELIVERY.contains(&call.name.as_str()))
        {
            tally.delivery_streak += 1;
        } else {
            tally.delivery_streak = 0;
        }
        if tally.delivery_streak >= self.guards.delivery_only {
            return Break(guard(
                stop_code::DELIVERY_ONLY,
                format!(
                    "stopped after {} turns in a row that only delivered results (delivery_only)",
                    tally.delivery_streak
                ),
            ));
        }
        if tally.last_signature.as_deref() == Some(signature.as_str()) {
            tally.same_streak += 1;
        } else {
            tally.same_streak = 1;
            tally.last_signature = Some(signature);
        }
        if tally.same_streak >= self.guards.no_progress {
            return Break(guard(
                stop_code::NO_PROGRESS,
                format!(
                    "stopped after {} identical turns: the same calls with the same arguments and results (no_progress)",
                    tally.same_streak
                ),
            ));
        }
        Continue(())
    }

    /// Replaces everything before the view's last `keep_turns` user turns
    /// with a summary; the person's thread keeps everything, with the
    /// summary's row where the cut fell. A failed summarizer leaves the
    /// view whole and says so.
    async fn compact(&mut self) {
        let Some(cut) = history::split_point(&self.view, self.compaction.keep_turns) else {
            (self.sink)(AgentEvent::LogUpdate {
                message:
                    "the thread is long, but there is nothing before its last turns to summarize"
                        .into(),
            });
            return;
        };
        let kin = self.kin.clone();
        match history::summarize(
            &*kin.provider,
            &kin.options,
            &self.view[..cut],
            &kin.budget,
            Some(kin.cancel.clone()),
        )
        .await
        {
            Ok((summary, _)) => {
                let row = history::compaction_row(&summary);
                self.view.splice(..cut, [row.clone()]);
                let at = self.thread.len() - (self.view.len() - 1);
                self.thread.insert(at, row);
                (self.sink)(AgentEvent::Compaction {
                    summary,
                    replaced: cut,
                });
            }
            Err(why) => (self.sink)(AgentEvent::LogUpdate {
                message: format!(
                    "the thread was not compacted: the summarizer failed ({why}); this turn runs against the whole thread"
                ),
            }),
        }
    }

    /// Adds a message to the view and to the person's thread.
    fn push(&mut self, message: Message) {
        self.view.push(message.clone());
        self.thread.push(message);
    }

    /// The text of a message the person stopped, kept as the model's message
    /// (as a chat keeps a reply cut short), when any had come.
    fn keep_partial(&mut self, text: String) {
        if !text.is_empty() {
            self.push(Message::Assistant {
                text,
                tool_calls: Vec::new(),
            });
        }
    }

    /// Ends the loop: a stop that is not a success goes to the sink, every
    /// call the last turn left without a result is answered `not_run` (a
    /// provider refuses a thread with an unanswered call), and the loop's
    /// end is gathered.
    fn end(mut self, stop: AgentStop) -> Driven {
        if !stop.is_success() {
            (self.sink)(AgentEvent::Stop { stop: stop.clone() });
        }
        self.close_calls();
        let returned = self.returned.borrow().clone();
        Driven {
            stop,
            finished: self.finished,
            returned,
            tally: self.tally,
            thread: self.thread,
            view: self.view,
            spend: self.kin.budget.spend().spent_usd,
            guards: self.guards,
        }
    }

    /// Answers every tool call the turn left without a result (it was stopped,
    /// or a guard ended it mid-turn), so that the thread can be sent again: a
    /// provider refuses a call with no answer.
    fn close_calls(&mut self) {
        let Some(at) = self
            .view
            .iter()
            .rposition(|message| matches!(message, Message::Assistant { .. }))
        else {
            return;
        };
        let Message::Assistant { tool_calls, .. } = &self.view[at] else {
            return;
        };
        let answered: Vec<&str> = self.view[at + 1..]
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
            self.push(tool_message(&call, content, true));
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
    belt: &Rc<RefCell<Vec<CapabilitySpec>>>,
) {
    let _ = registry.add(
        ReturnResult::spec(),
        Rc::new(ReturnResult(returned.clone())),
    );
    let _ = registry.add(SearchTools::spec(), Rc::new(SearchTools(belt.clone())));
    let _ = registry.add(
        subagent::RunSubtask::spec(&kin.team),
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
        subagent::StartSubtask::spec(&kin.team),
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

fn cancelled() -> AgentStop {
    AgentStop {
        reason: StopReason::Cancelled,
        code: Some(stop_code::CANCELLED.into()),
        message: Some("the turn was stopped".into()),
    }
}

fn spec_def(spec: &CapabilitySpec) -> ToolDef {
    ToolDef {
        name: spec.name.clone(),
        description: spec.description.clone(),
        input_schema: spec.input_schema.clone(),
    }
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
fn unoffered(name: &str, belt: &[CapabilitySpec]) -> ToolFailure {
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
fn observe_action(action: &Action, checker: Option<&InputSchema>) -> (String, Option<Value>) {
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

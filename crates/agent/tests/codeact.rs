//! The CodeAct loop, natively: scripted conversations (the model's side),
//! the real sandbox in process, the real ladder and the in-memory store.
//! Each test is one mechanic of the loop: an action and its observation,
//! `finish` and the output schema, every guard, the result cut, compaction,
//! approvals, Stop, the whitelist, malformed calls, `ask_user`.

#![expect(clippy::unwrap_used, reason = "tests")]

use std::cell::RefCell;
use std::rc::Rc;

use futures::executor::block_on;
use futures::future::LocalBoxFuture;
use kiln_agent::{
    AgentOutcome, AgentRequest, AgentSetup, COMPACTION_MARK, Compaction, MAX_TOOL_RESULT_CHARS,
    Member, Person, Profiled, ThreadTurn, run_agent,
};
use kiln_capabilities::gate::{Fixed, SessionAllow};
use kiln_capabilities::{Answer, Approver, CallContext, Implementation, Permit};
use kiln_providers::budget::BudgetLimits;
use kiln_providers::scripted::{Reply, Scripted};
use kiln_providers::{ChatOptions, ChatRequest, ErrorKind, Message};
use kiln_run::Environment;
use kiln_run::{People, RunRequest, ToolBridge, Workspace};
use kiln_store::native::{MemoryBackend, MemoryTree};
use kiln_store::threads::{ContextChange, Threads};
use kiln_types::agent::{AgentEvent, Guards, StopReason};
use kiln_types::cancel::AbortSignal;
use kiln_types::permission::Autonomy;
use kiln_types::profile::{AgentRecord, AgentRole};
use kiln_types::tool_result::ToolReply;
use serde_json::{Value, json};

#[path = "../../run/tests/common/mod.rs"]
mod common;
use common::InProcess;

/// A page tool that answers its arguments; `stop` throws the turn's cancel
/// switch and never answers.
struct Page(AbortSignal);

struct Echo;

impl Implementation for Echo {
    fn call(&self, args: Value, _: CallContext, _: Permit) -> LocalBoxFuture<'static, ToolReply> {
        Box::pin(async move { Ok(args) })
    }
}

struct Stops(AbortSignal);

impl Implementation for Stops {
    fn call(&self, _: Value, _: CallContext, _: Permit) -> LocalBoxFuture<'static, ToolReply> {
        self.0.abort();
        Box::pin(futures::future::pending())
    }
}

impl ToolBridge for Page {
    fn implementation(&self, name: &str) -> Option<Rc<dyn Implementation>> {
        match name {
            "stop" => Some(Rc::new(Stops(self.0.clone()))),
            _ => Some(Rc::new(Echo)),
        }
    }
}

struct Answers(&'static str);

impl Person for Answers {
    fn ask(&self, _: String) -> LocalBoxFuture<'static, Result<String, String>> {
        let answer = self.0.to_owned();
        Box::pin(async move { Ok(answer) })
    }
}

struct Turn {
    outcome: AgentOutcome,
    events: Vec<AgentEvent>,
    provider: Rc<Scripted>,
    /// The workspace's store the turn wrote to.
    backend: Rc<MemoryBackend>,
}

impl Turn {
    fn results(&self) -> Vec<(String, String, bool)> {
        self.events
            .iter()
            .filter_map(|event| match event {
                AgentEvent::ToolResultUpdate {
                    name,
                    content,
                    is_error,
                    ..
                } => Some((name.clone(), content.clone(), *is_error)),
                _ => None,
            })
            .collect()
    }

    fn code(&self) -> Option<&str> {
        self.outcome.result.stop.code.as_deref()
    }
}

struct Options {
    approver: Rc<dyn Approver>,
    person: Option<Rc<dyn Person>>,
    schema: Option<Value>,
    guards: Guards,
    budget: BudgetLimits,
    compaction: Compaction,
    request: Value,
    model: &'static str,
    messages: Vec<Message>,
    direct: Vec<String>,
    /// The thread the turn is kept in, and what the next turn would send
    /// once it ended.
    keep: Option<(Threads, String, Next)>,
    /// The agent the job runs as, and its team.
    profile: Option<Profiled>,
    /// The workspace's store.
    backend: Rc<MemoryBackend>,
    /// Secrets put in the job's scope (a vault's, as a runtime gives them).
    secrets: Vec<(String, kiln_capabilities::Secret)>,
    /// The context the provider says its model holds.
    context: Option<usize>,
    /// What the entrance is told of the programs' progress.
    progress: Option<kiln_capabilities::ProgressObserver>,
}

/// Where a kept turn puts what the next turn sends.
type Next = Rc<RefCell<Vec<Message>>>;

impl Default for Options {
    fn default() -> Self {
        Self {
            approver: Rc::new(Fixed(Answer::Approve)),
            person: None,
            schema: None,
            guards: Guards::default(),
            budget: BudgetLimits::default(),
            compaction: Compaction::default(),
            request: json!({"code": "", "tools": {
                "echo": {"description": "Answers its arguments.", "input_schema": {"type": "object"}, "category": "read"},
                "publish": {"description": "Publishes a post.", "input_schema": {"type": "object"}, "category": "write"},
                "stop": {"description": "Stops.", "input_schema": {"type": "object"}, "category": "read"}
            }}),
            model: "scripted",
            messages: vec![Message::User {
                text: "What is six times seven?".into(),
            }],
            direct: Vec::new(),
            keep: None,
            profile: None,
            backend: MemoryBackend::new(),
            secrets: Vec::new(),
            context: None,
            progress: None,
        }
    }
}

fn turn(replies: Vec<Reply>, options: Options) -> Turn {
    let cancel = AbortSignal::new();
    let workspace = Workspace {
        backend: options.backend.clone(),
        files: MemoryTree::new(),
        owners: Rc::new(kiln_store::owners::Solo::new()),
    };
    let environment = Environment {
        entrance: "agent test".into(),
        tools_host: "page".into(),
        http: kiln_http::default_client(),
        people: People::Approver {
            host: "agent test".into(),
            approver: options.approver,
            session: SessionAllow::default(),
        },
        own_tools: None,
        bridge: Some(Rc::new(Page(cancel.clone()))),
        workspace: Some(Rc::new(Ok(workspace))),
        random: Rc::new(|| [7; 8]),
        on_gate: None,
        on_progress: options.progress.clone(),
    };
    let provider = match options.context {
        Some(context) => Scripted::with_context(replies, context),
        None => Scripted::new(replies),
    };
    let events = Rc::new(RefCell::new(Vec::new()));
    let sink: kiln_agent::Sink = {
        let events = events.clone();
        Rc::new(move |event| events.borrow_mut().push(event))
    };
    let kept = options.keep.map(|(threads, id, next)| {
        let turn = block_on(ThreadTurn::begin(
            threads,
            &id,
            &options.messages,
            "scripted",
            options.model,
        ))
        .unwrap();
        (turn, next)
    });
    let sink = match &kept {
        Some((turn, _)) => turn.sink(sink),
        None => sink,
    };
    let request = AgentRequest {
        run: {
            let mut run = RunRequest::from_value(options.request).unwrap();
            run.secrets.extend(options.secrets);
            run
        },
        provider: provider.clone(),
        options: ChatOptions::new(options.model),
        messages: options.messages,
        system: None,
        output_schema: options.schema,
        guards: options.guards,
        budget: options.budget,
        direct: options.direct,
        compaction: options.compaction,
        profile: options.profile,
    };
    let setup = AgentSetup {
        environment: &environment,
        runner: Rc::new(InProcess),
        person: options.person,
        clock: Rc::new(kiln_http::SystemClock),
        sink,
        cancel,
    };
    let outcome = block_on(run_agent(request, setup)).unwrap();
    if let Some((turn, next)) = kept {
        *next.borrow_mut() = block_on(turn.ended(&outcome)).unwrap();
    }
    let events = events.borrow().clone();
    assert!(
        matches!(events.last(), Some(AgentEvent::Done { .. })),
        "the last event is done"
    );
    Turn {
        outcome,
        events,
        provider,
        backend: options.backend,
    }
}

/// A reply that checks what the model was last told.
fn seeing(check: impl Fn(&str) + 'static, then: Reply) -> Reply {
    Reply::Computed(Rc::new(move |request: &ChatRequest| {
        let last = match request.messages.last().unwrap() {
            Message::Tool { content, .. } | Message::User { text: content } => content.clone(),
            other => panic!("the last message is {other:?}"),
        };
        check(&last);
        then.clone()
    }))
}

fn schema() -> Value {
    json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
}

#[test]
fn code_runs_its_observation_goes_back_and_the_model_answers() {
    let turn = turn(
        vec![
            Reply::code(
                "const r = await tools.echo({x: 6}); console.log('got', r.x); return r.x * 7",
            ),
            seeing(
                |observation| {
                    assert!(observation.contains("42"), "{observation}");
                    assert!(observation.contains("got 6"), "{observation}");
                },
                Reply::text("Six times seven is 42."),
            ),
        ],
        Options::default(),
    );
    let result = &turn.outcome.result;
    assert_eq!(result.stop.reason, StopReason::Answered);
    assert_eq!(result.text, "Six times seven is 42.");
    assert_eq!((result.turns, result.actions), (2, 1));
    assert!(result.job_id.is_some());
    let code = turn.events.iter().find_map(|event| match event {
        AgentEvent::ToolCallUpdate { code, .. } => code.clone(),
        _ => None,
    });
    assert!(code.unwrap().starts_with("const r = await tools.echo"));
    let run = turn.events.iter().find_map(|event| match event {
        AgentEvent::ToolResultUpdate { run, .. } => run.clone(),
        _ => None,
    });
    assert_eq!(run.unwrap()["value"], json!(42));
    assert!(
        turn.events
            .iter()
            .any(|event| matches!(event, AgentEvent::LlmCall { .. }))
    );
    // The prompt is Kiln's contract, and the model is offered execute_code.
    let first = &turn.provider.requests()[0];
    let Message::System { text } = &first.messages[0] else {
        panic!("the first message is the system prompt");
    };
    assert!(
        text.contains("# How you act") && text.contains("tools.echo("),
        "{text}"
    );
    assert_eq!(first.tools[0].name, "execute_code");
    assert!(first.tools.iter().any(|tool| tool.name == "return_result"));
    assert!(!first.tools.iter().any(|tool| tool.name == "echo"));
}

#[test]
fn an_actions_progress_reaches_the_entrance_as_the_program_reports_it() {
    let seen = Rc::new(RefCell::new(Vec::new()));
    let observer: kiln_capabilities::ProgressObserver = {
        let seen = seen.clone();
        Rc::new(move |progress: &kiln_types::Progress| {
            seen.borrow_mut()
                .push((progress.percent, progress.message.clone()));
        })
    };
    turn(
        vec![
            Reply::code("progress(40, 'reading'); await sleep(150); progress(250); return 1"),
            Reply::text("Done."),
        ],
        Options {
            progress: Some(observer),
            ..Options::default()
        },
    );
    assert_eq!(
        *seen.borrow(),
        [(40.0, Some("reading".to_owned())), (100.0, None)]
    );
}

#[test]
fn finish_ends_the_turn_with_its_value() {
    let turn = turn(
        vec![Reply::code(
            "[1, 2].forEach((n) => { if (n == 2) finish({n: n * 21}) })",
        )],
        Options::default(),
    );
    let result = &turn.outcome.result;
    assert_eq!(result.stop.reason, StopReason::Finished);
    assert!(result.finished);
    assert_eq!(result.value, json!({"n": 42}));
    assert_eq!(turn.provider.left(), 0);
}

#[test]
fn a_schemad_turn_ends_only_through_a_finish_that_matches() {
    let turn = turn(
        vec![
            Reply::code("return {n: 42}"),
            seeing(
                |observation| {
                    assert!(observation.contains("finished: false"), "{observation}");
                    assert!(
                        observation.contains("already matches the output schema"),
                        "{observation}"
                    );
                },
                Reply::text("The answer is 42."),
            ),
            seeing(
                |nudge| assert!(nudge.contains("without calling finish"), "{nudge}"),
                Reply::code("finish({n: 42, extra: true})"),
            ),
            seeing(
                |observation| {
                    assert!(observation.contains("finish was refused"), "{observation}");
                    assert!(
                        observation.contains("unknown keys `extra`"),
                        "{observation}"
                    );
                },
                Reply::code("finish({n: 42})"),
            ),
        ],
        Options {
            schema: Some(schema()),
            ..Options::default()
        },
    );
    let result = &turn.outcome.result;
    assert_eq!(
        result.stop.reason,
        StopReason::Finished,
        "{:?}",
        result.stop
    );
    assert_eq!(result.value, json!({"n": 42}));
    assert_eq!(result.actions, 3);
}

#[test]
fn a_schemad_turn_that_keeps_answering_in_prose_fails_naming_it() {
    let turn = turn(
        vec![
            Reply::text("It is 42."),
            Reply::text("I said 42."),
            Reply::text("Really, 42."),
        ],
        Options {
            schema: Some(schema()),
            ..Options::default()
        },
    );
    let stop = &turn.outcome.result.stop;
    assert_eq!(stop.reason, StopReason::Unfinished);
    assert_eq!(
        stop.message.as_deref(),
        Some(
            "ended after 0 action(s) and 3 model turn(s) without calling finish; its last message: \u{201c}Really, 42.\u{201d}"
        )
    );
    assert!(
        turn.events
            .iter()
            .any(|event| matches!(event, AgentEvent::Stop { .. }))
    );
}

#[test]
fn every_guard_stops_the_turn_with_its_code() {
    let guards = |change: fn(&mut Guards)| {
        let mut guards = Guards::default();
        change(&mut guards);
        Options {
            guards,
            ..Options::default()
        }
    };
    let many = |n: usize, reply: &dyn Fn(usize) -> Reply| (0..n).map(reply).collect::<Vec<_>>();

    let stopped = turn(
        many(5, &|n| Reply::code(&format!("return {n}"))),
        guards(|g| g.max_turns = 3),
    );
    assert_eq!(stopped.code(), Some("max_turns"));
    assert_eq!(stopped.outcome.result.turns, 3);

    let two_calls = Reply::Message {
        text: String::new(),
        tool_calls: vec![
            kiln_providers::ToolCall {
                id: "a".into(),
                name: "execute_code".into(),
                arguments: json!({"code": "return 1"}),
            },
            kiln_providers::ToolCall {
                id: "b".into(),
                name: "execute_code".into(),
                arguments: json!({"code": "return 2"}),
            },
        ],
        usage: kiln_providers::Usage::default(),
    };
    let stopped = turn(vec![two_calls], guards(|g| g.max_tool_calls_per_turn = 1));
    assert_eq!(stopped.code(), Some("max_tool_calls_per_turn"));
    assert_eq!(stopped.outcome.result.actions, 0);

    let stopped = turn(
        many(5, &|n| Reply::code(&format!("return {n}"))),
        guards(|g| g.max_tokens = 250),
    );
    assert_eq!(stopped.code(), Some("max_tokens"));

    let stopped = turn(
        many(5, &|n| Reply::call("return_result", json!({"value": n}))),
        guards(|g| g.delivery_only = 3),
    );
    assert_eq!(stopped.code(), Some("delivery_only"));
    assert_eq!(stopped.outcome.result.turns, 3);
    assert_eq!(stopped.outcome.result.value, json!(2));

    let stopped = turn(
        many(6, &|_| Reply::code("return 1")),
        guards(|g| g.no_progress = 4),
    );
    assert_eq!(stopped.code(), Some("no_progress"));
    assert_eq!(stopped.outcome.result.turns, 4);

    // A priced model under a cap of nothing: the budget refuses the first turn.
    let stopped = turn(
        vec![Reply::text("never sent")],
        Options {
            model: "gpt-4o",
            guards: Guards {
                max_cost: 0.0,
                ..Guards::default()
            },
            ..Options::default()
        },
    );
    assert_eq!(stopped.outcome.result.stop.reason, StopReason::Budget);
    assert_eq!(stopped.code(), Some("max_cost"));
    assert_eq!(stopped.provider.left(), 1, "nothing was sent");
}

#[test]
fn one_result_enters_the_history_cut_with_a_notice() {
    let turn = turn(
        vec![
            Reply::call("echo", json!({"text": "x".repeat(40_000)})),
            seeing(
                |observation| {
                    assert!(observation.chars().count() < MAX_TOOL_RESULT_CHARS + 400);
                    assert!(
                        observation.contains("[Output cut: this result was"),
                        "{}",
                        &observation[observation.len() - 300..]
                    );
                },
                Reply::text("It was long."),
            ),
        ],
        Options {
            direct: vec!["echo".into()],
            ..Options::default()
        },
    );
    assert_eq!(turn.outcome.result.stop.reason, StopReason::Answered);
}

fn long_thread() -> Vec<Message> {
    let mut messages = Vec::new();
    for n in 0..6 {
        messages.push(Message::User {
            text: format!("question {n}: {}", "words ".repeat(200)),
        });
        messages.push(Message::Assistant {
            text: format!("answer {n}"),
            tool_calls: Vec::new(),
        });
    }
    messages.push(Message::User {
        text: "And now?".into(),
    });
    messages
}

#[test]
fn a_long_thread_is_compacted_and_the_person_keeps_it_whole() {
    let summarizer = Reply::Computed(Rc::new(|request: &ChatRequest| {
        let Message::System { text } = &request.messages[0] else {
            panic!()
        };
        assert!(text.starts_with("You summarize"), "{text}");
        Reply::text("They asked six questions.")
    }));
    let turn = turn(
        vec![
            summarizer,
            Reply::Computed(Rc::new(|request: &ChatRequest| {
                let Message::User { text } = &request.messages[1] else {
                    panic!()
                };
                assert!(text.starts_with(COMPACTION_MARK), "{text}");
                // The system prompt, the row, and the last two user turns kept.
                assert_eq!(request.messages.len(), 5);
                Reply::text("Now this.")
            })),
        ],
        Options {
            messages: long_thread(),
            compaction: Compaction {
                threshold_tokens: 500,
                keep_turns: 2,
            },
            ..Options::default()
        },
    );
    assert_eq!(turn.outcome.result.stop.reason, StopReason::Answered);
    assert!(
        turn.events
            .iter()
            .any(|event| matches!(event, AgentEvent::Compaction { replaced: 10, .. }))
    );
    // The whole thread, the row in place where the cut fell.
    assert_eq!(turn.outcome.thread.len(), 13 + 1 + 1);
    assert!(
        matches!(&turn.outcome.thread[10], Message::User { text } if text.starts_with(COMPACTION_MARK))
    );
}

#[test]
fn a_context_overflow_compacts_and_retries_once_and_a_failed_summarizer_leaves_the_thread() {
    let overflow = || Reply::Fail {
        kind: ErrorKind::ContextOverflow,
        message: "too long".into(),
    };
    let turn_ok = turn(
        vec![overflow(), Reply::text("summary"), Reply::text("Fits now.")],
        Options {
            messages: long_thread(),
            compaction: Compaction {
                threshold_tokens: u64::MAX,
                keep_turns: 2,
            },
            ..Options::default()
        },
    );
    assert_eq!(turn_ok.outcome.result.text, "Fits now.");
    assert!(
        turn_ok
            .events
            .iter()
            .any(|event| matches!(event, AgentEvent::Compaction { .. }))
    );

    let failed = turn(
        vec![
            Reply::Fail {
                kind: ErrorKind::Server,
                message: "summarizer down".into(),
            },
            Reply::text("Whole thread."),
        ],
        Options {
            messages: long_thread(),
            compaction: Compaction {
                threshold_tokens: 500,
                keep_turns: 2,
            },
            ..Options::default()
        },
    );
    assert_eq!(failed.outcome.result.text, "Whole thread.");
    assert!(failed.events.iter().any(|event| matches!(event, AgentEvent::LogUpdate { message } if message.contains("the summarizer failed"))));
    assert_eq!(failed.provider.requests()[1].messages.len(), 1 + 13);
}

#[test]
fn an_approval_inside_an_action_is_asked_and_shown() {
    let denied = turn(
        vec![
            Reply::code("try { await tools.publish({text: 'hi'}) } catch (e) { return e.code }"),
            Reply::text("It was denied."),
        ],
        Options {
            approver: Rc::new(Fixed(Answer::Deny)),
            request: json!({"code": "", "permission": {"mode": "default"}, "tools": {
                "publish": {"description": "Publishes.", "input_schema": {"type": "object"}, "category": "write"}
            }}),
            ..Options::default()
        },
    );
    // execute_code asks too (category execute), then publish.
    let asked: Vec<String> = denied
        .events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ApprovalRequest { request } => Some(request.tool.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(asked, ["execute_code"]);
    assert!(denied.results()[0].2, "the action itself was denied");
}

#[test]
fn stop_mid_action_ends_the_turn_cancelled() {
    let turn = turn(
        vec![
            Reply::code("await tools.stop({}); return 1"),
            Reply::text("never"),
        ],
        Options::default(),
    );
    assert_eq!(turn.outcome.result.stop.reason, StopReason::Cancelled);
    assert_eq!(turn.provider.left(), 1);
    // The thread to continue from answers the call that was cut, so the next
    // turn can send it.
    let Some(Message::Tool {
        name,
        content,
        is_error,
        ..
    }) = turn.outcome.view.last()
    else {
        panic!("the view ends {:?}", turn.outcome.view.last());
    };
    assert_eq!(name, "execute_code");
    assert!(*is_error);
    assert!(
        content.contains("not run: the turn was stopped"),
        "{content}"
    );
    assert!(matches!(
        turn.outcome.thread.last(),
        Some(Message::Tool { .. })
    ));
}

#[test]
fn a_tool_outside_the_whitelist_is_refused_and_a_belt_tool_is_pointed_to_code() {
    let turn = turn(
        vec![
            Reply::call("delete_everything", json!({})),
            seeing(
                |result| {
                    assert!(
                        result.contains("`delete_everything` is not a tool of this job"),
                        "{result}"
                    )
                },
                Reply::call("echo", json!({"x": 1})),
            ),
            seeing(
                |result| {
                    assert!(
                        result.contains("await tools.echo({...})` inside execute_code"),
                        "{result}"
                    )
                },
                Reply::text("ok"),
            ),
        ],
        Options::default(),
    );
    assert!(
        turn.results()
            .iter()
            .all(|(_, content, is_error)| *is_error && content.contains("tool_unavailable"))
    );
}

#[test]
fn a_malformed_execute_code_call_is_answered_as_an_error_the_model_can_fix() {
    let turn = turn(
        vec![
            Reply::call("execute_code", json!({"program": "return 1"})),
            seeing(
                |result| assert!(result.contains("code"), "{result}"),
                Reply::Fail {
                    kind: ErrorKind::InvalidToolCall,
                    message:
                        "tool call #1 `execute_code` (id `x`): its arguments are not valid JSON"
                            .into(),
                },
            ),
            seeing(
                |note| {
                    assert!(
                        note.contains("could not be read") && note.contains("{\"code\""),
                        "{note}"
                    )
                },
                Reply::code("return 1"),
            ),
            Reply::text("Done."),
        ],
        Options::default(),
    );
    assert_eq!(turn.outcome.result.stop.reason, StopReason::Answered);
    assert!(turn.results()[0].2);
    assert_eq!(turn.outcome.result.actions, 1);
}

#[test]
fn ask_user_waits_for_the_person_or_says_nobody_can_answer() {
    let answered = turn(
        vec![Reply::code(
            "const {answer} = await tools.ask_user({question: 'Which city?'}); finish(answer)",
        )],
        Options {
            person: Some(Rc::new(Answers("Paris"))),
            ..Options::default()
        },
    );
    assert_eq!(answered.outcome.result.value, json!("Paris"));
    assert!(answered.events.iter().any(
        |event| matches!(event, AgentEvent::Question { question } if question == "Which city?")
    ));

    let headless = turn(
        vec![
            Reply::call("ask_user", json!({"question": "Which city?"})),
            Reply::text("I will guess."),
        ],
        Options::default(),
    );
    assert!(headless.results()[0].1.contains("nobody_to_ask"));
}

#[test]
fn past_the_threshold_tools_are_listed_by_name_and_found_in_the_sandbox() {
    let mut tools = serde_json::Map::new();
    for n in 0..40 {
        tools.insert(
            format!("tool_{n}"),
            json!({"description": format!("Tool number {n}."), "input_schema": {"type": "object"}, "category": "read"}),
        );
    }
    let turn = turn(
        vec![
            Reply::code(
                "const found = await tools.search_tools({query: 'number 17'}); return found.map((t) => t.declaration)",
            ),
            Reply::text("Found it."),
        ],
        Options {
            request: json!({"code": "", "tools": tools}),
            ..Options::default()
        },
    );
    let Message::System { text } = &turn.provider.requests()[0].messages[0] else {
        panic!()
    };
    assert!(text.contains("by name only: tool_0, tool_1,"), "{text}");
    assert!(!text.contains("Tool number 3."));
    let found = &turn.results()[0].1;
    assert!(
        found.contains(r#""/** Tool number 17. */\ndeclare function tool_17(args?: {\n  [key: string]: unknown;\n}): Promise<unknown>;""#),
        "each found tool as TypeScript: {found}"
    );
}

#[test]
fn a_fan_out_of_sub_agents_stays_within_the_jobs_turns() {
    // The job may take 3 model turns in all; its one program asks for five children at once,
    // each of which would take a turn of its own (and the parent one more to answer).
    let mut replies = vec![Reply::code(
        "return await Promise.all([1, 2, 3, 4, 5].map((i) => agents.run('child ' + i)));",
    )];
    replies.extend(std::iter::repeat_with(|| Reply::text("done")).take(12));
    let turn = turn(
        replies,
        Options {
            guards: Guards {
                max_turns: 3,
                ..Guards::default()
            },
            ..Options::default()
        },
    );
    let asked = turn.provider.requests().len();
    assert!(asked <= 3, "{asked} model requests under max_turns 3");
    assert_eq!(turn.outcome.result.turns, 1);
    // The result names the limits it ran under, for a thread read back later.
    assert_eq!(turn.outcome.result.guards.max_turns, 3);
    assert_eq!(
        turn.outcome.result.guards.max_tokens,
        Guards::default().max_tokens
    );
}

/// Keeps each turn of `turns` in one thread, the next sending what the last
/// left; answers the thread reopened and what each turn ended with.
fn kept_turns(
    turns: Vec<Vec<Reply>>,
    first: Vec<Message>,
) -> (kiln_store::threads::Conversation, Vec<Turn>) {
    let threads = Threads::new(MemoryBackend::new());
    let thread = block_on(threads.create("What is six times seven?", "")).unwrap();
    let next = Rc::new(RefCell::new(Vec::new()));
    let mut ended = Vec::new();
    for (n, replies) in turns.into_iter().enumerate() {
        let mut messages = if n == 0 {
            first.clone()
        } else {
            next.borrow().clone()
        };
        if n > 0 {
            messages.push(Message::User {
                text: format!("question {n}"),
            });
        }
        ended.push(turn(
            replies,
            Options {
                messages,
                keep: Some((threads.clone(), thread.id.clone(), next.clone())),
                compaction: Compaction {
                    threshold_tokens: 500,
                    keep_turns: 2,
                },
                ..Options::default()
            },
        ));
    }
    (block_on(threads.open(&thread.id)).unwrap(), ended)
}

#[test]
fn a_turn_kept_in_a_thread_reopens_as_it_ran_and_the_next_continues_it() {
    let (opened, turns) = kept_turns(
        vec![
            vec![
                Reply::code("console.log('six'); return 6 * 7"),
                Reply::text("It is 42."),
            ],
            vec![Reply::text("Still 42.")],
        ],
        Options::default().messages,
    );
    let roles: Vec<&str> = opened.messages.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    assert_eq!(opened.messages[0].text, "What is six times seven?");
    let reply = &opened.messages[1];
    assert_eq!(reply.text, "It is 42.");
    assert_eq!(
        (reply.provider.as_str(), reply.model.as_str()),
        ("scripted", "scripted")
    );
    // The steps as the thread showed them: the action's code, its result, the end.
    assert!(reply.events.iter().any(|event| matches!(event,
        AgentEvent::ToolCallUpdate { code: Some(code), .. } if code.contains("6 * 7"))));
    assert!(reply.events.iter().any(|event| matches!(event,
        AgentEvent::ToolResultUpdate { run: Some(run), .. } if run["value"] == json!(42))));
    assert!(matches!(reply.events.last(), Some(AgentEvent::Done { .. })));
    let deltas = reply
        .events
        .iter()
        .filter(|event| matches!(event, AgentEvent::TextDelta { .. }))
        .count();
    assert!(deltas <= 2, "text deltas joined: {deltas}");
    // What the model reads next is what the last turn left, and the second
    // turn appended to the first.
    assert_eq!(opened.context, turns[1].outcome.view);
    assert!(matches!(
        opened.messages[3].context,
        Some(ContextChange::Append(_))
    ));
    assert!(opened.context.starts_with(&turns[0].outcome.view));
}

#[test]
fn a_compacted_turn_replaces_what_the_thread_sends_and_a_failed_one_changes_nothing() {
    let summarizer = Reply::text("They asked six questions.");
    let (opened, turns) = kept_turns(
        vec![
            vec![summarizer, Reply::text("Now this.")],
            vec![Reply::Fail {
                kind: ErrorKind::BadRequest,
                message: "down".into(),
            }],
        ],
        long_thread(),
    );
    assert!(matches!(
        opened.messages[1].context,
        Some(ContextChange::Replace(_))
    ));
    assert_eq!(turns[1].outcome.result.stop.reason, StopReason::Provider);
    assert_eq!(
        opened.messages[3].context, None,
        "a failed turn leaves the context"
    );
    assert_eq!(opened.context, turns[0].outcome.view);
    assert!(
        matches!(&opened.context[0], Message::User { text } if text.starts_with(COMPACTION_MARK))
    );
}

/// The system message a model request carried.
fn system_of(request: &ChatRequest) -> String {
    request
        .messages
        .iter()
        .find_map(|message| match message {
            Message::System { text } => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// A cautious count of a request's tokens: three bytes a token, where a
/// small model's tokenizer reads about 3.3 of the contract (SmolLM2's).
fn tokens_at_most(request: &ChatRequest) -> usize {
    let messages = serde_json::to_string(&request.messages).unwrap().len();
    let tools = serde_json::to_string(&request.tools).unwrap().len();
    (messages + tools).div_ceil(3)
}

#[test]
fn a_small_models_contract_leaves_room_to_talk_and_answer() {
    const CONTEXT: usize = kiln_types::chat::IN_PROCESS_CONTEXT_TOKENS;
    let asked = || {
        vec![Message::User {
            text: "Write a long story about a dragon who learns to fly, at least 1000 words."
                .into(),
        }]
    };
    let roomy = turn(
        vec![Reply::text("Once upon a time.")],
        Options {
            messages: asked(),
            ..Options::default()
        },
    );
    let small = turn(
        vec![Reply::text("Once upon a time.")],
        Options {
            messages: asked(),
            context: Some(CONTEXT),
            ..Options::default()
        },
    );
    let roomy = &roomy.provider.requests()[0];
    let small = &small.provider.requests()[0];
    // The whole contract of a workspace's belt would not leave a small model
    // room to answer (so this test measures something)...
    assert!(
        tokens_at_most(roomy) > CONTEXT - 1_024,
        "{} tokens",
        tokens_at_most(roomy)
    );
    // ...the one it gets leaves a quarter of its context and more.
    assert!(
        tokens_at_most(small) <= CONTEXT - 1_024,
        "{} of {CONTEXT} tokens:\n{}",
        tokens_at_most(small),
        system_of(small)
    );
    // It still names every global and module, and where to read how each is used.
    let system = system_of(small);
    for global in kiln_types::guest::GLOBALS {
        assert!(system.contains(global.usage), "{}", global.name);
    }
    for module in kiln_types::guest::MODULES {
        assert!(
            system.contains(&format!("from \"{}\"", module.specifier)),
            "{}",
            module.specifier
        );
    }
    assert!(system.contains("tools.kiln_docs({query: \"kiln:csv\"})"));
    assert!(system.contains("tools.search_tools({query: "));
    // The model acts through programs: the always-on tools are on `tools`,
    // not offered as functions one by one.
    let offered: Vec<&str> = small.tools.iter().map(|tool| tool.name.as_str()).collect();
    assert_eq!(offered, ["execute_code"]);
    assert!(system.contains("save_memory"));
}

#[test]
fn an_agent_profile_writes_the_prompt_and_its_block_is_refused_as_deliberate() {
    let turn = turn(
        vec![
            Reply::code("return await tools.publish({text: 'hi'});"),
            Reply::text("I may not publish."),
        ],
        Options {
            profile: Some(Profiled {
                agent: AgentRecord {
                    system_prompt: "You are Ada. Answer in French.".into(),
                    autonomy: [("publish".to_owned(), Autonomy::Block)].into(),
                    ..AgentRecord::new("ada", "Ada")
                },
                secrets: Vec::new(),
                team: Vec::new(),
            }),
            ..Options::default()
        },
    );
    let system = system_of(&turn.provider.requests()[0]);
    assert!(
        system.starts_with("You are Ada. Answer in French.\n\n# How you act"),
        "{system}"
    );
    assert!(
        !system.contains("# Your team"),
        "an agent that is not an orchestrator has no team"
    );
    let (_, observation, _) = &turn.results()[0];
    assert!(
        observation.contains("blocked publish for this agent")
            && observation.contains("deliberate"),
        "{observation}"
    );
    assert_eq!(turn.outcome.result.text, "I may not publish.");
}

/// A team member `slug` answering from `provider`, with `prompt` as its system prompt.
fn member(slug: &str, prompt: &str, role: AgentRole, provider: Rc<Scripted>) -> Member {
    Member {
        profile: AgentRecord {
            system_prompt: prompt.into(),
            role,
            ..AgentRecord::new(slug, slug.to_uppercase())
        },
        provider,
        options: ChatOptions::new(format!("{slug}-model")),
        secrets: Vec::new(),
    }
}

#[test]
fn an_orchestrator_hands_a_part_to_a_member_who_works_with_its_own_prompt_and_model() {
    let ada = Scripted::new([Reply::text("Bonjour")]);
    let turn = turn(
        vec![
            Reply::code("return await agents.run('Say hello in French.', {agent: 'ada'});"),
            Reply::text("Ada said Bonjour."),
        ],
        Options {
            profile: Some(Profiled {
                agent: AgentRecord {
                    role: AgentRole::Orchestrator,
                    ..AgentRecord::new("lead", "Lead")
                },
                secrets: Vec::new(),
                team: vec![
                    member(
                        "ada",
                        "You are Ada, a translator.",
                        AgentRole::Agent,
                        ada.clone(),
                    ),
                    member(
                        "lead",
                        "Me again",
                        AgentRole::Orchestrator,
                        Scripted::new([]),
                    ),
                ],
            }),
            ..Options::default()
        },
    );
    let lead_system = system_of(&turn.provider.requests()[0]);
    assert!(
        lead_system.contains("# Your team")
            && lead_system.contains("- `ada` (ADA): You are Ada, a translator."),
        "{lead_system}"
    );
    assert!(
        !lead_system.contains("`lead` (LEAD)"),
        "an agent is not on its own team"
    );
    let asked = ada.requests();
    assert_eq!(asked.len(), 1, "the member's own model was asked");
    assert_eq!(asked[0].options.model, "ada-model");
    let ada_system = system_of(&asked[0]);
    assert!(
        ada_system.starts_with("You are Ada, a translator.\n\n# How you act"),
        "{ada_system}"
    );
    assert!(
        !ada_system.contains("# Your team"),
        "a member that is not an orchestrator has no team"
    );
    let (_, observation, _) = &turn.results()[0];
    assert!(observation.contains("Bonjour"), "{observation}");
    assert!(turn.events.iter().any(|event| matches!(
        event,
        AgentEvent::Child { label, .. } if label == "agent ada"
    )));
}

#[test]
fn delegation_by_slug_is_refused_without_a_team_for_an_unknown_slug_and_past_depth_3() {
    // Not an orchestrator: no team, the delegation refused by name.
    let alone = turn(
        vec![
            Reply::code("return await agents.run('Translate.', {agent: 'ada'});"),
            Reply::text("done"),
        ],
        Options {
            profile: Some(Profiled {
                agent: AgentRecord::new("solo", "Solo"),
                secrets: Vec::new(),
                team: vec![member("ada", "", AgentRole::Agent, Scripted::new([]))],
            }),
            ..Options::default()
        },
    );
    let (_, observation, _) = &alone.results()[0];
    assert!(
        observation.contains("not_orchestrator")
            && observation.contains("only an orchestrator delegates"),
        "{observation}"
    );
    // An orchestrator naming an agent its team does not have.
    let unknown = turn(
        vec![
            Reply::code("return await agents.run('Translate.', {agent: 'zed'});"),
            Reply::text("done"),
        ],
        Options {
            profile: Some(Profiled {
                agent: AgentRecord {
                    role: AgentRole::Orchestrator,
                    ..AgentRecord::new("lead", "Lead")
                },
                secrets: Vec::new(),
                team: vec![member("ada", "", AgentRole::Agent, Scripted::new([]))],
            }),
            ..Options::default()
        },
    );
    let (_, observation, _) = &unknown.results()[0];
    assert!(
        observation.contains("unknown_agent")
            && observation.contains("there is no agent `zed` on this team; it has `ada`"),
        "{observation}"
    );
    // Orchestrators handing on to each other: depth 1, 2, 3 run; the fourth is refused.
    let chain = Scripted::new([
        Reply::code("return await agents.run('go on', {agent: 'bob'});"),
        Reply::code("return await agents.run('go on', {agent: 'ada'});"),
        Reply::code("return await agents.run('go on', {agent: 'bob'});"),
        Reply::text("depth 3 did it"),
        Reply::text("2"),
        Reply::text("1"),
    ]);
    let deep = turn(
        vec![
            Reply::code("return await agents.run('go on', {agent: 'ada'});"),
            Reply::text("top"),
        ],
        Options {
            profile: Some(Profiled {
                agent: AgentRecord {
                    role: AgentRole::Orchestrator,
                    ..AgentRecord::new("lead", "Lead")
                },
                secrets: Vec::new(),
                team: vec![
                    member("ada", "", AgentRole::Orchestrator, chain.clone()),
                    member("bob", "", AgentRole::Orchestrator, chain.clone()),
                ],
            }),
            ..Options::default()
        },
    );
    let refused = deep.events.iter().any(|event| {
        let mut event = event;
        while let AgentEvent::Child { event: inner, .. } = event {
            event = inner;
        }
        matches!(event, AgentEvent::ToolResultUpdate { content, .. } if content.contains("max_delegation_depth"))
    });
    assert!(refused, "the fourth level is refused by name");
    assert_eq!(deep.outcome.result.text, "top");
}

#[test]
fn the_skill_catalog_is_in_the_prompt_and_a_slash_name_brings_its_body_without_keeping_it() {
    let turn = turn(
        vec![Reply::text("Tidied.")],
        Options {
            messages: vec![Message::User {
                text: "Please /tidy-data the rows in src/tidy-data.csv".into(),
            }],
            ..Options::default()
        },
    );
    let system = system_of(&turn.provider.requests()[0]);
    assert!(system.contains("# Skills"), "{system}");
    for name in ["big-jobs", "tidy-data", "web-research", "workspace-notes"] {
        assert!(
            system.contains(&format!("- `{name}`: ")),
            "{name}: {system}"
        );
    }
    assert!(
        system.contains("### tidy-data\n\n# Tidy data in a program"),
        "the invoked body: {system}"
    );
    assert!(
        !system.contains("# Web research with"),
        "only the invoked body"
    );
    assert!(
        !system.contains("tools.http_request("),
        "no skill assigned: no http_request"
    );
    assert!(
        turn.outcome.thread.iter().all(|message| match message {
            Message::System { text } | Message::User { text } => !text.contains("# Skills"),
            _ => true,
        }),
        "the block is never kept in the thread"
    );
}

#[test]
fn skills_are_written_read_and_the_shipped_ones_refused_and_an_assigned_one_unlocks_its_tool() {
    let turn = turn(
        vec![
            Reply::code(
                "await tools.create_skill({name: 'packing', description: 'Pack for a trip.', body: 'Roll, do not fold.'});\n\
                 const mine = await tools.load_skill({name: 'packing'});\n\
                 const shipped = await tools.create_skill({name: 'web-research', description: 'x', body: 'y'}).catch((e) => e.message);\n\
                 const listed = (await tools.list_skills({query: 'trip'})).map((s) => [s.name, s.system]);\n\
                 return {body: mine.body, system: mine.system, shipped, listed};",
            ),
            Reply::text("done"),
        ],
        Options {
            profile: Some(Profiled {
                agent: AgentRecord {
                    skills: vec!["web-research".into()],
                    ..AgentRecord::new("ada", "Ada")
                },
                secrets: Vec::new(),
                team: Vec::new(),
            }),
            ..Options::default()
        },
    );
    let run = turn
        .events
        .iter()
        .find_map(|event| match event {
            AgentEvent::ToolResultUpdate { run, .. } => run.clone(),
            _ => None,
        })
        .unwrap();
    let value = &run["value"];
    assert_eq!(value["body"], "Roll, do not fold.");
    assert_eq!(value["system"], false);
    assert!(
        value["shipped"]
            .as_str()
            .unwrap()
            .contains("is a system skill that ships with Kiln"),
        "{value}"
    );
    assert_eq!(value["listed"], json!([["packing", false]]));
    let system = system_of(&turn.provider.requests()[0]);
    assert!(
        system.contains("- `web-research`: ") && system.contains("(assigned)"),
        "{system}"
    );
    assert!(
        system.contains("tools.http_request("),
        "the assigned skill unlocks http_request: {system}"
    );
}

#[test]
fn a_member_works_with_its_own_tools_and_secrets_not_its_callers() {
    use kiln_types::profile::AgentServer;
    let server = kiln_testkit::EverythingServer::start();
    let origin = format!("http://127.0.0.1:{}", server.port);
    // Ada's MCP server takes her token, which only she holds; her program
    // calls its echo tool.
    let ada = Scripted::new([
        Reply::code("return await tools.everything_echo({message: 'Bonjour'});"),
        Reply::text("Bonjour"),
    ]);
    let mut member = member("ada", "You are Ada.", AgentRole::Agent, ada.clone());
    member.profile.mcp = vec![AgentServer {
        name: "everything".into(),
        url: server.url(),
        auth_secret: Some("ADA_TOKEN".into()),
    }];
    member.secrets = vec![(
        "ADA_TOKEN".into(),
        kiln_capabilities::Secret::for_origins("ada-t0ken", vec![origin]),
    )];
    // The lead's assigned skill unlocks `http_request`; Ada has no skills.
    let turn = turn(
        vec![
            Reply::code("return await agents.run('Say hello.', {agent: 'ada'});"),
            Reply::text("Ada said hello."),
        ],
        Options {
            profile: Some(Profiled {
                agent: AgentRecord {
                    role: AgentRole::Orchestrator,
                    skills: vec!["web-research".into()],
                    ..AgentRecord::new("lead", "Lead")
                },
                secrets: Vec::new(),
                team: vec![member],
            }),
            ..Options::default()
        },
    );
    let lead_system = system_of(&turn.provider.requests()[0]);
    assert!(lead_system.contains("tools.http_request("), "{lead_system}");
    assert!(
        !lead_system.contains("tools.everything_echo("),
        "the member's server is not the lead's"
    );
    let ada_system = system_of(&ada.requests()[0]);
    assert!(
        ada_system.contains("tools.everything_echo("),
        "the member's own server, its header filled from its own secret: {ada_system}"
    );
    assert!(
        !ada_system.contains("tools.http_request("),
        "what the lead's skill unlocked is not on the member's belt"
    );
    let (_, observation, _) = &turn.results()[0];
    assert!(observation.contains("Bonjour"), "{observation}");
    let shown = format!("{:?}", turn.events);
    assert!(!shown.contains("ada-t0ken"), "{shown}");
    assert!(
        !shown.contains("tools_unavailable") && !shown.contains("ADA_TOKEN"),
        "the member's server mounted without a warning: {shown}"
    );
}

/// A loopback server that answers each request with the Authorization
/// header it got (as a careless API echoing credentials would) and keeps
/// what it saw.
fn echoing_server() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
            let mut auth = String::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(value) = line.to_ascii_lowercase().strip_prefix("authorization:") {
                    auth = line[line.len() - value.len()..].trim().to_owned();
                }
            }
            kept.lock().unwrap().push(auth.clone());
            let body = format!("you sent {auth}");
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (origin, seen)
}

#[test]
fn a_vault_secret_reaches_its_origin_and_nothing_the_job_keeps_or_shows() {
    use kiln_store::vault::{Vault, testing::TableSealer};
    use kiln_types::vault::SecretPut;
    const VALUE: &str = "ghp_vault_s3cret_1234";
    let (origin, seen) = echoing_server();
    let backend = MemoryBackend::new();
    let vault = Vault::new(backend.clone(), TableSealer::new());
    block_on(vault.put(
        &SecretPut {
            name: "GITHUB_TOKEN".into(),
            value: Some(kiln_types::Redacted::new(VALUE)),
            origins: vec![origin.clone()],
            agents: vec!["ada".into()],
            version: 0,
        },
        1,
    ))
    .unwrap();
    let ada = AgentRecord {
        secrets: vec!["GITHUB_TOKEN".into()],
        ..AgentRecord::new("ada", "Ada")
    };
    let (secrets, problems) = block_on(kiln_agent::vault_secrets(&vault, &ada, 2)).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    // What a runtime does with them: the job's scope.
    let mut request = json!({"code": "", "allow_net": [origin]});
    request["tools"] = json!({});
    let mut options = Options {
        request,
        backend: backend.clone(),
        profile: Some(Profiled {
            agent: ada,
            secrets: Vec::new(),
            team: Vec::new(),
        }),
        ..Options::default()
    };
    let program = format!(
        "const r = await tools.http_request({{url: '{origin}/user', secret_headers: {{Authorization: 'Bearer ${{GITHUB_TOKEN}}'}}}}).catch((e) => ({{error: e.message}}));\n\
         console.log(JSON.stringify(r)); return r;"
    );
    let replies = vec![
        Reply::code(&program),
        seeing(
            |observation| assert!(!observation.contains(VALUE), "{observation}"),
            Reply::text("Done."),
        ),
    ];
    options.secrets = secrets;
    let turn = turn(replies, options);
    assert_eq!(
        *seen.lock().unwrap(),
        [format!("Bearer {VALUE}")],
        "the secret reached its origin"
    );
    let shown = format!("{:?} {:?}", turn.events, turn.outcome.thread);
    assert!(!shown.contains(VALUE), "events and thread: {shown}");
    let stored = block_on(async {
        let mut all = String::new();
        for table in kiln_store::Table::ALL {
            let records = kiln_store::Backend::scan(
                &*turn.backend,
                table,
                kiln_store::backend::Scan::default(),
            )
            .await
            .unwrap();
            all.push_str(&format!("{records:?}"));
        }
        all
    });
    let jobs = block_on(kiln_store::Backend::scan(
        &*turn.backend,
        kiln_store::Table::Jobs,
        kiln_store::backend::Scan::default(),
    ))
    .unwrap();
    assert_eq!(jobs.len(), 1, "the job is in the history, and was searched");
    assert!(!stored.contains(VALUE), "no stored byte holds the value");
}

#[test]
fn kiln_docs_answers_from_kilns_own_documentation_offline() {
    let turn = turn(
        vec![
            Reply::code(
                "const hits = await tools.kiln_docs({query: 'schedules cron run-due', limit: 2});\n\
                 return hits.map((hit) => hit.source);",
            ),
            Reply::text("Found it."),
        ],
        Options::default(),
    );
    let run = turn
        .events
        .iter()
        .find_map(|event| match event {
            AgentEvent::ToolResultUpdate { run, .. } => run.clone(),
            _ => None,
        })
        .unwrap();
    let sources = run["value"].as_array().unwrap();
    assert!(
        sources[0]
            .as_str()
            .unwrap()
            .contains("Agent profiles, teams and skills"),
        "{sources:?}"
    );
    assert!(
        turn.provider.requests()[0]
            .tools
            .iter()
            .any(|tool| tool.name == "kiln_docs"),
        "always on: offered as a function"
    );
}

#[test]
fn a_blocked_built_in_stays_on_the_belt_and_is_refused_as_deliberate() {
    let turn = turn(
        vec![
            Reply::code("return await tools.save_memory({text: 'The sky is blue.'});"),
            Reply::text("I was not allowed to save it."),
        ],
        Options {
            profile: Some(Profiled {
                agent: AgentRecord {
                    autonomy: [("save_memory".to_owned(), Autonomy::Block)].into(),
                    ..AgentRecord::new("ada", "Ada")
                },
                secrets: Vec::new(),
                team: Vec::new(),
            }),
            ..Options::default()
        },
    );
    let first = &turn.provider.requests()[0];
    assert!(
        first.tools.iter().any(|tool| tool.name == "save_memory"),
        "a blocked tool stays visible"
    );
    let (_, observation, _) = &turn.results()[0];
    assert!(
        observation.contains("blocked save_memory for this agent")
            && observation.contains("The restriction is deliberate"),
        "{observation}"
    );
    let memories = block_on(kiln_store::Backend::scan(
        &*turn.backend,
        kiln_store::Table::Memories,
        kiln_store::backend::Scan::default(),
    ))
    .unwrap();
    assert!(memories.is_empty(), "nothing was saved");
}

#[test]
fn an_agent_adds_to_its_team_only_when_the_workspace_and_its_profile_both_allow_it() {
    let lead = |may: bool| AgentRecord {
        role: AgentRole::Orchestrator,
        may_change_team: may,
        ..AgentRecord::new("lead", "Lead")
    };
    let program = "return await tools.create_agent({slug: 'scout', name: 'Scout', system_prompt: 'You find things.'}).catch((e) => e.code);";
    let run_with = |may: bool, allowed: bool| {
        let backend = MemoryBackend::new();
        if allowed {
            let config = kiln_store::config::Config::new(backend.clone());
            let mut settings = block_on(config.settings()).unwrap();
            settings.allow_team_changes = true;
            block_on(config.put_settings(&settings)).unwrap();
        }
        turn(
            vec![Reply::code(program), Reply::text("done")],
            Options {
                backend,
                profile: Some(Profiled {
                    agent: lead(may),
                    secrets: Vec::new(),
                    team: Vec::new(),
                }),
                ..Options::default()
            },
        )
    };
    for (may, allowed) in [(false, true), (true, false)] {
        let turn = run_with(may, allowed);
        let system = system_of(&turn.provider.requests()[0]);
        assert!(
            !system.contains("create_agent"),
            "never offered: {may} {allowed}"
        );
        let (_, observation, _) = &turn.results()[0];
        assert!(
            observation.contains("tools.create_agent is not available"),
            "{observation}"
        );
    }
    let turn = run_with(true, true);
    let (_, observation, _) = &turn.results()[0];
    assert!(observation.contains("\"slug\": \"scout\""), "{observation}");
    let config = kiln_store::config::Config::new(turn.backend.clone());
    let scout = block_on(config.agent("scout")).unwrap().unwrap();
    assert_eq!(scout.role, AgentRole::Agent);
    assert!(!scout.may_change_team, "the grant does not spread");
    assert_eq!(scout.system_prompt, "You find things.");
}

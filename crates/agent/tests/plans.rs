//! Plans and sub-agents, natively: every conversation of the run (the turn,
//! each child, each plan step, the planner) is answered by its own script,
//! chosen by what it was asked, so the run is the same however the
//! scheduler interleaves them. Each reply waits a few polls first and the
//! provider counts conversations in flight, so the permit pool's bound is
//! observed, not assumed. The real sandbox in process, the real ladder and
//! the in-memory store.

#![expect(clippy::unwrap_used, reason = "tests")]

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use futures::StreamExt as _;
use futures::executor::block_on;
use futures::future::LocalBoxFuture;
use kiln_agent::{AgentOutcome, AgentRequest, AgentSetup, Compaction, run_agent};
use kiln_capabilities::gate::SessionAllow;
use kiln_capabilities::{Answer, ApprovalRequest, Approver};
use kiln_providers::budget::BudgetLimits;
use kiln_providers::scripted::{Reply, Scripted};
use kiln_providers::{
    ChatOptions, ChatRequest, EventStream, Message, ModelInfo, Provider, ProviderError,
    ProviderKind, ToolCall, Usage,
};
use kiln_run::Environment;
use kiln_run::{People, RunRequest, Workspace};
use kiln_store::native::{MemoryBackend, MemoryTree};
use kiln_types::agent::{AgentEvent, Guards, StopReason};
use kiln_types::cancel::AbortSignal;
use kiln_types::plan::TaskEvent;
use serde_json::{Value, json};

#[path = "../../run/tests/common/mod.rs"]
mod common;
use common::InProcess;

/// Yields to the executor once.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

type Script = Rc<dyn Fn(&ChatRequest, usize) -> Reply>;

/// Answers each conversation from the first route whose words its first
/// user message contains; the reply is the script's answer for how many
/// model messages the conversation has had.
struct Routed {
    routes: Vec<(&'static str, Script)>,
    in_flight: Rc<Cell<u32>>,
    peak: Rc<Cell<u32>>,
    requests: RefCell<Vec<ChatRequest>>,
}

impl Routed {
    fn new(routes: Vec<(&'static str, Script)>) -> Rc<Self> {
        Rc::new(Self {
            routes,
            in_flight: Rc::default(),
            peak: Rc::default(),
            requests: RefCell::default(),
        })
    }
}

fn first_user(request: &ChatRequest) -> String {
    request
        .messages
        .iter()
        .find_map(|message| match message {
            Message::User { text } => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

fn last_tool_result(request: &ChatRequest) -> String {
    request
        .messages
        .iter()
        .rev()
        .find_map(|message| match message {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

impl Provider for Routed {
    fn kind(&self) -> ProviderKind {
        ProviderKind::OpenAi
    }

    fn base_url(&self) -> &str {
        "routed:"
    }

    fn stream(&self, request: ChatRequest) -> EventStream {
        self.requests.borrow_mut().push(request.clone());
        let asked = first_user(&request);
        let turn = request
            .messages
            .iter()
            .filter(|message| matches!(message, Message::Assistant { .. }))
            .count();
        let reply = self
            .routes
            .iter()
            .find(|(words, _)| asked.contains(words))
            .map_or_else(
                || Reply::text(&format!("no route for {asked:?}")),
                |(_, script)| script(&request, turn),
            );
        let inner = Scripted::new([reply]).stream(request);
        let (in_flight, peak) = (self.in_flight.clone(), self.peak.clone());
        let wait = async move {
            in_flight.set(in_flight.get() + 1);
            peak.set(peak.get().max(in_flight.get()));
            for _ in 0..3 {
                YieldOnce(false).await;
            }
            in_flight.set(in_flight.get() - 1);
        };
        futures::stream::once(wait)
            .filter_map(|()| async { None })
            .chain(inner)
            .boxed_local()
    }

    fn models(&self) -> LocalBoxFuture<'static, Result<Vec<ModelInfo>, ProviderError>> {
        Box::pin(async { Ok(Vec::new()) })
    }
}

/// A tool call with its own id (so ids stay unique in a thread).
fn call(id: &str, name: &str, arguments: Value) -> Reply {
    Reply::Message {
        text: String::new(),
        tool_calls: vec![ToolCall {
            id: id.into(),
            name: name.into(),
            arguments,
        }],
        usage: Usage {
            input_tokens: 100,
            output_tokens: 20,
        },
    }
}

fn code(id: &str, program: &str) -> Reply {
    call(id, "execute_code", json!({"code": program}))
}

/// A script: `first` on the conversation's first turn, then `then`
/// (computed from the request) on every later one.
fn script(first: Reply, then: impl Fn(&ChatRequest) -> Reply + 'static) -> Script {
    Rc::new(move |request, turn| {
        if turn == 0 {
            first.clone()
        } else {
            then(request)
        }
    })
}

/// Answers the same text every turn.
fn says(text: &'static str) -> Script {
    Rc::new(move |_, _| Reply::text(text))
}

/// Approves everything, keeping what it was asked.
#[derive(Default)]
struct Recorder(RefCell<Vec<String>>);

impl Approver for Recorder {
    fn ask(&self, request: ApprovalRequest) -> LocalBoxFuture<'static, Answer> {
        self.0.borrow_mut().push(request.tool.clone());
        Box::pin(async { Answer::Approve })
    }

    fn is_person(&self) -> bool {
        false
    }
}

struct Run {
    outcome: AgentOutcome,
    events: Vec<AgentEvent>,
    provider: Rc<Routed>,
    asked: Vec<String>,
}

impl Run {
    /// Every event of the run, children's unwrapped, with the depth it came
    /// from.
    fn flat(&self) -> Vec<(u32, AgentEvent)> {
        let mut flat = Vec::new();
        for event in &self.events {
            let mut depth = 0;
            let mut event = event.clone();
            while let AgentEvent::Child {
                depth: at,
                event: inner,
                ..
            } = event
            {
                depth = at;
                event = *inner;
            }
            flat.push((depth, event));
        }
        flat
    }

    /// The results of the turn's own tool calls.
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

    fn task_updates(&self) -> Vec<(TaskEvent, String, Option<String>, Option<String>)> {
        self.events
            .iter()
            .filter_map(|event| match event {
                AgentEvent::TaskUpdate {
                    event,
                    task_id,
                    step_id,
                    error,
                    ..
                } => Some((*event, task_id.clone(), step_id.clone(), error.clone())),
                _ => None,
            })
            .collect()
    }
}

struct Options {
    mode: &'static str,
    max_concurrency: Option<u32>,
    cancel: AbortSignal,
    system: Option<&'static str>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            mode: "auto",
            max_concurrency: None,
            cancel: AbortSignal::new(),
            system: None,
        }
    }
}

fn run(prompt: &str, routes: Vec<(&'static str, Script)>, options: Options) -> Run {
    let workspace = Workspace {
        backend: MemoryBackend::new(),
        files: MemoryTree::new(),
        owners: Rc::new(kiln_store::owners::Solo::new()),
    };
    let recorder = Rc::new(Recorder::default());
    let environment = Environment {
        entrance: "plan test".into(),
        tools_host: "page".into(),
        http: kiln_http::default_client(),
        people: People::Approver {
            host: "plan test".into(),
            approver: recorder.clone(),
            session: SessionAllow::default(),
        },
        own_tools: None,
        bridge: None,
        workspace: Some(Rc::new(Ok(workspace))),
        random: Rc::new(|| [7; 8]),
        on_gate: None,
        on_progress: None,
    };
    let provider = Routed::new(routes);
    let events = Rc::new(RefCell::new(Vec::new()));
    let sink = {
        let events = events.clone();
        Rc::new(move |event| events.borrow_mut().push(event))
    };
    let request = AgentRequest {
        run: RunRequest::from_value(json!({"code": "", "permission": {"mode": options.mode}}))
            .unwrap(),
        provider: provider.clone(),
        options: ChatOptions::new("scripted"),
        messages: vec![Message::User {
            text: prompt.into(),
        }],
        system: options.system.map(str::to_owned),
        output_schema: None,
        guards: Guards::default(),
        budget: BudgetLimits {
            max_concurrency: options.max_concurrency,
            ..BudgetLimits::default()
        },
        direct: Vec::new(),
        compaction: Compaction::default(),
        profile: None,
    };
    let setup = AgentSetup {
        environment: &environment,
        runner: Rc::new(InProcess),
        person: None,
        clock: Rc::new(kiln_http::SystemClock),
        sink,
        cancel: options.cancel,
    };
    let outcome = block_on(run_agent(request, setup)).unwrap();
    let events = events.borrow().clone();
    assert!(
        matches!(events.last(), Some(AgentEvent::Done { .. })),
        "the last event is the turn's done"
    );
    let asked = recorder.0.borrow().clone();
    Run {
        outcome,
        events,
        provider,
        asked,
    }
}

#[test]
fn run_subtask_answers_the_childs_value_and_its_events_are_tagged() {
    let run = run(
        "Delegate the sum.",
        vec![
            (
                "Delegate",
                script(
                    call(
                        "root_1",
                        "run_subtask",
                        json!({"prompt": "child: add 2 and 3"}),
                    ),
                    |request| Reply::text(&format!("The child said {}", last_tool_result(request))),
                ),
            ),
            (
                "child:",
                script(code("kid_1", "finish(2 + 3)"), |_| Reply::text("done")),
            ),
        ],
        Options::default(),
    );
    let results = run.results();
    let answer: Value = serde_json::from_str(&results[0].1).unwrap();
    assert_eq!(answer["status"], "completed", "{answer}");
    assert_eq!(answer["value"], 5);
    assert_eq!(run.outcome.result.stop.reason, StopReason::Answered);
    // The child's events arrive wrapped once: its id, the spawning call, depth 1.
    let child_events: Vec<&AgentEvent> = run
        .events
        .iter()
        .filter(|event| matches!(event, AgentEvent::Child { .. }))
        .collect();
    assert!(!child_events.is_empty());
    for event in child_events {
        let AgentEvent::Child {
            child,
            parent,
            parent_call_id,
            depth,
            label,
            ..
        } = event
        else {
            unreachable!()
        };
        assert_eq!(
            (
                child.as_str(),
                parent,
                parent_call_id.as_str(),
                *depth,
                label.as_str()
            ),
            ("c1", &None, "root_1", 1, "subtask")
        );
    }
    assert!(run.flat().iter().any(|(depth, event)| *depth == 1
        && matches!(event, AgentEvent::Done { result } if result.value == json!(5))));
}

#[test]
fn a_fan_out_in_code_is_bounded_by_the_permit_pool() {
    let run = run(
        "Fan out.",
        vec![
            (
                "Fan out",
                script(
                    code(
                        "root_1",
                        "const all = await Promise.all([1, 2, 3, 4, 5].map((n) => agents.run(`child ${n}`))); return all.map((r) => r.value)",
                    ),
                    |_| Reply::text("All five answered."),
                ),
            ),
            (
                "child ",
                Rc::new(|request: &ChatRequest, _| {
                    Reply::text(first_user(request).trim_start_matches("child "))
                }),
            ),
        ],
        Options {
            max_concurrency: Some(2),
            ..Options::default()
        },
    );
    let value = run
        .flat()
        .into_iter()
        .find_map(|(depth, event)| match event {
            AgentEvent::ToolResultUpdate { run: Some(run), .. } if depth == 0 => Some(run),
            _ => None,
        })
        .unwrap();
    assert_eq!(value["value"], json!(["1", "2", "3", "4", "5"]));
    // The turn lent its permit to one child and the pool gave one more: two
    // conversations at once, never three.
    assert_eq!(
        run.provider.peak.get(),
        2,
        "conversations in flight at most"
    );
}

/// Every conversation delegates once more, then reports what it heard.
fn nesting() -> Vec<(&'static str, Script)> {
    vec![(
        "nest",
        Rc::new(|request: &ChatRequest, turn| {
            if turn == 0 {
                let depth = request
                    .messages
                    .iter()
                    .filter(|message| matches!(message, Message::User { .. }))
                    .count();
                call(
                    &format!("n{depth}"),
                    "run_subtask",
                    json!({"prompt": "nest deeper"}),
                )
            } else {
                Reply::text(&format!("heard: {}", last_tool_result(request)))
            }
        }),
    )]
}

#[test]
fn the_depth_gate_refuses_past_three_by_name_and_nesting_never_deadlocks() {
    for pool in [1, 4] {
        let run = run(
            "nest",
            nesting(),
            Options {
                max_concurrency: Some(pool),
                ..Options::default()
            },
        );
        let refused = run
            .flat()
            .into_iter()
            .find_map(|(depth, event)| match event {
                AgentEvent::ToolResultUpdate { content, .. }
                    if content.contains("max_delegation_depth") =>
                {
                    Some((depth, content))
                }
                _ => None,
            })
            .unwrap_or_else(|| panic!("pool {pool}: no refusal"));
        assert_eq!(
            refused.0, 3,
            "the child at depth 3 is refused a fourth level"
        );
        assert!(refused.1.contains("delegation limit of 3"), "{}", refused.1);
        let depths: Vec<u32> = run.flat().iter().map(|(depth, _)| *depth).collect();
        assert_eq!(depths.iter().max(), Some(&3));
        assert_eq!(
            run.outcome.result.stop.reason,
            StopReason::Answered,
            "pool {pool}"
        );
    }
}

#[test]
fn background_children_start_at_once_and_wait_collects_them() {
    let run = run(
        "Background.",
        vec![
            (
                "Background",
                script(
                    code(
                        "root_1",
                        "const a = await agents.start('bg alpha'); const b = await agents.start('bg beta'); const done = await agents.wait({ids: [a, b]}); return done.subtasks.map((s) => [s.subtask_id, s.status, s.value])",
                    ),
                    |_| Reply::text("Both came back."),
                ),
            ),
            ("bg alpha", says("A")),
            ("bg beta", says("B")),
        ],
        Options::default(),
    );
    let value = run
        .events
        .iter()
        .find_map(|event| match event {
            AgentEvent::ToolResultUpdate { run: Some(run), .. } => Some(run.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        value["value"],
        json!([["c1", "completed", "A"], ["c2", "completed", "B"]]),
        "{value}"
    );
}

#[test]
fn past_the_background_limit_a_start_is_refused_by_name() {
    let run = run(
        "Too many.",
        vec![
            (
                "Too many",
                script(
                    code(
                        "root_1",
                        "const ids = []; for (let n = 0; n < 8; n++) ids.push(await agents.start('bg ' + n)); try { await agents.start('bg 9'); return 'started'; } catch (error) { await agents.wait({ids}); return error.code; }",
                    ),
                    |_| Reply::text("Refused, as it should be."),
                ),
            ),
            ("bg ", says("ok")),
        ],
        Options::default(),
    );
    let value = run
        .events
        .iter()
        .find_map(|event| match event {
            AgentEvent::ToolResultUpdate { run: Some(run), .. } => Some(run.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(value["value"], "background_limit_reached", "{value}");
}

/// A plan of three tasks: `t1` and `t2` independent, `t3` after both.
fn three_tasks() -> Value {
    json!({
        "title": "Sum report",
        "tasks": [
            {"id": "t3", "title": "Combine", "depends_on": ["t1", "t2"], "steps": [
                {"id": "s3", "instructions": "Add the two numbers of task:t1 and task:t2."}
            ]},
            {"id": "t1", "title": "First", "depends_on": [], "steps": [
                {"id": "s1", "instructions": "Give the number 20.", "output_schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}
            ]},
            {"id": "t2", "title": "Second", "depends_on": [], "steps": [
                {"id": "s2", "instructions": "Give the number 22."}
            ]}
        ]
    })
}

fn step_routes() -> Vec<(&'static str, Script)> {
    vec![
        (
            "(`s1`)",
            script(code("s1_1", "finish({n: 20})"), |_| Reply::text("done")),
        ),
        ("(`s2`)", says("22")),
        (
            "(`s3`)",
            script(
                code(
                    "s3_1",
                    "const got = await tools.read_shared({keys: ['task:t1', 'task:t2']}); return got",
                ),
                |request| {
                    let seen = last_tool_result(request);
                    assert!(seen.contains("20") && seen.contains("22"), "s3 read {seen}");
                    Reply::text("42")
                },
            ),
        ),
    ]
}

#[test]
fn execute_plan_runs_tasks_as_their_dependencies_allow_and_answers_every_result() {
    let plan = three_tasks();
    let mut routes = vec![(
        "Run the plan",
        script(call("root_1", "execute_plan", plan), |request| {
            let seen = last_tool_result(request);
            assert!(seen.contains("\"t3\":\"42\""), "{seen}");
            Reply::text("The sum is 42.")
        }),
    )];
    routes.extend(step_routes());
    let run = run(
        "Run the plan.",
        routes,
        Options {
            mode: "default",
            ..Options::default()
        },
    );
    assert_eq!(run.outcome.result.text, "The sum is 42.");
    // Approving the plan is the gate: asked once, for it; the steps'
    // programs ran under that approval (what they call stays gated).
    assert_eq!(run.asked, ["execute_plan"]);
    let answer: Value = serde_json::from_str(&run.results()[0].1).unwrap();
    assert_eq!(answer["status"], "completed");
    assert_eq!(
        answer["results"],
        json!({"t1": {"n": 20}, "t2": "22", "t3": "42"})
    );
    assert_eq!(
        answer["steps"],
        json!({"s1": {"n": 20}, "s2": "22", "s3": "42"})
    );
    // t3 started only after both its dependencies completed.
    let updates = run.task_updates();
    let at = |event: TaskEvent, task: &str| {
        updates
            .iter()
            .position(|(e, t, step, _)| *e == event && t == task && step.is_none())
            .unwrap_or_else(|| panic!("no {event:?} for {task}: {updates:?}"))
    };
    assert!(at(TaskEvent::TaskStarted, "t3") > at(TaskEvent::TaskCompleted, "t1"));
    assert!(at(TaskEvent::TaskStarted, "t3") > at(TaskEvent::TaskCompleted, "t2"));
    assert!(
        at(TaskEvent::TaskStarted, "t2") < at(TaskEvent::TaskCompleted, "t1"),
        "independent tasks run together"
    );
    // Each step's result was announced and tagged as the step's child.
    let steps: Vec<String> = run
        .events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::StepResult {
                step_id,
                error: None,
                ..
            } => Some(step_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(steps.len(), 3);
    assert!(
        run.events
            .iter()
            .any(|event| matches!(event, AgentEvent::Child { label, .. } if label == "step s3"))
    );
}

#[test]
fn a_plan_with_a_cycle_is_refused_naming_it_and_nothing_runs() {
    let plan = json!({"title": "Loop", "tasks": [
        {"id": "a", "title": "A", "depends_on": ["b"], "steps": [{"id": "sa", "instructions": "x"}]},
        {"id": "b", "title": "B", "depends_on": ["a"], "steps": [{"id": "sb", "instructions": "y"}]}
    ]});
    let run = run(
        "Run the loop",
        vec![(
            "Run the loop",
            script(call("root_1", "execute_plan", plan), |_| {
                Reply::text("It was refused.")
            }),
        )],
        Options::default(),
    );
    let (name, content, is_error) = &run.results()[0];
    assert_eq!(name, "execute_plan");
    assert!(is_error);
    assert!(
        content.contains("invalid_plan") && content.contains("`a` and `b` depend on each other"),
        "{content}"
    );
    assert!(run.task_updates().is_empty(), "nothing ran");
}

/// One `execute_plan` call from the model with a task of 10,000 steps in one
/// cycle: refused by its counts before any step is checked or any cycle
/// looked for (reachability per step held 10^8 pairs), and nothing runs.
#[test]
fn a_plan_of_ten_thousand_steps_is_refused_by_its_size_and_nothing_runs() {
    let steps: Vec<Value> = (0..10_000)
        .map(|at| {
            json!({"id": format!("s{at}"), "instructions": "x", "depends_on": [format!("s{}", (at + 9_999) % 10_000)]})
        })
        .collect();
    let plan = json!({"title": "Huge", "tasks": [{"id": "a", "title": "A", "steps": steps}]});
    let run = run(
        "Run the huge plan",
        vec![(
            "Run the huge plan",
            script(call("root_1", "execute_plan", plan), |_| {
                Reply::text("It was refused.")
            }),
        )],
        Options::default(),
    );
    let (name, content, is_error) = &run.results()[0];
    assert_eq!(name, "execute_plan");
    assert!(is_error);
    let error: Value = serde_json::from_str(content).unwrap();
    assert_eq!(error["error"]["code"], "invalid_plan", "{content}");
    let issues = error["error"]["detail"]["issues"].as_array().unwrap();
    let messages: Vec<&str> = issues
        .iter()
        .map(|issue| issue["message"].as_str().unwrap())
        .collect();
    assert_eq!(
        messages,
        [
            "the plan has 10000 steps in all; a plan may have at most 500 steps in all",
            "the plan has 10000 dependencies in all; a plan may name at most 5000 (its tasks' and steps' depends_on together)",
        ],
        "{content:.500}"
    );
    assert!(issues.iter().all(|issue| issue["code"] == "too_large"));
    assert!(run.task_updates().is_empty(), "nothing ran");
}

#[test]
fn a_failing_task_blocks_its_dependents_naming_it_and_all_failed_is_plan_failed() {
    let mut routes: Vec<(&'static str, Script)> = vec![(
        "Run the plan",
        script(call("root_1", "execute_plan", three_tasks()), |_| {
            Reply::text("Some failed.")
        }),
    )];
    routes.push((
        "(`s1`)",
        Rc::new(|_, _| Reply::Fail {
            kind: kiln_providers::ErrorKind::Server,
            message: "the model is down".into(),
        }),
    ));
    routes.extend(step_routes().into_iter().skip(1));
    let partial = run("Run the plan.", routes, Options::default());
    let answer: Value = serde_json::from_str(&partial.results()[0].1).unwrap();
    assert_eq!(answer["status"], "partial", "{answer}");
    let tasks = answer["tasks"].as_array().unwrap();
    let status = |id: &str| tasks.iter().find(|task| task["id"] == id).unwrap().clone();
    assert_eq!(status("t1")["status"], "failed");
    assert!(
        status("t1")["error"]
            .as_str()
            .unwrap()
            .contains("step `s1` failed")
    );
    assert_eq!(status("t1")["failed_step"], "s1");
    assert_eq!(status("t3")["error"], "dependency `t1` failed");
    assert_eq!(status("t2")["status"], "completed");
    assert!(answer.get("error").is_none());

    // Every task failing is plan_failed, answered, not thrown.
    let plan = json!({"title": "Doomed", "tasks": [
        {"id": "t1", "title": "First", "steps": [{"id": "s1", "instructions": "fail"}]},
        {"id": "t2", "title": "Then", "depends_on": ["t1"], "steps": [{"id": "s2", "instructions": "never"}]}
    ]});
    let doomed = run(
        "Run the doomed plan",
        vec![
            (
                "Run the doomed",
                script(call("root_1", "execute_plan", plan), |_| {
                    Reply::text("It failed.")
                }),
            ),
            (
                "(`s1`)",
                Rc::new(|_, _| Reply::Fail {
                    kind: kiln_providers::ErrorKind::Server,
                    message: "down".into(),
                }),
            ),
        ],
        Options::default(),
    );
    let (_, content, is_error) = &doomed.results()[0];
    assert!(!is_error);
    let answer: Value = serde_json::from_str(content).unwrap();
    assert_eq!(answer["error"], "plan_failed");
    assert_eq!(answer["failures"].as_array().unwrap().len(), 2);
}

#[test]
fn plan_mode_creates_a_plan_shows_it_and_refuses_to_run_it() {
    let planner: Script = Rc::new(|_, turn| match turn {
        0 => Reply::Message {
            text: String::new(),
            tool_calls: vec![
                ToolCall {
                    id: "p1".into(),
                    name: "add_task".into(),
                    arguments: json!({"id": "fetch", "title": "Fetch", "depends_on": [], "steps": [{"id": "fetch_it", "instructions": "Fetch it."}]}),
                },
                ToolCall {
                    id: "p2".into(),
                    name: "add_task".into(),
                    // A step id used twice: refused, so the model fixes it.
                    arguments: json!({"id": "report", "title": "Report", "depends_on": ["fetch"], "steps": [{"id": "fetch_it", "instructions": "Report it."}]}),
                },
            ],
            usage: Usage::default(),
        },
        1 => Reply::Message {
            text: String::new(),
            tool_calls: vec![
                ToolCall {
                    id: "p3".into(),
                    name: "add_task".into(),
                    arguments: json!({"id": "report", "title": "Report", "depends_on": ["fetch"], "steps": [{"id": "report_it", "instructions": "Report it."}]}),
                },
                ToolCall {
                    id: "p4".into(),
                    name: "finish_plan".into(),
                    arguments: json!({"title": "Fetch and report"}),
                },
            ],
            usage: Usage::default(),
        },
        _ => Reply::text("stray"),
    });
    let run = run(
        "Plan the report",
        vec![
            (
                "Plan the report",
                Rc::new(|request: &ChatRequest, turn| match turn {
                    0 => call(
                        "root_1",
                        "create_plan",
                        json!({"objective": "Fetch the data and report on it"}),
                    ),
                    1 => {
                        let seen = last_tool_result(request);
                        let plan: Value = serde_json::from_str(&seen).unwrap();
                        call("root_2", "execute_plan", plan["plan"].clone())
                    }
                    _ => Reply::text("Here is the plan; switch out of plan mode to run it."),
                }),
            ),
            ("Objective:", planner),
        ],
        Options {
            mode: "plan",
            ..Options::default()
        },
    );
    let results = run.results();
    let created: Value = serde_json::from_str(&results[0].1).unwrap();
    assert_eq!(created["plan"]["tasks"][1]["steps"][0]["id"], "report_it");
    assert_eq!(created["summary"], "2 tasks, 2 steps, 1 parallelizable");
    // The planner's progress streamed, the refused call among it.
    let phases: Vec<(String, String)> = run
        .events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::PlanningUpdate { phase, status, .. } => {
                Some((phase.as_str().to_owned(), status.clone()))
            }
            _ => None,
        })
        .collect();
    assert!(
        phases.contains(&("validation".into(), "failed".into())),
        "{phases:?}"
    );
    assert_eq!(phases.last(), Some(&("complete".into(), "ok".into())));
    // execute_plan in plan mode: refused by the ladder in its own words.
    let (name, content, is_error) = &results[1];
    assert_eq!(name, "execute_plan");
    assert!(*is_error && content.contains("plan mode"), "{content}");
    assert!(run.task_updates().is_empty());
    // The planner was offered only its two tools and told the no-synthesis rule.
    let planner_request = run
        .provider
        .requests
        .borrow()
        .iter()
        .find(|request| first_user(request).starts_with("Objective:"))
        .cloned()
        .unwrap();
    let names: Vec<&str> = planner_request
        .tools
        .iter()
        .map(|tool| tool.name.as_str())
        .collect();
    assert_eq!(names, ["add_task", "finish_plan"]);
    let Message::System { text } = &planner_request.messages[0] else {
        panic!()
    };
    assert!(text.contains("Do NOT add a task or step that aggregates"));
    assert!(!text.contains("- create_plan"));
}

#[test]
fn an_abort_settles_each_unfinished_task_once_as_aborted() {
    let cancel = AbortSignal::new();
    let stopper = cancel.clone();
    let plan = json!({"title": "Stopped", "tasks": [
        {"id": "t1", "title": "First", "steps": [{"id": "s1", "instructions": "wait"}]},
        {"id": "t2", "title": "Then", "depends_on": ["t1"], "steps": [{"id": "s2", "instructions": "never"}]}
    ]});
    let run = run(
        "Run and stop",
        vec![
            (
                "Run and stop",
                script(call("root_1", "execute_plan", plan), |_| {
                    Reply::text("stopped")
                }),
            ),
            (
                "(`s1`)",
                Rc::new(move |_, _| {
                    stopper.abort();
                    Reply::text("too late")
                }),
            ),
        ],
        Options {
            cancel,
            ..Options::default()
        },
    );
    assert_eq!(run.outcome.result.stop.reason, StopReason::Cancelled);
    let updates = run.task_updates();
    for task in ["t1", "t2"] {
        let ends: Vec<_> = updates
            .iter()
            .filter(|(event, id, step, _)| {
                id == task
                    && step.is_none()
                    && matches!(event, TaskEvent::TaskCompleted | TaskEvent::TaskFailed)
            })
            .collect();
        assert_eq!(ends.len(), 1, "{task} settled once: {updates:?}");
        assert_eq!(ends[0].3.as_deref(), Some("Task aborted"), "{task}");
    }
}

#[test]
fn one_pool_bounds_a_plans_steps_and_the_callers_preamble_reaches_every_child() {
    let tasks: Vec<Value> = (1..=5)
        .map(|n| json!({"id": format!("t{n}"), "title": format!("Task {n}"), "steps": [{"id": format!("s{n}"), "instructions": "Say done."}]}))
        .collect();
    let run = run(
        "Run five",
        vec![
            (
                "Run five",
                script(
                    call(
                        "root_1",
                        "execute_plan",
                        json!({"title": "Five", "tasks": tasks}),
                    ),
                    |_| Reply::text("All five ran."),
                ),
            ),
            ("Your step", says("done")),
        ],
        Options {
            max_concurrency: Some(2),
            system: Some("You are the Acme assistant."),
            ..Options::default()
        },
    );
    assert_eq!(run.outcome.result.text, "All five ran.");
    // Five independent steps, two conversations at once: the turn's
    // (lent to one step) and one of the pool's.
    assert_eq!(run.provider.peak.get(), 2);
    for request in run.provider.requests.borrow().iter() {
        let Message::System { text } = &request.messages[0] else {
            panic!()
        };
        assert!(
            text.starts_with("You are the Acme assistant.\n\n# How you act"),
            "every loop's contract comes after the caller's preamble: {text}"
        );
    }
}

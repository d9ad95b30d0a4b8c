//! The versioned messages between a page (the app, the page API) and its
//! runtime worker (DESIGN: "runtime protocol").
//!
//! Like the sandbox protocol ([`crate::protocol`]) they cross `postMessage`
//! as JSON text in an [`Envelope`](crate::protocol::Envelope) whose `v` is
//! [`RUNTIME_PROTOCOL_VERSION`]: a peer of another version, or a message
//! that does not read, is refused by name ([`DecodeError`]), never misread.
//!
//! Every exchange the page starts carries an `id` of its choosing; the
//! worker's answers name it. What the page keeps (its tools' `call`
//! functions, its `approve` callback) never crosses: the worker asks for
//! them by message ([`FromRuntime::ToolCall`], [`FromRuntime::Approve`]) and
//! the page answers. A run request travels as the JSON
//! `kiln_run::RunRequest` reads, so the worker checks it once, by the same
//! rules as every entrance; so does a chat turn's request, read by
//! `kiln_agent::TurnRequest`. Storage operations name their verb (`memory.save`,
//! `files.read`, …) and carry its arguments, read by `kiln_runtime::store_op`.
//!
//! Exchanges that stream ([`ToRuntime::Chat`], [`ToRuntime::Watch`]) post
//! their events under the exchange's `id` until it ends (a chat's
//! [`FromRuntime::Done`]) or the page ends it ([`ToRuntime::Cancel`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agent::AgentEvent;
use crate::node::NodeReport;
use crate::permission::{Answer, ApprovalRequest, GateSettings};
use crate::protocol::DecodeError;
use crate::run::RunReport;
use crate::tool_result::ToolReply;
use crate::tool_result::Warning;

/// Bumped whenever a runtime message changes shape. It starts past the
/// sandbox protocol's numbers, so a message of one protocol sent down the
/// other's channel is refused by its version, never misread.
/// Shape: 0xe65dd9fff1ccefa4 at version 1004 (the hash of this file's message types; the
/// tidy test `protocol_shapes` fails when they change and this version does not).
pub const RUNTIME_PROTOCOL_VERSION: u32 = 1004;

/// What a runtime worker serves, given as its `name` when the page starts it
/// (so it is there before the first message, which could otherwise arrive
/// before the worker's wasm listens): the workspace whose stores it opens,
/// the sandbox workers' bootstrap and how many to keep started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeOptions {
    pub workspace: String,
    pub sandbox_url: String,
    pub pool_size: u32,
    /// How long a keyed run's call waits before it answers the interim
    /// result; the reference's 25 s when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_due_ms: Option<u64>,
}

/// The person's answer to [`FromRuntime::Question`] (`ask_user`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum Told {
    /// What the person wrote.
    Said { text: String },
    /// Nobody answered (the page's callback threw, the person dismissed
    /// the question): `ask_user` tells the model `reason`.
    Unavailable { reason: String },
}

/// From the page to its runtime worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToRuntime {
    /// Runs one program. `request` is the run request's JSON, the page's
    /// functions left out; the answer is [`FromRuntime::Done`] with the
    /// `tool-result/v1` object (or, with `report`, `{job_id, report,
    /// warnings, catalog_digest, text, record_error}`: the sandbox's own
    /// report, the model's text and why the history record was not finished).
    Run {
        id: u64,
        request: Value,
        /// The page has an `approve` callback: someone can be asked
        /// ([`FromRuntime::Approve`]), so the default mode is `default`.
        #[serde(default)]
        approve: bool,
        #[serde(default)]
        report: bool,
    },
    /// Ends run `id` at once (a Stop button, an `AbortSignal`); for a keyed
    /// run, withdraws it ([`ToRuntime::Withdraw`]).
    Cancel { id: u64 },
    /// The final result of the keyed run `run_id` (waiting for it as a keyed
    /// call does, then the interim again), as [`FromRuntime::Done`]; an id
    /// the worker keeps nothing for answers an error result (`unknown_run`,
    /// `expired_run`).
    LateResult { id: u64, run_id: String },
    /// Cancels the keyed run `run_id` and answers how it ended, as
    /// [`FromRuntime::Done`].
    Withdraw { id: u64, run_id: String },
    /// The page tool's answer to [`FromRuntime::ToolCall`].
    ToolReply {
        id: u64,
        call_number: u32,
        /// The call's `key`, as [`FromRuntime::ToolCall`] gave it.
        key: u64,
        reply: ToolReply,
    },
    /// The page tool's call is held on a person, or no longer is
    /// (`ctx.waitOnPerson`): the run counts it as person wait.
    ToolHeld {
        id: u64,
        call_number: u32,
        key: u64,
        held: bool,
    },
    /// The person's (or the page's) answer to [`FromRuntime::Approve`]
    /// number `ask`; `unavailable` when nobody could answer (the callback
    /// threw or answered something else): the call fails
    /// `consent_unavailable` with its reason.
    Answer { ask: u64, approval: Answer },
    /// One storage operation (`memory.save`, `files.read`, `export`, …)
    /// with its arguments; answered by [`FromRuntime::Done`] with its JSON.
    Store {
        id: u64,
        op: String,
        #[serde(default)]
        args: Value,
    },
    /// Every committed change to the workspace's records, this tab's or
    /// another's, as [`FromRuntime::Changed`] under `id` until
    /// [`ToRuntime::Cancel`].
    Watch { id: u64 },
    /// One streamed chat turn: `request` is `{provider, messages, tools?,
    /// options, budget?}`, where `budget` is this turn's own limits or
    /// `{"shared": n}`, a budget made by [`ToRuntime::Budget`]. Events come
    /// as [`FromRuntime::Event`], the final message as [`FromRuntime::Done`].
    Chat { id: u64, request: Value },
    /// One agent turn, the CodeAct loop: `request` is `kiln.agent`'s minus
    /// its functions (`{provider, options, messages, tools?, mcp?, builtins?,
    /// permission?, outputSchema?, guards?, budget?, system?, …}`). Its
    /// `AgentEvent`s come as [`FromRuntime::Event`], its page tool calls and
    /// approvals as for a run (`approve`: the page gave a callback), and
    /// its `AgentResult` as [`FromRuntime::Done`], with `messages`: the
    /// thread as the model saw it (compacted), to send as the next turn's
    /// `messages`. `ask`: someone answers `ask_user`
    /// ([`FromRuntime::Question`]); without it `ask_user` answers that
    /// nobody can.
    Agent {
        id: u64,
        request: Value,
        #[serde(default)]
        approve: bool,
        #[serde(default)]
        ask: bool,
    },
    /// Runs one code node: `request` is `{node, values?, ...}` with a run
    /// request's fields but `code`, `inputs` and `key`, read by
    /// `kiln_nodes::NodeRequest`. Its page tool calls and approvals go
    /// as for a run; the answer is [`FromRuntime::Done`] with the node's run
    /// (`{outputs, warnings, console, duration_ms, error?, result, job_id?}`).
    Node {
        id: u64,
        request: Value,
        #[serde(default)]
        approve: bool,
    },
    /// Runs a graph of nodes: `request` is `{nodes, edges?, inputs?,
    /// max_concurrent?, ...}`, read by `kiln_nodes::GraphRequest`.
    /// Each node's report comes as an [`FromRuntime::Event`] `{type: "node",
    /// id, status, ...run}` as it settles, the graph's run (`{status,
    /// nodes}`) as [`FromRuntime::Done`]; a graph its build refuses fails
    /// with `code: "invalid_graph"` and every reason in the message.
    Graph {
        id: u64,
        request: Value,
        #[serde(default)]
        approve: bool,
    },
    /// Checks a code node as it would run, without running it: its slots,
    /// its imports, whether its body (JavaScript or TypeScript) parses and
    /// gives every output on every return path (`kiln_nodes::check_node_typed`).
    /// `node` is a `CodeNode`; the answer is [`FromRuntime::Done`] with
    /// `{problems: [sentence]}`, empty when it would run.
    CheckNode { id: u64, node: Value },
    /// Writes a code node with a model (the CodePlanner): `request` is
    /// `kiln.authorCode`'s, read by `kiln_nodes::AuthorSpec`. The
    /// answer is `{node, summary, telemetry}` or `{error: {code, message,
    /// errors?}, telemetry}`; with `preview` nothing is sent and the answer
    /// is `{messages, model}`: exactly what the first request would send,
    /// and to which model.
    AuthorCode {
        id: u64,
        request: Value,
        #[serde(default)]
        preview: bool,
    },
    /// The answer to [`FromRuntime::Question`] number `ask`.
    Told { ask: u64, told: Told },
    /// Makes run budget number `budget` (numbered by the page), shared by
    /// every chat turn that names it; its deadline runs from now.
    Budget { budget: u32, limits: BudgetLimits },
    /// The models a provider offers: `{kind, base_url, key?}`, or a
    /// provider the workspace keeps, `{stored: NAME, kind?, base_url?}`
    /// (the worker adds its key, only for the kind and origin it was saved
    /// for).
    Models { id: u64, provider: Value },
    /// Deletes Kiln's own model's cached files (they download again at the
    /// next turn that asks for it); answered `done` with `null`, or `failed`.
    ClearModel { id: u64 },
    /// The person changed the permission settings: every run going on
    /// decides its next call by them (a run started before keeps its
    /// request's settings until this arrives).
    Permission { settings: GateSettings },
    /// The tools a run of `request` would have (`{tools: [{name,
    /// description, category, module}], warnings}`), without running it.
    Catalog { id: u64, request: Value },
    /// Connects to the MCP server `url` as `name` and lists its tools
    /// (`{server: {name, version}, tools: [...]}`), then closes the session;
    /// `failed` says why it could not.
    McpConnect { id: u64, name: String, url: String },
    /// A figure for `cargo xtask bench` (`ladder`, `mcp`, `sse`,
    /// `storage_open`, `codec`, `codeact`), measured in the worker; a worker built without the
    /// `bench` feature answers that it has none.
    Bench {
        id: u64,
        hook: String,
        #[serde(default)]
        args: Value,
    },
}

/// The limits of a run budget, as a page gives them (`kiln.budget(limits)`,
/// or one chat turn's own `budget`). A missing limit does not bound.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetLimits {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_usd: Option<f64>,
    /// Milliseconds from the budget's creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// Under a USD cap, the largest prompt (estimated tokens) a turn on an
    /// unpriced model may send; the providers' default when missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unpriced_token_ceiling: Option<u64>,
    /// How many provider conversations (the turn, its plan steps and
    /// sub-agents) may be open at once; the providers' default when missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
}

/// Why a request failed, as the page rejects it: a `TypeError` for a
/// request that does not read, else an `Error` with a stable `code`, the
/// hint as its own field, and the HTTP status of a provider's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// `true`: the request itself was wrong (a `TypeError` on the page).
    #[serde(default)]
    pub bad_request: bool,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
}

impl Problem {
    /// A request that does not read (a `TypeError` on the page).
    #[must_use]
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self {
            bad_request: true,
            message: message.into(),
            code: None,
            hint: None,
            status: None,
        }
    }
}

/// From the runtime worker to its page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromRuntime {
    /// The worker is up and its workspace opened; `storage` says why the
    /// workspace's stores did not open, when they did not (runs then go on
    /// without the storage tools). The first sandbox worker may still be
    /// starting: a run waits for it.
    Ready {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        storage: Option<Problem>,
    },
    /// Exchange `id` ended with `value`: a `tool-result/v1` object for a
    /// run (a [`RunAnswer`] with `report`), else the exchange's own answer.
    Done { id: u64, value: Value },
    /// Exchange `id` failed before it could answer.
    Failed { id: u64, problem: Problem },
    /// Keyed run `id` had not ended when its answer was due: `value` is the
    /// interim result (`{status: "running", run_id, held}`), the page's
    /// answer now. The exchange goes on — its page tools and `approve` are
    /// still called — until its [`FromRuntime::Done`], which then only ends it.
    Interim { id: u64, value: Value },
    /// A program of run `id` called the page tool `tool`.
    ToolCall {
        id: u64,
        /// The call's number in its run (the page tool's `ctx.callNumber`):
        /// an agent turn's actions are runs of their own, each numbering
        /// from 1.
        call_number: u32,
        /// The worker's own number for the call, never given twice: the page
        /// answers with it, so that the late answer to a call of an action
        /// that ended cannot answer another action's call of that number.
        key: u64,
        tool: String,
        args: Value,
    },
    /// A call of run `id` needs an answer ([`ToRuntime::Answer`] with the
    /// same `ask`); `request` is the approval card's content, secrets
    /// redacted. The page crate alone gives it the page API's shape.
    Approve {
        id: u64,
        ask: u64,
        request: ApprovalRequest,
    },
    /// Agent turn `id` asks the person `question` (`ask_user`); answered by
    /// [`ToRuntime::Told`] with the same `ask`. The turn's clock counts the
    /// wait as person wait.
    Question { id: u64, ask: u64, question: String },
    /// A streamed event of exchange `id`: an agent turn's step, a chat
    /// turn's delta, a graph node's report.
    Event { id: u64, event: ExchangeEvent },
    /// Committed changes (`[{table, key, version}]`) for watch `id`.
    Changed { id: u64, changes: Value },
    /// Where loading Kiln's own model stands (downloading, reading, ready,
    /// failed), for every exchange: the page shows it where the turn waits.
    ModelStatus { status: crate::model::ModelStatus },
    /// A message the worker could not read; `problem` says what was wrong.
    Rejected { problem: String },
}

/// What streams during an exchange, by the kind of exchange.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "of", content = "event", rename_all = "snake_case")]
pub enum ExchangeEvent {
    /// A step of an agent turn ([`ToRuntime::Agent`]).
    Agent(AgentEvent),
    /// An item of a streamed chat turn ([`ToRuntime::Chat`]): `text_delta`,
    /// `tool_call_start`, `usage`, `stop`, ….
    Chat(crate::chat::Event),
    /// A node of a graph run ([`ToRuntime::Graph`]) settled.
    Node(NodeReport),
    /// A run's program said how far it has come (`progress(percent,
    /// message)`): `node` names the graph's node whose body it is.
    Progress {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<String>,
        progress: crate::run::Progress,
    },
    /// Where loading Kiln's own model stands. The worker broadcasts it
    /// ([`FromRuntime::ModelStatus`]); a client hands it to each exchange
    /// waiting, so the turn that waits on the model can show it.
    ModelStatus(crate::model::ModelStatus),
}

/// The answer to a run sent with `report` ([`ToRuntime::Run`]): the
/// sandbox's own account of the run, for tools, the app and benchmarks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunAnswer {
    /// The run's job in the history, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// The outcome, console lines, calls and timings.
    pub report: RunReport,
    /// Admission's and the ladder's warnings.
    pub warnings: Vec<Warning>,
    /// `sha256:…` of the run's catalog; empty when the run ended before the
    /// sandbox could say.
    pub catalog_digest: String,
    /// What a model reads of the run.
    pub text: String,
    /// Why the history has no finished record of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_error: Option<Problem>,
}

/// Encodes a runtime message for the wire.
#[must_use]
pub fn encode<M: Serialize>(msg: M) -> String {
    crate::protocol::encode_versioned(msg, RUNTIME_PROTOCOL_VERSION)
}

/// Decodes a runtime message, refusing other versions and malformed
/// messages by name.
pub fn decode<M: for<'de> Deserialize<'de>>(text: &str) -> Result<M, DecodeError> {
    crate::protocol::decode_versioned(text, RUNTIME_PROTOCOL_VERSION)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool_result::{CallOutcome, ToolFailure};

    #[test]
    fn every_message_round_trips() {
        let to = [
            ToRuntime::Run {
                id: 1,
                request: serde_json::json!({"code": "return 1"}),
                approve: true,
                report: false,
            },
            ToRuntime::Cancel { id: 1 },
            ToRuntime::LateResult {
                id: 2,
                run_id: "codemode:00".into(),
            },
            ToRuntime::Withdraw {
                id: 3,
                run_id: "codemode:00".into(),
            },
            ToRuntime::ToolReply {
                id: 1,
                call_number: 2,
                key: 7,
                reply: Err(ToolFailure {
                    code: "tool_error".into(),
                    message: "no".into(),
                    detail: None,
                    outcome: CallOutcome::Error,
                }),
            },
            ToRuntime::ToolHeld {
                id: 1,
                call_number: 2,
                key: 7,
                held: true,
            },
            ToRuntime::Answer {
                ask: 3,
                approval: Answer::Unavailable {
                    reason: "the callback threw".into(),
                },
            },
            ToRuntime::Store {
                id: 2,
                op: "memory.save".into(),
                args: serde_json::json!({"text": "x"}),
            },
            ToRuntime::Watch { id: 3 },
            ToRuntime::Chat {
                id: 4,
                request: serde_json::json!({"messages": []}),
            },
            ToRuntime::Agent {
                id: 9,
                request: serde_json::json!({"messages": []}),
                approve: true,
                ask: true,
            },
            ToRuntime::Node {
                id: 10,
                request: serde_json::json!({"node": {}}),
                approve: false,
            },
            ToRuntime::Graph {
                id: 11,
                request: serde_json::json!({"nodes": []}),
                approve: true,
            },
            ToRuntime::CheckNode {
                id: 13,
                node: serde_json::json!({"code": "return {}", "outputs": []}),
            },
            ToRuntime::AuthorCode {
                id: 12,
                request: serde_json::json!({"instruction": "x"}),
                preview: true,
            },
            ToRuntime::Told {
                ask: 4,
                told: Told::Said {
                    text: "blue".into(),
                },
            },
            ToRuntime::Told {
                ask: 5,
                told: Told::Unavailable {
                    reason: "dismissed".into(),
                },
            },
            ToRuntime::Budget {
                budget: 1,
                limits: BudgetLimits {
                    max_usd: Some(0.5),
                    max_turns: Some(2),
                    ..BudgetLimits::default()
                },
            },
            ToRuntime::Models {
                id: 5,
                provider: serde_json::json!({"kind": "openai"}),
            },
            ToRuntime::Permission {
                settings: GateSettings {
                    mode: crate::permission::Mode::Auto,
                    autonomy: [("echo".to_owned(), crate::permission::Autonomy::Block)].into(),
                    brake: true,
                },
            },
            ToRuntime::Catalog {
                id: 7,
                request: serde_json::json!({"code": ""}),
            },
            ToRuntime::McpConnect {
                id: 8,
                name: "everything".into(),
                url: "http://127.0.0.1:3001/mcp".into(),
            },
            ToRuntime::Bench {
                id: 6,
                hook: "sse".into(),
                args: serde_json::json!({"bytes": 10}),
            },
        ];
        for message in to {
            assert_eq!(decode::<ToRuntime>(&encode(&message)), Ok(message));
        }
        let from = [
            FromRuntime::Ready { storage: None },
            FromRuntime::Interim {
                id: 1,
                value: serde_json::json!({"structuredContent": {"status": "running"}}),
            },
            FromRuntime::ToolCall {
                id: 1,
                call_number: 2,
                key: 7,
                tool: "echo".into(),
                args: serde_json::json!({"a": 1}),
            },
            FromRuntime::Failed {
                id: 1,
                problem: Problem {
                    bad_request: true,
                    message: "`code` is missing".into(),
                    code: None,
                    hint: None,
                    status: None,
                },
            },
            FromRuntime::Approve {
                id: 1,
                ask: 4,
                request: ApprovalRequest {
                    call_number: 2,
                    tool: "save".into(),
                    category: crate::permission::Category::Write,
                    module: "page".into(),
                    description: "Saves a note".into(),
                    args: serde_json::json!({"text": "x"}),
                    reason: crate::permission::AskReason::Mode,
                    host: "page".into(),
                },
            },
            FromRuntime::Question {
                id: 9,
                ask: 6,
                question: "Which colour?".into(),
            },
            FromRuntime::Event {
                id: 4,
                event: ExchangeEvent::Chat(crate::chat::Event::TextDelta { text: "hi".into() }),
            },
            FromRuntime::Event {
                id: 9,
                event: ExchangeEvent::Agent(AgentEvent::TextDelta { text: "hi".into() }),
            },
            FromRuntime::Event {
                id: 11,
                event: ExchangeEvent::Node(NodeReport {
                    id: "sum".into(),
                    status: crate::node::Ended::Failed,
                    run: crate::node::NodeRun::refused(
                        "invalid_inputs",
                        &["`a` is missing".into()],
                    ),
                }),
            },
            FromRuntime::Done {
                id: 1,
                value: serde_json::to_value(RunAnswer {
                    job_id: Some("j1".into()),
                    report: RunReport::stopped(
                        crate::RunError::new(crate::RunErrorKind::Engine, "gone"),
                        1.0,
                    ),
                    warnings: Vec::new(),
                    catalog_digest: String::new(),
                    text: "gone".into(),
                    record_error: None,
                })
                .expect("a run answer is JSON"),
            },
            FromRuntime::Changed {
                id: 3,
                changes: serde_json::json!([{"table": "memories", "key": "m1", "version": 2}]),
            },
        ];
        for message in from {
            assert_eq!(decode::<FromRuntime>(&encode(&message)), Ok(message));
        }
    }

    #[test]
    fn other_versions_and_malformed_messages_are_refused_by_name() {
        let sandbox_message = crate::protocol::encode(crate::protocol::FromSandbox::Ready);
        let cases = [
            (r#"{"v":1002,"msg":{"type":"cancel","id":1}}"#, "`1002`"),
            ("{", "not a Kiln protocol message"),
            (r#"{"v":1004,"msg":{"type":"fly"}}"#, "fly"),
            (r#"{"v":1004,"msg":{"type":"cancel"}}"#, "id"),
            (
                r#"{"v":1004,"msg":{"type":"answer","ask":1,"approval":{"answer":"maybe"}}}"#,
                "maybe",
            ),
            (
                r#"{"v":1004,"msg":{"type":"budget","budget":1,"limits":{"max_dollars":1}}}"#,
                "max_dollars",
            ),
        ];
        for (text, named) in cases {
            let error = decode::<ToRuntime>(text).expect_err(text);
            assert!(error.to_string().contains(named), "{text}: {error}");
        }
        // A sandbox message is not a runtime message, and the other way round.
        let refused = decode::<FromRuntime>(&sandbox_message).expect_err("a sandbox message");
        assert!(refused.to_string().contains("`1004`"), "{refused}");
        let runtime_message = encode(FromRuntime::Ready { storage: None });
        assert!(crate::protocol::decode::<crate::protocol::FromSandbox>(&runtime_message).is_err());
    }
}

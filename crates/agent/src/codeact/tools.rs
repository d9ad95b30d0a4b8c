//! The tools an agent turn adds to its belt: `execute_code` (offered to the
//! model only: a program cannot start another), `ask_user`, `return_result`,
//! `list_models` and `search_tools` (on the belt, so a program calls them
//! too).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use futures::future::LocalBoxFuture;
use kiln_capabilities::{
    CallContext, CapabilitySpec, Category, Dispatcher, Gate, Implementation, Permit, Registry,
    SecretScope, Source,
};
use kiln_providers::Provider;
use kiln_types::agent::{
    ASK_USER, AgentEvent, EXECUTE_CODE, LIST_MODELS, RETURN_RESULT, SEARCH_TOOLS,
};
use kiln_types::cancel::AbortSignal;
use kiln_types::tool_result::{CallOutcome, ToolFailure, ToolReply, ToolResult};
use kiln_types::{RunLimits, RunResult};
use serde_json::{Value, json};

use kiln_run::RunId;
use kiln_run::SandboxRunner;

/// The always-on direct tools (reference/003), offered to the model as
/// functions whenever the belt has them; the file tools are every `file_*`.
pub(crate) const ALWAYS_ON: &[&str] = &[
    "save_memory",
    "query_memory",
    "mark_memory_helpful",
    "mark_memory_outdated",
    "search_history",
    "list_shared",
    "read_shared",
    "share_result",
    ASK_USER,
    RETURN_RESULT,
    LIST_MODELS,
    kiln_types::agent::LIST_SCHEDULES,
    kiln_capabilities::skill_tools::LOAD_SKILL,
    crate::docs::KILN_DOCS,
];

/// Whether `name` is one of the always-on direct tools.
#[must_use]
pub fn is_always_on(name: &str) -> bool {
    ALWAYS_ON.contains(&name) || name.starts_with("file_")
}

/// Tools that only hand over what was already done: a turn of nothing else
/// counts toward the `delivery_only` guard.
pub(crate) const DELIVERY: &[&str] = &[RETURN_RESULT, "share_result"];

/// Where the turn's events go, from the loop and from the tools.
pub type Sink = Rc<dyn Fn(AgentEvent)>;

/// The person a turn can ask (`ask_user`). An entrance without one (a
/// headless run) gives none, and the tool says nobody can answer.
pub trait Person {
    /// Asks `question`; the answer, or why nobody answered.
    fn ask(&self, question: String) -> LocalBoxFuture<'static, Result<String, String>>;
}

/// A spec of one of Kiln's own tools.
pub(crate) fn builtin(
    name: &str,
    description: &str,
    input_schema: Value,
    category: Category,
) -> CapabilitySpec {
    CapabilitySpec {
        name: name.into(),
        description: description.into(),
        input_schema,
        category,
        result: json!({}),
        source: Source::Builtin,
    }
}

/// A tool's plain failure (outcome `error`).
pub(crate) fn failure(code: &str, message: String) -> ToolFailure {
    ToolFailure {
        code: code.into(),
        message,
        detail: None,
        outcome: CallOutcome::Error,
    }
}

/// One action's account, kept for the loop by the call that ran it.
pub(crate) struct Action {
    pub result: ToolResult,
    pub run: RunResult,
}

/// What `execute_code` runs programs with: the belt (a fresh dispatcher per
/// action, so each program has its own call budget), the runner, the limits.
pub(crate) struct Actions {
    pub runner: Rc<dyn SandboxRunner>,
    pub belt: Rc<Registry>,
    pub gate: Rc<Gate>,
    pub secrets: SecretScope,
    pub limits: RunLimits,
    pub entrance: String,
    pub cancel: AbortSignal,
    pub random: Rc<dyn Fn() -> [u8; 8]>,
    /// Each action's account, by the model-side call number that ran it.
    pub done: RefCell<BTreeMap<u32, Action>>,
    /// The ladder's warnings go with the first action only.
    pub warned: Cell<bool>,
    /// Told each progress report of an action's program.
    pub on_progress: Option<kiln_capabilities::ProgressObserver>,
}

impl Actions {
    /// The `execute_code` spec: category `execute`, so the brake and plan
    /// mode apply to it.
    #[must_use]
    pub(crate) fn spec() -> CapabilitySpec {
        builtin(
            EXECUTE_CODE,
            "Runs a JavaScript program (the body of an async function: top-level await and return work) in Kiln's sandbox, with the job's tools on `tools`. Answers the run's result: its status, returned value, console output and tool calls.",
            json!({
                "type": "object",
                "properties": {"code": {"type": "string", "description": "The program's text."}},
                "required": ["code"]
            }),
            Category::Execute,
        )
    }
}

/// `execute_code`'s implementation.
pub(crate) struct ExecuteCode(pub Rc<Actions>);

impl Implementation for ExecuteCode {
    fn call(
        &self,
        args: Value,
        context: CallContext,
        _permit: Permit,
    ) -> LocalBoxFuture<'static, ToolReply> {
        let actions = self.0.clone();
        Box::pin(async move {
            let Some(code) = args.get("code").and_then(Value::as_str).map(str::to_owned) else {
                return Err(failure(
                    "invalid_arguments",
                    "execute_code needs `code`: the program's text as a string".into(),
                ));
            };
            let dispatcher = Rc::new(Dispatcher::new(
                actions.belt.clone(),
                Some(actions.gate.clone()),
                actions.secrets.clone(),
                actions.limits,
                &actions.entrance,
            ));
            if let Some(observer) = &actions.on_progress {
                dispatcher.run_state().on_progress(observer.clone());
            }
            let mut run = actions
                .runner
                .run(
                    code,
                    actions.limits,
                    dispatcher.clone(),
                    actions.cancel.clone(),
                )
                .await;
            if !actions.warned.replace(true) {
                let mut warnings = dispatcher.warnings().to_vec();
                warnings.append(&mut run.warnings);
                run.warnings = warnings;
            }
            let id = RunId {
                id: kiln_types::tool_result::run_id_from((actions.random)()),
                keyless: false,
            };
            let result = id.result_of(run.clone());
            let text = result.text();
            actions
                .done
                .borrow_mut()
                .insert(context.call_number, Action { result, run });
            Ok(Value::String(text))
        })
    }
}

/// `ask_user`: the turn waits on the person (their wait is person wait, the
/// program's CPU clock suspended) and gets their answer.
pub(crate) struct AskUser {
    pub person: Option<Rc<dyn Person>>,
    pub sink: Sink,
}

impl AskUser {
    #[must_use]
    pub(crate) fn spec() -> CapabilitySpec {
        builtin(
            ASK_USER,
            "Asks the person a question you cannot answer yourself and waits for their answer, which it returns as {answer}.",
            json!({
                "type": "object",
                "properties": {"question": {"type": "string", "description": "One clear question."}},
                "required": ["question"]
            }),
            Category::Read,
        )
    }
}

impl Implementation for AskUser {
    fn call(
        &self,
        args: Value,
        context: CallContext,
        _permit: Permit,
    ) -> LocalBoxFuture<'static, ToolReply> {
        let person = self.person.clone();
        let sink = self.sink.clone();
        Box::pin(async move {
            let question = args
                .get("question")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let Some(person) = person else {
                return Err(ToolFailure {
                    outcome: CallOutcome::ToolUnavailable,
                    ..failure(
                        "nobody_to_ask",
                        "ask_user: nobody can answer in this session (it runs headless); decide with what you have, or say what you need in your answer".into(),
                    )
                });
            };
            sink(AgentEvent::Question {
                question: question.clone(),
            });
            (context.held)(true);
            let answer = person.ask(question).await;
            (context.held)(false);
            match answer {
                Ok(answer) => Ok(json!({"answer": answer})),
                Err(why) => Err(failure("no_answer", format!("ask_user: {why}"))),
            }
        })
    }
}

/// `return_result`: sets the job's final answer. It cannot be blocked.
pub(crate) struct ReturnResult(pub Rc<RefCell<Option<Value>>>);

impl ReturnResult {
    #[must_use]
    pub(crate) fn spec() -> CapabilitySpec {
        builtin(
            RETURN_RESULT,
            "Sets the job's final answer (any JSON value). Then end your turn with a short message.",
            json!({
                "type": "object",
                "properties": {"value": {"description": "The answer."}},
                "required": ["value"]
            }),
            Category::Read,
        )
    }
}

impl Implementation for ReturnResult {
    fn call(
        &self,
        args: Value,
        _context: CallContext,
        _permit: Permit,
    ) -> LocalBoxFuture<'static, ToolReply> {
        let value = args.get("value").cloned().unwrap_or(Value::Null);
        *self.0.borrow_mut() = Some(value);
        Box::pin(async { Ok(json!({"ok": true, "note": "the job's answer is set"})) })
    }
}

/// `list_models`: the models the turn's provider offers.
pub(crate) struct ListModels(pub Rc<dyn Provider>);

impl ListModels {
    #[must_use]
    pub(crate) fn spec() -> CapabilitySpec {
        builtin(
            LIST_MODELS,
            "Lists the models this agent's provider offers, as [{id, display_name?}].",
            json!({"type": "object", "properties": {}}),
            Category::Read,
        )
    }
}

impl Implementation for ListModels {
    fn call(
        &self,
        _args: Value,
        _context: CallContext,
        _permit: Permit,
    ) -> LocalBoxFuture<'static, ToolReply> {
        let models = self.0.models();
        Box::pin(async move {
            match models.await {
                Ok(models) => Ok(serde_json::to_value(models).unwrap_or(Value::Null)),
                Err(error) => Err(failure(error.kind.code(), error.to_string())),
            }
        })
    }
}

/// `search_tools`: the belt's specs whose name or description has every
/// word of the query, for the tools the prompt lists by name only.
pub(crate) struct SearchTools(pub Rc<RefCell<Vec<CapabilitySpec>>>);

impl SearchTools {
    #[must_use]
    pub(crate) fn spec() -> CapabilitySpec {
        builtin(
            SEARCH_TOOLS,
            "Finds the job's tools whose name or description contains every word of `query` (case-insensitive; an empty query lists all), answering [{name, declaration}]: each tool as a TypeScript declaration, its description a doc comment.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100}
                },
                "required": ["query"]
            }),
            Category::Read,
        )
    }
}

impl Implementation for SearchTools {
    fn call(
        &self,
        args: Value,
        _context: CallContext,
        _permit: Permit,
    ) -> LocalBoxFuture<'static, ToolReply> {
        let query = args
            .get("query")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_lowercase();
        let limit = args
            .get("limit")
            .and_then(Value::as_u64)
            .and_then(|limit| usize::try_from(limit).ok())
            .unwrap_or(20);
        let words: Vec<&str> = query.split_whitespace().collect();
        let found: Vec<Value> = self
            .0
            .borrow()
            .iter()
            .filter(|spec| {
                let text = format!("{} {}", spec.name, spec.description).to_lowercase();
                words.iter().all(|word| text.contains(word))
            })
            .take(limit)
            .map(|spec| {
                json!({
                    "name": spec.name,
                    "declaration": kiln_types::declaration::declaration(
                        &spec.name,
                        &spec.description,
                        &spec.input_schema,
                        Some(&spec.result),
                    ),
                })
            })
            .collect();
        Box::pin(async move { Ok(Value::Array(found)) })
    }
}

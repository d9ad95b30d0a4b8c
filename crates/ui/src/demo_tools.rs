//! The page's built-in demo tools, served to programs until the capability
//! dispatcher replaces them: `echo`, `add`, `clock`, `wait` and `ask`, which
//! puts a yes/no question to the person at the page (the time it waits counts
//! as person wait).

use std::cell::RefCell;
use std::rc::Rc;

use futures::channel::oneshot;
use futures::future::LocalBoxFuture;
use kiln_host::{PageTools, PersonHold};
use kiln_types::protocol::CallRequest;
use kiln_types::tool_result::{CallOutcome, ToolFailure, ToolReply};
use leptos::prelude::{Set, WriteSignal};
use serde_json::{Value, json};

/// The longest `wait`, in milliseconds.
const MAX_WAIT_MS: u64 = 10_000;

/// The question a program is asking the person, shown on the page until they
/// answer it or the run ends.
#[derive(Clone)]
pub struct Asker {
    question: WriteSignal<Option<String>>,
    answer: Rc<RefCell<Option<oneshot::Sender<bool>>>>,
}

impl Asker {
    #[must_use]
    pub fn new(question: WriteSignal<Option<String>>) -> Self {
        Self {
            question,
            answer: Rc::default(),
        }
    }

    /// The person answered the open question.
    pub fn answer(&self, yes: bool) {
        self.question.set(None);
        if let Some(answer) = self.answer.borrow_mut().take() {
            let _ = answer.send(yes);
        }
    }

    /// The run ended: an open question has no one left to answer.
    pub fn withdraw(&self) {
        self.question.set(None);
        self.answer.borrow_mut().take();
    }

    async fn ask(&self, question: String, person: PersonHold) -> Result<bool, ToolFailure> {
        let (sender, receiver) = oneshot::channel();
        if self.answer.borrow().is_some() {
            return Err(ToolFailure {
                code: "person_busy".into(),
                message: "another question is already waiting for the person".into(),
                detail: None,
                outcome: CallOutcome::Refused,
            });
        }
        *self.answer.borrow_mut() = Some(sender);
        self.question.set(Some(question));
        person.held(true);
        let answer = receiver.await;
        person.held(false);
        answer.map_err(|_| ToolFailure {
            code: "withdrawn".into(),
            message: "the question was withdrawn before the person answered".into(),
            detail: None,
            outcome: CallOutcome::Withdrawn,
        })
    }
}

pub struct DemoTools {
    pub asker: Asker,
}

/// The demo tools' catalog entries.
#[must_use]
pub fn catalog() -> Value {
    json!([
        {"name": "echo", "description": "Returns its arguments unchanged.",
         "input_schema": {"type": "object"}},
        {"name": "add", "description": "Adds two numbers: {a, b} → a + b.",
         "input_schema": {"type": "object", "required": ["a", "b"],
                          "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}},
        {"name": "clock", "description": "The page's current time: {iso, epoch_ms}.",
         "input_schema": {"type": "object"}},
        {"name": "wait", "description": "Answers after {ms} milliseconds (at most 10000): {waited_ms}.",
         "input_schema": {"type": "object", "required": ["ms"],
                          "properties": {"ms": {"type": "integer", "minimum": 0, "maximum": 10000}}}},
        {"name": "ask", "description": "Asks the person at the page a yes/no {question} and waits for them: {answer}.",
         "input_schema": {"type": "object", "required": ["question"],
                          "properties": {"question": {"type": "string", "maxLength": 500}}}},
    ])
}

impl PageTools for DemoTools {
    fn catalog(&self) -> Value {
        catalog()
    }

    fn call(&self, call: CallRequest, person: PersonHold) -> LocalBoxFuture<'static, ToolReply> {
        let CallRequest { tool, args, .. } = call;
        let asker = self.asker.clone();
        Box::pin(async move {
            match tool.as_str() {
                "echo" => Ok(args),
                "ask" => match args.get("question").and_then(Value::as_str) {
                    Some(question) if !question.trim().is_empty() && question.len() <= 500 => {
                        let yes = asker.ask(question.to_owned(), person).await?;
                        Ok(json!({"answer": yes}))
                    }
                    _ => Err(invalid(
                        &tool,
                        format!(
                            "ask needs `question`, a non-empty string of at most 500 bytes; got {args}"
                        ),
                    )),
                },
                "add" => {
                    let a = args.get("a").and_then(Value::as_f64);
                    let b = args.get("b").and_then(Value::as_f64);
                    match (a, b) {
                        (Some(a), Some(b)) => Ok(json!(a + b)),
                        _ => Err(invalid(
                            &tool,
                            format!("add needs numbers `a` and `b`; got {args}"),
                        )),
                    }
                }
                "clock" => {
                    let now = js_sys::Date::new_0();
                    Ok(
                        json!({"iso": String::from(now.to_iso_string()), "epoch_ms": now.get_time()}),
                    )
                }
                "wait" => match args
                    .get("ms")
                    .and_then(Value::as_u64)
                    .filter(|ms| *ms <= MAX_WAIT_MS)
                {
                    Some(ms) => {
                        // At most 10,000 ms: exact as f64.
                        kiln_host::sleep_ms(ms as f64).await;
                        Ok(json!({"waited_ms": ms}))
                    }
                    None => Err(invalid(
                        &tool,
                        format!("wait needs `ms`, an integer from 0 to {MAX_WAIT_MS}; got {args}"),
                    )),
                },
                other => Err(ToolFailure {
                    code: "tool_unavailable".into(),
                    message: format!("the page serves no tool `{other}`"),
                    detail: None,
                    outcome: CallOutcome::ToolUnavailable,
                }),
            }
        })
    }
}

fn invalid(tool: &str, message: String) -> ToolFailure {
    ToolFailure {
        code: "invalid_arguments".into(),
        message,
        detail: Some(json!({"tool": tool})),
        outcome: CallOutcome::Error,
    }
}

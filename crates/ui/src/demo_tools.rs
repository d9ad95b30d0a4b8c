//! The page's own tools, offered to every run beside the built-ins and any
//! MCP servers the person adds: `echo`, `add`, `clock`, `wait` and `ask`,
//! which puts a yes/no question to the person at the page (the time it waits
//! counts as person wait). A run sends their specs ([`catalog`]) to the
//! runtime worker, whose ladder checks each call's arguments against their
//! schemas before the call crosses back here ([`call`]).

use std::cell::RefCell;
use std::rc::Rc;

use futures::channel::oneshot;
use kiln_types::permission::Category;
use kiln_types::tool_result::{CallOutcome, ToolFailure, ToolReply};
use leptos::prelude::{Set, WriteSignal};
use serde_json::{Value, json};

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

    async fn ask(&self, question: String, held: HeldSignal) -> Result<bool, ToolFailure> {
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
        held(true);
        let answer = receiver.await;
        held(false);
        answer.map_err(|_| ToolFailure {
            code: "withdrawn".into(),
            message: "the question was withdrawn before the person answered".into(),
            detail: None,
            outcome: CallOutcome::Withdrawn,
        })
    }
}

/// Which demo tool.
#[derive(Clone, Copy)]
enum Demo {
    Echo,
    Add,
    Clock,
    Wait,
    Ask,
}

/// Says whether a call waits on the person (`true` while it does).
pub type HeldSignal = Rc<dyn Fn(bool)>;

/// A demo tool as a run request declares it.
struct Spec {
    name: &'static str,
    description: &'static str,
    input_schema: Value,
    category: Category,
}

fn specs() -> Vec<(Demo, Spec)> {
    let spec =
        |name: &'static str, description: &'static str, input_schema: Value, category: Category| {
            Spec {
                name,
                description,
                input_schema,
                category,
            }
        };
    vec![
        (
            Demo::Echo,
            spec(
                "echo",
                "Returns its arguments unchanged.",
                json!({"type": "object"}),
                Category::Read,
            ),
        ),
        (
            Demo::Add,
            spec(
                "add",
                "Adds two numbers: {a, b} → a + b.",
                json!({"type": "object", "required": ["a", "b"], "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}),
                Category::Read,
            ),
        ),
        (
            Demo::Clock,
            spec(
                "clock",
                "The page's current time: {iso, epoch_ms}.",
                json!({"type": "object"}),
                Category::Read,
            ),
        ),
        (
            Demo::Wait,
            spec(
                "wait",
                "Answers after {ms} milliseconds (at most 10000): {waited_ms}.",
                json!({"type": "object", "required": ["ms"], "properties": {"ms": {"type": "integer", "minimum": 0, "maximum": 10000}}}),
                Category::Read,
            ),
        ),
        (
            Demo::Ask,
            spec(
                "ask",
                "Asks the person at the page a yes/no {question} and waits for them: {answer}.",
                json!({"type": "object", "required": ["question"], "properties": {"question": {"type": "string", "minLength": 1, "maxLength": 500}}}),
                Category::Read,
            ),
        ),
    ]
}

/// The tools as a run request names them: `{name: {description,
/// input_schema, category}}`.
#[must_use]
pub fn catalog() -> Value {
    let tools: serde_json::Map<String, Value> = specs()
        .into_iter()
        .map(|(_, spec)| {
            (
                spec.name.to_owned(),
                json!({
                    "description": spec.description,
                    "input_schema": spec.input_schema,
                    "category": spec.category.as_str(),
                }),
            )
        })
        .collect();
    Value::Object(tools)
}

/// Calls the page's tool `tool` with checked `args`; `held` says while it
/// waits on the person.
pub async fn call(tool: &str, args: Value, asker: &Asker, held: HeldSignal) -> ToolReply {
    let demo = specs()
        .into_iter()
        .find(|(_, spec)| spec.name == tool)
        .map(|(demo, _)| demo);
    match demo {
        Some(demo) => run(demo, args, asker, held).await,
        None => Err(ToolFailure {
            code: "tool_unavailable".into(),
            message: format!("the page has no tool `{tool}`"),
            detail: None,
            outcome: CallOutcome::ToolUnavailable,
        }),
    }
}

async fn run(demo: Demo, args: Value, asker: &Asker, held: HeldSignal) -> ToolReply {
    // The ladder validated `args` against the schema above.
    let number = |key: &str| args.get(key).and_then(Value::as_f64).unwrap_or_default();
    match demo {
        Demo::Echo => Ok(args),
        Demo::Add => Ok(json!(number("a") + number("b"))),
        Demo::Clock => {
            let now = js_sys::Date::new_0();
            Ok(json!({"iso": String::from(now.to_iso_string()), "epoch_ms": now.get_time()}))
        }
        Demo::Wait => {
            let ms = number("ms");
            crate::sleep_ms(ms.clamp(0.0, f64::from(u32::MAX)) as u32).await;
            Ok(json!({"waited_ms": ms}))
        }
        Demo::Ask => {
            let question = args
                .get("question")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let yes = asker.ask(question.to_owned(), held).await?;
            Ok(json!({"answer": yes}))
        }
    }
}

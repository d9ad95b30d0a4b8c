//! `tools.model` and `tools.classify`: a program's own model calls, to the
//! provider its run was given (`model` in the run request), on the run's
//! scope and through the ladder like every tool (category `external`: the
//! prompt leaves the device), under one model budget per run.
//!
//! - `model({prompt, system?, schema?, max_tokens?})` answers the reply's
//!   text. With `schema` (a JSON Schema) the model must call `respond` with
//!   its answer, which is checked against the schema and answered parsed; an
//!   answer that does not match goes back to the model once with the reason,
//!   and a second miss fails the call (`model_output_invalid`, naming what
//!   did not match). Text is never scraped for JSON.
//! - `classify({text, labels, instructions?})` answers one of `labels`, by the
//!   same forced call (`choose`, its `label` an enum of the labels).
//!
//! The budget ([`ModelBudget`]) counts every model request a run's calls make
//! (a repair is a request): at most `calls` requests, `tokens` tokens in and
//! out, `usd` dollars of priced models (the providers' price catalog, reserved
//! at the worst case before each request and settled after, as the run budget
//! does). A request the budget cannot cover is not sent: the call fails with
//! `model_budget_exhausted`, naming the limit and what was used.

use std::cell::Cell;
use std::rc::Rc;

use futures::future::LocalBoxFuture;
use kiln_capabilities::args::InputSchema;
use kiln_capabilities::{
    CallContext, CapabilitySpec, Category, Implementation, Permit, Registry, Source,
};
use kiln_providers::budget::{BudgetLimits, RunBudget, format_usd, group_thousands as thousands};
use kiln_providers::cost::{PriceCatalog, estimate_prompt_tokens};
use kiln_providers::{
    ChatOptions, ChatRequest, FinalMessage, Message, Provider, StopReason, ToolChoice, ToolDef,
};
use kiln_types::tool_result::{CallOutcome, ToolFailure, ToolReply};
use serde::Serialize;
use serde_json::{Value, json};

pub const MODEL: &str = "model";
pub const CLASSIFY: &str = "classify";

/// The forced tool a schema'd `model` call answers through.
const RESPOND: &str = "respond";
/// The forced tool `classify` answers through.
const CHOOSE: &str = "choose";
/// Requests per call for an answer that must match: the first, and one repair.
const ATTEMPTS: u32 = 2;
/// A reply the token budget leaves less room for than this is not asked for.
const MIN_REPLY_TOKENS: u64 = 16;
/// `max_tokens` when a call gives none, and the most it may ask for.
const DEFAULT_MAX_TOKENS: u32 = 1024;
const MAX_MAX_TOKENS: u32 = 4096;

/// What a run's model calls may use, over all of them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ModelBudget {
    /// Model requests (a schema'd call's repair is one more).
    pub calls: u32,
    /// Tokens in and out, as the provider reports them (estimated when it
    /// reports none).
    pub tokens: u64,
    /// Dollars, for models the price catalog knows.
    pub usd: f64,
}

impl ModelBudget {
    /// What a run gets when its request names no budget.
    pub const DEFAULT: Self = Self {
        calls: 10,
        tokens: 20_000,
        usd: 0.05,
    };
    /// The most a request may ask for; more is clamped to it.
    pub const CEILING: Self = Self {
        calls: 200,
        tokens: 1_000_000,
        usd: 5.0,
    };

    /// Reads `{calls?, tokens?, usd?}` over [`ModelBudget::DEFAULT`], each
    /// clamped to [`ModelBudget::CEILING`].
    ///
    /// # Errors
    ///
    /// A sentence naming the field that does not fit.
    pub fn from_value(value: &Value) -> Result<Self, String> {
        const SHAPE: &str = "{calls?: integer, tokens?: integer, usd?: number}";
        let Value::Object(fields) = value else {
            return Err(format!("must be an object {SHAPE}"));
        };
        let mut budget = Self::DEFAULT;
        for (name, value) in fields {
            match name.as_str() {
                "calls" => {
                    let calls = value
                        .as_u64()
                        .ok_or_else(|| format!("`calls` must be a whole number ≥ 0: {SHAPE}"))?;
                    budget.calls = u32::try_from(calls)
                        .unwrap_or(u32::MAX)
                        .min(Self::CEILING.calls);
                }
                "tokens" => {
                    let tokens = value
                        .as_u64()
                        .ok_or_else(|| format!("`tokens` must be a whole number ≥ 0: {SHAPE}"))?;
                    budget.tokens = tokens.min(Self::CEILING.tokens);
                }
                "usd" => {
                    let usd = value
                        .as_f64()
                        .filter(|usd| usd.is_finite() && *usd >= 0.0)
                        .ok_or_else(|| format!("`usd` must be a number ≥ 0: {SHAPE}"))?;
                    budget.usd = usd.min(Self::CEILING.usd);
                }
                other => {
                    return Err(format!(
                        "`{other}` is not a field of a model budget: {SHAPE}"
                    ));
                }
            }
        }
        Ok(budget)
    }

    /// `10 calls, 20,000 tokens, $0.05`.
    #[must_use]
    pub fn describe(&self) -> String {
        format!(
            "{} call{}, {} tokens, {}",
            self.calls,
            if self.calls == 1 { "" } else { "s" },
            thousands(self.tokens),
            format_usd(self.usd)
        )
    }
}

impl Default for ModelBudget {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// What a run's model calls share: the provider and model, the budget and
/// what was used of it.
struct Shared {
    provider: Rc<dyn Provider>,
    model: String,
    limits: ModelBudget,
    /// Holds the USD cap (reserve-then-commit at the price catalog's rates).
    usd: RunBudget,
    calls: Cell<u32>,
    /// Tokens the settled requests used.
    tokens: Cell<u64>,
    /// The most the requests in flight may still use (their prompt and
    /// reply room): calls made side by side share the budget, never each
    /// the whole of it.
    held_tokens: Cell<u64>,
}

/// `tools.model` and `tools.classify` for one run.
#[derive(Clone)]
pub struct ModelTools(Rc<Shared>);

impl ModelTools {
    /// The model tools of a run that asks `model` at `provider` under `limits`.
    #[must_use]
    pub fn new(provider: Rc<dyn Provider>, model: String, limits: ModelBudget) -> Self {
        let usd = RunBudget::new(
            BudgetLimits {
                max_usd: Some(limits.usd),
                // The token budget bounds an unpriced model's prompts.
                unpriced_token_ceiling: u64::MAX,
                ..BudgetLimits::default()
            },
            Rc::new(PriceCatalog::builtin()),
            Rc::new(kiln_http::SystemClock),
        );
        Self(Rc::new(Shared {
            provider,
            model,
            limits,
            usd,
            calls: Cell::new(0),
            tokens: Cell::new(0),
            held_tokens: Cell::new(0),
        }))
    }

    /// Mounts `model` and `classify` on `registry`.
    pub fn add_to(&self, registry: &mut Registry) {
        let [model, classify] = specs(&self.0.model, self.0.limits);
        // Ours, and their schemas compile (tested); a name the catalog
        // already claimed makes both claims unavailable, as it should.
        let _ = registry.add(model, Rc::new(ModelCall(self.0.clone())));
        let _ = registry.add(classify, Rc::new(ClassifyCall(self.0.clone())));
    }
}

/// The specs of `model` and `classify` for a run asking `model` under `budget`.
#[must_use]
pub(crate) fn specs(model: &str, budget: ModelBudget) -> [CapabilitySpec; 2] {
    let budget = budget.describe();
    [
        CapabilitySpec {
            name: MODEL.into(),
            description: format!(
                "Ask the run's model (`{model}`) one question. Answers the reply's text; with \
                 `schema` (a JSON Schema), the answer parsed and checked against it (one repair \
                 round, then `model_output_invalid`). The run's model budget: {budget} over all \
                 model and classify calls (`model_budget_exhausted` past it)."
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "prompt": {"type": "string", "minLength": 1, "maxLength": 200_000,
                               "description": "what to ask"},
                    "system": {"type": "string", "maxLength": 50_000,
                               "description": "instructions ahead of the prompt"},
                    "schema": {"type": "object",
                               "description": "a JSON Schema the answer must match"},
                    "max_tokens": {"type": "integer", "minimum": 1, "maximum": MAX_MAX_TOKENS,
                                   "description": "the longest reply (default 1024)"}
                },
                "required": ["prompt"],
                "additionalProperties": false
            }),
            category: Category::External,
            result: json!({}),
            source: Source::Builtin,
        },
        CapabilitySpec {
            name: CLASSIFY.into(),
            description: format!(
                "Classify `text` as exactly one of `labels` with the run's model (`{model}`); \
                 answers the label. Shares the run's model budget: {budget}."
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string", "minLength": 1, "maxLength": 200_000},
                    "labels": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 200},
                               "minItems": 2, "maxItems": 100, "uniqueItems": true},
                    "instructions": {"type": "string", "maxLength": 50_000,
                                     "description": "what the labels mean, how to choose"}
                },
                "required": ["text", "labels"],
                "additionalProperties": false
            }),
            category: Category::External,
            result: json!({"type": "string"}),
            source: Source::Builtin,
        },
    ]
}

fn failure(code: &str, message: String, detail: Option<Value>) -> ToolFailure {
    ToolFailure {
        code: code.into(),
        message,
        detail,
        outcome: CallOutcome::Error,
    }
}

fn exhausted(shared: &Shared, budget: &str, message: String) -> ToolFailure {
    let (calls, tokens) = (shared.calls.get(), shared.tokens.get());
    failure(
        "model_budget_exhausted",
        format!(
            "the run's model budget ({}) refuses this request: {message}",
            shared.limits.describe()
        ),
        Some(json!({
            "budget": budget,
            "used": {"calls": calls, "tokens": tokens, "usd": shared.usd.spend().spent_usd},
        })),
    )
}

/// Sends one request of a call, under the budget: refused before sending
/// when it cannot be covered; the reply's message, or why there is none.
async fn ask(
    shared: &Shared,
    messages: Vec<Message>,
    tool: Option<&ToolDef>,
    max_tokens: u32,
) -> Result<FinalMessage, ToolFailure> {
    let limits = shared.limits;
    if shared.calls.get() >= limits.calls {
        let message = match limits.calls {
            0 => "it allows no model requests".to_owned(),
            1 => "its only request was made".to_owned(),
            calls => format!("all {calls} of its requests were made"),
        };
        return Err(exhausted(shared, "calls", message));
    }
    let mut request = ChatRequest {
        messages,
        tools: tool.cloned().into_iter().collect(),
        options: ChatOptions {
            max_tokens,
            tool_choice: tool.map_or(ToolChoice::Auto, |tool| ToolChoice::Tool(tool.name.clone())),
            ..ChatOptions::new(shared.model.clone())
        },
    };
    let prompt = estimate_prompt_tokens(&request);
    let used = shared.tokens.get().saturating_add(shared.held_tokens.get());
    let left = limits.tokens.saturating_sub(used);
    if prompt.saturating_add(MIN_REPLY_TOKENS) > left {
        let held = match shared.held_tokens.get() {
            0 => String::new(),
            held => format!(" (~{} held by requests in flight)", thousands(held)),
        };
        return Err(exhausted(
            shared,
            "tokens",
            format!(
                "{} tokens used{held}, and this prompt is ~{} tokens",
                thousands(shared.tokens.get()),
                thousands(prompt)
            ),
        ));
    }
    // The reply may not take the run past its token budget.
    let room = u32::try_from(left - prompt).unwrap_or(u32::MAX);
    request.options.max_tokens = max_tokens.min(room);
    shared.calls.set(shared.calls.get() + 1);
    let hold = TokenHold {
        shared,
        tokens: prompt + u64::from(request.options.max_tokens),
    };
    shared
        .held_tokens
        .set(shared.held_tokens.get().saturating_add(hold.tokens));
    let stream = kiln_providers::turn(&*shared.provider, request, Some(shared.usd.clone()), None);
    let message = kiln_providers::final_message(stream)
        .await
        .map_err(|error| {
            failure(
                error.code(),
                format!("the provider did not answer: {error}"),
                None,
            )
        })?
        .ok_or_else(|| {
            failure(
                "stream",
                format!(
                    "the model `{}`'s reply ended without its message",
                    shared.model
                ),
                None,
            )
        })?;
    match message.stop.as_ref().map(|stop| &stop.reason) {
        Some(StopReason::Budget) => {
            // The USD cap refused it: nothing was sent, nothing used.
            shared.calls.set(shared.calls.get() - 1);
            let why = message
                .stop
                .as_ref()
                .and_then(|stop| stop.message.clone())
                .unwrap_or_default();
            return Err(exhausted(shared, "usd", why));
        }
        Some(StopReason::Aborted) => {
            return Err(failure(
                "aborted",
                "the model request was stopped".to_owned(),
                None,
            ));
        }
        _ => {}
    }
    // Each side the provider did not report is estimated: the prompt's
    // estimate, and four characters a token for what came back.
    let usage = message.usage;
    let input = match usage.input_tokens {
        0 => prompt,
        reported => reported,
    };
    let output = match usage.output_tokens {
        0 => {
            let written = message.text.len()
                + message
                    .tool_calls
                    .iter()
                    .map(|call| call.arguments.to_string().len())
                    .sum::<usize>();
            u64::try_from(written / 4).unwrap_or(u64::MAX)
        }
        reported => reported,
    };
    shared.tokens.set(
        shared
            .tokens
            .get()
            .saturating_add(input.saturating_add(output)),
    );
    drop(hold);
    Ok(message)
}

/// A request's hold on the token budget, given back when it settles (or is
/// dropped with its run).
struct TokenHold<'a> {
    shared: &'a Shared,
    tokens: u64,
}

impl Drop for TokenHold<'_> {
    fn drop(&mut self) {
        let held = &self.shared.held_tokens;
        held.set(held.get().saturating_sub(self.tokens));
    }
}

/// Asks until the model calls `tool` with arguments `check` accepts: at most
/// [`ATTEMPTS`] requests, each refusal sent back as the call's result.
async fn forced(
    shared: &Shared,
    mut messages: Vec<Message>,
    tool: ToolDef,
    max_tokens: u32,
    check: impl Fn(&Value) -> Result<Value, String>,
) -> ToolReply {
    let mut last = String::new();
    for attempt in 1..=ATTEMPTS {
        let message = match ask(shared, messages.clone(), Some(&tool), max_tokens).await {
            Ok(message) => message,
            // Arguments cut at `max_tokens` or not JSON: a miss, sent back once.
            Err(failure) if failure.code == "invalid_tool_call" && attempt < ATTEMPTS => {
                messages.push(Message::User {
                    text: format!(
                        "Your `{}` call did not read ({}); call it again, briefly.",
                        tool.name, failure.message
                    ),
                });
                last = failure.message;
                continue;
            }
            Err(mut failure) => {
                if !last.is_empty() {
                    // What the earlier answer got wrong is not lost with the refusal.
                    failure.detail = Some(match failure.detail.take() {
                        Some(Value::Object(mut detail)) => {
                            detail.insert("last_error".into(), Value::String(last));
                            Value::Object(detail)
                        }
                        _ => json!({"last_error": last}),
                    });
                }
                return Err(failure);
            }
        };
        let verdict = match message
            .tool_calls
            .iter()
            .find(|call| call.name == tool.name)
        {
            Some(call) => check(&call.arguments),
            None => Err(format!(
                "the model answered in text instead of calling `{}`",
                tool.name
            )),
        };
        let why = match verdict {
            Ok(value) => return Ok(value),
            Err(why) => why,
        };
        if attempt < ATTEMPTS {
            messages.push(Message::Assistant {
                text: message.text.clone(),
                tool_calls: message.tool_calls.clone(),
            });
            if message.tool_calls.is_empty() {
                messages.push(Message::User {
                    text: format!("Call `{}` with the answer; text is not read.", tool.name),
                });
            }
            for call in &message.tool_calls {
                messages.push(Message::Tool {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    content: json!({
                        "accepted": false,
                        "error": why,
                        "next": format!("call `{}` again with an answer that fits", tool.name),
                    })
                    .to_string(),
                    is_error: true,
                });
            }
        }
        last = why;
    }
    Err(failure(
        "model_output_invalid",
        format!(
            "the model `{}` gave no answer that fits in {ATTEMPTS} requests: {last}",
            shared.model
        ),
        None,
    ))
}

fn text_field<'a>(args: &'a Value, name: &str) -> Option<&'a str> {
    args.get(name).and_then(Value::as_str)
}

fn messages(system: Option<String>, user: String) -> Vec<Message> {
    let mut messages = Vec::new();
    if let Some(text) = system.filter(|text| !text.trim().is_empty()) {
        messages.push(Message::System { text });
    }
    messages.push(Message::User { text: user });
    messages
}

struct ModelCall(Rc<Shared>);

impl Implementation for ModelCall {
    fn call(&self, args: Value, _: CallContext, _: Permit) -> LocalBoxFuture<'static, ToolReply> {
        let shared = self.0.clone();
        Box::pin(async move {
            // The ladder checked the arguments against the spec.
            let prompt = text_field(&args, "prompt").unwrap_or_default().to_owned();
            let system = text_field(&args, "system").map(str::to_owned);
            let max_tokens = args
                .get("max_tokens")
                .and_then(Value::as_u64)
                .and_then(|tokens| u32::try_from(tokens).ok())
                .unwrap_or(DEFAULT_MAX_TOKENS)
                .min(MAX_MAX_TOKENS);
            let Some(schema) = args.get("schema") else {
                let message = ask(&shared, messages(system, prompt), None, max_tokens).await?;
                return Ok(Value::String(message.text));
            };
            let compiled = InputSchema::compile(schema).map_err(|why| {
                failure(
                    "invalid_arguments",
                    format!("`schema` is not a JSON Schema that compiles: {why}"),
                    None,
                )
            })?;
            // A tool's arguments are an object: any other answer is `value`.
            let whole = schema.get("type").and_then(Value::as_str) == Some("object");
            let parameters = if whole {
                schema.clone()
            } else {
                json!({"type": "object", "properties": {"value": schema},
                       "required": ["value"], "additionalProperties": false})
            };
            let tool = ToolDef {
                name: RESPOND.into(),
                description: "Give the answer, matching the schema.".into(),
                input_schema: parameters,
            };
            let system = Some(match system {
                Some(system) => format!("{system}\n\nAnswer by calling `{RESPOND}`."),
                None => {
                    format!("Answer by calling `{RESPOND}` with arguments matching its schema.")
                }
            });
            forced(
                &shared,
                messages(system, prompt),
                tool,
                max_tokens,
                |arguments| {
                    let value = if whole {
                        arguments.clone()
                    } else {
                        arguments
                            .get("value")
                            .cloned()
                            .ok_or("the answer has no `value`")?
                    };
                    compiled.validate_value("the answer", &value)?;
                    Ok(value)
                },
            )
            .await
        })
    }
}

struct ClassifyCall(Rc<Shared>);

impl Implementation for ClassifyCall {
    fn call(&self, args: Value, _: CallContext, _: Permit) -> LocalBoxFuture<'static, ToolReply> {
        let shared = self.0.clone();
        Box::pin(async move {
            let text = text_field(&args, "text").unwrap_or_default();
            let labels: Vec<String> = args
                .get("labels")
                .and_then(Value::as_array)
                .map(|labels| {
                    labels
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            let mut system =
                format!("Classify the text as exactly one of the labels, by calling `{CHOOSE}`.");
            if let Some(instructions) = text_field(&args, "instructions") {
                system = format!("{instructions}\n\n{system}");
            }
            let user = format!(
                "Labels: {}\n\nText:\n{text}",
                serde_json::to_string(&labels).unwrap_or_default()
            );
            let tool = ToolDef {
                name: CHOOSE.into(),
                description: "Choose the label.".into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {"label": {"type": "string", "enum": labels}},
                    "required": ["label"],
                    "additionalProperties": false
                }),
            };
            // Room for the call naming the longest label (a token can be one byte).
            let longest = labels.iter().map(String::len).max().unwrap_or(0);
            let room = u32::try_from(longest)
                .unwrap_or(u32::MAX)
                .saturating_add(48);
            forced(
                &shared,
                messages(Some(system), user),
                tool,
                room,
                |arguments| {
                    let said = arguments
                        .get("label")
                        .and_then(Value::as_str)
                        .ok_or("the answer has no `label` string")?;
                    label_of(said, &labels).map(Value::String)
                },
            )
            .await
        })
    }
}

/// The label `said` names: itself, or the one label it matches but for case
/// and surrounding space.
fn label_of(said: &str, labels: &[String]) -> Result<String, String> {
    if labels.iter().any(|label| label == said) {
        return Ok(said.to_owned());
    }
    let close: Vec<&String> = labels
        .iter()
        .filter(|label| label.trim().eq_ignore_ascii_case(said.trim()))
        .collect();
    match close.as_slice() {
        [one] => Ok((*one).clone()),
        _ => Err(format!(
            "`{said}` is not one of the labels {}",
            serde_json::to_string(labels).unwrap_or_default()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_read_over_the_default_and_clamp_to_the_ceiling() {
        assert_eq!(
            ModelBudget::from_value(&json!({})),
            Ok(ModelBudget::DEFAULT)
        );
        let read = ModelBudget::from_value(&json!({"calls": 3, "tokens": 9_000_000, "usd": 100}));
        assert_eq!(
            read,
            Ok(ModelBudget {
                calls: 3,
                tokens: ModelBudget::CEILING.tokens,
                usd: ModelBudget::CEILING.usd,
            })
        );
        for (bad, named) in [
            (json!({"calls": -1}), "`calls`"),
            (json!({"usd": "1"}), "`usd`"),
            (json!({"dollars": 1}), "`dollars`"),
            (json!([1]), "must be an object"),
        ] {
            let error = ModelBudget::from_value(&bad).unwrap_err();
            assert!(error.contains(named), "{bad}: {error}");
        }
        assert_eq!(
            ModelBudget::DEFAULT.describe(),
            "10 calls, 20,000 tokens, $0.05"
        );
    }

    #[test]
    fn the_specs_compile() {
        for spec in specs("m", ModelBudget::DEFAULT) {
            assert!(
                InputSchema::compile(&spec.input_schema).is_ok(),
                "{}",
                spec.name
            );
        }
    }

    #[test]
    fn a_label_is_matched_exactly_or_by_case_alone() {
        let labels = vec!["Bug".to_owned(), "feature".to_owned()];
        assert_eq!(label_of("Bug", &labels), Ok("Bug".to_owned()));
        assert_eq!(label_of(" bug ", &labels), Ok("Bug".to_owned()));
        assert!(
            label_of("question", &labels)
                .unwrap_err()
                .contains("not one of")
        );
    }
}

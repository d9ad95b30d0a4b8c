//! The CodePlanner (reference/004, "One generation service, built as a
//! mini-planner"): a model writes one code node by calling
//! `submit_code({title, summary, code, inputs, outputs})`. Validation runs
//! inside the tool ([`check_submission`]: the node's own checks, the
//! request's slots kept, the parse and every return path); a refusal goes
//! back as the call's result so the model resubmits, at most
//! [`MAX_ROUNDS`] times. Free text and code fences are never read: only an
//! accepted call counts. The result is the accepted submission or a typed
//! [`CodeFailure`], with [`Telemetry`] that keeps no instruction, sample or
//! code.

pub(crate) mod prompt;

use std::rc::Rc;

use kiln_http::Clock;
use kiln_providers::{ChatRequest, FinalMessage, Message, Provider, ToolDef};
use kiln_run::Stripper;
use kiln_types::cancel::AbortSignal;
use kiln_types::chat::{ChatOptions, StopReason, ToolChoice};
use kiln_types::node::{CodeNode, InputSlot, OutputSlot};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::node::{self, MAX_DESCRIPTION_CHARS};

/// `submit_code`.
pub const SUBMIT_CODE: &str = "submit_code";
/// Model turns one authoring may take (each a chance to submit).
pub const MAX_ROUNDS: u32 = 3;
/// The longest instruction, in characters.
pub(crate) const MAX_INSTRUCTION_CHARS: usize = 4_000;
/// The most sample values may take as JSON, in bytes.
pub(crate) const MAX_SAMPLE_BYTES: usize = 16 * 1024;

/// What a person asks for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodeRequest {
    pub instruction: String,
    /// The inputs already known (connected handles, an edit's slots): the
    /// submission must keep each, by name and type.
    #[serde(default)]
    pub inputs: Vec<InputSlot>,
    /// The output wanted, when the node was asked for from an input.
    #[serde(
        default,
        rename = "expectedOutput",
        alias = "expected_output",
        skip_serializing_if = "Option::is_none"
    )]
    pub expected: Option<OutputSlot>,
    /// The node as it is, for an edit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<CodeNode>,
    /// Sample values by input name: for the preview, and for the prompt only
    /// when `include_samples`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<Map<String, Value>>,
    #[serde(default, rename = "includeSamples", alias = "include_samples")]
    pub include_samples: bool,
}

impl CodeRequest {
    /// What is wrong with the request itself, before a model sees it.
    #[must_use]
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let length = self.instruction.trim().chars().count();
        if length == 0 {
            problems.push("the instruction is empty; say what the node should do".to_owned());
        } else if length > MAX_INSTRUCTION_CHARS {
            problems.push(format!(
                "the instruction is {length} characters; at most {MAX_INSTRUCTION_CHARS}"
            ));
        }
        if self.inputs.len() > node::MAX_SLOTS {
            problems.push(format!(
                "{} inputs; at most {}",
                self.inputs.len(),
                node::MAX_SLOTS
            ));
        }
        for slot in &self.inputs {
            if slot
                .description
                .as_ref()
                .is_some_and(|text| text.chars().count() > MAX_DESCRIPTION_CHARS)
            {
                problems.push(format!(
                    "the description of input `{}` is over {MAX_DESCRIPTION_CHARS} characters",
                    slot.name
                ));
            }
        }
        if let Some(samples) = &self.samples {
            let size = serde_json::to_string(samples).map_or(0, |text| text.len());
            if size > MAX_SAMPLE_BYTES {
                problems.push(format!(
                    "the samples are {size} bytes as JSON; at most {MAX_SAMPLE_BYTES}"
                ));
            }
        }
        problems
    }

    /// The messages exactly as the first request sends them: what a person
    /// is shown before anything goes.
    #[must_use]
    pub fn payload(&self) -> Vec<Message> {
        vec![
            Message::System {
                text: prompt::system(&kiln_types::manifest::manifest()),
            },
            Message::User {
                text: prompt::user(self),
            },
        ]
    }
}

/// An accepted `submit_code` call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Submission {
    pub title: String,
    pub summary: String,
    pub code: String,
    #[serde(default)]
    pub inputs: Vec<InputSlot>,
    pub outputs: Vec<OutputSlot>,
}

impl Submission {
    /// The node it makes.
    #[must_use]
    pub fn node(&self) -> CodeNode {
        CodeNode {
            title: self.title.clone(),
            code: self.code.clone(),
            inputs: self.inputs.clone(),
            outputs: self.outputs.clone(),
        }
    }
}

/// `submit_code`'s definition as the model is offered it.
#[must_use]
pub(crate) fn submit_code_tool() -> ToolDef {
    let slot = |extra: bool| {
        let mut properties = json!({
            "name": {"type": "string", "description": "a JavaScript identifier, camelCase"},
            "type": {"type": "string", "description": prompt::TYPES},
            "description": {"type": "string"}
        });
        if extra {
            properties["default"] = json!({"description": "used when no value comes"});
            properties["required"] = json!({"type": "boolean"});
        }
        json!({"type": "object", "properties": properties, "required": ["name", "type"], "additionalProperties": false})
    };
    ToolDef {
        name: SUBMIT_CODE.to_owned(),
        description: "Submit the code node: its title, a one-sentence summary, the body, and its typed inputs and outputs. It is checked at once; a refusal says what to fix.".to_owned(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "title": {"type": "string", "description": "imperative, a few words"},
                "summary": {"type": "string", "description": "one sentence"},
                "code": {"type": "string", "description": "the body of an async function returning {output: value, ...}"},
                "inputs": {"type": "array", "items": slot(true)},
                "outputs": {"type": "array", "items": slot(false), "minItems": 1}
            },
            "required": ["title", "summary", "code", "inputs", "outputs"],
            "additionalProperties": false
        }),
    }
}

/// Validates `submit_code`'s arguments against `request`: their shape, the
/// node's checks ([`node::check`]: names, sizes, the parse, every return
/// path), and the request's inputs and expected output kept.
///
/// # Errors
///
/// Every reason, each a sentence the model can act on.
pub async fn check_submission(
    args: &Value,
    request: &CodeRequest,
    stripper: Option<Rc<dyn Stripper>>,
) -> Result<Submission, Vec<String>> {
    let submission: Submission = serde_json::from_value(args.clone()).map_err(|error| {
        vec![format!(
            "the arguments are not {{title, summary, code, inputs: [{{name, type, description?, default?, required?}}], outputs: [{{name, type, description?}}]}}: {error}"
        )]
    })?;
    let mut reasons = node::check_typed(&submission.node(), stripper).await;
    let summary = submission.summary.trim().chars().count();
    if summary == 0 {
        reasons.push("the summary is empty; say in one sentence what the node does".to_owned());
    } else if summary > MAX_DESCRIPTION_CHARS {
        reasons.push(format!(
            "the summary is {summary} characters; at most {MAX_DESCRIPTION_CHARS}"
        ));
    }
    for wanted in &request.inputs {
        match submission
            .inputs
            .iter()
            .find(|slot| slot.name == wanted.name)
        {
            None => reasons.push(format!(
                "input `{}` ({}) is connected and must stay an input of the node",
                wanted.name, wanted.ty
            )),
            Some(slot) if slot.ty != wanted.ty => reasons.push(format!(
                "input `{}` must keep its type {}, not {}",
                wanted.name, wanted.ty, slot.ty
            )),
            Some(_) => {}
        }
    }
    if let Some(expected) = &request.expected {
        match submission
            .outputs
            .iter()
            .find(|slot| slot.name == expected.name)
        {
            None => reasons.push(format!(
                "the node must give the expected output `{}` ({})",
                expected.name, expected.ty
            )),
            Some(slot) if !slot.ty.fits(&expected.ty) => reasons.push(format!(
                "output `{}` must be {} (what it feeds takes that), not {}",
                expected.name, expected.ty, slot.ty
            )),
            Some(_) => {}
        }
    }
    if reasons.is_empty() {
        Ok(submission)
    } else {
        Err(reasons)
    }
}

/// Why no node came.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum CodeFailure {
    /// The provider could not be reached or refused (its message).
    ProviderUnavailable {
        message: String,
    },
    Aborted,
    /// Every round ended without an accepted call: the last reasons.
    NoValidSubmission {
        message: String,
        errors: Vec<String>,
    },
    /// The request itself, or something of ours.
    Internal {
        message: String,
    },
}

impl CodeFailure {
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::ProviderUnavailable { .. } => "provider_unavailable",
            Self::Aborted => "aborted",
            Self::NoValidSubmission { .. } => "no_valid_submission",
            Self::Internal { .. } => "internal",
        }
    }

    #[must_use]
    pub fn message(&self) -> String {
        match self {
            Self::ProviderUnavailable { message } | Self::Internal { message } => message.clone(),
            Self::NoValidSubmission { message, errors } => {
                if errors.is_empty() {
                    message.clone()
                } else {
                    format!("{message}: {}", errors.join("; "))
                }
            }
            Self::Aborted => "stopped before a node was accepted".to_owned(),
        }
    }
}

/// What authoring cost and how it went: never the instruction, the samples
/// or the code.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Telemetry {
    pub provider: String,
    pub model: String,
    pub rounds: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// From the price catalog; `None` for a model it has no price for.
    pub cost_usd: Option<f64>,
    pub duration_ms: f64,
    /// Submissions refused before the accepted one (0: the first passed).
    pub refused: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<&'static str>,
}

/// What [`author`] gives.
#[derive(Debug, Clone, Serialize)]
pub struct Authored {
    pub result: Result<Submission, CodeFailure>,
    pub telemetry: Telemetry,
}

/// The model to write code with: the code-model setting, else the chat
/// model, else the workspace default, skipping any the provider said cannot
/// call tools.
///
/// # Errors
///
/// None is left, naming what was skipped.
pub fn resolve_model(
    candidates: &[Option<&str>],
    cannot_call_tools: &[String],
) -> Result<String, String> {
    let mut skipped = Vec::new();
    for candidate in candidates.iter().flatten() {
        let name = candidate.trim();
        if name.is_empty() {
            continue;
        }
        if cannot_call_tools.iter().any(|model| model == name) {
            skipped.push(format!("`{name}`"));
            continue;
        }
        return Ok(name.to_owned());
    }
    Err(if skipped.is_empty() {
        "no model is set for writing code: choose a code model, a chat model or a workspace default"
            .to_owned()
    } else {
        format!(
            "no model that can call tools is set for writing code (skipped {}, which cannot): choose another",
            skipped.join(", ")
        )
    })
}

/// [`resolve_model`] over `candidates`, asking `provider` about each in
/// turn ([`Provider::calls_tools`]) until one it does not say cannot call
/// tools: only as many questions as it takes.
///
/// # Errors
///
/// As [`resolve_model`]: none is left, naming what was skipped.
pub async fn pick_model(
    provider: &dyn Provider,
    candidates: &[Option<&str>],
) -> Result<String, String> {
    let mut cannot = Vec::new();
    for candidate in candidates.iter().flatten() {
        let name = candidate.trim();
        if name.is_empty() {
            continue;
        }
        if provider.calls_tools(name).await == Some(false) {
            cannot.push(name.to_owned());
        } else {
            break;
        }
    }
    resolve_model(candidates, &cannot)
}

/// Writes a node for `request` with `provider`'s `model`: at most
/// [`MAX_ROUNDS`] model turns, each offered `submit_code` only (and told to
/// call it), the first accepted call the result. A body written in
/// TypeScript is checked as `stripper` (the runner's) will run it.
pub async fn author(
    provider: &dyn Provider,
    model: &str,
    request: &CodeRequest,
    stripper: Option<Rc<dyn Stripper>>,
    clock: &dyn Clock,
    cancel: &AbortSignal,
) -> Authored {
    let started = clock.now_ms();
    let mut telemetry = Telemetry {
        provider: provider.kind().as_str().to_owned(),
        model: model.to_owned(),
        ..Telemetry::default()
    };
    let prices = kiln_providers::cost::PriceCatalog::builtin();
    let price = prices.price(model);
    let mut cost = price.map(|_| 0.0);
    let result = rounds(
        provider,
        model,
        request,
        stripper,
        cancel,
        &mut telemetry,
        |usage| {
            if let (Some(price), Some(total)) = (price, cost.as_mut()) {
                *total += price.cost_usd(usage);
            }
        },
    )
    .await;
    telemetry.cost_usd = cost;
    telemetry.duration_ms = clock.now_ms() - started;
    telemetry.failure = result.as_ref().err().map(CodeFailure::code);
    Authored { result, telemetry }
}

async fn rounds(
    provider: &dyn Provider,
    model: &str,
    request: &CodeRequest,
    stripper: Option<Rc<dyn Stripper>>,
    cancel: &AbortSignal,
    telemetry: &mut Telemetry,
    mut spend: impl FnMut(kiln_types::chat::Usage),
) -> Result<Submission, CodeFailure> {
    let problems = request.problems();
    if !problems.is_empty() {
        return Err(CodeFailure::Internal {
            message: format!("the request cannot be sent: {}", problems.join("; ")),
        });
    }
    let mut messages = request.payload();
    let mut last: Vec<String> = Vec::new();
    let options = ChatOptions {
        max_tokens: 4096,
        tool_choice: ToolChoice::Tool(SUBMIT_CODE.to_owned()),
        ..ChatOptions::new(model)
    };
    for round in 1..=MAX_ROUNDS {
        if cancel.is_aborted() {
            return Err(CodeFailure::Aborted);
        }
        telemetry.rounds = round;
        let chat = ChatRequest {
            messages: messages.clone(),
            tools: vec![submit_code_tool()],
            options: options.clone(),
        };
        let message = match one_turn(provider, chat, cancel).await {
            Ok(message) => message,
            Err(failure) => return Err(failure),
        };
        telemetry.input_tokens += message.usage.input_tokens;
        telemetry.output_tokens += message.usage.output_tokens;
        spend(message.usage);
        if message
            .stop
            .as_ref()
            .is_some_and(|stop| stop.reason == StopReason::Aborted)
        {
            return Err(CodeFailure::Aborted);
        }
        messages.push(Message::Assistant {
            text: message.text.clone(),
            tool_calls: message.tool_calls.clone(),
        });
        if message.tool_calls.is_empty() {
            // Prose, with or without a code fence: never read.
            last = vec![
                "the model answered in text instead of calling `submit_code`; text is never read"
                    .to_owned(),
            ];
            telemetry.refused += 1;
            messages.push(Message::User {
                text: format!(
                    "Call `submit_code` with the node for: {}\nText and code blocks are not read.",
                    request.instruction.trim()
                ),
            });
            continue;
        }
        let mut accepted = None;
        for call in &message.tool_calls {
            let verdict = if accepted.is_some() {
                Err(vec!["a node was already accepted in this turn".to_owned()])
            } else if call.name == SUBMIT_CODE {
                check_submission(&call.arguments, request, stripper.clone()).await
            } else {
                Err(vec![format!(
                    "there is no tool `{}`; call `submit_code`",
                    call.name
                )])
            };
            let (content, is_error) = match verdict {
                Ok(submission) => {
                    accepted = Some(submission);
                    (json!({"accepted": true}).to_string(), false)
                }
                Err(reasons) => {
                    telemetry.refused += 1;
                    let content = json!({
                        "accepted": false,
                        "errors": reasons,
                        "round": round,
                        "rounds_left": MAX_ROUNDS - round,
                    })
                    .to_string();
                    last = reasons;
                    (content, true)
                }
            };
            messages.push(Message::Tool {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content,
                is_error,
            });
        }
        if let Some(submission) = accepted {
            return Ok(submission);
        }
    }
    Err(CodeFailure::NoValidSubmission {
        message: format!("no valid `submit_code` call in {MAX_ROUNDS} rounds"),
        errors: last,
    })
}

async fn one_turn(
    provider: &dyn Provider,
    chat: ChatRequest,
    cancel: &AbortSignal,
) -> Result<FinalMessage, CodeFailure> {
    let stream = kiln_providers::turn(provider, chat, None, Some(cancel.clone()));
    let done = kiln_providers::final_message(stream)
        .await
        .map_err(|error| {
            if cancel.is_aborted() {
                CodeFailure::Aborted
            } else {
                CodeFailure::ProviderUnavailable {
                    message: error.to_string(),
                }
            }
        })?;
    if cancel.is_aborted() {
        return Err(CodeFailure::Aborted);
    }
    done.ok_or_else(|| CodeFailure::ProviderUnavailable {
        message: "the provider's stream ended without its message".to_owned(),
    })
}

/// An authoring request as an entrance sends it (`kiln.authorCode`): the
/// [`CodeRequest`]'s fields with the provider to ask (`{stored: NAME}` or
/// `{kind, base_url, key?}`), the code-model setting (`model`) and the
/// chat's model (`chatModel`) for [`resolve_model`], and `code`: the body
/// of the node being edited, whose slots are the request's `inputs` and
/// `expectedOutput` (or the whole node as `current`).
#[derive(Debug, Clone)]
pub struct AuthorSpec {
    pub provider: Value,
    pub model: Option<String>,
    pub chat_model: Option<String>,
    pub request: CodeRequest,
}

impl AuthorSpec {
    /// Reads an authoring request.
    ///
    /// # Errors
    ///
    /// The first thing wrong with it, naming the field; a request a model
    /// could not be sent ([`CodeRequest::problems`]) with every reason.
    pub fn from_value(value: Value) -> Result<Self, kiln_run::RequestError> {
        use kiln_run::RequestError;
        let Value::Object(mut fields) = value else {
            return Err(RequestError(format!(
                "authoring takes one object {{instruction, inputs, expectedOutput, code, current, samples, includeSamples, provider, model, chatModel}}, not {}",
                kiln_types::words::json_type(&value)
            )));
        };
        let provider = fields
            .remove("provider")
            .filter(|value| !value.is_null())
            .ok_or_else(|| {
                RequestError(
                    "`provider` is missing: give {stored: NAME} or {kind, base_url, key?}".into(),
                )
            })?;
        let mut text = |name: &str| match fields.remove(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text)),
            Some(other) => Err(RequestError(format!(
                "`{name}` must be a string, not {}",
                kiln_types::words::json_type(&other)
            ))),
        };
        let model = text("model")?;
        let chat_model = text("chatModel")?;
        let code = text("code")?;
        let mut request =
            serde_json::from_value::<CodeRequest>(Value::Object(fields)).map_err(|error| {
                RequestError(format!("the authoring request is not valid: {error}"))
            })?;
        if let Some(code) = code {
            if request.current.is_some() {
                return Err(RequestError(
                    "give the node being edited as `code` or as `current`, not both".into(),
                ));
            }
            request.current = Some(CodeNode {
                title: String::new(),
                code,
                inputs: request.inputs.clone(),
                outputs: request.expected.iter().cloned().collect(),
            });
        }
        let problems = request.problems();
        if !problems.is_empty() {
            return Err(RequestError(problems.join("; ")));
        }
        Ok(Self {
            provider,
            model,
            chat_model,
            request,
        })
    }

    /// The model candidates in [`resolve_model`]'s order, the provider's
    /// kept default (`default`) last.
    #[must_use]
    pub fn candidates<'a>(&'a self, default: Option<&'a str>) -> [Option<&'a str>; 3] {
        [self.model.as_deref(), self.chat_model.as_deref(), default]
    }
}

/// What an entrance answers for one authoring: `{node, summary, telemetry}`
/// when a submission was accepted, else `{error: {code, message, errors?},
/// telemetry}`.
#[must_use]
pub fn answer(authored: &Authored) -> Value {
    let telemetry = serde_json::to_value(&authored.telemetry).unwrap_or_default();
    match &authored.result {
        Ok(submission) => json!({
            "node": submission.node(),
            "summary": submission.summary,
            "telemetry": telemetry,
        }),
        Err(failure) => {
            let mut error = serde_json::to_value(failure).unwrap_or_default();
            if let Some(object) = error.as_object_mut() {
                object.insert("message".into(), Value::String(failure.message()));
            }
            json!({"error": error, "telemetry": telemetry})
        }
    }
}

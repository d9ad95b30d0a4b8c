//! The chat turn loop: a conversation streamed from a provider under the
//! run's budget, the model's tool calls walking the same ladder as a
//! program's (`Dispatcher::call`), their results going back to the model
//! until it answers without one. Every step is an event for the caller's
//! sink; the loop itself writes nowhere. Its one caller is `kiln eval
//! codeact`, which runs it beside the CodeAct loop with the same tools
//! offered directly.

use std::rc::Rc;

use futures::StreamExt as _;
use kiln_capabilities::{Dispatcher, HeldSignal};
use kiln_providers::budget::RunBudget;
use kiln_providers::{
    AbortSignal, ChatOptions, ChatRequest, Event, FinalMessage, Message, Provider, ProviderError,
    Stop, ToolCall, ToolDef,
};
use kiln_types::protocol::CallRequest;
use serde_json::Value;

/// A conversation to continue: the messages so far, the tools offered, the
/// options of every turn.
#[derive(Debug, Clone)]
pub struct Conversation {
    pub messages: Vec<Message>,
    pub tools: Vec<ToolDef>,
    pub options: ChatOptions,
}

/// One step of a conversation, as it happens.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatEvent {
    /// An event of the provider's stream (text deltas, tool calls, usage,
    /// the stop, the turn's final message).
    Stream(Event),
    /// A tool call the model made, answered by the ladder.
    ToolResult {
        call: ToolCall,
        /// The result's JSON text, or `{"error": {code, message}}`.
        content: String,
        is_error: bool,
    },
}

/// How a conversation ended.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatEnd {
    /// The model answered without a tool call.
    Answered(FinalMessage),
    /// Kiln stopped it: a budget, the deadline, the turn count, the caller.
    Stopped(Stop),
    /// The provider failed.
    Failed(ProviderError),
    /// The stream ended without its final message.
    Incomplete,
}

/// A conversation's end and its messages, the model's and the tools' included.
#[derive(Debug, Clone)]
pub struct ChatOutcome {
    pub end: ChatEnd,
    pub messages: Vec<Message>,
}

/// The tool definitions a model is offered for `names`, from the run's
/// catalog (each entry's name, description and input schema).
#[must_use]
pub fn tool_defs(catalog: &Value, names: &[String]) -> Vec<ToolDef> {
    catalog
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|entry| {
            let name = entry.get("name")?.as_str()?;
            names
                .iter()
                .any(|offered| offered == name)
                .then(|| ToolDef {
                    name: name.to_owned(),
                    description: entry
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    input_schema: entry
                        .get("input_schema")
                        .cloned()
                        .unwrap_or_else(|| serde_json::json!({"type": "object"})),
                })
        })
        .collect()
}

/// Converses until the model answers without a tool call, Kiln stops it, or
/// the provider fails. `sink` sees every event as it comes.
pub async fn converse(
    provider: &dyn Provider,
    conversation: Conversation,
    budget: RunBudget,
    dispatcher: &Dispatcher,
    abort: Option<AbortSignal>,
    sink: &mut dyn FnMut(ChatEvent),
) -> ChatOutcome {
    let Conversation {
        mut messages,
        tools,
        options,
    } = conversation;
    let mut call_number = 0_u32;
    loop {
        let request = ChatRequest {
            messages: messages.clone(),
            tools: tools.clone(),
            options: options.clone(),
        };
        let mut stream =
            kiln_providers::turn(provider, request, Some(budget.clone()), abort.clone());
        let mut done = None;
        while let Some(item) = stream.next().await {
            match item {
                Ok(Event::Done { message }) => {
                    sink(ChatEvent::Stream(Event::Done {
                        message: message.clone(),
                    }));
                    done = Some(message);
                }
                Ok(event) => sink(ChatEvent::Stream(event)),
                Err(error) => {
                    return ChatOutcome {
                        end: ChatEnd::Failed(error),
                        messages,
                    };
                }
            }
        }
        let Some(message) = done else {
            return ChatOutcome {
                end: ChatEnd::Incomplete,
                messages,
            };
        };
        if let Some(stop) = message.stop.clone().filter(|stop| stop.reason.is_refusal()) {
            return ChatOutcome {
                end: ChatEnd::Stopped(stop),
                messages,
            };
        }
        messages.push(Message::Assistant {
            text: message.text.clone(),
            tool_calls: message.tool_calls.clone(),
        });
        if message.tool_calls.is_empty() {
            return ChatOutcome {
                end: ChatEnd::Answered(message),
                messages,
            };
        }
        for call in &message.tool_calls {
            call_number += 1;
            let held: HeldSignal = Rc::new(|_| {});
            let reply = dispatcher
                .call(
                    CallRequest {
                        call_number,
                        tool: call.name.clone(),
                        args: call.arguments.clone(),
                    },
                    held,
                )
                .await;
            let (content, is_error) = match reply {
                Ok(value) => (value.to_string(), false),
                Err(failure) => (
                    serde_json::json!({"error": {"code": failure.code, "message": failure.message}})
                        .to_string(),
                    true,
                ),
            };
            sink(ChatEvent::ToolResult {
                call: call.clone(),
                content: content.clone(),
                is_error,
            });
            messages.push(Message::Tool {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content,
                is_error,
            });
        }
    }
}

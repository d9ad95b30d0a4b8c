//! A provider that answers each turn with the next reply of a script, for
//! testing what drives a provider (the agent loop, the eval harness's
//! mechanics) in milliseconds. It keeps every request it was sent. Real wire
//! formats are tested against aimock and a real local model instead.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use futures::StreamExt as _;
use futures::future::LocalBoxFuture;
use futures::stream;

use crate::{
    ChatRequest, ErrorKind, Event, EventStream, FinalMessage, ModelInfo, Provider, ProviderError,
    ProviderKind, Stop, StopReason, ToolCall, Usage,
};

/// One scripted model turn.
#[derive(Clone)]
pub enum Reply {
    /// A message: text and tool calls, with this usage.
    Message {
        text: String,
        tool_calls: Vec<ToolCall>,
        usage: Usage,
    },
    /// The turn fails with this kind of error.
    Fail { kind: ErrorKind, message: String },
    /// The reply depends on the request (a summarizer, a tool-result echo).
    Computed(Rc<dyn Fn(&ChatRequest) -> Reply>),
}

impl Reply {
    /// A plain text answer.
    #[must_use]
    pub fn text(text: &str) -> Self {
        Self::Message {
            text: text.into(),
            tool_calls: Vec::new(),
            usage: Usage {
                input_tokens: 100,
                output_tokens: 10,
            },
        }
    }

    /// One tool call, `name(arguments)`, with id `call_<n>` where n counts
    /// the script's calls.
    #[must_use]
    pub fn call(name: &str, arguments: serde_json::Value) -> Self {
        Self::Message {
            text: String::new(),
            tool_calls: vec![ToolCall {
                id: String::new(),
                name: name.into(),
                arguments,
            }],
            usage: Usage {
                input_tokens: 100,
                output_tokens: 20,
            },
        }
    }

    /// An `execute_code` call with `code`.
    #[must_use]
    pub fn code(code: &str) -> Self {
        Self::call("execute_code", serde_json::json!({ "code": code }))
    }
}

/// The scripted provider. When the script runs out, a turn fails with a
/// `bad_request` error saying so.
pub struct Scripted {
    replies: RefCell<VecDeque<Reply>>,
    requests: RefCell<Vec<ChatRequest>>,
    calls: RefCell<u32>,
    /// The context it says its model holds, like Kiln's own small model's.
    context: Option<usize>,
}

impl Scripted {
    #[must_use]
    pub fn new(replies: impl IntoIterator<Item = Reply>) -> Rc<Self> {
        Rc::new(Self {
            replies: RefCell::new(replies.into_iter().collect()),
            requests: RefCell::default(),
            calls: RefCell::new(0),
            context: None,
        })
    }

    /// A scripted provider that says its model holds `context_tokens` at
    /// once, as Kiln's own small model does.
    #[must_use]
    pub fn with_context(
        replies: impl IntoIterator<Item = Reply>,
        context_tokens: usize,
    ) -> Rc<Self> {
        Rc::new(Self {
            replies: RefCell::new(replies.into_iter().collect()),
            requests: RefCell::default(),
            calls: RefCell::new(0),
            context: Some(context_tokens),
        })
    }

    /// Every request sent so far, in order.
    #[must_use]
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.requests.borrow().clone()
    }

    /// Replies not used yet.
    #[must_use]
    pub fn left(&self) -> usize {
        self.replies.borrow().len()
    }

    fn error(&self, kind: ErrorKind, message: String) -> ProviderError {
        ProviderError {
            kind,
            provider: ProviderKind::OpenAi,
            url: "scripted:".into(),
            model: None,
            status: None,
            message,
            hint: None,
        }
    }
}

impl Provider for Scripted {
    fn kind(&self) -> ProviderKind {
        ProviderKind::OpenAi
    }

    fn base_url(&self) -> &str {
        "scripted:"
    }

    fn context_tokens(&self, _model: &str) -> Option<usize> {
        self.context
    }

    fn stream(&self, request: ChatRequest) -> EventStream {
        self.requests.borrow_mut().push(request.clone());
        let mut reply = self.replies.borrow_mut().pop_front();
        while let Some(Reply::Computed(compute)) = &reply {
            reply = Some(compute(&request));
        }
        let items: Vec<Result<Event, ProviderError>> = match reply {
            None => vec![Err(self.error(
                ErrorKind::BadRequest,
                "the scripted provider's script is over".into(),
            ))],
            Some(Reply::Fail { kind, message }) => vec![Err(self.error(kind, message))],
            Some(Reply::Computed(_)) => Vec::new(),
            Some(Reply::Message {
                text,
                tool_calls,
                usage,
            }) => {
                let mut items = Vec::new();
                if !text.is_empty() {
                    items.push(Ok(Event::TextDelta { text: text.clone() }));
                }
                let mut calls = Vec::new();
                for (index, mut call) in tool_calls.into_iter().enumerate() {
                    if call.id.is_empty() {
                        let mut count = self.calls.borrow_mut();
                        *count += 1;
                        call.id = format!("call_{count}");
                    }
                    items.push(Ok(Event::ToolCallStart {
                        index,
                        id: call.id.clone(),
                        name: call.name.clone(),
                    }));
                    items.push(Ok(Event::ToolCallEnd {
                        index,
                        call: call.clone(),
                    }));
                    calls.push(call);
                }
                let stop = Stop {
                    reason: if calls.is_empty() {
                        StopReason::EndTurn
                    } else {
                        StopReason::ToolUse
                    },
                    message: None,
                };
                items.push(Ok(Event::Usage { usage }));
                items.push(Ok(Event::Stop { stop: stop.clone() }));
                items.push(Ok(Event::Done {
                    message: FinalMessage {
                        text,
                        tool_calls: calls,
                        usage,
                        stop: Some(stop),
                        model: Some(request.options.model.clone()),
                    },
                }));
                items
            }
        };
        stream::iter(items).boxed_local()
    }

    fn models(&self) -> LocalBoxFuture<'static, Result<Vec<ModelInfo>, ProviderError>> {
        Box::pin(async {
            Ok(vec![ModelInfo {
                id: "scripted".into(),
                display_name: Some("Scripted replies".into()),
            }])
        })
    }
}

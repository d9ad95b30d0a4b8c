//! The seams that reach back to the page: its tools ([`PageTools`]), its
//! `approve` callback ([`PageApprover`]) and its `ask` callback
//! ([`PagePerson`]), each a message answered by the page.

use super::*;

/// A run's page tools: each call crosses to the page and back.
pub(super) struct PageTools {
    pub(super) runtime: Rc<Runtime>,
    pub(super) run: u64,
}

impl ToolBridge for PageTools {
    fn implementation(&self, _name: &str) -> Option<Rc<dyn Implementation>> {
        Some(Rc::new(PageTool {
            runtime: self.runtime.clone(),
            run: self.run,
        }))
    }
}

pub(super) struct PageTool {
    pub(super) runtime: Rc<Runtime>,
    pub(super) run: u64,
}

impl Implementation for PageTool {
    fn call(
        &self,
        args: Value,
        context: CallContext,
        _permit: Permit,
    ) -> LocalBoxFuture<'static, ToolReply> {
        let (reply, replied) = oneshot::channel();
        let number = self.runtime.next_call.get() + 1;
        self.runtime.next_call.set(number);
        let key = (self.run, number);
        self.runtime.calls.borrow_mut().insert(
            key,
            PendingCall {
                reply,
                held: context.held.clone(),
            },
        );
        post(&FromRuntime::ToolCall {
            id: self.run,
            call_number: context.call_number,
            key: number,
            tool: context.tool.clone(),
            args,
        });
        let tool = context.tool;
        let forget = Forget {
            runtime: self.runtime.clone(),
            key,
        };
        Box::pin(async move {
            let _forget = forget;
            replied.await.unwrap_or_else(|_| {
                Err(ToolFailure {
                    code: "tool_error".into(),
                    message: format!("{tool} got no answer: the page went away"),
                    detail: None,
                    outcome: CallOutcome::OutcomeUnknown,
                })
            })
        })
    }
}

/// Drops a page tool call's entry when its call is dropped (its run ended):
/// a reply that comes later finds nothing to answer.
pub(super) struct Forget {
    pub(super) runtime: Rc<Runtime>,
    pub(super) key: (u64, u64),
}

impl Drop for Forget {
    fn drop(&mut self) {
        if let Ok(mut calls) = self.runtime.calls.try_borrow_mut() {
            calls.remove(&self.key);
        }
    }
}

/// An agent turn's `ask_user`, answered on the page.
pub(super) struct PagePerson {
    pub(super) runtime: Rc<Runtime>,
    pub(super) run: u64,
}

impl Person for PagePerson {
    fn ask(&self, question: String) -> LocalBoxFuture<'static, Result<String, String>> {
        let ask = self.runtime.next_ask.get() + 1;
        self.runtime.next_ask.set(ask);
        let (answer, answered) = oneshot::channel();
        self.runtime
            .questions
            .borrow_mut()
            .insert(ask, (self.run, answer));
        post(&FromRuntime::Question {
            id: self.run,
            ask,
            question,
        });
        Box::pin(async move {
            answered
                .await
                .unwrap_or_else(|_| Err("the page went away before the person answered".into()))
        })
    }
}

/// A run's `approve` callback, on the page.
pub(super) struct PageApprover {
    pub(super) runtime: Rc<Runtime>,
    pub(super) run: u64,
}

impl Approver for PageApprover {
    fn ask(&self, request: ApprovalRequest) -> LocalBoxFuture<'static, Answer> {
        let ask = self.runtime.next_ask.get() + 1;
        self.runtime.next_ask.set(ask);
        let (answer, answered) = oneshot::channel();
        self.runtime.asks.borrow_mut().insert(ask, answer);
        post(&FromRuntime::Approve {
            id: self.run,
            ask,
            request,
        });
        Box::pin(async move {
            answered.await.unwrap_or(Answer::Unavailable {
                reason: "the page went away before it answered".into(),
            })
        })
    }
}

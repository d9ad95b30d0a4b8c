//! What an exchange asks of its page while the runtime worker serves it.

use std::rc::Rc;

use futures::future::LocalBoxFuture;
use kiln_types::permission::{Answer, ApprovalRequest};
use kiln_types::runtime::Told;
use kiln_types::tool_result::ToolReply;
use serde_json::Value;

/// One call of a page tool, as a program made it.
#[derive(Debug, Clone, PartialEq)]
pub struct PageCall {
    /// The call's number in its run (the page tool's `ctx.callNumber`).
    pub call_number: u32,
    pub tool: String,
    pub args: Value,
}

/// What a run, an agent turn or a node asks of the page that sent it: its
/// own tools' calls, the person's approval, an agent's `ask_user`. The app
/// answers with its tools and cards, the page API with the page's functions.
pub trait PageSide {
    /// Calls the page's tool; `held(true)` while the call waits on a person,
    /// `held(false)` when it no longer does.
    fn call(&self, call: PageCall, held: Rc<dyn Fn(bool)>) -> LocalBoxFuture<'static, ToolReply>;

    /// Whether someone answers approvals here: without, a call the ladder
    /// would ask about is decided as a run nobody watches.
    fn can_approve(&self) -> bool {
        true
    }

    /// Asks the person about a call (the approval card's content, secrets
    /// redacted).
    fn approve(&self, request: ApprovalRequest) -> LocalBoxFuture<'static, Answer>;

    /// Whether someone answers an agent's `ask_user` here.
    fn can_ask(&self) -> bool {
        false
    }

    /// Puts an agent's `ask_user` question to the person: their answer, or
    /// why there is none.
    fn ask(&self, _question: String) -> LocalBoxFuture<'static, Told> {
        Box::pin(async {
            Told::Unavailable {
                reason: "nobody answers questions here".into(),
            }
        })
    }
}

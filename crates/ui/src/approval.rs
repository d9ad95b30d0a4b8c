//! The page's approver: when the ladder asks, an approval card shows the
//! tool, its category, where it comes from, why it is asked and its arguments
//! (secrets redacted), with Approve, Deny and Allow for this session. Calls
//! that ask at the same time wait in line, one card at a time, and the card
//! says how many wait behind it.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use futures::channel::oneshot;
use futures::future::LocalBoxFuture;
use kiln_types::permission::{Answer, ApprovalRequest, AskReason};
use leptos::prelude::{Set, WriteSignal};

type Pending = VecDeque<(ApprovalRequest, oneshot::Sender<Answer>)>;

/// Puts the ladder's questions on the page.
#[derive(Clone)]
pub struct PageApprover {
    shown: WriteSignal<Option<ApprovalRequest>>,
    /// How many more calls wait behind the card on show.
    behind: WriteSignal<usize>,
    pending: Rc<RefCell<Pending>>,
}

impl PageApprover {
    #[must_use]
    pub fn new(shown: WriteSignal<Option<ApprovalRequest>>, behind: WriteSignal<usize>) -> Self {
        Self {
            shown,
            behind,
            pending: Rc::default(),
        }
    }

    fn show_next(&self) {
        let (next, count) = {
            let pending = self.pending.borrow();
            let next = pending.front().map(|(request, _)| request.clone());
            (next, pending.len())
        };
        self.behind.set(count.saturating_sub(1));
        self.shown.set(next);
    }

    /// The person answered the card of call `call_number`; an answer for a
    /// card no longer on show is ignored.
    pub fn answer(&self, call_number: u32, answer: Answer) {
        let on_show = self
            .pending
            .borrow()
            .front()
            .is_some_and(|(request, _)| request.call_number == call_number);
        if !on_show {
            return;
        }
        let Some((request, sender)) = self.pending.borrow_mut().pop_front() else {
            return;
        };
        let _ = sender.send(answer.clone());
        // "Allow for this session" also answers the calls of that tool
        // waiting in line — except under the auto-run brake, which asks for
        // every call of a code-execution tool, one card each.
        if answer == Answer::AllowForSession && request.reason != AskReason::Brake {
            let mut pending = self.pending.borrow_mut();
            let (same, rest): (Pending, Pending) = pending
                .drain(..)
                .partition(|(waiting, _)| waiting.tool == request.tool);
            *pending = rest;
            for (_, sender) in same {
                let _ = sender.send(Answer::AllowForSession);
            }
        }
        self.show_next();
    }

    /// The run ended: the open questions have nobody left to answer.
    pub fn withdraw(&self) {
        self.pending.borrow_mut().clear();
        self.behind.set(0);
        self.shown.set(None);
    }
}

impl PageApprover {
    /// Puts `request` in line; resolves to the person's answer.
    pub fn ask(&self, request: ApprovalRequest) -> LocalBoxFuture<'static, Answer> {
        let (sender, receiver) = oneshot::channel();
        self.pending.borrow_mut().push_back((request, sender));
        let waiting = self.pending.borrow().len();
        if waiting == 1 {
            self.show_next();
        } else {
            self.behind.set(waiting - 1);
        }
        Box::pin(async move {
            receiver.await.unwrap_or_else(|_| Answer::Unavailable {
                reason: "the question was withdrawn before the person answered".into(),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt as _;
    use kiln_types::permission::Category;
    use leptos::prelude::signal;

    fn request(call_number: u32, reason: AskReason) -> ApprovalRequest {
        ApprovalRequest {
            call_number,
            tool: "run_code".into(),
            category: Category::Execute,
            module: "page".into(),
            description: String::new(),
            args: serde_json::json!({}),
            reason,
            host: "page".into(),
        }
    }

    #[test]
    fn allow_for_this_session_answers_the_waiting_calls_of_that_tool_except_under_the_brake() {
        for (reason, answered_at_once) in [(AskReason::Mode, 3), (AskReason::Brake, 1)] {
            let (_, shown) = signal(None);
            let (_, behind) = signal(0);
            let approver = PageApprover::new(shown, behind);
            let mut answers: Vec<_> = (1..=3).map(|n| approver.ask(request(n, reason))).collect();
            approver.answer(1, Answer::AllowForSession);
            let settled = answers
                .iter_mut()
                .map(|answer| answer.as_mut().now_or_never())
                .filter(Option::is_some)
                .count();
            assert_eq!(settled, answered_at_once, "{reason:?}");
        }
    }
}

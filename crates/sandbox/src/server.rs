//! The sandbox protocol's serving side, written once for every transport:
//! stdio in a native sandbox process, `postMessage` in the sandbox worker.
//!
//! A [`Server`] reads each [`ToSandbox`] message: a call's reply or its
//! "held on a person" notice goes to the run waiting on it, a run is handed
//! back to the caller as an [`Order`] (which context it runs in, and how its
//! budgets are enforced, are the transport's), and what does not read is
//! refused by name. During a run, [`Server::host`] is its [`ToolHost`]: the
//! guest's calls wait in an outbox and go out all at once when the guest goes
//! idle ([`FromSandbox::Idle`]), and each waits for its reply. What the guest
//! prints goes out as it prints ([`FromSandbox::Console`], a line at a time,
//! bounded by the console budget: see `console`), so a host that has to end
//! the run by ending the worker or process still has it; the report carries
//! the whole console again, and a host that gets the report reports that.
//! When the run answers, [`Server::report`] gives up the calls it left
//! waiting and sends the report.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use futures::channel::oneshot;
use futures::future::LocalBoxFuture;
use kiln_types::protocol::{CallRequest, FromSandbox, ToSandbox, decode};
use kiln_types::tool_result::Warning;
use kiln_types::tool_result::{CallOutcome, ToolFailure, ToolReply};
use kiln_types::{ConsoleLine, Progress, RunLimits, RunReport};

use crate::catalog::Admission;
use crate::clock::{IdleState, PersonSignal};
use crate::tools::{ToolCall, ToolHost};

/// How a server's messages reach its host.
pub trait Transport {
    /// Sends one message; a host that went away takes none.
    fn send(&self, message: &FromSandbox);
}

/// A run the host asked for, its catalog admitted.
pub struct Order {
    pub run_id: u64,
    pub code: String,
    /// Clamped to the ceilings.
    pub limits: RunLimits,
    pub admission: Admission,
}

/// A call of the run going on, waiting for the host's reply.
struct Pending {
    reply: oneshot::Sender<ToolReply>,
    person: PersonSignal,
}

/// The serving side of the sandbox protocol over one transport.
pub struct Server {
    transport: Rc<dyn Transport>,
    /// Calls waiting for the host's reply, by (run, call number).
    pending: RefCell<HashMap<(u64, u32), Pending>>,
    /// Calls made since the guest last went idle, sent all at once when it does.
    outbox: RefCell<Vec<CallRequest>>,
}

impl Server {
    #[must_use]
    pub fn new(transport: Rc<dyn Transport>) -> Rc<Self> {
        Rc::new(Self {
            transport,
            pending: RefCell::default(),
            outbox: RefCell::default(),
        })
    }

    /// Sends `message` to the host.
    pub fn send(&self, message: &FromSandbox) {
        self.transport.send(message);
    }

    /// Reads one message from the host: a reply or a hold goes to the call
    /// waiting on it; a run whose catalog admits is returned; a message that
    /// does not read, or a catalog that does not admit, is refused to the host
    /// by name.
    pub fn receive(&self, text: &str) -> Option<Order> {
        match decode::<ToSandbox>(text) {
            Ok(ToSandbox::Run {
                run_id,
                code,
                limits,
                catalog,
            }) => self.admit(run_id, code, limits, &catalog),
            Ok(ToSandbox::ToolReply {
                run_id,
                call_number,
                reply,
            }) => {
                let waiting = self.pending.borrow_mut().remove(&(run_id, call_number));
                if let Some(waiting) = waiting {
                    // The run may have ended meanwhile; then nobody is listening.
                    let _ = waiting.reply.send(reply);
                }
                None
            }
            Ok(ToSandbox::ToolHeld {
                run_id,
                call_number,
                held,
            }) => {
                if let Some(waiting) = self.pending.borrow().get(&(run_id, call_number)) {
                    waiting.person.held(held);
                }
                None
            }
            Err(problem) => {
                self.send(&FromSandbox::Rejected {
                    problem: problem.to_string(),
                });
                None
            }
        }
    }

    fn admit(
        &self,
        run_id: u64,
        code: String,
        limits: RunLimits,
        catalog: &serde_json::Value,
    ) -> Option<Order> {
        match Admission::admit(catalog, "host") {
            Ok(admission) => Some(Order {
                run_id,
                code,
                limits: limits.clamped(),
                admission,
            }),
            Err(invalid) => {
                self.send(&FromSandbox::Rejected {
                    problem: invalid.to_string(),
                });
                None
            }
        }
    }

    /// The tool host of run `run_id`: its calls go to the host through this
    /// server.
    #[must_use]
    pub fn host(self: &Rc<Self>, run_id: u64) -> Rc<dyn ToolHost> {
        Rc::new(ServedHost {
            server: self.clone(),
            run_id,
        })
    }

    /// Run `run_id` answered: the calls it left waiting are given up, and the
    /// report goes to the host.
    pub fn report(
        &self,
        run_id: u64,
        report: RunReport,
        warnings: Vec<Warning>,
        catalog_digest: String,
    ) {
        self.pending
            .borrow_mut()
            .retain(|(run, _), _| *run != run_id);
        self.outbox.borrow_mut().clear();
        self.send(&FromSandbox::Report {
            run_id,
            report,
            warnings,
            catalog_digest,
        });
    }
}

/// One run's calls, through its server.
struct ServedHost {
    server: Rc<Server>,
    run_id: u64,
}

impl ToolHost for ServedHost {
    fn call(&self, call: ToolCall, person: PersonSignal) -> LocalBoxFuture<'static, ToolReply> {
        let (reply, replied) = oneshot::channel();
        self.server
            .pending
            .borrow_mut()
            .insert((self.run_id, call.call_number), Pending { reply, person });
        let tool = call.tool.clone();
        self.server.outbox.borrow_mut().push(CallRequest {
            call_number: call.call_number,
            tool: call.tool,
            args: call.args,
        });
        Box::pin(async move {
            match replied.await {
                Ok(reply) => reply,
                Err(_) => Err(ToolFailure {
                    code: "outcome_unknown".into(),
                    message: format!("the host dropped the call to {tool}"),
                    detail: None,
                    outcome: CallOutcome::OutcomeUnknown,
                }),
            }
        })
    }

    fn idle(&self, state: IdleState) {
        let calls = std::mem::take(&mut *self.server.outbox.borrow_mut());
        self.server.send(&FromSandbox::Idle {
            run_id: self.run_id,
            calls,
            cpu_ms: state.cpu_ms,
            wake_in_ms: state.wake_in_ms,
        });
    }

    fn console(&self, lines: &[ConsoleLine], dropped: usize) {
        self.server.send(&FromSandbox::Console {
            run_id: self.run_id,
            lines: lines.to_vec(),
            dropped,
        });
    }

    fn progress(&self, progress: &Progress) {
        self.server.send(&FromSandbox::Progress {
            run_id: self.run_id,
            progress: progress.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_types::protocol::encode;
    use serde_json::json;

    /// What a server sent, kept in order.
    #[derive(Default)]
    struct Kept(RefCell<Vec<FromSandbox>>);

    impl Transport for Kept {
        fn send(&self, message: &FromSandbox) {
            self.0.borrow_mut().push(message.clone());
        }
    }

    fn reply(run_id: u64, call_number: u32) -> String {
        encode(&ToSandbox::ToolReply {
            run_id,
            call_number,
            reply: Ok(json!(call_number * 10)),
        })
    }

    #[test]
    fn a_programs_calls_go_out_when_it_goes_idle_and_each_reply_reaches_its_call() {
        let kept = Rc::new(Kept::default());
        let server = Server::new(kept.clone());
        let order = server
            .receive(&encode(&ToSandbox::Run {
                run_id: 7,
                code:
                    "const [a, b] = await Promise.all([tools.echo({n: 1}), tools.echo({n: 2})]);\n\
                       return a + b;"
                        .into(),
                limits: RunLimits::default(),
                catalog: json!([{"name": "echo"}]),
            }))
            .expect("a run");
        let sandbox = crate::Sandbox::new().expect("a context");
        let report = Rc::new(RefCell::new(None));
        let mut pool = futures::executor::LocalPool::new();
        futures::task::LocalSpawnExt::spawn_local(&pool.spawner(), {
            let (server, report) = (server.clone(), report.clone());
            async move {
                let ran = sandbox
                    .run(
                        &order.code,
                        &order.limits,
                        Rc::new(order.admission),
                        server.host(order.run_id),
                        None,
                    )
                    .await;
                *report.borrow_mut() = Some(ran);
            }
        })
        .expect("spawned");
        pool.run_until_stalled();
        let sent = kept.0.borrow().clone();
        let calls: Vec<u32> = sent
            .iter()
            .flat_map(|message| match message {
                FromSandbox::Idle {
                    run_id: 7, calls, ..
                } => calls.iter().map(|call| call.call_number).collect(),
                _ => Vec::new(),
            })
            .collect();
        assert_eq!(calls, [1, 2], "both calls in the idle messages: {sent:?}");
        // A reply for another run reaches nobody; this run's reach their calls.
        assert!(server.receive(&reply(8, 1)).is_none());
        pool.run_until_stalled();
        assert!(
            report.borrow().is_none(),
            "a reply for run 8 answered run 7"
        );
        assert!(server.receive(&reply(7, 2)).is_none());
        assert!(server.receive(&reply(7, 1)).is_none());
        pool.run_until_stalled();
        let ran = report.borrow_mut().take().expect("the run ended");
        assert_eq!(
            ran.outcome,
            kiln_types::RunOutcome::Completed { value: json!(30) }
        );
        server.report(7, ran, Vec::new(), String::new());
        assert!(matches!(
            kept.0.borrow().last(),
            Some(FromSandbox::Report { run_id: 7, .. })
        ));
    }

    /// The guest's lines go out as it prints them, also when it never goes
    /// idle (its host may have to end it in the middle of a loop), and no more
    /// of them than its console budget keeps: a flood of 100,000 lines sends
    /// the lines that fit, the dropped count at each of the first 1,024 drops,
    /// then at each power of two.
    #[test]
    fn what_the_guest_prints_goes_out_as_it_prints_within_its_budget() {
        let kept = Rc::new(Kept::default());
        let server = Server::new(kept.clone());
        let limits = RunLimits {
            console_bytes: 100,
            ..RunLimits::default()
        };
        let order = server
            .receive(&encode(&ToSandbox::Run {
                run_id: 4,
                code: "console.log('a'); console.warn('b');
                       for (let i = 0; i < 100000; i++) console.log('');
                       return 1;"
                    .into(),
                limits,
                catalog: json!([]),
            }))
            .expect("a run");
        let sandbox = crate::Sandbox::new().expect("a context");
        let report = futures::executor::block_on(sandbox.run(
            &order.code,
            &order.limits,
            Rc::new(order.admission),
            server.host(order.run_id),
            None,
        ));
        let sent = kept.0.borrow().clone();
        let mut streamed = Vec::new();
        let mut told = Vec::new();
        for message in &sent {
            match message {
                FromSandbox::Console {
                    run_id: 4,
                    lines,
                    dropped,
                } => {
                    assert!(lines.len() <= 1, "one line at a time: {lines:?}");
                    streamed.extend(lines.iter().cloned());
                    told.push(*dropped);
                }
                other => panic!("only console lines before the report: {other:?}"),
            }
        }
        // `a\n` and `b\n` leave 96 bytes: 96 empty lines, then the budget is spent.
        assert_eq!(streamed, report.console);
        assert_eq!(
            (report.console.len(), report.console_dropped),
            (98, 100_000 - 96)
        );
        assert_eq!(
            (streamed[0].text.as_str(), streamed[1].level),
            ("a", kiln_types::ConsoleLevel::Warn)
        );
        let each = (1..=1024).chain((11..17).map(|power| 1 << power));
        assert_eq!(told[..98], [0; 98]);
        assert_eq!(
            told[98..],
            each.collect::<Vec<usize>>(),
            "dropped counts told"
        );
    }

    #[test]
    fn a_run_is_ordered_with_its_limits_clamped_and_what_does_not_read_is_refused() {
        let kept = Rc::new(Kept::default());
        let server = Server::new(kept.clone());
        let limits = RunLimits {
            wall_ms: u64::MAX,
            ..RunLimits::default()
        };
        let order = server
            .receive(&encode(&ToSandbox::Run {
                run_id: 3,
                code: "return 1".into(),
                limits,
                catalog: json!([]),
            }))
            .expect("a run");
        assert_eq!(order.run_id, 3);
        assert_eq!(order.limits, limits.clamped());
        assert!(server.receive("{").is_none());
        let sent = kept.0.borrow().clone();
        assert!(
            matches!(sent.as_slice(), [FromSandbox::Rejected { problem }] if problem.contains("not a Kiln protocol message")),
            "{sent:?}"
        );
    }
}

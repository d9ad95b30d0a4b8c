//! Custody on a local executor and a fake clock: attach, the interim at 25 s
//! (`running`, `consent`), late results, withdraw, retention, principals.

use std::cell::Cell;
use std::rc::Rc;

use futures::FutureExt as _;
use futures::channel::oneshot;
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt as _;
use kiln_clock::FakeClock;
use kiln_types::tool_result::{ContentPart, Held, ToolResult};
use serde_json::json;

use super::*;

fn finished(value: &str) -> ToolResult {
    ToolResult {
        content: vec![ContentPart::Text {
            text: format!("completed · {value}"),
        }],
        structured_content: json!({"status": "completed", "value": value}),
        is_error: false,
        error_code: None,
    }
}

struct Rig {
    pool: LocalPool,
    clock: FakeClock,
    custody: Custody,
}

fn rig() -> Rig {
    let pool = LocalPool::new();
    let spawner = pool.spawner();
    let clock = FakeClock::new();
    let spawn: Spawn = Rc::new(move |future| {
        spawner.spawn_local(future).expect("the pool runs");
    });
    let custody = Custody::new(Rc::new(clock.clone()), spawn);
    Rig {
        pool,
        clock,
        custody,
    }
}

/// Starts `future` on the pool; its answer lands in the returned cell.
fn start<T: 'static>(
    rig: &Rig,
    future: impl std::future::Future<Output = T> + 'static,
) -> Rc<RefCell<Option<T>>> {
    let answer = Rc::new(RefCell::new(None));
    let into = answer.clone();
    rig.pool
        .spawner()
        .spawn_local(async move {
            *into.borrow_mut() = Some(future.await);
        })
        .expect("the pool runs");
    answer
}

/// A run that ends when the returned sender says, counting its starts.
fn gated(
    starts: Rc<Cell<u32>>,
) -> (
    oneshot::Sender<ToolResult>,
    impl FnOnce(RunHandle) -> LocalBoxFuture<'static, ToolResult>,
) {
    let (tx, rx) = oneshot::channel::<ToolResult>();
    (tx, move |_handle: RunHandle| {
        starts.set(starts.get() + 1);
        async move { rx.await.expect("the test answers") }.boxed_local()
    })
}

#[test]
fn a_retry_with_the_same_key_attaches_and_never_runs_the_program_again() {
    let mut rig = rig();
    let starts = Rc::new(Cell::new(0));
    let (tx, run) = gated(starts.clone());
    let custody = rig.custody.clone();
    let first = start(&rig, async move { custody.call("codemode:a", run).await });
    rig.pool.run_until_stalled();
    let custody = rig.custody.clone();
    let counted = starts.clone();
    let retry = start(&rig, async move {
        custody
            .call("codemode:a", move |_| {
                counted.set(counted.get() + 1);
                async { finished("again") }.boxed_local()
            })
            .await
    });
    rig.pool.run_until_stalled();
    tx.send(finished("once")).expect("the run waits");
    rig.pool.run_until_stalled();
    assert_eq!(starts.get(), 1, "one execution");
    let (first, attached) = first.borrow_mut().take().expect("answered");
    assert_eq!(
        (first.structured_content["value"].clone(), attached),
        (json!("once"), false)
    );
    let (retry, attached) = retry.borrow_mut().take().expect("answered");
    assert_eq!(
        (retry.structured_content["value"].clone(), attached),
        (json!("once"), true)
    );
    // After the end, a retry is answered from custody at once.
    let custody = rig.custody.clone();
    let later = start(&rig, async move {
        custody
            .call("codemode:a", |_| unreachable!("never started again"))
            .await
    });
    rig.pool.run_until_stalled();
    assert_eq!(
        later
            .borrow()
            .as_ref()
            .expect("answered")
            .0
            .structured_content["value"],
        "once"
    );
}

#[test]
fn a_call_answers_the_interim_after_25_s_and_late_results_the_final() {
    let mut rig = rig();
    let starts = Rc::new(Cell::new(0));
    let (tx, run) = gated(starts.clone());
    let custody = rig.custody.clone();
    let call = start(&rig, async move { custody.call("codemode:b", run).await });
    rig.pool.run_until_stalled();
    rig.clock.advance(24_999.0);
    rig.pool.run_until_stalled();
    assert!(call.borrow().is_none(), "not yet due");
    rig.clock.advance(1.0);
    rig.pool.run_until_stalled();
    let (interim, _) = call.borrow_mut().take().expect("due");
    assert_eq!(
        interim.structured_content,
        json!({"status": "running", "run_id": "codemode:b", "held": {"reason": "running"}})
    );
    assert!(interim.text().starts_with("Still running: "));
    assert_eq!(rig.custody.running(), ["codemode:b"]);

    // While it runs, late_results waits like a call, then answers the interim again.
    let custody = rig.custody.clone();
    let late = start(&rig, async move { custody.late_result("codemode:b").await });
    rig.pool.run_until_stalled();
    rig.clock.advance(25_000.0);
    rig.pool.run_until_stalled();
    let again = late.borrow_mut().take().expect("due").expect("kept");
    assert_eq!(again.structured_content["status"], "running");

    // A late_results waiting when the run ends gets the final result then.
    let custody = rig.custody.clone();
    let late = start(&rig, async move { custody.late_result("codemode:b").await });
    rig.pool.run_until_stalled();
    tx.send(finished("done")).expect("the run waits");
    rig.pool.run_until_stalled();
    let last = late.borrow_mut().take().expect("answered").expect("kept");
    assert_eq!(last.structured_content["value"], "done");
    assert!(rig.custody.running().is_empty());
}

#[test]
fn the_interim_names_the_first_call_held_on_a_person() {
    let mut rig = rig();
    let (tx, rx) = oneshot::channel::<ToolResult>();
    let custody = rig.custody.clone();
    let call = start(&rig, async move {
        custody
            .call("codemode:c", move |handle| {
                handle.hold(Held {
                    tool: "send_email".into(),
                    call: 2,
                    reason: "consent".into(),
                });
                async move { rx.await.expect("the test answers") }.boxed_local()
            })
            .await
    });
    rig.pool.run_until_stalled();
    rig.clock.advance(25_000.0);
    rig.pool.run_until_stalled();
    let (interim, _) = call.borrow_mut().take().expect("due");
    assert_eq!(interim.structured_content["held"]["reason"], "consent");
    assert!(
        interim
            .text()
            .starts_with("Waiting on the person: send_email (call 2) needs their consent."),
        "{}",
        interim.text()
    );
    drop(tx);
}

#[test]
fn withdraw_cancels_a_running_run_and_answers_its_end() {
    let mut rig = rig();
    let custody = rig.custody.clone();
    let call = start(&rig, async move {
        custody
            .call("codemode:d", |handle| {
                async move {
                    handle.cancel.aborted().await;
                    ToolResult {
                        content: vec![ContentPart::Text {
                            text: "cancelled".into(),
                        }],
                        structured_content: json!({"status": "cancelled"}),
                        is_error: true,
                        error_code: Some("cancelled".into()),
                    }
                }
                .boxed_local()
            })
            .await
    });
    rig.pool.run_until_stalled();
    assert!(call.borrow().is_none());
    let custody = rig.custody.clone();
    let withdrawn = start(&rig, async move { custody.withdraw("codemode:d").await });
    rig.pool.run_until_stalled();
    let withdrawn = withdrawn
        .borrow_mut()
        .take()
        .expect("answered")
        .expect("kept");
    assert_eq!(withdrawn.error_code.as_deref(), Some("cancelled"));
    let (answered, _) = call
        .borrow_mut()
        .take()
        .expect("the call hears the end too");
    assert_eq!(answered.error_code.as_deref(), Some("cancelled"));
    // Withdrawing an ended run answers its result; nothing is cancelled twice.
    let custody = rig.custody.clone();
    let again = start(&rig, async move { custody.withdraw("codemode:d").await });
    rig.pool.run_until_stalled();
    assert_eq!(
        again
            .borrow_mut()
            .take()
            .expect("answered")
            .expect("kept")
            .error_code
            .as_deref(),
        Some("cancelled")
    );
}

#[test]
fn ended_runs_are_kept_for_their_time_and_count_then_named_expired() {
    let mut rig = rig();
    rig.custody = rig.custody.clone().with_retention(Retention {
        runs: 2,
        ended_ms: 1_000,
    });
    for (id, value) in [
        ("codemode:e1", "one"),
        ("codemode:e2", "two"),
        ("codemode:e3", "three"),
    ] {
        let custody = rig.custody.clone();
        start(&rig, async move {
            custody
                .call(id, move |_| async move { finished(value) }.boxed_local())
                .await
        });
        rig.pool.run_until_stalled();
        rig.clock.advance(10.0);
    }
    let late = |rig: &mut Rig, id: &'static str| {
        let custody = rig.custody.clone();
        let answer = start(rig, async move { custody.late_result(id).await });
        rig.pool.run_until_stalled();
        answer.borrow_mut().take().expect("answered")
    };
    let expired = late(&mut rig, "codemode:e1").expect_err("over the count");
    assert_eq!(
        expired.to_string(),
        "the run `codemode:e1` ended too long ago: its result is no longer kept (Kiln keeps the last 2 ended runs, each for 1 s)"
    );
    assert_eq!(
        late(&mut rig, "codemode:e2")
            .expect("kept")
            .structured_content["value"],
        "two"
    );
    rig.clock.advance(1_001.0);
    assert!(matches!(
        late(&mut rig, "codemode:e3"),
        Err(CustodyError::Expired { .. })
    ));
    assert_eq!(
        late(&mut rig, "codemode:never")
            .expect_err("unknown")
            .to_string(),
        "there is no run `codemode:never` here: a run id comes from a keyed codemode call's `structuredContent.run_id` (a keyless run is not kept)"
    );
    // A result recorded by an earlier process is adopted with its age.
    rig.custody.adopt("codemode:old", finished("recorded"), 500);
    assert_eq!(
        late(&mut rig, "codemode:old")
            .expect("kept")
            .structured_content["value"],
        "recorded"
    );
}

fn principal(session: &str) -> Principal {
    Principal {
        session: session.into(),
        agent: "same".into(),
    }
}

#[test]
fn a_run_answers_only_its_principal_and_to_others_is_an_id_never_issued() {
    let mut rig = rig();
    rig.custody = rig.custody.clone().with_retention(Retention {
        runs: 1,
        ended_ms: 1_000,
    });
    let owner = rig.custody.for_principal(principal("a"));
    let other = rig.custody.for_principal(principal("b"));
    let starts = Rc::new(Cell::new(0));
    let (tx, run) = gated(starts.clone());
    let custody = owner.clone();
    let call = start(&rig, async move { custody.call("codemode:p", run).await });
    rig.pool.run_until_stalled();
    assert!(owner.keeps("codemode:p") && !other.keeps("codemode:p"));
    assert_eq!(owner.running(), ["codemode:p"]);
    assert!(other.running().is_empty());
    let ask = |rig: &mut Rig, custody: &Custody, id: &'static str, withdraw: bool| {
        let custody = custody.clone();
        let answer = start(rig, async move {
            if withdraw {
                custody.withdraw(id).await
            } else {
                custody.late_result(id).await
            }
        });
        rig.pool.run_until_stalled();
        answer.borrow_mut().take().expect("answered")
    };
    let never = ask(&mut rig, &other, "codemode:never", false).expect_err("never issued");
    let as_never = |error: CustodyError| error.to_string().replace("codemode:p", "codemode:never");
    // Going: another principal can neither read nor withdraw it.
    for withdraw in [false, true] {
        let refused = ask(&mut rig, &other, "codemode:p", withdraw).expect_err("not its run");
        assert_eq!(refused.code(), "unknown_run");
        assert_eq!(as_never(refused), never.to_string());
    }
    assert_eq!(owner.running(), ["codemode:p"], "not withdrawn");
    // The same id from another principal is its own run, never an attach.
    let custody = other.clone();
    let theirs = start(&rig, async move {
        custody
            .call("codemode:p", |_| async { finished("theirs") }.boxed_local())
            .await
    });
    rig.pool.run_until_stalled();
    let (theirs, attached) = theirs.borrow_mut().take().expect("answered");
    assert_eq!(
        (theirs.structured_content["value"].clone(), attached),
        (json!("theirs"), false)
    );
    tx.send(finished("mine")).expect("the run waits");
    rig.pool.run_until_stalled();
    let (mine, _) = call.borrow_mut().take().expect("answered");
    assert_eq!(mine.structured_content["value"], "mine");
    assert_eq!(starts.get(), 1);
    // Dropped past retention, it is expired to its principal only.
    rig.clock.advance(1_001.0);
    let expired = ask(&mut rig, &owner, "codemode:p", false).expect_err("dropped");
    assert_eq!(expired.code(), "expired_run");
    let refused = ask(&mut rig, &other, "codemode:p", false).expect_err("dropped");
    assert_eq!(refused.code(), "expired_run", "its own run of that id");
    let third = rig.custody.for_principal(principal("c"));
    let refused = ask(&mut rig, &third, "codemode:p", false).expect_err("never its");
    assert_eq!(as_never(refused), never.to_string());
}

#[test]
fn a_released_principals_runs_are_withdrawn_and_forgotten() {
    let mut rig = rig();
    let gone = rig.custody.for_principal(principal("gone"));
    let stays = rig.custody.for_principal(principal("stays"));
    let withdrawn = Rc::new(Cell::new(false));
    for (custody, id) in [(&gone, "codemode:g1"), (&stays, "codemode:s1")] {
        let custody = custody.clone();
        let seen = withdrawn.clone();
        start(&rig, async move {
            custody
                .call(id, move |handle| {
                    async move {
                        handle.cancel.aborted().await;
                        seen.set(true);
                        finished("cancelled")
                    }
                    .boxed_local()
                })
                .await
        });
    }
    gone.adopt("codemode:g0", finished("ended"), 0);
    rig.pool.run_until_stalled();
    gone.release();
    rig.pool.run_until_stalled();
    assert!(withdrawn.get(), "its going run was withdrawn");
    assert!(!gone.keeps("codemode:g0") && !gone.keeps("codemode:g1"));
    assert!(gone.running().is_empty());
    assert_eq!(stays.running(), ["codemode:s1"], "another's run goes on");
    // The server's client has gone: every run still going is withdrawn.
    rig.custody.withdraw_all();
    rig.pool.run_until_stalled();
    assert!(stays.running().is_empty());
}

/// A person who never answers, counting the questions.
struct Silent(Rc<Cell<u32>>);

impl Approver for Silent {
    fn ask(&self, _: ApprovalRequest) -> LocalBoxFuture<'static, Answer> {
        self.0.set(self.0.get() + 1);
        futures::future::pending().boxed_local()
    }
}

#[test]
fn a_held_approver_holds_the_call_while_the_person_decides() {
    let handle = RunHandle::default();
    let asked = Rc::new(Cell::new(0));
    let approver = holding(Rc::new(Silent(asked.clone())), handle.clone());
    let request = ApprovalRequest {
        call_number: 3,
        tool: "write_it".into(),
        category: kiln_capabilities::Category::Write,
        module: "page".into(),
        description: String::new(),
        args: json!({}),
        reason: kiln_types::permission::AskReason::Mode,
        host: "page".into(),
    };
    let question = approver.ask(request);
    assert_eq!(asked.get(), 1);
    let held = interim("codemode:e", &handle.held.borrow());
    assert_eq!(held.structured_content["held"]["reason"], "consent");
    assert!(held.text().contains("write_it (call 3)"), "{}", held.text());
    // The question given up (the run ended): the call is held no more.
    drop(question);
    assert!(handle.held.borrow().is_empty());
}

#[test]
fn past_the_count_a_busy_principal_drops_its_own_results_first() {
    let mut rig = rig();
    rig.custody = rig.custody.clone().with_retention(Retention {
        runs: 3,
        ended_ms: 60_000,
    });
    let quiet = rig.custody.for_principal(principal("quiet"));
    let busy = rig.custody.for_principal(principal("busy"));
    // The quiet client's one run ends first; then the busy one ends four.
    let mut order = vec![(quiet.clone(), "codemode:q1")];
    order.extend(
        ["codemode:b1", "codemode:b2", "codemode:b3", "codemode:b4"]
            .into_iter()
            .map(|id| (busy.clone(), id)),
    );
    for (custody, id) in order {
        start(&rig, async move {
            custody
                .call(id, move |_| async move { finished(id) }.boxed_local())
                .await
        });
        rig.pool.run_until_stalled();
        rig.clock.advance(10.0);
    }
    let late = |rig: &mut Rig, custody: &Custody, id: &'static str| {
        let custody = custody.clone();
        let answer = start(rig, async move { custody.late_result(id).await });
        rig.pool.run_until_stalled();
        answer.borrow_mut().take().expect("answered")
    };
    // The oldest result of all is the quiet client's, and it stays.
    assert!(late(&mut rig, &quiet, "codemode:q1").is_ok());
    for (id, kept) in [
        ("codemode:b1", false),
        ("codemode:b2", false),
        ("codemode:b3", true),
        ("codemode:b4", true),
    ] {
        let answer = late(&mut rig, &busy, id);
        assert_eq!(answer.is_ok(), kept, "{id}: {answer:?}");
        if !kept {
            assert_eq!(answer.expect_err("dropped").code(), "expired_run");
        }
    }
}

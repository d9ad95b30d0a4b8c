//! Keyed runs in custody (reference 002, "Results" and "Call outcomes"), for
//! every entrance that serves codemode calls with a key: `kiln mcp serve`
//! natively, the page API's `kiln.run({key})` in the runtime worker.
//!
//! - A call with a key names its run ([`crate::RunId::keyed`]); the
//!   first call starts it, a retry with the same key **attaches** and never
//!   executes the program again.
//! - A call waits for the end at most [`REPLY_DUE_MS`] (25 s) of the
//!   custody's clock; then it answers the interim result
//!   ([`kiln_types::tool_result::interim`]: `running`, or the first held call's
//!   reason) and the run goes on.
//! - [`Custody::late_result`] answers the final result once it exists, waiting
//!   like a call does (at most 25 s, then the interim again);
//!   [`Custody::withdraw`] cancels the run (calls never sent end `cancelled`,
//!   started ones `outcome_unknown`, never resent) and answers its final result.
//! - Retention: an ended run is kept [`Retention::ended_ms`] (an hour) and at
//!   most [`Retention::runs`] (100) ended runs are kept in all; past the count,
//!   the oldest ended run of the principal keeping the most goes first, so one
//!   busy client's results push out its own, not another's. A running run is
//!   never dropped. An id dropped so is named as expired, an id
//!   never seen as unknown.
//! - Every run is kept for the [`Principal`] that started it (a served
//!   session and its agent; the page's worker has one). A handle acts for one
//!   principal ([`Custody::for_principal`]): a run kept for another is, to it,
//!   an id never issued (`unknown_run`, word for word), whether that run goes,
//!   ended or was dropped, and the same id from two principals names two runs.
//!
//! Single-threaded, like the futures it drives: the runs are spawned on the
//! entrance's local executor ([`Spawn`]), and time is a [`Clock`], so a test
//! moves a fake clock past the 25 s instead of waiting for it.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

use futures::FutureExt as _;
use futures::channel::oneshot;
use futures::future::{LocalBoxFuture, Shared};
use indexmap::IndexMap;
use kiln_capabilities::{Answer, ApprovalRequest, Approver};
use kiln_clock::Clock;
use kiln_store::StoreError;
use kiln_store::history::{History, Job};
use kiln_types::cancel::AbortSignal;
use kiln_types::tool_result::{Held, ToolResult, error_result, interim};

pub use kiln_types::tool_result::REPLY_DUE_MS;

/// How many ids of dropped runs are remembered, to name them expired.
const REMEMBERED_DROPS: usize = 1_000;

/// How long and how many ended runs are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Ended runs kept at most; the oldest ended is dropped first.
    pub runs: usize,
    /// How long an ended run is kept after it ended.
    pub ended_ms: u64,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            runs: 100,
            ended_ms: 60 * 60 * 1000,
        }
    }
}

/// Runs a future to its end on the entrance's executor.
pub type Spawn = Rc<dyn Fn(LocalBoxFuture<'static, ()>)>;

/// What a running program tells its custody, and how custody stops it.
#[derive(Clone, Default)]
pub struct RunHandle {
    held: Rc<RefCell<Vec<Held>>>,
    /// Thrown by [`Custody::withdraw`]: the run ends as `cancelled`.
    pub cancel: AbortSignal,
}

impl RunHandle {
    /// Call `held.call` now waits on a person.
    pub fn hold(&self, held: Held) {
        let mut calls = self.held.borrow_mut();
        calls.retain(|call| call.call != held.call);
        calls.push(held);
    }

    /// Call `call` no longer waits on a person.
    pub fn release(&self, call: u32) {
        self.held.borrow_mut().retain(|held| held.call != call);
    }
}

/// `approver`, telling `handle` while a call waits on the person's consent, so
/// that the interim names it (`held: {reason: "consent"}`) and a withdraw
/// knows the call never started.
#[must_use]
pub fn holding(approver: Rc<dyn Approver>, handle: RunHandle) -> Rc<dyn Approver> {
    Rc::new(Holding { approver, handle })
}

struct Holding {
    approver: Rc<dyn Approver>,
    handle: RunHandle,
}

/// Releases a held call when its question is answered or given up.
struct Release(RunHandle, u32);

impl Drop for Release {
    fn drop(&mut self) {
        self.0.release(self.1);
    }
}

impl Approver for Holding {
    fn ask(&self, request: ApprovalRequest) -> LocalBoxFuture<'static, Answer> {
        let call = request.call_number;
        if self.approver.is_person() {
            self.handle.hold(Held {
                tool: request.tool.clone(),
                call,
                reason: "consent".into(),
            });
        }
        let release = Release(self.handle.clone(), call);
        let asked = self.approver.ask(request);
        Box::pin(async move {
            let _release = release;
            asked.await
        })
    }

    fn is_person(&self) -> bool {
        self.approver.is_person()
    }
}

/// Whom a kept run answers to: the session and the agent that started it.
/// A custody with one principal (the page's worker) keeps every run for the
/// default, empty one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Principal {
    /// The entrance's session: `stdio`, an HTTP session's id.
    pub session: String,
    /// Whose runs they are (`--agent`, the client's name).
    pub agent: String,
}

/// Why an id has no run in custody.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CustodyError {
    #[error(
        "there is no run `{0}` here: a run id comes from a keyed codemode call's `structuredContent.run_id` (a keyless run is not kept)"
    )]
    Unknown(String),
    #[error(
        "the run `{id}` ended too long ago: its result is no longer kept (Kiln keeps the last {runs} ended runs, each for {kept_for})"
    )]
    Expired {
        id: String,
        runs: usize,
        kept_for: String,
    },
}

impl CustodyError {
    /// `unknown_run` or `expired_run`.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unknown(_) => "unknown_run",
            Self::Expired { .. } => "expired_run",
        }
    }

    /// The error as an entrance answers it: a refused tool result.
    #[must_use]
    pub fn to_result(&self) -> ToolResult {
        error_result(
            None,
            self.code(),
            &self.to_string(),
            serde_json::json!({"status": "refused"}),
        )
    }
}

/// The result of a keyed run whose process (or tab) ended before it did,
/// `output` being what its record says.
#[must_use]
pub fn interrupted(run_id: &str, output: &str) -> ToolResult {
    let message = format!(
        "{output} Whatever it did before then stands; Kiln never runs it again for this key."
    );
    error_result(
        Some("interrupted"),
        "interrupted",
        &message,
        serde_json::json!({
            "run_id": run_id,
            "status": "interrupted",
            "termination_reason": "interrupted",
        }),
    )
}

enum Kept {
    Running {
        handle: RunHandle,
        ended: Shared<oneshot::Receiver<()>>,
        /// Its principal is gone ([`Custody::release`]): dropped when it ends.
        released: bool,
    },
    Ended {
        result: ToolResult,
        ended_ms: f64,
    },
}

/// A kept run's place: its principal and its id.
type Place = (Principal, String);

#[derive(Default)]
struct Runs {
    /// In the order they started (or were adopted).
    kept: IndexMap<Place, Kept>,
    dropped: VecDeque<Place>,
}

/// The keyed runs of one server or runtime, as one principal sees them.
#[derive(Clone)]
pub struct Custody {
    runs: Rc<RefCell<Runs>>,
    /// Whom this handle acts for.
    principal: Principal,
    clock: Rc<dyn Clock>,
    spawn: Spawn,
    retention: Retention,
    reply_due_ms: u64,
    /// Why a withdrawn run was cancelled, when the entrance says.
    withdraw_reason: Option<String>,
}

impl Custody {
    #[must_use]
    pub fn new(clock: Rc<dyn Clock>, spawn: Spawn) -> Self {
        Self {
            runs: Rc::default(),
            principal: Principal::default(),
            clock,
            spawn,
            retention: Retention::default(),
            reply_due_ms: REPLY_DUE_MS,
            withdraw_reason: None,
        }
    }

    /// Says why a withdrawn run was cancelled, in the entrance's words (`the
    /// MCP client withdrew or cancelled the run`).
    #[must_use]
    pub fn with_withdraw_reason(mut self, reason: impl Into<String>) -> Self {
        self.withdraw_reason = Some(reason.into());
        self
    }

    #[must_use]
    pub fn with_retention(mut self, retention: Retention) -> Self {
        self.retention = retention;
        self
    }

    /// A shorter (or longer) wait than [`REPLY_DUE_MS`] before the interim.
    #[must_use]
    pub fn with_reply_due(mut self, ms: u64) -> Self {
        self.reply_due_ms = ms;
        self
    }

    #[must_use]
    pub fn retention(&self) -> Retention {
        self.retention
    }

    /// The same custody acting for `principal`: it sees, starts, attaches
    /// to, withdraws and adopts only that principal's runs.
    #[must_use]
    pub fn for_principal(&self, principal: Principal) -> Self {
        Self {
            principal,
            ..self.clone()
        }
    }

    fn place(&self, run_id: &str) -> Place {
        (self.principal.clone(), run_id.to_owned())
    }

    /// A keyed call of run `run_id`: attaches to the run kept under that id, or
    /// starts it with `start` (called only then). Answers the final result, or
    /// the interim when the run has not ended [`REPLY_DUE_MS`] after the call
    /// came; the flag says whether it attached.
    pub async fn call(
        &self,
        run_id: &str,
        start: impl FnOnce(RunHandle) -> LocalBoxFuture<'static, ToolResult>,
    ) -> (ToolResult, bool) {
        self.prune();
        let place = self.place(run_id);
        let attached = self.runs.borrow().kept.contains_key(&place);
        if !attached {
            let handle = RunHandle::default();
            let (ended_tx, ended_rx) = oneshot::channel();
            let run = start(handle.clone());
            self.runs.borrow_mut().kept.insert(
                place.clone(),
                Kept::Running {
                    handle,
                    ended: ended_rx.shared(),
                    released: false,
                },
            );
            let runs = self.runs.clone();
            let clock = self.clock.clone();
            (self.spawn)(Box::pin(async move {
                let result = run.await;
                let mut runs = runs.borrow_mut();
                match runs.kept.get_mut(&place) {
                    Some(Kept::Running { released: true, .. }) => {
                        runs.kept.shift_remove(&place);
                    }
                    Some(kept) => {
                        *kept = Kept::Ended {
                            result,
                            ended_ms: clock.now_ms(),
                        };
                    }
                    None => {}
                }
                drop(runs);
                let _ = ended_tx.send(());
            }));
        }
        let result = self.reply(run_id).await;
        // Just inserted or seen above; pruning never drops a running run.
        (result.unwrap_or_else(|_| interim(run_id, &[])), attached)
    }

    /// Keeps `result` under `run_id` as ended `ago_ms` ago (a run recorded in
    /// the store by an earlier process), unless a run of that id is kept.
    pub fn adopt(&self, run_id: &str, result: ToolResult, ago_ms: u64) {
        let ended_ms = self.clock.now_ms() - ago_ms as f64;
        self.runs
            .borrow_mut()
            .kept
            .entry(self.place(run_id))
            .or_insert(Kept::Ended { result, ended_ms });
        self.prune();
    }

    /// Keeps the keyed runs `history` recorded as ended within retention
    /// (their whole result; an `interrupted` one as [`interrupted`]), so that
    /// a retry or a late result after a restart is answered from the record,
    /// never by running the program again. `now_ms` is the store's clock
    /// (epoch milliseconds). Answers how many it kept.
    ///
    /// # Errors
    ///
    /// The store's, when the history cannot be read.
    pub async fn adopt_history(&self, history: &History, now_ms: u64) -> Result<usize, StoreError> {
        self.adopt_history_as(history, now_ms, &|_| self.principal.clone())
            .await
    }

    /// [`Custody::adopt_history`], keeping each run for the principal
    /// `principal_of` names for its job (a served run's, from its agent).
    ///
    /// # Errors
    ///
    /// The store's, when the history cannot be read.
    pub async fn adopt_history_as(
        &self,
        history: &History,
        now_ms: u64,
        principal_of: &dyn Fn(&Job) -> Principal,
    ) -> Result<usize, StoreError> {
        let jobs = history.jobs(self.retention.runs.max(1) * 4).await?;
        // Newest first: a key run again after its first run was dropped
        // answers its latest run.
        let mut seen = std::collections::HashSet::new();
        let mut kept = Vec::new();
        for job in jobs {
            let (Some(run_id), Some(finished_ms)) = (&job.run_id, job.finished_ms) else {
                continue;
            };
            if !seen.insert(run_id.clone()) {
                continue;
            }
            let ago = now_ms.saturating_sub(finished_ms);
            if ago > self.retention.ended_ms {
                continue;
            }
            let principal = principal_of(&job);
            let result = match job.result.map(serde_json::from_value::<ToolResult>) {
                Some(Ok(result)) => result,
                _ if job.status == "interrupted" => interrupted(run_id, &job.output),
                // A record without a readable result: nothing to answer from.
                _ => continue,
            };
            kept.push((principal, run_id.clone(), result, ago));
        }
        let adopted = kept.len();
        // Kept in the order they ended, as custody keeps its own.
        for (principal, run_id, result, ago) in kept.into_iter().rev() {
            self.for_principal(principal).adopt(&run_id, result, ago);
        }
        Ok(adopted)
    }

    /// Whether a run of `run_id` is kept here for this principal, going or
    /// ended.
    #[must_use]
    pub fn keeps(&self, run_id: &str) -> bool {
        self.runs.borrow().kept.contains_key(&self.place(run_id))
    }

    /// The final result of `run_id`, waiting for it at most [`REPLY_DUE_MS`];
    /// the interim again when it has not ended by then.
    ///
    /// # Errors
    ///
    /// An id this custody never had, or had and dropped.
    pub async fn late_result(&self, run_id: &str) -> Result<ToolResult, CustodyError> {
        self.prune();
        self.reply(run_id).await
    }

    /// Cancels `run_id` and answers its final result (at once, when it had
    /// already ended), or the interim when it has not ended [`REPLY_DUE_MS`]
    /// after.
    ///
    /// # Errors
    ///
    /// As [`Custody::late_result`].
    pub async fn withdraw(&self, run_id: &str) -> Result<ToolResult, CustodyError> {
        self.prune();
        if let Some(Kept::Running { handle, .. }) = self.runs.borrow().kept.get(&self.place(run_id))
        {
            self.cancel(handle);
        }
        self.reply(run_id).await
    }

    fn cancel(&self, handle: &RunHandle) {
        match &self.withdraw_reason {
            Some(reason) => handle.cancel.abort_because(reason.clone()),
            None => handle.cancel.abort(),
        }
    }

    /// The ids of this principal's runs still going, in the order they started.
    #[must_use]
    pub fn running(&self) -> Vec<String> {
        self.runs
            .borrow()
            .kept
            .iter()
            .filter(|((principal, _), kept)| {
                *principal == self.principal && matches!(kept, Kept::Running { .. })
            })
            .map(|((_, id), _)| id.clone())
            .collect()
    }

    /// This principal is gone (its session ended): its runs still going are
    /// withdrawn and dropped when they end, its ended ones dropped now.
    /// Nobody can name them any more; with a store, their records stay.
    pub fn release(&self) {
        let mut runs = self.runs.borrow_mut();
        runs.kept.retain(|(principal, _), kept| {
            if *principal != self.principal {
                return true;
            }
            match kept {
                Kept::Running {
                    handle, released, ..
                } => {
                    *released = true;
                    self.cancel(handle);
                    true
                }
                Kept::Ended { .. } => false,
            }
        });
        runs.dropped
            .retain(|(principal, _)| *principal != self.principal);
    }

    /// Withdraws every principal's runs still going, not waiting for their
    /// ends: what a server does when its client has gone.
    pub fn withdraw_all(&self) {
        for kept in self.runs.borrow().kept.values() {
            if let Kept::Running { handle, .. } = kept {
                self.cancel(handle);
            }
        }
    }

    async fn reply(&self, run_id: &str) -> Result<ToolResult, CustodyError> {
        let place = self.place(run_id);
        let ended = match self.runs.borrow().kept.get(&place) {
            Some(Kept::Ended { result, .. }) => return Ok(result.clone()),
            Some(Kept::Running { ended, .. }) => ended.clone(),
            None => return Err(self.missing(run_id)),
        };
        let due = self.clock.sleep(self.reply_due_ms);
        futures::select! {
            _ = ended.fuse() => {},
            () = due.fuse() => {},
        }
        match self.runs.borrow().kept.get(&place) {
            Some(Kept::Ended { result, .. }) => Ok(result.clone()),
            Some(Kept::Running { handle, .. }) => Ok(interim(run_id, &handle.held.borrow())),
            None => Err(self.missing(run_id)),
        }
    }

    fn missing(&self, run_id: &str) -> CustodyError {
        let place = self.place(run_id);
        if self.runs.borrow().dropped.contains(&place) {
            CustodyError::Expired {
                id: run_id.to_owned(),
                runs: self.retention.runs,
                kept_for: match self.retention.ended_ms {
                    ms if ms >= 60_000 && ms % 60_000 == 0 => format!("{} minutes", ms / 60_000),
                    ms if ms % 1_000 == 0 => format!("{} s", ms / 1_000),
                    ms => format!("{ms} ms"),
                },
            }
        } else {
            CustodyError::Unknown(run_id.to_owned())
        }
    }

    /// Drops ended runs past their time, then, while more are kept than the
    /// count, the oldest ended run of the principal that keeps the most.
    fn prune(&self) {
        let now = self.clock.now_ms();
        let mut runs = self.runs.borrow_mut();
        let keep_ms = self.retention.ended_ms as f64;
        let mut ended: Vec<(Place, f64)> = runs
            .kept
            .iter()
            .filter_map(|(place, kept)| match kept {
                Kept::Ended { ended_ms, .. } => Some((place.clone(), *ended_ms)),
                Kept::Running { .. } => None,
            })
            .collect();
        ended.sort_by(|a, b| a.1.total_cmp(&b.1));
        let mut drop: Vec<Place> = Vec::new();
        let mut kept: Vec<Place> = Vec::new();
        for (place, ended_ms) in ended {
            if now - ended_ms > keep_ms {
                drop.push(place);
            } else {
                kept.push(place);
            }
        }
        // `kept` is oldest first: the first run of a principal keeping the most
        // is the oldest of the busiest (ties go to whichever has the older run).
        while kept.len() > self.retention.runs {
            let mut counts: HashMap<&Principal, usize> = HashMap::new();
            for (principal, _) in &kept {
                *counts.entry(principal).or_default() += 1;
            }
            let most = counts.values().copied().max().unwrap_or(0);
            let Some(at) = kept
                .iter()
                .position(|(principal, _)| counts.get(principal) == Some(&most))
            else {
                break;
            };
            drop.push(kept.remove(at));
        }
        for id in drop {
            runs.kept.shift_remove(&id);
            runs.dropped.push_back(id);
            if runs.dropped.len() > REMEMBERED_DROPS {
                runs.dropped.pop_front();
            }
        }
    }
}

#[cfg(test)]
mod tests;

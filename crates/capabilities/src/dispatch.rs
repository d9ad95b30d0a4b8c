//! The ladder every call walks, from every entrance: lookup → argument
//! coercion and validation → permission decision → approval round trip when
//! asked → implementation. Results and errors leave it scrubbed of the run's
//! secrets.

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::rc::Rc;

use futures::future::LocalBoxFuture;
use kiln_types::protocol::CallRequest;
use kiln_types::run::{Progress, RunLimits};
use kiln_types::tool_result::{CallOutcome, ToolFailure, ToolReply, Warning};
use serde_json::Value;

use crate::gate::{Answer, ApprovalRequest, AskReason, Decision, Gate, Refusal};
use crate::registry::Registry;
use crate::secrets::{SecretScope, redact_for_display};
use crate::spec::Category;

/// Proof that the ladder admitted a call. Only this module makes one, and an
/// [`crate::Implementation`] cannot be called without it:
///
/// ```compile_fail
/// let permit = kiln_capabilities::Permit(());
/// ```
#[derive(Debug)]
pub struct Permit(());

/// Says whether a call waits on a person (`true`) or no longer does. The
/// sandbox suspends the run's JS CPU clock and counts person wait meanwhile.
pub type HeldSignal = Rc<dyn Fn(bool)>;

/// What only the run knows, handed to an implementation at call time.
#[derive(Clone)]
pub struct CallContext {
    pub call_number: u32,
    pub tool: String,
    /// The run's secrets; an implementation outside this crate reads one
    /// through [`CallContext::secret`], which records that the call sent it.
    pub(crate) secrets: Rc<SecretScope>,
    pub run: Rc<RunState>,
    /// For an implementation that itself waits on a person.
    pub held: HeldSignal,
    /// The names of the secrets this call sent ([`CallContext::secret`]
    /// records them): what it answers is scrubbed of those whatever the
    /// program passed.
    pub used_secrets: Rc<RefCell<BTreeSet<String>>>,
}

impl CallContext {
    /// The run's secret `name`, for an implementation that sends it; the call
    /// is recorded as having sent it.
    pub fn secret(&self, name: &str) -> Result<&crate::secrets::Secret, String> {
        let secret = self.secrets.get(name)?;
        self.used_secrets.borrow_mut().insert(name.to_owned());
        Ok(secret)
    }
}

/// Told the number of each call as it reaches its implementation.
pub type StartObserver = Rc<dyn Fn(u32)>;

/// Told each progress report the program makes (`progress(percent, message)`).
pub type ProgressObserver = Rc<dyn Fn(&Progress)>;

/// Per-run counters capabilities share (the fetch budget), and which calls
/// reached their implementation: a run cancelled while a call is still in the
/// ladder (waiting on an approval, say) reports it `cancelled` (never sent),
/// one that reached its tool `outcome_unknown`.
pub struct RunState {
    pub limits: RunLimits,
    fetch_calls: Cell<u32>,
    started: RefCell<BTreeSet<u32>>,
    /// Calls waiting on the person's consent now (an approval asked).
    consent: RefCell<BTreeSet<u32>>,
    on_start: RefCell<Option<StartObserver>>,
    on_progress: RefCell<Option<ProgressObserver>>,
}

impl std::fmt::Debug for RunState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunState")
            .field("limits", &self.limits)
            .field("fetch_calls", &self.fetch_calls)
            .field("started", &self.started)
            .finish_non_exhaustive()
    }
}

impl RunState {
    #[must_use]
    pub fn new(limits: RunLimits) -> Self {
        Self {
            limits: limits.clamped(),
            fetch_calls: Cell::new(0),
            started: RefCell::default(),
            consent: RefCell::default(),
            on_start: RefCell::default(),
            on_progress: RefCell::default(),
        }
    }

    /// Whether call `call_number` reached its implementation.
    #[must_use]
    pub fn started(&self, call_number: u32) -> bool {
        self.started.borrow().contains(&call_number)
    }

    /// Whether call `call_number` waits on the person's consent now: a run
    /// ended meanwhile ends it `withdrawn` (held, and provably never started).
    #[must_use]
    pub fn awaiting_consent(&self, call_number: u32) -> bool {
        self.consent.borrow().contains(&call_number)
    }

    /// Tells `observer` the number of each call as it reaches its
    /// implementation (a host on another thread mirrors it).
    pub fn on_start(&self, observer: StartObserver) {
        *self.on_start.borrow_mut() = Some(observer);
    }

    fn start(&self, call_number: u32) {
        self.started.borrow_mut().insert(call_number);
        let observer = self.on_start.borrow().clone();
        if let Some(observer) = observer {
            observer(call_number);
        }
    }

    /// Tells `observer` each progress report the run's program makes (the
    /// entrance shows it: a code node's card, the CLI's line).
    pub fn on_progress(&self, observer: ProgressObserver) {
        *self.on_progress.borrow_mut() = Some(observer);
    }

    /// The program reported `progress`: its runner hands it on here.
    pub fn progress(&self, progress: &Progress) {
        let observer = self.on_progress.borrow().clone();
        if let Some(observer) = observer {
            observer(progress);
        }
    }

    /// Takes one request from the run's fetch budget, or says it is spent.
    pub fn take_fetch(&self, tool: &str, call_number: u32) -> Result<(), ToolFailure> {
        let used = self.fetch_calls.get();
        if used >= self.limits.fetch_calls {
            return Err(ToolFailure {
                code: "budget_exhausted:fetch_calls".into(),
                message: format!(
                    "{tool} (call {call_number}) was not sent: the run's budget of {} requests is spent",
                    self.limits.fetch_calls
                ),
                detail: None,
                outcome: CallOutcome::Refused,
            });
        }
        self.fetch_calls.set(used + 1);
        Ok(())
    }

    #[must_use]
    pub fn fetch_calls(&self) -> u32 {
        self.fetch_calls.get()
    }
}

/// One run's door to its capabilities.
pub struct Dispatcher {
    registry: Rc<Registry>,
    gate: Rc<Gate>,
    secrets: Rc<SecretScope>,
    run: Rc<RunState>,
    warnings: Vec<Warning>,
}

impl Dispatcher {
    /// `gate` is the host's; `None` is a bug the dispatcher reports as a
    /// warning and answers by failing closed (reads pass, the rest is denied).
    #[must_use]
    pub fn new(
        registry: Rc<Registry>,
        gate: Option<Rc<Gate>>,
        secrets: SecretScope,
        limits: RunLimits,
        entrance: &str,
    ) -> Self {
        let mut warnings = registry.warnings().to_vec();
        let gate = gate.unwrap_or_else(|| {
            warnings.push(Warning {
                code: "gate_missing".into(),
                message: format!(
                    "{entrance} set no permission gate (a bug): calls that need approval are denied"
                ),
                module: None,
                tool: None,
                index: None,
                reason: None,
            });
            Gate::fail_closed(entrance)
        });
        Self {
            registry,
            gate,
            secrets: Rc::new(secrets),
            run: Rc::new(RunState::new(limits)),
            warnings,
        }
    }

    /// The sandbox catalog of this run's capabilities.
    #[must_use]
    pub fn catalog(&self) -> Value {
        self.registry.catalog()
    }

    /// Warnings of the registry's sources and of this dispatcher.
    #[must_use]
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    #[must_use]
    pub fn run_state(&self) -> &Rc<RunState> {
        &self.run
    }

    /// Walks the ladder for one call.
    pub fn call(&self, call: CallRequest, held: HeldSignal) -> LocalBoxFuture<'static, ToolReply> {
        let CallRequest {
            call_number,
            tool,
            args,
        } = call;
        let named = format!("{tool} (call {call_number})");
        let entry = match self.registry.lookup(&tool) {
            Ok(entry) => entry.clone(),
            Err(why) => {
                return ready(Err(failure(
                    "tool_unavailable",
                    why,
                    CallOutcome::ToolUnavailable,
                )));
            }
        };
        // What the program itself passed: an echo of it is not scrubbed (see
        // `SecretScope::for_reply`).
        let passed = serde_json::to_string(&args).unwrap_or_default();
        let args = match entry.schema().check(&named, args) {
            Ok(args) => args,
            Err(error) => {
                let scrub = self.secrets.for_reply(&BTreeSet::new(), &passed);
                let message = scrub.redact_text(&error.message);
                return ready(Err(failure(error.code, message, CallOutcome::Error)));
            }
        };
        let category = entry.spec().category;
        let session_key = entry.spec().session_key();
        let decision = self.gate.decide_for(&tool, &session_key, category);
        let gate = self.gate.clone();
        let secrets = self.secrets.clone();
        let context = CallContext {
            call_number,
            tool: tool.clone(),
            secrets: secrets.clone(),
            run: self.run.clone(),
            held: held.clone(),
            used_secrets: Rc::default(),
        };
        let used = context.used_secrets.clone();
        let run = self.run.clone();
        Box::pin(async move {
            match decision {
                Decision::Allow => {}
                Decision::Refuse(refusal) => {
                    return Err(refused(&named, &tool, category, refusal));
                }
                Decision::Ask(reason) => {
                    let request = ApprovalRequest {
                        call_number,
                        tool: tool.clone(),
                        category,
                        module: entry.spec().source.module(),
                        description: entry.spec().description.clone(),
                        args: redact_for_display(&secrets, args.clone()),
                        reason,
                        host: gate.host().to_owned(),
                    };
                    let answer = ask(&gate, request, &held, &run).await;
                    admit(&gate, &named, &session_key, reason, answer)?;
                    // The settings may have changed while the person decided
                    // (a block, plan mode): what they refuse now stays refused.
                    if let Decision::Refuse(refusal) =
                        gate.decide_for(&tool, &session_key, category)
                    {
                        return Err(refused(&named, &tool, category, refusal));
                    }
                }
            }
            context.run.start(call_number);
            let reply = entry.implementation().call(args, context, Permit(())).await;
            let scrub = secrets.for_reply(&used.borrow(), &passed);
            match reply {
                Ok(value) => {
                    // An answer deeper than Kiln carries would break whoever
                    // reads it next (the guest's decode, a store's record): the
                    // call fails, catchably, and the run goes on.
                    if let Err(problem) = kiln_types::check_depth(&value) {
                        return Err(failure(
                            "invalid_result",
                            format!("{named} answered a value that {problem}"),
                            CallOutcome::Error,
                        ));
                    }
                    Ok(scrub.redact(value))
                }
                Err(mut failure) => {
                    failure.message = scrub.redact_text(&failure.message);
                    // A refusal's detail crosses like an answer: held to the same depth.
                    if let Some(problem) = failure
                        .detail
                        .as_ref()
                        .and_then(|detail| kiln_types::check_depth(detail).err())
                    {
                        return Err(self::failure(
                            "invalid_result",
                            format!(
                                "{named} failed ({}: {}) with a detail that {problem}",
                                failure.code, failure.message
                            ),
                            CallOutcome::Error,
                        ));
                    }
                    failure.detail = failure.detail.map(|detail| scrub.redact(detail));
                    Err(failure)
                }
            }
        })
    }
}

/// Holds a call on a person until dropped: the hold ends whether the answer
/// came or the call was given up (its future dropped).
struct Hold(HeldSignal);

impl Hold {
    fn start(held: &HeldSignal) -> Self {
        held(true);
        Self(held.clone())
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        (self.0)(false);
    }
}

/// Marks a call as waiting on consent until dropped.
struct Awaiting(Rc<RunState>, u32);

impl Drop for Awaiting {
    fn drop(&mut self) {
        if let Ok(mut consent) = self.0.consent.try_borrow_mut() {
            consent.remove(&self.1);
        }
    }
}

async fn ask(
    gate: &Gate,
    request: ApprovalRequest,
    held: &HeldSignal,
    run: &Rc<RunState>,
) -> Answer {
    let approver = gate.approver();
    let person = approver.is_person();
    let _hold = person.then(|| Hold::start(held));
    let _awaiting = person.then(|| {
        run.consent.borrow_mut().insert(request.call_number);
        Awaiting(run.clone(), request.call_number)
    });
    approver.ask(request).await
}

/// The refusal of `named` by a mode or a setting, worded as deliberate.
fn refused(named: &str, tool: &str, category: Category, refusal: Refusal) -> ToolFailure {
    let message = match refusal {
        Refusal::PlanMode => format!(
            "{named} was refused: plan mode runs only read calls, and {tool} is {} {category} \
             tool. This is a deliberate setting; ask the person to change the mode if the action \
             is needed",
            if category == Category::External {
                "an"
            } else {
                "a"
            }
        ),
        Refusal::Blocked => format!(
            "{named} was refused: the person has blocked {tool} for this agent. The restriction \
             is deliberate: do not try to work around it; report it to the person"
        ),
    };
    failure("refused", message, CallOutcome::Refused)
}

fn admit(
    gate: &Gate,
    named: &str,
    session_key: &str,
    reason: AskReason,
    answer: Answer,
) -> Result<(), ToolFailure> {
    match answer {
        Answer::Approve => Ok(()),
        // Under the brake, "for this session" is an approval of this call
        // only: the brake asks every time, and an allowance kept in the
        // meantime would quietly outlast it.
        Answer::AllowForSession if reason == AskReason::Brake => Ok(()),
        Answer::AllowForSession => {
            gate.allow_for_session(session_key);
            Ok(())
        }
        Answer::Deny => Err(failure(
            "denied",
            format!("{named} was denied by the person asked to approve it"),
            CallOutcome::Denied,
        )),
        Answer::Unavailable { reason: nobody } => Err(failure(
            "consent_unavailable",
            format!(
                "{named} needs approval ({}), and nobody could be asked: {nobody}",
                reason.sentence()
            ),
            CallOutcome::ConsentUnavailable,
        )),
    }
}

fn failure(code: &str, message: String, outcome: CallOutcome) -> ToolFailure {
    ToolFailure {
        code: code.to_owned(),
        message,
        detail: None,
        outcome,
    }
}

fn ready(reply: ToolReply) -> LocalBoxFuture<'static, ToolReply> {
    Box::pin(async move { reply })
}

//! The permission ladder's decision half: one pure function over mode,
//! category, per-tool autonomy, the auto-run brake and the session allow-set,
//! and the [`Gate`] a host publishes so that every loop under it reads the
//! same settings and the same allow-set by reference.
//!
//! Behaviour from the reference ("Where the permission gate is set",
//! `decidePermission`/`gatedCall`; "Autonomy" and "The workspace brake"):
//! read-class calls take the fast path; plan blocks what mutates or reaches
//! out; default asks for it; auto allows. A per-tool setting runs without
//! asking, asks, or blocks, for built-ins too; `return_result` cannot be
//! blocked. The brake drops auto-approval of code-execution tools and asks
//! instead, outranking the agent's autonomy and the session allow-set, and
//! releasing it restores the rules exactly (nothing is rewritten).
//!
//! Who answers when the ladder asks is the host's [`Approver`]: its person,
//! [`Fixed`] (the same answer every time) or [`Headless`] (nobody: every
//! question is answered "unavailable", naming the host).

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fmt;
use std::rc::Rc;

use futures::future::LocalBoxFuture;

use crate::spec::Category;
pub use kiln_types::permission::{
    Answer, ApprovalRequest, AskReason, Autonomy, GateSettings, Mode, RETURN_RESULT,
    blocking_return_result,
};

/// Why the ladder refuses without asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Plan mode blocks what mutates or reaches out.
    PlanMode,
    /// The tool's setting is block.
    Blocked,
}

/// What the ladder does with one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Ask(AskReason),
    Refuse(Refusal),
}

/// Everything one decision reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Situation<'a> {
    pub tool: &'a str,
    pub category: Category,
    pub mode: Mode,
    pub autonomy: Option<Autonomy>,
    pub brake: bool,
    pub session_allowed: bool,
}

/// The decision, as one pure function of the situation.
#[must_use]
pub fn decide(situation: Situation<'_>) -> Decision {
    let Situation {
        tool,
        category,
        mode,
        autonomy,
        brake,
        session_allowed,
    } = situation;
    // `return_result` cannot be blocked: a block on it means "follow the
    // mode" (it is still asked for or refused like any other call).
    let autonomy = match autonomy {
        Some(Autonomy::Block) if tool == RETURN_RESULT => None,
        other => other,
    };
    if autonomy == Some(Autonomy::Block) {
        return Decision::Refuse(Refusal::Blocked);
    }
    if mode == Mode::Plan && category != Category::Read {
        return Decision::Refuse(Refusal::PlanMode);
    }
    if brake && category == Category::Execute {
        return Decision::Ask(AskReason::Brake);
    }
    let decided = match autonomy {
        Some(Autonomy::Ask) => Decision::Ask(AskReason::Setting),
        Some(Autonomy::Auto) => Decision::Allow,
        Some(Autonomy::Block) | None => match (category, mode) {
            (Category::Read, _) | (_, Mode::Auto) => Decision::Allow,
            _ => Decision::Ask(AskReason::Mode),
        },
    };
    match decided {
        Decision::Ask(_) if session_allowed => Decision::Allow,
        other => other,
    }
}

/// Who answers when the ladder asks.
pub trait Approver {
    fn ask(&self, request: ApprovalRequest) -> LocalBoxFuture<'static, Answer>;

    /// Whether a person answers (the wait then counts as person wait and the
    /// run's JS CPU clock is suspended); fixed and headless approvers answer
    /// at once.
    fn is_person(&self) -> bool {
        true
    }
}

/// Nobody to ask: every question is answered "unavailable", naming the host.
#[derive(Debug, Clone)]
pub struct Headless {
    host: String,
}

impl Headless {
    #[must_use]
    pub fn new(host: impl Into<String>) -> Self {
        Self { host: host.into() }
    }

    /// The sentence a headless host can print once at the start.
    #[must_use]
    pub fn reason(&self) -> String {
        format!(
            "{} has nobody to ask for approval, so its gate denies every call that needs it",
            self.host
        )
    }
}

impl Approver for Headless {
    fn ask(&self, _request: ApprovalRequest) -> LocalBoxFuture<'static, Answer> {
        let reason = self.reason();
        Box::pin(async move { Answer::Unavailable { reason } })
    }

    fn is_person(&self) -> bool {
        false
    }
}

/// The same answer every time (`kiln run --approve yes|no`).
#[derive(Debug, Clone)]
pub struct Fixed(pub Answer);

impl Approver for Fixed {
    fn ask(&self, _request: ApprovalRequest) -> LocalBoxFuture<'static, Answer> {
        let answer = self.0.clone();
        Box::pin(async move { answer })
    }

    fn is_person(&self) -> bool {
        false
    }
}

/// The tools a person allowed "for this session": shared by reference by
/// every gate and loop of one session.
pub type SessionAllow = Rc<RefCell<BTreeSet<String>>>;

/// The gate a host publishes: settings, the session allow-set and the
/// approver, shared by reference with every loop and run under the host, so a
/// mode change or an "allow for this session" reaches runs already going.
pub struct Gate {
    host: String,
    settings: RefCell<GateSettings>,
    session_allow: SessionAllow,
    approver: Rc<dyn Approver>,
}

impl fmt::Debug for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gate")
            .field("host", &self.host)
            .field("settings", &self.settings)
            .field("session_allow", &self.session_allow)
            .finish_non_exhaustive()
    }
}

impl Gate {
    /// A gate whose questions go to `approver`.
    pub fn new(
        host: impl Into<String>,
        settings: GateSettings,
        approver: Rc<dyn Approver>,
    ) -> Result<Rc<Self>, String> {
        Self::in_session(host, settings, approver, SessionAllow::default())
    }

    /// A gate of an existing session: "allow for this session" answers given
    /// under any gate of `session` hold here too.
    pub fn in_session(
        host: impl Into<String>,
        settings: GateSettings,
        approver: Rc<dyn Approver>,
        session: SessionAllow,
    ) -> Result<Rc<Self>, String> {
        settings.check()?;
        Ok(Rc::new(Self {
            host: host.into(),
            settings: RefCell::new(settings),
            session_allow: session,
            approver,
        }))
    }

    /// A gate like this one (same host, approver and session allow-set) whose
    /// settings are these settings as `adjust` leaves them, read now: what a
    /// plan step's own `execute_code` is decided by once the person approved
    /// the plan.
    #[must_use]
    pub fn derived(&self, adjust: impl FnOnce(&mut GateSettings)) -> Rc<Self> {
        let mut settings = self.settings();
        adjust(&mut settings);
        if settings.check().is_err() {
            settings = self.settings();
        }
        Rc::new(Self {
            host: self.host.clone(),
            settings: RefCell::new(settings),
            session_allow: self.session_allow.clone(),
            approver: self.approver.clone(),
        })
    }

    /// A host with nobody to ask: it keeps its mode, and every question is
    /// answered "unavailable" naming the host.
    pub fn headless(host: impl Into<String>, settings: GateSettings) -> Result<Rc<Self>, String> {
        let host = host.into();
        Self::new(host.clone(), settings, Rc::new(Headless::new(host)))
    }

    /// What an entrance uses when its host set no gate: a bug, so it fails
    /// closed — reads pass, everything else asks nobody and is denied.
    #[must_use]
    pub fn fail_closed(entrance: &str) -> Rc<Self> {
        let host = format!("{entrance} (no gate was set: a bug; failing closed)");
        Rc::new(Self {
            host: host.clone(),
            settings: RefCell::new(GateSettings::default()),
            session_allow: SessionAllow::default(),
            approver: Rc::new(Headless::new(host)),
        })
    }

    #[must_use]
    pub fn host(&self) -> &str {
        &self.host
    }

    #[must_use]
    pub fn settings(&self) -> GateSettings {
        self.settings.borrow().clone()
    }

    pub fn set_mode(&self, mode: Mode) {
        self.settings.borrow_mut().mode = mode;
    }

    /// Puts `settings` in place of the current ones: the next call decides
    /// by them. Settings the gate would not honour are refused by name and
    /// change nothing.
    pub fn set_settings(&self, settings: &GateSettings) -> Result<(), String> {
        settings.check()?;
        *self.settings.borrow_mut() = settings.clone();
        Ok(())
    }

    pub fn set_brake(&self, engaged: bool) {
        self.settings.borrow_mut().brake = engaged;
    }

    /// Sets or clears (`None`) one tool's rule.
    pub fn set_autonomy(&self, tool: &str, autonomy: Option<Autonomy>) -> Result<(), String> {
        if tool == RETURN_RESULT && autonomy == Some(Autonomy::Block) {
            return Err(blocking_return_result());
        }
        let mut settings = self.settings.borrow_mut();
        match autonomy {
            Some(autonomy) => settings.autonomy.insert(tool.to_owned(), autonomy),
            None => settings.autonomy.remove(tool),
        };
        Ok(())
    }

    /// Remembers "allow for this session" under `key` (a tool's session key).
    pub fn allow_for_session(&self, key: &str) {
        self.session_allow.borrow_mut().insert(key.to_owned());
    }

    #[must_use]
    pub fn session_allowed(&self, key: &str) -> bool {
        self.session_allow.borrow().contains(key)
    }

    /// The ladder's decision for `tool` now, its session answer looked up
    /// under the tool's own name.
    #[must_use]
    pub fn decide(&self, tool: &str, category: Category) -> Decision {
        self.decide_for(tool, tool, category)
    }

    /// The ladder's decision for `tool` now, its session answer looked up
    /// under `session_key` (`CapabilitySpec::session_key`: source and name).
    #[must_use]
    pub fn decide_for(&self, tool: &str, session_key: &str, category: Category) -> Decision {
        let settings = self.settings.borrow();
        decide(Situation {
            tool,
            category,
            mode: settings.mode,
            autonomy: settings.autonomy.get(tool).copied(),
            brake: settings.brake,
            session_allowed: self.session_allowed(session_key),
        })
    }

    pub(crate) fn approver(&self) -> Rc<dyn Approver> {
        self.approver.clone()
    }
}

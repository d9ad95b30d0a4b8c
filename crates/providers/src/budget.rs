//! The run budget: one object per run, shared by every loop of the run (a chat turn, a
//! sub-agent, a plan step), that admits or refuses each model turn against the run's USD
//! cap, deadline, turn count and token total, and records what was spent.
//!
//! Spend admission is reserve-then-commit. The reference puts the reason as "the next
//! call's cost is only known afterwards: $0.49 spent under a $0.50 cap still admits a $0.30
//! call" — that is the failure of checking what was *spent*: $0.49 is under the cap, so the
//! call is let through and the run lands at $0.79. So [`RunBudget::reserve`] holds the
//! turn's worst case (whole prompt plus every token `max_tokens` allows) and refuses "a turn
//! whose worst case would cross the USD cap" (the reference's table): admitted only while
//! `spent + held by turns in flight + this worst case <= cap`. With $0.49 spent under a $0.50
//! cap, a turn whose worst case is $0.30 is refused and one whose worst case is $0.01 is
//! admitted. [`Reservation::commit`] then replaces the hold by the actual cost.
//!
//! **Invariant:** a reservation settles only itself. Each turn in flight holds its own worst
//! case under its own pricing, so a chat turn committing never hands back a concurrent
//! sub-agent's headroom, and the cap keeps holding while loops overlap.
//!
//! An unpriced model (not in the [`PriceCatalog`]) has no worst case to reserve: under a USD
//! cap it is admitted only while its prompt fits [`BudgetLimits::unpriced_token_ceiling`],
//! and once it ran, [`Spend::spent_usd`] is a declared lower bound. With no USD cap there is
//! nothing for the ceiling to protect and it does not apply; the deadline and the turn count
//! still bound the run.
//!
//! No budget at all (`Option<RunBudget>` is `None`) means unbudgeted, not exhausted.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::rc::Rc;

use futures::future::LocalBoxFuture;
use kiln_http::Clock;

use serde::{Deserialize, Serialize};

use crate::cost::{CallCost, Price, PriceCatalog};
use crate::event::{Stop, StopReason, Usage};
use crate::permits::PermitPool;

/// The unpriced token ceiling when none is configured.
pub const DEFAULT_UNPRICED_TOKEN_CEILING: u64 = 32_000;

/// Float sums of dollar amounts drift in the last bits (0.1 + 0.2 > 0.3); a turn that lands
/// the run exactly on its cap is admitted, so the comparison allows a billionth of a dollar.
const USD_TOLERANCE: f64 = 1e-9;

/// What bounds one run. The default bounds nothing but unpriced turns under a USD cap:
/// no USD cap, no deadline, no turn limit, an unpriced token ceiling of
/// [`DEFAULT_UNPRICED_TOKEN_CEILING`].
///
/// A cap or deadline that is not a number (NaN) refuses every turn it governs rather than
/// none.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BudgetLimits {
    /// The most the run may spend, in USD.
    pub max_usd: Option<f64>,
    /// How long the run may last, in milliseconds from the budget's creation.
    pub deadline_ms: Option<f64>,
    /// How many model turns the run may take, over all its loops (a job's sub-agents and
    /// plan steps included: a child's turns are its job's).
    pub max_turns: Option<u32>,
    /// How many tokens (input and output, as the providers report them) the run may use over
    /// all its loops: a turn is refused once they are used up. What bounds an unpriced model
    /// under a USD cap, with the turn count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Under a USD cap, the largest prompt (estimated tokens) a turn on an unpriced model may
    /// send.
    pub unpriced_token_ceiling: u64,
    /// How many provider conversations the run has open at once (its permit pool:
    /// [`crate::permits`]); [`crate::permits::DEFAULT_MAX_CONCURRENCY`] when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
}

impl Default for BudgetLimits {
    fn default() -> Self {
        Self {
            max_usd: None,
            deadline_ms: None,
            max_turns: None,
            max_tokens: None,
            unpriced_token_ceiling: DEFAULT_UNPRICED_TOKEN_CEILING,
            max_concurrency: None,
        }
    }
}

/// What the run has spent so far.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spend {
    /// Committed spend in USD, of priced turns.
    pub spent_usd: f64,
    /// Some committed turn was unpriced, so `spent_usd` is a lower bound.
    pub lower_bound: bool,
    /// Committed turns on a model the catalog does not price.
    pub unpriced_turns: u32,
    /// Turns admitted, committed or not.
    pub turns: u32,
    /// Input and output tokens of the committed turns.
    pub tokens: u64,
    /// USD held by turns in flight (admitted, not yet committed or dropped).
    pub held_usd: f64,
    /// Why the run was first refused; set once.
    pub exhausted: Option<StopReason>,
    /// Every committed call, in commit order.
    pub calls: Vec<CallCost>,
}

/// The run's budget. Cloning gives the *same* budget: a child loop gets a clone of its
/// parent's, never a new one, which is what makes a cap a run total.
#[derive(Clone)]
pub struct RunBudget {
    state: Rc<RefCell<State>>,
    catalog: Rc<PriceCatalog>,
    clock: Rc<dyn Clock>,
    permits: PermitPool,
}

struct State {
    limits: BudgetLimits,
    /// The clock's reading at creation plus `deadline_ms`.
    deadline_at: Option<f64>,
    spent_usd: f64,
    /// The worst case each turn in flight holds, by hold id.
    holds: BTreeMap<u64, f64>,
    next_hold: u64,
    turns: u32,
    /// Input and output tokens of the committed turns.
    tokens: u64,
    unpriced_turns: u32,
    exhausted: Option<Stop>,
    calls: Vec<CallCost>,
}

impl RunBudget {
    /// A budget starting now on `clock` (the host's [`kiln_http::SystemClock`], a test's
    /// `FakeClock`): the deadline is the clock's reading now plus `limits.deadline_ms`, and a
    /// turn's deadline timer sleeps on the same clock.
    pub fn new(limits: BudgetLimits, catalog: Rc<PriceCatalog>, clock: Rc<dyn Clock>) -> Self {
        let deadline_at = limits
            .deadline_ms
            .map(|deadline_ms| clock.now_ms() + deadline_ms);
        Self {
            state: Rc::new(RefCell::new(State {
                limits,
                deadline_at,
                spent_usd: 0.0,
                holds: BTreeMap::new(),
                next_hold: 0,
                turns: 0,
                tokens: 0,
                unpriced_turns: 0,
                exhausted: None,
                calls: Vec::new(),
            })),
            catalog,
            clock,
            permits: PermitPool::new(
                limits
                    .max_concurrency
                    .unwrap_or(crate::permits::DEFAULT_MAX_CONCURRENCY),
            ),
        }
    }

    /// The run's permit pool: one permit per open provider conversation, shared by every
    /// loop of the run.
    pub fn permits(&self) -> &PermitPool {
        &self.permits
    }

    /// The single admission point for a model turn on `model` whose prompt is about
    /// `prompt_tokens` (see [`crate::cost::estimate_prompt_tokens`]) and which may write up to
    /// `max_tokens`. Checks, in order: the deadline ([`StopReason::Deadline`]), the turn count
    /// ([`StopReason::Turns`]), then the USD cap ([`StopReason::Budget`]) — for a priced model
    /// its worst case against what is spent and held, for an unpriced one its prompt against
    /// the unpriced token ceiling. An admitted turn counts against the turn limit; a refused
    /// one does not. The first refusal is recorded as the run's exhausted reason.
    pub fn reserve(
        &self,
        model: &str,
        prompt_tokens: u64,
        max_tokens: u32,
    ) -> Result<Reservation, Stop> {
        let now = self.clock.now_ms();
        let price = self.catalog.price(model);
        let mut state = self.state.borrow_mut();
        state.check_deadline(now)?;
        if let Some(max_turns) = state.limits.max_turns
            && state.turns >= max_turns
        {
            let message = if max_turns == 1 {
                "the run has used its only turn".to_owned()
            } else {
                format!("the run has used all {max_turns} of its turns")
            };
            let message = format!("{message}{}", state.unpriced_note());
            return Err(state.refuse(StopReason::Turns, message));
        }
        if let Some(max_tokens) = state.limits.max_tokens
            && state.tokens >= max_tokens
        {
            let message = format!(
                "the run has used {} of its {} tokens{}",
                group_thousands(state.tokens),
                group_thousands(max_tokens),
                state.unpriced_note()
            );
            return Err(state.refuse(StopReason::Budget, message));
        }
        let worst_case_usd = match price {
            Some(price) => {
                let worst_case_usd = price.worst_case_usd(prompt_tokens, max_tokens);
                if let Some(max_usd) = state.limits.max_usd {
                    let held_usd = state.held_usd();
                    let total = state.spent_usd + held_usd + worst_case_usd;
                    // Written so that a NaN cap refuses: every comparison with NaN is false.
                    let fits = total <= max_usd + USD_TOLERANCE;
                    if !fits {
                        let held = if held_usd > 0.0 {
                            format!(", {} held by turns in flight,", format_usd(held_usd))
                        } else {
                            String::new()
                        };
                        let message = format!(
                            "the run's budget of {} cannot cover this turn: {} spent{held} and \
                             this turn may cost up to {} (model `{model}`, ~{} prompt tokens + \
                             {} max tokens)",
                            format_usd(max_usd),
                            format_usd(state.spent_usd),
                            format_usd(worst_case_usd),
                            group_thousands(prompt_tokens),
                            group_thousands(u64::from(max_tokens)),
                        );
                        return Err(state.refuse(StopReason::Budget, message));
                    }
                }
                worst_case_usd
            }
            None => {
                let ceiling = state.limits.unpriced_token_ceiling;
                if state.limits.max_usd.is_some() && prompt_tokens > ceiling {
                    let message = format!(
                        "model `{model}` has no price in the catalog, so a turn is admitted only \
                         while its prompt fits {} tokens; this one is ~{}",
                        group_thousands(ceiling),
                        group_thousands(prompt_tokens),
                    );
                    return Err(state.refuse(StopReason::Budget, message));
                }
                0.0
            }
        };
        let hold_id = state.next_hold;
        state.next_hold += 1;
        state.holds.insert(hold_id, worst_case_usd);
        state.turns = state.turns.saturating_add(1);
        Ok(Reservation {
            state: Rc::clone(&self.state),
            hold_id,
            model: model.to_owned(),
            price,
            worst_case_usd,
        })
    }

    /// Refuses once the deadline has passed (for tool calls, and checks in the middle of a
    /// stream). A refusal is recorded like one from [`RunBudget::reserve`].
    pub fn check_deadline(&self) -> Result<(), Stop> {
        let now = self.clock.now_ms();
        self.state.borrow_mut().check_deadline(now)
    }

    /// Milliseconds until the deadline (zero once it passed), or `None` without one.
    pub fn remaining_ms(&self) -> Option<f64> {
        let now = self.clock.now_ms();
        let deadline_at = self.state.borrow().deadline_at?;
        Some((deadline_at - now).max(0.0))
    }

    /// A timer that ends when the deadline comes, on the budget's clock; `None` without a
    /// deadline.
    pub fn deadline_timer(&self) -> Option<LocalBoxFuture<'static, ()>> {
        let deadline_at = self.state.borrow().deadline_at?;
        Some(self.clock.sleep_until(deadline_at))
    }

    /// The limits this budget was created with.
    pub fn limits(&self) -> BudgetLimits {
        self.state.borrow().limits
    }

    /// The run's first refusal, with its sentence: why the run stopped.
    pub fn exhausted(&self) -> Option<Stop> {
        self.state.borrow().exhausted.clone()
    }

    /// What the run has spent, held and been refused so far.
    pub fn spend(&self) -> Spend {
        let state = self.state.borrow();
        Spend {
            spent_usd: state.spent_usd,
            lower_bound: state.unpriced_turns > 0,
            unpriced_turns: state.unpriced_turns,
            turns: state.turns,
            tokens: state.tokens,
            held_usd: state.held_usd(),
            exhausted: state.exhausted.as_ref().map(|stop| stop.reason.clone()),
            calls: state.calls.clone(),
        }
    }
}

impl fmt::Debug for RunBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunBudget")
            .field("limits", &self.limits())
            .field("spend", &self.spend())
            .finish_non_exhaustive()
    }
}

impl State {
    fn held_usd(&self) -> f64 {
        self.holds.values().sum()
    }

    /// Said when a USD cap could not bound the run: some turn was on a model the catalog
    /// does not price, so the turns and tokens were what bounded it.
    fn unpriced_note(&self) -> &'static str {
        if self.limits.max_usd.is_some() && self.unpriced_turns > 0 {
            " (an unpriced model's turns cost nothing the USD cap can count, so the run's turns \
             and tokens bound it)"
        } else {
            ""
        }
    }

    fn check_deadline(&mut self, now: f64) -> Result<(), Stop> {
        let (Some(deadline_at), Some(deadline_ms)) = (self.deadline_at, self.limits.deadline_ms)
        else {
            return Ok(());
        };
        // Written so that a NaN deadline has passed.
        if now < deadline_at {
            return Ok(());
        }
        let message = format!(
            "the run's deadline of {} s has passed",
            format_seconds(deadline_ms)
        );
        Err(self.refuse(StopReason::Deadline, message))
    }

    /// A refusal; the first one is kept as the run's exhausted reason, so a run that ran out
    /// of money and then out of time stopped for the money.
    fn refuse(&mut self, reason: StopReason, message: String) -> Stop {
        let stop = Stop {
            reason,
            message: Some(message),
        };
        if self.exhausted.is_none() {
            self.exhausted = Some(stop.clone());
        }
        stop
    }
}

/// One admitted turn's hold on the budget: its own worst case under its own pricing.
/// [`Reservation::commit`] settles exactly this turn; dropping it uncommitted (the turn
/// failed) releases its hold and books nothing.
pub struct Reservation {
    state: Rc<RefCell<State>>,
    hold_id: u64,
    model: String,
    price: Option<Price>,
    worst_case_usd: f64,
}

impl Reservation {
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The price this turn was admitted under; `None` for an unpriced model.
    pub fn price(&self) -> Option<Price> {
        self.price
    }

    /// The USD this turn holds against the cap (zero for an unpriced model).
    pub fn worst_case_usd(&self) -> f64 {
        self.worst_case_usd
    }

    /// Settles this turn with the usage its provider reported: releases this turn's hold
    /// (no other) and books its actual cost under its own price. An unpriced turn books
    /// nothing and makes the run's spend a lower bound.
    pub fn commit(self, usage: Usage) -> CallCost {
        self.settle(usage, false)
    }

    /// [`Reservation::commit`] with usage Kiln estimated (the provider did not report it,
    /// or the turn was cut first); the call is marked `estimated`.
    pub fn commit_estimated(self, usage: Usage) -> CallCost {
        self.settle(usage, true)
    }

    fn settle(self, usage: Usage, estimated: bool) -> CallCost {
        let call = CallCost {
            model: self.model.clone(),
            usage,
            usd: self.price.map(|price| price.cost_usd(usage)),
            estimated,
        };
        let mut state = self.state.borrow_mut();
        state.holds.remove(&self.hold_id);
        state.tokens = state
            .tokens
            .saturating_add(usage.input_tokens)
            .saturating_add(usage.output_tokens);
        match call.usd {
            Some(usd) => state.spent_usd += usd,
            None => state.unpriced_turns = state.unpriced_turns.saturating_add(1),
        }
        state.calls.push(call.clone());
        call
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        // Removing a hold is idempotent, so this is a no-op after `commit`. Were the state
        // ever borrowed here, the hold would stay: a stricter cap, never a looser one.
        if let Ok(mut state) = self.state.try_borrow_mut() {
            state.holds.remove(&self.hold_id);
        }
    }
}

impl fmt::Debug for Reservation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation")
            .field("model", &self.model)
            .field("price", &self.price)
            .field("worst_case_usd", &self.worst_case_usd)
            .finish_non_exhaustive()
    }
}

/// `$0.49`, `$0.0042`: cents, with up to four decimals where they matter.
#[must_use]
pub fn format_usd(usd: f64) -> String {
    format!("${}", trim_decimals(format!("{usd:.4}"), 2))
}

/// `120`, `1.5`, `0.25`.
fn format_seconds(ms: f64) -> String {
    trim_decimals(format!("{:.3}", ms / 1000.0), 0)
}

/// Drops trailing zeros after the point, keeping at least `keep` decimals.
fn trim_decimals(mut text: String, keep: usize) -> String {
    let Some(point) = text.find('.') else {
        return text;
    };
    while text.len() > point + 1 + keep && text.ends_with('0') {
        text.pop();
    }
    if text.ends_with('.') {
        text.pop();
    }
    text
}

/// `12000` → `12,000`.
#[must_use]
pub fn group_thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut grouped = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    grouped
}

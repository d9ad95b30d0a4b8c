//! The run budget and the price catalog, as data where it fits: admission cases, catalog
//! lookups and catalog errors are tables; the sharing rules (concurrent reservations, drop,
//! clones, the first exhausted reason) are short stories against a fake clock.

use std::rc::Rc;

use futures::FutureExt as _;
use kiln_http::FakeClock;
use kiln_providers::budget::{BudgetLimits, RunBudget, Spend};
use kiln_providers::cost::{
    BUILTIN_PRICES_JSON, CallCost, Price, PriceCatalog, estimate_prompt_tokens,
};
use kiln_providers::{ChatOptions, ChatRequest, Message, StopReason, ToolCall, ToolDef, Usage};
use serde_json::json;

/// A model at one cent a token, input or output, so amounts read as token counts.
const CENT: &str = "cent";
/// A model the catalog does not price.
const UNPRICED: &str = "mystery-model";

fn catalog() -> Rc<PriceCatalog> {
    Rc::new(PriceCatalog::builtin().with(
        CENT,
        Price {
            input_per_mtok: 10_000.0,
            output_per_mtok: 10_000.0,
        },
    ))
}

fn budget_with(limits: BudgetLimits) -> RunBudget {
    RunBudget::new(limits, catalog(), Rc::new(FakeClock::new()))
}

fn capped(max_usd: f64) -> RunBudget {
    budget_with(BudgetLimits {
        max_usd: Some(max_usd),
        ..BudgetLimits::default()
    })
}

/// Spends `cents` on the cent model through a committed turn.
fn spend_cents(budget: &RunBudget, cents: u64) {
    let Ok(reservation) = budget.reserve(CENT, cents, 0) else {
        panic!("spending {cents} cents was refused");
    };
    reservation.commit(Usage {
        input_tokens: cents,
        output_tokens: 0,
    });
}

fn usd_eq(actual: f64, expected: f64) -> bool {
    (actual - expected).abs() < 1e-9
}

#[test]
fn admission_reserves_the_worst_case_against_spent_and_held() {
    struct Case {
        name: &'static str,
        max_usd: Option<f64>,
        spent_cents: u64,
        held_cents: u32,
        worst_cents: u32,
        admitted: bool,
    }
    let cases = [
        Case {
            name: "the reference's example: $0.49 spent, $0.50 cap, a $0.30 worst case",
            max_usd: Some(0.50),
            spent_cents: 49,
            held_cents: 0,
            worst_cents: 30,
            admitted: false,
        },
        Case {
            name: "a turn that lands exactly on the cap",
            max_usd: Some(0.50),
            spent_cents: 49,
            held_cents: 0,
            worst_cents: 1,
            admitted: true,
        },
        Case {
            name: "one cent past the cap",
            max_usd: Some(0.50),
            spent_cents: 49,
            held_cents: 0,
            worst_cents: 2,
            admitted: false,
        },
        Case {
            name: "turns in flight count like spend",
            max_usd: Some(0.50),
            spent_cents: 20,
            held_cents: 20,
            worst_cents: 11,
            admitted: false,
        },
        Case {
            name: "the whole cap on the first turn",
            max_usd: Some(0.50),
            spent_cents: 0,
            held_cents: 0,
            worst_cents: 50,
            admitted: true,
        },
        Case {
            name: "no cap admits any worst case",
            max_usd: None,
            spent_cents: 1_000,
            held_cents: 1_000,
            worst_cents: 1_000_000,
            admitted: true,
        },
    ];
    for case in cases {
        let budget = budget_with(BudgetLimits {
            max_usd: case.max_usd,
            ..BudgetLimits::default()
        });
        spend_cents(&budget, case.spent_cents);
        let _held = budget.reserve(CENT, 0, case.held_cents).unwrap();
        let answer = budget.reserve(CENT, 0, case.worst_cents);
        assert_eq!(answer.is_ok(), case.admitted, "{}: {answer:?}", case.name);
        if let Err(stop) = answer {
            assert_eq!(stop.reason, StopReason::Budget, "{}", case.name);
        }
    }
}

#[test]
fn refusals_say_why_with_the_numbers() {
    let clock = FakeClock::new();
    let limits = BudgetLimits {
        max_usd: Some(0.50),
        deadline_ms: Some(120_000.0),
        max_turns: Some(20),
        ..BudgetLimits::default()
    };

    let budget = RunBudget::new(limits, catalog(), Rc::new(clock.clone()));
    spend_cents(&budget, 20);
    let _in_flight = budget.reserve(CENT, 0, 10).unwrap();
    let stop = budget.reserve(CENT, 10, 20).unwrap_err();
    assert_eq!(
        stop.message.as_deref(),
        Some(
            "the run's budget of $0.50 cannot cover this turn: $0.20 spent, $0.10 held by turns \
             in flight, and this turn may cost up to $0.30 (model `cent`, ~10 prompt tokens + 20 \
             max tokens)"
        )
    );

    let budget = RunBudget::new(limits, catalog(), Rc::new(clock.clone()));
    let admitted = budget.reserve("gpt-4o", 12_000, 4_096).map(drop);
    assert!(
        admitted.is_ok(),
        "gpt-4o's worst case here is $0.07096: {admitted:?}"
    );
    let stop = budget.reserve("gpt-4o", 200_000, 4_096).unwrap_err();
    assert_eq!(
        stop.message.as_deref(),
        Some(
            "the run's budget of $0.50 cannot cover this turn: $0.00 spent and this turn may \
             cost up to $0.541 (model `gpt-4o`, ~200,000 prompt tokens + 4,096 max tokens)"
        )
    );

    let stop = budget.reserve(UNPRICED, 40_000, 1_024).unwrap_err();
    assert_eq!(
        stop.message.as_deref(),
        Some(
            "model `mystery-model` has no price in the catalog, so a turn is admitted only while \
             its prompt fits 32,000 tokens; this one is ~40,000"
        )
    );

    let budget = RunBudget::new(limits, catalog(), Rc::new(clock.clone()));
    for _ in 0..20 {
        budget.reserve(CENT, 0, 0).unwrap();
    }
    let stop = budget.reserve(CENT, 0, 0).unwrap_err();
    assert_eq!(
        stop.message.as_deref(),
        Some("the run has used all 20 of its turns")
    );

    clock.advance(120_000.0);
    let stop = budget.check_deadline().unwrap_err();
    assert_eq!(
        stop.message.as_deref(),
        Some("the run's deadline of 120 s has passed")
    );
}

#[test]
fn concurrent_reservations_settle_only_themselves() {
    let budget = capped(1.00);
    let chat_turn = budget.reserve(CENT, 0, 40).unwrap();
    let sub_agent = budget.reserve(CENT, 0, 40).unwrap();
    assert!(usd_eq(budget.spend().held_usd, 0.80));

    let cost = chat_turn.commit(Usage {
        input_tokens: 0,
        output_tokens: 10,
    });
    assert!(usd_eq(cost.usd.unwrap(), 0.10));
    let spend = budget.spend();
    assert!(usd_eq(spend.spent_usd, 0.10));
    assert!(
        usd_eq(spend.held_usd, 0.40),
        "the sub-agent's hold still counts: {spend:?}"
    );

    // $0.10 spent + $0.40 held + $0.60 = $1.10: over the cap only because the hold stayed.
    let refused = budget.reserve(CENT, 0, 60).unwrap_err();
    assert_eq!(refused.reason, StopReason::Budget);
    let fits = budget.reserve(CENT, 0, 50).unwrap();

    drop(fits);
    sub_agent.commit(Usage {
        input_tokens: 5,
        output_tokens: 5,
    });
    let spend = budget.spend();
    assert!(usd_eq(spend.spent_usd, 0.20));
    assert!(usd_eq(spend.held_usd, 0.0));
}

#[test]
fn each_reservation_commits_under_its_own_pricing() {
    let budget = capped(1.00);
    let priced = budget.reserve(CENT, 0, 40).unwrap();
    let unpriced = budget.reserve(UNPRICED, 1_000, 40).unwrap();
    assert_eq!(unpriced.price(), None);
    assert_eq!(unpriced.worst_case_usd(), 0.0);

    let usage = Usage {
        input_tokens: 1_000,
        output_tokens: 30,
    };
    assert_eq!(
        unpriced.commit(usage),
        CallCost {
            model: UNPRICED.to_owned(),
            usage,
            usd: None,
            estimated: false,
        }
    );
    let spend = budget.spend();
    assert!(usd_eq(spend.held_usd, 0.40), "{spend:?}");
    assert_eq!(spend.spent_usd, 0.0);

    let cost = priced.commit(Usage {
        input_tokens: 0,
        output_tokens: 30,
    });
    assert!(usd_eq(cost.usd.unwrap(), 0.30));
    let spend = budget.spend();
    assert!(usd_eq(spend.spent_usd, 0.30));
    assert_eq!((spend.unpriced_turns, spend.lower_bound), (1, true));
    let models: Vec<&str> = spend.calls.iter().map(|call| call.model.as_str()).collect();
    assert_eq!(models, [UNPRICED, CENT]);
}

#[test]
fn dropping_a_reservation_releases_its_hold_and_books_nothing() {
    let budget = capped(0.50);
    let failed_turn = budget.reserve(CENT, 10, 30).unwrap();
    assert!(usd_eq(budget.spend().held_usd, 0.40));
    drop(failed_turn);

    let spend = budget.spend();
    assert_eq!(spend.held_usd, 0.0);
    assert_eq!(spend.spent_usd, 0.0);
    assert_eq!(spend.turns, 1, "the failed turn was admitted, so it counts");
    assert!(spend.calls.is_empty());
    budget.reserve(CENT, 10, 40).unwrap();
}

#[test]
fn the_deadline_runs_from_creation_on_the_given_clock() {
    let clock = FakeClock::new();
    clock.advance(1_000.0);
    let budget = RunBudget::new(
        BudgetLimits {
            deadline_ms: Some(120_000.0),
            ..BudgetLimits::default()
        },
        catalog(),
        Rc::new(clock.clone()),
    );
    assert_eq!(budget.remaining_ms(), Some(120_000.0));
    // A turn's deadline timer runs on the same clock.
    let mut timer = budget.deadline_timer().unwrap();

    clock.advance(60_000.0);
    assert_eq!(budget.remaining_ms(), Some(60_000.0));
    assert!(budget.check_deadline().is_ok());
    budget.reserve(CENT, 0, 0).unwrap();
    assert_eq!((&mut timer).now_or_never(), None);

    clock.advance(60_000.0);
    assert_eq!((&mut timer).now_or_never(), Some(()));
    assert_eq!(clock.sleeps(), vec![120_000]);
    assert_eq!(budget.remaining_ms(), Some(0.0));
    let stop = budget.reserve(CENT, 0, 0).unwrap_err();
    assert_eq!(stop.reason, StopReason::Deadline);
    assert_eq!(
        budget.check_deadline().unwrap_err().reason,
        StopReason::Deadline
    );
    assert_eq!(budget.spend().turns, 1);

    let unbounded = budget_with(BudgetLimits::default());
    assert_eq!(unbounded.remaining_ms(), None);
    assert!(unbounded.check_deadline().is_ok());
}

#[test]
fn checks_run_deadline_then_turns_then_money() {
    struct Case {
        name: &'static str,
        deadline_passed: bool,
        turns_used: bool,
        over_cap: bool,
        expect: StopReason,
    }
    let cases = [
        Case {
            name: "all three",
            deadline_passed: true,
            turns_used: true,
            over_cap: true,
            expect: StopReason::Deadline,
        },
        Case {
            name: "turns and money",
            deadline_passed: false,
            turns_used: true,
            over_cap: true,
            expect: StopReason::Turns,
        },
        Case {
            name: "money alone",
            deadline_passed: false,
            turns_used: false,
            over_cap: true,
            expect: StopReason::Budget,
        },
    ];
    for case in cases {
        let clock = FakeClock::new();
        let budget = RunBudget::new(
            BudgetLimits {
                max_usd: Some(0.50),
                deadline_ms: Some(1_000.0),
                max_turns: Some(1),
                ..BudgetLimits::default()
            },
            catalog(),
            Rc::new(clock.clone()),
        );
        if case.turns_used {
            budget.reserve(CENT, 0, 0).unwrap();
        }
        if case.deadline_passed {
            clock.advance(1_000.0);
        }
        let worst_cents = if case.over_cap { 51 } else { 1 };
        let stop = budget.reserve(CENT, 0, worst_cents).unwrap_err();
        assert_eq!(stop.reason, case.expect, "{}", case.name);
    }
}

#[test]
fn turns_are_counted_over_the_run_and_only_when_admitted() {
    let budget = budget_with(BudgetLimits {
        max_usd: Some(0.50),
        max_turns: Some(2),
        ..BudgetLimits::default()
    });
    budget.reserve(CENT, 0, 1).unwrap();
    let refused = budget.reserve(CENT, 0, 100).unwrap_err();
    assert_eq!(refused.reason, StopReason::Budget);
    budget.reserve(CENT, 0, 1).unwrap();
    assert_eq!(budget.spend().turns, 2);

    let stop = budget.reserve(CENT, 0, 1).unwrap_err();
    assert_eq!(stop.reason, StopReason::Turns);
    assert_eq!(
        stop.message.as_deref(),
        Some("the run has used all 2 of its turns")
    );
}

#[test]
fn an_unpriced_model_is_bounded_by_the_token_ceiling_under_a_cap() {
    struct Case {
        name: &'static str,
        max_usd: Option<f64>,
        prompt_tokens: u64,
        admitted: bool,
    }
    let cases = [
        Case {
            name: "under the ceiling",
            max_usd: Some(0.50),
            prompt_tokens: 31_999,
            admitted: true,
        },
        Case {
            name: "exactly the ceiling",
            max_usd: Some(0.50),
            prompt_tokens: 32_000,
            admitted: true,
        },
        Case {
            name: "over the ceiling",
            max_usd: Some(0.50),
            prompt_tokens: 40_000,
            admitted: false,
        },
        Case {
            name: "no cap: the ceiling does not apply",
            max_usd: None,
            prompt_tokens: 1_000_000,
            admitted: true,
        },
    ];
    for case in cases {
        let budget = budget_with(BudgetLimits {
            max_usd: case.max_usd,
            ..BudgetLimits::default()
        });
        let answer = budget.reserve(UNPRICED, case.prompt_tokens, 100_000);
        assert_eq!(answer.is_ok(), case.admitted, "{}: {answer:?}", case.name);
        match answer {
            Ok(reservation) => {
                let cost = reservation.commit(Usage {
                    input_tokens: case.prompt_tokens,
                    output_tokens: 10,
                });
                assert_eq!(cost.usd, None, "{}", case.name);
                let spend = budget.spend();
                assert_eq!(
                    (spend.spent_usd, spend.lower_bound, spend.unpriced_turns),
                    (0.0, true, 1),
                    "{}",
                    case.name
                );
            }
            Err(stop) => assert_eq!(stop.reason, StopReason::Budget, "{}", case.name),
        }
    }
}

#[test]
fn the_first_refusal_is_the_reason_the_run_stopped() {
    let clock = FakeClock::new();
    let budget = RunBudget::new(
        BudgetLimits {
            max_usd: Some(0.50),
            deadline_ms: Some(1_000.0),
            ..BudgetLimits::default()
        },
        catalog(),
        Rc::new(clock.clone()),
    );
    assert_eq!(budget.spend().exhausted, None);
    let money = budget.reserve(CENT, 0, 51).unwrap_err();

    clock.advance(2_000.0);
    let time = budget.reserve(CENT, 0, 1).unwrap_err();
    assert_eq!(time.reason, StopReason::Deadline);
    assert!(budget.check_deadline().is_err());

    assert_eq!(budget.spend().exhausted, Some(StopReason::Budget));
    assert_eq!(budget.exhausted(), Some(money));
}

#[test]
fn a_clone_is_the_same_budget() {
    let parent = capped(0.50);
    let child = parent.clone();
    let in_flight = child.reserve(CENT, 0, 10).unwrap();
    assert!(usd_eq(parent.spend().held_usd, 0.10));
    spend_cents(&child, 30);
    assert!(usd_eq(parent.spend().spent_usd, 0.30));

    // The parent's reservation sees the child's spend and hold.
    assert!(parent.reserve(CENT, 0, 11).is_err());
    assert_eq!(child.spend().exhausted, Some(StopReason::Budget));
    drop(in_flight);
    assert_eq!(parent.spend(), child.spend());
    assert_eq!(parent.spend().turns, 2);
}

#[test]
fn spend_serializes_for_the_page() {
    let budget = capped(0.50);
    spend_cents(&budget, 1);
    let _ = budget.reserve(CENT, 0, 100);
    let Spend { calls, .. } = budget.spend();
    assert_eq!(calls.len(), 1);
    let json = serde_json::to_value(budget.spend()).unwrap();
    assert_eq!(json["exhausted"], json!("budget"));
    assert_eq!(json["turns"], json!(1));
    assert_eq!(json["calls"][0]["model"], json!(CENT));
}

#[test]
fn prices_turn_usage_into_dollars() {
    let gpt_4o = PriceCatalog::builtin().price("gpt-4o").unwrap();
    let usage = Usage {
        input_tokens: 1_000_000,
        output_tokens: 1_000_000,
    };
    assert!(usd_eq(gpt_4o.cost_usd(usage), 12.5));
    assert!(usd_eq(gpt_4o.worst_case_usd(12_000, 4_096), 0.07096));
}

#[test]
fn catalog_lookup_is_exact_prefix_or_date_and_nothing_looser() {
    let catalog = PriceCatalog::builtin();
    let price = |input_per_mtok, output_per_mtok| {
        Some(Price {
            input_per_mtok,
            output_per_mtok,
        })
    };
    let cases = [
        ("gpt-4o", price(2.5, 10.0)),
        ("openai/gpt-4o", price(2.5, 10.0)),
        ("gpt-4o-2024-08-06", price(2.5, 10.0)),
        ("openai/gpt-4o-2024-08-06", price(2.5, 10.0)),
        ("gpt-4o-mini", price(0.15, 0.6)),
        ("gpt-4o-mini-2024-07-18", price(0.15, 0.6)),
        ("claude-sonnet-4-5", price(3.0, 15.0)),
        ("claude-sonnet-4-5-20250929", price(3.0, 15.0)),
        ("anthropic/claude-sonnet-4-5-20250929", price(3.0, 15.0)),
        ("claude-3-5-haiku-20241022", price(0.8, 4.0)),
        ("smollm2-135m-instruct", price(0.0, 0.0)),
        // Unknown, and never a neighbour's price.
        ("gpt-4", None),
        ("gpt-4o-audio-preview", None),
        ("gpt-4o-latest", None),
        ("GPT-4o", None),
        ("claude-sonnet-4-5-2025", None),
        ("claude-sonnet-4-5-202509299", None),
        ("-20250929", None),
        ("openrouter/auto", None),
        ("mystery-model", None),
    ];
    for (model, expected) in cases {
        assert_eq!(catalog.price(model), expected, "{model}");
    }
}

#[test]
fn the_builtin_catalog_parses_and_prices_the_well_known_models() {
    let catalog = PriceCatalog::from_json(BUILTIN_PRICES_JSON).unwrap();
    assert_eq!(catalog, PriceCatalog::builtin());
    for model in [
        "gpt-4o",
        "gpt-4o-mini",
        "gpt-4.1",
        "gpt-4.1-mini",
        "gpt-4.1-nano",
        "o3",
        "o4-mini",
        "gpt-5",
        "gpt-5-mini",
        "claude-opus-4-1",
        "claude-sonnet-4-5",
        "claude-sonnet-4",
        "claude-haiku-4-5",
        "claude-3-5-haiku",
    ] {
        let price = catalog.price(model).unwrap_or_else(|| panic!("{model}"));
        assert!(
            price.input_per_mtok > 0.0 && price.output_per_mtok > price.input_per_mtok,
            "{model}: {price:?}"
        );
    }
    assert_eq!(catalog.price("$comment"), None);
}

#[test]
fn catalog_errors_name_the_entry_and_the_field() {
    let expected = "expected a non-negative number of USD per million tokens";
    let cases = [
        (
            r#"{"gpt-4o": {"input_per_mtok": -1, "output_per_mtok": 10}}"#,
            format!("price catalog entry `gpt-4o`: `input_per_mtok` is -1, {expected}"),
        ),
        (
            r#"{"gpt-4o": {"input_per_mtok": "2.5", "output_per_mtok": 10}}"#,
            format!(
                "price catalog entry `gpt-4o`: `input_per_mtok` is a string `\"2.5\"`, {expected}"
            ),
        ),
        (
            r#"{"gpt-4o": {"input_per_mtok": 2.5, "output_per_mtok": null}}"#,
            format!("price catalog entry `gpt-4o`: `output_per_mtok` is null `null`, {expected}"),
        ),
        (
            r#"{"gpt-4o": {"input_per_mtok": 2.5}}"#,
            format!("price catalog entry `gpt-4o`: `output_per_mtok` is missing, {expected}"),
        ),
        (
            r#"{"gpt-4o": {"input_per_mtok": 2.5, "output_per_mtok": 10, "cached_per_mtok": 1}}"#,
            "price catalog entry `gpt-4o` has an unknown field `cached_per_mtok`; expected \
             `input_per_mtok`, `output_per_mtok` and optionally `note`"
                .to_owned(),
        ),
        (
            r#"{"local": {"input_per_mtok": 0, "output_per_mtok": 0, "note": 3}}"#,
            "price catalog entry `local`: `note` is a number, expected a string".to_owned(),
        ),
        (
            r#"{"gpt-4o": 2.5}"#,
            "price catalog entry `gpt-4o` must be an object with `input_per_mtok` and \
             `output_per_mtok`, found a number"
                .to_owned(),
        ),
        (
            r#"[{"gpt-4o": 2.5}]"#,
            "the price catalog must be a JSON object of model id → price, found an array"
                .to_owned(),
        ),
    ];
    for (text, message) in cases {
        assert_eq!(PriceCatalog::from_json(text), Err(message), "{text}");
    }
    let error = PriceCatalog::from_json("{").unwrap_err();
    assert!(
        error.starts_with("the price catalog is not valid JSON: "),
        "{error}"
    );

    let catalog = PriceCatalog::from_json(
        r#"{"$comment": "skipped", "local": {"input_per_mtok": 0, "output_per_mtok": 0, "note": "free"}}"#,
    )
    .unwrap();
    assert_eq!(
        catalog.price("local"),
        Some(Price {
            input_per_mtok: 0.0,
            output_per_mtok: 0.0
        })
    );
}

#[test]
fn with_adds_or_replaces_a_price() {
    let cheap = Price {
        input_per_mtok: 0.01,
        output_per_mtok: 0.02,
    };
    let catalog = PriceCatalog::default()
        .with("gpt-4o", cheap)
        .with("my-model", cheap);
    assert_eq!(catalog.price("gpt-4o"), Some(cheap));
    assert_eq!(catalog.price("my-model"), Some(cheap));
    let builtin = PriceCatalog::builtin().with("gpt-4o", cheap);
    assert_eq!(builtin.price("openai/gpt-4o"), Some(cheap));
}

#[test]
fn the_prompt_estimate_grows_with_messages_and_tools() {
    let mut request = ChatRequest {
        messages: vec![Message::User {
            text: "hello world!".to_owned(),
        }],
        tools: Vec::new(),
        options: ChatOptions::new("gpt-4o"),
    };
    // 12 bytes → 3 tokens, plus 4 for the message.
    assert_eq!(estimate_prompt_tokens(&request), 7);

    // Each step adds one thing to the request and says how many tokens it must add at least.
    let user_cjk = Message::User {
        text: "预算".repeat(100),
    };
    type Step = (&'static str, u64, Box<dyn Fn(&mut ChatRequest)>);
    let steps: Vec<Step> = vec![
        (
            "a system message",
            5,
            Box::new(|request| {
                request.messages.push(Message::System {
                    text: "You are terse.".to_owned(),
                });
            }),
        ),
        (
            "a tool call, arguments serialized",
            10,
            Box::new(|request| {
                request.messages.push(Message::Assistant {
                    text: String::new(),
                    tool_calls: vec![ToolCall {
                        id: "call_1".to_owned(),
                        name: "search".to_owned(),
                        arguments: json!({"query": "budgets", "limit": 10}),
                    }],
                });
            }),
        ),
        (
            "a tool result of 4,000 bytes",
            1_000,
            Box::new(|request| {
                request.messages.push(Message::Tool {
                    call_id: "call_1".to_owned(),
                    name: "search".to_owned(),
                    content: "x".repeat(4_000),
                    is_error: false,
                });
            }),
        ),
        (
            "a tool definition, schema serialized",
            15,
            Box::new(|request| {
                request.tools.push(ToolDef {
                    name: "search".to_owned(),
                    description: "Search the web.".to_owned(),
                    input_schema: json!({"type": "object", "properties": {"query": {"type": "string"}}}),
                });
            }),
        ),
        (
            "200 CJK characters, about a token each",
            150,
            Box::new(move |request| request.messages.push(user_cjk.clone())),
        ),
    ];
    for (what, at_least, add) in steps {
        let before = estimate_prompt_tokens(&request);
        add(&mut request);
        let added = estimate_prompt_tokens(&request) - before;
        assert!(added >= at_least, "{what}: added {added} < {at_least}");
    }
}

#[test]
fn the_runs_tokens_bound_every_loop_and_an_unpriced_model_under_a_usd_cap() {
    // Tokens: counted over the committed turns of every clone (every loop of the run).
    let budget = budget_with(BudgetLimits {
        max_tokens: Some(150),
        ..BudgetLimits::default()
    });
    let child = budget.clone();
    for loop_budget in [&budget, &child] {
        let reservation = loop_budget.reserve(UNPRICED, 50, 10).unwrap();
        reservation.commit(Usage {
            input_tokens: 70,
            output_tokens: 10,
        });
    }
    let refused = child.reserve(UNPRICED, 1, 1).unwrap_err();
    assert_eq!(refused.reason, StopReason::Budget);
    assert_eq!(
        refused.message.as_deref(),
        Some("the run has used 160 of its 150 tokens")
    );
    assert_eq!(budget.spend().tokens, 160);

    // An unpriced model under a USD cap: the turns bound it, and the stop says so.
    let budget = budget_with(BudgetLimits {
        max_usd: Some(0.01),
        max_turns: Some(1),
        ..BudgetLimits::default()
    });
    budget.reserve(UNPRICED, 10, 10).unwrap().commit(Usage {
        input_tokens: 10,
        output_tokens: 10,
    });
    let refused = budget.reserve(UNPRICED, 10, 10).unwrap_err();
    assert_eq!(refused.reason, StopReason::Turns);
    let message = refused.message.unwrap();
    assert!(
        message.starts_with("the run has used its only turn (an unpriced model's turns"),
        "{message}"
    );
}

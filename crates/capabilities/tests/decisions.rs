//! The permission decision as a table: every cell of mode × category ×
//! per-tool setting × brake × session allow, checked against
//! `decisions.table` (reviewed by hand; `KILN_BLESS=1` rewrites it after a
//! deliberate change, which then shows as a diff).

use kiln_capabilities::gate::{
    AskReason, Autonomy, Decision, Gate, GateSettings, Mode, RETURN_RESULT, Refusal, Situation,
    decide,
};
use kiln_capabilities::spec::Category;

fn cell(decision: Decision) -> &'static str {
    match decision {
        Decision::Allow => "allow",
        Decision::Ask(AskReason::Mode) => "ask(mode)",
        Decision::Ask(AskReason::Setting) => "ask(setting)",
        Decision::Ask(AskReason::Brake) => "ask(brake)",
        Decision::Refuse(Refusal::PlanMode) => "refuse(plan_mode)",
        Decision::Refuse(Refusal::Blocked) => "refuse(blocked)",
    }
}

fn rows() -> Vec<String> {
    let settings = [
        None,
        Some(Autonomy::Auto),
        Some(Autonomy::Ask),
        Some(Autonomy::Block),
    ];
    let mut rows = Vec::new();
    for mode in Mode::ALL {
        for category in Category::ALL {
            for autonomy in settings {
                for brake in [false, true] {
                    for session_allowed in [false, true] {
                        let decision = decide(Situation {
                            tool: "some_tool",
                            category,
                            mode,
                            autonomy,
                            brake,
                            session_allowed,
                        });
                        rows.push(format!(
                            "{:<8} {:<9} {:<7} {:<6} {:<8} {}",
                            mode.as_str(),
                            category.as_str(),
                            autonomy.map_or("-", Autonomy::as_str),
                            if brake { "brake" } else { "-" },
                            if session_allowed { "session" } else { "-" },
                            cell(decision)
                        ));
                    }
                }
            }
        }
    }
    rows
}

#[test]
fn every_cell_of_the_decision_table_matches_the_reviewed_table() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/decisions.table");
    let header = "# mode    category  setting brake  allow-set decision\n";
    let actual = format!("{header}{}\n", rows().join("\n"));
    if std::env::var_os("KILN_BLESS").is_some() {
        std::fs::write(path, &actual).unwrap();
    }
    let expected = std::fs::read_to_string(path).unwrap();
    assert_eq!(
        rows().len(),
        3 * 4 * 4 * 2 * 2,
        "every cell is in the table"
    );
    for (line, (want, got)) in expected.lines().zip(actual.lines()).enumerate() {
        assert_eq!(want, got, "decisions.table line {}", line + 1);
    }
    assert_eq!(expected.lines().count(), actual.lines().count());
}

#[test]
fn the_rules_the_table_must_keep() {
    for row in rows() {
        let fields: Vec<&str> = row.split_whitespace().collect();
        let [mode, category, setting, brake, _session, decision] = fields[..] else {
            panic!("row {row}");
        };
        // A block is a block, everywhere.
        if setting == "block" {
            assert_eq!(decision, "refuse(blocked)", "{row}");
        }
        // Plan mode never lets anything but a read through.
        if mode == "plan" && category != "read" {
            assert!(decision.starts_with("refuse"), "{row}");
        }
        // The brake asks for every code-execution call it does not refuse.
        if brake == "brake" && category == "execute" && !decision.starts_with("refuse") {
            assert_eq!(decision, "ask(brake)", "{row}");
        }
        // Reads never ask unless the tool is set to ask.
        if category == "read" && setting != "ask" && setting != "block" {
            assert_eq!(decision, "allow", "{row}");
        }
    }
}

#[test]
fn return_result_cannot_be_blocked() {
    // A block on it is ignored; the mode still decides, as for any call of
    // its category (a tool merely named so gets no other favour).
    for mode in Mode::ALL {
        let situation = |autonomy| Situation {
            tool: RETURN_RESULT,
            category: Category::Write,
            mode,
            autonomy,
            brake: false,
            session_allowed: false,
        };
        assert_eq!(
            decide(situation(Some(Autonomy::Block))),
            decide(situation(None)),
            "{mode}"
        );
    }
    let gate = Gate::headless("test", GateSettings::default()).unwrap();
    let refused = gate
        .set_autonomy(RETURN_RESULT, Some(Autonomy::Block))
        .unwrap_err();
    assert!(
        refused.contains("return_result cannot be blocked"),
        "{refused}"
    );
    let mut settings = GateSettings::default();
    settings
        .autonomy
        .insert(RETURN_RESULT.into(), Autonomy::Block);
    assert!(Gate::headless("test", settings).is_err());
}

#[test]
fn releasing_the_brake_restores_the_rules_exactly() {
    let gate = Gate::headless("test", GateSettings::default()).unwrap();
    gate.set_mode(Mode::Auto);
    gate.set_autonomy("run_code", Some(Autonomy::Auto)).unwrap();
    gate.allow_for_session("shell");
    let before = gate.settings();
    let cases = [
        ("run_code", Category::Execute),
        ("shell", Category::Execute),
        ("fetch", Category::External),
    ];
    let decisions = |gate: &Gate| cases.map(|(tool, category)| gate.decide(tool, category));
    let unbraked = decisions(&gate);
    assert_eq!(unbraked, [Decision::Allow; 3]);
    gate.set_brake(true);
    assert_eq!(
        decisions(&gate),
        [
            Decision::Ask(AskReason::Brake),
            Decision::Ask(AskReason::Brake),
            Decision::Allow
        ]
    );
    gate.set_brake(false);
    assert_eq!(decisions(&gate), unbraked);
    assert_eq!(gate.settings(), before);
    assert!(gate.session_allowed("shell"));
}

#[test]
fn modes_and_settings_parse_by_name_and_refuse_anything_else() {
    assert_eq!("plan".parse::<Mode>(), Ok(Mode::Plan));
    assert!("yolo".parse::<Mode>().unwrap_err().contains("`yolo`"));
    assert_eq!("block".parse::<Autonomy>(), Ok(Autonomy::Block));
    for autonomy in Autonomy::ALL {
        assert_eq!(autonomy.as_str().parse::<Autonomy>(), Ok(autonomy));
    }
    assert!(
        "never"
            .parse::<Autonomy>()
            .unwrap_err()
            .contains("expected auto, ask or block")
    );
    assert!(
        "network"
            .parse::<Category>()
            .unwrap_err()
            .contains("`network`")
    );
}

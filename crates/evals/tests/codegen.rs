//! The code-gen suite's cases and mechanics: every case's reference body
//! passes its own held-out inputs in the real sandbox, no held-out value
//! reaches the prompt, and with a scripted provider a first-round accept, a
//! repaired one, a node that computes the wrong thing and a model that
//! never calls `submit_code` are each scored as what they are, in a table
//! whose totals keep first-pass and post-repair acceptance apart.

#![expect(clippy::unwrap_used, reason = "tests")]

use std::collections::BTreeSet;

use futures::executor::block_on;
use futures::future::LocalBoxFuture;
use kiln_evals::cases::select;
use kiln_evals::codegen::{
    CodegenCase, Shape, codegen_cases, codegen_table, run_codegen, same, score_node,
};
use kiln_nodes::{MAX_AUTHOR_ROUNDS, SUBMIT_CODE, check_submission};
use kiln_providers::Message;
use kiln_providers::scripted::{Reply, Scripted};
use serde_json::{Value, json};

#[path = "../../run/tests/common/mod.rs"]
mod common;
use common::InProcess;

/// A clock that never moves: every duration is 0, so tables compare whole.
struct Still;

impl kiln_http::Clock for Still {
    fn now_ms(&self) -> f64 {
        0.0
    }

    fn sleep(&self, _: u64) -> LocalBoxFuture<'static, ()> {
        Box::pin(async {})
    }
}

fn case(name: &str) -> CodegenCase {
    select(codegen_cases().unwrap(), name).pop().unwrap()
}

/// `submit_code`'s arguments for `case` with `code` as the body and the
/// case's own slots.
fn submission(case: &CodegenCase, code: &str) -> Value {
    let slots = |slots: &[kiln_evals::codegen::Slot]| -> Vec<Value> {
        slots
            .iter()
            .map(|slot| json!({"name": slot.name, "type": slot.ty}))
            .collect()
    };
    json!({
        "title": "Do the thing",
        "summary": "Does what was asked.",
        "code": code,
        "inputs": slots(&case.inputs),
        "outputs": slots(&case.outputs),
    })
}

#[test]
fn the_suite_has_two_cases_of_every_shape_each_well_formed() {
    let cases = codegen_cases().unwrap();
    assert!(cases.len() >= 16, "{} cases", cases.len());
    for shape in Shape::ALL {
        let of_shape = cases.iter().filter(|case| case.shape == shape).count();
        assert!(of_shape >= 2, "{}: {of_shape} case(s)", shape.as_str());
    }
    let names: BTreeSet<&str> = cases.iter().map(|case| case.name.as_str()).collect();
    assert_eq!(names.len(), cases.len(), "names are unique");
    assert!(
        cases.iter().any(|case| !case.expected),
        "some case names no expected output"
    );
    for case in &cases {
        assert!(
            case.name.starts_with(&format!("{}-", case.shape.as_str())),
            "{} is named after its shape",
            case.name
        );
        let request = case
            .request()
            .unwrap_or_else(|why| panic!("{}: {why}", case.name));
        assert_eq!(request.problems(), Vec::<String>::new(), "{}", case.name);
        assert!(request.samples.is_none() && !request.include_samples);
        assert!(!case.outputs.is_empty(), "{}", case.name);
        let held = case.held_out.len();
        if case.shape == Shape::Seed {
            assert!(
                case.inputs.is_empty(),
                "{}: a seed has no inputs",
                case.name
            );
            assert_eq!(held, 1, "{}: a seed's one input is nothing", case.name);
        } else {
            assert!((2..=3).contains(&held), "{}: {held} held-out", case.name);
        }
        for (at, held) in case.held_out.iter().enumerate() {
            let outputs: BTreeSet<&str> = held.outputs.keys().map(String::as_str).collect();
            let declared: BTreeSet<&str> =
                case.outputs.iter().map(|slot| slot.name.as_str()).collect();
            assert_eq!(outputs, declared, "{} #{}", case.name, at + 1);
        }
    }
    assert_eq!(select(codegen_cases().unwrap(), "seed-*").len(), 2);
}

/// Every case is solvable as worded and its expectations are right: the
/// reference passes `submit_code`'s checks and gives every held-out input
/// its outputs in the real sandbox.
#[test]
fn every_reference_passes_its_own_held_out_inputs_in_the_sandbox() {
    for case in codegen_cases().unwrap() {
        let request = case.request().unwrap();
        let args = submission(&case, &case.reference);
        let accepted = block_on(check_submission(&args, &request, None))
            .unwrap_or_else(|reasons| panic!("{}: {reasons:?}", case.name));
        assert_eq!(accepted.node().code, case.reference);
        let node = case.reference_node().unwrap();
        let score = block_on(score_node(&case, &node, &InProcess));
        assert_eq!(
            (score.passed, score.total),
            (case.held_out.len(), case.held_out.len()),
            "{}: {:?}",
            case.name,
            score.problems
        );
    }
}

/// The string and number values inside a held-out input that would give it
/// away: strings of three characters or more, numbers written with three
/// or more.
fn telling(value: &Value, found: &mut Vec<String>) {
    match value {
        Value::String(text) if text.trim().chars().count() >= 3 => found.push(text.clone()),
        Value::Number(number) if number.to_string().len() >= 3 => found.push(number.to_string()),
        Value::Array(items) => items.iter().for_each(|item| telling(item, found)),
        Value::Object(map) => map.values().for_each(|item| telling(item, found)),
        _ => {}
    }
}

fn payload_text(messages: &[Message]) -> String {
    messages
        .iter()
        .map(|message| match message {
            Message::System { text } | Message::User { text } => text.clone(),
            other => serde_json::to_string(other).unwrap(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn no_held_out_value_reaches_the_prompt() {
    let mut leaked = Vec::new();
    for case in codegen_cases().unwrap() {
        let payload = payload_text(&case.request().unwrap().payload());
        for (at, held) in case.held_out.iter().enumerate() {
            let inputs = Value::Object(held.inputs.clone());
            if !held.inputs.is_empty() && payload.contains(&inputs.to_string()) {
                leaked.push(format!("{} held-out #{}: all of it", case.name, at + 1));
            }
            let mut found = Vec::new();
            telling(&inputs, &mut found);
            for value in found.into_iter().filter(|value| payload.contains(value)) {
                leaked.push(format!("{} held-out #{}: `{value}`", case.name, at + 1));
            }
        }
    }
    assert_eq!(leaked, Vec::<String>::new(), "in the prompt");
}

#[test]
fn values_are_the_same_by_number_and_whatever_the_key_order() {
    let cases: &[(Value, Value, bool)] = &[
        (json!(50.0), json!(50), true),
        (json!(0.1 + 0.2), json!(0.3), true),
        (json!(32.96), json!(32.97), false),
        (
            json!({"b": [1, {"y": 2, "x": 1}], "a": null}),
            json!({"a": null, "b": [1.0, {"x": 1, "y": 2}]}),
            true,
        ),
        (json!({"a": 1}), json!({"a": 1, "b": 2}), false),
        (json!([1, 2]), json!([2, 1]), false),
        (json!("1"), json!(1), false),
    ];
    for (got, want, expected) in cases {
        assert_eq!(same(got, want), *expected, "{got} vs {want}");
    }
}

#[test]
fn acceptance_first_pass_after_repair_and_held_out_correctness_are_scored_apart() {
    let rename = case("reshape-rename");
    let total = case("compute-order-total");
    let money = case("format-money");
    let primes = case("seed-primes");
    let mut without_tax = submission(&total, &total.reference);
    without_tax["inputs"] =
        json!([{"name": "lines", "type": "list[{price: number, qty: integer}]"}]);
    let provider = Scripted::new([
        // reshape-rename: right the first time.
        Reply::call(SUBMIT_CODE, submission(&rename, &rename.reference)),
        // compute-order-total: refused (taxRate dropped), then right.
        Reply::call(SUBMIT_CODE, without_tax),
        Reply::call(SUBMIT_CODE, submission(&total, &total.reference)),
        // format-money: accepted, but no thousands separators.
        Reply::call(
            SUBMIT_CODE,
            submission(
                &money,
                "const sign = cents < 0 ? '-' : '';\nreturn { text: sign + '$' + (Math.abs(cents) / 100).toFixed(2) };",
            ),
        ),
        // seed-primes: prose every round.
        Reply::text("```js\nreturn { primes: [2, 3, 5] };\n```"),
        Reply::text("Here it is."),
        Reply::text("Done."),
    ]);
    let cases = vec![rename, total, money, primes];
    let mut lines = Vec::new();
    let results = block_on(run_codegen(
        &cases,
        &*provider,
        "scripted",
        &InProcess,
        &Still,
        &mut |result| lines.push(result.line()),
    ));
    assert_eq!(provider.left(), 0);
    // Each case is heard as it ends, in order.
    assert_eq!(lines.len(), 4);
    assert!(
        lines[0].starts_with("reshape-rename: passed in 1 round"),
        "{lines:?}"
    );
    assert!(
        lines[3].starts_with("seed-primes: no node (no_valid_submission) in 3 rounds"),
        "{lines:?}"
    );

    let flags: Vec<(bool, bool, bool, usize)> = results
        .iter()
        .map(|result| {
            (
                result.passed,
                result.first_pass,
                result.accepted,
                result.held_out.passed,
            )
        })
        .collect();
    assert_eq!(
        flags,
        [
            (true, true, true, 3),
            (true, false, true, 3),
            (false, true, true, 1),
            (false, false, false, 0),
        ]
    );
    assert_eq!(results[1].rounds, 2);
    assert_eq!(
        results[2].held_out.problems,
        [
            "held-out #1 {\"cents\":123456789}: `text` is \"$1234567.89\", expected \"$1,234,567.89\"",
            "held-out #3 {\"cents\":100000}: `text` is \"$1000.00\", expected \"$1,000.00\"",
        ]
    );
    assert_eq!(
        results[3].failure.as_ref().map(|(code, _)| *code),
        Some("no_valid_submission")
    );
    assert_eq!(results[3].rounds, MAX_AUTHOR_ROUNDS);

    // What the model was sent, every round, held no held-out value.
    for request in provider.requests() {
        let sent = payload_text(&request.messages);
        for held in cases.iter().flat_map(|case| &case.held_out) {
            let mut found = Vec::new();
            telling(&Value::Object(held.inputs.clone()), &mut found);
            for value in found {
                assert!(!sent.contains(&value), "`{value}` was sent");
            }
        }
    }

    let table = codegen_table(&results);
    let expected = "\
| case | shape | result | first pass | after repair | held-out | rounds | tokens | cost | time |
|---|---|---|---|---|---|---|---|---|---|
| reshape-rename | reshape | pass | yes | yes | 3/3 | 1 | 120 | — | 0.0 s |
| compute-order-total | compute | pass | no | yes | 3/3 | 2 | 240 | — | 0.0 s |
| format-money | format | FAIL (held-out #1 {\"cents\":123456789}: `text` is \"$1234567.89\", expected \"$1,234,567.89\"; held-out #3 {\"cents\":100000}: `text` is \"$1000.00\", expected \"$1,000.00\") | yes | yes | 1/3 | 1 | 120 | — | 0.0 s |
| seed-primes | seed | FAIL (no_valid_submission: no valid `submit_code` call in 3 rounds: the model answered in text instead of calling `submit_code`; text is never read) | no | no | 0/1 | 3 | 330 | — | 0.0 s |
| **total** | | 2/4 passed | 2/4 | 3/4 | 7/10 | 7 | 810 | — | 0.0 s |

first-pass acceptance 2/4 (50%) · post-repair acceptance 3/4 (75%) · held-out correctness 7/10 (70%) · passed 2/4 (50%)
passed by shape: reshape 1/1 · compute 1/1 · format 0/1 · seed 0/1
";
    assert_eq!(table, expected, "\n{table}");
}

#[test]
fn a_provider_that_cannot_be_reached_fails_every_case_without_a_node() {
    let cases = select(codegen_cases().unwrap(), "split-*");
    // The script is empty: every turn fails as a provider's error would.
    let provider = Scripted::new([]);
    let results = block_on(run_codegen(
        &cases,
        &*provider,
        "scripted",
        &InProcess,
        &Still,
        &mut |_| {},
    ));
    for result in &results {
        assert_eq!(
            result.failure.as_ref().map(|(code, _)| *code),
            Some("provider_unavailable")
        );
        assert!(!result.accepted && !result.passed);
    }
    assert!(
        codegen_table(&results).contains("held-out correctness 0/6 (0%)"),
        "{}",
        codegen_table(&results)
    );
}

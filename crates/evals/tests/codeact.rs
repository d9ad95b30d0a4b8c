//! The eval harness's mechanics, with a scripted provider and the real
//! sandbox in process: both modes run each case, an exact answer passes and
//! another fails, and the table adds up. A person with a key runs the same
//! cases against a real model with `kiln eval codeact`.

#![expect(clippy::unwrap_used, reason = "tests")]

use std::rc::Rc;

use futures::executor::block_on;
use kiln_evals::cases::select;
use kiln_evals::codeact::{cases, run_cases, table};
use kiln_providers::scripted::{Reply, Scripted};
use kiln_providers::{ChatRequest, Message};
use serde_json::json;

#[path = "../../run/tests/common/mod.rs"]
mod common;
use common::InProcess;

/// The last tool result the model was sent.
fn observed(request: &ChatRequest) -> String {
    match request.messages.last().unwrap() {
        Message::Tool { content, .. } => content.clone(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn each_case_runs_as_code_and_as_direct_calls_and_is_scored_exactly() {
    let picked = select(cases().unwrap(), "shop-order-total");
    let replies = vec![
        // CodeAct: one program does the three lookups and the arithmetic.
        Reply::code(
            "const price = async (sku) => (await tools.get_price({sku})).price;\nreturn 3 * await price('A1') + 2 * await price('C3') + 4 * await price('E5')",
        ),
        Reply::Computed(Rc::new(|request: &ChatRequest| {
            let seen = observed(request);
            assert!(seen.contains("Return value:\n67"), "{seen}");
            Reply::text("67")
        })),
        // Direct: a call per lookup, then a wrong sum.
        Reply::Message {
            text: String::new(),
            tool_calls: ["A1", "C3", "E5"]
                .iter()
                .map(|sku| kiln_providers::ToolCall {
                    id: format!("call_{sku}"),
                    name: "get_price".into(),
                    arguments: json!({"sku": sku}),
                })
                .collect(),
            usage: kiln_providers::Usage::default(),
        },
        Reply::Computed(Rc::new(|request: &ChatRequest| {
            assert!(observed(request).contains("9.75"));
            Reply::text("66.")
        })),
    ];
    let provider = Scripted::new(replies);
    let results = block_on(run_cases(
        &picked,
        provider.clone(),
        "scripted",
        Rc::new(InProcess),
        10,
    ));
    assert_eq!(provider.left(), 0);
    let [result] = results.as_slice() else {
        panic!("{results:?}")
    };
    assert!(result.codeact.passed, "{:?}", result.codeact);
    assert_eq!(
        (result.codeact.turns, result.codeact.answer.as_str()),
        (2, "67")
    );
    assert!(!result.direct.passed);
    assert_eq!(
        (result.direct.turns, result.direct.answer.as_str()),
        (2, "66")
    );
    let table = table(&results);
    assert!(
        table.contains("| shop-order-total | shop | pass · 2 turns"),
        "{table}"
    );
    assert!(
        table.contains("FAIL (answered \"66\") · 2 turns"),
        "{table}"
    );
    assert!(
        table.contains("| **total** | | 1/1 (100%) · 2 turns"),
        "{table}"
    );
    assert!(table.contains("| 0/1 (0%) · 2 turns"), "{table}");
}

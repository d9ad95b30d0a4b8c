//! The sandbox compiled to wasm, in headless Chromium, inside a dedicated worker
//! as in production: the shared table of programs, and a host future resolved by
//! a real browser event (the worker's `setTimeout`) while the run waits: the
//! `sleep` and delayed tool cases.
#![cfg(target_arch = "wasm32")]
#![expect(
    clippy::unwrap_used,
    reason = "clippy does not see `wasm_bindgen_test` functions as tests; a panic is a failed test"
)]

mod cases;

use kiln_sandbox::run;
use kiln_types::RunLimits;
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

use std::rc::Rc;

use cases::scripted::ScriptedTools;
use cases::{CASES, TOOL_CASES, TOOL_CATALOG, check};
use kiln_sandbox::catalog::Admission;
use kiln_sandbox::run_with_tools;

wasm_bindgen_test_configure!(run_in_dedicated_worker);

#[wasm_bindgen_test]
async fn programs_report_what_they_did() {
    let mut failures = Vec::new();
    for (code, expected) in CASES {
        let report = run(code, &RunLimits::default()).await;
        if let Err(failure) = check(code, expected, &report) {
            failures.push(failure);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[wasm_bindgen_test]
async fn the_standard_library_answers_its_table() {
    let mut failures = Vec::new();
    for (code, expected) in cases::stdlib::STDLIB_CASES {
        let report = run(code, &RunLimits::default()).await;
        if let Err(failure) = check(code, expected, &report) {
            failures.push(failure);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[wasm_bindgen_test]
async fn progress_reaches_the_host_clamped_cut_and_spaced() {
    let catalog = serde_json::json!([]);
    let admission = Rc::new(Admission::admit(&catalog, "scripted").unwrap());
    let host = Rc::new(ScriptedTools::from_catalog(&catalog).unwrap());
    let report = run_with_tools(
        cases::PROGRESS_PROGRAM,
        &RunLimits::default(),
        admission,
        host.clone(),
    )
    .await;
    cases::check_progress(&report, &host.reported()).unwrap();
}

#[wasm_bindgen_test]
async fn a_run_measures_its_duration_with_the_worker_clock() {
    let report = run(
        "let s = 0; for (let i = 0; i < 100000; i++) s += i; return s",
        &RunLimits::default(),
    )
    .await;
    assert_eq!(cases::summary(&report), "completed 4999950000");
    assert!(report.duration_ms > 0.0, "{}", report.duration_ms);
}

#[wasm_bindgen_test]
async fn programs_call_their_tools_by_the_codemode_contract() {
    let catalog: serde_json::Value = serde_json::from_str(TOOL_CATALOG).unwrap();
    let admission = Rc::new(Admission::admit(&catalog, "scripted").unwrap());
    let host = Rc::new(ScriptedTools::from_catalog(&catalog).unwrap());
    let mut failures = Vec::new();
    for (code, expected) in TOOL_CASES {
        let report =
            run_with_tools(code, &RunLimits::default(), admission.clone(), host.clone()).await;
        if let Err(failure) = check(code, expected, &report) {
            failures.push(failure);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Deep values and deep sources end before the stack does in wasm too, on
/// the stack the sandbox worker links with (`build.rs` gives these tests the
/// same).
#[wasm_bindgen_test]
async fn deep_values_and_sources_end_before_the_stack_does() {
    let mut failures = Vec::new();
    for (code, expected) in cases::deep_cases() {
        let report = run(&code, &RunLimits::default()).await;
        if let Err(failure) = check(&code, &expected, &report) {
            failures.push(failure);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

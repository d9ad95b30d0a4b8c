//! Native tests of the sandbox: the shared table of programs, and what only a
//! native build shows.

#![cfg_attr(
    not(target_arch = "wasm32"),
    expect(
        clippy::disallowed_methods,
        reason = "a test's own deadline and timings are real time: they bound and check what ran, not the code's clock"
    )
)]
#![cfg(not(target_arch = "wasm32"))]

mod cases;

use kiln_sandbox::run;
use kiln_types::RunLimits;

use std::rc::Rc;

use cases::scripted::ScriptedTools;
use cases::{CASES, TOOL_CASES, TOOL_CATALOG, check, summary};
use kiln_sandbox::catalog::Admission;
use kiln_sandbox::run_with_tools;

#[test]
fn programs_report_what_they_did() {
    let failures: Vec<String> = CASES
        .iter()
        .filter_map(|(code, expected)| {
            let report = futures::executor::block_on(run(code, &RunLimits::default()));
            check(code, expected, &report).err()
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_standard_library_answers_its_table() {
    let failures: Vec<String> = cases::stdlib::STDLIB_CASES
        .iter()
        .filter_map(|(code, expected)| {
            let report = futures::executor::block_on(run(code, &RunLimits::default()));
            check(code, expected, &report).err()
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn progress_reaches_the_host_clamped_cut_and_spaced() {
    let catalog = serde_json::json!([]);
    let admission = Rc::new(Admission::admit(&catalog, "scripted").unwrap());
    let host = Rc::new(ScriptedTools::from_catalog(&catalog).unwrap());
    let report = futures::executor::block_on(run_with_tools(
        cases::PROGRESS_PROGRAM,
        &RunLimits::default(),
        admission,
        host.clone(),
    ));
    cases::check_progress(&report, &host.reported()).unwrap();
}

#[test]
fn a_syntax_error_names_the_line_of_the_program() {
    let report = futures::executor::block_on(run("let a = 1;\nlet = = 2;", &RunLimits::default()));
    let text = summary(&report);
    assert!(
        text.starts_with("syntax ") && text.ends_with("at line 2, col 7"),
        "{text}"
    );
    let report = futures::executor::block_on(run("return +* 1", &RunLimits::default()));
    let text = summary(&report);
    assert!(text.ends_with("at line 1, col 9"), "{text}");
    // A program that ends with something open is told so, at its own end, not at
    // a line of the wrapper it never wrote.
    for (code, at) in [
        ("return {", "at line 1, col 9"),
        ("const a = [1,\n  2", "at line 2, col 4"),
    ] {
        let report = futures::executor::block_on(run(code, &RunLimits::default()));
        let text = summary(&report);
        assert!(
            text.contains("the program ends before something it opened") && text.ends_with(at),
            "{code:?}: {text}"
        );
    }
}

#[test]
fn console_output_past_its_budget_is_dropped_and_counted() {
    // Each line costs its bytes and its newline: two of `12345\n` fit in 12.
    let limits = RunLimits {
        console_bytes: 12,
        ..RunLimits::default()
    };
    let report = futures::executor::block_on(run(
        "for (let i = 0; i < 5; i++) console.log('12345')",
        &limits,
    ));
    assert_eq!(report.console.len(), 2);
    assert_eq!(report.console_dropped, 3);
    // Empty lines are not free.
    let report = futures::executor::block_on(run(
        "for (let i = 0; i < 100; i++) console.log('')",
        &limits,
    ));
    assert_eq!((report.console.len(), report.console_dropped), (12, 88));
    // 2,000 lines of 100 characters keep at most the 64 KiB budget of output,
    // plus the marker saying how many were dropped.
    let report = futures::executor::block_on(run(
        "for (let i = 0; i < 2000; i++) console.log('x'.repeat(100))",
        &RunLimits::default(),
    ));
    let summary = report.into_summary(String::new(), Vec::new(), String::new(), true);
    let marker = summary.output.lines().last().unwrap_or_default().to_owned();
    assert!(marker.contains("more console lines dropped"), "{marker}");
    let kept = summary.output.len() - marker.len() - 1;
    assert!(kept <= 64 * 1024, "{kept} bytes kept");
    assert!(kept > 63 * 1024, "{kept} bytes kept");
}

#[test]
fn programs_call_their_tools_by_the_codemode_contract() {
    let catalog: serde_json::Value = serde_json::from_str(TOOL_CATALOG).unwrap();
    let admission = Rc::new(Admission::admit(&catalog, "scripted").unwrap());
    let host = Rc::new(ScriptedTools::from_catalog(&catalog).unwrap());
    let failures: Vec<String> = TOOL_CASES
        .iter()
        .filter_map(|(code, expected)| {
            let report = futures::executor::block_on(run_with_tools(
                code,
                &RunLimits::default(),
                admission.clone(),
                host.clone(),
            ));
            check(code, expected, &report).err()
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn calls_made_while_arguments_are_read_count_against_the_call_budget() {
    // A getter that calls the tool again while its arguments are read: 13
    // nested calls once all took call number 1 and passed a budget of 3.
    let code = "let depth = 0; const evil = {};\n\
        Object.defineProperty(evil, 'x', {enumerable: true, get() { if (depth++ < 12) tools.echo(evil); return depth; }});\n\
        await tools.echo(evil);";
    let catalog: serde_json::Value = serde_json::from_str(TOOL_CATALOG).unwrap();
    let admission = Rc::new(Admission::admit(&catalog, "scripted").unwrap());
    let host = Rc::new(ScriptedTools::from_catalog(&catalog).unwrap());
    let limits = RunLimits {
        tool_calls: 3,
        ..RunLimits::default()
    };
    let report = futures::executor::block_on(run_with_tools(code, &limits, admission, host));
    assert_eq!(
        summary(&report),
        "budget_exhausted budget_exhausted:tool_calls: the program made more than 3 tool calls [echo outcome_unknown, echo outcome_unknown, echo outcome_unknown]"
    );
}

#[test]
fn javascript_run_while_a_reply_is_received_is_charged_to_the_cpu_budget() {
    // Resolving a reply reads `then`, which a getter on Object.prototype can
    // define: a spin there once ran outside the CPU clock (issue 15 #1). Both
    // ways in: a reply that resolves, and a failure whose `code` meets a setter.
    let spin = "const t = Date.now(); while (Date.now() - t < 1500) {}";
    let cases = [
        format!(
            "let once = false; Object.defineProperty(Object.prototype, 'then', {{configurable: true, \
             get() {{ if (!once) {{ once = true; {spin} }} }}}}); await tools.echo({{x: 1}}); return 'done'"
        ),
        format!(
            "let once = false; Object.defineProperty(Object.prototype, 'code', {{configurable: true, \
             set(v) {{ if (!once) {{ once = true; {spin} }} }}}}); \
             try {{ await tools.broken({{}}) }} catch (e) {{}} return 'done'"
        ),
    ];
    let catalog: serde_json::Value = serde_json::from_str(TOOL_CATALOG).unwrap();
    for code in cases {
        let admission = Rc::new(Admission::admit(&catalog, "scripted").unwrap());
        let host = Rc::new(ScriptedTools::from_catalog(&catalog).unwrap());
        let limits = RunLimits {
            js_cpu_ms: 500,
            ..RunLimits::default()
        };
        let report = futures::executor::block_on(run_with_tools(&code, &limits, admission, host));
        assert!(
            summary(&report).starts_with("budget_exhausted budget_exhausted:js_cpu"),
            "{code}\n{}",
            summary(&report)
        );
    }
}

#[test]
fn a_sleep_beside_an_approval_does_not_keep_it_open_past_the_person_wait_budget() {
    // Issue 15 #6: time with a sleep pending is not person wait, so a parallel
    // sleep loop once kept a held call open until the wall budget.
    let catalog = serde_json::json!([
        {"name": "approve_me", "person_wait_ms": 60000, "returns": "approved"},
    ]);
    let admission = Rc::new(Admission::admit(&catalog, "scripted").unwrap());
    let host = Rc::new(ScriptedTools::from_catalog(&catalog).unwrap());
    let limits = RunLimits {
        person_wait_ms: 300,
        wall_ms: 5_000,
        ..RunLimits::default()
    };
    let code = "const asked = tools.approve_me({}); let naps = 0;\n\
        for (;;) { await sleep(20); naps++; }";
    let started = std::time::Instant::now();
    let report = futures::executor::block_on(run_with_tools(code, &limits, admission, host));
    let took = started.elapsed();
    assert!(
        summary(&report).starts_with("budget_exhausted budget_exhausted:person_wait"),
        "{}",
        summary(&report)
    );
    // Stopped by the person-wait budget, long before the wall budget.
    assert!(took < std::time::Duration::from_millis(3_000), "{took:?}");
    // The sleeping time is still not person wait.
    assert!(report.person_wait_ms < 300.0, "{}", report.person_wait_ms);
}

/// Deep values and deep sources end with a catchable error or a syntax error
/// before the stack overflows, on the stack a native host gives a sandbox.
#[test]
fn deep_values_and_sources_end_before_the_stack_does() {
    let failures = std::thread::Builder::new()
        .stack_size(kiln_sandbox::NATIVE_STACK_BYTES)
        .spawn(|| {
            cases::deep_cases()
                .iter()
                .filter_map(|(code, expected)| {
                    let report = futures::executor::block_on(run(code, &RunLimits::default()));
                    check(code, expected, &report).err()
                })
                .collect::<Vec<String>>()
        })
        .unwrap()
        .join()
        .unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

//! The official MCP conformance suite (`@modelcontextprotocol/conformance`
//! 0.1.16, on the Node 22 `servers/` installs) against Kiln: its server
//! scenarios against `kiln mcp serve --http`, its client scenarios against
//! `kiln run --mcp` (through `servers/conformance_client.sh`). Never its
//! `tier-check`, which reaches the internet.
//!
//! Server scenarios that run: `server-initialize`, `ping`, `tools-list`,
//! `dns-rebinding-protection`, through a proxy that adds the server's access
//! token (the suite has no way to send a header of its own). The others cannot: `tools-call-*` call the
//! suite's own test tools (`test_simple_text`, `test_image_content`, …) and
//! `json-schema-2020-12` lists one, where a codemode server has `codemode`,
//! `late_results` and `withdraw`; `logging-set-level`, `completion-complete`,
//! `resources-*` and `prompts-*` need capabilities Kiln's server does not
//! offer (it declares tools only); `server-sse-polling` and
//! `server-sse-multiple-streams` need a tool that streams for a while, and
//! `elicitation-*` a tool that asks the person, which codemode does not.
//!
//! Client scenarios that run: `initialize`, `tools_call`, `sse-retry`. The
//! `auth/*` ones need an OAuth flow, which Kiln's MCP client does not do.
//! `elicitation-sep1034-client-defaults` checks that a client fills in an
//! elicitation form's defaults; Kiln's client declares no elicitation, so it
//! answers the server's `elicitation/create` with a JSON-RPC error and the
//! call ends with the tool's answer: the suite counts that failed, and this
//! test checks the part that matters here, that the call did not wait out
//! its timeout.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a panic here is a failed test with its line"
)]

use std::process::Command;

mod bearer_proxy;
mod common;

/// Runs the suite with `args`; its exit status and report.
fn run_suite(args: &[&str]) -> (bool, String) {
    let (node, suite) = kiln_testkit::mcp_conformance();
    let out = Command::new(node)
        .arg(suite)
        .args(args)
        .env("KILN", env!("CARGO_BIN_EXE_kiln"))
        .output()
        .unwrap();
    let report = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), report)
}

/// Runs the suite with `args`; panics with its report unless every check passed.
fn suite(args: &[&str]) {
    let (passed, report) = run_suite(args);
    assert!(passed, "conformance {args:?}:\n{report}");
    assert!(
        report.contains(" 0 failed"),
        "conformance {args:?}:\n{report}"
    );
}

#[test]
fn the_server_scenarios_a_codemode_server_can_run_pass() {
    // The suite sends no `Authorization` header: a proxy adds the server's
    // token to what it sends (and passes a foreign `Host` on as it came).
    let token = "kiln-conformance-token-0123456789";
    let server = common::HttpServer::start(&["--token", token]);
    let proxy = bearer_proxy::BearerProxy::start(&server.url, token);
    let url = proxy.url.clone();
    for scenario in [
        "server-initialize",
        "ping",
        "tools-list",
        "dns-rebinding-protection",
    ] {
        suite(&["server", "--url", &url, "--scenario", scenario]);
    }
}

#[test]
fn the_client_scenarios_pass_against_kiln_run() {
    let client = format!("sh {}", kiln_testkit::mcp_conformance_client().display());
    for scenario in ["initialize", "tools_call", "sse-retry"] {
        suite(&[
            "client",
            "--command",
            &client,
            "--scenario",
            scenario,
            "--timeout",
            "20000",
        ]);
    }
}

#[test]
fn a_server_request_the_client_did_not_declare_does_not_hold_the_call() {
    let client = format!("sh {}", kiln_testkit::mcp_conformance_client().display());
    let (_, report) = run_suite(&[
        "client",
        "--command",
        &client,
        "--scenario",
        "elicitation-sep1034-client-defaults",
        "--timeout",
        "20000",
    ]);
    // The suite gives up after 20 s; a call held for its own 30 s timeout
    // would be TIMED OUT.
    assert!(!report.contains("TIMED OUT"), "{report}");
    assert!(
        report.contains("does not offer `elicitation/create`"),
        "the server heard why: {report}"
    );
}

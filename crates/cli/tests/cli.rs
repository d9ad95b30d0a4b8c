//! The `kiln` binary as a person runs it: files, standard input, exit codes, and
//! a program that never ends stopped at its wall budget.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a panic here is a failed test with its line"
)]

use std::io::Write as _;
use std::process::{Command, Stdio};

fn kiln(args: &[&str], stdin: Option<&str>) -> (i32, serde_json::Value, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    drop(child.stdin.take());
    let output = child.wait_with_output().unwrap();
    let json = serde_json::from_slice(&output.stdout).unwrap_or(serde_json::Value::Null);
    (
        output.status.code().unwrap_or(-1),
        json,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("kiln-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn runs_a_file_and_prints_the_report() {
    let file = temp_file(
        "ok.js",
        "console.log('hi'); return {n: await Promise.resolve(3)}",
    );
    let (code, report, _) = kiln(&["run", file.to_str().unwrap()], None);
    assert_eq!(code, 0);
    assert_eq!(
        report["outcome"],
        serde_json::json!({"status": "completed", "value": {"n": 3}})
    );
    assert_eq!(report["console"][0]["text"], "hi");
}

#[test]
fn reads_standard_input_and_exits_1_on_a_thrown_error() {
    let (code, report, _) = kiln(&["run", "-"], Some("throw new Error('nope')"));
    assert_eq!(code, 1);
    assert_eq!(report["outcome"]["kind"], "script");
    assert_eq!(report["outcome"]["message"], "Error: nope");
}

#[test]
fn stops_a_program_that_never_ends_at_its_wall_budget() {
    let limits = temp_file("limits.json", r#"{"wall_ms": 300}"#);
    let (code, report, _) = kiln(
        &["run", "-", "--limits", limits.to_str().unwrap()],
        Some("while (true) {}"),
    );
    assert_eq!(code, 1);
    assert_eq!(report["outcome"]["kind"], "budget_exhausted");
}

#[test]
fn refuses_unreadable_input_with_exit_2_and_a_message_naming_it() {
    let (code, _, stderr) = kiln(&["run", "/nonexistent/program.js"], None);
    assert_eq!(code, 2);
    assert!(stderr.contains("`/nonexistent/program.js`"), "{stderr}");

    let limits = temp_file("bad-limits.json", r#"{"wall": 1}"#);
    let (code, _, stderr) = kiln(
        &["run", "-", "--limits", limits.to_str().unwrap()],
        Some("return 1"),
    );
    assert_eq!(code, 2);
    assert!(
        stderr.contains("bad-limits.json") && stderr.contains("wall"),
        "{stderr}"
    );
}

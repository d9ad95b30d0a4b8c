//! Every hostile program of `shared/testdata/escape-corpus` through the real
//! `kiln` binary: each ends within its wall budget with a readable
//! `tool-result/v1` (a value or an error), the process neither crashes nor
//! hangs, no capability is reached, and a secret in the host's environment never
//! shows up in what the guest produced.

#![expect(
    clippy::disallowed_methods,
    reason = "a test's own deadline and timings are real time: they bound and check what ran, not the code's clock"
)]
#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a panic here is a failed test with its line"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const WALL_MS: u64 = 2_000;
const CANARY: &str = "kiln-canary-6b1f0c2e";

fn corpus_dir() -> PathBuf {
    // The workspace sits beside `shared/` (as in CI): crates/cli -> ../../../shared.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata/escape-corpus");
    assert!(
        dir.is_dir(),
        "the escape corpus is missing at {}: shared/ must sit beside the checkout",
        dir.display()
    );
    dir
}

fn programs(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|extension| extension == "js") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// Runs one program; `Err` says what was wrong.
fn check(program: &Path, limits: &Path, catalog: &Path) -> Result<(), String> {
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .arg("run")
        .arg(program)
        .arg("--limits")
        .arg(limits)
        .arg("--tools")
        .arg(catalog)
        .env("KILN_SECRET", CANARY)
        .stdin(Stdio::null())
        .output()
        .map_err(|error| format!("could not start kiln: {error}"))?;
    let elapsed = started.elapsed();
    let code = output.status.code();
    if !matches!(code, Some(0 | 1)) {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!(
            "exit {code:?} (crash or refusal); stderr: {}",
            stderr.lines().last().unwrap_or("")
        ));
    }
    if elapsed > Duration::from_millis(WALL_MS + 3_000) {
        return Err(format!(
            "took {elapsed:?}, past the {WALL_MS} ms wall budget"
        ));
    }
    let result: serde_json::Value = serde_json::from_slice(&output.stdout)
        .map_err(|error| format!("stdout is not JSON: {error}"))?;
    let structured = &result["structuredContent"];
    if !matches!(structured["status"].as_str(), Some("completed" | "failed")) {
        return Err(format!("no status in {structured}"));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    if text.contains(CANARY) {
        return Err("the host's secret reached the guest".into());
    }
    // The only tool is a tripwire: no program is told about it, and calling it
    // means the guest reached a capability by its own search.
    if structured["calls"]
        .as_array()
        .is_some_and(|calls| !calls.is_empty())
    {
        return Err(format!(
            "the program called a tool: {}",
            structured["calls"]
        ));
    }
    Ok(())
}

#[test]
fn every_hostile_program_ends_cleanly_within_its_budget() {
    let dir = corpus_dir();
    let programs = programs(&dir);
    assert!(
        programs.len() >= 200,
        "expected the whole corpus, found {} programs",
        programs.len()
    );
    let scratch = std::env::temp_dir().join(format!("kiln-corpus-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let limits = scratch.join("limits.json");
    std::fs::write(&limits, format!(r#"{{"wall_ms": {WALL_MS}}}"#)).unwrap();
    let catalog = scratch.join("catalog.json");
    std::fs::write(&catalog, r#"[{"name": "tripwire", "returns": "reached"}]"#).unwrap();

    let queue = Mutex::new(programs.iter());
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                loop {
                    let next = queue.lock().unwrap().next();
                    let Some(program) = next else { break };
                    if let Err(problem) = check(program, &limits, &catalog) {
                        let name = program
                            .strip_prefix(&dir)
                            .unwrap_or(program)
                            .display()
                            .to_string();
                        failures.lock().unwrap().push(format!("{name}: {problem}"));
                    }
                }
            });
        }
    });
    std::fs::remove_dir_all(&scratch).unwrap();
    let mut failures = failures.into_inner().unwrap();
    failures.sort();
    assert!(
        failures.is_empty(),
        "{} of {} programs failed:\n{}",
        failures.len(),
        programs.len(),
        failures.join("\n")
    );
}

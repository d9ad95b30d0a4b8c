//! No path reaches an implementation without the ladder. The type system does
//! most of it: `Implementation::call` takes a `Permit` only the dispatcher
//! makes. This test walks every crate's sources for the rest: the places a
//! tool call can enter the host, each pinned with what it does with the call,
//! so a new entrance cannot land unclassified and a stale one cannot linger.

#![allow(
    clippy::unwrap_used,
    reason = "a test: a panic is a failed test with a line number"
)]

use std::path::{Path, PathBuf};

/// `impl ToolHost for X` (where a sandbox run's calls arrive) and the file it
/// lives in, with how the call reaches a tool.
const ENTRANCES: [(&str, &str, &str); 3] = [
    // The sandbox protocol's serving side, for the sandbox worker and the
    // native sandbox process alike: every call goes out to the host in
    // `FromSandbox::Idle`, and the host (the runtime worker's `SandboxPool`,
    // the CLI's `ProcessRunner`) sends each up the run's `Dispatcher::call`
    // (checked below).
    (
        "crates/sandbox/src/server.rs",
        "ServedHost",
        "FromSandbox::Idle",
    ),
    // The in-process sandbox of the run, agent, nodes and evals tests (and
    // the benchmark examples, which include it by path): every call up the
    // ladder.
    ("crates/run/tests/common/mod.rs", "Ladder", "self.0.call("),
    // No tools at all: every call is refused.
    ("crates/sandbox/src/tools.rs", "NoTools", "tool_unavailable"),
];

fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            // Tests of the engine alone drive it with hosts of their own.
            if path
                .file_name()
                .is_some_and(|name| name == "tests" || name == "target")
            {
                continue;
            }
            sources(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

#[test]
fn every_entrance_is_pinned_and_walks_the_ladder() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    sources(&root.join("crates"), &mut files);
    // A test module that shipped-side code (an example) includes with
    // `#[path = "…"]` is an entrance of that code: it is read too.
    let mut included = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for line in text.lines() {
            if let Some(path) = line
                .trim()
                .strip_prefix("#[path = \"")
                .and_then(|rest| rest.strip_suffix("\"]"))
            {
                let module = file.parent().unwrap().join(path);
                included.push(std::fs::canonicalize(&module).unwrap_or(module));
            }
        }
    }
    let root = std::fs::canonicalize(&root).unwrap();
    let mut files: Vec<PathBuf> = files
        .into_iter()
        .map(|file| std::fs::canonicalize(&file).unwrap_or(file))
        .chain(included)
        .collect();
    files.sort();
    files.dedup();
    let mut entrances = Vec::new();
    let mut permits = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let relative = file
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        for line in text.lines() {
            if let Some(rest) = line.trim().strip_prefix("impl ToolHost for ") {
                let name = rest.trim_end_matches(" {").to_owned();
                entrances.push((relative.clone(), name));
            }
        }
        if text.contains("Permit(())") && !relative.ends_with("capabilities/src/dispatch.rs") {
            permits.push(relative.clone());
        }
    }
    entrances.sort();
    let mut pinned: Vec<(String, String)> = ENTRANCES
        .iter()
        .map(|(file, name, _)| ((*file).to_owned(), (*name).to_owned()))
        .collect();
    pinned.sort();
    assert_eq!(
        entrances, pinned,
        "an entrance was added or removed: classify it here"
    );
    assert!(
        permits.is_empty(),
        "a Permit is made outside the dispatcher in {permits:?}"
    );
    for (file, _, proof) in ENTRANCES {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        assert!(text.contains(proof), "{file} no longer does `{proof}`");
    }
    // The page side of the worker entrance: the pool answers calls only
    // through the run's dispatcher.
    let pool = std::fs::read_to_string(root.join("crates/host/src/pool.rs")).unwrap();
    assert!(
        pool.contains("tools: &Rc<Dispatcher>") && pool.contains("tools.call(request, signal)")
    );
    assert_eq!(
        pool.matches(".call(").count(),
        1,
        "the pool calls tools in one place"
    );
    // The parent side of the sandbox process: the same, through the action's dispatcher.
    let process = std::fs::read_to_string(root.join("crates/cli/src/sandbox_process.rs")).unwrap();
    assert!(
        process.contains("tools: Rc<Dispatcher>") && process.contains("tools.call(request, held)")
    );
    assert_eq!(
        process.matches("tools.call(").count(),
        1,
        "the sandbox process's parent calls tools in one place"
    );
}

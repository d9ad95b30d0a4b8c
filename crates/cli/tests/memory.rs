//! `kiln memory` as a person (or several processes at once) runs it: save,
//! list, query, mark, export and import on an on-disk store; clear errors;
//! two writers at once losing nothing; a writer killed mid-write losing
//! nothing it acknowledged; a run whose process was killed marked
//! interrupted by the next one.

#![expect(
    clippy::disallowed_methods,
    reason = "a test's own deadline and timings are real time: they bound and check what ran, not the code's clock"
)]
#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a panic here is a failed test with its line"
)]

mod common;

use common::{Output, kiln};
use std::collections::BTreeSet;
use std::fs;
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use kiln_testkit::TempDir;

/// A fresh folder under Cargo's temp dir, removed when dropped.
fn temp_dir(name: &str) -> TempDir {
    TempDir::new(env!("CARGO_TARGET_TMPDIR"), &format!("memory-{name}"))
}

fn command() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kiln"));
    command.env_remove("KILN_STORE");
    command
}

/// `kiln memory ARGS... --store STORE`.
fn memory(store: &str, args: &[&str]) -> Output {
    let mut all = vec!["memory"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--store", store]);
    kiln(&all)
}

fn ids(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|memory| memory["id"].as_str().unwrap().to_owned())
        .collect()
}

/// A listing without the record versions (an import starts them again).
fn without_versions(list: &Value) -> Vec<Value> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|memory| {
            let mut memory = memory.clone();
            memory.as_object_mut().unwrap().remove("version");
            memory
        })
        .collect()
}

/// `kiln memory save - --store STORE`, its standard input and output piped.
fn saver(store: &str) -> Child {
    command()
        .args(["memory", "save", "-", "--store", store])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn save_list_query_mark_export_import() {
    let dir = temp_dir("flow");
    let store = dir.join("store");
    let teal = memory(
        &store,
        &[
            "save",
            "The user's favourite colour is teal",
            "--agent",
            "ada",
        ],
    )
    .json_ok();
    assert_eq!(
        (
            teal["agent"].as_str(),
            teal["version"].as_u64(),
            teal["helpful"].as_u64()
        ),
        (Some("ada"), Some(1), Some(0))
    );
    let soup = memory(
        &store,
        &[
            "save",
            "Soup recipes are in notes/soup.md; the pot's colour is red",
        ],
    )
    .json_ok();
    assert_eq!(soup["agent"], "default");
    let deploys = memory(
        &store,
        &["save", "Deploys happen on Fridays", "--agent", "bob"],
    )
    .json_ok();

    let list = memory(&store, &["list"]).json_ok();
    assert_eq!(
        ids(&list),
        [&deploys["id"], &soup["id"], &teal["id"]].map(|id| id.as_str().unwrap().to_owned()),
        "newest first"
    );
    assert_eq!(
        ids(&memory(&store, &["list", "--agent", "ada"]).json_ok()).len(),
        1
    );
    assert_eq!(
        ids(&memory(&store, &["list", "--limit", "2"]).json_ok()).len(),
        2
    );

    let hits = memory(&store, &["query", "favourite", "colour"]).json_ok();
    assert_eq!(
        ids(&hits),
        [&teal["id"], &soup["id"]].map(|id| id.as_str().unwrap().to_owned())
    );
    assert!(hits[0]["score"].as_f64().unwrap() > hits[1]["score"].as_f64().unwrap());
    assert_eq!(
        hits[0]["text"], teal["text"],
        "a hit carries the memory's fields"
    );
    assert_eq!(
        ids(&memory(&store, &["query", "colour", "--limit", "1"]).json_ok()).len(),
        1
    );
    assert!(
        memory(&store, &["query", "colour", "--agent", "bob"]).json_ok() == Value::Array(vec![])
    );

    let marked = memory(&store, &["mark", soup["id"].as_str().unwrap(), "helpful"]).json_ok();
    assert_eq!(
        (marked["helpful"].as_u64(), marked["version"].as_u64()),
        (Some(1), Some(2))
    );
    let marked = memory(&store, &["mark", teal["id"].as_str().unwrap(), "outdated"]).json_ok();
    assert_eq!(marked["outdated"], true);
    let hits = memory(&store, &["query", "favourite", "colour"]).json_ok();
    assert_eq!(
        ids(&hits),
        [&soup["id"], &teal["id"]].map(|id| id.as_str().unwrap().to_owned()),
        "outdated ranks last"
    );

    // A workspace file travels with the export.
    fs::create_dir_all(dir.path().join("store/files/notes")).unwrap();
    fs::write(dir.path().join("store/files/notes/soup.md"), "# Soup\n").unwrap();
    let file = dir.join("export.json");
    let exported = memory(&store, &["export", &file]);
    assert_eq!(exported.code, 0, "{}", exported.stderr);
    assert!(
        exported
            .stderr
            .contains("exported 3 records (memories 3) and 1 files")
            && exported.stderr.contains("API keys left out"),
        "{}",
        exported.stderr
    );
    assert!(!Path::new(&format!("{file}.tmp")).exists());
    let doc: Value = serde_json::from_str(&fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(
        (doc["format"].as_str(), doc["schema"].as_u64()),
        (Some("kiln-export"), Some(2))
    );

    let fresh = dir.join("fresh");
    let summary = memory(&fresh, &["import", &file]).json_ok();
    assert_eq!(
        (
            summary["records"]["memories"].as_u64(),
            summary["files"].as_u64()
        ),
        (Some(3), Some(1))
    );
    assert_eq!(
        without_versions(&memory(&fresh, &["list"]).json_ok()),
        without_versions(&memory(&store, &["list"]).json_ok()),
        "the same memories, marks included"
    );
    assert_eq!(
        fs::read_to_string(dir.path().join("fresh/files/notes/soup.md")).unwrap(),
        "# Soup\n"
    );
    let hits = memory(&fresh, &["query", "friday"]).json_ok();
    assert_eq!(
        ids(&hits),
        [deploys["id"].as_str().unwrap()],
        "searchable after import"
    );
}

#[test]
fn bad_inputs_give_clear_errors() {
    let dir = temp_dir("errors");
    let store = dir.join("store");
    let not_export = dir.join("not-export.json");
    fs::write(&not_export, r#"{"hello": "world"}"#).unwrap();
    let not_json = dir.join("not-json.txt");
    fs::write(&not_json, "hello").unwrap();
    let missing = dir.join("missing.json");
    let a_file = dir.join("a-file");
    fs::write(&a_file, "x").unwrap();
    let damaged = dir.join("damaged");
    fs::create_dir_all(&damaged).unwrap();
    fs::write(
        dir.path().join("damaged/store.log"),
        "{\"kiln_store\":2}\n{\"ops\":[]}\nnot a batch\n{\"ops\":[]}\n",
    )
    .unwrap();
    let a_folder = dir.join("");
    let export_dir = dir.join("export-here");
    fs::create_dir_all(&export_dir).unwrap();

    let cases: [(&[&str], &str, i32, &[&str]); 13] = [
        (
            &["mark", "m-nope", "helpful"],
            &store,
            1,
            &["memory `m-nope` does not exist"],
        ),
        (&["save", "   "], &store, 1, &["a memory's text is empty"]),
        (
            &["query", "!! ?"],
            &store,
            1,
            &["has no words to search for"],
        ),
        (
            &["import", &not_export],
            &store,
            1,
            &[
                "is not a Kiln export",
                "nothing was imported\nhint: import a file made by `kiln memory export`",
            ],
        ),
        (
            &["import", &not_json],
            &store,
            1,
            &[
                "is not JSON",
                "hint: give a file written by `kiln memory export`",
            ],
        ),
        (
            &["import", &missing],
            &store,
            1,
            &["could not read", "missing.json"],
        ),
        (&["import", &a_folder], &store, 1, &["could not read"]),
        (
            &["export", &export_dir],
            &store,
            1,
            &["could not write", "export-here"],
        ),
        (&["list"], &a_file, 1, &["could not create", "a-file"]),
        (
            &["list"],
            &damaged,
            1,
            &["store.log` line 3", "\nhint: restore `", "delete line 3"],
        ),
        (
            &["mark", "m-1", "stale"],
            &store,
            2,
            &["'stale'", "helpful, outdated"],
        ),
        (&["list", "--limit", "many"], &store, 2, &["'many'"]),
        (&["save"], &store, 2, &["<TEXT>"]),
    ];
    for (args, store, code, needles) in cases {
        let output = memory(store, args);
        assert_eq!(output.code, code, "{args:?}: {}", output.stderr);
        assert!(output.stdout.is_empty(), "{args:?}: {}", output.stdout);
        assert!(
            !output.stderr.contains("panicked"),
            "{args:?}: {}",
            output.stderr
        );
        assert!(
            output.stderr.starts_with("error: "),
            "{args:?}: {}",
            output.stderr
        );
        for needle in needles {
            assert!(
                output.stderr.contains(needle),
                "{args:?}: {needle} in {}",
                output.stderr
            );
        }
    }
    assert!(
        fs::read_dir(&export_dir).unwrap().next().is_none(),
        "no temp file left"
    );

    let no_store = kiln(&["memory", "list"]);
    assert_eq!(no_store.code, 2);
    assert!(
        no_store.stderr.contains("--store <DIR>"),
        "{}",
        no_store.stderr
    );
    let from_env = command()
        .args(["memory", "save", "kept through the environment"])
        .env("KILN_STORE", &store)
        .output()
        .unwrap();
    assert!(
        from_env.status.success(),
        "{}",
        String::from_utf8_lossy(&from_env.stderr)
    );
    assert_eq!(
        ids(&memory(&store, &["list"]).json_ok()).len(),
        1,
        "`KILN_STORE` names the store"
    );
}

#[test]
fn two_processes_writing_at_once_lose_nothing() {
    let dir = temp_dir("two");
    let store = dir.join("store");
    let started = Instant::now();
    let mut writers: Vec<Child> = (0..2).map(|_| saver(&store)).collect();
    for (n, writer) in writers.iter_mut().enumerate() {
        let lines: String = (0..50)
            .map(|i| format!("writer {n} memory {i}\n"))
            .collect();
        writer
            .stdin
            .take()
            .unwrap()
            .write_all(lines.as_bytes())
            .unwrap();
    }
    for writer in writers {
        let output = writer.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&output.stdout).lines().count(), 50);
    }
    let elapsed = started.elapsed();
    let list = memory(&store, &["list"]).json_ok();
    let texts: BTreeSet<String> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|memory| memory["text"].as_str().unwrap().to_owned())
        .collect();
    let expected: BTreeSet<String> = (0..2)
        .flat_map(|n| (0..50).map(move |i| format!("writer {n} memory {i}")))
        .collect();
    assert_eq!(texts, expected, "all 100 memories");
    assert_eq!(list.as_array().unwrap().len(), 100, "no duplicate");
    // How interleaved the two writers were (scheduling decides; not asserted).
    let writers: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|memory| &memory["text"].as_str().unwrap()[..8])
        .collect();
    let switches = writers.windows(2).filter(|pair| pair[0] != pair[1]).count();
    eprintln!("the commits switched writer {switches} times");
    eprintln!("two writers, 50 saves each: {elapsed:?}");
}

#[test]
fn a_process_killed_mid_write_leaves_every_acknowledged_entry() {
    let dir = temp_dir("killed");
    let store = dir.join("store");
    let mut acknowledged = Vec::new();
    for round in 0..3 {
        let mut child = saver(&store);
        let mut stdin = child.stdin.take().unwrap();
        let feeder = std::thread::spawn(move || {
            for i in 0..1_000_000 {
                // The pipe breaks when the child is killed: that ends the feed.
                if writeln!(stdin, "round {round} memory {i} to keep").is_err() {
                    break;
                }
            }
        });
        let printed = Arc::new(Mutex::new(Vec::new()));
        let reader = std::thread::spawn({
            let printed = printed.clone();
            let stdout = child.stdout.take().unwrap();
            move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    printed.lock().unwrap().push(line);
                }
            }
        });
        // Some acknowledged, then killed wherever it is (SIGKILL on Unix).
        let started = Instant::now();
        while printed.lock().unwrap().len() < 5 && started.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(150 + 70 * round));
        child.kill().unwrap();
        child.wait().unwrap();
        reader.join().unwrap();
        feeder.join().unwrap();
        let log = fs::read(dir.path().join("store/store.log")).unwrap();
        eprintln!(
            "round {round}: the kill left {}",
            if log.ends_with(b"\n") {
                "whole lines"
            } else {
                "a torn last line"
            }
        );
        let printed = printed.lock().unwrap();
        // A line cut short by the kill was not read as a line, or does not parse.
        let ids: Vec<String> = printed
            .iter()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .map(|memory| memory["id"].as_str().unwrap().to_owned())
            .collect();
        assert!(
            ids.len() >= 5,
            "round {round}: only {} acknowledged",
            ids.len()
        );
        eprintln!("round {round}: {} acknowledged before the kill", ids.len());
        acknowledged.extend(ids);

        let listed: BTreeSet<String> = ids_of_all(&store);
        let lost: Vec<&String> = acknowledged
            .iter()
            .filter(|id| !listed.contains(*id))
            .collect();
        assert!(
            lost.is_empty(),
            "round {round}: acknowledged but lost: {lost:?}"
        );
    }
    let after = memory(&store, &["save", "written after the kills"]).json_ok();
    assert!(
        ids_of_all(&store).contains(after["id"].as_str().unwrap()),
        "still accepts writes"
    );
    let log = fs::read_to_string(dir.path().join("store/store.log")).unwrap();
    assert!(log.ends_with('\n'), "the next writer left a clean end");
    for (number, line) in log.lines().enumerate() {
        assert!(
            serde_json::from_str::<Value>(line).is_ok(),
            "line {}: {line}",
            number + 1
        );
    }
}

fn ids_of_all(store: &str) -> BTreeSet<String> {
    ids(&memory(store, &["list"]).json_ok())
        .into_iter()
        .collect()
}

#[test]
fn a_program_run_with_the_store_keeps_its_memory_files_and_history() {
    let dir = temp_dir("run");
    let store = dir.join("store");
    let program = dir.join("program.js");
    fs::write(
        &program,
        "// keep a note\nawait workspace.write(\"notes/a.md\", \"from a program\");\n\
         const m = await tools.save_memory({text: \"programs on the CLI keep memories\"});\n\
         return m.id;",
    )
    .unwrap();
    let first = kiln(&["run", &program, "--store", &store, "--approve", "yes"]);
    let result: Value = serde_json::from_str(&first.stdout).unwrap();
    assert_eq!(first.code, 0, "{}", first.stdout);
    let id = result["structuredContent"]["value"]
        .as_str()
        .unwrap()
        .to_owned();
    let found = memory(&store, &["query", "programs", "memories"]).json_ok();
    assert_eq!(ids(&found), [id]);
    assert_eq!(found[0]["agent"], "cli");
    assert_eq!(
        fs::read_to_string(Path::new(&store).join("files/notes/a.md")).unwrap(),
        "from a program"
    );
    // A second run reads what the first wrote, and cannot leave the workspace.
    fs::write(
        &program,
        "const text = await workspace.read(\"notes/a.md\");\n\
         let refused;\n\
         try { await workspace.read(\"../store.log\"); } catch (e) { refused = e.code; }\n\
         return {text, refused};",
    )
    .unwrap();
    let second = kiln(&["run", &program, "--store", &store, "--approve", "yes"]);
    let result: Value = serde_json::from_str(&second.stdout).unwrap();
    assert_eq!(
        result["structuredContent"]["value"],
        serde_json::json!({"text": "from a program", "refused": "path_refused"})
    );
    // Both runs are in the store's history, newest first.
    let exported = dir.join("export.json");
    assert_eq!(memory(&store, &["export", &exported]).code, 0);
    let doc: Value = serde_json::from_str(&fs::read_to_string(&exported).unwrap()).unwrap();
    let jobs = doc["tables"]["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2);
    assert!(
        jobs.iter()
            .all(|job| job["value"]["status"] == "ok" && job["value"]["agent"] == "cli")
    );
    assert_eq!(
        jobs[0]["value"]["title"],
        "await workspace.write(\"notes/a.md\", \"from a program\");"
    );
}

/// The jobs in `store`'s history, as `kiln memory export` writes them.
fn jobs_of(dir: &TempDir, store: &str) -> Vec<Value> {
    let exported = dir.join("jobs.json");
    assert_eq!(memory(store, &["export", &exported]).code, 0);
    let doc: Value = serde_json::from_str(&fs::read_to_string(&exported).unwrap()).unwrap();
    doc["tables"]["jobs"]
        .as_array()
        .map(|jobs| jobs.iter().map(|job| job["value"].clone()).collect())
        .unwrap_or_default()
}

#[test]
fn a_run_whose_process_was_killed_is_marked_interrupted_by_the_next_run() {
    let dir = temp_dir("interrupted");
    let store = dir.join("store");
    let waits = dir.join("waits.js");
    fs::write(
        &waits,
        "// Waits to be killed\nwhile (true) await sleep(10000);",
    )
    .unwrap();
    let quick = dir.join("quick.js");
    fs::write(&quick, "return 2;").unwrap();
    let status_of_waiting = |jobs: &[Value]| {
        jobs.iter()
            .find(|job| {
                job["input"]
                    .as_str()
                    .unwrap()
                    .contains("Waits to be killed")
            })
            .map(|job| job["status"].as_str().unwrap().to_owned())
    };
    let mut waiting = command()
        .args(["run", &waits, "--store", &store, "--approve", "yes"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while status_of_waiting(&jobs_of(&dir, &store)).is_none() {
        assert!(Instant::now() < deadline, "the run was never recorded");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Another process opens the store while the first is alive: its run goes on.
    assert_eq!(kiln(&["run", &quick, "--store", &store]).code, 0);
    assert_eq!(
        status_of_waiting(&jobs_of(&dir, &store)).as_deref(),
        Some("running")
    );

    waiting.kill().unwrap();
    waiting.wait().unwrap();
    assert_eq!(kiln(&["run", &quick, "--store", &store]).code, 0);
    let jobs = jobs_of(&dir, &store);
    assert_eq!(status_of_waiting(&jobs).as_deref(), Some("interrupted"));
    let interrupted = jobs
        .iter()
        .find(|job| {
            job["input"]
                .as_str()
                .unwrap()
                .contains("Waits to be killed")
        })
        .unwrap();
    assert_eq!(
        interrupted["output"],
        "Interrupted: the tab or process that ran it ended before it finished."
    );
    assert!(
        jobs.iter()
            .filter(|job| job["title"] == "return 2;")
            .all(|job| job["status"] == "ok"),
        "{jobs:?}"
    );
}

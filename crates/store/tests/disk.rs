#![cfg(not(target_arch = "wasm32"))]
//! The on-disk twins: the contract suite on `LogBackend` and `DirTree`, and
//! what only a disk shows — reopening, two handles on one log, a torn tail,
//! a damaged line, a schema-1 log, compaction, symbolic links, and the
//! owners' records of many processes on one store.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a panic here is a failed test with its line"
)]

use std::fs;
use std::io::Write as _;
use std::path::PathBuf;
use std::rc::Rc;

use futures::executor::block_on;
use kiln_store::durable::DurableMemory;
use kiln_store::files::{FileTree, WorkspacePath};
use kiln_store::native::{
    COMPACT_MIN_BYTES, DirTree, FileOwners, LOG_FILE, LogBackend, OWNERS_FOLDER,
};
use kiln_store::owners::Owners as _;
use kiln_store::{Backend, Expect, Op, Record, StoreError, Table, contract};
use serde_json::{Value, json};

use kiln_testkit::TempDir;

/// A fresh folder under Cargo's temp dir, removed when dropped.
fn temp_dir(name: &str) -> TempDir {
    TempDir::new(env!("CARGO_TARGET_TMPDIR"), &format!("disk-{name}"))
}

/// The log file of the store in `dir`.
fn log(dir: &TempDir) -> PathBuf {
    dir.path().join(LOG_FILE)
}

fn open(dir: &TempDir) -> Rc<LogBackend> {
    LogBackend::open(dir.path()).unwrap()
}

fn put(backend: &LogBackend, key: &str, value: Value, expect: Expect) -> Result<(), StoreError> {
    block_on(backend.commit(vec![Op::put(Table::Config, key, value, expect)])).map(drop)
}

fn get(backend: &LogBackend, key: &str) -> Option<(u64, Value)> {
    block_on(backend.get(Table::Config, key))
        .unwrap()
        .map(|record| (record.version, record.value))
}

fn lines(dir: &TempDir) -> Vec<String> {
    fs::read_to_string(log(dir))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn log_backend_keeps_the_contract() {
    let (a, b) = (temp_dir("contract-a"), temp_dir("contract-b"));
    block_on(contract::backend_suite(open(&a), open(&b)));
    // Every line written by the suite reads back in a fresh handle.
    let again = open(&a);
    assert!(block_on(again.count(Table::Memories)).unwrap() > 0);
}

#[test]
fn dir_tree_keeps_the_contract() {
    let dir = temp_dir("tree");
    block_on(contract::tree_suite(
        DirTree::open(&dir.path().join("files")).unwrap() as Rc<_>,
    ));
}

#[test]
fn a_reopened_store_has_every_record_with_its_version() {
    let dir = temp_dir("reopen");
    let backend = open(&dir);
    put(&backend, "k", json!(1), Expect::Absent).unwrap();
    put(&backend, "k", json!(2), Expect::Version(1)).unwrap();
    put(&backend, "gone", json!(0), Expect::Absent).unwrap();
    block_on(backend.commit(vec![Op::delete(Table::Config, "gone", Expect::Any)])).unwrap();
    let memory =
        block_on(DurableMemory::new(backend.clone()).save("ada", "Teal is the colour")).unwrap();
    drop(backend);

    assert_eq!(
        lines(&dir)[0],
        r#"{"kiln_store":2,"generation":0}"#,
        "the header"
    );
    assert_eq!(lines(&dir).len(), 6, "a header and one line per commit");
    let again = open(&dir);
    assert_eq!(get(&again, "k"), Some((2, json!(2))));
    assert_eq!(get(&again, "gone"), None);
    let hits = block_on(DurableMemory::new(again.clone()).query("colour", None, 10)).unwrap();
    assert_eq!(hits.len(), 1, "the term index is rebuilt on replay");
    assert_eq!(hits[0].memory.id, memory.id);
    assert_eq!(again.describe(), log(&dir).display().to_string());
}

#[test]
fn two_handles_race_and_see_each_other() {
    let dir = temp_dir("two");
    let first = open(&dir);
    let second = open(&dir);
    put(&first, "shared", json!("v1"), Expect::Absent).unwrap();
    assert_eq!(
        get(&second, "shared"),
        Some((1, json!("v1"))),
        "the second sees the first's write"
    );
    // Both read version 1, both write expecting it: the first wins.
    let (read_a, read_b) = (get(&first, "shared"), get(&second, "shared"));
    assert_eq!(read_a.map(|r| r.0), Some(1));
    assert_eq!(read_b.map(|r| r.0), Some(1));
    put(&first, "shared", json!("first"), Expect::Version(1)).unwrap();
    let lost = put(&second, "shared", json!("second"), Expect::Version(1)).unwrap_err();
    assert!(
        matches!(&lost, StoreError::Conflict { expected, found, .. } if expected == "1" && found == "2"),
        "{lost}"
    );
    assert_eq!(get(&first, "shared"), Some((2, json!("first"))));
    assert_eq!(get(&second, "shared"), Some((2, json!("first"))));
    put(&second, "from-second", json!(true), Expect::Absent).unwrap();
    assert_eq!(get(&first, "from-second"), Some((1, json!(true))));
    assert_eq!(lines(&dir).len(), 4, "the refused write left no line");
}

#[test]
fn a_torn_tail_is_ignored_then_cut_by_the_next_writer() {
    let dir = temp_dir("torn");
    let backend = open(&dir);
    put(&backend, "a", json!(1), Expect::Absent).unwrap();
    put(&backend, "b", json!(2), Expect::Absent).unwrap();
    drop(backend);
    let clean = fs::read(log(&dir)).unwrap();
    // A writer killed halfway through its line.
    let mut file = fs::OpenOptions::new().append(true).open(log(&dir)).unwrap();
    file.write_all(br#"{"ops":[{"table":"config","key":"c","expect":"any","wri"#)
        .unwrap();
    drop(file);

    let reader = open(&dir);
    assert_eq!(get(&reader, "a"), Some((1, json!(1))));
    assert_eq!(get(&reader, "b"), Some((1, json!(2))));
    assert_eq!(get(&reader, "c"), None, "the torn line is not a record");
    let other = open(&dir);
    assert_eq!(get(&other, "b"), Some((1, json!(2))));
    assert!(
        fs::read(log(&dir)).unwrap().len() > clean.len(),
        "readers leave the tail alone"
    );

    put(&other, "c", json!(3), Expect::Absent).unwrap();
    let text = fs::read_to_string(log(&dir)).unwrap();
    assert!(text.starts_with(std::str::from_utf8(&clean).unwrap()));
    assert!(
        text.ends_with('\n') && !text.contains("wri\""),
        "cut: {text}"
    );
    assert_eq!(text.lines().count(), 4);
    for line in text.lines() {
        serde_json::from_str::<Value>(line).unwrap();
    }
    assert_eq!(
        get(&reader, "c"),
        Some((1, json!(3))),
        "the reader catches up"
    );
    assert_eq!(get(&open(&dir), "c"), Some((1, json!(3))));

    // A complete last line that does not parse is torn too.
    let mut file = fs::OpenOptions::new().append(true).open(log(&dir)).unwrap();
    file.write_all(b"{\"ops\":[\n").unwrap();
    drop(file);
    let writer = open(&dir);
    put(&writer, "d", json!(4), Expect::Absent).unwrap();
    assert_eq!(lines(&dir).len(), 5);
    assert_eq!(get(&reader, "d"), Some((1, json!(4))));
}

#[test]
fn a_damaged_line_in_the_middle_is_corrupt_by_line() {
    let dir = temp_dir("corrupt");
    let backend = open(&dir);
    for key in ["a", "b", "c"] {
        put(&backend, key, json!(key), Expect::Absent).unwrap();
    }
    drop(backend);
    let mut lines = lines(&dir);
    lines[2] = "{\"ops\": [garbage".into();
    fs::write(log(&dir), lines.join("\n") + "\n").unwrap();

    let error = LogBackend::open(dir.path()).err().unwrap();
    let message = error.to_string();
    assert_eq!(error.code(), "corrupt");
    assert!(
        message.contains("line 3") && message.contains(LOG_FILE),
        "{message}"
    );
    // The hint says which line to delete from which file.
    assert!(
        error
            .hint()
            .is_some_and(|hint| hint.contains(LOG_FILE) && hint.contains("delete line 3")),
        "{}",
        error.with_hint()
    );
}

#[test]
fn a_missing_or_garbled_header_is_corrupt() {
    for (name, contents) in [
        ("garbled", "not json\n{\"ops\":[]}\n"),
        ("headless", "{\"ops\":[]}\n"),
        ("torn-header", "{\"kiln_sto"),
    ] {
        let dir = temp_dir(name);
        fs::write(log(&dir), contents).unwrap();
        let error = LogBackend::open(dir.path()).err().unwrap();
        assert_eq!(error.code(), "corrupt", "{name}: {error}");
        assert!(error.to_string().contains("line 1"), "{name}: {error}");
    }
}

#[test]
fn a_newer_schema_is_too_new() {
    let dir = temp_dir("too-new");
    fs::write(log(&dir), "{\"kiln_store\":3,\"generation\":0}\n").unwrap();
    let error = LogBackend::open(dir.path()).err().unwrap();
    assert!(
        matches!(
            error,
            StoreError::TooNew {
                found: 3,
                supported: 2,
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(
        fs::read_to_string(log(&dir)).unwrap(),
        "{\"kiln_store\":3,\"generation\":0}\n",
        "left as it was"
    );
}

#[test]
fn a_schema_1_log_is_upgraded_with_its_records() {
    let dir = temp_dir("v1");
    let memory =
        json!({"id": "m-1", "text": "Deploys happen on Fridays", "agent": "ops", "created_ms": 1});
    let batch = json!({"ops": [
        {"table": "memories", "key": "m-1", "expect": "absent", "write": {"put": memory}},
        {"table": "config", "key": "settings", "expect": "absent", "write": {"put": {"brake": false}}},
    ]});
    let edit = json!({"ops": [
        {"table": "config", "key": "settings", "expect": {"version": 1}, "write": {"put": {"brake": true}}},
    ]});
    fs::write(
        log(&dir),
        format!("{{\"kiln_store\":1}}\n{batch}\n{edit}\n"),
    )
    .unwrap();

    let backend = open(&dir);
    let text = lines(&dir);
    assert_eq!(
        text[0], r#"{"kiln_store":2,"generation":1}"#,
        "header rewritten"
    );
    assert_eq!(text.len(), 3, "the lines are kept");
    assert_eq!(get(&backend, "settings"), Some((2, json!({"brake": true}))));
    let hits =
        block_on(DurableMemory::new(backend.clone()).query("friday deploy", None, 10)).unwrap();
    assert_eq!(hits.len(), 1, "indexed on replay");
    assert_eq!(hits[0].memory.id, "m-1");
    assert!(!dir.path().join("store.log.tmp").exists());
    drop(backend);
    assert_eq!(get(&open(&dir), "settings").map(|r| r.0), Some(2));
}

#[test]
fn compaction_shrinks_the_log_and_keeps_versions() {
    let dir = temp_dir("compact");
    let writer = open(&dir);
    let early = open(&dir);
    put(&writer, "other", json!("kept"), Expect::Absent).unwrap();
    put(&writer, "gone", json!("deleted"), Expect::Absent).unwrap();
    block_on(writer.commit(vec![Op::delete(Table::Config, "gone", Expect::Any)])).unwrap();
    assert_eq!(get(&early, "other"), Some((1, json!("kept"))));
    let memory =
        block_on(DurableMemory::new(writer.clone()).save("ada", "Lyon trains leave at nine"))
            .unwrap();

    let big = "x".repeat(32 * 1024);
    // Three times the threshold in lines, the live data one line.
    let n_writes = (COMPACT_MIN_BYTES / big.len() as u64) * 3;
    let mut largest = 0;
    for version in 1..=n_writes {
        let expect = if version == 1 {
            Expect::Absent
        } else {
            Expect::Version(version - 1)
        };
        put(&writer, "hot", json!({"n": version, "pad": big}), expect).unwrap();
        largest = largest.max(fs::metadata(log(&dir)).unwrap().len());
    }
    assert!(
        largest <= COMPACT_MIN_BYTES,
        "never past the threshold after a commit: {largest} bytes after {n_writes} writes of {} bytes",
        big.len()
    );
    let text = lines(&dir);
    let header: Value = serde_json::from_str(&text[0]).unwrap();
    assert!(
        header["generation"].as_u64().unwrap() >= 2,
        "compacted more than once: {header}"
    );
    assert!(
        text.iter()
            .skip(1)
            .any(|line| line.starts_with(r#"{"snapshot":"#)),
        "snapshot lines"
    );
    assert!(!dir.path().join("store.log.tmp").exists());

    let expect_hot = Some((n_writes, json!({"n": n_writes, "pad": big})));
    assert_eq!(get(&writer, "hot"), expect_hot, "the writer");
    assert_eq!(get(&early, "hot"), expect_hot, "a handle opened before");
    assert_eq!(get(&early, "other"), Some((1, json!("kept"))));
    assert_eq!(get(&early, "gone"), None);
    let fresh = open(&dir);
    assert_eq!(get(&fresh, "hot"), expect_hot, "a fresh handle");
    let hits = block_on(DurableMemory::new(fresh.clone()).query("lyon", None, 10)).unwrap();
    assert_eq!(hits.first().map(|hit| &hit.memory.id), Some(&memory.id));
    // Writes go on at the kept versions, from any handle.
    put(&early, "hot", json!("after"), Expect::Version(n_writes)).unwrap();
    assert_eq!(get(&writer, "hot"), Some((n_writes + 1, json!("after"))));
    assert_eq!(
        get(&open(&dir), "hot"),
        Some((n_writes + 1, json!("after")))
    );
}

#[test]
fn records_survive_in_the_log_not_just_in_memory() {
    let dir = temp_dir("durable");
    let backend = open(&dir);
    put(&backend, "k", json!({"n": 1}), Expect::Absent).unwrap();
    let last = lines(&dir).pop().unwrap();
    let line: Value = serde_json::from_str(&last).unwrap();
    let op: Op = serde_json::from_value(line["ops"][0].clone()).unwrap();
    assert_eq!(
        op,
        Op::put(Table::Config, "k", json!({"n": 1}), Expect::Absent)
    );
    let record: Option<Record> = block_on(backend.get(Table::Config, "k")).unwrap();
    assert_eq!(record.map(|r| r.version), Some(1));
}

fn path(text: &str) -> WorkspacePath {
    WorkspacePath::parse(text).unwrap()
}

#[cfg(unix)]
#[test]
fn dir_tree_refuses_links_out_and_hides_temp_files() {
    let dir = temp_dir("links");
    let root = dir.path().join("files");
    let outside = dir.path().join("outside");
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("secret.txt"), "secret").unwrap();
    let tree = DirTree::open(&root).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("out")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), root.join("secret.txt")).unwrap();
    block_on(tree.write(&path("inside/a.txt"), b"a".to_vec())).unwrap();
    std::os::unix::fs::symlink(root.join("inside"), root.join("alias")).unwrap();
    fs::write(root.join("inside/.kiln-tmp-1-2-3"), "half").unwrap();

    for (what, result) in [
        (
            "read",
            block_on(tree.read(&path("out/secret.txt"))).map(drop),
        ),
        (
            "read a link",
            block_on(tree.read(&path("secret.txt"))).map(drop),
        ),
        (
            "write",
            block_on(tree.write(&path("out/new.txt"), b"x".to_vec())).map(drop),
        ),
        ("list", block_on(tree.list(&path("out"))).map(drop)),
        (
            "stat",
            block_on(tree.stat(&path("out/secret.txt"))).map(drop),
        ),
        ("mkdir", block_on(tree.mkdir(&path("out/sub"))).map(drop)),
        ("remove", block_on(tree.remove(&path("out/secret.txt")))),
    ] {
        let error = result.unwrap_err().to_string();
        assert!(
            error.contains("leads outside the workspace through a symbolic link")
                && (error.contains("`out") || error.contains("`secret.txt`")),
            "{what}: {error}"
        );
    }
    assert!(!outside.join("new.txt").exists() && !outside.join("sub").exists());
    assert_eq!(
        fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "secret"
    );

    assert_eq!(
        block_on(tree.read(&path("alias/a.txt"))).unwrap(),
        b"a",
        "a link inside is followed"
    );
    let names: Vec<String> = block_on(tree.list(&WorkspacePath::root()))
        .unwrap()
        .into_iter()
        .map(|entry| entry.name)
        .collect();
    assert_eq!(names, ["alias", "inside"], "links out are not listed");
    let inside: Vec<String> = block_on(tree.list(&path("inside")))
        .unwrap()
        .into_iter()
        .map(|entry| entry.name)
        .collect();
    assert_eq!(inside, ["a.txt"], "temp files are not listed");
    block_on(tree.remove(&path("inside/a.txt"))).unwrap();
    block_on(tree.remove(&path("inside"))).unwrap();
    assert!(
        !root.join("inside").exists(),
        "a leftover temp file does not keep a folder"
    );
}

/// A value as deep as a reader cannot read is refused when written, so the log
/// stays readable by every later open (issue 15 #9: one `share_result` 123–127
/// levels deep once made every later `kiln memory list` fail). Run memory
/// refuses past `kiln_types::MAX_VALUE_DEPTH`; the log refuses any line its
/// replay could not read.
#[test]
fn a_value_too_deep_to_read_back_is_refused_and_the_log_stays_readable() {
    let dir = temp_dir("deep");
    let backend = open(&dir);
    let nested = |levels: usize| {
        let mut value = json!(1);
        for _ in 0..levels {
            value = json!([value]);
        }
        value
    };
    put(&backend, "before", json!("kept"), Expect::Absent).unwrap();
    for levels in [119, 124, 127] {
        let refused = put(&backend, "deep", nested(levels), Expect::Any).unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("levels deep as JSON; the log keeps at most 120"),
            "{levels}: {refused}"
        );
    }
    let run = kiln_store::run::RunMemory::new(backend.clone(), "run-1");
    for levels in [65, 100] {
        let refused = block_on(run.publish("deep", nested(levels), "", "")).unwrap_err();
        assert!(
            refused.to_string().contains(&format!(
                "is nested {levels} levels deep; Kiln carries values up to 64"
            )),
            "{refused}"
        );
    }
    block_on(run.publish("fine", nested(64), "", "")).unwrap();
    // A fresh open replays every line.
    let again = open(&dir);
    assert_eq!(get(&again, "before"), Some((1, json!("kept"))));
    assert_eq!(get(&again, "deep"), None);
}

/// Set in a child this test binary starts: the store whose owner it becomes.
const OWNER_CHILD_ENV: &str = "KILN_STORE_TEST_OWNER_OF";

/// Not a test of its own: the body of the owner processes
/// `many_processes_on_one_store_leave_no_lock_files` starts (this binary,
/// run with [`OWNER_CHILD_ENV`] naming the store). It takes an owner, says
/// its id on stdout, and holds it until its stdin closes (then it ends
/// cleanly) or it is killed (then it leaves its lock file behind).
#[test]
fn owner_child() {
    let Some(store) = std::env::var_os(OWNER_CHILD_ENV) else {
        return;
    };
    let owners = FileOwners::acquire(std::path::Path::new(&store)).unwrap();
    // On a line of its own: the harness's "test owner_child ... " precedes it.
    println!("\nkiln-owner={}", owners.owner());
    std::io::stdout().flush().unwrap();
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut std::io::stdin(), &mut rest);
}

/// The names in the store's `owners/` folder.
fn owner_files(dir: &TempDir) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir.path().join(OWNERS_FOLDER))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Issue 35 #12: every process leaves no record behind once it has ended,
/// however it ended. Processes that end cleanly remove their own; those
/// killed (a server stopped by a signal, a crash) leave theirs, and the next
/// open sweeps every record whose lock nobody holds, while the live ones
/// stay alive.
#[test]
fn many_processes_on_one_store_leave_no_lock_files() {
    use std::io::BufRead as _;
    use std::process::{Command, Stdio};

    let dir = temp_dir("owners");
    let n_processes = 8;
    // All started before any is waited on, so that their opens (and
    // sweeps) overlap.
    let started: Vec<std::process::Child> = (0..n_processes)
        .map(|_| {
            Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "owner_child", "--nocapture", "--test-threads=1"])
                .env(OWNER_CHILD_ENV, dir.path())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut children: Vec<(std::process::Child, String)> = started
        .into_iter()
        .map(|mut child| {
            let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
            let owner = stdout
                .lines()
                .map_while(Result::ok)
                .find_map(|line| line.strip_prefix("kiln-owner=").map(str::to_owned))
                .expect("the child says its owner");
            (child, owner)
        })
        .collect();
    assert_eq!(owner_files(&dir).len(), n_processes, "one record each");

    // An open while they live sweeps none of them.
    let here = FileOwners::acquire(dir.path()).unwrap();
    for (_, owner) in &children {
        assert!(block_on(here.is_alive(owner)), "{owner} is alive");
    }
    drop(here);
    assert_eq!(owner_files(&dir).len(), n_processes, "the live ones stay");

    // Half are killed, half end cleanly.
    for (index, (child, _)) in children.iter_mut().enumerate() {
        if index % 2 == 0 {
            child.kill().unwrap();
        } else {
            drop(child.stdin.take());
        }
    }
    for (child, _) in &mut children {
        child.wait().unwrap();
    }

    // The next process to open the store sweeps what the killed ones left,
    // and leaves nothing itself.
    let next = FileOwners::acquire(dir.path()).unwrap();
    assert_eq!(
        owner_files(&dir),
        [format!("{}.lock", next.owner())],
        "only the live owner's record"
    );
    drop(next);
    assert_eq!(owner_files(&dir), Vec::<String>::new(), "no record is left");
}

/// A record a dead process left (its lock free) is swept when the store is
/// opened; a live owner's record and a file that is not a record stay.
#[test]
fn a_stale_owner_record_is_swept_at_open() {
    let dir = temp_dir("stale-owner");
    let live = FileOwners::acquire(dir.path()).unwrap();
    let folder = dir.path().join(OWNERS_FOLDER);
    fs::write(folder.join("p4194303-deadbeef.lock"), "").unwrap();
    fs::write(folder.join("README"), "not a record").unwrap();

    let next = FileOwners::acquire(dir.path()).unwrap();
    assert_eq!(
        owner_files(&dir),
        {
            let mut expected = vec![
                format!("{}.lock", live.owner()),
                format!("{}.lock", next.owner()),
                "README".to_owned(),
            ];
            expected.sort();
            expected
        },
        "the dead pid's record is gone"
    );
    assert!(!block_on(next.is_alive("p4194303-deadbeef")));
    assert!(block_on(next.is_alive(live.owner())));
}

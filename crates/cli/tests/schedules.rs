//! `kiln schedules` as cron or a timer drives it: an agent's job on a cron
//! expression, run once by `run-due` as that agent against aimock (the
//! `kiln-schedule-news` fixture), the occurrences that passed recorded as
//! missed, a second `run-due` finding nothing (claimed once), and bad
//! expressions, zones and agents refused before anything is written.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a panic here is a failed test with its line"
)]

mod common;

use std::rc::Rc;

use common::kiln;
use kiln_store::config::Config;
use kiln_testkit::Aimock;
use kiln_types::schedule::ScheduleRecord;
use serde_json::Value;

/// A fresh store at `name` with the provider `mock` and the agent `ada`.
fn store(name: &str, base_url: &str) -> (String, Config) {
    common::store_with_ada(name, base_url, "You are Ada, the morning reporter.")
}

fn requests(aimock: &Aimock) -> usize {
    aimock.journal().as_array().unwrap().len()
}

#[test]
fn run_due_runs_what_is_due_once_as_its_agent_and_records_what_was_missed() {
    let aimock = Aimock::start();
    let (dir, config) = store("schedules-due", &format!("{}/v1", aimock.url()));
    // Every minute, last looked at two and a half minutes ago: the latest
    // occurrence is in its grace, the one or two before it passed.
    let now = kiln_store::clock::epoch_ms();
    futures::executor::block_on(config.put_schedule(&ScheduleRecord {
        id: "news".into(),
        agent: "ada".into(),
        cron: "* * * * *".into(),
        prompt: "kiln-schedule-news".into(),
        time_zone: None,
        enabled: true,
        since_ms: now - 150_000,
        version: 0,
    }))
    .unwrap();
    drop(config);
    let out = kiln(&["schedules", "run-due", "--store", &dir]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout, "news: ok Here is the morning news.\n",
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("`news` missed its occurrence"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("running `news` as `ada`"),
        "{}",
        out.stderr
    );
    let journal = aimock.journal();
    let system = journal[0]["body"]["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        system.starts_with("You are Ada, the morning reporter."),
        "the job ran as its agent: {system}"
    );
    let asked = requests(&aimock);
    // Run again at once: the occurrence was claimed, nothing is due.
    let again = kiln(&["schedules", "run-due", "--store", &dir]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(again.stderr.contains("nothing due"), "{}", again.stderr);
    assert_eq!(requests(&aimock), asked, "not run twice");
    // The list says how it went, and the firing names its job in the history.
    let listed = kiln(&["schedules", "list", "--store", &dir, "--json"]).json_ok();
    let last = &listed[0]["last"];
    assert_eq!(last["status"], "ok", "{listed}");
    assert_eq!(last["summary"], "Here is the morning news.");
    assert!(
        last["job_id"].as_str().is_some_and(|id| !id.is_empty()),
        "{listed}"
    );
    let text = kiln(&["schedules", "list", "--store", &dir]);
    assert!(
        text.stdout.starts_with("news  ada  * * * * *"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("last ran"), "{}", text.stdout);
}

#[test]
fn a_schedule_is_created_listed_and_removed_and_bad_values_are_refused_before_writing() {
    let aimock = Aimock::start();
    let (dir, config) = store("schedules-crud", &format!("{}/v1", aimock.url()));
    drop(config);
    let create = |extra: &[&str]| {
        let mut args = vec![
            "schedules",
            "create",
            "morning",
            "--agent",
            "ada",
            "--prompt",
            "Summarise the news.",
            "--store",
            &dir,
        ];
        args.extend_from_slice(extra);
        kiln(&args)
    };
    for (extra, said) in [
        (&["--cron", "0 7 * *"][..], "`cron` has five fields"),
        (&["--cron", "61 7 * * *"][..], "does not read"),
        (
            &["--cron", "0 7 * * *", "--time-zone", "Mars/Olympus"][..],
            "`Mars/Olympus` is not an IANA time zone",
        ),
    ] {
        let out = create(extra);
        assert_eq!(out.code, 2, "{extra:?}: {}", out.stderr);
        assert!(out.stderr.contains(said), "{extra:?}: {}", out.stderr);
    }
    let nobody = kiln(&[
        "schedules",
        "create",
        "morning",
        "--agent",
        "bob",
        "--prompt",
        "x",
        "--cron",
        "0 7 * * *",
        "--store",
        &dir,
    ]);
    assert_eq!(nobody.code, 2, "{}", nobody.stderr);
    assert!(
        nobody
            .stderr
            .contains("this workspace has `default`, `ada`"),
        "{}",
        nobody.stderr
    );
    let listed: Value = kiln(&["schedules", "list", "--store", &dir, "--json"]).json_ok();
    assert_eq!(listed, Value::Array(Vec::new()), "nothing was written");
    let made = create(&["--cron", "0 7 * * *", "--time-zone", "Europe/Paris"]);
    assert_eq!(made.code, 0, "{}", made.stderr);
    let twice = create(&["--cron", "0 7 * * *"]);
    assert_eq!(twice.code, 1);
    assert!(twice.stderr.contains("already exists"), "{}", twice.stderr);
    let text = kiln(&["schedules", "list", "--store", &dir]);
    assert!(
        text.stdout
            .contains("morning  ada  0 7 * * * (At 07:00, Europe/Paris)")
            && text.stdout.contains("next in")
            && text.stdout.contains("never fired"),
        "{}",
        text.stdout
    );
    assert_eq!(
        kiln(&["schedules", "remove", "morning", "--store", &dir]).code,
        0
    );
    let gone = kiln(&["schedules", "remove", "morning", "--store", &dir]);
    assert_eq!(gone.code, 1);
    assert!(gone.stderr.contains("there is no schedule `morning`"));
    assert_eq!(requests(&aimock), 0, "nothing was sent to a model");
}

#[test]
fn a_scheduled_job_a_guard_stops_fails_loud_with_its_code_in_the_firing_and_the_history() {
    let aimock = Aimock::start();
    let (dir, config) = store("schedules-guard", &format!("{}/v1", aimock.url()));
    let now = kiln_store::clock::epoch_ms();
    futures::executor::block_on(config.put_schedule(&ScheduleRecord {
        id: "spin".into(),
        agent: "ada".into(),
        cron: "* * * * *".into(),
        prompt: "kiln-agent-loop".into(),
        time_zone: None,
        enabled: true,
        since_ms: now - 61_000,
        version: 0,
    }))
    .unwrap();
    drop(config);
    let out = kiln(&["schedules", "run-due", "--store", &dir, "--max-turns", "2"]);
    assert_eq!(out.code, 1, "a failed job fails the pass: {}", out.stderr);
    assert!(
        out.stdout.starts_with("spin: failed max_turns"),
        "{}",
        out.stdout
    );
    let listed = kiln(&["schedules", "list", "--store", &dir, "--json"]).json_ok();
    let last = &listed[0]["last"];
    assert_eq!(last["status"], "failed", "{listed}");
    assert!(
        last["summary"].as_str().unwrap().starts_with("max_turns"),
        "{listed}"
    );
    let job_id = last["job_id"].as_str().unwrap().to_owned();
    let backend: Rc<dyn kiln_store::Backend> =
        kiln_store::native::LogBackend::open(std::path::Path::new(&dir)).unwrap();
    let job = futures::executor::block_on(kiln_store::history::History::new(backend).job(&job_id))
        .unwrap();
    assert_eq!(job.status, "error", "{job:?}");
    assert!(
        job.output.contains("max_turns") || job.output.contains("turns"),
        "{job:?}"
    );
}

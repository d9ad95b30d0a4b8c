//! Plans and sub-agents from the terminal, against aimock's `kiln-plan-*`,
//! `kiln-planner-*` and `kiln-subtask-*` fixtures (`servers/aimock/README.md`):
//! plan mode creates a plan and stops; a run executes it (approved once),
//! each step a sub-agent whose program runs in a sandbox process, and the
//! next model turn answers from the tasks' results; a cycle is refused by
//! name; a failing task blocks its dependent; children fan out from code.
//! The execution tree is printed at the plan's end (stderr is not a
//! terminal here) and `--json` streams every event, children's tagged.

mod common;

use common::{Output, kiln_with};

use kiln_testkit::Aimock;
use serde_json::Value;

fn agent(aimock: &Aimock, objective: &str, extra: &[&str]) -> Output {
    let base_url = format!("{}/v1", aimock.url());
    let mut args = vec![
        "agent",
        "run",
        objective,
        "--provider",
        "openai",
        "--base-url",
        &base_url,
        "--model",
        "gpt-4o-mini",
        "--approve",
        "yes",
    ];
    args.extend_from_slice(extra);
    kiln_with(&args, &[], "")
}

#[test]
fn plan_mode_creates_the_plan_and_stops() {
    let aimock = Aimock::start();
    let out = agent(&aimock, "kiln-plan-report", &["--permission-mode", "plan"]);
    let what = format!("{}\n--- stderr\n{}", out.stdout, out.stderr);
    assert_eq!(out.code, 0, "{what}");
    assert!(out.stdout.starts_with("Here is the plan"), "{what}");
    for line in [
        "✓ initialization  Starting parallel task planning...",
        "✓ validation      Plan is valid",
        "✓ complete        Plan created: 3 tasks, 3 steps, 2 parallelizable",
        "── create_plan",
    ] {
        assert!(out.stderr.contains(line), "{line}\n{what}");
    }
    assert!(!out.stderr.contains("◆ Plan"), "nothing ran: {what}");
}

#[test]
fn a_run_executes_the_plan_and_the_next_turn_answers_from_its_results() {
    let aimock = Aimock::start();
    let out = agent(&aimock, "kiln-plan-run", &[]);
    let what = format!("{}\n--- stderr\n{}", out.stdout, out.stderr);
    assert_eq!(out.code, 0, "{what}");
    assert_eq!(
        out.stdout, "Phrase one has 3 words and phrase two has 2: 5 words in all.\n",
        "{what}"
    );
    for line in [
        "◆ Plan  (3/3 tasks)  Count the words",
        "│  └─ ✓ count_a_words  Count the words of the phrase 'alpha bet…",
        "└─ ✓ Task total: Add the counts",
        "      └─ ✓ execute_code",
    ] {
        assert!(out.stderr.contains(line), "{line}\n{what}");
    }

    // The same as JSON lines: each step's events tagged with its child, the
    // spawning call and the depth; the step results; the plan's updates.
    let out = agent(&aimock, "kiln-plan-run", &["--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events: Vec<Value> = out
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert!(
        kinds.contains(&"task_update") && kinds.contains(&"step_result"),
        "{kinds:?}"
    );
    let total = events
        .iter()
        .find(|e| e["type"] == "step_result" && e["step_id"] == "total_sum")
        .unwrap();
    assert_eq!(total["result"]["words"], 5);
    let child = events
        .iter()
        .find(|e| e["type"] == "child" && e["label"] == "step total_sum")
        .unwrap();
    assert_eq!(child["parent_call_id"], "call_plan_execute");
    assert_eq!(child["depth"], 1);
    assert_eq!(kinds.last(), Some(&"done"));
}

#[test]
fn a_plan_with_a_cycle_is_refused_naming_its_tasks() {
    let aimock = Aimock::start();
    let out = agent(&aimock, "kiln-plan-cycle", &["--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result = out
        .stdout
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|e| e["type"] == "tool_result_update")
        .unwrap();
    assert_eq!(result["is_error"], true);
    let content = result["content"].as_str().unwrap();
    assert!(
        content.contains("invalid_plan") && content.contains("`a` and `b` depend on each other"),
        "{content}"
    );
    assert!(!out.stdout.contains("task_update"), "nothing ran");
}

#[test]
fn a_failing_task_blocks_its_dependent_and_the_others_finish() {
    let aimock = Aimock::start();
    let out = agent(&aimock, "kiln-plan-fail", &[]);
    let what = format!("{}\n--- stderr\n{}", out.stdout, out.stderr);
    assert_eq!(out.code, 0, "{what}");
    assert!(out.stdout.starts_with("Fetching failed"), "{what}");
    for line in [
        "◆ Plan  (1/3 tasks)  Fetch and report",
        "├─ ✗ Task fetch: Fetch  ",
        "├─ ✗ Task report: Report  dependency `fetch` failed",
        "└─ ✓ Task aside: Aside",
    ] {
        assert!(out.stderr.contains(line), "{line}\n{what}");
    }
}

#[test]
fn children_fan_out_from_code() {
    let aimock = Aimock::start();
    let out = agent(&aimock, "kiln-subtask-fan", &[]);
    let what = format!("{}\n--- stderr\n{}", out.stdout, out.stderr);
    assert_eq!(out.code, 0, "{what}");
    assert_eq!(
        out.stdout, "Both children answered: 3 and 2 words.\n",
        "{what}"
    );
    assert!(
        out.stderr.contains("  ↳ subtask c1: ── execute_code"),
        "{what}"
    );
    assert!(
        out.stderr.contains("  ↳ subtask c2: ✓ done: 2")
            || out.stderr.contains("  ↳ subtask c1: ✓ done: 2"),
        "{what}"
    );
}

#[test]
fn a_session_plans_in_plan_mode_then_runs_the_plan_after_the_mode_changes() {
    let aimock = Aimock::start();
    let base_url = format!("{}/v1", aimock.url());
    let args = [
        "chat",
        "--interactive",
        "--provider",
        "openai",
        "--base-url",
        &base_url,
        "--model",
        "gpt-4o-mini",
        "--approve",
        "yes",
    ];
    let input =
        "/mode plan\nkiln-plan-report\nkiln-plan-run\n/mode\n/mode default\nkiln-plan-run\n/exit\n";
    let out = kiln_with(&args, &[], input);
    let what = format!("{}\n--- stderr\n{}", out.stdout, out.stderr);
    assert_eq!(out.code, 0, "{what}");
    let answers: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(answers.len(), 3, "{what}");
    assert!(answers[0].starts_with("Here is the plan"), "{what}");
    // In plan mode the plan is refused in the ladder's words.
    assert_eq!(
        answers[1], "Plan mode does not let me run the plan: switch to default or auto first.",
        "{what}"
    );
    assert_eq!(
        answers[2],
        "Phrase one has 3 words and phrase two has 2: 5 words in all."
    );
    for said in [
        "kiln chat: the permission mode is now plan",
        "kiln chat: the permission mode is plan",
        "kiln chat: the permission mode is now default",
        "◆ Plan  (3/3 tasks)  Count the words",
    ] {
        assert!(out.stderr.contains(said), "{said}\n{what}");
    }
}

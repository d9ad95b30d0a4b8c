//! The plan builder's table of cases: each kind of bad plan refused naming its
//! offenders, a plan past a size limit refused by its counts before anything
//! else is checked, and a sound one sorted so every node follows its
//! dependencies.

use kiln_types::plan::{Plan, PlanIssue};
use serde_json::{Value, json};

use super::{Builder, build, from_args};

fn step(id: &str, deps: &[&str]) -> Value {
    json!({"id": id, "instructions": format!("do {id}"), "depends_on": deps})
}

fn task(id: &str, deps: &[&str], steps: Vec<Value>) -> Value {
    json!({"id": id, "title": format!("Task {id}"), "depends_on": deps, "steps": steps})
}

fn plan(tasks: Vec<Value>) -> Plan {
    from_args(&json!({"title": "A plan", "tasks": tasks})).expect("the shape is a plan's")
}

fn tools() -> Vec<String> {
    vec!["web_search".into(), "file_read".into()]
}

fn issues(plan: Plan) -> Vec<PlanIssue> {
    build(plan, Some(&tools())).expect_err("the plan is refused")
}

/// A case: its name, the plan, and per expected issue its code and the
/// words its message must carry.
type Case = (
    &'static str,
    Plan,
    Vec<(&'static str, &'static [&'static str])>,
);

/// The builder's cases: each plan, the codes of its issues and words each
/// issue's message must carry (the offenders' names).
#[test]
fn the_builder_refuses_each_kind_of_bad_plan_naming_its_offenders() {
    let cases: Vec<Case> = vec![
        (
            "a step id used in two tasks",
            plan(vec![
                task("a", &[], vec![step("fetch", &[])]),
                task("b", &[], vec![step("fetch", &[])]),
            ]),
            vec![("duplicate_id", &["`fetch`"])],
        ),
        (
            "a task id used twice",
            plan(vec![
                task("a", &[], vec![step("s1", &[])]),
                task("a", &[], vec![step("s2", &[])]),
            ]),
            vec![("duplicate_id", &["`a`"])],
        ),
        (
            "a step id that is also a task id",
            plan(vec![
                task("a", &[], vec![step("s1", &[])]),
                task("b", &[], vec![step("a", &[])]),
            ]),
            vec![("duplicate_id", &["`a`"])],
        ),
        (
            "a task depending on a task that does not exist",
            plan(vec![task("a", &["ghost"], vec![step("s1", &[])])]),
            vec![("missing_dependency", &["`a`", "`ghost`"])],
        ),
        (
            "a step depending on a step of another task",
            plan(vec![
                task("a", &[], vec![step("s1", &[])]),
                task("b", &[], vec![step("s2", &["s1"])]),
            ]),
            vec![("missing_dependency", &["`s2`", "`s1`", "own task"])],
        ),
        (
            "a two-task cycle",
            plan(vec![
                task("a", &["b"], vec![step("s1", &[])]),
                task("b", &["a"], vec![step("s2", &[])]),
            ]),
            vec![("cycle", &["`a`", "`b`"])],
        ),
        (
            "a three-task cycle behind an innocent task",
            plan(vec![
                task("free", &[], vec![step("s0", &[])]),
                task("x", &["z", "free"], vec![step("s1", &[])]),
                task("y", &["x"], vec![step("s2", &[])]),
                task("z", &["y"], vec![step("s3", &[])]),
                task("after", &["z"], vec![step("s4", &[])]),
            ]),
            vec![("cycle", &["`x`", "`y`", "`z`"])],
        ),
        (
            "a task depending on itself",
            plan(vec![task("a", &["a"], vec![step("s1", &[])])]),
            vec![("cycle", &["`a` depends on itself"])],
        ),
        (
            "a cycle of steps in a task",
            plan(vec![task(
                "a",
                &[],
                vec![step("s1", &["s2"]), step("s2", &["s1"])],
            )]),
            vec![("cycle", &["task `a`", "`s1`", "`s2`"])],
        ),
        (
            "an unknown tool",
            plan(vec![task(
                "a",
                &[],
                vec![
                    json!({"id": "s1", "instructions": "go", "tools": ["web_search", "teleport"]}),
                ],
            )]),
            vec![("unknown_tool", &["`s1`", "`teleport`"])],
        ),
        (
            "an output schema that is not one",
            plan(vec![task(
                "a",
                &[],
                vec![json!({"id": "s1", "instructions": "go", "output_schema": "{not json"})],
            )]),
            vec![("bad_schema", &["`s1`"])],
        ),
        ("no tasks", plan(vec![]), vec![("empty", &["no tasks"])]),
        (
            "a task without steps",
            plan(vec![task("a", &[], vec![])]),
            vec![("empty", &["`a`", "no steps"])],
        ),
        (
            "an id that cannot be a memory key",
            plan(vec![task("a b", &[], vec![step("s:1", &[])])]),
            vec![("bad_id", &["a b"]), ("bad_id", &["s:1"])],
        ),
        (
            "two offenders, both named",
            plan(vec![
                task("a", &["ghost"], vec![step("s1", &[])]),
                task(
                    "b",
                    &[],
                    vec![json!({"id": "s2", "instructions": "go", "tools": ["nope"]})],
                ),
            ]),
            vec![
                ("unknown_tool", &["`nope`"]),
                ("missing_dependency", &["`ghost`"]),
            ],
        ),
        (
            "a dependency on a refused task is not a second offence",
            plan(vec![
                task(
                    "a",
                    &[],
                    vec![json!({"id": "s1", "instructions": "go", "tools": ["nope"]})],
                ),
                task("b", &["a"], vec![step("s2", &[])]),
            ]),
            vec![("unknown_tool", &["`nope`"])],
        ),
    ];
    for (name, plan, expected) in cases {
        let found = issues(plan);
        let codes: Vec<&str> = found.iter().map(|issue| issue.code.as_str()).collect();
        let wanted: Vec<&str> = expected.iter().map(|(code, _)| *code).collect();
        assert_eq!(codes, wanted, "{name}: {found:#?}");
        for (issue, (_, words)) in found.iter().zip(&expected) {
            for word in *words {
                assert!(
                    issue.message.contains(word),
                    "{name}: `{}` does not name {word}",
                    issue.message
                );
            }
        }
        let refusal = super::rejection(&found);
        assert_eq!(refusal["error"]["code"], "invalid_plan", "{name}");
        assert_eq!(
            refusal["error"]["issues"].as_array().map(Vec::len),
            Some(found.len()),
            "{name}"
        );
    }
}

#[test]
fn an_out_of_order_plan_is_sorted_so_each_node_follows_its_dependencies() {
    let built = build(
        plan(vec![
            task("report", &["analyze", "search"], vec![step("write", &[])]),
            task(
                "analyze",
                &["search"],
                vec![step("b", &["a"]), step("a", &[])],
            ),
            task("search", &[], vec![step("look", &[])]),
            task("side", &[], vec![step("other", &[])]),
        ]),
        None,
    )
    .expect("a sound plan");
    let order: Vec<&str> = built.tasks.iter().map(|task| task.id.as_str()).collect();
    assert_eq!(order, ["search", "analyze", "report", "side"]);
    let steps: Vec<&str> = built.tasks[1]
        .steps
        .iter()
        .map(|step| step.id.as_str())
        .collect();
    assert_eq!(steps, ["a", "b"]);
}

#[test]
fn a_schema_sent_as_text_is_held_as_an_object() {
    let built = build(
        plan(vec![task(
            "a",
            &[],
            vec![json!({"id": "s1", "instructions": "go", "output_schema": "{\"type\": \"object\"}"})],
        )]),
        None,
    )
    .expect("a sound plan");
    assert_eq!(
        built.tasks[0].steps[0].output_schema,
        Some(json!({"type": "object"}))
    );
}

#[test]
fn arguments_that_are_not_a_plan_are_named() {
    let found = from_args(&json!({"title": "x", "tasks": [{"id": "a"}]})).unwrap_err();
    assert_eq!(found[0].code, "malformed");
    assert!(
        found[0].message.contains("missing field"),
        "{}",
        found[0].message
    );
}

/// How many issues, and the start of their messages (an assertion's
/// message stays short however many and however long they are).
fn brief(found: &[PlanIssue]) -> String {
    let messages: Vec<&str> = found.iter().map(|issue| issue.message.as_str()).collect();
    format!("{} issues: {:.300}", found.len(), messages.join("; "))
}

/// `len` tasks of one step each, each task depending on the one before and
/// the first on the last: one cycle of every task.
fn task_cycle(len: usize) -> Plan {
    plan(
        (0..len)
            .map(|at| {
                let before = format!("t{}", (at + len - 1) % len);
                task(
                    &format!("t{at}"),
                    &[&before],
                    vec![step(&format!("s{at}"), &[])],
                )
            })
            .collect(),
    )
}

/// One task of `len` steps in one cycle.
fn step_cycle(len: usize) -> Value {
    task(
        "big",
        &[],
        (0..len)
            .map(|at| {
                let before = format!("s{}", (at + len - 1) % len);
                step(&format!("s{at}"), &[&before])
            })
            .collect(),
    )
}

/// Plans far past a limit: each refused by its counts alone, one
/// `too_large` issue per limit passed naming the count and the limit,
/// before any task is checked or any cycle looked for (a cycle of 10,000
/// steps, checked, would be named; here nothing is).
#[test]
fn a_plan_past_a_size_limit_is_refused_by_its_counts_before_anything_else() {
    let fan: Vec<String> = (0..10_000).map(|at| format!("ghost{at}")).collect();
    let fan: Vec<&str> = fan.iter().map(String::as_str).collect();
    let cases: Vec<(&str, Plan, &[&[&str]])> = vec![
        (
            "10,000 tasks in one cycle",
            task_cycle(10_000),
            &[
                &["10000 tasks", "at most 100 tasks"],
                &["10000 steps", "at most 500 steps"],
                &["10000 dependencies", "at most 5000"],
            ],
        ),
        (
            "10,000 steps in one cycle",
            plan(vec![step_cycle(10_000)]),
            &[
                &["10000 steps", "at most 500 steps"],
                &["10000 dependencies", "at most 5000"],
            ],
        ),
        (
            "a step depending on 10,000 others",
            plan(vec![task("a", &[], vec![step("s", &fan)])]),
            &[&["10000 dependencies", "at most 5000"]],
        ),
        (
            "a task depending on 10,000 others",
            plan(vec![task("a", &fan, vec![step("s", &[])])]),
            &[&["10000 dependencies", "at most 5000"]],
        ),
    ];
    for (name, plan, expected) in cases {
        let found = issues(plan);
        assert_eq!(found.len(), expected.len(), "{name}: {}", brief(&found));
        for (issue, words) in found.iter().zip(expected) {
            assert_eq!(issue.code, "too_large", "{name}");
            for word in *words {
                assert!(
                    issue.message.contains(word),
                    "{name}: `{:.300}` does not say {word}",
                    issue.message
                );
            }
        }
    }
}

/// The planner's `add_task` counts a task with those before it, before
/// checking it.
#[test]
fn a_task_past_the_step_limit_is_refused_by_its_count_when_added() {
    let task: kiln_types::plan::Task =
        serde_json::from_value(step_cycle(10_000)).expect("a task's shape");
    let found = Builder::new(None)
        .add_task(task)
        .expect_err("the task is refused");
    let messages: Vec<&str> = found.iter().map(|issue| issue.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "with task `big` the plan would have 10000 steps in all; a plan may have at most 500 steps in all",
            "with task `big` the plan would have 10000 dependencies in all; a plan may name at most 5000 (its tasks' and steps' depends_on together)",
        ],
        "{}",
        brief(&found)
    );
}

/// An id past the id limit is refused before it can be quoted in every
/// message about its task.
#[test]
fn an_overlong_id_is_refused_before_any_message_quotes_it() {
    let long = "t".repeat(100_000);
    let steps: Vec<Value> = (0..500)
        .map(|at| step(&format!("s{at}"), &["ghost"]))
        .collect();
    let found = issues(plan(vec![task(&long, &[], steps)]));
    let longest = found.iter().map(|issue| issue.message.len()).max();
    assert!(
        longest.is_some_and(|longest| longest < 200),
        "{} issues, the longest {longest:?} bytes",
        found.len()
    );
    assert_eq!(found[0].code, "bad_id");
    assert_eq!(found.len(), 1, "{}", brief(&found));
    assert_eq!(found[0].task, None, "the issue does not repeat the id");
}

/// A cycle through every task names the first few and counts the rest.
#[test]
fn a_long_cycle_is_named_by_its_first_ids_and_how_many_more() {
    let found = issues(task_cycle(100));
    assert_eq!(found.len(), 1, "{}", brief(&found));
    let message = &found[0].message;
    assert_eq!(found[0].code, "cycle");
    assert!(
        message.starts_with("the plan's tasks form a cycle: `t0`, `t1`, "),
        "{message:.300}"
    );
    assert!(
        message.ends_with("and 90 more depend on each other"),
        "{message:.300}"
    );
    assert_eq!(message.matches('`').count(), 20, "{message:.300}");
}

//! The plan builder's table of cases: each kind of bad plan refused naming its
//! offenders, and a sound one sorted so every node follows its dependencies.

use kiln_types::plan::{Plan, PlanIssue};
use serde_json::{Value, json};

use super::{build, from_args};

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

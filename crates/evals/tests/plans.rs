//! The planner and sub-agent suites' mechanics with a scripted provider: a
//! plan is scored by its shape (a synthesis task fails it by name, a
//! refused call costs the clean rate), and a sub-agent case passes only
//! when children made the lookups and the answer is exact.

use std::rc::Rc;

use futures::executor::block_on;
use kiln_evals::plans::{
    planner_cases, planner_table, run_planner, run_subtasks, subtask_cases, subtask_table,
};
use kiln_providers::scripted::{Reply, Scripted};
use kiln_providers::{ChatRequest, Message, ToolCall, Usage};
use serde_json::{Value, json};

#[path = "../../run/tests/common/mod.rs"]
mod common;
use common::InProcess;

fn calls(calls: Vec<(&str, Value)>) -> Reply {
    Reply::Message {
        text: String::new(),
        tool_calls: calls
            .into_iter()
            .enumerate()
            .map(|(n, (name, arguments))| ToolCall {
                id: format!("p{n}"),
                name: name.into(),
                arguments,
            })
            .collect(),
        usage: Usage::default(),
    }
}

#[test]
fn a_plan_is_scored_by_its_shape_and_a_synthesis_task_fails_it_by_name() {
    let cases: Vec<_> = planner_cases()
        .unwrap()
        .into_iter()
        .filter(|case| ["one-question", "two-cities"].contains(&case.name.as_str()))
        .collect();
    let provider = Scripted::new([
        // one-question: one task, one step, after a refused call.
        calls(vec![(
            "add_task",
            json!({"id": "mul", "title": "Multiply", "steps": []}),
        )]),
        calls(vec![
            (
                "add_task",
                json!({"id": "mul", "title": "Multiply", "steps": [{"id": "mul_it", "instructions": "Compute 17 * 23."}]}),
            ),
            ("finish_plan", json!({"title": "Multiply"})),
        ]),
        // two-cities: two searches side by side, and a synthesis task.
        calls(vec![
            (
                "add_task",
                json!({"id": "lisbon", "title": "Lisbon", "steps": [{"id": "lisbon_search", "instructions": "Find Lisbon's population.", "tools": ["web_search"]}]}),
            ),
            (
                "add_task",
                json!({"id": "porto", "title": "Porto", "steps": [{"id": "porto_search", "instructions": "Find Porto's population.", "tools": ["web_search"]}]}),
            ),
            (
                "add_task",
                json!({"id": "final", "title": "Final report", "depends_on": ["lisbon", "porto"], "steps": [{"id": "final_write", "instructions": "Combine the results into the final answer."}]}),
            ),
            ("finish_plan", json!({"title": "Populations"})),
        ]),
    ]);
    let results = block_on(run_planner(
        &cases,
        provider,
        "scripted",
        Rc::new(InProcess),
    ));
    assert!(results[0].passed, "{:?}", results[0]);
    assert_eq!(
        (results[0].tasks, results[0].rejected, results[0].calls),
        (1, 1, 3)
    );
    assert!(!results[1].passed);
    assert_eq!(results[1].width, 2);
    assert_eq!(results[1].depth, 2);
    assert!(
        results[1]
            .problems
            .iter()
            .any(|problem| problem.contains("task `final` synthesizes")),
        "{:?}",
        results[1].problems
    );
    let table = planner_table(&results);
    assert!(
        table.contains("success 1/2 (50%) · clean 1/2 (50%)"),
        "{table}"
    );
}

fn first_user(request: &ChatRequest) -> String {
    request
        .messages
        .iter()
        .find_map(|message| match message {
            Message::User { text } => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

fn answered(request: &ChatRequest) -> bool {
    request
        .messages
        .iter()
        .any(|message| matches!(message, Message::Tool { .. }))
}

#[test]
fn a_sub_agent_case_passes_only_when_children_did_the_lookups() {
    let cases: Vec<_> = subtask_cases()
        .unwrap()
        .into_iter()
        .filter(|case| case.name == "two-cities")
        .collect();
    // Every reply is chosen by its conversation, so the children's order
    // does not matter.
    let route = |delegate: bool| {
        Reply::Computed(Rc::new(move |request: &ChatRequest| {
            let asked = first_user(request);
            if asked.starts_with("temperature of ") {
                if answered(request) {
                    return Reply::text("done");
                }
                let city = asked.trim_start_matches("temperature of ").to_owned();
                return Reply::code(&format!(
                    "finish((await tools.get_temperature({{city: '{city}'}})).celsius)"
                ));
            }
            if answered(request) {
                return Reply::text("27");
            }
            if delegate {
                Reply::code(
                    "const [oslo, cairo] = await Promise.all([agents.run('temperature of Oslo'), agents.run('temperature of Cairo')]); return cairo.value - oslo.value",
                )
            } else {
                Reply::code(
                    "const oslo = await tools.get_temperature({city: 'Oslo'}); const cairo = await tools.get_temperature({city: 'Cairo'}); return cairo.celsius - oslo.celsius",
                )
            }
        }))
    };
    let provider = Scripted::new(std::iter::repeat_n(route(true), 8));
    let results = block_on(run_subtasks(
        &cases,
        provider,
        "scripted",
        Rc::new(InProcess),
        6,
    ));
    assert!(results[0].passed, "{:?}", results[0]);
    assert_eq!((results[0].delegated, results[0].own_calls), (2, 0));

    // The same answer, looked up by the turn itself, does not pass.
    let provider = Scripted::new(std::iter::repeat_n(route(false), 4));
    let results = block_on(run_subtasks(
        &cases,
        provider,
        "scripted",
        Rc::new(InProcess),
        6,
    ));
    assert_eq!(results[0].answer, "27");
    assert!(!results[0].passed);
    assert_eq!((results[0].delegated, results[0].own_calls), (0, 2));
    assert!(subtask_table(&results).contains("success 0/1 (0%)"));
}

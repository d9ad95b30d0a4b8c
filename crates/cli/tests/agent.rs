//! `kiln agent run` as a person runs it, against aimock (the `kiln-agent-*`
//! fixtures of `servers/aimock/README.md`, over every wire format) and the
//! real local model: the model's `execute_code` runs in a sandbox process,
//! its tools walk the ladder, the observation goes back, and the answer or
//! the finish value comes out; `--json` streams every event; guards and bad
//! flags exit 1 and 2.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a panic here is a failed test with its line"
)]

mod common;

use common::{Output, kiln};
use std::path::PathBuf;

use kiln_testkit::{Aimock, LocalModel};
use serde_json::{Value, json};

/// A file in this test binary's scratch folder.
fn file(name: &str, value: &Value) -> String {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("agent-{name}"));
    std::fs::write(&path, value.to_string()).unwrap();
    path.to_string_lossy().into_owned()
}

fn catalog() -> String {
    common::add_catalog("agent")
}

/// `(provider, base URL under aimock's root, model)`.
fn providers(root: &str) -> [(&'static str, String, &'static str); 3] {
    [
        ("openai", format!("{root}/v1"), "gpt-4o-mini"),
        ("anthropic", root.to_owned(), "claude-sonnet-4-5"),
        ("ollama", root.to_owned(), "llama3.2"),
    ]
}

fn agent(provider: (&str, &str, &str), objective: &str, extra: &[&str]) -> Output {
    let (name, base_url, model) = provider;
    let mut args = vec![
        "agent",
        "run",
        objective,
        "--provider",
        name,
        "--base-url",
        base_url,
        "--model",
        model,
        "--approve",
        "yes",
    ];
    args.extend_from_slice(extra);
    kiln(&args)
}

fn lines(out: &Output) -> Vec<Value> {
    out.stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
        .collect()
}

#[test]
fn the_model_writes_code_that_calls_its_tools_and_answers_over_every_wire() {
    let aimock = Aimock::start();
    let tools = catalog();
    for (name, base_url, model) in providers(&aimock.url()) {
        let out = agent(
            (name, &base_url, model),
            "kiln-agent-sum: add 20 and 30, then double it",
            &["--tools", &tools],
        );
        assert_eq!(out.code, 0, "{name}: {}", out.stderr);
        assert_eq!(
            out.stdout, "Twice the sum is 100.\n",
            "{name}: {}",
            out.stderr
        );
        assert!(
            out.stderr
                .contains("── execute_code\n│ const {sum} = await tools.add({a: 20, b: 30});"),
            "{name}: {}",
            out.stderr
        );
        assert!(
            out.stderr.contains("kiln agent: 2 turn(s), 1 action(s)"),
            "{name}: {}",
            out.stderr
        );
    }
}

#[test]
fn json_streams_every_event_and_ends_with_the_result() {
    let aimock = Aimock::start();
    let base_url = format!("{}/v1", aimock.url());
    let out = agent(
        ("openai", &base_url, "gpt-4o-mini"),
        "kiln-agent-sum",
        &["--tools", &catalog(), "--json"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = lines(&out);
    let kinds: Vec<&str> = events
        .iter()
        .map(|event| event["type"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"tool_call_update") && kinds.contains(&"llm_call"),
        "{kinds:?}"
    );
    let call = events
        .iter()
        .find(|event| event["type"] == "tool_call_update")
        .unwrap();
    assert!(call["code"].as_str().unwrap().contains("tools.add"));
    let result = events
        .iter()
        .find(|event| event["type"] == "tool_result_update")
        .unwrap();
    assert_eq!(result["run"]["value"], json!(100));
    assert_eq!(result["run"]["calls"][0]["tool"], "add");
    let done = events.last().unwrap();
    assert_eq!(done["type"], "done");
    assert_eq!(done["text"], "Twice the sum is 100.");
    assert_eq!(done["stop"], json!({"reason": "answered"}));
    assert_eq!(
        (done["turns"].as_u64(), done["actions"].as_u64()),
        (Some(2), Some(1))
    );
    for field in ["value", "finished", "usage", "spend"] {
        assert!(done.get(field).is_some(), "{field} in {done}");
    }
    assert!(done["usage"]["input_tokens"].as_u64().unwrap() > 0);
}

#[test]
fn with_an_output_schema_the_turn_ends_through_finish() {
    let aimock = Aimock::start();
    let base_url = format!("{}/v1", aimock.url());
    let schema = file(
        "schema.json",
        &json!({"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}),
    );
    let out = agent(
        ("openai", &base_url, "gpt-4o-mini"),
        "kiln-agent-schema",
        &["--output-schema", &schema],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        serde_json::from_str::<Value>(&out.stdout).unwrap(),
        json!({"answer": 42})
    );
    assert!(
        out.stderr.contains("│ return {answer: 42}")
            && out.stderr.contains("│ finish({answer: 42})"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_call_without_code_is_answered_as_an_error_the_model_fixes() {
    let aimock = Aimock::start();
    let base_url = format!("{}/v1", aimock.url());
    let out = agent(("openai", &base_url, "gpt-4o-mini"), "kiln-agent-fix", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "Fixed it.\n");
    assert!(
        out.stderr.contains("missing required argument `code`"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_guard_stops_a_looping_model_with_its_code_and_exit_1() {
    let aimock = Aimock::start();
    let out = agent(
        ("ollama", &aimock.url(), "llama3.2"),
        "kiln-agent-loop",
        &["--max-turns", "3", "--json"],
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    let events = lines(&out);
    let done = events.last().unwrap();
    assert_eq!(done["stop"]["reason"], "guard");
    assert_eq!(done["stop"]["code"], "max_turns");
    assert_eq!(done["turns"], 3);
    assert!(events.iter().any(|event| event["type"] == "stop"));
}

#[test]
fn a_program_that_never_stops_ends_its_action_not_the_turn() {
    let aimock = Aimock::start();
    let base_url = format!("{}/v1", aimock.url());
    let limits = file("limits.json", &json!({"js_cpu_ms": 300, "wall_ms": 5000}));
    let out = agent(
        ("openai", &base_url, "gpt-4o-mini"),
        "kiln-agent-spin",
        &["--limits", &limits],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "The loop ran out of time.\n");
}

#[test]
fn bad_flags_are_refused_with_exit_2_before_anything_is_sent() {
    let aimock = Aimock::start();
    let base_url = format!("{}/v1", aimock.url());
    let openai = ("openai", base_url.as_str(), "gpt-4o-mini");
    let bad_schema = file("bad-schema.json", &json!({"type": "nonsense"}));
    let cases: [(&[&str], &str); 4] = [
        (
            &["--max-turns", "0"],
            "guard `max_turns` must be at least 1",
        ),
        (
            &["--output-schema", "/nonexistent/schema.json"],
            "reading the output schema",
        ),
        (
            &["--output-schema", &bad_schema],
            "`output_schema` is not a JSON Schema",
        ),
        (&["--max-usd=-1"], "guard `max_cost`"),
    ];
    for (extra, said) in cases {
        let out = agent(openai, "kiln-agent-sum", extra);
        assert_eq!(out.code, 2, "{extra:?}: {}", out.stderr);
        assert!(out.stderr.contains(said), "{extra:?}: {}", out.stderr);
    }
    let out = agent(("gemini", &base_url, "m"), "kiln-agent-sum", &[]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .contains("expected one of openai, anthropic, ollama")
    );
    assert_eq!(aimock.journal(), json!([]));
}

#[test]
fn the_local_model_runs_a_turn_to_its_end() {
    let model = LocalModel::shared();
    let base_url = format!("{}/v1", model.base_url());
    let out = agent(
        ("openai", &base_url, LocalModel::MODEL),
        "What is 17 times 3? Use execute_code to compute it.",
        &["--max-turns", "4", "--max-tokens", "200", "--json"],
    );
    let done = lines(&out).pop().unwrap();
    assert_eq!(done["type"], "done", "{}", out.stderr);
    let reason = done["stop"]["reason"].as_str().unwrap();
    assert!(
        ["answered", "finished", "guard"].contains(&reason),
        "the turn ended by an answer or a guard, not {reason}: {done}"
    );
    assert_eq!(out.code, i32::from(reason == "guard"), "{done}");
}

#[test]
fn the_eval_harness_lists_its_cases_and_prints_its_table() {
    let out = kiln(&[
        "eval",
        "codeact",
        "--provider",
        "openai",
        "--base-url",
        "http://127.0.0.1:1/v1",
        "--model",
        "m",
        "--list",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let names: Vec<&str> = out
        .stdout
        .lines()
        .filter_map(|line| line.split('\t').next())
        .collect();
    assert!(
        names.len() >= 6 && names.contains(&"team-payroll"),
        "{names:?}"
    );
    let out = kiln(&[
        "eval",
        "codeact",
        "--provider",
        "openai",
        "--base-url",
        "http://127.0.0.1:1/v1",
        "--model",
        "m",
        "--cases",
        "nothing-*",
    ]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("no case matches"), "{}", out.stderr);
    // Against a model that answers nothing (aimock has no fixture for these
    // cases), every case fails in both modes, and the table says why.
    let aimock = Aimock::start();
    let base_url = format!("{}/v1", aimock.url());
    let out = kiln(&[
        "eval",
        "codeact",
        "--provider",
        "openai",
        "--base-url",
        &base_url,
        "--model",
        "gpt-4o-mini",
        "--cases",
        "weather-*",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .starts_with("| case | domain | CodeAct | direct tools |"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("| weather-warmest | weather | FAIL ("),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("| **total** | | 0/2 (0%)"),
        "{}",
        out.stdout
    );
}

#[test]
fn an_agent_of_the_store_runs_with_its_own_prompt_and_provider() {
    let aimock = Aimock::start();
    let (store, config) = common::store_with_ada(
        "agent-store-ada",
        &format!("{}/v1", aimock.url()),
        "You are Ada. You answer tersely.",
    );
    drop(config);
    let tools = catalog();
    let out = kiln(&[
        "agent",
        "run",
        "kiln-agent-sum: add 20 and 30, then double it",
        "--agent",
        "ada",
        "--store",
        &store,
        "--tools",
        &tools,
        "--approve",
        "yes",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "Twice the sum is 100.\n", "{}", out.stderr);
    let journal = aimock.journal();
    let first = &journal[0]["body"];
    assert_eq!(first["model"], "gpt-4o-mini", "the provider's saved model");
    let system = first["messages"][0]["content"].as_str().unwrap_or_default();
    assert!(
        system.starts_with("You are Ada. You answer tersely.\n\n# How you act"),
        "{system}"
    );
    // A name the store does not keep is said, and runs as before (here: no provider, exit 2);
    // --agent without a store and without --provider says where agents are kept.
    let asked = journal.as_array().unwrap().len();
    let out = kiln(&[
        "agent",
        "run",
        "kiln-agent-sum",
        "--agent",
        "bob",
        "--store",
        &store,
    ]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("`bob` is not an agent of")
            && out.stderr.contains("(it has `default`, `ada`)"),
        "{}",
        out.stderr
    );
    let out = kiln(&["agent", "run", "kiln-agent-sum", "--agent", "ada"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("give --store DIR"), "{}", out.stderr);
    assert_eq!(aimock.journal().as_array().unwrap().len(), asked);
}

#[test]
fn a_web_search_flag_that_does_not_hold_is_refused_before_anything_is_sent() {
    let aimock = Aimock::start();
    let base_url = format!("{}/v1", aimock.url());
    let openai = ("openai", base_url.as_str(), "gpt-4o-mini");
    for (extra, said) in [
        (
            &["--web-search", "bing"][..],
            "expected searxng=URL, brave or tavily",
        ),
        (&["--web-search", "brave"][..], "brave needs its key"),
        (&["--web-search", "searxng"][..], "searxng needs `base_url`"),
        (
            &["--web-search-key-env", "HOME"][..],
            "give --web-search too",
        ),
    ] {
        let out = agent(openai, "kiln-agent-sum", extra);
        assert_eq!(out.code, 2, "{extra:?}: {}", out.stderr);
        assert!(out.stderr.contains(said), "{extra:?}: {}", out.stderr);
    }
    assert_eq!(aimock.journal(), json!([]));
}

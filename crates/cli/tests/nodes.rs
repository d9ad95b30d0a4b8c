//! `kiln node run|check|author` and `kiln graph run` from a terminal: a
//! node's outputs as JSON, a refused value (exit 2) naming the slot, the
//! check's reasons (exit 1), a graph's nodes in order with their outputs and
//! console and progress, a graph refused at build naming the slot, and a node written
//! against aimock's `kiln-code-*` fixtures and then run.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a panic here is a failed test with its line"
)]

mod common;

use common::kiln;
use std::path::{Path, PathBuf};

use kiln_testkit::Aimock;
use serde_json::{Value, json};

/// A folder of its own for each test's files.
fn folder(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kiln-cli-nodes-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &Path, name: &str, value: &Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, value.to_string()).unwrap();
    path.to_string_lossy().into_owned()
}

fn total_node() -> Value {
    json!({
        "title": "Total the order",
        "code": "progress(10, 'totalling');\nlet total = 0;\nfor (const line of lines) total += line.price * line.qty;\nconsole.log(`${lines.length} lines`);\nreturn { total: total * (1 - discount), count: lines.length };",
        "inputs": [{"name": "lines", "type": "list[{price: number, qty: integer}]"}, {"name": "discount", "type": "number", "default": 0}],
        "outputs": [{"name": "total", "type": "number"}, {"name": "count", "type": "integer"}]
    })
}

#[test]
fn node_run_prints_the_outputs_and_refuses_a_value_naming_the_slot() {
    let dir = folder("run");
    let node = write(&dir, "node.json", &total_node());
    let values = write(
        &dir,
        "values.json",
        &json!({"lines": [{"price": 2.5, "qty": 4}, {"price": 1, "qty": 1}], "discount": 0.5}),
    );
    let out = kiln(&["node", "run", &node, "--inputs", &values]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let run = out.json();
    assert_eq!(run["outputs"], json!({"total": 5.5, "count": 2}));
    assert_eq!(run["console"][0]["text"], "2 lines");
    assert_eq!(run["result"]["structuredContent"]["status"], "completed");
    // The body's progress, on stderr as it reports.
    assert!(
        out.stderr.contains("kiln: 10% · totalling\n"),
        "{}",
        out.stderr
    );
    let bad = write(
        &dir,
        "bad.json",
        &json!({"lines": [{"price": "2", "qty": 4}]}),
    );
    let out = kiln(&["node", "run", &node, "--inputs", &bad]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .contains("input `lines[0].price` must be a number, not a string (\"2\")"),
        "{}",
        out.stderr
    );
    // A body that throws: exit 1, the error in the JSON.
    let throws = write(
        &dir,
        "throws.json",
        &json!({"title": "t", "code": "throw new Error('no');", "outputs": [{"name": "x", "type": "any"}]}),
    );
    let out = kiln(&["node", "run", &throws]);
    assert_eq!(out.code, 1);
    assert_eq!(out.json()["error"]["code"], "script");
}

#[test]
fn node_check_gives_the_reasons_and_exit_one() {
    let dir = folder("check");
    let good = write(&dir, "good.json", &total_node());
    let out = kiln(&["node", "check", &good]);
    assert_eq!(
        (out.code, out.json()),
        (0, json!({"valid": true, "errors": []}))
    );
    let branchy = write(
        &dir,
        "branchy.json",
        &json!({"title": "Classify", "code": "if (n > 0) {\n  return { sign: 'positive', size: n };\n}\nreturn { sign: 'other' };",
                "inputs": [{"name": "n", "type": "number"}], "outputs": [{"name": "sign", "type": "string"}, {"name": "size", "type": "number"}]}),
    );
    let out = kiln(&["node", "check", &branchy]);
    assert_eq!(out.code, 1);
    let errors = out.json()["errors"].clone();
    assert!(
        errors[0]
            .as_str()
            .unwrap()
            .starts_with("the `return` at line 4 gives no `size`"),
        "{errors}"
    );
    // Not a node at all: refused, exit 2, naming the file.
    let other = write(&dir, "other.json", &json!({"title": "t"}));
    let out = kiln(&["node", "check", &other]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("is not a node"), "{}", out.stderr);
}

#[test]
fn graph_run_runs_the_nodes_in_order_and_a_bad_edge_is_refused_by_name() {
    let dir = folder("graph");
    let spec = json!({"nodes": [
        {"id": "order", "title": "Make an order", "code": "return { lines: Array.from({length: n}, (_, i) => ({ price: i + 1, qty: 2 })) };",
         "inputs": [{"name": "n", "type": "integer"}], "outputs": [{"name": "lines", "type": "list[{price: number, qty: integer}]"}]},
        {"id": "label", "title": "Label", "code": "console.log('labelling', total);\nreturn { text: `Total: ${total.toFixed(2)}` };",
         "inputs": [{"name": "total", "type": "number"}], "outputs": [{"name": "text", "type": "string"}]},
        {"id": "total", "title": "Total", "code": "progress(50, 'adding');\nlet total = 0;\nfor (const line of lines) total += line.price * line.qty;\nreturn { total };",
         "inputs": [{"name": "lines", "type": "list[{price: number, qty: integer}]"}], "outputs": [{"name": "total", "type": "number"}]}
    ], "edges": [{"from": "order.lines", "to": "total.lines"}, {"from": "total.total", "to": "label.total"}]});
    let graph = write(&dir, "graph.json", &spec);
    let inputs = write(&dir, "inputs.json", &json!({"order": {"n": 3}}));
    let out = kiln(&["graph", "run", &graph, "--inputs", &inputs]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let run = out.json();
    assert_eq!(run["status"], "completed");
    let ids: Vec<&str> = run["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| node["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["order", "total", "label"]);
    assert_eq!(run["nodes"][2]["outputs"]["text"], "Total: 12.00");
    assert_eq!(run["nodes"][2]["console"][0]["text"], "labelling 12");
    assert!(
        out.stderr.contains("kiln: node `total` 50% · adding\n"),
        "{}",
        out.stderr
    );
    let mut bad = spec.clone();
    bad["edges"][1]["to"] = json!("label.text");
    let bad = write(&dir, "bad.json", &bad);
    let out = kiln(&["graph", "run", &bad, "--inputs", &inputs]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .contains("node `label` has no input `text`; its inputs are `total`"),
        "{}",
        out.stderr
    );
}

#[test]
fn node_author_writes_a_node_through_submit_code_that_then_runs() {
    let aimock = Aimock::start();
    let dir = folder("author");
    let slots = write(
        &dir,
        "slots.json",
        &json!([{"name": "n", "type": "number", "description": "the number"}]),
    );
    let base_url = format!("{}/v1", aimock.url());
    let out = kiln(&[
        "node",
        "author",
        "kiln-code-repair: classify n",
        "--inputs",
        &slots,
        "--provider",
        "openai",
        "--base-url",
        &base_url,
        "--model",
        "gpt-4o-mini",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let node = out.json()["node"].clone();
    assert_eq!(node["title"], "Classify the number");
    assert!(
        out.stderr.contains("\"rounds\":2"),
        "telemetry on stderr: {}",
        out.stderr
    );
    let node = write(&dir, "node.json", &node);
    let values = write(&dir, "values.json", &json!({"n": -3}));
    let out = kiln(&["node", "run", &node, "--inputs", &values]);
    assert_eq!(
        out.json()["outputs"],
        json!({"sign": "not positive", "size": 3})
    );
    // A model that never submits a valid node: exit 1 with the code.
    let out = kiln(&[
        "node",
        "author",
        "kiln-code-never",
        "--provider",
        "openai",
        "--base-url",
        &base_url,
        "--model",
        "gpt-4o-mini",
    ]);
    assert_eq!(out.code, 1);
    assert_eq!(out.json()["error"]["code"], "no_valid_submission");
    // The payload is shown without sending anything.
    let before = aimock.journal().as_array().unwrap().len();
    let out = kiln(&[
        "node",
        "author",
        "kiln-code-total",
        "--show-payload",
        "--provider",
        "openai",
        "--base-url",
        &base_url,
        "--model",
        "gpt-4o-mini",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json()[1]["role"], "user");
    assert_eq!(
        aimock.journal().as_array().unwrap().len(),
        before,
        "nothing was sent"
    );
}

#[test]
fn node_author_refuses_a_model_the_provider_says_cannot_call_tools() {
    let (port, asked) =
        kiln_testkit::ollama_show_server(vec![("gemma:2b", Some(vec!["completion"]))]);
    let out = kiln(&[
        "node",
        "author",
        "total the lines",
        "--provider",
        "ollama",
        "--base-url",
        &format!("http://127.0.0.1:{port}"),
        "--model",
        "gemma:2b",
    ]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "--model: no model that can call tools is set for writing code (skipped `gemma:2b`, which cannot): choose another"
        ),
        "{}",
        out.stderr
    );
    // Only /api/show was asked; no turn was sent.
    assert_eq!(*asked.lock().unwrap(), ["gemma:2b"]);
}

//! Code nodes and graphs of them, natively: the real sandbox in process,
//! the real ladder, the in-memory store. Slot checking as a table, a node's
//! outputs and warnings, bytes both ways, and graphs: build-time refusals,
//! dependency order, concurrency and a failed node's dependents.

#![expect(clippy::unwrap_used, reason = "tests")]

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use futures::executor::block_on;
use futures::future::LocalBoxFuture;
use kiln_capabilities::gate::{Headless, SessionAllow};
use kiln_capabilities::{CallContext, Implementation, Permit};
use kiln_nodes::{
    Graph, GraphRequest, GraphRun, GraphSetup, MAX_CODE_BYTES, NodeRequest, build_graph,
    check_node, default_node_limits, fill_inputs, node_run_request,
};
use kiln_run::Environment;
use kiln_run::{People, ToolBridge, Workspace};
use kiln_store::native::{MemoryBackend, MemoryTree};
use kiln_types::cancel::AbortSignal;
use kiln_types::node::{CodeNode, Ended, GraphSpec, NodeRun};
use kiln_types::tool_result::ToolReply;
use serde_json::{Map, Value, json};

#[path = "../../run/tests/common/mod.rs"]
mod common;
use common::InProcess;

fn environment() -> Environment {
    let workspace = Workspace {
        backend: MemoryBackend::new(),
        files: MemoryTree::new(),
        owners: Rc::new(kiln_store::owners::Solo::new()),
    };
    Environment {
        entrance: "node test".into(),
        tools_host: "page".into(),
        http: kiln_http::default_client(),
        people: People::Approver {
            host: "node test".into(),
            approver: Rc::new(Headless::new("node test")),
            session: SessionAllow::default(),
        },
        own_tools: None,
        bridge: None,
        workspace: Some(Rc::new(Ok(workspace))),
        random: Rc::new(|| [7; 8]),
        on_gate: None,
        on_progress: None,
    }
}

fn node(value: Value) -> CodeNode {
    serde_json::from_value(value).unwrap()
}

fn values(value: Value) -> Map<String, Value> {
    value.as_object().unwrap().clone()
}

fn run(node: &CodeNode, given: Value) -> NodeRun {
    block_on(kiln_nodes::run_node(
        node,
        &values(given),
        node_run_request(),
        &environment(),
        &InProcess,
        AbortSignal::new(),
    ))
    .unwrap()
}

fn prices() -> CodeNode {
    node(json!({
        "title": "Total the order",
        "code": "let total = 0;\nfor (const line of lines) total += line.price * line.qty;\nconsole.log(`${lines.length} lines`);\nreturn { total: total * (1 - discount), count: lines.length };",
        "inputs": [
            {"name": "lines", "type": "list[{price: number, qty: integer}]", "description": "order lines"},
            {"name": "discount", "type": "number", "default": 0}
        ],
        "outputs": [
            {"name": "total", "type": "number"},
            {"name": "count", "type": "integer"}
        ]
    }))
}

#[test]
fn values_are_checked_against_the_slots_naming_the_slot_the_type_and_what_came() {
    let node = prices();
    let cases: &[(&str, Value, Option<&str>)] = &[
        (
            "all given",
            json!({"lines": [{"price": 2, "qty": 3}], "discount": 0.5}),
            None,
        ),
        ("the default filled", json!({"lines": []}), None),
        (
            "a missing required input",
            json!({}),
            Some(
                "input `lines` is required and no value came; it takes `list[{price: number, qty: integer}]`",
            ),
        ),
        (
            "a wrong type deep inside",
            json!({"lines": [{"price": 2, "qty": 3}, {"price": "2", "qty": 1}]}),
            Some("input `lines[1].price` must be a number, not a string (\"2\")"),
        ),
        (
            "a fraction where an integer belongs",
            json!({"lines": [{"price": 2, "qty": 1.5}]}),
            Some("input `lines[0].qty` must be an integer, not a number (1.5)"),
        ),
        (
            "a key the record needs",
            json!({"lines": [{"price": 2}]}),
            Some("input `lines[0].qty` must be an integer, not nothing (the key is missing)"),
        ),
        (
            "a name that is no input",
            json!({"lines": [], "discont": 1}),
            Some("`discont` is not an input; the node's inputs are `discount`, `lines`"),
        ),
    ];
    for (name, given, expected) in cases {
        let filled = fill_inputs(&node, given.as_object().unwrap());
        match expected {
            None => {
                let filled = filled.unwrap_or_else(|refused| panic!("{name}: {refused:?}"));
                assert!(
                    filled.contains_key("discount"),
                    "{name}: the default is filled"
                );
            }
            Some(expected) => {
                let refused = filled.err().unwrap_or_else(|| panic!("{name}: accepted"));
                assert!(
                    refused.iter().any(|reason| reason == expected),
                    "{name}: {refused:?}"
                );
            }
        }
    }
}

#[test]
fn a_node_runs_and_gives_each_output_by_name_with_its_console_and_result() {
    let run = run(
        &prices(),
        json!({"lines": [{"price": 2, "qty": 3}, {"price": 1, "qty": 4}], "discount": 0.5}),
    );
    assert_eq!(run.error, None);
    assert_eq!(run.outputs, values(json!({"total": 5, "count": 2})));
    assert!(run.warnings.is_empty(), "{:?}", run.warnings);
    assert_eq!(run.console.len(), 1);
    assert_eq!(run.console[0].text, "2 lines");
    let result = run.result.unwrap();
    assert_eq!(result.structured_content["status"], "completed");
    assert_eq!(result.structured_content["value"]["count"], 2);
}

#[test]
fn the_history_names_a_nodes_run_by_the_node_not_its_wrapper() {
    let environment = environment();
    let Some(Ok(workspace)) = environment.workspace.as_deref() else {
        panic!("the test environment has a workspace");
    };
    let backend = workspace.backend.clone();
    block_on(kiln_nodes::run_node(
        &prices(),
        &values(json!({"lines": [{"price": 2, "qty": 3}]})),
        node_run_request(),
        &environment,
        &InProcess,
        AbortSignal::new(),
    ))
    .unwrap();
    let history = kiln_store::history::History::new(backend);
    let jobs = block_on(history.jobs(10)).unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].title, "node · Total the order");
    assert!(
        jobs[0].input.contains("const {lines, discount}"),
        "the program stays the input"
    );
}

#[test]
fn a_refused_value_runs_nothing() {
    let run = run(&prices(), json!({"lines": "none"}));
    let error = run.error.unwrap();
    assert_eq!(error.code, "invalid_inputs");
    assert_eq!(
        error.message,
        "input `lines` must be a list[{price: number, qty: integer}], not a string (\"none\")"
    );
    assert!(run.result.is_none());
}

#[test]
fn outputs_that_do_not_match_are_passed_on_with_a_warning_and_extras_dropped() {
    let node = node(json!({
        "title": "Loose",
        "code": "return { count: '3', extra: true };",
        "outputs": [{"name": "count", "type": "integer"}, {"name": "label", "type": "string"}]
    }));
    let run = run(&node, json!({}));
    assert_eq!(run.error, None);
    assert_eq!(run.outputs, values(json!({"count": "3"})));
    assert_eq!(
        run.warnings,
        vec![
            "output `count` must be an integer, not a string (\"3\"); passed on as it is",
            "the body gave no `label` (declared `string`); an input it feeds gets no value",
            "`extra` is not a declared output; dropped",
        ]
    );
}

#[test]
fn a_body_that_returns_no_object_or_throws_fails_and_keeps_its_line() {
    let not_outputs = node(json!({
        "title": "Not outputs",
        "code": "return [1, 2];",
        "outputs": [{"name": "x", "type": "any"}]
    }));
    let error = run(&not_outputs, json!({})).error.unwrap();
    assert_eq!(error.code, "not_outputs");
    assert_eq!(
        error.message,
        "the body returned an array of 2, not an object of outputs (expected {`x`})"
    );
    let thrown = run(&node_throwing(), json!({"n": 1}));
    let error = thrown.error.unwrap();
    assert_eq!(error.code, "script", "{error:?}");
    assert!(error.message.contains("too small"), "{error:?}");
    assert!(thrown.result.unwrap().is_error);
    // A syntax error names the body's own line: the inputs take none.
    let broken = node(json!({
        "title": "Broken",
        "code": "const a = n;\nconst b = 2;\nreturn { n: a + };",
        "inputs": [{"name": "n", "type": "integer"}],
        "outputs": [{"name": "n", "type": "integer"}]
    }));
    let error = run(&broken, json!({"n": 1})).error.unwrap();
    assert_eq!(error.code, "syntax", "{error:?}");
    assert!(error.message.contains("line 3"), "{error:?}");
}

fn node_throwing() -> CodeNode {
    node(json!({
        "title": "Throws",
        "code": "if (n < 5) {\n  throw new RangeError(`${n} is too small`);\n}\nreturn { n };",
        "inputs": [{"name": "n", "type": "integer"}],
        "outputs": [{"name": "n", "type": "integer"}]
    }))
}

#[test]
fn an_input_is_a_constant_the_body_can_shadow_and_an_optional_one_is_undefined() {
    let node = node(json!({
        "title": "Shadow",
        "code": "let rows = 1;\nreturn { seen: typeof label, rows };",
        "inputs": [{"name": "rows", "type": "any"}, {"name": "label", "type": "string", "required": false}],
        "outputs": [{"name": "seen", "type": "string"}, {"name": "rows", "type": "integer"}]
    }));
    let run = run(&node, json!({"rows": [1, 2]}));
    assert_eq!(run.error, None, "{:?}", run.result);
    assert_eq!(run.outputs, values(json!({"seen": "undefined", "rows": 1})));
}

#[test]
fn bytes_arrive_as_a_uint8array_and_leave_as_bytes() {
    let node = node(json!({
        "title": "Reverse bytes",
        "code": "const kind = data.constructor.name;\nreturn { reversed: data.slice().reverse(), kind, length: data.length };",
        "inputs": [{"name": "data", "type": "bytes"}],
        "outputs": [{"name": "reversed", "type": "bytes"}, {"name": "kind", "type": "string"}, {"name": "length", "type": "integer"}]
    }));
    // "AQID" is [1, 2, 3]; "AQIDBA==" is [1, 2, 3, 4].
    for (given, reversed, length) in [
        ("AQID", "AwIB", 3),
        ("AQIDBA==", "BAMCAQ==", 4),
        ("", "", 0),
    ] {
        let run = run(&node, json!({"data": {"$bytes": given}}));
        assert_eq!(run.error, None, "{given}: {:?}", run.result);
        assert_eq!(
            run.outputs,
            values(
                json!({"reversed": {"$bytes": reversed}, "kind": "Uint8Array", "length": length})
            ),
            "{given}"
        );
    }
}

#[test]
fn an_optional_input_named_after_an_object_member_is_undefined_when_no_value_comes() {
    // The inputs were read from an ordinary object: a missing `toString`
    // read the inherited `Object.prototype.toString`.
    let names = [
        "toString",
        "constructor",
        "hasOwnProperty",
        "valueOf",
        "isPrototypeOf",
        "propertyIsEnumerable",
        "toLocaleString",
        "__proto__",
        "__defineGetter__",
        "__lookupSetter__",
    ];
    let inputs: Vec<Value> = names
        .iter()
        .map(|name| json!({"name": name, "type": "any", "required": false}))
        .collect();
    let node = node(json!({
        "title": "Members",
        "code": format!("return {{ seen: [{}] }};", names.map(|name| format!("typeof {name}")).join(", ")),
        "inputs": inputs,
        "outputs": [{"name": "seen", "type": "list[string]"}]
    }));
    assert_eq!(check_node(&node), Vec::<String>::new());
    let ran = run(&node, json!({}));
    assert_eq!(ran.error, None, "{:?}", ran.result);
    assert_eq!(ran.outputs["seen"], json!(vec!["undefined"; names.len()]));
    // A value that comes is read as it came, `__proto__` included.
    let given = json!({"toString": "text", "constructor": 3, "__proto__": {"a": 1}});
    let echo = kiln_types::node::CodeNode {
        code: "return { seen: [toString, constructor, __proto__, typeof valueOf] };".into(),
        ..node
    };
    let ran = run(&echo, given);
    assert_eq!(ran.error, None, "{:?}", ran.result);
    assert_eq!(
        ran.outputs["seen"],
        json!(["text", 3, {"a": 1}, "undefined"])
    );
}

#[test]
fn only_a_bytes_slot_turns_a_bytes_shaped_value_into_bytes() {
    // Any one-key `{"$bytes": …}` object once became a Uint8Array whatever
    // the slot's type: upstream data chose a downstream node's types.
    let shaped = json!({"$bytes": "AQID"});
    let node = node(json!({
        "title": "Kinds",
        "code": "const kind = (v) => v instanceof Uint8Array ? `bytes ${v.length}` : v === undefined ? 'none' : JSON.stringify(v);\n\
                 return { kinds: [kind(plain), kind(loose), kind(strings), kind(objects), kind(data), kind(many && many[1]), \
                 kind(named && named.b), kind(named && named.o), kind(record && record.blob)] };",
        "inputs": [
            {"name": "plain", "type": "object"},
            {"name": "loose", "type": "any"},
            {"name": "strings", "type": "dict[string]"},
            {"name": "objects", "type": "list[object]"},
            {"name": "data", "type": "bytes"},
            {"name": "many", "type": "list[bytes]", "required": false},
            {"name": "named", "type": "dict[bytes]", "required": false},
            {"name": "record", "type": "{blob?: bytes, other: any}", "required": false}
        ],
        "outputs": [{"name": "kinds", "type": "list[string]"}]
    }));
    let ran = run(
        &node,
        json!({
            "plain": shaped, "loose": shaped, "strings": shaped, "objects": [shaped],
            "data": shaped, "many": [{"$bytes": ""}, {"$bytes": "AQIDBA=="}],
            "named": {"b": shaped, "o": {"$bytes": "AA=="}},
            "record": {"blob": shaped, "other": shaped}
        }),
    );
    assert_eq!(ran.error, None, "{:?}", ran.result);
    let plain = r#"{"$bytes":"AQID"}"#;
    assert_eq!(
        ran.outputs["kinds"],
        json!([
            plain,
            plain,
            plain,
            format!("[{plain}]"),
            "bytes 3",
            "bytes 4",
            "bytes 3",
            "bytes 1",
            "bytes 3"
        ])
    );
    // A record's bytes field that is absent stays absent; its `any` field
    // stays a plain object.
    let fields = kiln_types::node::CodeNode {
        code: "return { kinds: [String(Object.hasOwn(record, 'blob')), JSON.stringify(record.other)] };".into(),
        ..node
    };
    let ran = run(
        &fields,
        json!({"plain": {}, "loose": 1, "strings": {}, "objects": [], "data": shaped, "record": {"other": shaped}}),
    );
    assert_eq!(ran.error, None, "{:?}", ran.result);
    assert_eq!(ran.outputs["kinds"], json!(["false", plain]));
}

#[test]
fn a_hostile_value_is_data_never_source() {
    let echo = node(json!({
        "title": "Echo",
        "code": "return { text, kind: typeof text };",
        "inputs": [{"name": "text", "type": "string"}],
        "outputs": [{"name": "text", "type": "string"}, {"name": "kind", "type": "string"}]
    }));
    for hostile in [
        "\"); throw 1; (\"",
        "\u{2028}\u{2029}",
        "</script>",
        "${globalThis}",
        "\\u0022",
    ] {
        let run = run(&echo, json!({"text": hostile}));
        assert_eq!(run.outputs["text"], hostile, "{hostile:?}");
    }
    let proto = node(json!({
        "title": "Proto",
        "code": "return { proto: Object.getPrototypeOf(value) === Object.prototype, keys: Object.keys(value) };",
        "inputs": [{"name": "value", "type": "object"}],
        "outputs": [{"name": "proto", "type": "boolean"}, {"name": "keys", "type": "list[string]"}]
    }));
    let run = run(&proto, json!({"value": {"__proto__": {"polluted": true}}}));
    assert_eq!(
        run.outputs,
        values(json!({"proto": true, "keys": ["__proto__"]}))
    );
}

#[test]
fn a_node_is_checked_as_data_naming_each_problem() {
    let cases: &[(&str, Value, &str)] = &[
        (
            "no outputs",
            json!({"title": "t", "code": "return {};", "outputs": []}),
            "the node declares no output; it needs at least one",
        ),
        (
            "a name that is no identifier",
            json!({"title": "t", "code": "return {};", "outputs": [{"name": "2x", "type": "any"}]}),
            "output `2x` is not a JavaScript identifier (letters, digits, `_` and `$`, not starting with a digit)",
        ),
        (
            "a reserved word",
            json!({"title": "t", "code": "return {};", "inputs": [{"name": "class", "type": "any"}], "outputs": [{"name": "x", "type": "any"}]}),
            "input `class` is a reserved word of JavaScript; choose another name",
        ),
        (
            "a global it would hide",
            json!({"title": "t", "code": "return {};", "inputs": [{"name": "tools", "type": "any"}], "outputs": [{"name": "x", "type": "any"}]}),
            "input `tools` would hide Kiln's global `tools`; choose another name",
        ),
        (
            "a repeated name",
            json!({"title": "t", "code": "return {};", "outputs": [{"name": "x", "type": "any"}, {"name": "x", "type": "string"}]}),
            "two outputs are named `x`; names are unique per direction",
        ),
        (
            "a default of the wrong type",
            json!({"title": "t", "code": "return {};", "inputs": [{"name": "n", "type": "integer", "default": "3"}], "outputs": [{"name": "x", "type": "any"}]}),
            "the default of input `n` must be an integer, not a string (\"3\")",
        ),
        (
            "no title",
            json!({"title": " ", "code": "return {};", "outputs": [{"name": "x", "type": "any"}]}),
            "the node has no title",
        ),
        (
            "a syntax error",
            json!({"title": "t", "code": "return { x: ;", "outputs": [{"name": "x", "type": "any"}]}),
            "the code does not parse: ",
        ),
        (
            "a path without an output",
            json!({"title": "t", "code": "if (a) return { x: 1 };\nreturn { y: 2 };", "outputs": [{"name": "x", "type": "any"}, {"name": "y", "type": "any"}]}),
            "the `return` at line 1 gives no `y`: give every declared output on every path (a value that only sometimes exists can be `null`), or split the node in two",
        ),
    ];
    for (name, spec, expected) in cases {
        let problems = check_node(&node(spec.clone()));
        assert!(
            problems.iter().any(|problem| problem.starts_with(expected)),
            "{name}: {problems:?}"
        );
    }
    let huge = "x".repeat(MAX_CODE_BYTES + 1);
    let problems = check_node(&node(
        json!({"title": "t", "code": huge, "outputs": [{"name": "x", "type": "any"}]}),
    ));
    assert_eq!(
        problems,
        vec![format!(
            "the code is {} bytes; at most {}",
            MAX_CODE_BYTES + 1,
            MAX_CODE_BYTES
        )]
    );
    // A slot type outside the vocabulary is refused where the node is read.
    let error = serde_json::from_value::<CodeNode>(json!({"title": "t", "code": "return {};", "outputs": [{"name": "x", "type": "list[strin]"}]}))
        .err()
        .unwrap();
    assert!(error.to_string().contains("strin"), "{error}");
}

// ---- graphs ----

fn graph(value: Value) -> Result<Graph, Vec<String>> {
    build_graph(serde_json::from_value::<GraphSpec>(value).unwrap())
}

fn pass(id: &str, ty: &str) -> Value {
    json!({
        "id": id,
        "title": format!("pass {id}"),
        "code": "return { out: value };",
        "inputs": [{"name": "value", "type": ty}],
        "outputs": [{"name": "out", "type": ty}]
    })
}

#[test]
fn a_graph_is_refused_at_build_naming_the_edge_the_slot_or_the_cycle() {
    let cases: &[(&str, Value, &str)] = &[
        (
            "types that do not fit",
            json!({"nodes": [pass("a", "string"), pass("b", "number")], "edges": [{"from": "a.out", "to": "b.value"}]}),
            "`a.out` gives a string, which does not fit `b.value`, which takes a number",
        ),
        (
            "a number into an integer",
            json!({"nodes": [pass("a", "number"), pass("b", "integer")], "edges": [{"from": "a.out", "to": "b.value"}]}),
            "`a.out` gives a number, which does not fit `b.value`, which takes an integer",
        ),
        (
            "no such slot",
            json!({"nodes": [pass("a", "string"), pass("b", "string")], "edges": [{"from": "a.result", "to": "b.value"}]}),
            "node `a` has no output `result`; its outputs are `out`",
        ),
        (
            "no such node",
            json!({"nodes": [pass("a", "string")], "edges": [{"from": "a.out", "to": "z.value"}]}),
            "the edge `a.out` → `z.value` names no node `z`; the nodes are `a`",
        ),
        (
            "an input fed twice",
            json!({"nodes": [pass("a", "any"), pass("b", "any"), pass("c", "any")], "edges": [{"from": "a.out", "to": "c.value"}, {"from": "b.out", "to": "c.value"}]}),
            "`c.value` is fed by `a.out` and by `b.out`; an input takes one edge",
        ),
        (
            "a cycle",
            json!({"nodes": [pass("a", "any"), pass("b", "any")], "edges": [{"from": "a.out", "to": "b.value"}, {"from": "b.out", "to": "a.value"}]}),
            "a cycle: `a` and `b` depend on each other",
        ),
        (
            "a node on itself",
            json!({"nodes": [pass("a", "any")], "edges": [{"from": "a.out", "to": "a.value"}]}),
            "a cycle: `a` depends on itself",
        ),
        (
            "a repeated id",
            json!({"nodes": [pass("a", "any"), pass("a", "any")]}),
            "two nodes have the id `a`; ids are unique",
        ),
        (
            "a bad node",
            json!({"nodes": [{"id": "a", "title": "t", "code": "return {};", "outputs": []}]}),
            "node `a`: the node declares no output; it needs at least one",
        ),
    ];
    for (name, spec, expected) in cases {
        let issues = graph(spec.clone())
            .err()
            .unwrap_or_else(|| panic!("{name}: accepted"));
        assert!(
            issues.iter().any(|issue| issue == expected),
            "{name}: {issues:?}"
        );
    }
    // What fits: an integer into a number, anything into `any`, a record
    // into the dict it is.
    assert!(graph(json!({"nodes": [pass("a", "integer"), pass("b", "number"), pass("c", "any")], "edges": [{"from": "a.out", "to": "b.value"}, {"from": "b.out", "to": "c.value"}]})).is_ok());
    assert!(graph(json!({"nodes": [pass("a", "{x: integer}"), pass("b", "dict[number]")], "edges": [{"from": "a.out", "to": "b.value"}]})).is_ok());
}

fn run_graph(graph: &Graph, inputs: Value) -> (GraphRun, Vec<String>) {
    let order = RefCell::new(Vec::new());
    let run = block_on(kiln_nodes::run_graph(
        graph,
        inputs.as_object().unwrap(),
        &node_run_request(),
        GraphSetup {
            environment: &environment(),
            runner: &InProcess,
            cancel: &AbortSignal::new(),
            on_progress: None,
        },
        4,
        |report| {
            order
                .borrow_mut()
                .push(format!("{} {}", report.id, report.status))
        },
    ))
    .unwrap();
    (run, order.into_inner())
}

#[test]
fn a_nodes_progress_reaches_its_entrance_named_by_node() {
    let graph = graph(json!({
        "nodes": [
            {"id": "count", "title": "Count", "code": "progress(50, 'half way');\nreturn { n: 1 };",
             "outputs": [{"name": "n", "type": "integer"}]}
        ],
        "edges": []
    }))
    .unwrap();
    // (node, percent, message) as each report came.
    type Told = Vec<(String, f64, Option<String>)>;
    let told: Rc<RefCell<Told>> = Rc::default();
    // The environment's own observer cannot tell nodes apart: a graph run
    // tells the graph's.
    let mut environment = environment();
    environment.on_progress = Some(Rc::new(|_: &kiln_types::Progress| {
        panic!("a graph's node told the environment's observer")
    }));
    let run = block_on(kiln_nodes::run_graph(
        &graph,
        &Map::new(),
        &node_run_request(),
        GraphSetup {
            environment: &environment,
            runner: &InProcess,
            cancel: &AbortSignal::new(),
            on_progress: Some(Rc::new({
                let told = told.clone();
                move |node: &str, progress: &kiln_types::Progress| {
                    told.borrow_mut().push((
                        node.to_owned(),
                        progress.percent,
                        progress.message.clone(),
                    ));
                }
            })),
        },
        4,
        |_| {},
    ))
    .unwrap();
    assert_eq!(run.status, Ended::Completed, "{run:?}");
    assert_eq!(
        *told.borrow(),
        [("count".to_owned(), 50.0, Some("half way".to_owned()))]
    );
    // One node's run tells the environment's observer.
    let node: CodeNode = serde_json::from_value(json!({
        "title": "Ticks", "code": "progress(120);\nreturn { n: 2 };",
        "outputs": [{"name": "n", "type": "integer"}]
    }))
    .unwrap();
    let seen: Rc<RefCell<Vec<f64>>> = Rc::default();
    let mut environment = self::environment();
    environment.on_progress = Some(Rc::new({
        let seen = seen.clone();
        move |progress: &kiln_types::Progress| seen.borrow_mut().push(progress.percent)
    }));
    let ran = block_on(kiln_nodes::run_node(
        &node,
        &Map::new(),
        node_run_request(),
        &environment,
        &InProcess,
        AbortSignal::new(),
    ))
    .unwrap();
    assert!(ran.error.is_none(), "{ran:?}");
    assert_eq!(*seen.borrow(), [100.0]);
}

#[test]
fn a_graph_runs_in_dependency_order_passing_outputs_to_inputs() {
    let graph = graph(json!({
        "nodes": [
            {"id": "sum", "title": "Sum", "code": "return { total: a + b };",
             "inputs": [{"name": "a", "type": "number"}, {"name": "b", "type": "number"}],
             "outputs": [{"name": "total", "type": "number"}]},
            {"id": "left", "title": "Left", "code": "return { n: seed * 2 };",
             "inputs": [{"name": "seed", "type": "integer"}], "outputs": [{"name": "n", "type": "integer"}]},
            {"id": "right", "title": "Right", "code": "return { n: 10 };", "outputs": [{"name": "n", "type": "integer"}]},
            {"id": "label", "title": "Label", "code": "console.log('labelling');\nreturn { text: `${prefix}${total}` };",
             "inputs": [{"name": "total", "type": "number"}, {"name": "prefix", "type": "string", "default": "= "}],
             "outputs": [{"name": "text", "type": "string"}]}
        ],
        "edges": [
            {"from": "left.n", "to": "sum.a"}, {"from": "right.n", "to": "sum.b"}, {"from": "sum.total", "to": "label.total"}
        ]
    }))
    .unwrap();
    let ids: Vec<&str> = graph.nodes().iter().map(|node| node.id.as_str()).collect();
    assert_eq!(ids, ["left", "right", "sum", "label"], "dependency order");
    let (run, order) = run_graph(&graph, json!({"left": {"seed": 3}}));
    assert_eq!(run.status, Ended::Completed);
    assert_eq!(run.node("label").unwrap().run.outputs["text"], "= 16");
    assert_eq!(run.node("label").unwrap().run.console[0].text, "labelling");
    assert_eq!(order.len(), 4);
    let at = |id: &str| {
        order
            .iter()
            .position(|entry| entry.starts_with(id))
            .unwrap()
    };
    assert!(
        at("left") < at("sum") && at("right") < at("sum") && at("sum") < at("label"),
        "{order:?}"
    );
    // Inputs for a node that does not exist, or for an input an edge feeds,
    // are refused before anything runs.
    let refused = block_on(kiln_nodes::run_graph(
        &graph,
        json!({"nowhere": {}, "sum": {"a": 1}}).as_object().unwrap(),
        &node_run_request(),
        GraphSetup {
            environment: &environment(),
            runner: &InProcess,
            cancel: &AbortSignal::new(),
            on_progress: None,
        },
        4,
        |_| {},
    ))
    .err()
    .unwrap();
    assert_eq!(
        refused,
        vec![
            "inputs name no node `nowhere`; the nodes are `left`, `right`, `sum`, `label`",
            "`sum.a` is fed by `left.n`; give it no value of its own",
        ]
    );
}

#[test]
fn a_failed_node_fails_its_dependents_naming_it_and_the_rest_run() {
    let graph = graph(json!({
        "nodes": [
            {"id": "check", "title": "Check", "code": "if (n < 5) {\n  throw new RangeError(`${n} is too small`);\n}\nreturn { n };",
             "inputs": [{"name": "n", "type": "integer"}], "outputs": [{"name": "n", "type": "integer"}]},
            pass("after", "integer"),
            pass("later", "integer"),
            {"id": "free", "title": "Free", "code": "return { ok: true };", "outputs": [{"name": "ok", "type": "boolean"}]}
        ],
        "edges": [{"from": "check.n", "to": "after.value"}, {"from": "after.out", "to": "later.value"}]
    }))
    .unwrap();
    let (run, _) = run_graph(&graph, json!({"check": {"n": 1}}));
    assert_eq!(run.status, Ended::Failed);
    let check = run.node("check").unwrap();
    assert_eq!(check.status, Ended::Failed);
    assert!(
        check
            .run
            .error
            .as_ref()
            .unwrap()
            .message
            .contains("1 is too small")
    );
    assert!(check.run.result.is_some(), "its own run's result is kept");
    let after = run.node("after").unwrap();
    assert_eq!(after.status, Ended::Failed);
    let error = after.run.error.as_ref().unwrap();
    assert_eq!(
        (error.code.as_str(), error.message.as_str()),
        ("dependency_failed", "dependency `check` failed")
    );
    assert!(after.run.result.is_none(), "it never ran");
    assert_eq!(
        run.node("later")
            .unwrap()
            .run
            .error
            .as_ref()
            .unwrap()
            .message,
        "dependency `after` failed"
    );
    assert_eq!(run.node("free").unwrap().status, Ended::Completed);
}

/// A page tool that answers only when `open_at` calls are in flight at
/// once (each call waits for the others), or says `"alone"` after a long
/// while: nodes run one after another can never open it.
struct Barrier {
    open_at: usize,
    waiting: RefCell<Vec<futures::channel::oneshot::Sender<()>>>,
    most: Cell<usize>,
}

impl Implementation for Barrier {
    fn call(&self, _: Value, _: CallContext, _: Permit) -> LocalBoxFuture<'static, ToolReply> {
        let (send, receive) = futures::channel::oneshot::channel();
        let mut waiting = self.waiting.borrow_mut();
        waiting.push(send);
        self.most.set(self.most.get().max(waiting.len()));
        if waiting.len() == self.open_at {
            for send in waiting.drain(..) {
                let _ = send.send(());
            }
        }
        let (late, timeout) = futures::channel::oneshot::channel::<()>();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_secs(20));
            let _ = late.send(());
        });
        Box::pin(async move {
            match futures::future::select(receive, timeout).await {
                futures::future::Either::Left((Ok(()), _)) => Ok(json!("together")),
                _ => Ok(json!("alone")),
            }
        })
    }
}

struct Bridge(Rc<Barrier>);

impl ToolBridge for Bridge {
    fn implementation(&self, _: &str) -> Option<Rc<dyn Implementation>> {
        Some(self.0.clone())
    }
}

#[test]
fn independent_nodes_run_at_once() {
    // Four nodes that each wait at a barrier for the other three, then one
    // that needs them all.
    let mut nodes: Vec<Value> = (0..4)
        .map(|at| {
            json!({"id": format!("wait{at}"), "title": "Wait", "code": format!("const met = await tools.meet({{}});\nreturn {{ n: {at}, met }};"),
                   "outputs": [{"name": "n", "type": "integer"}, {"name": "met", "type": "string"}]})
        })
        .collect();
    nodes.push(json!({"id": "join", "title": "Join",
        "code": "return { total: a + b + c + d };",
        "inputs": [{"name": "a", "type": "integer"}, {"name": "b", "type": "integer"}, {"name": "c", "type": "integer"}, {"name": "d", "type": "integer"}],
        "outputs": [{"name": "total", "type": "integer"}]}));
    let edges: Vec<Value> = ["a", "b", "c", "d"]
        .iter()
        .enumerate()
        .map(|(at, slot)| json!({"from": format!("wait{at}.n"), "to": format!("join.{slot}")}))
        .collect();
    let graph = graph(json!({"nodes": nodes, "edges": edges})).unwrap();
    let barrier = Rc::new(Barrier {
        open_at: 4,
        waiting: RefCell::new(Vec::new()),
        most: Cell::new(0),
    });
    let mut environment = environment();
    environment.bridge = Some(Rc::new(Bridge(barrier.clone())));
    let mut request = node_run_request();
    request.tools.insert(
        "meet".to_owned(),
        kiln_run::ToolEntry {
            description: "meet the others".to_owned(),
            input_schema: json!({"type": "object"}),
            category: kiln_types::permission::Category::Read,
        },
    );
    let run = block_on(kiln_nodes::run_graph(
        &graph,
        &Map::new(),
        &request,
        GraphSetup {
            environment: &environment,
            runner: &InProcess,
            cancel: &AbortSignal::new(),
            on_progress: None,
        },
        4,
        |_| {},
    ))
    .unwrap();
    assert_eq!(run.status, Ended::Completed, "{run:?}");
    assert_eq!(
        barrier.most.get(),
        4,
        "the four nodes were in flight at once"
    );
    for at in 0..4 {
        assert_eq!(
            run.node(&format!("wait{at}")).unwrap().run.outputs["met"],
            "together"
        );
    }
    assert_eq!(run.node("join").unwrap().run.outputs["total"], 6);
}

#[test]
fn entrance_requests_are_read_by_name_with_a_nodes_limits_under_what_they_leave_unset() {
    let spec = json!({"title": "One", "code": "return {x: 1};", "outputs": [{"name": "x", "type": "integer"}]});
    let read = NodeRequest::from_value(
        json!({"node": spec, "values": {"a": 1}, "limits": {"js_cpu_ms": 500}, "agent": "ada"}),
    )
    .unwrap();
    assert_eq!(read.node.title, "One");
    assert_eq!(read.values["a"], 1);
    let limits = read.run.limits.get();
    assert_eq!(limits.js_cpu_ms, 500);
    assert_eq!(limits.return_bytes, default_node_limits().return_bytes);
    assert_eq!(read.run.agent, "ada");
    let refused = |value: Value| NodeRequest::from_value(value).unwrap_err().0;
    assert!(refused(json!({"values": {}})).contains("`node` is missing"));
    let named = refused(json!({"node": spec, "code": "return 1"}));
    assert!(
        named.contains("`code` is not a field of a node run"),
        "{named}"
    );
    assert!(named.contains("node, values, limits"), "{named}");
    assert!(refused(json!({"node": spec, "values": [1]})).contains("`values` must be an object"));
    assert!(refused(json!({"node": {"title": 1}})).contains("`node` is not a node"));
    assert!(refused(json!({"node": spec, "limits": {"cpu": 1}})).contains("cpu"));

    let nodes = json!([{"id": "a", "title": "A", "code": "return {x: 1};", "outputs": [{"name": "x", "type": "integer"}]}]);
    let read =
        GraphRequest::from_value(json!({"nodes": nodes, "inputs": {"a": {}}, "max_concurrent": 2}))
            .unwrap();
    assert_eq!((read.spec.nodes.len(), read.max_concurrent), (1, 2));
    let refused = |value: Value| GraphRequest::from_value(value).unwrap_err().0;
    assert!(refused(json!({"edges": []})).contains("`nodes` is missing"));
    assert!(refused(json!({"nodes": nodes, "max_concurrent": 0})).contains("from 1 to 64"));
    assert!(refused(json!({"nodes": nodes, "inputs": 3})).contains("`inputs` must be an object"));
    let named = refused(json!({"nodes": nodes, "key": "k"}));
    assert!(
        named.contains("`key` is not a field of a graph run; expected one of limits"),
        "{named}"
    );
}

#[test]
fn a_body_imports_kilns_modules_and_its_lines_stay_its_own() {
    let links = node(json!({
        "title": "Links from a CSV of pages",
        "code": "import { parse } from \"kiln:csv\";\nimport * as html from \"kiln:html\";\nconst rows = parse(csv);\nconst links = rows.flatMap((row) => html.select(row.page, \"a\").map((a) => a.attributes.href));\nreturn { links, digest: toHex(crypto.digest(\"SHA-256\", links.join())) };",
        "inputs": [{"name": "csv", "type": "string"}],
        "outputs": [{"name": "links", "type": "list[string]"}, {"name": "digest", "type": "string"}]
    }));
    assert!(
        kiln_nodes::check_node(&links).is_empty(),
        "{:?}",
        kiln_nodes::check_node(&links)
    );
    let ran = run(
        &links,
        json!({"csv": "name,page\nhome,\"<a href='/a'>A</a> <a href='/b'>B</a>\"\n"}),
    );
    assert_eq!(ran.error, None, "{:?}", ran.result);
    assert_eq!(ran.outputs["links"], json!(["/a", "/b"]));
    assert_eq!(ran.outputs["digest"].as_str().map(str::len), Some(64));
    // What a body may not import is named before it runs; an error keeps the body's line.
    let packages = node(json!({
        "title": "Lodash",
        "code": "import _ from \"lodash\";\nreturn { n: 1 };",
        "outputs": [{"name": "n", "type": "integer"}]
    }));
    let problems = kiln_nodes::check_node(&packages);
    assert!(
        problems
            .iter()
            .any(|problem| problem
                .starts_with("line 1: import_refused: `lodash` cannot be imported")),
        "{problems:?}"
    );
    let thrown = node(json!({
        "title": "Throws after imports",
        "code": "import { parse } from \"kiln:csv\";\n\nthrow new Error(`bad ${parse('a\\n1').length}`);",
        "inputs": [{"name": "n", "type": "integer"}],
        "outputs": [{"name": "n", "type": "integer"}]
    }));
    let error = run(&thrown, json!({"n": 1})).error.unwrap();
    assert!(error.message.contains("bad 1"), "{error:?}");
}

//! The graph builder at sizes far past its limits: a graph past a limit is
//! refused by its counts before any node or edge is checked, and a long
//! cycle or a long list of nodes is named by its first ids and a count.

use kiln_types::node::GraphSpec;
use serde_json::{Value, json};

use super::build;

/// A node passing its one input on.
fn pass(id: &str) -> Value {
    json!({
        "id": id,
        "title": format!("pass {id}"),
        "code": "return { out: value };",
        "inputs": [{"name": "value", "type": "any"}],
        "outputs": [{"name": "out", "type": "any"}]
    })
}

fn spec(nodes: Vec<Value>, edges: Vec<Value>) -> GraphSpec {
    serde_json::from_value(json!({"nodes": nodes, "edges": edges})).expect("a graph's shape")
}

/// `len` nodes, each fed by the one before and the first by the last.
fn ring(len: usize) -> GraphSpec {
    let nodes = (0..len).map(|at| pass(&format!("n{at}"))).collect();
    let edges = (0..len)
        .map(|at| json!({"from": format!("n{}.out", (at + len - 1) % len), "to": format!("n{at}.value")}))
        .collect();
    spec(nodes, edges)
}

fn refused(spec: GraphSpec) -> Vec<String> {
    build(spec).expect_err("the graph is refused")
}

#[test]
fn a_graph_past_a_size_limit_is_refused_by_its_counts_before_anything_else() {
    // 200 nodes, and node n0 fanned out 10,000 times over their inputs.
    let fan: Vec<Value> = (0..10_000)
        .map(|at| json!({"from": "n0.out", "to": format!("n{}.value", 1 + at % 199)}))
        .collect();
    let mut cases: Vec<(&str, GraphSpec, &[&str])> = vec![
        (
            "10,000 nodes in one cycle",
            ring(10_000),
            &[
                "the graph has 10000 nodes; at most 200",
                "the graph has 10000 edges; at most 2000",
            ],
        ),
        (
            "10,000 edges fanned out of one node",
            spec((0..200).map(|at| pass(&format!("n{at}"))).collect(), fan),
            &["the graph has 10000 edges; at most 2000"],
        ),
    ];
    // Ids far past their limit, each quoted in part once, before any edge
    // message could quote one for every edge.
    let long = "x".repeat(100_000);
    let mut quoted = ring(200);
    quoted.nodes[0].id.clone_from(&long);
    quoted.edges[1].from.node.clone_from(&long);
    quoted.edges[2].to.slot.clone_from(&long);
    let short = "x".repeat(20);
    let long_ids = [
        format!("the node id `{short}…` is longer than 64 characters"),
        format!("an edge names node `{short}…`, longer than a node id may be (64 characters)"),
        format!(
            "an edge names slot `{short}…` of node `n2`, longer than a slot name may be (64 characters)"
        ),
    ];
    let long_ids: Vec<&str> = long_ids.iter().map(String::as_str).collect();
    cases.push(("ids of 100,000 characters", quoted, &long_ids));
    for (name, spec, expected) in cases {
        let issues = refused(spec);
        assert!(
            issues == *expected,
            "{name}: {} issues: {:.300}",
            issues.len(),
            issues.join("; ")
        );
    }
}

#[test]
fn a_long_cycle_and_a_long_list_of_nodes_are_named_by_their_first_ids() {
    let issues = refused(ring(200));
    assert_eq!(
        issues,
        [
            "a cycle: `n0`, `n1`, `n2`, `n3`, `n4`, `n5`, `n6`, `n7`, `n8`, `n9` and 190 more depend on each other"
        ]
    );
    let mut stray = ring(200);
    stray.edges.truncate(199);
    stray.edges.push(
        serde_json::from_value(json!({"from": "n199.out", "to": "ghost.value"})).expect("an edge"),
    );
    let issues = refused(stray);
    assert_eq!(
        issues,
        [
            "the edge `n199.out` → `ghost.value` names no node `ghost`; the nodes are `n0`, `n1`, `n2`, `n3`, `n4`, `n5`, `n6`, `n7`, `n8`, `n9` and 190 more"
        ]
    );
}

//! `cargo xtask bench`'s code-node figures, natively (release), over the
//! real sandbox in process:
//!
//! - **a node's overhead beyond its body's run**: one body run as a code
//!   node (`kiln_nodes::run_node`: the node's checks, its values
//!   against its slots with their defaults filled, its program written, the
//!   run's ladder, the outputs read back against their types) beside the
//!   same program on the same values run through `run_program` alone (the
//!   ladder, no node) and straight in the sandbox (`kiln_sandbox::run`: no
//!   ladder, no node); medians of interleaved runs, for a trivial body and
//!   a reshape of 10, 100 and 1,000 records;
//! - **a graph of 20 nodes** (`kiln_nodes::run_graph`: chains, a
//!   fan-out of six into one node, fan-ins; 15 bodies that `await sleep` 5
//!   to 40 ms, 5 that only compute): its wall time beside the sum of its
//!   nodes' durations and its critical path, each node costing the duration
//!   it measured, at several `max_concurrent`. A node's duration is the
//!   sandbox's own run; making its context (natively, on the one thread
//!   every node shares) counts in the overhead, as does waiting for a place
//!   under a `max_concurrent` narrower than the graph.

#![expect(clippy::disallowed_methods, reason = "a benchmark measures real time")]

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Instant;

use kiln_nodes::{
    GraphRequest, GraphSetup, build_graph, check_node, default_node_limits, fill_inputs,
    node_program, node_run_request, run_graph, run_node,
};
use kiln_run::Environment;
use kiln_run::bench::{Now, Timed};
use kiln_run::dag::critical_path;
use kiln_run::run_program;
use kiln_types::RunOutcome;
use kiln_types::cancel::AbortSignal;
use kiln_types::node::{CodeNode, Ended};
use serde_json::{Map, Value, json};

#[path = "../../run/tests/common/mod.rs"]
mod common;
use common::InProcess;

/// Measured runs of each kind per body, after [`WARM_UP`] rounds not kept.
const ROUNDS: usize = 101;
const WARM_UP: usize = 3;
/// Runs of the graph per `max_concurrent`.
const GRAPH_RUNS: usize = 5;

/// The body a reshape case runs: paid orders over a threshold, grouped by
/// customer with their count and total, largest first.
const RESHAPE: &str = "const groups = new Map();
let total = 0, skipped = 0;
for (const order of orders) {
  if (order.status !== 'paid' || order.amount < min_amount) { skipped++; continue; }
  const group = groups.get(order.customer) ?? { customer: order.customer, orders: 0, total: 0 };
  group.orders += 1;
  group.total += order.amount;
  groups.set(order.customer, group);
  total += order.amount;
}
const by_customer = [...groups.values()].sort((a, b) => b.total - a.total);
return { by_customer, total, skipped };";

/// One body and the values it runs on.
struct Case {
    name: String,
    node: CodeNode,
    values: Map<String, Value>,
}

fn code_node(value: Value) -> CodeNode {
    serde_json::from_value(value).unwrap_or_else(|error| panic!("a bench node: {error}"))
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("bench values are an object, not {other}"),
    }
}

fn trivial() -> Case {
    Case {
        name: "trivial body (1 input, 1 output)".into(),
        node: code_node(json!({
            "title": "Add one",
            "code": "return { y: x + 1 };",
            "inputs": [{"name": "x", "type": "integer"}],
            "outputs": [{"name": "y", "type": "integer"}]
        })),
        values: object(json!({"x": 41})),
    }
}

/// The reshape of `n` orders from 12 customers, one in five refunded; the
/// threshold is left to its default.
fn reshape(n: usize) -> Case {
    let orders: Vec<Value> = (0..n)
        .map(|i| {
            json!({
                "id": i,
                "customer": format!("customer-{}", i % 12),
                "amount": ((i * 37) % 500) as f64 / 4.0 + 5.0,
                "status": if i % 5 == 0 { "refunded" } else { "paid" }
            })
        })
        .collect();
    Case {
        name: format!("reshape of {n} records (2 inputs, one by default; 3 outputs)"),
        node: code_node(json!({
            "title": "Paid orders by customer",
            "code": RESHAPE,
            "inputs": [
                {"name": "orders", "type": "list[{id: integer, customer: string, amount: number, status: string}]"},
                {"name": "min_amount", "type": "number", "default": 0}
            ],
            "outputs": [
                {"name": "by_customer", "type": "list[{customer: string, orders: integer, total: number}]"},
                {"name": "total", "type": "number"},
                {"name": "skipped", "type": "integer"}
            ]
        })),
        values: object(json!({"orders": orders})),
    }
}

fn since(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1e3
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

/// The time the runs that left `runner` since the last look spent inside it.
fn inside(runner: &Timed) -> f64 {
    runner.take().iter().map(|run| run.took).sum()
}

/// One case's medians, in milliseconds.
struct Overhead {
    node_ms: f64,
    program_ms: f64,
    sandbox_ms: f64,
    /// A node's run less the time its runner took, in the same run.
    node_outside_ms: f64,
    /// A program's run less the time its runner took, in the same run.
    program_outside_ms: f64,
}

/// Runs `case` as a node, as a program and straight in the sandbox, one of
/// each per round (each round starting with the next of the three), and
/// answers the medians.
async fn overhead(case: &Case, environment: &Environment, runner: &Timed) -> Overhead {
    let problems = check_node(&case.node);
    assert!(problems.is_empty(), "{}: {problems:?}", case.name);
    let filled = fill_inputs(&case.node, &case.values)
        .unwrap_or_else(|refused| panic!("{}: {refused:?}", case.name));
    let program = node_program(&case.node, &filled);
    let limits = default_node_limits();
    let mut samples: [Vec<f64>; 5] = Default::default();
    for round in 0..WARM_UP + ROUNDS {
        let mut took = [0.0; 5];
        for step in 0..3 {
            match (round + step) % 3 {
                0 => {
                    let request = node_run_request();
                    let started = Instant::now();
                    let ran = run_node(
                        &case.node,
                        &case.values,
                        request,
                        environment,
                        runner,
                        AbortSignal::new(),
                    )
                    .await
                    .unwrap_or_else(|refused| panic!("{}: {refused}", case.name));
                    took[0] = since(started);
                    took[3] = took[0] - inside(runner);
                    assert!(
                        ran.error.is_none() && ran.warnings.is_empty(),
                        "{}: {:?} {:?}",
                        case.name,
                        ran.error,
                        ran.warnings
                    );
                }
                1 => {
                    let mut request = node_run_request();
                    request.code.clone_from(&program);
                    let started = Instant::now();
                    let ran = run_program(request, environment, runner, AbortSignal::new())
                        .await
                        .unwrap_or_else(|refused| panic!("{}: {refused}", case.name));
                    took[1] = since(started);
                    took[4] = took[1] - inside(runner);
                    assert!(
                        matches!(ran.run.report.outcome, RunOutcome::Completed { .. }),
                        "{}: {:?}",
                        case.name,
                        ran.run.report.outcome
                    );
                }
                _ => {
                    let started = Instant::now();
                    let report = kiln_sandbox::run(&program, &limits).await;
                    took[2] = since(started);
                    assert!(
                        matches!(report.outcome, RunOutcome::Completed { .. }),
                        "{}: {:?}",
                        case.name,
                        report.outcome
                    );
                }
            }
        }
        if round >= WARM_UP {
            for (kept, sample) in samples.iter_mut().zip(took) {
                kept.push(sample);
            }
        }
    }
    let [
        node_ms,
        program_ms,
        sandbox_ms,
        node_outside_ms,
        program_outside_ms,
    ] = samples.map(median);
    Overhead {
        node_ms,
        program_ms,
        sandbox_ms,
        node_outside_ms,
        program_outside_ms,
    }
}

/// What a bench graph's node does: sleep so many milliseconds, or compute
/// a little (a sum over 200 numbers made in the body).
#[derive(Clone, Copy)]
enum Work {
    Sleep(u32),
    Compute,
}

/// The bench graph: each node's id, work and the nodes feeding it (an input
/// per feeding node, named after it, fed its `n`).
const GRAPH: [(&str, Work, &[&str]); 20] = [
    ("src", Work::Sleep(10), &[]),
    ("a1", Work::Sleep(20), &["src"]),
    ("a2", Work::Sleep(15), &["a1"]),
    ("a3", Work::Sleep(25), &["a2"]),
    ("a4", Work::Sleep(10), &["a3"]),
    ("d1", Work::Sleep(35), &["a2"]),
    ("f1", Work::Sleep(5), &["src"]),
    ("f2", Work::Sleep(10), &["src"]),
    ("f3", Work::Sleep(20), &["src"]),
    ("f4", Work::Sleep(30), &["src"]),
    ("f5", Work::Sleep(40), &["src"]),
    ("f6", Work::Compute, &["src"]),
    ("join", Work::Compute, &["f1", "f2", "f3", "f4", "f5", "f6"]),
    ("b1", Work::Compute, &["join"]),
    ("b2", Work::Sleep(30), &["b1"]),
    ("b3", Work::Sleep(5), &["b2"]),
    ("c1", Work::Compute, &[]),
    ("c2", Work::Sleep(15), &[]),
    ("c3", Work::Sleep(10), &["c1", "c2"]),
    ("sink", Work::Compute, &["a4", "d1", "b3", "c3"]),
];

/// The bench graph's request at `max_concurrent`, as an entrance sends it.
fn graph_request(max_concurrent: usize) -> GraphRequest {
    let mut nodes = Vec::new();
    let mut edges = Vec::new();
    for (id, work, feeding) in GRAPH {
        let sum = feeding
            .iter()
            .copied()
            .chain(["1"])
            .collect::<Vec<_>>()
            .join(" + ");
        let code = match work {
            Work::Sleep(ms) => format!("await sleep({ms});\nreturn {{ n: ({sum}) % 1000 }};"),
            Work::Compute => format!(
                "const xs = Array.from({{ length: 200 }}, (_, i) => (i * 7) % 13);\n\
                 return {{ n: (xs.reduce((s, x) => s + x, 0) + {sum}) % 1000 }};"
            ),
        };
        let inputs: Vec<Value> = feeding
            .iter()
            .map(|from| json!({"name": from, "type": "integer"}))
            .collect();
        nodes.push(json!({
            "id": id,
            "title": format!("Node {id}"),
            "code": code,
            "inputs": inputs,
            "outputs": [{"name": "n", "type": "integer"}]
        }));
        for from in feeding {
            edges.push(json!({"from": format!("{from}.n"), "to": format!("{id}.{from}")}));
        }
    }
    GraphRequest::from_value(json!({
        "nodes": nodes,
        "edges": edges,
        "max_concurrent": max_concurrent
    }))
    .unwrap_or_else(|refused| panic!("the bench graph's request: {refused}"))
}

/// One graph run's figures, in milliseconds.
struct GraphFigures {
    wall_ms: f64,
    sum_ms: f64,
    critical_path_ms: f64,
    /// Making the nodes' contexts (the sandboxes' `start_ms + context_ms`).
    contexts_ms: f64,
}

async fn graph_run(
    max_concurrent: usize,
    environment: &Environment,
    runner: &Timed,
) -> GraphFigures {
    let request = graph_request(max_concurrent);
    let graph =
        build_graph(request.spec).unwrap_or_else(|issues| panic!("the bench graph: {issues:?}"));
    let cancel = AbortSignal::new();
    let setup = GraphSetup {
        environment,
        runner,
        cancel: &cancel,
        on_progress: None,
    };
    let started = Instant::now();
    let ran = run_graph(
        &graph,
        &request.inputs,
        &request.run,
        setup,
        request.max_concurrent,
        |_| {},
    )
    .await
    .unwrap_or_else(|issues| panic!("the bench graph's inputs: {issues:?}"));
    let wall_ms = since(started);
    assert!(
        ran.status == Ended::Completed,
        "the bench graph {}: {:?}",
        ran.status,
        ran.nodes
            .iter()
            .filter_map(|node| node.run.error.as_ref().map(|error| (&node.id, error)))
            .collect::<Vec<_>>()
    );
    let durations: BTreeMap<&str, f64> = ran
        .nodes
        .iter()
        .map(|node| (node.id.as_str(), node.run.duration_ms))
        .collect();
    GraphFigures {
        wall_ms,
        sum_ms: durations.values().sum(),
        critical_path_ms: critical_path(&graph.schedule(), |id| {
            durations.get(id).copied().unwrap_or_default()
        }),
        contexts_ms: runner.take().iter().map(|run| run.start).sum(),
    }
}

fn main() {
    let epoch = Instant::now();
    let now: Now = Rc::new(move || epoch.elapsed().as_secs_f64() * 1e3);
    let runner = Timed::new(Rc::new(InProcess), now);
    let environment = kiln_run::bench::environment(json!([]), kiln_http::default_client());
    futures::executor::block_on(async {
        for case in [trivial(), reshape(10), reshape(100), reshape(1000)] {
            let figures = overhead(&case, &environment, &runner).await;
            println!(
                "  {}, medians of {ROUNDS} runs each:\n    \
                 as a node {:.3} ms, the same program straight in the sandbox {:.3} ms: \
                 {:+.0} µs ({:.2}×); through run_program alone {:.3} ms\n    \
                 beyond the runner, within the same run: the node {:.0} µs, run_program {:.0} µs \
                 (the node's own {:+.0} µs)",
                case.name,
                figures.node_ms,
                figures.sandbox_ms,
                1e3 * (figures.node_ms - figures.sandbox_ms),
                figures.node_ms / figures.sandbox_ms,
                figures.program_ms,
                1e3 * figures.node_outside_ms,
                1e3 * figures.program_outside_ms,
                1e3 * (figures.node_outside_ms - figures.program_outside_ms),
            );
        }
        for max_concurrent in [1, 2, 4, 8, 20] {
            let mut runs = Vec::new();
            for _ in 0..GRAPH_RUNS {
                runs.push(graph_run(max_concurrent, &environment, &runner).await);
            }
            runs.sort_by(|a, b| a.wall_ms.total_cmp(&b.wall_ms));
            let run = &runs[runs.len() / 2];
            let above = run.wall_ms - run.critical_path_ms;
            println!(
                "  graph of {} nodes, max_concurrent {max_concurrent:>2} (the run of median wall time of {GRAPH_RUNS}): \
                 wall {:.1} ms, the nodes' durations {:.1} ms in all, critical path {:.1} ms; \
                 {:.1} ms above it ({:.2} ms per node), making the {} contexts {:.1} ms in all",
                GRAPH.len(),
                run.wall_ms,
                run.sum_ms,
                run.critical_path_ms,
                above,
                above / GRAPH.len() as f64,
                GRAPH.len(),
                run.contexts_ms,
            );
        }
    });
}

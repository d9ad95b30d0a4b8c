//! The scheduler driven by the test: each node's work waits on a channel
//! the test completes, so what has started is seen between completions;
//! and the cycle words, from a handful of ids to chains far past any limit.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use futures::channel::oneshot;
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt as _;
use kiln_types::cancel::AbortSignal;
use serde_json::json;

use super::{Node, Settled, barrier_rounds, critical_path, cycles, named, run, topological};

fn node(id: &str, deps: &[&str]) -> Node {
    Node {
        id: id.into(),
        depends_on: deps.iter().map(|dep| (*dep).to_owned()).collect(),
    }
}

/// A scheduler run in a pool, its nodes' completions in the test's hands.
struct Harness {
    pool: LocalPool,
    started: Rc<RefCell<Vec<String>>>,
    settled: Rc<RefCell<Vec<(String, Settled)>>>,
    finish: Rc<RefCell<BTreeMap<String, oneshot::Sender<Settled>>>>,
    result: Rc<RefCell<Option<BTreeMap<String, Settled>>>>,
    cancel: AbortSignal,
}

impl Harness {
    fn new(nodes: Vec<Node>, max_concurrent: usize) -> Self {
        let pool = LocalPool::new();
        let started = Rc::new(RefCell::new(Vec::new()));
        let settled = Rc::new(RefCell::new(Vec::new()));
        let finish = Rc::new(RefCell::new(BTreeMap::new()));
        let result = Rc::new(RefCell::new(None));
        let cancel = AbortSignal::new();
        let (s, f, d, r, c) = (
            started.clone(),
            finish.clone(),
            settled.clone(),
            result.clone(),
            cancel.clone(),
        );
        pool.spawner()
            .spawn_local(async move {
                let done = run(
                    &nodes,
                    max_concurrent,
                    &c,
                    |id| {
                        s.borrow_mut().push(id.to_owned());
                        let (tx, rx) = oneshot::channel();
                        f.borrow_mut().insert(id.to_owned(), tx);
                        Box::pin(async move { rx.await.unwrap_or(Settled::Aborted) })
                    },
                    |id, how| d.borrow_mut().push((id.to_owned(), how.clone())),
                )
                .await;
                *r.borrow_mut() = Some(done);
            })
            .expect("spawned");
        let mut harness = Self {
            pool,
            started,
            settled,
            finish,
            result,
            cancel,
        };
        harness.pool.run_until_stalled();
        harness
    }

    fn complete(&mut self, id: &str, how: Settled) {
        let sender = self
            .finish
            .borrow_mut()
            .remove(id)
            .expect("the node is running");
        let _ = sender.send(how);
        self.pool.run_until_stalled();
    }

    fn started(&self) -> Vec<String> {
        self.started.borrow().clone()
    }
}

fn ok() -> Settled {
    Settled::Completed(json!(true))
}

#[test]
fn a_node_starts_on_its_last_dependency_not_when_its_round_ends() {
    // a is slow, b fast; c waits on b only: it must start when b ends,
    // while a still runs (barrier rounds would wait for a).
    let mut harness = Harness::new(
        vec![
            node("a", &[]),
            node("b", &[]),
            node("c", &["b"]),
            node("d", &["a", "c"]),
        ],
        4,
    );
    assert_eq!(harness.started(), ["a", "b"]);
    harness.complete("b", ok());
    assert_eq!(harness.started(), ["a", "b", "c"], "c starts while a runs");
    harness.complete("c", ok());
    assert_eq!(
        harness.started(),
        ["a", "b", "c"],
        "d waits for a, its last dependency"
    );
    harness.complete("a", ok());
    assert_eq!(harness.started(), ["a", "b", "c", "d"]);
    harness.complete("d", ok());
    let result = harness.result.borrow().clone().expect("the run ended");
    assert!(result.values().all(Settled::is_completed));
}

#[test]
fn a_failure_settles_every_transitive_dependent_naming_the_one_above() {
    let mut harness = Harness::new(
        vec![
            node("fetch", &[]),
            node("parse", &["fetch"]),
            node("report", &["parse"]),
            node("side", &[]),
        ],
        4,
    );
    harness.complete("fetch", Settled::Failed("the site was down".into()));
    harness.complete("side", ok());
    let result = harness.result.borrow().clone().expect("the run ended");
    assert_eq!(result["fetch"], Settled::Failed("the site was down".into()));
    assert_eq!(
        result["parse"],
        Settled::Failed("dependency `fetch` failed".into())
    );
    assert_eq!(
        result["report"],
        Settled::Failed("dependency `parse` failed".into())
    );
    assert!(
        result["side"].is_completed(),
        "an independent node is not touched"
    );
    assert_eq!(harness.started(), ["fetch", "side"], "no dependent started");
    let settled = harness.settled.borrow();
    assert_eq!(settled.len(), 4, "each node settled once: {settled:?}");
}

#[test]
fn an_abort_settles_each_unfinished_node_once_as_aborted() {
    let mut harness = Harness::new(
        vec![
            node("a", &[]),
            node("b", &["a"]),
            node("c", &[]),
            node("d", &["c"]),
        ],
        4,
    );
    harness.complete("c", ok());
    harness.cancel.abort();
    harness.pool.run_until_stalled();
    let result = harness
        .result
        .borrow()
        .clone()
        .expect("the run ended at the abort");
    assert!(result["c"].is_completed());
    for id in ["a", "b", "d"] {
        assert_eq!(result[id], Settled::Aborted, "{id}");
    }
    let settled = harness.settled.borrow();
    let mut ids: Vec<&str> = settled.iter().map(|(id, _)| id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["a", "b", "c", "d"], "each settled once");
}

#[test]
fn at_most_the_bound_run_at_once() {
    let nodes: Vec<Node> = (0..6).map(|n| node(&format!("n{n}"), &[])).collect();
    let mut harness = Harness::new(nodes, 2);
    assert_eq!(harness.started(), ["n0", "n1"]);
    harness.complete("n1", ok());
    assert_eq!(harness.started(), ["n0", "n1", "n2"]);
    for id in ["n0", "n2"] {
        harness.complete(id, ok());
    }
    assert_eq!(harness.started().len(), 5);
}

#[test]
fn a_node_nothing_can_run_fails_as_unsatisfiable_rather_than_hanging() {
    let mut harness = Harness::new(
        vec![
            node("a", &[]),
            node("b", &["ghost"]),
            node("x", &["y"]),
            node("y", &["x"]),
        ],
        4,
    );
    harness.complete("a", ok());
    let result = harness.result.borrow().clone().expect("the run ended");
    assert_eq!(
        result["b"],
        Settled::Failed("unsatisfiable dependency: `ghost` does not exist".into())
    );
    assert!(matches!(&result["x"], Settled::Failed(why) if why.contains("unsatisfiable")));
}

#[test]
fn the_critical_path_and_barrier_rounds_of_a_plan() {
    // a (5) → c (1); b (1) → d (5). Event-driven: 6. Rounds: {a,b} 5, {c,d} 5 = 10.
    let nodes = vec![
        node("a", &[]),
        node("b", &[]),
        node("c", &["a"]),
        node("d", &["b"]),
    ];
    let cost = |id: &str| if id == "a" || id == "d" { 5.0 } else { 1.0 };
    assert!((critical_path(&nodes, cost) - 6.0).abs() < 1e-9);
    assert!((barrier_rounds(&nodes, 4, cost) - 10.0).abs() < 1e-9);
}

/// `n0` … `n{len-1}`.
fn chain(len: usize) -> Vec<String> {
    (0..len).map(|at| format!("n{at}")).collect()
}

/// Each id depending on the one before; `closed`: the first depends on the
/// last, making the chain one cycle.
fn chain_deps(ids: &[String], closed: bool) -> BTreeMap<&str, Vec<&str>> {
    let mut deps: BTreeMap<&str, Vec<&str>> = ids
        .windows(2)
        .map(|pair| (pair[1].as_str(), vec![pair[0].as_str()]))
        .collect();
    if let (true, Some(first), Some(last)) = (closed, ids.first(), ids.last()) {
        deps.insert(first.as_str(), vec![last.as_str()]);
    }
    deps
}

#[test]
fn cycles_are_named_in_input_order_each_by_its_members() {
    let ids: Vec<String> = ["free", "x", "y", "z", "after", "own", "p", "q"]
        .map(str::to_owned)
        .to_vec();
    let deps: BTreeMap<&str, Vec<&str>> = [
        ("x", vec!["z", "free"]),
        ("y", vec!["x"]),
        ("z", vec!["y"]),
        ("after", vec!["z"]),
        ("own", vec!["own"]),
        ("p", vec!["q", "ghost"]),
        ("q", vec!["p"]),
    ]
    .into_iter()
    .collect();
    let (order, residue) = topological(&ids, &deps);
    assert_eq!(order, [0], "only `free` can be ordered");
    assert_eq!(
        cycles(&ids, &deps, &residue),
        [vec!["x", "y", "z"], vec!["own"], vec!["p", "q"]],
        "`after` waits behind a cycle but is in none"
    );
}

#[test]
fn a_hundred_thousand_long_chain_is_checked_in_one_linear_pass() {
    // Reachability per node would hold 10^10 pairs here; the one pass
    // holds a few words per node, and walks the chain without recursing.
    let ids = chain(100_000);
    let deps = chain_deps(&ids, true);
    let (order, residue) = topological(&ids, &deps);
    assert!(order.is_empty());
    let found = cycles(&ids, &deps, &residue);
    assert_eq!(found.len(), 1, "one cycle");
    assert_eq!(found[0].len(), 100_000, "of every node");
    assert_eq!(found[0][..2], ["n0", "n1"], "in input order");
    // An open chain asked about every node: no cycle in it.
    let open = chain_deps(&ids, false);
    let every: Vec<usize> = (0..ids.len()).collect();
    assert!(cycles(&ids, &open, &every).is_empty());
}

#[test]
fn a_cycle_is_named_by_its_first_ids_and_how_many_more() {
    assert_eq!(named(&["a".to_owned()]), "`a` depends on itself");
    assert_eq!(
        named(&["a".to_owned(), "b".to_owned(), "c".to_owned()]),
        "`a`, `b` and `c` depend on each other"
    );
    let long = "x".repeat(100_000);
    assert_eq!(
        named(&[long]),
        format!("`{}…` depends on itself", "x".repeat(64)),
        "an id is cut"
    );
    let ids = chain(10_000);
    let words = named(&ids);
    assert_eq!(
        words.matches('`').count(),
        2 * 10,
        "at most the cap of ids: {words:.300}"
    );
    assert!(
        words.starts_with("`n0`, `n1`, ")
            && words.ends_with("`n9` and 9990 more depend on each other"),
        "{words:.300}"
    );
}

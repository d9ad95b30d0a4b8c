//! The DAG scheduler (reference/000, "How It Works"): a node starts the
//! moment its last dependency settles, never in barrier rounds, up to a
//! bound of nodes at once; a failed node settles each transitive dependent
//! as failed, naming the dependency directly above it; a node nothing could
//! ever run settles failed ("unsatisfiable dependency") instead of hanging;
//! an abort settles every unfinished node once, as aborted. Used for a
//! plan's tasks, a task's steps and a graph's nodes; [`topological`],
//! [`cycles`] and [`named`] are the order and the cycle words that plans and
//! graphs check before anything runs, each linear in the nodes and their
//! dependencies, and [`listed`] keeps any list of ids in a message short.

use std::collections::{BTreeMap, BTreeSet};

use futures::StreamExt as _;
use futures::future::{self, Either, LocalBoxFuture};
use futures::stream::FuturesUnordered;
use kiln_types::cancel::AbortSignal;
use serde_json::Value;

/// The most nodes of one merge (a plan's tasks, a task's steps) that run at
/// once when the caller names no bound (the reference's
/// `DEFAULT_MAX_CONCURRENT_AGENTS`). The run-wide bound is the budget's
/// permit pool.
pub const DEFAULT_MAX_CONCURRENT: usize = 4;

/// One node: its id and the ids it waits for.
#[derive(Debug, Clone)]
pub struct Node {
    pub id: String,
    pub depends_on: Vec<String>,
}

/// How a node settled.
#[derive(Debug, Clone, PartialEq)]
pub enum Settled {
    Completed(Value),
    /// Why, in words: the node's own failure, or the dependency above it.
    Failed(String),
    Aborted,
}

impl Settled {
    #[must_use]
    pub fn is_completed(&self) -> bool {
        matches!(self, Self::Completed(_))
    }
}

/// The sentence a dependent of a failed `dep` settles with.
#[must_use]
pub fn dependency_failed(dep: &str) -> String {
    format!("dependency `{dep}` failed")
}

/// Runs `nodes`: `start(id)` for each whose dependencies all completed, at
/// most `max_concurrent` at once (in the nodes' order when more are ready);
/// `settled(id, how)` once per node as it settles, before any dependent
/// starts. Answers how each settled. When `cancel` is thrown the running
/// nodes are dropped (they share the signal, so what they run stops too)
/// and every unsettled node settles [`Settled::Aborted`].
pub async fn run<'a>(
    nodes: &[Node],
    max_concurrent: usize,
    cancel: &AbortSignal,
    mut start: impl FnMut(&str) -> LocalBoxFuture<'a, Settled>,
    mut settled: impl FnMut(&str, &Settled),
) -> BTreeMap<String, Settled> {
    let max_concurrent = max_concurrent.max(1);
    let index: BTreeMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(at, node)| (node.id.as_str(), at))
        .collect();
    // Each node's dependents, and how many of its dependencies have not
    // completed: a node is ready when that reaches zero. A dependency that
    // is no node never completes.
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    let mut waiting: Vec<usize> = vec![0; nodes.len()];
    for (at, node) in nodes.iter().enumerate() {
        let unique: BTreeSet<&str> = node.depends_on.iter().map(String::as_str).collect();
        for dep in unique {
            waiting[at] += 1;
            if let Some(&from) = index.get(dep) {
                dependents[from].push(at);
            }
        }
    }
    // Ready nodes by their place in `nodes`, so ties start in order.
    let mut ready: BTreeSet<usize> = (0..nodes.len()).filter(|at| waiting[*at] == 0).collect();
    let mut done: BTreeMap<String, Settled> = BTreeMap::new();
    let mut running: FuturesUnordered<LocalBoxFuture<'a, (usize, Settled)>> =
        FuturesUnordered::new();
    let settle = |at: usize,
                  how: Settled,
                  done: &mut BTreeMap<String, Settled>,
                  ready: &mut BTreeSet<usize>,
                  waiting: &mut Vec<usize>,
                  settled: &mut dyn FnMut(&str, &Settled)| {
        // A failure settles each unsettled dependent, naming the node
        // directly above it, before anything else can start.
        let mut pending = vec![(at, how)];
        while let Some((at, how)) = pending.pop() {
            let id = &nodes[at].id;
            if done.contains_key(id) {
                continue;
            }
            ready.remove(&at);
            settled(id, &how);
            let completed = how.is_completed();
            let failed = matches!(how, Settled::Failed(_));
            done.insert(id.clone(), how);
            for &next in &dependents[at] {
                if completed {
                    waiting[next] -= 1;
                    if waiting[next] == 0 && !done.contains_key(&nodes[next].id) {
                        ready.insert(next);
                    }
                } else if !done.contains_key(&nodes[next].id) {
                    // A dependent of an aborted node is aborted with it.
                    let then = if failed {
                        Settled::Failed(dependency_failed(id))
                    } else {
                        Settled::Aborted
                    };
                    pending.push((next, then));
                }
            }
        }
    };
    loop {
        if cancel.is_aborted() {
            drop(running);
            for at in 0..nodes.len() {
                settle(
                    at,
                    Settled::Aborted,
                    &mut done,
                    &mut ready,
                    &mut waiting,
                    &mut settled,
                );
            }
            return done;
        }
        // Start what is ready, in the nodes' order, up to the bound.
        while running.len() < max_concurrent {
            let Some(at) = ready.pop_first() else { break };
            let work = start(&nodes[at].id);
            running.push(Box::pin(async move { (at, work.await) }));
        }
        if running.is_empty() {
            // Nothing runs and nothing can start: what is left waits on a
            // node that does not exist or on a cycle.
            for (at, node) in nodes.iter().enumerate() {
                if done.contains_key(&node.id) {
                    continue;
                }
                let missing = node
                    .depends_on
                    .iter()
                    .find(|dep| !index.contains_key(dep.as_str()));
                let why = match missing {
                    Some(dep) => format!("unsatisfiable dependency: `{dep}` does not exist"),
                    None => "unsatisfiable dependency: it waits on a cycle".to_owned(),
                };
                settle(
                    at,
                    Settled::Failed(why),
                    &mut done,
                    &mut ready,
                    &mut waiting,
                    &mut settled,
                );
            }
            return done;
        }
        let next = future::select(running.next(), cancel.aborted()).await;
        if let Either::Left((Some((at, how)), _)) = next {
            settle(at, how, &mut done, &mut ready, &mut waiting, &mut settled);
        }
    }
}

/// The length of the longest dependency chain, with each node costing
/// `cost(id)`: the least time a plan can take however wide it runs.
#[must_use]
pub fn critical_path(nodes: &[Node], cost: impl Fn(&str) -> f64) -> f64 {
    let mut finish: BTreeMap<&str, f64> = BTreeMap::new();
    // Nodes in dependency order (the builder's output is), else repeated
    // passes settle them.
    for _ in 0..nodes.len() {
        for node in nodes {
            let start = node
                .depends_on
                .iter()
                .map(|dep| finish.get(dep.as_str()).copied().unwrap_or(0.0))
                .fold(0.0, f64::max);
            finish.insert(&node.id, start + cost(&node.id));
        }
    }
    finish.values().copied().fold(0.0, f64::max)
}

/// What barrier rounds take for the same nodes: every round starts all
/// that is ready and waits for the slowest (the scheduling the reference
/// retired), with the same bound per round.
#[must_use]
pub fn barrier_rounds(nodes: &[Node], max_concurrent: usize, cost: impl Fn(&str) -> f64) -> f64 {
    let mut done: BTreeSet<&str> = BTreeSet::new();
    let mut total = 0.0;
    while done.len() < nodes.len() {
        let ready: Vec<&Node> = nodes
            .iter()
            .filter(|node| {
                !done.contains(node.id.as_str())
                    && node
                        .depends_on
                        .iter()
                        .all(|dep| done.contains(dep.as_str()))
            })
            .take(max_concurrent.max(1))
            .collect();
        if ready.is_empty() {
            break;
        }
        total += ready.iter().map(|node| cost(&node.id)).fold(0.0, f64::max);
        done.extend(ready.iter().map(|node| node.id.as_str()));
    }
    total
}

/// Orders `ids` so each comes after what it depends on (the input order
/// kept where the dependencies allow: Kahn's algorithm over a queue in
/// input order). Answers the order and the residue: the ids in or behind a
/// cycle.
pub fn topological(ids: &[String], deps: &BTreeMap<&str, Vec<&str>>) -> (Vec<usize>, Vec<usize>) {
    let index: BTreeMap<&str, usize> = ids
        .iter()
        .enumerate()
        .map(|(at, id)| (id.as_str(), at))
        .collect();
    let mut waiting: Vec<usize> = ids
        .iter()
        .map(|id| {
            deps.get(id.as_str()).map_or(0, |deps| {
                deps.iter()
                    .filter(|dep| index.contains_key(**dep))
                    .collect::<BTreeSet<_>>()
                    .len()
            })
        })
        .collect();
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); ids.len()];
    for (at, id) in ids.iter().enumerate() {
        let unique: BTreeSet<&str> = deps
            .get(id.as_str())
            .map(|deps| deps.iter().copied().collect())
            .unwrap_or_default();
        for dep in unique {
            if let Some(&from) = index.get(dep) {
                dependents[from].push(at);
            }
        }
    }
    let mut ready: BTreeSet<usize> = (0..ids.len()).filter(|&at| waiting[at] == 0).collect();
    let mut order = Vec::with_capacity(ids.len());
    while let Some(at) = ready.pop_first() {
        order.push(at);
        for &next in &dependents[at] {
            waiting[next] -= 1;
            if waiting[next] == 0 {
                ready.insert(next);
            }
        }
    }
    let residue = (0..ids.len()).filter(|at| waiting[*at] > 0).collect();
    (order, residue)
}

/// The cycles among `residue` (Kahn's leftovers), each as the ids in it in
/// input order, ordered by their first id: the strongly connected parts of
/// more than one id, and an id that depends on itself. One pass of
/// Tarjan's algorithm over the residue and the dependencies between its
/// ids (time and memory linear in them), walked with an explicit stack so
/// a chain of any length cannot overflow the thread's.
#[must_use]
pub fn cycles(
    ids: &[String],
    deps: &BTreeMap<&str, Vec<&str>>,
    residue: &[usize],
) -> Vec<Vec<String>> {
    // The residue's ids, each once, in input order; a vertex is its place
    // here.
    let mut place: BTreeMap<&str, usize> = BTreeMap::new();
    let mut vertices: Vec<&str> = Vec::new();
    let mut in_order: Vec<usize> = residue.to_vec();
    in_order.sort_unstable();
    for at in in_order {
        let Some(id) = ids.get(at) else { continue };
        if !place.contains_key(id.as_str()) {
            place.insert(id, vertices.len());
            vertices.push(id);
        }
    }
    let edges: Vec<Vec<usize>> = vertices
        .iter()
        .map(|id| {
            deps.get(id)
                .into_iter()
                .flatten()
                .filter_map(|dep| place.get(dep).copied())
                .collect()
        })
        .collect();
    let part = strong_parts(&edges);
    // A part is a cycle when it has more than one vertex, or its one
    // vertex depends on itself.
    let mut size = vec![0_usize; vertices.len()];
    for &of in &part {
        size[of] += 1;
    }
    let is_cycle = |vertex: usize| size[part[vertex]] > 1 || edges[vertex].contains(&vertex);
    // Parts by their first vertex, members in order: vertices are in input
    // order, so walking them in order does both.
    let mut slot: Vec<Option<usize>> = vec![None; vertices.len()];
    let mut found: Vec<Vec<String>> = Vec::new();
    for (vertex, id) in vertices.iter().enumerate() {
        if !is_cycle(vertex) {
            continue;
        }
        let at = *slot[part[vertex]].get_or_insert_with(|| {
            found.push(Vec::new());
            found.len() - 1
        });
        found[at].push((*id).to_owned());
    }
    found
}

/// The strongly connected part of each vertex of the graph `edges` (vertex
/// `v` has an edge to each of `edges[v]`), numbered from 0: Tarjan's
/// algorithm with the recursion unrolled into `calls`.
fn strong_parts(edges: &[Vec<usize>]) -> Vec<usize> {
    const UNSEEN: usize = usize::MAX;
    let count = edges.len();
    let mut index = vec![UNSEEN; count];
    let mut low = vec![0_usize; count];
    let mut on_stack = vec![false; count];
    let mut stack: Vec<usize> = Vec::new();
    let mut part = vec![UNSEEN; count];
    let mut parts = 0;
    let mut next_index = 0;
    // Each vertex being visited, and how many of its edges it has followed.
    let mut calls: Vec<(usize, usize)> = Vec::new();
    for root in 0..count {
        if index[root] != UNSEEN {
            continue;
        }
        index[root] = next_index;
        low[root] = next_index;
        next_index += 1;
        stack.push(root);
        on_stack[root] = true;
        calls.push((root, 0));
        while let Some((vertex, followed)) = calls.last_mut() {
            let vertex = *vertex;
            if let Some(&next) = edges[vertex].get(*followed) {
                *followed += 1;
                if index[next] == UNSEEN {
                    index[next] = next_index;
                    low[next] = next_index;
                    next_index += 1;
                    stack.push(next);
                    on_stack[next] = true;
                    calls.push((next, 0));
                } else if on_stack[next] {
                    low[vertex] = low[vertex].min(index[next]);
                }
                continue;
            }
            calls.pop();
            if let Some(&(caller, _)) = calls.last() {
                low[caller] = low[caller].min(low[vertex]);
            }
            if low[vertex] == index[vertex] {
                while let Some(member) = stack.pop() {
                    on_stack[member] = false;
                    part[member] = parts;
                    if member == vertex {
                        break;
                    }
                }
                parts += 1;
            }
        }
    }
    part
}

/// The most ids one message lists; the rest are counted ("… and 90
/// more"), so a message stays short however large what it is about.
pub const MAX_LISTED: usize = 10;
/// The most characters of one id a list quotes; a longer one is cut and
/// ends in `…`.
pub const MAX_LISTED_CHARS: usize = 64;

/// `ids` quoted and joined by commas, at most [`MAX_LISTED`] of them (each
/// cut to [`MAX_LISTED_CHARS`]), the rest counted: "`a`, `b`, `c`" or
/// "`n0`, …, `n9` and 90 more".
#[must_use]
pub fn listed<'a>(ids: impl IntoIterator<Item = &'a str>) -> String {
    let quoted = |id: &str| {
        if id.chars().count() > MAX_LISTED_CHARS {
            let cut: String = id.chars().take(MAX_LISTED_CHARS).collect();
            format!("`{cut}…`")
        } else {
            format!("`{id}`")
        }
    };
    let mut ids = ids.into_iter();
    let shown: Vec<String> = ids.by_ref().take(MAX_LISTED).map(quoted).collect();
    let more = ids.count();
    let shown = shown.join(", ");
    if more == 0 {
        shown
    } else {
        format!("{shown} and {more} more")
    }
}

/// The words for one cycle, as a plan issue names it: at most
/// [`MAX_LISTED`] of its ids, the rest counted.
#[must_use]
pub fn named(ids: &[String]) -> String {
    match ids {
        [] => String::new(),
        [one] => format!("{} depends on itself", listed([one.as_str()])),
        [init @ .., last] if ids.len() <= MAX_LISTED => format!(
            "{} and {} depend on each other",
            listed(init.iter().map(String::as_str)),
            listed([last.as_str()])
        ),
        _ => format!(
            "{} depend on each other",
            listed(ids.iter().map(String::as_str))
        ),
    }
}

#[cfg(test)]
mod tests;

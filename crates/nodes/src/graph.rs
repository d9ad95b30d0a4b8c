//! Graphs of code nodes (reference/004): nodes joined by edges from an
//! output slot to an input slot. [`build`] checks everything a graph says
//! before anything runs — its size first, by counting alone (past a limit
//! nothing else is checked), then every node ([`crate::node::problems`]),
//! every edge's ends, whether its types fit, one edge per input, cycles by
//! name — and [`run_graph`] runs the nodes on the plans' DAG scheduler:
//! each node starts the moment the nodes feeding it complete, independent
//! nodes run at once, and a failed node fails its dependents naming it.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use futures::future::FutureExt as _;
use kiln_types::Progress;
use kiln_types::cancel::AbortSignal;
use kiln_types::node::{
    CodeNode, Edge, Ended, GraphNode, GraphSpec, NodeReport, NodeRun, SlotRef, connection_refusal,
};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::node::run_node;
use kiln_run::RunRequest;
use kiln_run::dag::{self, Settled};
use kiln_run::dag::{cycles, named, topological};
use kiln_run::{Environment, SandboxRunner};

/// The most nodes one graph may have.
pub(crate) const MAX_NODES: usize = 200;
/// The most edges one graph may have: ten per node of the largest graph
/// (an input takes one edge, so more than the inputs are refused anyway).
pub(crate) const MAX_EDGES: usize = 2_000;
/// The longest node id, in characters.
pub(crate) const MAX_ID_CHARS: usize = 64;
/// The longest slot name an edge may name: a node's own limit.
const MAX_SLOT_CHARS: usize = crate::node::MAX_NAME_CHARS;

/// A graph that passed [`build`]: its nodes in dependency order.
#[derive(Debug, Clone)]
pub struct Graph {
    nodes: Vec<GraphNode>,
    edges: Vec<Edge>,
}

impl Graph {
    /// The nodes, each after every node that feeds it.
    #[must_use]
    pub fn nodes(&self) -> &[GraphNode] {
        &self.nodes
    }

    #[must_use]
    pub fn edges(&self) -> &[Edge] {
        &self.edges
    }

    /// The node `id`.
    #[must_use]
    pub fn node(&self, id: &str) -> Option<&CodeNode> {
        self.nodes
            .iter()
            .find(|node| node.id == id)
            .map(|node| &node.node)
    }

    /// The scheduler's view: each node and the nodes feeding it.
    #[must_use]
    pub fn schedule(&self) -> Vec<dag::Node> {
        self.nodes
            .iter()
            .map(|node| dag::Node {
                id: node.id.clone(),
                depends_on: self.feeding(&node.id),
            })
            .collect()
    }

    fn feeding(&self, id: &str) -> Vec<String> {
        let mut feeding: Vec<String> = Vec::new();
        for edge in &self.edges {
            if edge.to.node == id && !feeding.contains(&edge.from.node) {
                feeding.push(edge.from.node.clone());
            }
        }
        feeding
    }
}

/// Checks `spec` and orders its nodes.
///
/// # Errors
///
/// More nodes or edges than the limits allow, by the counts alone; else
/// everything wrong with it, each a sentence naming the node, the edge or
/// the slot: a node's own problems, an id repeated or not usable, an edge
/// whose end names no node or no slot (with the slots there are), a
/// connection whose types do not fit, an input fed twice, a cycle.
pub fn build(spec: GraphSpec) -> Result<Graph, Vec<String>> {
    let mut issues = oversized(&spec);
    if !issues.is_empty() {
        return Err(issues);
    }
    if spec.nodes.is_empty() {
        issues.push("the graph has no nodes".to_owned());
    }
    let mut seen = BTreeSet::new();
    for node in &spec.nodes {
        if let Some(problem) = id_problem(&node.id) {
            issues.push(problem);
        } else if !seen.insert(node.id.as_str()) {
            issues.push(format!(
                "two nodes have the id `{}`; ids are unique",
                node.id
            ));
        }
        for problem in crate::node::problems(&node.node) {
            issues.push(format!("node `{}`: {problem}", node.id));
        }
    }
    let by_id: BTreeMap<&str, &CodeNode> = spec
        .nodes
        .iter()
        .map(|node| (node.id.as_str(), &node.node))
        .collect();
    let mut fed: BTreeMap<&SlotRef, &SlotRef> = BTreeMap::new();
    for edge in &spec.edges {
        let from = by_id.get(edge.from.node.as_str()).map(|node| {
            node.outputs
                .iter()
                .find(|slot| slot.name == edge.from.slot)
                .map(|slot| &slot.ty)
                .ok_or_else(|| {
                    slot_missing(
                        &edge.from,
                        "output",
                        node.outputs.iter().map(|slot| slot.name.as_str()),
                    )
                })
        });
        let to = by_id.get(edge.to.node.as_str()).map(|node| {
            node.inputs
                .iter()
                .find(|slot| slot.name == edge.to.slot)
                .map(|slot| &slot.ty)
                .ok_or_else(|| {
                    slot_missing(
                        &edge.to,
                        "input",
                        node.inputs.iter().map(|slot| slot.name.as_str()),
                    )
                })
        });
        let (from, to) = match (from, to) {
            (Some(Ok(from)), Some(Ok(to))) => (from, to),
            (from, to) => {
                for (end, found) in [(&edge.from, from), (&edge.to, to)] {
                    match found {
                        None => issues.push(format!(
                            "the edge `{}` → `{}` names no node `{}`; the nodes are {}",
                            edge.from,
                            edge.to,
                            end.node,
                            dag::listed(spec.nodes.iter().map(|node| node.id.as_str()))
                        )),
                        Some(Err(missing)) => issues.push(missing),
                        Some(Ok(_)) => {}
                    }
                }
                continue;
            }
        };
        if let Some(refusal) = connection_refusal(&edge.from, from, &edge.to, to) {
            issues.push(refusal);
        }
        if let Some(first) = fed.insert(&edge.to, &edge.from) {
            issues.push(format!(
                "`{}` is fed by `{first}` and by `{}`; an input takes one edge",
                edge.to, edge.from
            ));
        }
    }
    // Cycles, by the nodes in them.
    let ids: Vec<String> = spec.nodes.iter().map(|node| node.id.clone()).collect();
    let mut deps: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for edge in &spec.edges {
        deps.entry(edge.to.node.as_str())
            .or_default()
            .push(edge.from.node.as_str());
    }
    let (order, residue) = topological(&ids, &deps);
    for cycle in cycles(&ids, &deps, &residue) {
        issues.push(format!("a cycle: {}", named(&cycle)));
    }
    if !issues.is_empty() {
        return Err(issues);
    }
    let mut nodes: Vec<Option<GraphNode>> = spec.nodes.into_iter().map(Some).collect();
    Ok(Graph {
        nodes: order
            .into_iter()
            .filter_map(|at| nodes[at].take())
            .collect(),
        edges: spec.edges,
    })
}

/// What refuses `spec` before anything else is checked, so no check,
/// message or cycle search sees more than the limits allow: more nodes or
/// edges than they allow (the counts alone), else a node id or an edge's
/// end longer than an id or a slot name may be (a later message quoting it
/// for every edge would repeat it).
fn oversized(spec: &GraphSpec) -> Vec<String> {
    let mut issues = Vec::new();
    if spec.nodes.len() > MAX_NODES {
        issues.push(format!(
            "the graph has {} nodes; at most {MAX_NODES}",
            spec.nodes.len()
        ));
    }
    if spec.edges.len() > MAX_EDGES {
        issues.push(format!(
            "the graph has {} edges; at most {MAX_EDGES}",
            spec.edges.len()
        ));
    }
    if !issues.is_empty() {
        return issues;
    }
    let long = |text: &str, most: usize| text.chars().count() > most;
    let start = |text: &str| text.chars().take(20).collect::<String>();
    for node in spec
        .nodes
        .iter()
        .filter(|node| long(&node.id, MAX_ID_CHARS))
    {
        issues.push(format!(
            "the node id `{}…` is longer than {MAX_ID_CHARS} characters",
            start(&node.id)
        ));
    }
    for end in spec.edges.iter().flat_map(|edge| [&edge.from, &edge.to]) {
        if long(&end.node, MAX_ID_CHARS) {
            issues.push(format!(
                "an edge names node `{}…`, longer than a node id may be ({MAX_ID_CHARS} characters)",
                start(&end.node)
            ));
        } else if long(&end.slot, MAX_SLOT_CHARS) {
            issues.push(format!(
                "an edge names slot `{}…` of node `{}`, longer than a slot name may be ({MAX_SLOT_CHARS} characters)",
                start(&end.slot),
                end.node
            ));
        }
    }
    issues
}

/// What is wrong with a node id but its length (`oversized` checked that).
fn id_problem(id: &str) -> Option<String> {
    if id.is_empty() {
        return Some("a node has no id".to_owned());
    }
    if !id
        .chars()
        .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
    {
        return Some(format!(
            "the node id `{id}` may hold letters, digits, `_` and `-` only (an edge writes `id.slot`)"
        ));
    }
    None
}

fn slot_missing<'a>(
    end: &SlotRef,
    direction: &str,
    names: impl Iterator<Item = &'a str>,
) -> String {
    let names: Vec<&str> = names.collect();
    if names.is_empty() {
        format!(
            "node `{}` has no {direction} `{}`; it has no {direction}s",
            end.node, end.slot
        )
    } else {
        format!(
            "node `{}` has no {direction} `{}`; its {direction}s are {}",
            end.node,
            end.slot,
            dag::listed(names)
        )
    }
}

/// What a graph run gave, node by node in dependency order.
#[derive(Debug, Clone, Serialize)]
pub struct GraphRun {
    /// `completed` when every node completed, else `failed`, or `aborted`
    /// when it was stopped.
    pub status: Ended,
    pub nodes: Vec<NodeReport>,
}

impl GraphRun {
    #[must_use]
    pub fn node(&self, id: &str) -> Option<&NodeReport> {
        self.nodes.iter().find(|node| node.id == id)
    }
}

/// Refuses inputs for a graph: `{node: {slot: value}}` naming nodes that do
/// not exist, or an input an edge already feeds.
///
/// # Errors
///
/// Each such name, as a sentence.
pub(crate) fn check_inputs(graph: &Graph, inputs: &Map<String, Value>) -> Result<(), Vec<String>> {
    let mut issues = Vec::new();
    for (id, values) in inputs {
        if graph.node(id).is_none() {
            issues.push(format!(
                "inputs name no node `{id}`; the nodes are {}",
                dag::listed(graph.nodes.iter().map(|node| node.id.as_str()))
            ));
            continue;
        }
        let Value::Object(values) = values else {
            issues.push(format!(
                "the inputs of `{id}` are not an object of values by slot"
            ));
            continue;
        };
        for slot in values.keys() {
            if let Some(edge) = graph
                .edges
                .iter()
                .find(|edge| edge.to.node == *id && edge.to.slot == *slot)
            {
                issues.push(format!(
                    "`{id}.{slot}` is fed by `{}`; give it no value of its own",
                    edge.from
                ));
            }
        }
    }
    if issues.is_empty() {
        Ok(())
    } else {
        Err(issues)
    }
}

/// Told, with the node's id, each progress report a node's body makes.
pub type NodeProgress = Rc<dyn Fn(&str, &Progress)>;

/// What an entrance runs a graph with.
#[derive(Clone)]
pub struct Setup<'a> {
    pub environment: &'a Environment,
    pub runner: &'a dyn SandboxRunner,
    /// Thrown: the running nodes stop and the rest settle `aborted`.
    pub cancel: &'a AbortSignal,
    /// Where the nodes' progress reports go (the environment's own
    /// observer, which cannot tell the nodes apart, is not told).
    pub on_progress: Option<NodeProgress>,
}

/// Runs `graph` on `inputs` (`{node: {slot: value}}`), each node as
/// [`run_node`] with `request`'s tools, permission and limits, at most
/// `max_concurrent` at once; `on_settled` sees each node's report as it
/// settles.
///
/// # Errors
///
/// Inputs that name a node that does not exist, or an input an edge already
/// feeds (`check_inputs`), each as a sentence; everything the nodes do is in
/// the [`GraphRun`].
pub async fn run_graph(
    graph: &Graph,
    inputs: &Map<String, Value>,
    request: &RunRequest,
    setup: Setup<'_>,
    max_concurrent: usize,
    mut on_settled: impl FnMut(&NodeReport),
) -> Result<GraphRun, Vec<String>> {
    check_inputs(graph, inputs)?;
    let Setup {
        environment,
        runner,
        cancel,
        on_progress,
    } = setup;
    let runs: RefCell<BTreeMap<String, NodeRun>> = RefCell::new(BTreeMap::new());
    let outputs: RefCell<BTreeMap<String, Map<String, Value>>> = RefCell::new(BTreeMap::new());
    let mut reports: Vec<NodeReport> = Vec::new();
    let scheduled = graph.schedule();
    let settled = dag::run(
        &scheduled,
        max_concurrent,
        cancel,
        |id| {
            let node = graph.node(id).cloned();
            let mut values = match inputs.get(id) {
                Some(Value::Object(values)) => values.clone(),
                _ => Map::new(),
            };
            for edge in graph.edges.iter().filter(|edge| edge.to.node == id) {
                if let Some(value) = outputs
                    .borrow()
                    .get(&edge.from.node)
                    .and_then(|given| given.get(&edge.from.slot))
                {
                    values.insert(edge.to.slot.clone(), value.clone());
                }
            }
            let request = request.clone();
            let cancel = cancel.clone();
            let id = id.to_owned();
            let runs = &runs;
            let mut environment = environment.clone();
            environment.on_progress = on_progress.clone().map(|tell| {
                let id = id.clone();
                Rc::new(move |progress: &Progress| tell(&id, progress)) as Rc<dyn Fn(&Progress)>
            });
            async move {
                let Some(node) = node else {
                    return Settled::Failed(format!("no node `{id}`"));
                };
                let run =
                    match run_node(&node, &values, request, &environment, runner, cancel).await {
                        Ok(run) => run,
                        Err(refused) => NodeRun::refused("refused", &[refused.0]),
                    };
                let how = match &run.error {
                    None => Settled::Completed(Value::Object(run.outputs.clone())),
                    Some(failure) if failure.code == "cancelled" => Settled::Aborted,
                    Some(failure) => {
                        Settled::Failed(format!("node `{id}` failed: {}", failure.message))
                    }
                };
                runs.borrow_mut().insert(id, run);
                how
            }
            .boxed_local()
        },
        |id, how| {
            if let Settled::Completed(Value::Object(given)) = how {
                outputs.borrow_mut().insert(id.to_owned(), given.clone());
            }
            let run = runs.borrow_mut().remove(id).unwrap_or_else(|| {
                let (code, message) = match how {
                    Settled::Failed(why) => ("dependency_failed", why.clone()),
                    _ => (
                        "aborted",
                        "the graph run was stopped before this node finished".to_owned(),
                    ),
                };
                NodeRun::refused(code, &[message])
            });
            let report = NodeReport {
                id: id.to_owned(),
                status: match how {
                    Settled::Completed(_) => Ended::Completed,
                    Settled::Failed(_) => Ended::Failed,
                    Settled::Aborted => Ended::Aborted,
                },
                run,
            };
            on_settled(&report);
            reports.push(report);
        },
    )
    .await;
    // Reports in the graph's dependency order.
    let place: BTreeMap<&str, usize> = graph
        .nodes
        .iter()
        .enumerate()
        .map(|(at, node)| (node.id.as_str(), at))
        .collect();
    reports.sort_by_key(|report| place.get(report.id.as_str()).copied().unwrap_or(usize::MAX));
    let status = if settled.values().all(Settled::is_completed) {
        Ended::Completed
    } else if cancel.is_aborted() {
        Ended::Aborted
    } else {
        Ended::Failed
    };
    Ok(GraphRun {
        status,
        nodes: reports,
    })
}

/// A graph's run as an entrance sends it (`kiln.graph({nodes, edges}).run(inputs)`):
/// `{nodes, edges?, inputs?, max_concurrent?, ...}` with a run request's
/// fields but `code` and `key`; `inputs` are by node id, then slot.
#[derive(Debug, Clone)]
pub struct GraphRequest {
    pub spec: GraphSpec,
    pub inputs: Map<String, Value>,
    pub max_concurrent: usize,
    pub run: RunRequest,
}

impl GraphRequest {
    /// Reads a graph request; the graph itself is checked by [`build`].
    ///
    /// # Errors
    ///
    /// The first thing wrong with it, naming the field.
    pub fn from_value(value: Value) -> Result<Self, kiln_run::RequestError> {
        use kiln_run::RequestError;
        let Value::Object(mut fields) = value else {
            return Err(RequestError(format!(
                "a graph run takes one object {{nodes, edges, inputs, max_concurrent, {}}}, not {}",
                crate::node::RUN_FIELDS.join(", "),
                kiln_types::words::json_type(&value)
            )));
        };
        let mut graph = Map::new();
        for name in ["nodes", "edges"] {
            if let Some(value) = fields.remove(name).filter(|value| !value.is_null()) {
                graph.insert(name.to_owned(), value);
            }
        }
        if !graph.contains_key("nodes") {
            return Err(RequestError(
                "`nodes` is missing: give [{id, title, code, inputs, outputs}]".into(),
            ));
        }
        let spec = serde_json::from_value::<GraphSpec>(Value::Object(graph))
            .map_err(|error| RequestError(format!("the graph is not valid: {error}")))?;
        let inputs = match fields.remove("inputs") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(inputs)) => inputs,
            Some(other) => {
                return Err(RequestError(format!(
                    "`inputs` must be an object {{node: {{slot: value}}}}, not {}",
                    kiln_types::words::json_type(&other)
                )));
            }
        };
        let max_concurrent = match fields.remove("max_concurrent") {
            None | Some(Value::Null) => dag::DEFAULT_MAX_CONCURRENT,
            Some(value) => value
                .as_u64()
                .filter(|n| (1..=64).contains(n))
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| {
                    RequestError(format!(
                        "`max_concurrent` must be a whole number from 1 to 64, not {value}"
                    ))
                })?,
        };
        let run = crate::node::run_part("a graph run", fields, &[])?;
        Ok(Self {
            spec,
            inputs,
            max_concurrent,
            run,
        })
    }
}

#[cfg(test)]
mod tests;

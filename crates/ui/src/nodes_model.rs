//! The Code nodes view's graph as data, with no DOM: nodes and the edges
//! between their typed slots, the sample values of the inputs nothing feeds,
//! each change the person makes (add, replace, connect, remove) checked and
//! applied here, and the undo history. The view (`nodes_panel`) draws it and
//! keeps it in the workspace store (`graphs.put`).
//!
//! Connections are checked with `kiln_types::node`'s own vocabulary
//! ([`connection_refusal`]), so the page refuses exactly what a graph run
//! would; the runtime worker checks the whole graph again before it saves
//! it and before it runs it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use kiln_types::node::{
    CodeNode, Edge, GraphNode, InputSlot, OutputSlot, SlotRef, SlotType, connection_refusal,
};

/// The most changes Undo walks back.
pub(crate) const UNDO_DEPTH: usize = 50;

/// A graph as the person edits it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Sheet {
    pub nodes: Vec<GraphNode>,
    pub edges: Vec<Edge>,
    /// Values for the inputs no edge feeds, `{node: {slot: value}}`, as a
    /// graph run takes its inputs.
    #[serde(default)]
    pub samples: Map<String, Value>,
}

impl Sheet {
    pub(crate) fn node(&self, id: &str) -> Option<&GraphNode> {
        self.nodes.iter().find(|node| node.id == id)
    }

    /// The edge feeding input `slot` of node `id`, if one does.
    pub(crate) fn feeding(&self, id: &str, slot: &str) -> Option<&Edge> {
        self.edges
            .iter()
            .find(|edge| edge.to.node == id && edge.to.slot == slot)
    }

    /// The edges leaving output `slot` of node `id`.
    pub(crate) fn fed_from(&self, id: &str, slot: &str) -> Vec<&Edge> {
        self.edges
            .iter()
            .filter(|edge| edge.from.node == id && edge.from.slot == slot)
            .collect()
    }

    /// A new node's id, from its title: lower case words joined by `-`,
    /// with a number after it when the id is taken.
    pub(crate) fn fresh_id(&self, title: &str) -> String {
        let mut stem = String::new();
        for character in title.chars() {
            if character.is_ascii_alphanumeric() {
                stem.push(character.to_ascii_lowercase());
            } else if !stem.is_empty() && !stem.ends_with('-') {
                stem.push('-');
            }
            if stem.len() >= 24 {
                break;
            }
        }
        let stem = stem.trim_end_matches('-');
        let stem = if stem.is_empty() { "node" } else { stem };
        if self.node(stem).is_none() {
            return stem.to_owned();
        }
        (2..)
            .map(|number| format!("{stem}-{number}"))
            .find(|id| self.node(id).is_none())
            .unwrap_or_else(|| stem.to_owned())
    }

    /// Adds `node` under a fresh id; returns the id.
    pub(crate) fn add(&mut self, node: CodeNode) -> String {
        let id = self.fresh_id(&node.title);
        self.nodes.push(GraphNode {
            id: id.clone(),
            node,
        });
        id
    }

    /// Puts `node` in place of node `id`, keeping its id: the edges to a
    /// slot it no longer has, or whose types no longer fit, go, and so do
    /// the samples of inputs it no longer has. Returns a sentence for each
    /// edge that went.
    pub(crate) fn replace(&mut self, id: &str, node: CodeNode) -> Vec<String> {
        let Some(place) = self.nodes.iter_mut().find(|place| place.id == id) else {
            return Vec::new();
        };
        place.node = node;
        let mut dropped = Vec::new();
        let edges = std::mem::take(&mut self.edges);
        for edge in edges {
            match self.edge_problem(&edge) {
                Some(problem) => {
                    dropped.push(format!("{} → {} went: {problem}", edge.from, edge.to))
                }
                None => self.edges.push(edge),
            }
        }
        let inputs: Vec<String> = self
            .node(id)
            .map(|node| {
                node.node
                    .inputs
                    .iter()
                    .map(|slot| slot.name.clone())
                    .collect()
            })
            .unwrap_or_default();
        let gone: Vec<String> = self
            .samples
            .get(id)
            .and_then(Value::as_object)
            .map(|samples| {
                samples
                    .keys()
                    .filter(|slot| !inputs.contains(slot))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        for slot in gone {
            self.set_sample(id, &slot, None);
        }
        dropped
    }

    /// A node still under the id New node gave it (`new-node`, `new-node-2`)
    /// takes an id from its title once it has another; a node named by the
    /// person keeps its id (a page may read its outputs by it). Its edges
    /// and samples follow. Answers the node's id now.
    pub(crate) fn follow_title(&mut self, id: &str) -> String {
        let placeholder = id == "new-node"
            || id
                .strip_prefix("new-node-")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        let Some(title) = self.node(id).map(|node| node.node.title.clone()) else {
            return id.to_owned();
        };
        if !placeholder || self.fresh_id(&title).starts_with("new-node") {
            return id.to_owned();
        }
        let fresh = self.fresh_id(&title);
        for node in &mut self.nodes {
            if node.id == id {
                node.id.clone_from(&fresh);
            }
        }
        for edge in &mut self.edges {
            for end in [&mut edge.from, &mut edge.to] {
                if end.node == id {
                    end.node.clone_from(&fresh);
                }
            }
        }
        if let Some(samples) = self.samples.remove(id) {
            self.samples.insert(fresh.clone(), samples);
        }
        fresh
    }

    /// Removes node `id` with its edges and samples.
    pub(crate) fn remove(&mut self, id: &str) {
        self.nodes.retain(|node| node.id != id);
        self.edges
            .retain(|edge| edge.from.node != id && edge.to.node != id);
        self.samples.remove(id);
    }

    /// Connects output `from` to input `to`, in place of whatever fed `to`.
    ///
    /// # Errors
    ///
    /// Why the connection is refused, as a sentence: a slot that does not
    /// exist, a node feeding itself, types that do not fit, a cycle.
    pub(crate) fn connect(&mut self, from: SlotRef, to: SlotRef) -> Result<(), String> {
        let edge = Edge { from, to };
        if let Some(problem) = self.edge_problem(&edge) {
            return Err(problem);
        }
        if edge.from.node == edge.to.node {
            return Err(format!(
                "`{}` cannot feed `{}`: a node cannot feed itself",
                edge.from, edge.to
            ));
        }
        if let Some(path) = self.path(&edge.to.node, &edge.from.node) {
            return Err(format!(
                "`{}` → `{}` would make a cycle: {} → {}",
                edge.from,
                edge.to,
                path.join(" → "),
                edge.to.node
            ));
        }
        self.disconnect(&edge.to);
        if self.sample(&edge.to.node, &edge.to.slot).is_some() {
            self.set_sample(&edge.to.node, &edge.to.slot, None);
        }
        self.edges.push(edge);
        Ok(())
    }

    /// Removes the edge feeding input `to`, if there is one.
    pub(crate) fn disconnect(&mut self, to: &SlotRef) {
        self.edges.retain(|edge| edge.to != *to);
    }

    /// Sets (or, with `None`, clears) the sample value of input `slot` of node `id`.
    pub(crate) fn set_sample(&mut self, id: &str, slot: &str, value: Option<Value>) {
        let samples = self
            .samples
            .entry(id.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        if !samples.is_object() {
            *samples = Value::Object(Map::new());
        }
        if let Value::Object(samples) = samples {
            match value {
                Some(value) => {
                    samples.insert(slot.to_owned(), value);
                }
                None => {
                    samples.remove(slot);
                }
            }
        }
        if self
            .samples
            .get(id)
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty)
        {
            self.samples.remove(id);
        }
    }

    /// The sample value of input `slot` of node `id`.
    pub(crate) fn sample(&self, id: &str, slot: &str) -> Option<&Value> {
        self.samples.get(id)?.get(slot)
    }

    /// The inputs a graph run takes: the samples of inputs no edge feeds.
    pub(crate) fn run_inputs(&self) -> Map<String, Value> {
        let mut inputs = Map::new();
        for (id, values) in &self.samples {
            let Some(values) = values.as_object() else {
                continue;
            };
            let kept: Map<String, Value> = values
                .iter()
                .filter(|(slot, _)| self.feeding(id, slot).is_none())
                .map(|(slot, value)| (slot.clone(), value.clone()))
                .collect();
            if self.node(id).is_some() && !kept.is_empty() {
                inputs.insert(id.clone(), Value::Object(kept));
            }
        }
        inputs
    }

    /// What is wrong with `edge` against the nodes as they are: a node or
    /// slot that does not exist, or types that do not fit.
    fn edge_problem(&self, edge: &Edge) -> Option<String> {
        let output = match self.node(&edge.from.node) {
            None => return Some(format!("there is no node `{}`", edge.from.node)),
            Some(node) => node
                .node
                .outputs
                .iter()
                .find(|slot| slot.name == edge.from.slot),
        };
        let Some(output) = output else {
            return Some(format!(
                "`{}` has no output `{}`",
                edge.from.node, edge.from.slot
            ));
        };
        let input = match self.node(&edge.to.node) {
            None => return Some(format!("there is no node `{}`", edge.to.node)),
            Some(node) => node
                .node
                .inputs
                .iter()
                .find(|slot| slot.name == edge.to.slot),
        };
        let Some(input) = input else {
            return Some(format!(
                "`{}` has no input `{}`",
                edge.to.node, edge.to.slot
            ));
        };
        connection_refusal(&edge.from, &output.ty, &edge.to, &input.ty)
    }

    /// The nodes on a path of edges from `start` to `goal`, both included.
    fn path(&self, start: &str, goal: &str) -> Option<Vec<String>> {
        let mut stack = vec![vec![start.to_owned()]];
        let mut seen = std::collections::BTreeSet::new();
        while let Some(path) = stack.pop() {
            let last = path.last()?.clone();
            if last == goal {
                return Some(path);
            }
            if !seen.insert(last.clone()) {
                continue;
            }
            for edge in self.edges.iter().filter(|edge| edge.from.node == last) {
                let mut longer = path.clone();
                longer.push(edge.to.node.clone());
                stack.push(longer);
            }
        }
        None
    }
}

/// The changes Undo walks back, newest last.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct History {
    /// The graph's saved version these states lead up to: a history whose
    /// graph was saved since (in another tab) no longer applies.
    pub version: u64,
    pub past: Vec<Sheet>,
}

impl History {
    /// Keeps `before` as the state Undo returns to.
    pub(crate) fn push(&mut self, before: Sheet) {
        self.past.push(before);
        if self.past.len() > UNDO_DEPTH {
            self.past.remove(0);
        }
    }
}

/// A slot's sample as the person types it: a `string` input takes the text
/// as it is, every other type JSON.
///
/// # Errors
///
/// Why the text is not a value, naming the slot.
pub(crate) fn sample_from_text(slot: &str, ty: &SlotType, text: &str) -> Result<Value, String> {
    if *ty == SlotType::String {
        return Ok(Value::String(text.to_owned()));
    }
    serde_json::from_str(text).map_err(|error| {
        format!(
            "the sample of `{slot}` is not JSON ({error}); write it as JSON, for example {}",
            example(ty)
        )
    })
}

/// A sample as its field shows it: the inverse of [`sample_from_text`].
pub(crate) fn sample_text(ty: &SlotType, value: &Value) -> String {
    match (ty, value) {
        (SlotType::String, Value::String(text)) => text.clone(),
        _ => value.to_string(),
    }
}

/// A value of type `ty`, as JSON, for a hint.
pub(crate) fn example(ty: &SlotType) -> String {
    match ty {
        SlotType::String => "\"text\"".into(),
        SlotType::Number => "2.5".into(),
        SlotType::Integer => "3".into(),
        SlotType::Boolean => "true".into(),
        SlotType::Object | SlotType::Dict(_) => "{\"key\": 1}".into(),
        SlotType::Array => "[1, 2]".into(),
        SlotType::List(item) => format!("[{}]", example(item)),
        SlotType::Bytes => "{\"$bytes\": \"aGk=\"}".into(),
        SlotType::Any => "null".into(),
        SlotType::Record(fields) => {
            let fields: Vec<String> = fields
                .iter()
                .filter(|field| !field.optional)
                .map(|field| format!("\"{}\": {}", field.name, example(&field.ty)))
                .collect();
            format!("{{{}}}", fields.join(", "))
        }
    }
}

/// Slots written one per line as `name: type` (the node editor's text),
/// read into input slots.
///
/// # Errors
///
/// The first line that is not `name: type` with a known type, by number.
pub(crate) fn parse_inputs(text: &str) -> Result<Vec<InputSlot>, String> {
    parse_slots(text).map(|slots| {
        slots
            .into_iter()
            .map(|(name, ty)| InputSlot {
                name,
                ty,
                description: None,
                default: None,
                required: None,
            })
            .collect()
    })
}

/// As [`parse_inputs`], for outputs.
///
/// # Errors
///
/// As [`parse_inputs`].
pub(crate) fn parse_outputs(text: &str) -> Result<Vec<OutputSlot>, String> {
    parse_slots(text).map(|slots| {
        slots
            .into_iter()
            .map(|(name, ty)| OutputSlot {
                name,
                ty,
                description: None,
            })
            .collect()
    })
}

/// Slots as the node editor writes them, one `name: type` per line.
pub(crate) fn slots_text<'a>(slots: impl IntoIterator<Item = (&'a str, &'a SlotType)>) -> String {
    slots
        .into_iter()
        .map(|(name, ty)| format!("{name}: {ty}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn parse_slots(text: &str) -> Result<Vec<(String, SlotType)>, String> {
    let mut slots = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let Some((name, ty)) = line.split_once(':') else {
            return Err(format!(
                "line {}, `{line}`, is not `name: type` (for example `total: number`)",
                number + 1
            ));
        };
        let name = name.trim();
        if !kiln_types::words::is_identifier(name) {
            return Err(format!(
                "line {}: `{name}` is not a JavaScript identifier",
                number + 1
            ));
        }
        let ty =
            SlotType::parse(ty.trim()).map_err(|error| format!("line {}: {error}", number + 1))?;
        slots.push((name.to_owned(), ty));
    }
    Ok(slots)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node(title: &str, inputs: &[(&str, &str)], outputs: &[(&str, &str)]) -> CodeNode {
        serde_json::from_value(json!({
            "title": title,
            "code": "return {};",
            "inputs": inputs.iter().map(|(n, t)| json!({"name": n, "type": t})).collect::<Vec<_>>(),
            "outputs": outputs.iter().map(|(n, t)| json!({"name": n, "type": t})).collect::<Vec<_>>(),
        }))
        .unwrap()
    }

    fn at(text: &str) -> SlotRef {
        serde_json::from_value(json!(text)).unwrap()
    }

    /// lines → total (number) → n; `classify` gives a string.
    fn sheet() -> Sheet {
        let mut sheet = Sheet::default();
        sheet.add(node(
            "Total the order",
            &[("lines", "list[{price: number, qty: integer}]")],
            &[("total", "number")],
        ));
        sheet.add(node(
            "Classify",
            &[("n", "number")],
            &[("sign", "string"), ("size", "number")],
        ));
        sheet
    }

    #[test]
    fn ids_come_from_titles_and_stay_unique() {
        let mut sheet = sheet();
        assert_eq!(sheet.nodes[0].id, "total-the-order");
        assert_eq!(sheet.nodes[1].id, "classify");
        assert_eq!(
            sheet.add(node("Classify", &[], &[("x", "any")])),
            "classify-2"
        );
        assert_eq!(sheet.fresh_id("  ¿?  "), "node");
    }

    #[test]
    fn a_new_node_takes_its_id_from_the_title_it_is_given_and_a_named_one_keeps_its_own() {
        let mut sheet = sheet();
        let fresh = sheet.add(node("New node", &[("n", "number")], &[("out", "number")]));
        assert_eq!(fresh, "new-node");
        sheet
            .connect(at("total-the-order.total"), at("new-node.n"))
            .unwrap();
        sheet.set_sample("new-node", "n", Some(json!(3)));
        // Still "New node": nothing to follow.
        assert_eq!(sheet.follow_title("new-node"), "new-node");
        let mut titled = node("Double it", &[("n", "number")], &[("out", "number")]);
        sheet.replace("new-node", titled.clone());
        assert_eq!(sheet.follow_title("new-node"), "double-it");
        assert!(sheet.node("new-node").is_none());
        assert_eq!(
            sheet.feeding("double-it", "n").map(|e| e.from.to_string()),
            Some("total-the-order.total".to_owned())
        );
        assert_eq!(sheet.samples["double-it"]["n"], json!(3));
        // Named now: a new title keeps the id.
        titled.title = "Triple it".into();
        sheet.replace("double-it", titled);
        assert_eq!(sheet.follow_title("double-it"), "double-it");
        // A second placeholder whose title is taken gets a number.
        let second = sheet.add(node("New node", &[], &[("x", "any")]));
        assert_eq!(second, "new-node");
        sheet.replace("new-node", node("Classify", &[], &[("x", "any")]));
        assert_eq!(sheet.follow_title("new-node"), "classify-2");
        assert_eq!(sheet.follow_title("nowhere"), "nowhere");
    }

    #[test]
    fn connections_are_checked_as_a_graph_run_checks_them() {
        let cases: &[(&str, &str, Option<&str>)] = &[
            ("total-the-order.total", "classify.n", None),
            (
                "classify.sign",
                "total-the-order.lines",
                Some(
                    "`classify.sign` gives a string, which does not fit `total-the-order.lines`, which takes a list[{price: number, qty: integer}]",
                ),
            ),
            (
                "classify.nope",
                "classify.n",
                Some("`classify` has no output `nope`"),
            ),
            (
                "total-the-order.total",
                "ghost.n",
                Some("there is no node `ghost`"),
            ),
            (
                "classify.size",
                "classify.n",
                Some("`classify.size` cannot feed `classify.n`: a node cannot feed itself"),
            ),
        ];
        for (from, to, refusal) in cases {
            let mut sheet = sheet();
            let answer = sheet.connect(at(from), at(to));
            assert_eq!(answer.err().as_deref(), *refusal, "{from} → {to}");
            assert_eq!(
                sheet.edges.len(),
                usize::from(refusal.is_none()),
                "{from} → {to}"
            );
        }
    }

    #[test]
    fn a_cycle_is_refused_naming_its_path_and_an_input_takes_one_edge() {
        let mut sheet = sheet();
        sheet.add(node("Back", &[("n", "number")], &[("lines", "array")]));
        sheet
            .connect(at("total-the-order.total"), at("classify.n"))
            .unwrap();
        sheet.connect(at("classify.size"), at("back.n")).unwrap();
        assert_eq!(
            sheet
                .connect(at("back.lines"), at("total-the-order.lines"))
                .unwrap_err(),
            "`back.lines` → `total-the-order.lines` would make a cycle: total-the-order → classify → back → total-the-order"
        );
        // A second edge into `back.n` replaces the first.
        sheet
            .connect(at("total-the-order.total"), at("back.n"))
            .unwrap();
        assert_eq!(sheet.edges.len(), 2);
        assert_eq!(
            sheet.feeding("back", "n").unwrap().from,
            at("total-the-order.total")
        );
    }

    #[test]
    fn replacing_a_node_drops_the_edges_that_no_longer_fit_and_says_so() {
        let mut sheet = sheet();
        sheet
            .connect(at("total-the-order.total"), at("classify.n"))
            .unwrap();
        sheet.set_sample("classify", "n", Some(json!(3)));
        sheet.set_sample("total-the-order", "lines", Some(json!([])));
        let dropped = sheet.replace(
            "classify",
            node("Classify", &[("n", "string")], &[("sign", "string")]),
        );
        assert_eq!(
            dropped,
            [
                "total-the-order.total → classify.n went: `total-the-order.total` gives a number, which does not fit `classify.n`, which takes a string"
            ]
        );
        assert!(sheet.edges.is_empty());
        let dropped = sheet.replace(
            "total-the-order",
            node("Total", &[("rows", "array")], &[("total", "number")]),
        );
        assert!(dropped.is_empty());
        assert_eq!(sheet.sample("total-the-order", "lines"), None);
        assert_eq!(sheet.sample("classify", "n"), Some(&json!(3)));
    }

    #[test]
    fn a_run_takes_the_samples_of_inputs_nothing_feeds() {
        let mut sheet = sheet();
        sheet.set_sample(
            "total-the-order",
            "lines",
            Some(json!([{"price": 2, "qty": 1}])),
        );
        sheet.set_sample("classify", "n", Some(json!(5)));
        assert_eq!(sheet.run_inputs().len(), 2);
        sheet
            .connect(at("total-the-order.total"), at("classify.n"))
            .unwrap();
        assert_eq!(
            Value::Object(sheet.run_inputs()),
            json!({"total-the-order": {"lines": [{"price": 2, "qty": 1}]}})
        );
        sheet.set_sample("total-the-order", "lines", None);
        assert!(sheet.samples.is_empty());
        sheet.remove("total-the-order");
        assert!(sheet.edges.is_empty());
    }

    #[test]
    fn samples_are_typed_text() {
        let number = SlotType::parse("number").unwrap();
        let list = SlotType::parse("list[{price: number, qty?: integer}]").unwrap();
        assert_eq!(
            sample_from_text("s", &SlotType::String, "a b"),
            Ok(json!("a b"))
        );
        assert_eq!(sample_from_text("n", &number, "2.5"), Ok(json!(2.5)));
        assert_eq!(
            sample_from_text("lines", &list, "[{price: 1}]").unwrap_err(),
            "the sample of `lines` is not JSON (key must be a string at line 1 column 3); write it as JSON, for example [{\"price\": 2.5}]"
        );
        assert_eq!(sample_text(&SlotType::String, &json!("hi")), "hi");
        assert_eq!(sample_text(&number, &json!(2)), "2");
    }

    #[test]
    fn slots_are_read_one_per_line() {
        let inputs =
            parse_inputs("lines: list[{price: number, qty: integer}]\n\n n : number").unwrap();
        assert_eq!(
            slots_text(inputs.iter().map(|slot| (slot.name.as_str(), &slot.ty))),
            "lines: list[{price: number, qty: integer}]\nn: number"
        );
        let refusals = [
            (
                "total number",
                "line 1, `total number`, is not `name: type` (for example `total: number`)",
            ),
            ("2x: number", "line 1: `2x` is not a JavaScript identifier"),
        ];
        for (text, refusal) in refusals {
            assert_eq!(parse_outputs(text).unwrap_err(), refusal);
        }
        assert!(
            parse_outputs("a: nmber")
                .unwrap_err()
                .starts_with("line 1: ")
        );
    }

    #[test]
    fn undo_keeps_a_bounded_past() {
        let mut history = History::default();
        for _ in 0..UNDO_DEPTH + 5 {
            history.push(sheet());
        }
        assert_eq!(history.past.len(), UNDO_DEPTH);
    }
}

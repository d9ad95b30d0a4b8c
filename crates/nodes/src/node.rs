//! Running one code node (reference/004): a node is checked
//! ([`problems`], and [`check`] adds what `submit_code` adds: the parse and
//! the return paths), its values are checked against its input slots and
//! its defaults filled ([`fill`]), its body becomes one program
//! ([`program`]) that [`run_node`] runs through [`run_program`] — the same
//! ladder, budgets and history as any run — and the returned object is read
//! back output by output ([`read_outputs`]), with a warning where a value
//! does not match its declared type.

use std::collections::BTreeSet;
use std::rc::Rc;

use kiln_types::cancel::AbortSignal;
use kiln_types::node::{CodeNode, NodeFailure, NodeRun, SlotType, describe, repeated};
use kiln_types::words::is_identifier;
use kiln_types::{RunLimits, RunOutcome, check_depth};
use serde_json::{Map, Value, json};

use kiln_run::{Environment, SandboxRunner, Stripper, run_program};
use kiln_run::{Limits, RequestError, RunRequest};

/// The longest title, in characters.
pub(crate) const MAX_TITLE_CHARS: usize = 200;
/// The longest body, in bytes.
pub const MAX_CODE_BYTES: usize = 64 * 1024;
/// The most slots in one direction.
pub(crate) const MAX_SLOTS: usize = 32;
/// The longest slot name, in characters.
pub(crate) const MAX_NAME_CHARS: usize = 64;
/// The longest description (of a slot, or a submission's summary), in
/// characters.
pub(crate) const MAX_DESCRIPTION_CHARS: usize = 500;
/// The most one run's input values may take as JSON, in bytes.
pub(crate) const MAX_INPUT_BYTES: usize = 4 * 1024 * 1024;

/// Words a slot name may not be: JavaScript's reserved words (a body could
/// not name them), the values every body has, and Kiln's own globals (an
/// input named `tools` would hide them).
const RESERVED: &[&str] = &[
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "debugger",
    "default",
    "delete",
    "do",
    "else",
    "enum",
    "export",
    "extends",
    "false",
    "finally",
    "for",
    "function",
    "if",
    "implements",
    "import",
    "in",
    "instanceof",
    "interface",
    "let",
    "new",
    "null",
    "package",
    "private",
    "protected",
    "public",
    "return",
    "static",
    "super",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "typeof",
    "var",
    "void",
    "while",
    "with",
    "yield",
    "arguments",
    "eval",
    "undefined",
    "NaN",
    "Infinity",
    "async",
];

/// The limits a node runs under unless its caller sets others: the
/// codemode defaults, with room for the outputs a node passes on.
#[must_use]
pub fn default_limits() -> RunLimits {
    RunLimits {
        return_bytes: RunLimits::MAX_RETURN_BYTES,
        ..RunLimits::default()
    }
}

/// A run request for a node with every field at its default and
/// [`default_limits`]: what a caller adds its tools and permission to.
#[must_use]
pub fn request() -> RunRequest {
    let mut request = RunRequest::new(String::new());
    request.limits = Limits::new(default_limits());
    request
}

/// What is wrong with `node` as data — its title, names, types, defaults
/// and sizes — each as a sentence naming the part; empty when nothing is.
/// Running a node refuses these; [`check`] adds the body's parse and paths.
#[must_use]
pub(crate) fn problems(node: &CodeNode) -> Vec<String> {
    let mut problems = Vec::new();
    let title = node.title.trim();
    if title.is_empty() {
        problems.push("the node has no title".to_owned());
    } else if title.chars().count() > MAX_TITLE_CHARS {
        problems.push(format!(
            "the title is {} characters; at most {MAX_TITLE_CHARS}",
            title.chars().count()
        ));
    }
    if node.code.trim().is_empty() {
        problems.push("the node has no code".to_owned());
    } else if node.code.len() > MAX_CODE_BYTES {
        problems.push(format!(
            "the code is {} bytes; at most {MAX_CODE_BYTES}",
            node.code.len()
        ));
    }
    if node.outputs.is_empty() {
        problems.push("the node declares no output; it needs at least one".to_owned());
    }
    for (direction, names) in [
        (
            "input",
            node.inputs
                .iter()
                .map(|slot| (slot.name.as_str(), slot.description.as_deref()))
                .collect::<Vec<_>>(),
        ),
        (
            "output",
            node.outputs
                .iter()
                .map(|slot| (slot.name.as_str(), slot.description.as_deref()))
                .collect::<Vec<_>>(),
        ),
    ] {
        if names.len() > MAX_SLOTS {
            problems.push(format!(
                "the node has {} {direction}s; at most {MAX_SLOTS}",
                names.len()
            ));
        }
        for (name, description) in &names {
            if let Some(problem) = name_problem(direction, name) {
                problems.push(problem);
            }
            if let Some(description) = description
                && description.chars().count() > MAX_DESCRIPTION_CHARS
            {
                problems.push(format!(
                    "the description of {direction} `{name}` is {} characters; at most {MAX_DESCRIPTION_CHARS}",
                    description.chars().count()
                ));
            }
        }
        for twice in repeated(names.iter().map(|(name, _)| *name)) {
            problems.push(format!(
                "two {direction}s are named `{twice}`; names are unique per direction"
            ));
        }
    }
    for slot in &node.inputs {
        if let Some(default) = &slot.default
            && let Err(mismatch) = slot.ty.check(default)
        {
            problems.push(format!(
                "the default of input {}",
                mismatch.sentence(&slot.name)
            ));
        }
    }
    problems
}

fn name_problem(direction: &str, name: &str) -> Option<String> {
    if name.is_empty() {
        return Some(format!("an {direction} has no name"));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Some(format!(
            "{direction} `{}…` has a name of {} characters; at most {MAX_NAME_CHARS}",
            name.chars().take(20).collect::<String>(),
            name.chars().count()
        ));
    }
    if !is_identifier(name) {
        return Some(format!(
            "{direction} `{name}` is not a JavaScript identifier (letters, digits, `_` and `$`, not starting with a digit)"
        ));
    }
    if RESERVED.contains(&name) {
        return Some(format!(
            "{direction} `{name}` is a reserved word of JavaScript; choose another name"
        ));
    }
    if kiln_types::guest::global_names().contains(&name) || name.starts_with("__kiln") {
        return Some(format!(
            "{direction} `{name}` would hide Kiln's global `{name}`; choose another name"
        ));
    }
    None
}

/// How [`check`]'s reason for a body that does not parse begins.
const DOES_NOT_PARSE: &str = "the code does not parse: ";

/// [`check`], reading a body that does not parse as JavaScript the way
/// `stripper` (the runner's, [`SandboxRunner::stripper`]) reads TypeScript:
/// a body with types is checked as the JavaScript that will run, and
/// TypeScript that cannot run as JavaScript is refused with its own reason.
pub async fn check_typed(node: &CodeNode, stripper: Option<Rc<dyn Stripper>>) -> Vec<String> {
    let found = check(node);
    let Some(stripper) = stripper else {
        return found;
    };
    if !found
        .iter()
        .any(|reason| reason.starts_with(DOES_NOT_PARSE))
    {
        return found;
    }
    match stripper.strip(node.code.clone()).await {
        Ok(Some(javascript)) => check(&CodeNode {
            code: javascript,
            ..node.clone()
        }),
        Ok(None) => found,
        Err(sentence) => found
            .into_iter()
            .map(|reason| {
                if reason.starts_with(DOES_NOT_PARSE) {
                    format!("{DOES_NOT_PARSE}{sentence}")
                } else {
                    reason
                }
            })
            .collect(),
    }
}

/// Everything `submit_code` and `kiln node check` refuse: what is wrong with
/// `node` as data (`problems`: its title, names, types, defaults and sizes),
/// its imports (only Kiln's modules and their exports), the body's syntax
/// (Boa's parser), and every visible return path that does not give every
/// declared output.
#[must_use]
pub fn check(node: &CodeNode) -> Vec<String> {
    let mut found = problems(node);
    if node.code.trim().is_empty() || node.code.len() > MAX_CODE_BYTES {
        return found;
    }
    // What the body imports must be Kiln's: the import is the declaration.
    for import in kiln_jscheck::imports::leading(&node.code).unwrap_or_default() {
        if let Err(why) = kiln_types::guest::check_import(&import.specifier, &import.names()) {
            found.push(format!("line {}: {why}", import.line));
        }
    }
    match kiln_jscheck::parse_body(&node.code) {
        Err(error) => found.push(format!("{DOES_NOT_PARSE}{error}")),
        Ok(body) => {
            let outputs: Vec<&str> = node.outputs.iter().map(|slot| slot.name.as_str()).collect();
            for issue in kiln_jscheck::output_paths(&body, &outputs) {
                found.push(format!(
                    "{}: give every declared output on every path (a value that only sometimes exists can be `null`), \
                     or split the node in two",
                    issue.message
                ));
            }
        }
    }
    found
}

/// Checks `values` against `node`'s inputs and fills their defaults.
///
/// # Errors
///
/// Every value refused, each naming the slot, the type expected and what
/// came: a missing required input, a value of the wrong type, a name that
/// is no input, a value nested too deep or too large.
pub fn fill(
    node: &CodeNode,
    values: &Map<String, Value>,
) -> Result<Map<String, Value>, Vec<String>> {
    let mut refused = Vec::new();
    let names: BTreeSet<&str> = node.inputs.iter().map(|slot| slot.name.as_str()).collect();
    for name in values.keys() {
        if !names.contains(name.as_str()) {
            let known: Vec<String> = names.iter().map(|name| format!("`{name}`")).collect();
            refused.push(if known.is_empty() {
                format!("`{name}` is not an input; the node takes none")
            } else {
                format!(
                    "`{name}` is not an input; the node's inputs are {}",
                    known.join(", ")
                )
            });
        }
    }
    let mut filled = Map::new();
    for slot in &node.inputs {
        let value = values.get(&slot.name).or(slot.default.as_ref());
        match value {
            None if slot.must_come() => refused.push(format!(
                "input `{}` is required and no value came; it takes {}",
                slot.name,
                type_words(&slot.ty)
            )),
            None => {}
            Some(value) => {
                if let Err(depth) = check_depth(value) {
                    refused.push(format!("input `{}` {depth}", slot.name));
                } else if let Err(mismatch) = slot.ty.check(value) {
                    refused.push(format!("input {}", mismatch.sentence(&slot.name)));
                } else {
                    filled.insert(slot.name.clone(), value.clone());
                }
            }
        }
    }
    let size = serde_json::to_string(&filled).map_or(0, |text| text.len());
    if size > MAX_INPUT_BYTES {
        refused.push(format!(
            "the input values are {size} bytes as JSON; at most {MAX_INPUT_BYTES}"
        ));
    }
    if refused.is_empty() {
        Ok(filled)
    } else {
        Err(refused)
    }
}

fn type_words(ty: &SlotType) -> String {
    format!("`{ty}`")
}

/// The program that runs `node`'s body on `filled` values: the inputs as
/// constants named after their slots, then the body as the body of an
/// async function, all on the body's own lines (the inputs take the start
/// of its first), so a line number in an error is the body's. The values
/// are read with `JSON.parse` from one string literal (never as source),
/// into an object with no prototype, so an input with no value is
/// `undefined` whatever its name (`toString` too). A value becomes a
/// `Uint8Array` only where its slot's type says `bytes` (`bytes_shape`):
/// the type decides, never the value's shape.
#[must_use]
pub fn program(node: &CodeNode, filled: &Map<String, Value>) -> String {
    // The body's import declarations open the program, where the sandbox
    // reads them; the inputs and the body follow on the same line.
    let head = kiln_jscheck::imports::leading(&node.code)
        .ok()
        .and_then(|imports| imports.last().map(|last| last.end))
        .unwrap_or(0);
    let mut program = node.code[..head].to_owned();
    if head > 0 {
        program.push(' ');
    }
    if !node.inputs.is_empty() {
        let names: Vec<&str> = node.inputs.iter().map(|slot| slot.name.as_str()).collect();
        let values = string_literal(&Value::Object(filled.clone()));
        let shapes: Vec<Value> = node
            .inputs
            .iter()
            .filter(|slot| filled.contains_key(&slot.name))
            .filter_map(|slot| Some(json!([slot.name, bytes_shape(&slot.ty)?])))
            .collect();
        let read = if shapes.is_empty() {
            format!("Object.setPrototypeOf(JSON.parse({values}), null)")
        } else {
            let shapes = string_literal(&Value::Array(shapes));
            format!("({BYTES_READER})(JSON.parse({values}), JSON.parse({shapes}))")
        };
        program.push_str(&format!("const {{{}}} = {read}; ", names.join(", ")));
    }
    program.push_str("return await (async () => {");
    program.push_str(&node.code[head..]);
    program.push_str("\n})();");
    program
}

/// `value` as JSON text in a JavaScript string literal: a JSON string is
/// one (ES2019 and later), and no newline of it is left raw.
fn string_literal(value: &Value) -> String {
    let json = serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned());
    serde_json::to_string(&json).unwrap_or_else(|_| "\"null\"".to_owned())
}

/// Where a value of type `ty` holds bytes, as the program's reader
/// ([`BYTES_READER`]) walks it: `"b"` the value is bytes, `["l", shape]`
/// each item of a list, `["d", shape]` each value of a dict,
/// `["r", [[field, shape], …]]` those fields of a record. `None` when the
/// type holds none: `object`, `array` and `any` never do, so a
/// `{"$bytes": …}` value there stays the plain object it is.
fn bytes_shape(ty: &SlotType) -> Option<Value> {
    match ty {
        SlotType::Bytes => Some(json!("b")),
        SlotType::List(item) => bytes_shape(item).map(|shape| json!(["l", shape])),
        SlotType::Dict(item) => bytes_shape(item).map(|shape| json!(["d", shape])),
        SlotType::Record(fields) => {
            let found: Vec<Value> = fields
                .iter()
                .filter_map(|field| Some(json!([field.name, bytes_shape(&field.ty)?])))
                .collect();
            (!found.is_empty()).then(|| json!(["r", found]))
        }
        SlotType::String
        | SlotType::Number
        | SlotType::Integer
        | SlotType::Boolean
        | SlotType::Object
        | SlotType::Array
        | SlotType::Any => None,
    }
}

/// The program's reader of its inputs when some hold bytes: given the parsed
/// values and `[[input, shape], …]` ([`bytes_shape`]), it turns each
/// `{"$bytes": base64}` the shapes point at into a `Uint8Array` (with its
/// own decoder: a run has no `atob`), reads only own keys, and gives the
/// values with no prototype. [`fill`] has checked each value against its
/// type, so a shape meets the value it describes. One line.
const BYTES_READER: &str = "(given, shapes) => { const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'; const decode = (text) => { text = text.replace(/=+$/, ''); const out = new Uint8Array(Math.floor(text.length * 3 / 4)); let bits = 0, count = 0, at = 0; for (const char of text) { bits = (bits << 6) | alphabet.indexOf(char); count += 6; if (count >= 8) { count -= 8; out[at++] = (bits >> count) & 255; } } return out; }; const own = (value, key) => Object.prototype.hasOwnProperty.call(value, key); const revive = (value, shape) => { if (value === null || typeof value !== 'object') return value; if (shape === 'b') return typeof value.$bytes === 'string' ? decode(value.$bytes) : value; const kind = shape[0], inner = shape[1]; if (kind === 'l') { if (Array.isArray(value)) for (let at = 0; at < value.length; at++) value[at] = revive(value[at], inner); } else if (kind === 'd') { for (const key of Object.keys(value)) value[key] = revive(value[key], inner); } else { for (const field of inner) if (own(value, field[0])) value[field[0]] = revive(value[field[0]], field[1]); } return value; }; for (const slot of shapes) if (own(given, slot[0])) given[slot[0]] = revive(given[slot[0]], slot[1]); return Object.setPrototypeOf(given, null); }";

/// The outputs of a returned value, by declared name, and a warning for
/// each declared output whose value does not match its type, each one
/// missing and each key that is no output (dropped).
///
/// # Errors
///
/// The value is not an object of outputs: the sentence says what it is.
pub(crate) fn read_outputs(
    node: &CodeNode,
    value: &Value,
) -> Result<(Map<String, Value>, Vec<String>), String> {
    let Value::Object(returned) = value else {
        return Err(format!(
            "the body returned {}, not an object of outputs ({})",
            describe(value),
            expected_keys(node)
        ));
    };
    let mut outputs = Map::new();
    let mut warnings = Vec::new();
    for slot in &node.outputs {
        match returned.get(&slot.name) {
            Some(value) => {
                if let Err(mismatch) = slot.ty.check(value) {
                    warnings.push(format!(
                        "output {}; passed on as it is",
                        mismatch.sentence(&slot.name)
                    ));
                }
                outputs.insert(slot.name.clone(), value.clone());
            }
            None => warnings.push(format!(
                "the body gave no `{}` (declared {}); an input it feeds gets no value",
                slot.name,
                type_words(&slot.ty)
            )),
        }
    }
    for key in returned.keys() {
        if !node.outputs.iter().any(|slot| &slot.name == key) {
            warnings.push(format!("`{key}` is not a declared output; dropped"));
        }
    }
    Ok((outputs, warnings))
}

fn expected_keys(node: &CodeNode) -> String {
    let keys: Vec<String> = node
        .outputs
        .iter()
        .map(|slot| format!("`{}`", slot.name))
        .collect();
    format!("expected {{{}}}", keys.join(", "))
}

/// A node's run as the history lists it: `node · ` and its title's first
/// line, clipped as a program's title is.
#[must_use]
fn node_title(node: &CodeNode) -> String {
    let title = node.title.lines().next().unwrap_or_default().trim();
    format!("node · {}", kiln_types::words::clip(title, 80))
}

/// Runs `node` on `values` with `request`'s tools, permission and limits
/// (its `code` is replaced by the node's program): checks the node and the
/// values, runs the body through [`run_program`] and reads its outputs.
///
/// # Errors
///
/// Only a request the gate refuses, as [`run_program`]; a refused node or
/// value, a failed body and a result that is not an object of outputs are
/// in the [`NodeRun`]'s `error`.
pub async fn run_node(
    node: &CodeNode,
    values: &Map<String, Value>,
    mut request: RunRequest,
    environment: &Environment,
    runner: &dyn SandboxRunner,
    cancel: AbortSignal,
) -> Result<NodeRun, RequestError> {
    let problems = problems(node);
    if !problems.is_empty() {
        return Ok(NodeRun::refused("invalid_node", &problems));
    }
    let filled = match fill(node, values) {
        Ok(filled) => filled,
        Err(refused) => return Ok(NodeRun::refused("invalid_inputs", &refused)),
    };
    request.code = program(node, &filled);
    // The history names the node, not the wrapper its program starts with.
    request.title = Some(node_title(node));
    let ran = run_program(request, environment, runner, cancel).await?;
    let report = &ran.run.report;
    let mut warnings: Vec<String> = ran
        .run
        .warnings
        .iter()
        .map(|warning| warning.message.clone())
        .collect();
    let (outputs, error) = match &report.outcome {
        RunOutcome::Completed { value } => match read_outputs(node, value) {
            Ok((outputs, mut more)) => {
                warnings.append(&mut more);
                (outputs, None)
            }
            Err(message) => (
                Map::new(),
                Some(NodeFailure {
                    code: "not_outputs".to_owned(),
                    message,
                }),
            ),
        },
        RunOutcome::Failed(failure) => (
            Map::new(),
            Some(NodeFailure {
                code: ran
                    .result
                    .error_code
                    .clone()
                    .unwrap_or_else(|| failure.kind.code().to_owned()),
                message: failure.message.clone(),
            }),
        ),
    };
    Ok(NodeRun {
        outputs,
        warnings,
        console: report.console.clone(),
        duration_ms: report.duration_ms,
        error,
        result: Some(ran.result),
        job_id: ran.job_id,
    })
}

/// The run-request fields a node's or a graph's request may carry beside
/// its own: everything a run takes but its program, its `inputs` (a node's
/// values are its inputs) and a `key` (a node run is never keyed).
pub(crate) const RUN_FIELDS: [&str; 8] = [
    "limits",
    "agent",
    "permission",
    "mcp",
    "secrets",
    "tools",
    "builtins",
    "allow_net",
];

/// Reads the run part of a node's or a graph's request: `fields` less the
/// entrance's `own` fields, as [`RunRequest::from_value`] reads a run, with
/// [`default_limits`] under any limit the request leaves unset.
///
/// # Errors
///
/// A field that is neither the entrance's nor a run's, named with both
/// lists, or what the run request's parser refuses.
pub(crate) fn run_part(
    what: &str,
    mut fields: Map<String, Value>,
    own: &[&str],
) -> Result<RunRequest, RequestError> {
    for name in fields.keys() {
        if !own.contains(&name.as_str()) && !RUN_FIELDS.contains(&name.as_str()) {
            let expected: Vec<&str> = own.iter().chain(RUN_FIELDS.iter()).copied().collect();
            return Err(RequestError(format!(
                "`{name}` is not a field of {what}; expected one of {}",
                expected.join(", ")
            )));
        }
    }
    for name in own {
        fields.remove(*name);
    }
    let defaults = serde_json::to_value(default_limits()).unwrap_or_default();
    match fields.get_mut("limits") {
        None | Some(Value::Null) => {
            fields.insert("limits".into(), defaults);
        }
        Some(Value::Object(limits)) => {
            if let Value::Object(defaults) = defaults {
                for (name, value) in defaults {
                    limits.entry(name).or_insert(value);
                }
            }
        }
        Some(_) => {}
    }
    fields.insert("code".into(), Value::String(String::new()));
    RunRequest::from_value(Value::Object(fields))
}

/// A node's run as an entrance sends it (`kiln.codeNode(spec).run(values)`):
/// `{node, values?, ...}` with a run request's fields but `code`, `inputs`
/// and `key`.
#[derive(Debug, Clone)]
pub struct NodeRequest {
    pub node: CodeNode,
    pub values: Map<String, Value>,
    pub run: RunRequest,
}

impl NodeRequest {
    /// Reads a node request.
    ///
    /// # Errors
    ///
    /// The first thing wrong with it, naming the field.
    pub fn from_value(value: Value) -> Result<Self, RequestError> {
        let Value::Object(fields) = value else {
            return Err(RequestError(format!(
                "a node run takes one object {{node, values, {}}}, not {}",
                RUN_FIELDS.join(", "),
                kiln_types::words::json_type(&value)
            )));
        };
        let node = match fields.get("node") {
            None | Some(Value::Null) => {
                return Err(RequestError(
                    "`node` is missing: give {title, code, inputs, outputs}".into(),
                ));
            }
            Some(node) => serde_json::from_value::<CodeNode>(node.clone())
                .map_err(|error| RequestError(format!("`node` is not a node: {error}")))?,
        };
        let values = match fields.get("values") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(values)) => values.clone(),
            Some(other) => {
                return Err(RequestError(format!(
                    "`values` must be an object of values by input name, not {}",
                    kiln_types::words::json_type(other)
                )));
            }
        };
        let run = run_part("a node run", fields, &["node", "values"])?;
        Ok(Self { node, values, run })
    }
}

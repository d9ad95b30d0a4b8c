//! `kiln eval code-gen` (reference/004, "Eval"): the CodePlanner
//! ([`kiln_nodes::author`]) over cases of nine shapes — reshape,
//! merge, compute, extract, split, format, validate, seed, and library (a
//! job the guest's standard library or a `kiln:` module does) — each asked for
//! the way a person would ask, then the accepted node run in the real
//! sandbox ([`kiln_nodes::run_node`]) on held-out inputs that never reach
//! the prompt, its outputs compared with the exact ones (numbers by value,
//! objects whatever their key order). Acceptance on the first round and
//! after repair are counted apart, as the held-out correctness is: a node
//! `submit_code` accepts can still compute the wrong thing. Every case
//! carries a hand-written reference body, which its tests run on the same
//! held-out inputs, so each case is known to be solvable as worded.
//!
//! The cases are data, in `cases/codegen.json` ([`crate::cases`]): each
//! with its name, shape (`"reshape"`, `"merge"`, …), instruction, input and
//! output slots (`name`, `type`, `description`; an empty description is
//! none), whether the request names its expected output, its held-out
//! inputs and outputs, and its reference body. Running and scoring stay
//! code.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::rc::Rc;

use kiln_http::Clock;
use kiln_providers::Provider;
use kiln_types::cancel::AbortSignal;
use kiln_types::node::{CodeNode, InputSlot, OutputSlot, SlotType};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::cases::CasesError;
use kiln_nodes::CodeRequest;
use kiln_run::SandboxRunner;
use kiln_run::{Environment, People};

/// What a case asks a node to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Shape {
    /// The same data in another form (renamed fields, grouped rows).
    Reshape,
    /// Two inputs made one (a join, a deep merge, a union).
    Merge,
    /// A number worked out from the inputs.
    Compute,
    /// Structured values read out of text.
    Extract,
    /// One input sent down several outputs or into parts.
    Split,
    /// Values written as text in a set layout.
    Format,
    /// A verdict on an input, with the reasons.
    Validate,
    /// A node with no inputs that makes data.
    Seed,
    /// A job the standard library or a `kiln:` module does (a quoted CSV,
    /// an HTML page, a digest), which a node should not write by hand.
    Library,
}

impl Shape {
    /// Every shape, in the order the table shows them.
    pub const ALL: [Self; 9] = [
        Self::Reshape,
        Self::Merge,
        Self::Compute,
        Self::Extract,
        Self::Split,
        Self::Format,
        Self::Validate,
        Self::Seed,
        Self::Library,
    ];

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reshape => "reshape",
            Self::Merge => "merge",
            Self::Compute => "compute",
            Self::Extract => "extract",
            Self::Split => "split",
            Self::Format => "format",
            Self::Validate => "validate",
            Self::Seed => "seed",
            Self::Library => "library",
        }
    }
}

/// One slot of a case, as written in the case: its type is parsed when the
/// request is made (a test parses every case's). An empty description is
/// none.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Slot {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: String,
    pub description: String,
}

impl Slot {
    fn slot_type(&self) -> Result<SlotType, String> {
        SlotType::parse(&self.ty).map_err(|error| {
            format!(
                "slot `{}`'s type `{}` does not parse: {}",
                self.name, self.ty, error.message
            )
        })
    }

    fn description(&self) -> Option<String> {
        (!self.description.is_empty()).then(|| self.description.clone())
    }

    /// As an input slot.
    ///
    /// # Errors
    ///
    /// The type does not parse.
    pub fn input(&self) -> Result<InputSlot, String> {
        Ok(InputSlot {
            name: self.name.clone(),
            ty: self.slot_type()?,
            description: self.description(),
            default: None,
            required: None,
        })
    }

    /// As an output slot.
    ///
    /// # Errors
    ///
    /// The type does not parse.
    pub fn output(&self) -> Result<OutputSlot, String> {
        Ok(OutputSlot {
            name: self.name.clone(),
            ty: self.slot_type()?,
            description: self.description(),
        })
    }
}

/// One held-out input and the outputs it must give: compared on the
/// outputs named here, so a node may give more.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeldOut {
    pub inputs: Map<String, Value>,
    pub outputs: Map<String, Value>,
}

/// One case: what a person asks for, the slots it is asked with, and the
/// held-out inputs that judge the node.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodegenCase {
    pub name: String,
    pub shape: Shape,
    /// As a person would ask: never the held-out values.
    pub instruction: String,
    /// The inputs already connected: the request's, kept by the node.
    pub inputs: Vec<Slot>,
    /// The outputs the case is judged on; the reference declares them.
    pub outputs: Vec<Slot>,
    /// Whether the request names `outputs[0]` as its expected output (a
    /// node asked for from the input it feeds). Without it the instruction
    /// names the outputs itself.
    pub expected: bool,
    /// Two or three inputs with their exact outputs; a seed has one, since
    /// a node without inputs has only one input to be given.
    pub held_out: Vec<HeldOut>,
    /// A correct body, written by hand: the proof the case is solvable as
    /// worded and its outputs are right.
    pub reference: String,
}

impl CodegenCase {
    /// The request the model is given: the instruction, the inputs, the
    /// expected output when the case names one, and no samples.
    ///
    /// # Errors
    ///
    /// A slot's type does not parse.
    pub fn request(&self) -> Result<CodeRequest, String> {
        let expected = match (self.expected, self.outputs.first()) {
            (true, Some(slot)) => Some(slot.output()?),
            _ => None,
        };
        Ok(CodeRequest {
            instruction: self.instruction.clone(),
            inputs: self
                .inputs
                .iter()
                .map(Slot::input)
                .collect::<Result<_, _>>()?,
            expected,
            current: None,
            samples: None,
            include_samples: false,
        })
    }

    /// The node of the reference body.
    ///
    /// # Errors
    ///
    /// A slot's type does not parse.
    pub fn reference_node(&self) -> Result<CodeNode, String> {
        Ok(CodeNode {
            title: format!("Reference for {}", self.name),
            code: self.reference.clone(),
            inputs: self
                .inputs
                .iter()
                .map(Slot::input)
                .collect::<Result<_, _>>()?,
            outputs: self
                .outputs
                .iter()
                .map(Slot::output)
                .collect::<Result<_, _>>()?,
        })
    }
}

const CASES_FILE: &str = "cases/codegen.json";

const CASES: &str = include_str!("../cases/codegen.json");

/// The suite, two or more cases of each [`Shape`]: `cases/codegen.json`,
/// parsed.
///
/// # Errors
///
/// The file does not parse.
pub fn codegen_cases() -> Result<Vec<CodegenCase>, CasesError> {
    crate::cases::parse(CASES_FILE, CASES)
}

impl crate::cases::Named for CodegenCase {
    fn name(&self) -> &str {
        &self.name
    }
}

/// Whether `got` is `want`: numbers by value (`50` is `50.0`, and within a
/// billionth of each other), objects whatever their key order, the rest
/// exactly.
#[must_use]
pub fn same(got: &Value, want: &Value) -> bool {
    match (got, want) {
        (Value::Number(a), Value::Number(b)) => match (a.as_f64(), b.as_f64()) {
            (Some(a), Some(b)) => a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs()),
            _ => false,
        },
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same(a, b))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(key, value)| b.get(key).is_some_and(|other| same(value, other)))
        }
        _ => got == want,
    }
}

/// `value` as JSON, cut to `limit` characters.
fn shown(value: &Value, limit: usize) -> String {
    let text = value.to_string();
    if text.chars().count() > limit {
        let cut: String = text.chars().take(limit).collect();
        format!("{cut}…")
    } else {
        text
    }
}

/// How a node did on a case's held-out inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldOutScore {
    pub passed: usize,
    pub total: usize,
    /// One per failed input, naming it (`held-out #2 {…}`) and what was
    /// wrong.
    pub problems: Vec<String>,
}

fn environment() -> Environment {
    Environment {
        entrance: "kiln eval".into(),
        tools_host: "eval".into(),
        http: kiln_http::default_client(),
        // A generated node is asked for nothing: nobody is there to say yes.
        people: People::Approver {
            host: "kiln eval".into(),
            approver: Rc::new(kiln_capabilities::gate::Headless::new("kiln eval")),
            session: kiln_capabilities::gate::SessionAllow::default(),
        },
        own_tools: None,
        bridge: None,
        workspace: None,
        random: Rc::new(|| [4; 8]),
        on_gate: None,
        on_progress: None,
    }
}

/// Runs `node` on each of `case`'s held-out inputs in the sandbox and
/// compares what it gives with the outputs expected: a run that fails, a
/// missing output and a wrong value each fail that input.
pub async fn score_node(
    case: &CodegenCase,
    node: &CodeNode,
    runner: &dyn SandboxRunner,
) -> HeldOutScore {
    let environment = environment();
    let mut score = HeldOutScore {
        passed: 0,
        total: case.held_out.len(),
        problems: Vec::new(),
    };
    for (at, held) in case.held_out.iter().enumerate() {
        let label = format!(
            "held-out #{} {}",
            at + 1,
            shown(&Value::Object(held.inputs.clone()), 60)
        );
        let ran = kiln_nodes::run_node(
            node,
            &held.inputs,
            kiln_nodes::node_run_request(),
            &environment,
            runner,
            AbortSignal::new(),
        )
        .await;
        let wrong: Vec<String> = match ran {
            Err(error) => vec![format!("refused: {error}")],
            Ok(run) => match run.error {
                Some(failure) => vec![format!("{}: {}", failure.code, failure.message)],
                None => held
                    .outputs
                    .iter()
                    .filter_map(|(name, want)| match run.outputs.get(name) {
                        None => Some(format!("gave no `{name}`")),
                        Some(got) if !same(got, want) => Some(format!(
                            "`{name}` is {}, expected {}",
                            shown(got, 80),
                            shown(want, 80)
                        )),
                        Some(_) => None,
                    })
                    .collect(),
            },
        };
        if wrong.is_empty() {
            score.passed += 1;
        } else {
            score
                .problems
                .push(format!("{label}: {}", wrong.join("; ")));
        }
    }
    score
}

/// How one case went.
#[derive(Debug, Clone, PartialEq)]
pub struct CodegenResult {
    pub name: String,
    pub shape: Shape,
    /// Accepted, and every held-out input gave its outputs.
    pub passed: bool,
    /// Accepted on the first round.
    pub first_pass: bool,
    /// Accepted at all, after repairs or not.
    pub accepted: bool,
    pub held_out: HeldOutScore,
    /// Why no node was accepted: the failure's code and message.
    pub failure: Option<(&'static str, String)>,
    pub rounds: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: Option<f64>,
    /// The authoring's, not the held-out runs'.
    pub duration_ms: f64,
}

impl CodegenResult {
    /// One line saying how the case went, for progress while the suite runs.
    #[must_use]
    pub fn line(&self) -> String {
        let outcome = match (&self.failure, self.passed) {
            (Some((code, _)), _) => format!("no node ({code})"),
            (None, true) => "passed".to_owned(),
            (None, false) => format!(
                "accepted, held-out {}/{}",
                self.held_out.passed, self.held_out.total
            ),
        };
        format!(
            "{}: {outcome} in {} round{}, {:.1} s",
            self.name,
            self.rounds,
            if self.rounds == 1 { "" } else { "s" },
            self.duration_ms / 1000.0
        )
    }
}

/// Runs the cases one after another: each authored by `provider`'s
/// `model`, the accepted node scored on the held-out inputs with `runner`;
/// `on_case` hears each result as it comes (a long suite against a slow
/// model says where it is).
pub async fn run_codegen(
    cases: &[CodegenCase],
    provider: &dyn Provider,
    model: &str,
    runner: &dyn SandboxRunner,
    clock: &dyn Clock,
    on_case: &mut dyn FnMut(&CodegenResult),
) -> Vec<CodegenResult> {
    let mut results = Vec::new();
    for case in cases {
        let mut result = CodegenResult {
            name: case.name.clone(),
            shape: case.shape,
            passed: false,
            first_pass: false,
            accepted: false,
            held_out: HeldOutScore {
                passed: 0,
                total: case.held_out.len(),
                problems: Vec::new(),
            },
            failure: None,
            rounds: 0,
            input_tokens: 0,
            output_tokens: 0,
            cost_usd: None,
            duration_ms: 0.0,
        };
        let request = match case.request() {
            Ok(request) => request,
            Err(why) => {
                result.failure = Some(("internal", why));
                on_case(&result);
                results.push(result);
                continue;
            }
        };
        let authored = kiln_nodes::author(
            provider,
            model,
            &request,
            runner.stripper(),
            clock,
            &AbortSignal::new(),
        )
        .await;
        let telemetry = authored.telemetry;
        result.rounds = telemetry.rounds;
        result.input_tokens = telemetry.input_tokens;
        result.output_tokens = telemetry.output_tokens;
        result.cost_usd = telemetry.cost_usd;
        result.duration_ms = telemetry.duration_ms;
        match authored.result {
            Ok(submission) => {
                result.accepted = true;
                result.first_pass = telemetry.rounds == 1;
                result.held_out = score_node(case, &submission.node(), runner).await;
                result.passed = result.held_out.passed == result.held_out.total;
            }
            Err(failure) => result.failure = Some((failure.code(), failure.message())),
        }
        on_case(&result);
        results.push(result);
    }
    results
}

fn share(part: usize, whole: usize) -> String {
    let percent = if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    };
    format!("{part}/{whole} ({percent:.0}%)")
}

fn cost(cost: Option<f64>) -> String {
    cost.map_or_else(|| "—".to_owned(), |usd| format!("${usd:.4}"))
}

fn one_line(text: &str, limit: usize) -> String {
    let line = text.replace('\n', " ").replace('|', "\\|");
    if line.chars().count() > limit {
        let cut: String = line.chars().take(limit).collect();
        format!("{cut}…")
    } else {
        line
    }
}

/// The table: a row per case, the totals row, then first-pass acceptance,
/// post-repair acceptance and held-out correctness (over every held-out
/// input, a case without a node failing all of its own), and the pass rate
/// by shape.
#[must_use]
pub fn codegen_table(results: &[CodegenResult]) -> String {
    let mut text = String::from(
        "| case | shape | result | first pass | after repair | held-out | rounds | tokens | cost | time |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let yes = |flag: bool| if flag { "yes" } else { "no" };
    for result in results {
        let verdict = if result.passed {
            "pass".to_owned()
        } else if let Some((code, message)) = &result.failure {
            format!("FAIL ({code}: {})", one_line(message, 120))
        } else {
            format!(
                "FAIL ({})",
                one_line(&result.held_out.problems.join("; "), 160)
            )
        };
        let _ = writeln!(
            text,
            "| {} | {} | {verdict} | {} | {} | {}/{} | {} | {} | {} | {:.1} s |",
            result.name,
            result.shape.as_str(),
            yes(result.first_pass),
            yes(result.accepted),
            result.held_out.passed,
            result.held_out.total,
            result.rounds,
            result.input_tokens + result.output_tokens,
            cost(result.cost_usd),
            result.duration_ms / 1000.0
        );
    }
    let cases = results.len();
    let passed = results.iter().filter(|result| result.passed).count();
    let first_pass = results.iter().filter(|result| result.first_pass).count();
    let accepted = results.iter().filter(|result| result.accepted).count();
    let held_passed: usize = results.iter().map(|result| result.held_out.passed).sum();
    let held_total: usize = results.iter().map(|result| result.held_out.total).sum();
    let priced: Vec<f64> = results
        .iter()
        .filter_map(|result| result.cost_usd)
        .collect();
    let _ = writeln!(
        text,
        "| **total** | | {passed}/{cases} passed | {first_pass}/{cases} | {accepted}/{cases} | {held_passed}/{held_total} | {} | {} | {} | {:.1} s |",
        results.iter().map(|result| result.rounds).sum::<u32>(),
        results
            .iter()
            .map(|result| result.input_tokens + result.output_tokens)
            .sum::<u64>(),
        cost((!priced.is_empty()).then(|| priced.iter().sum())),
        results.iter().map(|result| result.duration_ms).sum::<f64>() / 1000.0
    );
    let _ = writeln!(
        text,
        "\nfirst-pass acceptance {} · post-repair acceptance {} · held-out correctness {} · passed {}",
        share(first_pass, cases),
        share(accepted, cases),
        share(held_passed, held_total),
        share(passed, cases)
    );
    let mut by_shape: BTreeMap<Shape, (usize, usize)> = BTreeMap::new();
    for result in results {
        let entry = by_shape.entry(result.shape).or_default();
        entry.0 += usize::from(result.passed);
        entry.1 += 1;
    }
    let shapes: Vec<String> = Shape::ALL
        .iter()
        .filter_map(|shape| {
            by_shape
                .get(shape)
                .map(|(passed, of)| format!("{} {passed}/{of}", shape.as_str()))
        })
        .collect();
    let _ = writeln!(text, "passed by shape: {}", shapes.join(" · "));
    text
}

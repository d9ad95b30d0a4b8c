//! `kiln node run|check|author` and `kiln graph run`: code nodes from a
//! terminal, through `kiln_nodes`' `check_node_typed`, `run_node`, `run_graph` and
//! `author` — the same checks, runs and CodePlanner as the
//! page and the app. Bodies run in sandbox processes
//! ([`crate::sandbox_process::ProcessRunner`]), so a graph's independent
//! nodes run at once.
//!
//! Exit codes: 0 the node or graph completed (`check`: valid; `author`: a
//! node was accepted), 1 it did not (a node failed, `check`'s reasons,
//! `author`'s failure), 2 the command was refused (an unreadable or invalid
//! file, a bad flag).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;

use anyhow::{Context as _, Result, bail};
use kiln_nodes::{
    CodeRequest, GraphSetup, authored_answer, build_graph, check_node_typed, default_node_limits,
    pick_model, run_graph, run_node,
};
use kiln_run::SandboxRunner as _;
use kiln_types::cancel::AbortSignal;
use kiln_types::node::{CodeNode, Ended, GraphSpec, InputSlot, NodeRun, OutputSlot, SlotType};
use serde_json::{Map, Value, json};

use crate::commands::run::read_json;
use crate::common::Belt;
use crate::terminal::escaped;

/// `kiln node`'s commands.
#[derive(clap::Subcommand)]
pub enum NodeCommand {
    /// Run a node on input values and print its outputs, warnings, console
    /// and run result as JSON.
    Run {
        /// The node: `{title, code, inputs: [{name, type, description?,
        /// default?, required?}], outputs: [{name, type, description?}]}`.
        node: PathBuf,
        /// A JSON object of values by input name.
        #[arg(long, value_name = "VALUES.json")]
        inputs: Option<PathBuf>,
        /// Print the node's run as JSON even on a terminal (where a readable
        /// summary is printed instead). Scripts and pipes always get JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        run: RunFlags,
    },
    /// Check a node as `submit_code` does (names, types, sizes, the parse,
    /// every return path); exit 1 with the reasons.
    Check { node: PathBuf },
    /// Write a node with a model (the CodePlanner) and print it as JSON.
    Author(AuthorArgs),
}

/// `kiln graph`'s commands.
#[derive(clap::Subcommand)]
pub enum GraphCommand {
    /// Run a graph of nodes and print each node's outputs, console, duration
    /// and errors as JSON.
    Run {
        /// `{nodes: [{id, ..node}], edges: [{from: "node.output", to: "node.input"}]}`.
        graph: PathBuf,
        /// A JSON object of values by node id, then input name.
        #[arg(long, value_name = "VALUES.json")]
        inputs: Option<PathBuf>,
        /// Nodes run at once, at most.
        #[arg(long, value_name = "N", default_value_t = kiln_run::dag::DEFAULT_MAX_CONCURRENT)]
        max_concurrent: usize,
        #[command(flatten)]
        run: RunFlags,
    },
}

/// What a node's program runs with, as for `kiln run`: the belt and the
/// gate (the limits default to codemode's, with `return_bytes` at its
/// ceiling, since a node returns all its outputs).
#[derive(clap::Args)]
pub struct RunFlags {
    #[command(flatten)]
    belt: crate::BeltFlags,
    #[command(flatten)]
    gate: crate::GateFlags,
}

/// `kiln node author`'s options.
#[derive(clap::Args)]
pub struct AuthorArgs {
    /// What the node should do.
    instruction: String,
    /// A JSON array of the input slots it must keep: `[{name, type, description?}]`.
    #[arg(long, value_name = "SLOTS.json")]
    inputs: Option<PathBuf>,
    /// The output it must give, `NAME:TYPE` (`total:number`).
    #[arg(long, value_name = "NAME:TYPE")]
    expected: Option<String>,
    /// A node to edit (its code and slots go to the model).
    #[arg(long, value_name = "NODE.json")]
    current: Option<PathBuf>,
    /// Sample values by input name: sent to the model only with
    /// `--include-samples`.
    #[arg(long, value_name = "VALUES.json")]
    samples: Option<PathBuf>,
    #[arg(long)]
    include_samples: bool,
    /// Print the exact messages the first request would send, and send nothing.
    #[arg(long)]
    show_payload: bool,
    #[command(flatten)]
    provider: crate::ProviderFlags,
}

/// The parser recurses on the stack once per level a body nests, and a
/// debug build's frames are large: the checks run on a thread with the
/// sandbox's native stack.
fn on_big_stack(work: impl FnOnce() -> ExitCode + Send + 'static) -> ExitCode {
    match std::thread::Builder::new()
        .name("kiln node".into())
        .stack_size(kiln_sandbox::NATIVE_STACK_BYTES)
        .spawn(work)
        .map(std::thread::JoinHandle::join)
    {
        Ok(Ok(code)) => code,
        _ => {
            eprintln!("kiln: the node's thread could not run");
            ExitCode::from(2)
        }
    }
}

fn refused(error: &anyhow::Error) -> ExitCode {
    eprintln!("kiln: {}", escaped(&format!("{error:#}")));
    ExitCode::from(2)
}

fn print(value: &impl serde::Serialize) {
    crate::out::line(serde_json::to_string_pretty(value).unwrap_or_else(|_| "null".to_owned()));
}

/// `kiln node …`.
pub fn run_node_command(command: NodeCommand) -> ExitCode {
    on_big_stack(move || match command {
        NodeCommand::Run {
            node,
            inputs,
            json,
            run,
        } => match prepare_run(&run) {
            Err(error) => refused(&error),
            Ok(setup) => match (
                read_node(&node),
                read_values(inputs.as_deref(), "input values"),
            ) {
                (Err(error), _) | (_, Err(error)) => refused(&error),
                (Ok(node), Ok(values)) => run_one(
                    &node,
                    &values,
                    &setup,
                    crate::commands::run::Output::chosen(json),
                ),
            },
        },
        NodeCommand::Check { node } => match read_node(&node) {
            Err(error) => refused(&error),
            Ok(node) => {
                // A body in TypeScript is checked as the JavaScript that runs.
                let reasons = futures::executor::block_on(check_node_typed(
                    &node,
                    crate::sandbox_process::ProcessRunner::default().stripper(),
                ));
                print(&json!({"valid": reasons.is_empty(), "errors": reasons}));
                for reason in &reasons {
                    eprintln!("kiln: {}", escaped(reason));
                }
                if reasons.is_empty() {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::FAILURE
                }
            }
        },
        NodeCommand::Author(args) => author(&args),
    })
}

/// `kiln graph …`.
pub fn run_graph_command(command: GraphCommand) -> ExitCode {
    on_big_stack(move || {
        let GraphCommand::Run {
            graph,
            inputs,
            max_concurrent,
            run,
        } = command;
        let setup = match prepare_run(&run) {
            Ok(setup) => setup,
            Err(error) => return refused(&error),
        };
        let spec: GraphSpec = match read_json(&graph, "graph").and_then(|value| {
            serde_json::from_value(value)
                .with_context(|| format!("the graph `{}` is not a graph", graph.display()))
        }) {
            Ok(spec) => spec,
            Err(error) => return refused(&error),
        };
        let built = match build_graph(spec) {
            Ok(built) => built,
            Err(issues) => {
                for issue in &issues {
                    eprintln!("kiln: {}", escaped(&issue.to_string()));
                }
                return refused(&anyhow::anyhow!(
                    "the graph `{}` was refused",
                    graph.display()
                ));
            }
        };
        let values = match read_values(inputs.as_deref(), "graph inputs") {
            Ok(values) => values,
            Err(error) => return refused(&error),
        };
        let environment = setup.environment("kiln node");
        let cancel = AbortSignal::new();
        let ran = futures::executor::block_on(run_graph(
            &built,
            &values,
            &setup.request,
            GraphSetup {
                environment: &environment,
                runner: &crate::sandbox_process::ProcessRunner::default(),
                cancel: &cancel,
                on_progress: Some(Rc::new(|node: &str, progress: &kiln_types::Progress| {
                    eprintln!("{}", crate::terminal::progress_line(Some(node), progress));
                })),
            },
            max_concurrent,
            |report| {
                eprintln!(
                    "kiln: node `{}` {} ({:.0} ms)",
                    escaped(&report.id),
                    report.status,
                    report.run.duration_ms
                )
            },
        ));
        match ran {
            Err(issues) => {
                for issue in &issues {
                    eprintln!("kiln: {}", escaped(&issue.to_string()));
                }
                ExitCode::from(2)
            }
            Ok(ran) => {
                print(&ran);
                if ran.status == Ended::Completed {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::FAILURE
                }
            }
        }
    })
}

fn prepare_run(flags: &RunFlags) -> Result<Belt> {
    Belt::read(
        String::new(),
        &flags.belt,
        &flags.gate,
        default_node_limits(),
        None,
        &crate::ModelFlags::default(),
    )
}

fn read_node(path: &Path) -> Result<CodeNode> {
    let value = read_json(path, "node")?;
    serde_json::from_value(value)
        .with_context(|| format!("the node `{}` is not a node", path.display()))
}

fn read_values(path: Option<&Path>, what: &str) -> Result<Map<String, Value>> {
    let Some(path) = path else {
        return Ok(Map::new());
    };
    match read_json(path, what)? {
        Value::Object(values) => Ok(values),
        other => bail!(
            "the {what} `{}` must be one object of values by name, not {}",
            path.display(),
            kiln_types::words::json_type(&other)
        ),
    }
}

fn run_one(
    node: &CodeNode,
    values: &Map<String, Value>,
    setup: &Belt,
    output: crate::commands::run::Output,
) -> ExitCode {
    let environment = setup.environment("kiln node");
    let ran = futures::executor::block_on(run_node(
        node,
        values,
        setup.request.clone(),
        &environment,
        &crate::sandbox_process::ProcessRunner::default(),
        AbortSignal::new(),
    ));
    match ran {
        Err(error) => refused(&anyhow::anyhow!("{error}")),
        Ok(run) => {
            if output == crate::commands::run::Output::Summary {
                print_node_summary(&run);
            } else {
                print(&run);
            }
            for warning in &run.warnings {
                eprintln!("kiln: warning: {}", escaped(&warning.to_string()));
            }
            match &run.error {
                None => ExitCode::SUCCESS,
                Some(failure)
                    if failure.code == "invalid_node" || failure.code == "invalid_inputs" =>
                {
                    eprintln!("kiln: {}", escaped(&failure.message));
                    ExitCode::from(2)
                }
                Some(failure) => {
                    eprintln!(
                        "kiln: the node failed ({}): {}",
                        escaped(&failure.code),
                        escaped(&failure.message)
                    );
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// A node's run for a person at a terminal: its outputs, then its program's
/// run as a model reads it (status, console, calls, warnings), escaped for
/// the terminal (JSON leaves C1 controls and bidirectional overrides raw).
fn print_node_summary(run: &NodeRun) {
    let outputs = serde_json::to_string_pretty(&run.outputs).unwrap_or_default();
    crate::out::line(format_args!("Outputs:\n{}", escaped(&outputs)));
    if let Some(result) = &run.result {
        crate::out::line(format_args!("\n{}", escaped(&result.text())));
    }
}

fn author_request(args: &AuthorArgs) -> Result<CodeRequest> {
    let inputs: Vec<InputSlot> = match &args.inputs {
        None => Vec::new(),
        Some(path) => {
            serde_json::from_value(read_json(path, "input slots")?).with_context(|| {
                format!(
                    "the input slots `{}` are not [{{name, type, description?}}]",
                    path.display()
                )
            })?
        }
    };
    let expected = match &args.expected {
        None => None,
        Some(spec) => {
            let Some((name, ty)) = spec.split_once(':') else {
                bail!("--expected {spec}: expected NAME:TYPE, e.g. total:number");
            };
            let ty = SlotType::parse(ty.trim())
                .map_err(|error| anyhow::anyhow!("--expected {spec}: {error}"))?;
            Some(OutputSlot {
                name: name.trim().to_owned(),
                ty,
                description: None,
            })
        }
    };
    let current = match &args.current {
        None => None,
        Some(path) => Some(read_node(path)?),
    };
    let samples = match &args.samples {
        None => None,
        Some(path) => Some(read_values(Some(path), "samples")?),
    };
    let request = CodeRequest {
        instruction: args.instruction.clone(),
        inputs,
        expected,
        current,
        samples,
        include_samples: args.include_samples,
    };
    let problems = request.problems();
    if !problems.is_empty() {
        bail!("{}", problems.join("; "));
    }
    Ok(request)
}

fn author(args: &AuthorArgs) -> ExitCode {
    let request = match author_request(args) {
        Ok(request) => request,
        Err(error) => return refused(&error),
    };
    if args.show_payload {
        print(&request.payload());
        return ExitCode::SUCCESS;
    }
    let (config, wanted) = match args.provider.read() {
        Ok(read) => read,
        Err(error) => return refused(&error),
    };
    let provider = kiln_providers::connect(config);
    let picked = futures::executor::block_on(pick_model(&*provider, &[Some(wanted.as_str())]));
    let model = match picked {
        Ok(model) => model,
        Err(why) => return refused(&anyhow::anyhow!("--model: {why}")),
    };
    let authored = futures::executor::block_on(kiln_nodes::author(
        &*provider,
        &model,
        &request,
        crate::sandbox_process::ProcessRunner::default().stripper(),
        &kiln_http::SystemClock,
        &AbortSignal::new(),
    ));
    eprintln!(
        "kiln: {}",
        serde_json::to_string(&authored.telemetry).unwrap_or_default()
    );
    print(&authored_answer(&authored));
    match &authored.result {
        Ok(_) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!(
                "kiln: no node ({}): {}",
                failure.code(),
                escaped(&failure.message())
            );
            ExitCode::FAILURE
        }
    }
}

//! `kiln`: run a program in the same Boa sandbox the browser uses, from a terminal.
//!
//! `kiln run FILE` prints the run's `tool-result/v1` object as JSON. Exit codes:
//! 0 the program completed, 1 the result is an error (threw, did not parse, a
//! tool call failed uncaught, a budget ran out), 2 the run was refused
//! (unreadable file, invalid catalog or limits).

use std::io::Read as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use std::rc::Rc;

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand};
use kiln_sandbox::catalog::Admission;
use kiln_sandbox::scripted::ScriptedTools;
use kiln_types::tool_result::ToolResult;
use kiln_types::{RunError, RunLimits, RunReport};

#[derive(Parser)]
#[command(
    name = "kiln",
    version,
    about = "Run JavaScript programs in Kiln's Boa sandbox"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a program (the body of an async function) and print its tool-result/v1 as JSON.
    Run {
        /// The program's file, or `-` for standard input.
        file: PathBuf,
        /// A JSON array of tool entries: `{name, description?, input_schema?,
        /// returns?, error?: {code, message, detail?}, delay_ms?}`.
        #[arg(long, value_name = "CATALOG.json")]
        tools: Option<PathBuf>,
        /// A JSON file of limits, e.g. `{"wall_ms": 2000}`.
        #[arg(long, value_name = "LIMITS.json")]
        limits: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run {
            file,
            tools,
            limits,
        } => match prepare(&file, tools.as_ref(), limits.as_ref()) {
            Ok(run) => {
                let warnings = run.admission.warnings.clone();
                let digest = run.admission.digest();
                let report = run_with_deadline(run);
                let summary = report.into_summary(new_run_id(), warnings, digest, true);
                print_result(&summary.into_result())
            }
            Err(error) => {
                eprintln!("error: {error:#}");
                ExitCode::from(2)
            }
        },
    }
}

/// Everything a run needs, read and checked before it starts.
struct Prepared {
    code: String,
    limits: RunLimits,
    host: ScriptedTools,
    admission: Admission,
}

fn prepare(file: &PathBuf, tools: Option<&PathBuf>, limits: Option<&PathBuf>) -> Result<Prepared> {
    let code = if file.as_os_str() == "-" {
        let mut code = String::new();
        std::io::stdin()
            .read_to_string(&mut code)
            .context("reading the program from standard input")?;
        code
    } else {
        std::fs::read_to_string(file)
            .with_context(|| format!("reading the program `{}`", file.display()))?
    };
    let limits = match limits {
        None => RunLimits::default(),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading the limits `{}`", path.display()))?;
            serde_json::from_str::<RunLimits>(&text)
                .with_context(|| format!("the limits `{}` are not valid", path.display()))?
        }
    };
    let catalog = match tools {
        None => serde_json::Value::Array(Vec::new()),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading the tool catalog `{}`", path.display()))?;
            serde_json::from_str(&text)
                .with_context(|| format!("the tool catalog `{}` is not JSON", path.display()))?
        }
    };
    let admission = Admission::admit(&catalog, "scripted").with_context(|| {
        format!(
            "the tool catalog `{}` was refused",
            tools.map(|p| p.display().to_string()).unwrap_or_default()
        )
    })?;
    // Read the scripts now, so a bad one refuses the run instead of failing a call.
    let host = ScriptedTools::from_catalog(&catalog).map_err(anyhow::Error::msg)?;
    Ok(Prepared {
        code,
        limits: limits.clamped(),
        host,
        admission,
    })
}

/// `codemode:` and 16 random hex digits.
fn new_run_id() -> String {
    let mut bytes = [0_u8; 8];
    // Without OS randomness the id is still unique enough for one process's output.
    if getrandom::fill(&mut bytes).is_err() {
        bytes = std::process::id()
            .to_le_bytes()
            .repeat(2)
            .try_into()
            .unwrap_or_default();
    }
    let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("codemode:{hex}")
}

/// Runs the program on its own thread and gives up on it at the wall budget:
/// Boa has no interrupt hook, so the process deadline is what bounds a run that
/// never yields. The abandoned thread ends with the process.
fn run_with_deadline(run: Prepared) -> RunReport {
    let started = Instant::now();
    let limits = run.limits;
    let (sender, receiver) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("kiln-sandbox".into())
        .spawn(move || {
            let report = futures::executor::block_on(kiln_sandbox::run_with_tools(
                &run.code,
                &run.limits,
                Rc::new(run.admission),
                Rc::new(run.host),
            ));
            let _ = sender.send(report);
        });
    if let Err(error) = spawned {
        return RunReport::stopped(
            RunError::new(
                kiln_types::RunErrorKind::Engine,
                format!("could not start the sandbox thread: {error}"),
            ),
            0.0,
        );
    }
    match receiver.recv_timeout(Duration::from_millis(limits.wall_ms)) {
        Ok(report) => report,
        Err(_) => RunReport::stopped(
            RunError::wall_budget(limits.wall_ms),
            started.elapsed().as_secs_f64() * 1e3,
        ),
    }
}

fn print_result(result: &ToolResult) -> ExitCode {
    match serde_json::to_string_pretty(result) {
        Ok(json) => println!("{json}"),
        Err(error) => {
            eprintln!("error: the result could not be written as JSON: {error}");
            return ExitCode::FAILURE;
        }
    }
    if result.is_error {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

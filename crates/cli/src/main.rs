//! `kiln`: run a program in the same Boa sandbox the browser uses, from a terminal.
//!
//! `kiln run FILE` prints the run report as JSON. Exit codes: 0 the program
//! completed, 1 it failed (threw, did not parse, ran out of a budget), 2 the run
//! was refused (unreadable file or limits).

use std::io::Read as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand};
use kiln_types::{RunError, RunLimits, RunOutcome, RunReport};

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
    /// Run a program (the body of an async function) and print its report as JSON.
    Run {
        /// The program's file, or `-` for standard input.
        file: PathBuf,
        /// A JSON file of limits, e.g. `{"wall_ms": 2000}`.
        #[arg(long, value_name = "LIMITS.json")]
        limits: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run { file, limits } => match prepare(&file, limits.as_ref()) {
            Ok((code, limits)) => {
                let report = run_with_deadline(code, limits);
                print_report(&report)
            }
            Err(error) => {
                eprintln!("error: {error:#}");
                ExitCode::from(2)
            }
        },
    }
}

fn prepare(file: &PathBuf, limits: Option<&PathBuf>) -> Result<(String, RunLimits)> {
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
    Ok((code, limits.clamped()))
}

/// Runs the program on its own thread and gives up on it at the wall budget:
/// Boa has no interrupt hook, so the process deadline is what bounds a run that
/// never yields. The abandoned thread ends with the process.
fn run_with_deadline(code: String, limits: RunLimits) -> RunReport {
    let started = Instant::now();
    let (sender, receiver) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("kiln-sandbox".into())
        .spawn(move || {
            let report = futures::executor::block_on(kiln_sandbox::run(&code, &limits));
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

fn print_report(report: &RunReport) -> ExitCode {
    match serde_json::to_string_pretty(report) {
        Ok(json) => println!("{json}"),
        Err(error) => {
            eprintln!("error: the report could not be written as JSON: {error}");
            return ExitCode::FAILURE;
        }
    }
    match report.outcome {
        RunOutcome::Completed { .. } => ExitCode::SUCCESS,
        RunOutcome::Failed(_) => ExitCode::FAILURE,
    }
}

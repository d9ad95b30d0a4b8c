//! `kiln eval`: suites that score an agent against a real model.
//!
//! - `codeact`: the cases of `kiln_evals::codeact`, each as a CodeAct turn and
//!   as direct tool calls, printed as a table (per case and in total:
//!   success, model turns, tokens, cost).
//! - `task-planner`: `kiln_evals::plans`' planner cases, each plan
//!   scored by its shape (tasks, width, depth, routing, no synthesis task),
//!   with the clean rate.
//! - `subtask`: `kiln_evals::plans`' sub-agent cases, scored by the
//!   answer and by whether children did the lookups.
//! - `code-gen`: `kiln_evals::codegen`'s cases, each node written by
//!   the CodePlanner and run on held-out inputs in a sandbox process;
//!   first-pass acceptance, post-repair acceptance and held-out
//!   correctness apart.

use std::process::ExitCode;
use std::rc::Rc;

use kiln_providers::{Provider, ProviderKind};

/// `kiln eval`'s suites.
#[derive(clap::Subcommand)]
pub enum EvalCommand {
    /// Score CodeAct beside direct tool calls on deterministic tasks.
    Codeact(CodeactArgs),
    /// Score the plans the task planner (create_plan) makes.
    TaskPlanner(SuiteArgs),
    /// Score how a turn hands work to sub-agents (run_subtask, agents.run).
    Subtask(SuiteArgs),
    /// Score the code nodes the CodePlanner writes (submit_code), run on
    /// held-out inputs.
    CodeGen(SuiteArgs),
}

#[derive(clap::Args)]
pub struct CodeactArgs {
    /// The model the cases run against; needed unless --list.
    #[command(flatten)]
    model: crate::ProviderFlags,
    /// Only the cases whose name matches (`*` matches anything), e.g. `shop-*`.
    #[arg(long, value_name = "GLOB", default_value = "*")]
    cases: String,
    /// Model turns each run may take.
    #[arg(long, default_value_t = 12)]
    max_turns: u32,
    /// List the cases and exit.
    #[arg(long)]
    list: bool,
}

#[derive(clap::Args)]
pub struct SuiteArgs {
    /// The model the cases run against; needed unless --list.
    #[command(flatten)]
    model: crate::ProviderFlags,
    /// Only the cases whose name matches (`*` matches anything).
    #[arg(long, value_name = "GLOB", default_value = "*")]
    cases: String,
    /// Model turns each run may take (subtask).
    #[arg(long, default_value_t = 12)]
    max_turns: u32,
    /// List the cases and exit.
    #[arg(long)]
    list: bool,
}

/// The provider and model the options name, or the sentence saying what is
/// wrong.
fn connect(
    flags: &crate::ProviderFlags,
    suite: &str,
) -> Result<(Rc<dyn Provider>, ProviderKind, String), String> {
    if flags.provider.is_none() {
        return Err(format!(
            "kiln eval {suite} needs --provider, --base-url and --model (or --list)"
        ));
    }
    let (config, model) = flags.read().map_err(|error| format!("{error:#}"))?;
    let kind = config.kind;
    Ok((kiln_providers::connect(config), kind, model))
}

pub fn run(command: &EvalCommand) -> ExitCode {
    match command {
        EvalCommand::Codeact(args) => codeact(args),
        EvalCommand::TaskPlanner(args) => task_planner(args),
        EvalCommand::Subtask(args) => subtask(args),
        EvalCommand::CodeGen(args) => code_gen(args),
    }
}

fn codeact(args: &CodeactArgs) -> ExitCode {
    let cases = match kiln_evals::codeact::cases() {
        Ok(cases) => kiln_evals::cases::select(cases, &args.cases),
        Err(why) => {
            eprintln!("error: {why}");
            return ExitCode::from(2);
        }
    };
    if cases.is_empty() {
        eprintln!(
            "error: --cases {}: no case matches (try --list)",
            args.cases
        );
        return ExitCode::from(2);
    }
    if args.list {
        for case in &cases {
            crate::out::line(format_args!(
                "{}\t{}\t{}",
                case.name, case.domain, case.objective
            ));
        }
        return ExitCode::SUCCESS;
    }
    if args.max_turns == 0 {
        eprintln!("error: --max-turns: must be at least 1");
        return ExitCode::from(2);
    }
    let (provider, kind, model) = match connect(&args.model, "codeact") {
        Ok(connected) => connected,
        Err(why) => {
            eprintln!("error: {why}");
            return ExitCode::from(2);
        }
    };
    eprintln!(
        "kiln eval codeact: {} case(s) against {} `{}`, each as CodeAct and as direct tool calls",
        cases.len(),
        kind.as_str(),
        model
    );
    let results = futures::executor::LocalPool::new().run_until(kiln_evals::codeact::run_cases(
        &cases,
        provider,
        &model,
        Rc::new(crate::sandbox_process::ProcessRunner::default()),
        args.max_turns,
    ));
    crate::out::text(crate::terminal::escaped(&kiln_evals::codeact::table(
        &results,
    )));
    ExitCode::SUCCESS
}

/// The model a suite's options name.
fn suite_model(args: &SuiteArgs, suite: &str) -> Result<(Rc<dyn Provider>, String), String> {
    if args.max_turns == 0 {
        return Err("--max-turns: must be at least 1".into());
    }
    let (provider, kind, model) = connect(&args.model, suite)?;
    eprintln!("kiln eval {suite}: against {} `{model}`", kind.as_str());
    Ok((provider, model))
}

/// Runs one suite of named cases: `--cases` picks them, `--list` names them,
/// else `run` gets the model and answers the table to print. Cases whose
/// file does not parse are an error, said as the others are.
fn suite<C>(
    args: &SuiteArgs,
    suite: &str,
    cases: Result<Vec<C>, kiln_evals::cases::CasesError>,
    named: impl Fn(&C) -> (&str, &str),
    run: impl FnOnce(&[C], Rc<dyn Provider>, &str) -> String,
) -> ExitCode {
    let cases = match cases {
        Ok(cases) => cases,
        Err(why) => {
            eprintln!("error: {why}");
            return ExitCode::from(2);
        }
    };
    let cases: Vec<C> = cases
        .into_iter()
        .filter(|case| kiln_evals::cases::wildcard(&args.cases, named(case).0))
        .collect();
    if cases.is_empty() {
        eprintln!(
            "error: --cases {}: no case matches (try --list)",
            args.cases
        );
        return ExitCode::from(2);
    }
    if args.list {
        for case in &cases {
            let (name, objective) = named(case);
            crate::out::line(format_args!("{name}\t{objective}"));
        }
        return ExitCode::SUCCESS;
    }
    let (provider, model) = match suite_model(args, suite) {
        Ok(model) => model,
        Err(why) => {
            eprintln!("error: {why}");
            return ExitCode::from(2);
        }
    };
    crate::out::text(crate::terminal::escaped(&run(&cases, provider, &model)));
    ExitCode::SUCCESS
}

fn task_planner(args: &SuiteArgs) -> ExitCode {
    suite(
        args,
        "task-planner",
        kiln_evals::plans::planner_cases(),
        |case| (case.name.as_str(), case.objective.as_str()),
        |cases, provider, model| {
            let results =
                futures::executor::LocalPool::new().run_until(kiln_evals::plans::run_planner(
                    cases,
                    provider,
                    model,
                    Rc::new(crate::sandbox_process::ProcessRunner::default()),
                ));
            kiln_evals::plans::planner_table(&results)
        },
    )
}

fn subtask(args: &SuiteArgs) -> ExitCode {
    suite(
        args,
        "subtask",
        kiln_evals::plans::subtask_cases(),
        |case| (case.name.as_str(), case.objective.as_str()),
        |cases, provider, model| {
            let results =
                futures::executor::LocalPool::new().run_until(kiln_evals::plans::run_subtasks(
                    cases,
                    provider,
                    model,
                    Rc::new(crate::sandbox_process::ProcessRunner::default()),
                    args.max_turns,
                ));
            kiln_evals::plans::subtask_table(&results)
        },
    )
}

fn code_gen(args: &SuiteArgs) -> ExitCode {
    suite(
        args,
        "code-gen",
        kiln_evals::codegen::codegen_cases(),
        |case| (case.name.as_str(), case.instruction.as_str()),
        |cases, provider, model| {
            let total = cases.len();
            let mut done = 0;
            let mut progress = |result: &kiln_evals::codegen::CodegenResult| {
                done += 1;
                eprintln!(
                    "kiln eval code-gen: [{done}/{total}] {}",
                    crate::terminal::escaped(&result.line())
                );
            };
            let results =
                futures::executor::LocalPool::new().run_until(kiln_evals::codegen::run_codegen(
                    cases,
                    &*provider,
                    model,
                    &crate::sandbox_process::ProcessRunner::default(),
                    &kiln_http::SystemClock,
                    &mut progress,
                ));
            kiln_evals::codegen::codegen_table(&results)
        },
    )
}

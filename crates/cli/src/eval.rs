//! `kiln eval codeact`: the cases of `kiln_agent::eval` against a real
//! model, each as a CodeAct turn and as direct tool calls, printed as a
//! table (per case and in total: success, model turns, tokens, cost).

use std::process::ExitCode;
use std::rc::Rc;

use kiln_providers::{ApiKey, ProviderConfig, ProviderKind};

/// `kiln eval`'s suites.
#[derive(clap::Subcommand)]
pub enum EvalCommand {
    /// Score CodeAct beside direct tool calls on deterministic tasks.
    Codeact(CodeactArgs),
}

#[derive(clap::Args)]
pub struct CodeactArgs {
    /// The wire format: openai (any OpenAI-compatible server), anthropic, ollama.
    #[arg(long)]
    provider: String,
    /// The API root.
    #[arg(long, value_name = "URL")]
    base_url: String,
    #[arg(long)]
    model: String,
    /// The environment variable holding the API key.
    #[arg(long, value_name = "VAR")]
    key_env: Option<String>,
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

pub fn run(command: &EvalCommand) -> ExitCode {
    let EvalCommand::Codeact(args) = command;
    let cases = kiln_agent::eval::select(kiln_agent::eval::cases(), &args.cases);
    if cases.is_empty() {
        eprintln!(
            "error: --cases {}: no case matches (try --list)",
            args.cases
        );
        return ExitCode::from(2);
    }
    if args.list {
        for case in &cases {
            println!("{}\t{}\t{}", case.name, case.domain, case.objective);
        }
        return ExitCode::SUCCESS;
    }
    let Some(kind) = ProviderKind::parse(&args.provider) else {
        eprintln!(
            "error: --provider {}: expected one of openai, anthropic, ollama",
            args.provider
        );
        return ExitCode::from(2);
    };
    if let Err(error) = kiln_http::check_scheme(&args.base_url) {
        eprintln!("error: --base-url: {error}");
        return ExitCode::from(2);
    }
    if args.max_turns == 0 {
        eprintln!("error: --max-turns: must be at least 1");
        return ExitCode::from(2);
    }
    let key = match &args.key_env {
        None => None,
        Some(variable) => match std::env::var(variable) {
            Ok(key) => Some(ApiKey::new(key)),
            Err(_) => {
                eprintln!(
                    "error: --key-env {variable}: the environment variable is not set (or not UTF-8)"
                );
                return ExitCode::from(2);
            }
        },
    };
    let provider = kiln_providers::connect(ProviderConfig {
        kind,
        base_url: args.base_url.clone(),
        key,
    });
    eprintln!(
        "kiln eval codeact: {} case(s) against {} `{}`, each as CodeAct and as direct tool calls",
        cases.len(),
        kind.as_str(),
        args.model
    );
    let results = futures::executor::LocalPool::new().run_until(kiln_agent::eval::run_cases(
        &cases,
        provider,
        &args.model,
        Rc::new(crate::sandbox_process::ProcessRunner),
        args.max_turns,
    ));
    print!("{}", kiln_agent::eval::table(&results));
    ExitCode::SUCCESS
}

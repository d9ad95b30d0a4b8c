//! `kiln`: run a program in the same Boa sandbox the browser uses, from a terminal.
//!
//! `kiln run FILE` prints the run's `tool-result/v1` object as JSON (on a
//! terminal, a readable summary unless `--json`). Exit codes:
//! 0 the program completed, 1 the result is an error (threw, did not parse, a
//! tool call failed uncaught, a budget ran out), 2 the run was refused
//! (unreadable file, invalid catalog or limits).
//!
//! `main.rs` is the clap root and the dispatch; each command lives in
//! `commands/` (`commands/mod.rs` names them), and what they share beside it:
//!
//! - `commands`: one module a command — `run`, `agent`, `agents`, `schedules`, `skills`, `secrets`,
//!   `chat`, `node` (and `kiln graph`), `memory`, `eval`, `mcp` (with its `mcp_http` transport).
//! - `common`: the flag groups every command flattens (the belt of tools, the gate, the
//!   model programs ask) and the one reading of them into a run's request.
//! - `sandbox_process`: a sandbox in a process of its own, speaking the sandbox protocol over
//!   its stdin and stdout, so that a run can end without ending the caller.
//! - `approve`: who answers the CLI's permission questions: the terminal, a fixed answer, or
//!   nobody.
//! - `tree`: the execution tree a terminal shows while a plan runs, folded from the turn's
//!   events.
//! - `terminal`: text from a model, a tool or a program escaped for a person's terminal.
//! - `vault`: the secrets vault's sealer natively, its key in the OS keyring.
//! - `out`: a command's output on standard output, where a reader that went away (`| head`)
//!   ends it quietly instead of a panic.

mod approve;
mod commands;
mod common;
mod out;
mod sandbox_process;
mod terminal;
mod tree;
mod vault;

use commands::{
    agent, agents, chat, eval, mcp, memory, node, run as program, schedules, secrets, skills,
};

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub(crate) use common::{
    ApproveWith, BeltFlags, GateFlags, ModelFlags, Permissions, ProviderFlags,
};

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
        #[command(flatten)]
        belt: BeltFlags,
        #[command(flatten)]
        gate: GateFlags,
        /// Print the sandbox's own report (outcome, console, calls, timings)
        /// instead of the tool-result/v1 object. For tools and benchmarks.
        #[arg(long)]
        report: bool,
        /// Print the tool-result/v1 object as JSON even on a terminal (where
        /// a readable summary is printed instead). Scripts and pipes always
        /// get JSON.
        #[arg(long)]
        json: bool,
        /// The call key: the run's id is derived from the agent and this key,
        /// so a retry with the same key names the same run (and the history
        /// keeps its whole result); without it the id is random and the result
        /// warns `keyless`.
        #[arg(long, value_name = "KEY")]
        key: Option<String>,
        #[command(flatten)]
        model: ModelFlags,
    },
    /// Agents that act by writing code: `kiln agent run "OBJECTIVE"`.
    #[command(subcommand)]
    Agent(agent::AgentCommand),
    /// Agent profiles in an on-disk store: list, show, create, edit, remove.
    Agents(agents::AgentsArgs),
    /// An agent's jobs on a cron expression: list, create, remove, and run-due, which runs
    /// what is due once (for cron, a systemd timer or a Kubernetes CronJob to drive).
    Schedules(schedules::SchedulesArgs),
    /// The skill catalog: the system skills this build ships and the store's own.
    Skills(skills::SkillsArgs),
    /// The workspace's secrets vault: list, set (a value typed once, sealed under a key in the OS
    /// keyring), remove. Never shows a value.
    Secrets(secrets::SecretsArgs),
    /// Evaluations against a real model: `kiln eval codeact`.
    #[command(subcommand)]
    Eval(eval::EvalCommand),
    /// Code nodes: `kiln node run|check|author`.
    #[command(subcommand)]
    Node(node::NodeCommand),
    /// Graphs of code nodes: `kiln graph run`.
    #[command(subcommand)]
    Graph(node::GraphCommand),
    /// Chat with an LLM provider: the reply streams to standard output, tool
    /// calls and their results are shown, and usage goes to standard error.
    Chat(chat::ChatArgs),
    /// Keep and find durable memories in an on-disk store that several
    /// processes share: save, query, list, mark, export, import.
    Memory(memory::MemoryArgs),
    /// Kiln as an MCP server: `kiln mcp serve --stdio` offers `codemode`.
    #[command(subcommand)]
    Mcp(mcp::McpCommand),
}

/// Where `--provider local` finds the model's files when `--base-url` names no
/// folder: `KILN_MODEL_DIR`, else the build's `pkg/models` in this folder, else
/// the one beside the checkout this binary was built in (`target/*/kiln`).
fn default_model_dir() -> std::path::PathBuf {
    if let Some(dir) = std::env::var_os("KILN_MODEL_DIR") {
        return dir.into();
    }
    let here = std::path::PathBuf::from("pkg").join(kiln_types::chat::IN_PROCESS_MODELS);
    if here.is_dir() {
        return here;
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.parent()?.to_path_buf()))
        .map(|checkout| {
            checkout
                .join("pkg")
                .join(kiln_types::chat::IN_PROCESS_MODELS)
        })
        .filter(|dir| dir.is_dir())
        .unwrap_or(here)
}

/// Every allocation of the process counts against a budget: a sandbox
/// process sets it to its run's memory budget; elsewhere it is unlimited.
#[global_allocator]
static ALLOCATOR: kiln_alloc::Budgeted = kiln_alloc::Budgeted;

fn main() -> ExitCode {
    if let Some(parent) = std::env::var_os(sandbox_process::PROCESS_ENV) {
        return sandbox_process::serve(&parent);
    }
    kiln_llm::native::install(default_model_dir());
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Agent(command) => agent::run(&command),
        Command::Agents(args) => agents::run(&args),
        Command::Schedules(args) => schedules::run(&args),
        Command::Skills(args) => skills::run(&args),
        Command::Secrets(args) => secrets::run(&args),
        Command::Eval(command) => eval::run(&command),
        Command::Chat(args) => chat::run(&args),
        Command::Node(command) => node::run_node_command(command),
        Command::Graph(command) => node::run_graph_command(command),
        Command::Memory(args) => memory::run(&args),
        Command::Mcp(command) => mcp::run(&command),
        Command::Run {
            file,
            belt,
            gate,
            report,
            json,
            key,
            model,
        } => {
            let output = if report {
                program::Output::Report
            } else {
                program::Output::chosen(json)
            };
            program::run(&file, &belt, &gate, key, model, output)
        }
    };
    out::status(code)
}

//! `kiln`: run a program in the same Boa sandbox the browser uses, from a terminal.
//!
//! `kiln run FILE` prints the run's `tool-result/v1` object as JSON. Exit codes:
//! 0 the program completed, 1 the result is an error (threw, did not parse, a
//! tool call failed uncaught, a budget ran out), 2 the run was refused
//! (unreadable file, invalid catalog or limits).
//!
//! One module a command, and what they share:
//!
//! - `program`: `kiln run`, a program run through `kiln_run::run_program` in this process.
//! - `agent`: `kiln agent run "OBJECTIVE"`, one agent turn of the CodeAct loop.
//! - `chat`: `kiln chat`, an interactive session over the CodeAct loop, one turn a message.
//! - `node`: `kiln node run|check|author` and `kiln graph run`: code nodes from a terminal.
//! - `memory`: `kiln memory`, durable memories from a terminal in an on-disk store.
//! - `eval`: `kiln eval`, suites that score an agent against a real model.
//! - `mcp_serve`: `kiln mcp serve`, Kiln as another agent's sandbox: an MCP server over stdio
//!   or Streamable HTTP.
//! - `mcp_http`: `kiln mcp serve --http PORT`, MCP's Streamable HTTP transport on 127.0.0.1.
//! - `sandbox_process`: a sandbox in a process of its own, speaking the sandbox protocol over
//!   its stdin and stdout, so that a run can end without ending the caller.
//! - `approve`: who answers the CLI's permission questions: the terminal, a fixed answer, or
//!   nobody.
//! - `tree`: the execution tree a terminal shows while a plan runs, folded from the turn's
//!   events.

mod agent;
mod approve;
mod chat;
mod eval;
mod mcp_http;
mod mcp_serve;
mod memory;
mod node;
mod program;
mod sandbox_process;
mod tree;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use kiln_capabilities::Mode;

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
        /// category?: read|write|execute|external (default external), returns?,
        /// error?: {code, message, detail?}, delay_ms?, person_wait_ms?}`.
        #[arg(long, value_name = "CATALOG.json")]
        tools: Option<PathBuf>,
        /// Mount an MCP server's tools (Streamable HTTP), as `NAME_<tool>`.
        /// Repeatable.
        #[arg(long, value_name = "NAME=URL")]
        mcp: Vec<String>,
        /// The permission mode: plan runs only read calls, default asks before
        /// anything else, auto allows. Default: `default` when kiln can ask on
        /// a terminal, `auto` otherwise.
        #[arg(long, value_name = "MODE")]
        permission_mode: Option<Mode>,
        /// Who answers when the ladder asks: `ask` prompts on the terminal
        /// (the headless deny when there is none), `yes` approves, `no` denies.
        #[arg(long, value_enum, default_value_t = ApproveWith::Ask)]
        approve: ApproveWith,
        /// Put the environment variable ENV (default NAME) into the run's secret
        /// scope as NAME, sent only to the listed origins when given
        /// (`API_KEY=MY_KEY@https://api.example.com`). Capabilities read it by
        /// name; the program never sees it.
        #[arg(long, value_name = "NAME[=ENV][@ORIGIN,...]")]
        secret: Vec<String>,
        /// A JSON file of limits: `js_cpu_ms`, `tool_calls`, `wall_ms`,
        /// `person_wait_ms`, `return_bytes`, `console_bytes`, `memory_bytes`.
        #[arg(long, value_name = "LIMITS.json")]
        limits: Option<PathBuf>,
        /// Print the sandbox's own report (outcome, console, calls, timings)
        /// instead of the tool-result/v1 object. For tools and benchmarks.
        #[arg(long)]
        report: bool,
        /// Print the tool-result/v1 object as JSON even on a terminal (where
        /// a readable summary is printed instead). Scripts and pipes always
        /// get JSON.
        #[arg(long)]
        json: bool,
        /// Give the program a store on disk (the one `kiln memory --store`
        /// uses): the run is recorded in its history and gets run memory,
        /// the durable memory, history and file capabilities and
        /// `workspace.*` over `DIR/files`.
        #[arg(long, value_name = "DIR")]
        store: Option<PathBuf>,
        /// Give the program the built-in `http_request`: alone, any public
        /// address; with origins (`--allow-net=http://127.0.0.1:8080,https://api.example.com`),
        /// exactly those, private or loopback ones included since they are
        /// named. Without it the program has no network. (Naming
        /// `{"name": "http_request"}` in the catalog is the same as the flag alone.)
        #[arg(long, value_name = "ORIGIN,...", num_args = 0..=1, require_equals = true, default_missing_value = "")]
        allow_net: Option<String>,
        /// Whose run it is: the history records it under this agent, and its
        /// memories are saved for it.
        #[arg(long, value_name = "NAME", default_value = "cli")]
        agent: String,
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
    Mcp(mcp_serve::McpCommand),
}

/// `--approve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ApproveWith {
    Ask,
    Yes,
    No,
}

/// The tools a program gets from the command line, as `kiln agent run` and
/// `kiln mcp serve` take them (`kiln run` takes the same flags, each described
/// at more length there).
#[derive(clap::Args, Clone)]
pub(crate) struct BeltFlags {
    /// Scripted tools: a JSON array of tool entries, as for `kiln run --tools`.
    #[arg(long, value_name = "CATALOG.json")]
    pub(crate) tools: Option<PathBuf>,
    /// Mount an MCP server's tools (Streamable HTTP), as `NAME_<tool>`. Repeatable.
    #[arg(long, value_name = "NAME=URL")]
    pub(crate) mcp: Vec<String>,
    /// A store on disk: each run is a job in its history, with run memory, the
    /// durable memory, history and file tools, and `workspace.*` over `DIR/files`.
    #[arg(long, value_name = "DIR")]
    pub(crate) store: Option<PathBuf>,
    /// Give programs `http_request`: alone, any public address; with origins,
    /// exactly those (private or loopback ones included, since they are named).
    #[arg(long, value_name = "ORIGIN,...", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub(crate) allow_net: Option<String>,
}

/// The model a program's `tools.model` and `tools.classify` ask, as `kiln run`
/// and `kiln mcp serve` take it: without `--provider`, programs have no such
/// tools.
#[derive(clap::Args, Clone, Default)]
pub(crate) struct ModelFlags {
    /// Give programs `tools.model` and `tools.classify`, asking this provider
    /// (its wire format: openai, anthropic, ollama; or local, Kiln's own small
    /// model). Needs --base-url and --model, but for local.
    #[arg(long, value_name = "KIND")]
    pub(crate) provider: Option<String>,
    /// The provider's API root, e.g. `https://api.openai.com/v1`.
    #[arg(long, value_name = "URL", requires = "provider")]
    pub(crate) base_url: Option<String>,
    /// The model id programs' model calls ask.
    #[arg(long, requires = "provider")]
    pub(crate) model: Option<String>,
    /// The environment variable holding the provider's API key (never the key).
    #[arg(long, value_name = "VAR", requires = "provider")]
    pub(crate) key_env: Option<String>,
    /// What one run's model calls may use in all: `calls=N,tokens=N,usd=X`, any
    /// of them (default 10 calls, 20,000 tokens, $0.05; at most 200, 1,000,000, $5).
    #[arg(long, value_name = "calls=N,tokens=N,usd=X", requires = "provider")]
    pub(crate) model_budget: Option<String>,
}

impl ModelFlags {
    /// The run request's `model` field, checked (the key read from its
    /// variable); `None` without `--provider`.
    pub(crate) fn setup(&self) -> anyhow::Result<Option<serde_json::Value>> {
        let Some(kind) = &self.provider else {
            return Ok(None);
        };
        let config = agent::provider_config(
            kind,
            self.base_url.as_deref().unwrap_or(""),
            self.key_env.as_deref(),
        )?;
        let model = agent::model_id(&config, self.model.as_deref().unwrap_or(""))?;
        let mut provider = serde_json::json!({"kind": kind, "base_url": config.base_url});
        if let Some(key) = &config.key {
            provider["key"] = serde_json::Value::String(key.expose().to_owned());
        }
        let mut setup = serde_json::json!({"provider": provider, "model": model});
        if let Some(budget) = &self.model_budget {
            let mut fields = serde_json::Map::new();
            for part in budget
                .split(',')
                .map(str::trim)
                .filter(|part| !part.is_empty())
            {
                let Some((name, value)) = part.split_once('=') else {
                    anyhow::bail!(
                        "--model-budget {budget}: `{part}` is not NAME=VALUE (calls=N,tokens=N,usd=X)"
                    );
                };
                let value: serde_json::Value =
                    serde_json::from_str(value.trim()).map_err(|_| {
                        anyhow::anyhow!("--model-budget {budget}: `{part}` has no number")
                    })?;
                fields.insert(name.trim().to_owned(), value);
            }
            kiln_run::ModelBudget::from_value(&serde_json::Value::Object(fields.clone()))
                .map_err(|why| anyhow::anyhow!("--model-budget {budget}: {why}"))?;
            setup["budget"] = serde_json::Value::Object(fields);
        }
        Ok(Some(setup))
    }
}

/// The permission options of one run, as parsed.
#[derive(Clone)]
pub(crate) struct Permissions {
    mcp: Vec<String>,
    mode: Option<Mode>,
    approve: ApproveWith,
    secrets: Vec<String>,
    /// `--store DIR`: the run's memory, history and files.
    store: Option<PathBuf>,
    /// `--allow-net[=ORIGIN,...]`: `Some("")` for the flag alone.
    allow_net: Option<String>,
    agent: String,
    key: Option<String>,
    /// `tools.model` and `tools.classify`'s provider, model and budget.
    model: ModelFlags,
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
    match cli.command {
        Command::Agent(command) => agent::run(&command),
        Command::Eval(command) => eval::run(&command),
        Command::Chat(args) => chat::run(&args),
        Command::Node(command) => node::run_node_command(command),
        Command::Graph(command) => node::run_graph_command(command),
        Command::Memory(args) => memory::run(&args),
        Command::Mcp(command) => mcp_serve::run(&command),
        Command::Run {
            file,
            tools,
            limits,
            report,
            json,
            mcp,
            permission_mode,
            approve,
            secret,
            store,
            allow_net,
            agent,
            key,
            model,
        } => {
            let permissions = Permissions {
                mcp,
                mode: permission_mode,
                approve,
                secrets: secret,
                store,
                allow_net,
                agent,
                key,
                model,
            };
            let output = if report {
                program::Output::Report
            } else {
                program::Output::chosen(json)
            };
            program::run(&file, tools.as_ref(), limits.as_ref(), output, &permissions)
        }
    }
}

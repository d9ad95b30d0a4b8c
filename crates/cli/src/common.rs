//! What the commands share: the flag groups each one flattens — the belt of
//! tools ([`BeltFlags`]), the gate and limits ([`GateFlags`]), the model a
//! program asks ([`ModelFlags`]) — declared once, and [`Belt::read`], the one
//! reading of them into a run's request, its scripted catalog and who answers.

use std::path::PathBuf;

use anyhow::{Context as _, Result};
use clap::ValueEnum;
use kiln_capabilities::Mode;
use kiln_run::{Environment, RunRequest};
use kiln_types::RunLimits;
use serde_json::Value;

use crate::commands::run::Asker;

/// `--approve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ApproveWith {
    Ask,
    Yes,
    No,
}

/// The tools a program gets from the command line: `kiln run`, `kiln node`,
/// `kiln graph`, `kiln agent`, `kiln chat` and `kiln mcp serve` take them.
#[derive(clap::Args, Clone)]
pub(crate) struct BeltFlags {
    /// Scripted tools: a JSON array of tool entries, `{name, description?,
    /// input_schema?, category?: read|write|execute|external (default external),
    /// returns?, error?: {code, message, detail?}, delay_ms?, person_wait_ms?}`;
    /// `{"name": "http_request"}` alone asks for the network as --allow-net does.
    #[arg(long, value_name = "CATALOG.json")]
    pub(crate) tools: Option<PathBuf>,
    /// Mount an MCP server's tools (Streamable HTTP), as `NAME_<tool>`. Repeatable.
    #[arg(long, value_name = "NAME=URL")]
    pub(crate) mcp: Vec<String>,
    /// A store on disk (the one `kiln memory --store` uses): each run is a job in
    /// its history, with run memory, the durable memory, history and file tools,
    /// and `workspace.*` over `DIR/files`.
    #[arg(long, value_name = "DIR")]
    pub(crate) store: Option<PathBuf>,
    /// Give programs `http_request`: alone, any public address; with origins
    /// (`--allow-net=http://127.0.0.1:8080,https://api.example.com`), exactly
    /// those (private or loopback ones included, since they are named). Without
    /// it programs have no network.
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
        let config = crate::commands::agent::provider_config(
            kind,
            self.base_url.as_deref().unwrap_or(""),
            self.key_env.as_deref(),
        )?;
        let model = crate::commands::agent::model_id(&config, self.model.as_deref().unwrap_or(""))?;
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

/// Which model a turn talks to, declared once: `kiln agent run`, `kiln
/// chat`, `kiln node author` and `kiln eval` flatten it.
#[derive(clap::Args, Clone)]
pub(crate) struct ProviderFlags {
    /// The wire format: openai (any OpenAI-compatible server), anthropic, ollama;
    /// or local, Kiln's own small model (SmolLM2-135M) run in this process.
    #[arg(long)]
    pub(crate) provider: Option<String>,
    /// The API root, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8080/v1`;
    /// for local, the folder of the model's files (default: the build's pkg/models).
    #[arg(long, value_name = "URL", default_value = "")]
    pub(crate) base_url: String,
    /// The model id, as the provider's model list names it (local's is its own).
    #[arg(long, default_value = "")]
    pub(crate) model: String,
    /// The environment variable holding the API key (never the key itself).
    #[arg(long, value_name = "VAR")]
    pub(crate) key_env: Option<String>,
}

impl ProviderFlags {
    /// The provider and the model id the flags name, checked before
    /// anything is sent.
    pub(crate) fn read(&self) -> anyhow::Result<(kiln_providers::ProviderConfig, String)> {
        let Some(kind) = &self.provider else {
            anyhow::bail!("--provider: give one of openai, anthropic, ollama, local");
        };
        let config =
            crate::commands::agent::provider_config(kind, &self.base_url, self.key_env.as_deref())?;
        let model = crate::commands::agent::model_id(&config, &self.model)?;
        Ok((config, model))
    }
}

/// How a run is held, from the command line: its permission mode, who
/// answers the ladder, its secrets, its limits and whose run it is.
#[derive(clap::Args, Clone)]
pub(crate) struct GateFlags {
    /// The permission mode: plan runs only read calls, default asks before
    /// anything else, auto allows. Default: `default` when kiln can ask on
    /// a terminal, `auto` otherwise.
    #[arg(long, value_name = "MODE")]
    pub(crate) permission_mode: Option<Mode>,
    /// Who answers when the ladder asks: `ask` prompts on the terminal
    /// (the headless deny when there is none), `yes` approves, `no` denies.
    #[arg(long, value_enum, default_value_t = ApproveWith::Ask)]
    pub(crate) approve: ApproveWith,
    /// Put the environment variable ENV (default NAME) into the run's secret
    /// scope as NAME, sent only to the listed origins when given
    /// (`API_KEY=MY_KEY@https://api.example.com`). Capabilities read it by
    /// name; the program never sees it.
    #[arg(long, value_name = "NAME[=ENV][@ORIGIN,...]")]
    pub(crate) secret: Vec<String>,
    /// A JSON file of each program's limits: `js_cpu_ms`, `tool_calls`,
    /// `wall_ms`, `person_wait_ms`, `return_bytes`, `console_bytes`,
    /// `memory_bytes`, `fetch_calls`, `fetch_body_bytes`, `fetch_timeout_ms`.
    #[arg(long, value_name = "LIMITS.json")]
    pub(crate) limits: Option<PathBuf>,
    /// Whose runs they are: the history records them under this agent, and
    /// its memories are saved for it.
    #[arg(long, value_name = "NAME", default_value = "cli")]
    pub(crate) agent: String,
}

/// A run's belt and gate read and checked, before anything runs: the request
/// (with its program when there is one), the scripted catalog, who answers,
/// the store.
pub(crate) struct Belt {
    pub(crate) request: RunRequest,
    pub(crate) catalog: Value,
    pub(crate) asker: Asker,
    pub(crate) store: Option<PathBuf>,
}

impl Belt {
    /// Reads the flags: the scripted catalog checked, the limits (`default`
    /// without `--limits`), the run request by the parser every entrance
    /// shares, a store that cannot open refused now rather than mid-run.
    pub(crate) fn read(
        code: String,
        belt: &BeltFlags,
        gate: &GateFlags,
        default_limits: RunLimits,
        key: Option<String>,
        model: &ModelFlags,
    ) -> Result<Self> {
        let (catalog, catalog_net, _) = crate::commands::run::check_catalog(belt.tools.as_ref())?;
        let limits = match &gate.limits {
            None => default_limits,
            Some(path) => serde_json::from_value(crate::commands::run::read_json(path, "limits")?)
                .with_context(|| format!("the limits `{}` are not valid", path.display()))?,
        };
        let permissions = Permissions {
            mcp: belt.mcp.clone(),
            mode: gate.permission_mode,
            secrets: gate.secret.clone(),
            allow_net: belt.allow_net.clone(),
            agent: gate.agent.clone(),
            key,
            model: model.clone(),
        };
        let request = crate::commands::run::request_of(code, limits, &permissions, catalog_net)?;
        if let Some(dir) = &belt.store {
            crate::commands::run::open_store(dir)
                .with_context(|| format!("--store {}", dir.display()))?;
        }
        let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
        Ok(Self {
            request,
            catalog,
            asker: Asker::new(gate.approve, terminal),
            store: belt.store.clone(),
        })
    }

    /// Where the runs of `entrance` over this belt are assembled.
    pub(crate) fn environment(&self, entrance: &str) -> Environment {
        crate::commands::run::environment(
            entrance,
            self.catalog.clone(),
            self.asker,
            self.store.as_deref(),
        )
    }
}

/// The permission options of one run, as parsed.
#[derive(Clone)]
pub(crate) struct Permissions {
    pub(crate) mcp: Vec<String>,
    pub(crate) mode: Option<Mode>,
    pub(crate) secrets: Vec<String>,
    /// `--allow-net[=ORIGIN,...]`: `Some("")` for the flag alone.
    pub(crate) allow_net: Option<String>,
    pub(crate) agent: String,
    pub(crate) key: Option<String>,
    /// `tools.model` and `tools.classify`'s provider, model and budget.
    pub(crate) model: ModelFlags,
}

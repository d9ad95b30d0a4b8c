//! `kiln chat`: one conversation with an LLM provider, streamed to the terminal. The
//! model's tool calls walk the same ladder as a program's (`Dispatcher::call`), and their
//! results go back to the model until it answers without one.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;

use anyhow::{Context as _, Result, bail};
use futures::StreamExt as _;
use kiln_capabilities::HeldSignal;
use kiln_providers::budget::{BudgetLimits, RunBudget};
use kiln_providers::cost::PriceCatalog;
use kiln_providers::{
    ApiKey, ChatOptions, ChatRequest, Event, Message, ProviderConfig, ProviderKind, StopReason,
    ToolDef,
};
use kiln_types::RunLimits;
use kiln_types::protocol::CallRequest;

use kiln_capabilities::Mode;

use crate::{ApproveWith, Permissions};

/// `kiln chat`'s options.
#[derive(clap::Args)]
pub struct ChatArgs {
    /// The wire format: openai (any OpenAI-compatible server), anthropic, ollama.
    #[arg(long)]
    provider: String,
    /// The API root, e.g. https://api.openai.com/v1, https://api.anthropic.com,
    /// http://127.0.0.1:11434.
    #[arg(long, value_name = "URL")]
    base_url: String,
    /// The model id, as the provider's model list names it.
    #[arg(long)]
    model: String,
    /// The environment variable holding the API key (never the key itself).
    #[arg(long, value_name = "VAR")]
    key_env: Option<String>,
    /// Tools the model may call, as for `kiln run` (they walk the same permission ladder).
    #[arg(long, value_name = "CATALOG.json")]
    tools: Option<PathBuf>,
    /// A system prompt.
    #[arg(long)]
    system: Option<String>,
    #[arg(long, default_value_t = 1024)]
    max_tokens: u32,
    /// Turns in all, tool-call rounds included.
    #[arg(long, default_value_t = 8)]
    max_turns: u32,
    /// A cap on the conversation's cost in USD (each turn reserves its worst case first).
    #[arg(long, value_name = "USD")]
    max_usd: Option<f64>,
    /// Print every stream event as a JSON line instead of the text.
    #[arg(long)]
    events: bool,
    /// The permission mode for the model's tool calls (as for `kiln run`).
    #[arg(long, value_name = "MODE")]
    permission_mode: Option<Mode>,
    /// Who answers when the ladder asks (as for `kiln run`).
    #[arg(long, value_enum, default_value_t = ApproveWith::Ask)]
    approve: ApproveWith,
    /// The first message.
    prompt: String,
}

impl ChatArgs {
    fn permissions(&self) -> Permissions {
        Permissions {
            mcp: Vec::new(),
            mode: self.permission_mode,
            approve: self.approve,
            secrets: Vec::new(),
            store: None,
        }
    }
}

fn tool_defs(catalog: &serde_json::Value) -> Vec<ToolDef> {
    catalog
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .filter_map(|entry| {
                    Some(ToolDef {
                        name: entry.get("name")?.as_str()?.to_owned(),
                        description: entry
                            .get("description")
                            .and_then(serde_json::Value::as_str)
                            .unwrap_or("")
                            .to_owned(),
                        input_schema: entry
                            .get("input_schema")
                            .cloned()
                            .unwrap_or_else(|| serde_json::json!({"type": "object"})),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Everything checked before anything is sent: exit 2 on a problem.
fn prepare(args: &ChatArgs) -> Result<(ProviderConfig, serde_json::Value)> {
    let Some(kind) = ProviderKind::parse(&args.provider) else {
        bail!(
            "--provider {}: expected one of openai, anthropic, ollama",
            args.provider
        );
    };
    kiln_http::check_scheme(&args.base_url)
        .map_err(|error| anyhow::anyhow!("--base-url: {error}"))?;
    if args.model.trim().is_empty() {
        bail!("--model: give the model id (the provider's model list has them)");
    }
    if args.max_tokens == 0 {
        bail!("--max-tokens: must be at least 1");
    }
    if let Some(max_usd) = args.max_usd
        && !(max_usd.is_finite() && max_usd >= 0.0)
    {
        bail!("--max-usd {max_usd}: must be a non-negative number of dollars");
    }
    let key = match &args.key_env {
        None => None,
        Some(variable) => Some(ApiKey::new(std::env::var(variable).map_err(|_| {
            anyhow::anyhow!(
                "--key-env {variable}: the environment variable is not set (or not UTF-8)"
            )
        })?)),
    };
    let catalog = match &args.tools {
        None => serde_json::Value::Array(Vec::new()),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading the tool catalog `{}`", path.display()))?;
            serde_json::from_str(&text)
                .with_context(|| format!("the tool catalog `{}` is not JSON", path.display()))?
        }
    };
    Ok((
        ProviderConfig {
            kind,
            base_url: args.base_url.clone(),
            key,
        },
        catalog,
    ))
}

pub fn run(args: &ChatArgs) -> ExitCode {
    let prepared = prepare(args).and_then(|(config, catalog)| {
        let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let ladder = crate::ladder(&args.permissions(), "kiln chat", terminal)?;
        Ok((config, catalog, ladder))
    });
    let (config, catalog, ladder) = match prepared {
        Ok(prepared) => prepared,
        Err(error) => {
            eprintln!("error: {error:#}");
            return ExitCode::from(2);
        }
    };
    let built = ladder.build(&catalog, RunLimits::default(), "");
    let (dispatcher, _admission, servers, _job) = match built {
        Ok(built) => built,
        Err(error) => {
            eprintln!("error: the tool catalog was refused: {error}");
            return ExitCode::from(2);
        }
    };
    let mut pool = futures::executor::LocalPool::new();
    let code = pool.run_until(converse(args, config, &catalog, &dispatcher));
    for server in servers {
        let _ = pool.run_until(server.client.close());
    }
    code
}

async fn converse(
    args: &ChatArgs,
    config: ProviderConfig,
    catalog: &serde_json::Value,
    dispatcher: &kiln_capabilities::Dispatcher,
) -> ExitCode {
    let provider = kiln_providers::connect(config);
    let budget = RunBudget::new(
        BudgetLimits {
            max_usd: args.max_usd,
            max_turns: Some(args.max_turns),
            ..BudgetLimits::default()
        },
        Rc::new(PriceCatalog::builtin()),
        Rc::new(kiln_http::now_ms),
    );
    // The model is offered the catalog's tools only (the registry also holds the
    // built-ins, which a program may reach but a chat did not ask for).
    let offered: Vec<&str> = catalog
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .filter_map(|entry| entry.get("name")?.as_str())
                .collect()
        })
        .unwrap_or_default();
    let tools: Vec<ToolDef> = tool_defs(&dispatcher.catalog())
        .into_iter()
        .filter(|tool| offered.contains(&tool.name.as_str()))
        .collect();
    let mut messages = Vec::new();
    if let Some(system) = &args.system {
        messages.push(Message::System {
            text: system.clone(),
        });
    }
    messages.push(Message::User {
        text: args.prompt.clone(),
    });
    let mut out = std::io::stdout().lock();
    let mut call_number = 0_u32;
    // Whether the last text printed left the cursor mid-line.
    let mut mid_line = false;
    loop {
        let request = ChatRequest {
            messages: messages.clone(),
            tools: tools.clone(),
            options: ChatOptions {
                max_tokens: args.max_tokens,
                ..ChatOptions::new(args.model.clone())
            },
        };
        let mut stream =
            kiln_providers::turn(provider.as_ref(), request, Some(budget.clone()), None);
        let mut done = None;
        while let Some(item) = stream.next().await {
            let event = match item {
                Ok(event) => event,
                Err(error) => {
                    if mid_line {
                        let _ = writeln!(out);
                    }
                    eprintln!("error [{}]: {error}", error.code());
                    return ExitCode::from(1);
                }
            };
            if args.events {
                let _ = writeln!(out, "{}", serde_json::to_string(&event).unwrap_or_default());
            } else {
                match &event {
                    Event::TextDelta { text } => {
                        let _ = write!(out, "{text}");
                        mid_line = !text.ends_with('\n');
                    }
                    Event::ToolCallEnd { call, .. } => {
                        if mid_line {
                            let _ = writeln!(out);
                            mid_line = false;
                        }
                        let _ = writeln!(out, "[tool call] {} {}", call.name, call.arguments);
                    }
                    _ => {}
                }
            }
            let _ = out.flush();
            if let Event::Done { message } = event {
                done = Some(message);
            }
        }
        let Some(message) = done else {
            eprintln!("error: the turn ended without its final message");
            return ExitCode::from(1);
        };
        let stop = message
            .stop
            .clone()
            .map_or(StopReason::Other("none".into()), |stop| stop.reason);
        if stop.is_refusal() {
            if mid_line {
                let _ = writeln!(out);
            }
            let why = message
                .stop
                .as_ref()
                .and_then(|stop| stop.message.clone())
                .unwrap_or_default();
            eprintln!("kiln chat: stopped ({}): {why}", stop.as_str());
            summary(&budget);
            return ExitCode::from(1);
        }
        if message.tool_calls.is_empty() {
            if mid_line {
                let _ = writeln!(out);
            }
            summary(&budget);
            return ExitCode::SUCCESS;
        }
        messages.push(Message::Assistant {
            text: message.text.clone(),
            tool_calls: message.tool_calls.clone(),
        });
        for call in &message.tool_calls {
            call_number += 1;
            let held: HeldSignal = Rc::new(|_| {});
            let reply = dispatcher
                .call(
                    CallRequest {
                        call_number,
                        tool: call.name.clone(),
                        args: call.arguments.clone(),
                    },
                    held,
                )
                .await;
            let (content, is_error) = match reply {
                Ok(value) => (value.to_string(), false),
                Err(failure) => (
                    serde_json::json!({"error": {"code": failure.code, "message": failure.message}})
                        .to_string(),
                    true,
                ),
            };
            if !args.events {
                let label = if is_error {
                    "tool error"
                } else {
                    "tool result"
                };
                let _ = writeln!(out, "[{label}] {} {content}", call.name);
            }
            messages.push(Message::Tool {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content,
                is_error,
            });
        }
    }
}

/// What the conversation used, on standard error.
fn summary(budget: &RunBudget) {
    let spend = budget.spend();
    // Counts are the provider's numbers: added without overflow, whatever they are.
    let (input, output) = spend
        .calls
        .iter()
        .fold((0_u64, 0_u64), |(input, output), call| {
            (
                input.saturating_add(call.usage.input_tokens),
                output.saturating_add(call.usage.output_tokens),
            )
        });
    let estimated = if spend.calls.iter().any(|call| call.estimated) {
        " (estimated: the provider reported no usage)"
    } else {
        ""
    };
    eprintln!(
        "kiln chat: {} {}, {input} input + {output} output tokens{estimated}, {}${:.6}",
        spend.turns,
        if spend.turns == 1 { "turn" } else { "turns" },
        if spend.lower_bound { "at least " } else { "" },
        spend.spent_usd
    );
}

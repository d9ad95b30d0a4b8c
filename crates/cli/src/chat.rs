//! `kiln chat`: one conversation with an LLM provider, streamed to the terminal. The
//! model's tool calls walk the same ladder as a program's (`Dispatcher::call`), and their
//! results go back to the model until it answers without one: the loop is
//! `kiln_agent::chat::converse`; this module prints its events.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;

use anyhow::{Context as _, Result, bail};
use kiln_agent::RunRequest;
use kiln_agent::chat::{ChatEnd, ChatEvent, Conversation, tool_defs};
use kiln_capabilities::Mode;
use kiln_providers::budget::{BudgetLimits, RunBudget};
use kiln_providers::cost::PriceCatalog;
use kiln_providers::{ApiKey, ChatOptions, Event, Message, ProviderConfig, ProviderKind};

use crate::ApproveWith;
use crate::program::Asker;

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
    let mut registry = kiln_capabilities::Registry::new();
    kiln_capabilities::scripted::add_catalog(&mut registry, &catalog, "scripted")
        .map_err(|error| anyhow::anyhow!("the tool catalog was refused: {error}"))?;
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
    let (config, catalog) = match prepare(args) {
        Ok(prepared) => prepared,
        Err(error) => {
            eprintln!("error: {error:#}");
            return ExitCode::from(2);
        }
    };
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let asker = Asker::new(args.approve, terminal);
    // The model is offered the catalog's tools only, through the same ladder
    // a program's calls walk.
    let offered: Vec<String> = catalog
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .filter_map(|entry| Some(entry.get("name")?.as_str()?.to_owned()))
                .collect()
        })
        .unwrap_or_default();
    let environment = crate::program::environment("kiln chat", catalog, asker, None, None);
    let mut request = RunRequest::new("");
    request.mode = args.permission_mode;
    let mut pool = futures::executor::LocalPool::new();
    let ladder = match pool.run_until(kiln_agent::ladder::assemble(&request, &environment)) {
        Ok(ladder) => ladder,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    let code = pool.run_until(converse(args, config, &offered, &ladder.dispatcher));
    for server in ladder.servers {
        let _ = pool.run_until(server.client.close());
    }
    code
}

async fn converse(
    args: &ChatArgs,
    config: ProviderConfig,
    offered: &[String],
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
        Rc::new(kiln_http::SystemClock),
    );
    let mut messages = Vec::new();
    if let Some(system) = &args.system {
        messages.push(Message::System {
            text: system.clone(),
        });
    }
    messages.push(Message::User {
        text: args.prompt.clone(),
    });
    let conversation = Conversation {
        messages,
        tools: tool_defs(&dispatcher.catalog(), offered),
        options: ChatOptions {
            max_tokens: args.max_tokens,
            ..ChatOptions::new(args.model.clone())
        },
    };
    let mut printer = Printer {
        out: std::io::stdout().lock(),
        events: args.events,
        mid_line: false,
    };
    let outcome = kiln_agent::chat::converse(
        provider.as_ref(),
        conversation,
        budget.clone(),
        dispatcher,
        None,
        &mut |event| printer.show(&event),
    )
    .await;
    printer.end_line();
    match outcome.end {
        ChatEnd::Answered(_) => {
            summary(&budget);
            ExitCode::SUCCESS
        }
        ChatEnd::Stopped(stop) => {
            eprintln!(
                "kiln chat: stopped ({}): {}",
                stop.reason.as_str(),
                stop.message.unwrap_or_default()
            );
            summary(&budget);
            ExitCode::from(1)
        }
        ChatEnd::Failed(error) => {
            eprintln!("error [{}]: {error}", error.code());
            ExitCode::from(1)
        }
        ChatEnd::Incomplete => {
            eprintln!("error: the turn ended without its final message");
            ExitCode::from(1)
        }
    }
}

/// Shows a conversation's events on standard output: the text as it streams
/// and a line per tool call and result, or every event as a JSON line.
struct Printer<W: Write> {
    out: W,
    events: bool,
    /// Whether the last text printed left the cursor mid-line.
    mid_line: bool,
}

impl<W: Write> Printer<W> {
    fn end_line(&mut self) {
        if self.mid_line {
            let _ = writeln!(self.out);
            self.mid_line = false;
        }
    }

    fn show(&mut self, event: &ChatEvent) {
        match event {
            ChatEvent::Stream(event) if self.events => {
                let _ = writeln!(
                    self.out,
                    "{}",
                    serde_json::to_string(event).unwrap_or_default()
                );
            }
            ChatEvent::Stream(Event::TextDelta { text }) => {
                let _ = write!(self.out, "{text}");
                self.mid_line = !text.ends_with('\n');
            }
            ChatEvent::Stream(Event::ToolCallEnd { call, .. }) => {
                self.end_line();
                let _ = writeln!(self.out, "[tool call] {} {}", call.name, call.arguments);
            }
            ChatEvent::Stream(_) => {}
            ChatEvent::ToolResult { .. } if self.events => {}
            ChatEvent::ToolResult {
                call,
                content,
                is_error,
            } => {
                let label = if *is_error {
                    "tool error"
                } else {
                    "tool result"
                };
                let _ = writeln!(self.out, "[{label}] {} {content}", call.name);
            }
        }
        let _ = self.out.flush();
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

//! `kiln chat`: an interactive session over the CodeAct loop — each message
//! is one agent turn (`kiln_agent::run_agent`, as `kiln agent run`
//! runs it), and the next turn continues from the thread the last one left
//! (its calls answered, a long thread compacted). Between turns, commands:
//! `/help`, `/new`, `/clear`, `/compact`, `/model [ID]`, `/provider [KIND URL
//! [KEY_ENV]]`, `/tools`, `/mode [plan|default|auto]`, `/exit`.
//!
//! A PROMPT argument, or a prompt piped in on stdin, is one turn: its answer
//! on stdout, its progress and usage on stderr, and the exit code of `kiln
//! agent run` (0 answered, 1 a stop or failure, 2 bad flags). With a
//! terminal on stdin (or `--interactive`, which reads the session's lines
//! from stdin whatever it is) it is a session, which ends at `/exit` or the
//! end of input. Ctrl-C stops the turn going on; at the prompt it ends the
//! session.

use std::io::{BufRead as _, IsTerminal as _, Read as _, Write as _};
use std::process::ExitCode;

use kiln_agent::{compaction_row, split_point, summarize_thread};
use kiln_providers::Message;
use kiln_providers::budget::{BudgetLimits, RunBudget};
use kiln_providers::cost::PriceCatalog;
use kiln_types::agent::StopReason;

use crate::commands::agent::{Interrupt, Session, SessionArgs, provider_config};
use crate::terminal::escaped;

/// `kiln chat`'s options.
#[derive(clap::Args)]
pub struct ChatArgs {
    /// The first message. Without it, a prompt piped in on stdin is one
    /// turn, and a terminal on stdin starts a session.
    prompt: Option<String>,
    /// A session whatever stdin is: each line is a message or a command
    /// (after PROMPT, when there is one).
    #[arg(long)]
    interactive: bool,
    #[command(flatten)]
    session: SessionArgs,
}

const HELP: &str = "\
Each message is one agent turn: the model acts by writing programs that call the session's tools.
  /help                         this list
  /new                          start a new conversation (the last one stays in the store's history)
  /clear                        start a new conversation and clear the screen
  /compact                      summarize the conversation before its last turn, now
  /model [ID]                   show the model and the ones the provider lists, or switch to ID
  /provider [KIND URL [VAR]]    show the provider, or switch (KIND: openai, anthropic, ollama;
                                VAR: the environment variable holding its key)
  /tools                        list the tools a turn has
  /mode [plan|default|auto]     show the permission mode, or switch (plan: look and plan,
                                nothing runs; default: ask first; auto: run what is allowed)
  /exit                         leave (so does the end of input; Ctrl-C at the prompt)
Ctrl-C during a turn stops it.";

pub fn run(args: &ChatArgs) -> ExitCode {
    let mut session = match Session::prepare(&args.session) {
        Ok(session) => session,
        Err(error) => {
            eprintln!("error: {error:#}");
            return ExitCode::from(2);
        }
    };
    let interrupt = Interrupt::install();
    let mut pool = futures::executor::LocalPool::new();
    let stdin = std::io::stdin();
    if args.interactive || (args.prompt.is_none() && stdin.is_terminal()) {
        let mut chat = Chat {
            session: &mut session,
            pool: &mut pool,
            interrupt: &interrupt,
            messages: Vec::new(),
        };
        return chat.serve(args.prompt.as_deref());
    }
    let prompt = match &args.prompt {
        Some(prompt) => prompt.clone(),
        None => {
            let mut text = String::new();
            if let Err(error) = stdin.lock().read_to_string(&mut text) {
                eprintln!("error: the prompt on stdin could not be read: {error}");
                return ExitCode::from(2);
            }
            text
        }
    };
    if prompt.trim().is_empty() {
        eprintln!("error: the prompt is empty: give one, pipe one in, or run in a terminal");
        return ExitCode::from(2);
    }
    let messages = vec![Message::User { text: prompt }];
    match session.turn(&mut pool, &interrupt, messages, None, "kiln chat") {
        Ok(outcome) => session.finish(&outcome.result, "kiln chat"),
        Err(error) => {
            eprintln!("error: {}", escaped(error.as_ref()));
            ExitCode::from(2)
        }
    }
}

/// What a command asks of the session loop.
enum Next {
    Go,
    Exit,
}

/// A session: its settings and the conversation so far.
struct Chat<'a> {
    session: &'a mut Session,
    pool: &'a mut futures::executor::LocalPool,
    interrupt: &'a Interrupt,
    /// The thread as the model saw it last: what the next turn sends.
    messages: Vec<Message>,
}

impl Chat<'_> {
    fn serve(&mut self, first: Option<&str>) -> ExitCode {
        eprintln!(
            "kiln chat · {} at {} · /help lists the commands, /exit leaves",
            self.session.model, self.session.provider.base_url
        );
        if let Some(first) = first.filter(|first| !first.trim().is_empty()) {
            self.say(first.to_owned());
        }
        let stdin = std::io::stdin();
        let mut lines = stdin.lock();
        loop {
            eprint!("› ");
            let _ = std::io::stderr().flush();
            let mut line = String::new();
            self.interrupt.at_prompt(true);
            let read = lines.read_line(&mut line);
            self.interrupt.at_prompt(false);
            match read {
                Ok(0) => {
                    eprintln!();
                    break;
                }
                Ok(_) => {}
                Err(error) => {
                    eprintln!("kiln chat: the next line could not be read ({error}); leaving");
                    return ExitCode::from(1);
                }
            }
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            if let Some(command) = line.strip_prefix('/') {
                if let Next::Exit = self.command(command) {
                    break;
                }
                continue;
            }
            self.say(line.to_owned());
        }
        ExitCode::SUCCESS
    }

    /// One turn: `text` after the conversation so far.
    fn say(&mut self, text: String) {
        let mut messages = self.messages.clone();
        messages.push(Message::User { text });
        match self
            .session
            .turn(self.pool, self.interrupt, messages, None, "kiln chat")
        {
            Ok(outcome) => {
                let _ = self.session.finish(&outcome.result, "kiln chat");
                match outcome.result.stop.reason {
                    // A provider's failure leaves the exchange out, as the app does.
                    StopReason::Provider => eprintln!(
                        "kiln chat: {}\nkiln chat: that message is left out of the conversation; send it again when the provider answers",
                        escaped(
                            outcome
                                .result
                                .stop
                                .message
                                .as_deref()
                                .unwrap_or("the provider failed")
                        )
                    ),
                    _ if matches!(outcome.view.last(), Some(Message::User { .. }) | None) => {}
                    _ => self.messages = outcome.view,
                }
            }
            Err(error) => eprintln!("kiln chat: {}", escaped(error.as_ref())),
        }
    }

    fn command(&mut self, command: &str) -> Next {
        let mut words = command.split_whitespace();
        let name = words.next().unwrap_or_default();
        let rest: Vec<&str> = words.collect();
        match name {
            "help" | "?" => eprintln!("{HELP}"),
            "exit" | "quit" => return Next::Exit,
            "new" => {
                self.messages.clear();
                eprintln!("kiln chat: a new conversation");
            }
            "clear" => {
                self.messages.clear();
                if std::io::stderr().is_terminal() {
                    eprint!("\x1b[2J\x1b[H");
                }
                eprintln!("kiln chat: a new conversation");
            }
            "compact" => self.compact(),
            "model" => self.model(&rest),
            "provider" => self.provider(&rest),
            "tools" => self.tools(),
            "mode" => self.mode(&rest),
            other => eprintln!("kiln chat: there is no command /{other}; /help lists them"),
        }
        Next::Go
    }

    fn mode(&mut self, rest: &[&str]) {
        match rest {
            [] => eprintln!(
                "kiln chat: the permission mode is {}",
                self.session.run_mode().map_or_else(
                    || "the default for this terminal".to_owned(),
                    |mode| mode.to_string()
                )
            ),
            [mode] => match mode.parse::<kiln_capabilities::Mode>() {
                Ok(mode) => {
                    self.session.set_mode(mode);
                    eprintln!("kiln chat: the permission mode is now {mode}");
                }
                Err(why) => eprintln!("kiln chat: {why}"),
            },
            _ => eprintln!("kiln chat: /mode takes plan, default or auto, or nothing to show it"),
        }
    }

    fn compact(&mut self) {
        let Some(cut) = split_point(&self.messages, 1) else {
            eprintln!("kiln chat: nothing to compact yet: the conversation has only its last turn");
            return;
        };
        let provider = kiln_providers::connect(self.session.provider.clone());
        let budget = RunBudget::new(
            BudgetLimits::default(),
            std::rc::Rc::new(PriceCatalog::builtin()),
            std::rc::Rc::new(kiln_http::SystemClock),
        );
        let options = self.session.options();
        let summarized = self.pool.run_until(summarize_thread(
            provider.as_ref(),
            &options,
            &self.messages[..cut],
            &budget,
            None,
        ));
        match summarized {
            Ok((summary, _)) => {
                self.messages.splice(..cut, [compaction_row(&summary)]);
                eprintln!(
                    "kiln chat: earlier conversation summarized ({cut} messages):\n{}",
                    escaped(&summary)
                );
            }
            Err(why) => eprintln!(
                "kiln chat: the conversation was not compacted: {}",
                escaped(&why.to_string())
            ),
        }
    }

    fn model(&mut self, rest: &[&str]) {
        if let [model] = rest {
            (*model).clone_into(&mut self.session.model);
            eprintln!("kiln chat: the model is now {model}");
            return;
        }
        if !rest.is_empty() {
            eprintln!("kiln chat: /model takes one model id, or none to list them");
            return;
        }
        eprintln!("kiln chat: the model is {}", self.session.model);
        let provider = kiln_providers::connect(self.session.provider.clone());
        match self.pool.run_until(provider.models()) {
            Ok(models) if models.is_empty() => {
                eprintln!("kiln chat: the provider lists no models");
            }
            Ok(models) => {
                eprintln!("kiln chat: the provider lists:");
                for model in models {
                    let marker = if model.id == self.session.model {
                        "*"
                    } else {
                        " "
                    };
                    eprintln!("{marker} {}", kiln_types::permission::card_text(&model.id));
                }
            }
            Err(error) => eprintln!(
                "kiln chat: the models could not be listed: {}",
                escaped(&error.to_string())
            ),
        }
    }

    fn provider(&mut self, rest: &[&str]) {
        match rest {
            [] => eprintln!(
                "kiln chat: the provider is {} at {}{}",
                self.session.provider.kind.as_str(),
                self.session.provider.base_url,
                if self.session.provider.key.is_some() {
                    ", with a key"
                } else {
                    ""
                }
            ),
            [kind, url] | [kind, url, _] => {
                match provider_config(kind, url, rest.get(2).copied()) {
                    Ok(provider) => {
                        self.session.provider = provider;
                        eprintln!(
                            "kiln chat: the provider is now {kind} at {url}; the model is still {} (/model to change it)",
                            self.session.model
                        );
                    }
                    Err(error) => {
                        eprintln!("kiln chat: the provider was not changed: {error:#}");
                    }
                }
            }
            _ => eprintln!("kiln chat: /provider takes KIND URL [KEY_ENV], or nothing to show it"),
        }
    }

    /// `/tools`: the session's belt as a turn gets it, said for where this
    /// session is (a store or not, tools or not).
    fn tools(&mut self) {
        let environment = self.session.environment("kiln chat");
        let (specs, warnings) = self
            .pool
            .run_until(kiln_run::catalog(self.session.run_request(), &environment));
        if specs.is_empty() {
            eprintln!(
                "kiln chat: there are no tools on `tools`: execute_code runs programs that can only compute \
                 (--tools CATALOG.json, --mcp NAME=URL and --store DIR add them)"
            );
        } else if specs
            .iter()
            .any(|spec| kiln_agent::is_always_on(&spec.name))
        {
            eprintln!(
                "kiln chat: execute_code runs a program over these tools (on `tools`); the model may also call the memory, history, file and sharing tools directly:"
            );
        } else {
            eprintln!("kiln chat: execute_code runs a program over these tools (on `tools`):");
        }
        for spec in &specs {
            let first = spec.description.lines().next().unwrap_or_default();
            let mut short: String = first.chars().take(100).collect();
            if short.len() < first.len() {
                short.push('…');
            }
            eprintln!(
                "  {} ({}) {}",
                escaped(&spec.name),
                spec.category.as_str(),
                kiln_types::permission::card_text(&short)
            );
        }
        eprintln!(
            "  and the agent's own: ask_user, return_result, list_models, search_tools, the sub-agents (run_subtask, run_search, start_subtask, wait_subtasks) and execute_plan (create_plan in plan mode)"
        );
        for warning in warnings {
            eprintln!("kiln chat: {}", escaped(&warning.message));
        }
    }
}

//! `kiln chat`: an interactive session over the CodeAct loop — each message
//! is one agent turn (`kiln_agent::run_agent`, as `kiln agent run`
//! runs it), and the next turn continues from the thread the last one left
//! (its calls answered, a long thread compacted). Between turns, commands:
//! `/help`, `/new`, `/clear`, `/compact`, `/model [ID]`, `/provider [KIND URL
//! [KEY_ENV]]`, `/tools`, `/mode [plan|default|auto]`, `/threads`, `/thread
//! [ID]`, `/exit`.
//!
//! With `--store DIR` every conversation is a thread of that workspace
//! (`kiln_store::threads`), the one the app keeps its conversations in:
//! created with its first message, each turn kept through
//! `kiln_agent::ThreadTurn` as the runtime worker keeps the app's, and the
//! next turn sends what the kept one answers. `--thread ID` (or `/thread ID`)
//! continues one from what its model read last, and `--list-threads` (or
//! `/threads`) lists them. A store that fails mid-session is said once; the
//! chat goes on, unkept.
//!
//! A PROMPT argument, or a prompt piped in on stdin, is one turn: its answer
//! on stdout, its progress and usage on stderr, and the exit code of `kiln
//! agent run` (0 answered, 1 a stop or failure, 2 bad flags). With a
//! terminal on stdin (or `--interactive`, which reads the session's lines
//! from stdin whatever it is) it is a session, which ends at `/exit` or the
//! end of input. Ctrl-C stops the turn going on; at the prompt it ends the
//! session.

use std::fmt;
use std::io::{BufRead as _, IsTerminal as _, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use kiln_agent::{
    AgentOutcome, ThreadTurn, compaction_row, continuation, split_point, summarize_thread,
};
use kiln_providers::Message;
use kiln_providers::budget::{BudgetLimits, RunBudget};
use kiln_providers::cost::PriceCatalog;
use kiln_store::StoreError;
use kiln_store::threads::{Conversation, Thread, Threads, TurnFailure};
use kiln_types::agent::StopReason;
use kiln_types::permission::card_text;

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
    /// Continue thread ID of the store (`--store DIR`): the model reads the
    /// conversation as it left it, and the new turns are kept there.
    /// `--list-threads` (or `/threads` in a session) lists the ids.
    #[arg(long, value_name = "ID")]
    thread: Option<String>,
    /// List the store's threads (`--store DIR`) on stdout, pinned first, then
    /// the newest: id, when last updated, message count, title; with
    /// `--json`, as a JSON array. Needs no provider.
    #[arg(long, conflicts_with_all = ["prompt", "interactive", "thread"])]
    list_threads: bool,
    #[command(flatten)]
    session: SessionArgs,
}

const HELP: &str = "\
Each message is one agent turn: the model acts by writing programs that call the session's tools.
  /help                         this list
  /new                          start a new conversation (with --store, a new thread; the last one stays kept)
  /clear                        start a new conversation and clear the screen
  /compact                      summarize the conversation before its last turn, now
  /model [ID]                   show the model and the ones the provider lists, or switch to ID
  /provider [KIND URL [VAR]]    show the provider, or switch (KIND: openai, anthropic, ollama;
                                VAR: the environment variable holding its key)
  /tools                        list the tools a turn has
  /mode [plan|default|auto]     show the permission mode, or switch (plan: look and plan,
                                nothing runs; default: ask first; auto: run what is allowed)
  /threads                      list the conversations kept in the store (--store DIR), newest first
  /thread [ID]                  show this conversation's thread, or continue thread ID instead
  /exit                         leave (so does the end of input; Ctrl-C at the prompt)
Ctrl-C during a turn stops it.";

/// How many threads `/threads` shows (`--list-threads` shows them all).
const THREADS_SHOWN: usize = 30;

pub fn run(args: &ChatArgs) -> ExitCode {
    if args.list_threads {
        return list_threads(&args.session);
    }
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
    let interactive = args.interactive || (args.prompt.is_none() && stdin.is_terminal());
    if interactive {
        eprintln!(
            "kiln chat · {} at {} · /help lists the commands, /exit leaves",
            session.model, session.provider.base_url
        );
    }
    let mut chat = Chat::new(&mut session, &mut pool, &interrupt);
    if interactive && matches!(chat.keeping, Keeping::Nowhere) {
        eprintln!(
            "kiln chat: this session's conversations are not kept (--store DIR keeps each one as a thread)"
        );
    }
    if let Some(id) = &args.thread
        && let Err(unopened) = chat.resume(id)
    {
        eprintln!("error: {unopened}");
        return ExitCode::from(2);
    }
    if interactive {
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
    match chat.turn(prompt) {
        Ok(outcome) => chat.session.finish(&outcome.result, "kiln chat"),
        Err(error) => {
            eprintln!("error: {}", escaped(error.as_ref()));
            ExitCode::from(2)
        }
    }
}

/// The threads of the store in `dir`, as `kiln run --store DIR` opens it.
fn open_threads(dir: &Path) -> Result<Threads, StoreError> {
    crate::commands::run::open_store(dir).map(|workspace| Threads::new(workspace.backend))
}

/// `--list-threads`: every thread of the store, on stdout.
fn list_threads(args: &SessionArgs) -> ExitCode {
    let Some(dir) = args.store() else {
        eprintln!(
            "error: --list-threads: threads are kept in a store, and none was given\nhint: give --store DIR, the folder `kiln chat --store DIR` kept them in"
        );
        return ExitCode::from(2);
    };
    let listed =
        open_threads(dir).and_then(|threads| futures::executor::block_on(threads.list(usize::MAX)));
    let threads = match listed {
        Ok(threads) => threads,
        Err(error) => {
            eprintln!(
                "error: --store {}: the threads could not be read: {}",
                escaped(&dir.display().to_string()),
                escaped(&error.with_hint().to_string())
            );
            return ExitCode::FAILURE;
        }
    };
    if args.json() {
        match serde_json::to_string_pretty(&threads) {
            Ok(json) => crate::out::line(json),
            Err(error) => {
                eprintln!("error: the threads could not be written as JSON: {error}");
                return ExitCode::FAILURE;
            }
        }
        return ExitCode::SUCCESS;
    }
    if threads.is_empty() {
        eprintln!("kiln chat: the store keeps no threads yet");
    }
    for line in thread_lines(&threads, None, kiln_clock::epoch_ms()) {
        crate::out::line(line);
    }
    ExitCode::SUCCESS
}

/// What a command asks of the session loop.
enum Next {
    Go,
    Exit,
}

/// Where a chat's conversations are kept.
enum Keeping {
    /// No `--store`: nowhere.
    Nowhere,
    /// In the threads of the store in `dir`.
    Store { threads: Threads, dir: PathBuf },
    /// The store could not be opened or written (why, said once when it
    /// happened): the chat goes on, unkept.
    Lost(String),
}

/// Why a thread could not be continued: what was wrong, and what to do.
struct Unopened {
    message: String,
    hint: Option<String>,
}

impl fmt::Display for Unopened {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        match &self.hint {
            Some(hint) => write!(f, "\nhint: {hint}"),
            None => Ok(()),
        }
    }
}

/// A session: its settings and the conversation so far.
struct Chat<'a> {
    session: &'a mut Session,
    pool: &'a mut futures::executor::LocalPool,
    interrupt: &'a Interrupt,
    /// The thread as the model saw it last: what the next turn sends.
    messages: Vec<Message>,
    keeping: Keeping,
    /// The thread this conversation is kept in, once its first message is.
    thread: Option<String>,
}

impl<'a> Chat<'a> {
    /// A new conversation, kept in `session`'s store when it has one.
    fn new(
        session: &'a mut Session,
        pool: &'a mut futures::executor::LocalPool,
        interrupt: &'a Interrupt,
    ) -> Self {
        let keeping = match session.store() {
            None => Keeping::Nowhere,
            Some(dir) => match open_threads(dir) {
                Ok(threads) => Keeping::Store {
                    threads,
                    dir: dir.to_owned(),
                },
                Err(error) => {
                    let why = error.with_hint().to_string();
                    eprintln!(
                        "kiln chat: this conversation is not being kept: the store could not be opened: {}",
                        escaped(&why)
                    );
                    Keeping::Lost(why)
                }
            },
        };
        Self {
            session,
            pool,
            interrupt,
            messages: Vec::new(),
            keeping,
            thread: None,
        }
    }
}

impl Chat<'_> {
    fn serve(&mut self, first: Option<&str>) -> ExitCode {
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

    /// One turn of the session: `text` after the conversation so far.
    fn say(&mut self, text: String) {
        match self.turn(text) {
            Ok(outcome) => {
                let _ = self.session.finish(&outcome.result, "kiln chat");
                // A provider's failure leaves the exchange out, as the app does.
                if outcome.result.stop.reason == StopReason::Provider {
                    eprintln!(
                        "kiln chat: {}\nkiln chat: that message is left out of the conversation; send it again when the provider answers",
                        escaped(
                            outcome
                                .result
                                .stop
                                .message
                                .as_deref()
                                .unwrap_or("the provider failed")
                        )
                    );
                }
            }
            Err(error) => eprintln!("kiln chat: {}", escaped(error.as_ref())),
        }
    }

    /// One agent turn: `text` after the conversation so far, kept in its
    /// thread when the chat keeps it; the conversation then goes on from
    /// what the turn left ([`continuation`]). `Err` is a request the loop
    /// refused.
    fn turn(&mut self, text: String) -> Result<AgentOutcome, kiln_run::RequestError> {
        let mut messages = self.messages.clone();
        messages.push(Message::User { text });
        let kept = self.begin(&messages);
        let ran = self.session.turn(
            self.pool,
            self.interrupt,
            messages,
            None,
            "kiln chat",
            kept.as_ref().map(|(turn, _)| turn),
        );
        match (&ran, kept) {
            (Ok(outcome), Some((turn, created))) => {
                match self.pool.run_until(turn.ended(outcome)) {
                    Ok(next) => {
                        self.messages = next;
                        if let (true, Some(id)) = (created, &self.thread) {
                            eprintln!(
                                "kiln chat: kept as thread {id} (--thread {id} continues it)"
                            );
                        }
                    }
                    Err(error) => {
                        self.messages =
                            continuation(&self.messages, &outcome.view, &outcome.result);
                        self.lose(&error);
                    }
                }
            }
            (Ok(outcome), None) => {
                self.messages = continuation(&self.messages, &outcome.view, &outcome.result);
            }
            (Err(refused), Some((turn, _))) => {
                let failure = TurnFailure {
                    code: "bad_request".into(),
                    message: refused.0.clone(),
                    hint: None,
                };
                if let Err(error) = self.pool.run_until(turn.failed(failure)) {
                    self.lose(&error);
                }
            }
            (Err(_), None) => {}
        }
        ran
    }

    /// The person's message, the last of `messages`, kept in this
    /// conversation's thread (made now, titled by it, when there is none
    /// yet); with whether the thread is new. `None` when the chat keeps
    /// nothing.
    fn begin(&mut self, messages: &[Message]) -> Option<(ThreadTurn, bool)> {
        let Keeping::Store { threads, .. } = &self.keeping else {
            return None;
        };
        let threads = threads.clone();
        let thread = self.thread.clone();
        let agent = self.session.run_request().agent.clone();
        let provider = self.session.provider.kind.as_str();
        let model = self.session.model.clone();
        let first = match messages.last() {
            Some(Message::User { text }) => text.clone(),
            _ => String::new(),
        };
        let begun = self.pool.run_until(async move {
            let (id, created) = match thread {
                Some(id) => (id, false),
                None => (threads.create(&first, &agent).await?.id, true),
            };
            let turn = ThreadTurn::begin(threads, &id, messages, provider, &model).await?;
            Ok::<_, StoreError>((id, turn, created))
        });
        match begun {
            Ok((id, turn, created)) => {
                self.thread = Some(id);
                Some((turn, created))
            }
            Err(error) => {
                self.lose(&error);
                None
            }
        }
    }

    /// The store failed: said once, and the chat goes on unkept.
    fn lose(&mut self, error: &StoreError) {
        let why = error.with_hint().to_string();
        eprintln!(
            "kiln chat: this conversation is not being kept any more: the store failed: {}",
            escaped(&why)
        );
        self.keeping = Keeping::Lost(why);
        self.thread = None;
    }

    /// Continues thread `id` in place of this conversation, with a recap of
    /// it on stderr.
    fn resume(&mut self, id: &str) -> Result<(), Unopened> {
        let shown = card_text(id);
        let (threads, dir) = match &self.keeping {
            Keeping::Store { threads, dir } => (threads.clone(), dir),
            Keeping::Nowhere => {
                return Err(Unopened {
                    message: format!(
                        "thread `{shown}` cannot be continued: threads are kept in a store, and this chat has none"
                    ),
                    hint: Some("give --store DIR, the folder the conversation was kept in".into()),
                });
            }
            Keeping::Lost(why) => {
                return Err(Unopened {
                    message: format!(
                        "thread `{shown}` cannot be continued: the store failed ({})",
                        escaped(why)
                    ),
                    hint: None,
                });
            }
        };
        let conversation = match self.pool.run_until(threads.open(id)) {
            Ok(conversation) if conversation.thread.deleted_ms.is_none() => conversation,
            Ok(_) | Err(StoreError::NotFound { .. }) => {
                let dir = escaped(&dir.display().to_string());
                return Err(Unopened {
                    message: format!("there is no thread `{shown}` in the store {dir}"),
                    hint: Some(format!(
                        "`kiln chat --list-threads --store {dir}` lists its threads, as /threads does in a session"
                    )),
                });
            }
            Err(error) => {
                return Err(Unopened {
                    message: format!(
                        "thread `{shown}` could not be opened: {}",
                        escaped(&error.to_string())
                    ),
                    hint: error.hint().map(str::to_owned),
                });
            }
        };
        for line in recap(&conversation, kiln_clock::epoch_ms()) {
            eprintln!("{line}");
        }
        self.messages = conversation.context;
        self.thread = Some(conversation.thread.id);
        Ok(())
    }

    /// `/new` and `/clear`: the next message starts a new conversation.
    fn start_new(&mut self) {
        self.messages.clear();
        match self.thread.take() {
            Some(id) => eprintln!(
                "kiln chat: a new conversation (the last one is kept as thread {}: /thread {0} goes back to it)",
                card_text(&id)
            ),
            None => eprintln!("kiln chat: a new conversation"),
        }
    }

    /// `/threads`: the store's threads, newest first.
    fn threads(&mut self) {
        let threads = match &self.keeping {
            Keeping::Store { threads, .. } => threads.clone(),
            Keeping::Nowhere => {
                eprintln!(
                    "kiln chat: this session keeps no threads: start kiln chat with --store DIR to keep its conversations"
                );
                return;
            }
            Keeping::Lost(why) => {
                eprintln!(
                    "kiln chat: the threads cannot be listed: the store failed ({})",
                    escaped(why)
                );
                return;
            }
        };
        let listed = match self.pool.run_until(threads.list(usize::MAX)) {
            Ok(listed) => listed,
            Err(error) => {
                eprintln!(
                    "kiln chat: the threads could not be listed: {}",
                    escaped(&error.with_hint().to_string())
                );
                return;
            }
        };
        if listed.is_empty() {
            eprintln!("kiln chat: no threads yet: this conversation's first message starts one");
            return;
        }
        eprintln!(
            "kiln chat: {} thread{}, pinned first, then the newest (/thread ID continues one):",
            listed.len(),
            if listed.len() == 1 { "" } else { "s" }
        );
        let shown = &listed[..listed.len().min(THREADS_SHOWN)];
        for line in thread_lines(shown, self.thread.as_deref(), kiln_clock::epoch_ms()) {
            eprintln!("  {line}");
        }
        if listed.len() > shown.len() {
            eprintln!(
                "  … and {} more (kiln chat --list-threads lists them all)",
                listed.len() - shown.len()
            );
        }
    }

    /// `/thread [ID]`: which thread this is, or continue thread ID.
    fn thread(&mut self, rest: &[&str]) {
        match rest {
            [] => match (&self.thread, &self.keeping) {
                (Some(id), _) => eprintln!(
                    "kiln chat: this conversation is thread {} (/threads lists the others)",
                    card_text(id)
                ),
                (None, Keeping::Store { .. }) => eprintln!(
                    "kiln chat: this conversation is not a thread yet: its first message starts one"
                ),
                (None, _) => eprintln!(
                    "kiln chat: this session keeps no threads: start kiln chat with --store DIR to keep its conversations"
                ),
            },
            [id] => {
                if let Err(unopened) = self.resume(id) {
                    eprintln!("kiln chat: {unopened}");
                }
            }
            _ => eprintln!("kiln chat: /thread takes one thread id, or nothing to show this one's"),
        }
    }

    fn command(&mut self, command: &str) -> Next {
        let mut words = command.split_whitespace();
        let name = words.next().unwrap_or_default();
        let rest: Vec<&str> = words.collect();
        match name {
            "help" | "?" => eprintln!("{HELP}"),
            "exit" | "quit" => return Next::Exit,
            "new" => self.start_new(),
            "clear" => {
                if std::io::stderr().is_terminal() {
                    eprint!("\x1b[2J\x1b[H");
                }
                self.start_new();
            }
            "compact" => self.compact(),
            "model" => self.model(&rest),
            "provider" => self.provider(&rest),
            "tools" => self.tools(),
            "mode" => self.mode(&rest),
            "threads" => self.threads(),
            "thread" => self.thread(&rest),
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

/// How long ago `then_ms` was at `now_ms`, as a person says it.
pub(crate) fn ago(now_ms: u64, then_ms: u64) -> String {
    const MINUTE: u64 = 60;
    const HOUR: u64 = 60 * MINUTE;
    const DAY: u64 = 24 * HOUR;
    let seconds = now_ms.saturating_sub(then_ms) / 1000;
    if seconds < MINUTE {
        "just now".to_owned()
    } else if seconds < HOUR {
        format!("{} min ago", seconds / MINUTE)
    } else if seconds < DAY {
        format!("{} h ago", seconds / HOUR)
    } else if seconds < 2 * DAY {
        "yesterday".to_owned()
    } else if seconds < 60 * DAY {
        format!("{} days ago", seconds / DAY)
    } else if seconds < 730 * DAY {
        format!("{} months ago", seconds / (30 * DAY))
    } else {
        format!("{} years ago", seconds / (365 * DAY))
    }
}

/// `text` cut to `limit` characters, at a word when one ends past the
/// middle, marked `…` when cut.
fn cut(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        return text.to_owned();
    }
    let head: String = text.chars().take(limit).collect();
    let at_word = match head.rfind(char::is_whitespace) {
        Some(space) if space > head.len() / 2 => &head[..space],
        _ => head.as_str(),
    };
    format!("{}…", at_word.trim_end())
}

/// The start of what a message said, for a recap: at most `lines` lines
/// that are not blank and `chars` characters in all, marked `…` when cut;
/// every line escaped for the terminal.
fn excerpt(text: &str, lines: usize, chars: usize) -> Vec<String> {
    let all: Vec<&str> = text
        .lines()
        .map(str::trim_end)
        .filter(|line| !line.trim().is_empty())
        .collect();
    let mut shown: Vec<String> = Vec::new();
    let mut left = chars;
    for line in all.iter().take(lines) {
        let count = line.chars().count();
        if count > left {
            shown.push(cut(line, left.max(1)));
            break;
        }
        left -= count;
        shown.push((*line).to_owned());
    }
    let whole = shown.len() == all.len() && shown.last().is_none_or(|last| !last.ends_with('…'));
    if !whole
        && let Some(last) = shown.last_mut()
        && !last.ends_with('…')
    {
        last.push_str(" …");
    }
    shown.iter().map(|line| card_text(line)).collect()
}

/// One line per thread: its id, when it was last updated, how many
/// messages, its title (the store's text, escaped and cut), and whether it
/// is pinned or `current`.
fn thread_lines(threads: &[Thread], current: Option<&str>, now_ms: u64) -> Vec<String> {
    threads
        .iter()
        .map(|thread| {
            let count = match thread.n_messages {
                1 => "1 message".to_owned(),
                n => format!("{n} messages"),
            };
            let mut line = format!(
                "{:<24}  {:<12} {:>12}  {}",
                card_text(&thread.id),
                ago(now_ms, thread.updated_ms),
                count,
                card_text(&cut(&thread.title, 60))
            );
            if thread.pinned {
                line.push_str("  [pinned]");
            }
            if current == Some(thread.id.as_str()) {
                line.push_str("  [this conversation]");
            }
            line
        })
        .collect()
}

/// What `--thread ID` says before the conversation goes on: the thread's
/// title, size and age, and its last exchange, cut.
fn recap(conversation: &Conversation, now_ms: u64) -> Vec<String> {
    const LINES: usize = 3;
    const CHARS: usize = 240;
    let thread = &conversation.thread;
    let mut lines = vec![format!(
        "kiln chat: continuing thread {} “{}” ({} message{}, updated {})",
        card_text(&thread.id),
        card_text(&cut(&thread.title, 80)),
        thread.n_messages,
        if thread.n_messages == 1 { "" } else { "s" },
        ago(now_ms, thread.updated_ms)
    )];
    let messages = &conversation.messages;
    let Some(asked) = messages.iter().rposition(|message| message.role == "user") else {
        lines.push("  (nothing said yet)".to_owned());
        return lines;
    };
    let mut said = |who: &str, text: Vec<String>| {
        for (index, line) in text.into_iter().enumerate() {
            let label = if index == 0 { who } else { "" };
            lines.push(format!("  {label:<6}{line}"));
        }
    };
    said("you:", excerpt(&messages[asked].text, LINES, CHARS));
    let reply = messages[asked + 1..]
        .iter()
        .rfind(|message| message.role == "assistant");
    let answer = match reply {
        Some(reply) if !reply.text.trim().is_empty() => excerpt(&reply.text, LINES, CHARS),
        Some(reply) => match &reply.failure {
            Some(failure) => vec![format!(
                "(no answer: {})",
                card_text(&cut(&failure.message, CHARS))
            )],
            None => vec!["(no answer)".to_owned()],
        },
        None => vec!["(no answer yet)".to_owned()],
    };
    said("kiln:", answer);
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_store::threads::ThreadMessage;

    const HOUR_MS: u64 = 3_600_000;

    #[test]
    fn ages_read_as_a_person_says_them() {
        let now = 1_000 * 24 * HOUR_MS;
        for (before_ms, said) in [
            (0, "just now"),
            (59_999, "just now"),
            (60_000, "1 min ago"),
            (HOUR_MS - 1, "59 min ago"),
            (2 * HOUR_MS, "2 h ago"),
            (30 * HOUR_MS, "yesterday"),
            (3 * 24 * HOUR_MS, "3 days ago"),
            (90 * 24 * HOUR_MS, "3 months ago"),
            (800 * 24 * HOUR_MS, "2 years ago"),
        ] {
            assert_eq!(ago(now, now - before_ms), said, "{before_ms} ms");
        }
        // A clock that went back is "just now", not a panic.
        assert_eq!(ago(now, now + HOUR_MS), "just now");
    }

    #[test]
    fn an_excerpt_keeps_a_few_lines_cut_at_a_word_and_escaped() {
        for (text, lines, chars, shown) in [
            ("short", 3, 240, vec!["short"]),
            (
                "one\n\n  \ntwo\nthree\nfour",
                3,
                240,
                vec!["one", "two", "three …"],
            ),
            (
                "the quick brown fox jumps over",
                3,
                16,
                vec!["the quick brown…"],
            ),
            ("abcdefghij", 3, 4, vec!["abcd…"]),
            (
                "first line\nsecond line",
                3,
                14,
                vec!["first line", "seco…"],
            ),
            (
                "title \u{1b}]0;pwned\u{7}",
                3,
                240,
                vec!["title \\u{001B}]0;pwned\\u{0007}"],
            ),
            ("", 3, 240, vec![]),
        ] {
            assert_eq!(excerpt(text, lines, chars), shown, "{text:?}");
        }
    }

    fn thread(id: &str, title: &str, n_messages: u64, updated_ms: u64, pinned: bool) -> Thread {
        Thread {
            created_ms: 0,
            n_messages,
            pinned,
            version: 1,
            ..Thread::new(id.into(), title.into(), "cli".into(), updated_ms)
        }
    }

    #[test]
    fn a_thread_line_shows_its_id_age_size_title_and_marks() {
        let now = 10 * HOUR_MS;
        let threads = [
            thread(
                "t-1",
                "Plans \u{202e}for Monday",
                4,
                now - 2 * HOUR_MS,
                true,
            ),
            thread("t-2", "Hello", 1, now, false),
        ];
        assert_eq!(
            thread_lines(&threads, Some("t-2"), now),
            [
                "t-1                       2 h ago        4 messages  Plans \\u{202E}for Monday  [pinned]",
                "t-2                       just now        1 message  Hello  [this conversation]",
            ]
        );
    }

    fn message(seq: u64, role: &str, text: &str) -> ThreadMessage {
        ThreadMessage {
            thread_id: "t-1".into(),
            seq,
            role: role.into(),
            text: text.into(),
            created_ms: 0,
            events: Vec::new(),
            context: None,
            failure: None,
            provider: String::new(),
            model: String::new(),
        }
    }

    #[test]
    fn a_recap_names_the_thread_and_shows_its_last_exchange() {
        let now = 10 * HOUR_MS;
        let mut failed = message(4, "assistant", "");
        failed.failure = Some(TurnFailure {
            code: "bad_request".into(),
            message: "refused".into(),
            hint: None,
        });
        let cases = [
            (
                vec![
                    message(1, "user", "first"),
                    message(2, "assistant", "one"),
                    message(3, "user", "second\nline two"),
                    message(4, "assistant", "two"),
                ],
                vec!["  you:  second", "        line two", "  kiln: two"],
            ),
            (
                vec![message(1, "user", "asked"), failed],
                vec!["  you:  asked", "  kiln: (no answer: refused)"],
            ),
            (
                vec![message(1, "user", "asked")],
                vec!["  you:  asked", "  kiln: (no answer yet)"],
            ),
            (vec![], vec!["  (nothing said yet)"]),
        ];
        for (messages, exchange) in cases {
            let conversation = Conversation {
                thread: thread("t-1", "Plans", messages.len() as u64, now - HOUR_MS, false),
                messages,
                context: Vec::new(),
            };
            let lines = recap(&conversation, now);
            let n = conversation.messages.len();
            assert_eq!(
                lines[0],
                format!(
                    "kiln chat: continuing thread t-1 “Plans” ({n} message{}, updated 1 h ago)",
                    if n == 1 { "" } else { "s" }
                )
            );
            assert_eq!(lines[1..], exchange);
        }
    }
}

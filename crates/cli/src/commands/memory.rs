//! `kiln memory`: durable memories from a terminal, kept in an on-disk store
//! (`kiln_store::native::LogBackend`) that several processes may write at
//! once, with the workspace's files beside it (`DIR/files`) for export and
//! import. Results are JSON on standard output; errors are `error: ...` on
//! standard error with exit code 1 (2 for bad flags).

use std::io::{BufRead as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;

use anyhow::{Context as _, Result, anyhow};
use kiln_store::StoreError;
use kiln_store::durable::{DurableMemory, Mark};
use kiln_store::export::{self, ExportOptions};
use kiln_store::native::{DirTree, LogBackend};

/// `kiln memory`'s subcommands.
#[derive(clap::Args)]
pub struct MemoryArgs {
    #[command(subcommand)]
    command: MemoryCommand,
}

/// Where the store is: every subcommand takes it.
#[derive(clap::Args)]
struct StoreArg {
    /// The store's folder (created if needed): `store.log`, `store.lock`, and
    /// the workspace's files under `files/`.
    #[arg(long, value_name = "DIR", env = "KILN_STORE")]
    store: PathBuf,
}

#[derive(clap::Subcommand)]
enum MemoryCommand {
    /// Keep a memory and print it as one JSON line. TEXT `-` reads standard
    /// input instead, one memory per line (blank lines skipped), printing
    /// each as soon as it is on disk.
    Save {
        text: String,
        /// The agent it belongs to (default: `default`).
        #[arg(long, value_name = "NAME")]
        agent: Option<String>,
        #[command(flatten)]
        store: StoreArg,
    },
    /// Print the memories matching WORDS as a JSON array, best first, each
    /// with its `score`.
    Query {
        #[arg(required = true)]
        words: Vec<String>,
        /// Only this agent's memories.
        #[arg(long, value_name = "NAME")]
        agent: Option<String>,
        #[arg(long, value_name = "N", default_value_t = 10)]
        limit: usize,
        #[command(flatten)]
        store: StoreArg,
    },
    /// Print the memories as a JSON array, newest first.
    List {
        /// Only this agent's memories.
        #[arg(long, value_name = "NAME")]
        agent: Option<String>,
        /// At most N (default: all).
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        #[command(flatten)]
        store: StoreArg,
    },
    /// Mark a memory helpful (counts up, ranks higher) or outdated (ranks
    /// last) and print it.
    Mark {
        id: String,
        #[arg(value_enum)]
        mark: MarkArg,
        #[command(flatten)]
        store: StoreArg,
    },
    /// Write everything in the store (and its files) to FILE as one JSON
    /// document; API keys are left out unless asked.
    Export {
        file: PathBuf,
        /// Put providers' API keys in the document.
        #[arg(long)]
        include_keys: bool,
        #[command(flatten)]
        store: StoreArg,
    },
    /// Read an export, check it whole, then write it into the store; prints
    /// what was imported as JSON.
    Import {
        file: PathBuf,
        #[command(flatten)]
        store: StoreArg,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum MarkArg {
    Helpful,
    Outdated,
}

impl From<MarkArg> for Mark {
    fn from(mark: MarkArg) -> Self {
        match mark {
            MarkArg::Helpful => Mark::Helpful,
            MarkArg::Outdated => Mark::Outdated,
        }
    }
}

pub fn run(args: &MemoryArgs) -> ExitCode {
    match futures::executor::block_on(execute(&args.command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{}", shown(&error));
            ExitCode::FAILURE
        }
    }
}

/// An error as `error: ...` with the contexts that led to it, then the
/// store's hint (`StoreError::hint`) on its own `hint: ` line, if it has one.
pub(crate) fn shown(error: &anyhow::Error) -> String {
    let hint = error
        .chain()
        .find_map(|cause| cause.downcast_ref::<StoreError>())
        .and_then(StoreError::hint);
    match hint {
        Some(hint) => format!("error: {error:#}\nhint: {hint}"),
        None => format!("error: {error:#}"),
    }
}

fn memories(store: &StoreArg) -> Result<DurableMemory> {
    Ok(DurableMemory::new(LogBackend::open(&store.store)?))
}

/// Prints an answer (`serde_json::to_string` of it) as one line.
fn print_json(json: serde_json::Result<String>) -> Result<()> {
    let line = json.context("the answer could not be written as JSON")?;
    crate::out::line(line);
    Ok(())
}

async fn execute(command: &MemoryCommand) -> Result<()> {
    match command {
        MemoryCommand::Save { text, agent, store } => {
            let memory = memories(store)?;
            let agent = agent.as_deref().unwrap_or("");
            if text == "-" {
                return save_lines(&memory, agent).await;
            }
            print_json(serde_json::to_string(&memory.save(agent, text).await?))
        }
        MemoryCommand::Query {
            words,
            agent,
            limit,
            store,
        } => {
            let hits = memories(store)?
                .query(&words.join(" "), agent.as_deref(), *limit)
                .await?;
            print_json(serde_json::to_string(&hits))
        }
        MemoryCommand::List {
            agent,
            limit,
            store,
        } => print_json(serde_json::to_string(
            &memories(store)?.list(agent.as_deref(), *limit).await?,
        )),
        MemoryCommand::Mark { id, mark, store } => print_json(serde_json::to_string(
            &memories(store)?.mark(id, (*mark).into()).await?,
        )),
        MemoryCommand::Export {
            file,
            include_keys,
            store,
        } => export_to(file, *include_keys, &store.store).await,
        MemoryCommand::Import { file, store } => import_from(file, &store.store).await,
    }
}

/// `save -`: one memory per line of standard input, each printed once it is
/// on disk (a reader of the output knows exactly what was kept).
async fn save_lines(memory: &DurableMemory, agent: &str) -> Result<()> {
    let stdin = std::io::stdin().lock();
    for (index, line) in stdin.lines().enumerate() {
        let line =
            line.with_context(|| format!("could not read line {} of standard input", index + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let saved = memory
            .save(agent, &line)
            .await
            .with_context(|| format!("line {} of standard input", index + 1))?;
        print_json(serde_json::to_string(&saved))?;
    }
    Ok(())
}

/// The store and its workspace files.
fn open_all(dir: &Path) -> Result<(Rc<LogBackend>, Rc<DirTree>)> {
    let backend = LogBackend::open(dir)?;
    let tree = DirTree::open(&dir.join("files"))?;
    Ok((backend, tree))
}

async fn export_to(file: &Path, include_keys: bool, dir: &Path) -> Result<()> {
    let (backend, tree) = open_all(dir)?;
    let doc = export::export(&*backend, Some(&*tree), ExportOptions { include_keys }).await?;
    let text =
        serde_json::to_vec_pretty(&doc).context("the export could not be written as JSON")?;
    // Written aside then renamed: FILE is the old document or the whole new one.
    let mut tmp = file.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let written = std::fs::File::create(&tmp)
        .and_then(|mut out| {
            out.write_all(&text)?;
            out.write_all(b"\n")?;
            out.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, file));
    if let Err(error) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(anyhow!("could not write `{}`: {error}", file.display()));
    }
    let n_records: usize = doc.tables.values().map(Vec::len).sum();
    let per_table: Vec<String> = doc
        .tables
        .iter()
        .filter(|(_, records)| !records.is_empty())
        .map(|(table, records)| format!("{table} {}", records.len()))
        .collect();
    let keys = if include_keys {
        "API keys included"
    } else {
        "API keys left out (--include-keys puts them in)"
    };
    eprintln!(
        "exported {n_records} records ({}) and {} files to `{}`; {keys}",
        if per_table.is_empty() {
            "none".to_owned()
        } else {
            per_table.join(", ")
        },
        doc.files.len(),
        file.display()
    );
    Ok(())
}

async fn import_from(file: &Path, dir: &Path) -> Result<()> {
    let bytes = std::fs::read(file)
        .map_err(|error| anyhow!("could not read `{}`: {error}", file.display()))?;
    let doc: serde_json::Value = serde_json::from_slice(&bytes).map_err(|error| {
        anyhow!(
            "`{}` is not JSON ({error}); nothing was imported\nhint: give a file written by `kiln memory export`",
            file.display()
        )
    })?;
    let (backend, tree) = open_all(dir)?;
    let summary = export::import(&*backend, Some(&*tree), &doc).await?;
    print_json(serde_json::to_string(&summary))
}

//! Natively: the model as a [`Provider`] on a thread of its own (the CLI's
//! `--provider local`), its kernels on candle's own pool (`CANDLE_NUM_THREADS`,
//! by default one thread a core). The files are read
//! from a folder the build prepared; the model loads at the first turn, and a
//! turn whose stream is dropped stops at its next token.
//!
//! The folder is input from outside (`--base-url DIR`): its manifest names
//! plain files in it (`Manifest::parse`), each a regular file, not a link
//! (to `/dev/zero`, say), of the size the manifest says before a byte is read,
//! read no further than that, with the manifest's SHA-256.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::mpsc;

use futures::channel::mpsc as events;
use futures::future::LocalBoxFuture;
use futures::stream::StreamExt as _;
use kiln_providers::{
    ChatRequest, Event, EventStream, ModelInfo, Provider, ProviderError, ProviderKind, in_process,
};

use sha2::{Digest as _, Sha256};

use crate::{LlmError, Manifest, ManifestFile, Model, Step, Turn};

type Reply = events::UnboundedSender<Result<Event, ProviderError>>;

/// What the model's thread is asked.
enum Job {
    Turn(ChatRequest, Reply),
    /// Load now (the CLI, before a run's memory budget starts counting).
    Load(mpsc::Sender<Result<(), ProviderError>>),
}

/// Kiln's own model, natively: a handle on its thread (one per folder in the
/// process, whichever thread asks).
#[derive(Clone)]
pub struct LocalModel {
    base_url: String,
    jobs: mpsc::Sender<Job>,
}

impl LocalModel {
    /// The model whose prepared files are in `dir`. Nothing is read until the
    /// first turn.
    pub fn open(dir: &Path) -> Self {
        let (jobs, queue) = mpsc::channel::<Job>();
        let base_url = dir.display().to_string();
        let folder = dir.to_path_buf();
        let spawned = std::thread::Builder::new()
            .name("kiln-model".to_owned())
            .spawn(move || serve(&folder, queue));
        if let Err(error) = spawned {
            // The jobs' sender then fails each turn with `model_unavailable`.
            eprintln!("kiln: the model's thread did not start: {error}");
        }
        Self { base_url, jobs }
    }

    fn error(&self, code: &str, message: String, hint: Option<String>) -> ProviderError {
        in_process::error(&self.base_url, code, message, hint)
    }
}

impl Provider for LocalModel {
    fn kind(&self) -> ProviderKind {
        ProviderKind::InProcess
    }

    fn base_url(&self) -> &str {
        &self.base_url
    }

    fn stream(&self, request: ChatRequest) -> EventStream {
        let (reply, stream) = events::unbounded();
        if let Err(error) = in_process::check_model(&self.base_url, &request.options.model) {
            let _ = reply.unbounded_send(Err(error));
        } else if let Err(mpsc::SendError(Job::Turn(_, reply))) =
            self.jobs.send(Job::Turn(request, reply))
        {
            let error = self.error(
                "model_unavailable",
                "the model's thread is not running".to_owned(),
                None,
            );
            let _ = reply.unbounded_send(Err(error));
        }
        stream.boxed_local()
    }

    fn models(&self) -> LocalBoxFuture<'static, Result<Vec<ModelInfo>, ProviderError>> {
        Box::pin(async { Ok(in_process::models()) })
    }
}

/// Where an empty base URL finds the model's files: set by [`install`].
static DEFAULT_DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// The models the process opened, by folder: one model thread each.
static OPENED: std::sync::Mutex<Vec<(PathBuf, LocalModel)>> = std::sync::Mutex::new(Vec::new());

/// Makes this process's `ProviderKind::InProcess` the model natively, its files
/// in the folder a configuration names, or in `default_dir` when it names none.
pub fn install(default_dir: PathBuf) {
    let _ = DEFAULT_DIR.set(default_dir);
    in_process::install(host);
}

/// The model for `base_url` (a folder; empty or `models` is the default one).
pub fn model_for(base_url: &str) -> LocalModel {
    let dir = match base_url.trim() {
        "" | kiln_types::chat::IN_PROCESS_MODELS => DEFAULT_DIR
            .get()
            .cloned()
            .unwrap_or_else(|| PathBuf::from(kiln_types::chat::IN_PROCESS_MODELS)),
        dir => PathBuf::from(dir),
    };
    let mut opened = OPENED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, model)) = opened.iter().find(|(at, _)| *at == dir) {
        return model.clone();
    }
    let model = LocalModel::open(&dir);
    opened.push((dir, model.clone()));
    model
}

fn host(config: &kiln_providers::ProviderConfig) -> Rc<dyn Provider> {
    Rc::new(model_for(&config.base_url))
}

impl LocalModel {
    /// Loads the model now, if it is not loaded, and waits for it.
    pub fn load(&self) -> Result<(), ProviderError> {
        let (done, answer) = mpsc::channel();
        self.jobs.send(Job::Load(done)).map_err(|_| {
            self.error(
                "model_unavailable",
                "the model's thread is not running".to_owned(),
                None,
            )
        })?;
        answer.recv().unwrap_or_else(|_| {
            Err(self.error(
                "model_unavailable",
                "the model's thread ended".to_owned(),
                None,
            ))
        })
    }
}

/// The model's thread: loads at the first turn (again at the next, when it
/// failed), then runs each turn to its end or until its stream is dropped.
fn serve(dir: &Path, queue: mpsc::Receiver<Job>) {
    let mut model: Option<Model> = None;
    for job in queue.iter() {
        let base_url = dir.display().to_string();
        let (request, reply) = match job {
            Job::Turn(request, reply) => (request, reply),
            Job::Load(done) => {
                let loaded = match model {
                    Some(_) => Ok(()),
                    None => load(dir)
                        .map(|loaded| {
                            model = Some(loaded);
                        })
                        .map_err(|problem| problem.into_error(&base_url)),
                };
                let _ = done.send(loaded);
                continue;
            }
        };
        let fail = |error: LlmError| {
            let _ = reply.unbounded_send(Err(in_process::error(
                &base_url,
                error.code(),
                error.to_string(),
                error.hint(),
            )));
        };
        let loaded = match model.as_mut() {
            Some(loaded) => loaded,
            None => match load(dir) {
                Ok(loaded) => model.insert(loaded),
                Err(problem) => {
                    let _ = reply.unbounded_send(Err(problem.into_error(&base_url)));
                    continue;
                }
            },
        };
        let mut turn = match Turn::start(loaded, &request) {
            Ok(turn) => turn,
            Err(error) => {
                fail(error);
                continue;
            }
        };
        loop {
            let (events, finished) = match turn.step(loaded) {
                Ok(Step::Events(events)) => (events, false),
                Ok(Step::Finished(events)) => (events, true),
                Err(error) => {
                    fail(error);
                    break;
                }
            };
            // A dropped stream is a cancelled turn: stop at this token.
            if reply.is_closed() {
                break;
            }
            for event in events {
                let _ = reply.unbounded_send(Ok(event));
            }
            if finished {
                turn.keep_state(loaded);
                break;
            }
        }
    }
}

/// Why the files in a folder could not be loaded.
struct LoadProblem {
    code: &'static str,
    message: String,
    hint: Option<String>,
}

impl LoadProblem {
    fn into_error(self, base_url: &str) -> ProviderError {
        in_process::error(base_url, self.code, self.message, self.hint)
    }

    /// `error` about the file at `path`, the message naming it.
    fn about(path: &Path, error: &LlmError) -> Self {
        let message = match error {
            // Names the file already.
            LlmError::File { .. } => error.to_string(),
            _ => format!("{}: {error}", path.display()),
        };
        Self {
            code: error.code(),
            message,
            hint: error.hint(),
        }
    }

    /// The file at `path` could not be read at all (it is missing, say).
    fn unreadable(path: &Path, error: &std::io::Error) -> Self {
        Self {
            code: "model_unavailable",
            message: format!("{}: {error}", path.display()),
            hint: Some(
                "the build prepares the model's files in `pkg/models/` (`cargo xtask build`); --base-url names another folder"
                    .to_owned(),
            ),
        }
    }
}

/// The model in the folder `dir`: its manifest, then each file it names, each
/// read only as far as the manifest says and checked against its digest.
fn load(dir: &Path) -> Result<Model, LoadProblem> {
    let manifest_path = dir.join(crate::MANIFEST_FILE);
    let json = read_regular(&manifest_path, &|shown, length| {
        if length > crate::MAX_MANIFEST_BYTES {
            return Err(LlmError::File {
                file: shown.to_owned(),
                problem: format!(
                    "is {length} bytes, and a manifest is at most {}",
                    crate::MAX_MANIFEST_BYTES
                ),
            });
        }
        Ok(())
    })?;
    let manifest =
        Manifest::parse(&json).map_err(|error| LoadProblem::about(&manifest_path, &error))?;
    // `Manifest::parse` made each name a plain file name: the paths are in `dir`.
    let weights_path = dir.join(&manifest.weights.file);
    let weights = read_described(&weights_path, &manifest.weights)?;
    let tokenizer_path = dir.join(&manifest.tokenizer.file);
    let tokenizer = read_described(&tokenizer_path, &manifest.tokenizer)?;
    Model::load(&weights, &tokenizer).map_err(|error| {
        let path = match error {
            LlmError::Tokenizer(_) => &tokenizer_path,
            _ => &weights_path,
        };
        LoadProblem::about(path, &error)
    })
}

/// The file at `path`, which `described` describes: its size checked before
/// it is read, its digest after.
fn read_described(path: &Path, described: &ManifestFile) -> Result<Vec<u8>, LoadProblem> {
    let bytes = read_regular(path, &|shown, length| described.check_length(shown, length))?;
    let digest: String = Sha256::digest(&bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    described
        .check_digest(&path.display().to_string(), &digest)
        .map_err(|error| LoadProblem::about(path, &error))?;
    Ok(bytes)
}

/// The bytes of the regular file at `path`, no more than its size when
/// opened, which `check_length` must pass (given how the file is shown and
/// its length). A link (wherever it points: `/dev/zero` never ends), a device
/// or a folder is refused before it is opened, a wrong size before a byte is
/// read.
fn read_regular(
    path: &Path,
    check_length: &dyn Fn(&str, u64) -> Result<(), LlmError>,
) -> Result<Vec<u8>, LoadProblem> {
    let shown = path.display().to_string();
    let refuse = |problem: &str| {
        LoadProblem::about(
            path,
            &LlmError::File {
                file: shown.clone(),
                problem: problem.to_owned(),
            },
        )
    };
    let found =
        std::fs::symlink_metadata(path).map_err(|error| LoadProblem::unreadable(path, &error))?;
    if found.file_type().is_symlink() {
        return Err(refuse(
            "is a symbolic link, and the model's files must be regular files in its folder",
        ));
    }
    if !found.is_file() {
        return Err(refuse("is not a regular file"));
    }
    check_length(&shown, found.len()).map_err(|error| LoadProblem::about(path, &error))?;
    let file = std::fs::File::open(path).map_err(|error| LoadProblem::unreadable(path, &error))?;
    // What was opened is what was checked: not a link put in its place since.
    let opened = file
        .metadata()
        .map_err(|error| LoadProblem::unreadable(path, &error))?;
    if !opened.is_file() || !same_file(&found, &opened) {
        return Err(refuse("changed while it was read"));
    }
    check_length(&shown, opened.len()).map_err(|error| LoadProblem::about(path, &error))?;
    let length = opened.len();
    let mut bytes = Vec::with_capacity(usize::try_from(length).unwrap_or(0));
    file.take(length)
        .read_to_end(&mut bytes)
        .map_err(|error| LoadProblem::unreadable(path, &error))?;
    if bytes.len() as u64 != length {
        return Err(refuse("changed while it was read"));
    }
    Ok(bytes)
}

/// Whether two metadata describe the same file.
#[cfg(unix)]
fn same_file(one: &std::fs::Metadata, other: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    one.dev() == other.dev() && one.ino() == other.ino()
}

#[cfg(not(unix))]
fn same_file(one: &std::fs::Metadata, other: &std::fs::Metadata) -> bool {
    one.len() == other.len()
}

//! The model Web Worker's wasm entry: Kiln's own model (`kiln-llm`) in a
//! worker of its own, started by the runtime worker only when a turn asks for
//! the in-process provider. It reads [`ToModel`] messages, loads the model at
//! the first turn (files from the Cache API or downloaded with progress, see
//! `files`), runs one turn at a time and posts each event as it comes,
//! yielding to its message queue between tokens so that a `cancel` stops a
//! turn at the next one.

mod files;

use std::cell::{Cell, RefCell};
use std::collections::{HashSet, VecDeque};

use kiln_llm::{Model, Step, Turn};
use kiln_types::chat::ChatRequest;
use kiln_types::model::{FromModel, ModelFailure, ModelStatus, ToModel, decode, encode};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{DedicatedWorkerGlobalScope, MessageEvent};

thread_local! {
    static SCOPE: Option<DedicatedWorkerGlobalScope> = js_sys::global().dyn_into().ok();
    /// The loaded model and the address it was loaded from.
    static MODEL: RefCell<Option<(String, Model)>> = const { RefCell::new(None) };
    /// Turns waiting their turn, in order.
    static QUEUE: RefCell<VecDeque<Job>> = const { RefCell::new(VecDeque::new()) };
    /// Whether the queue is being worked through.
    static WORKING: Cell<bool> = const { Cell::new(false) };
    /// Turns cancelled before or while they ran.
    static CANCELLED: RefCell<HashSet<u64>> = RefCell::new(HashSet::new());
    /// How many times the cache was cleared: a load that began before a clear
    /// keeps nothing and installs nothing.
    static CLEARS: Cell<u64> = const { Cell::new(0) };
}

struct Job {
    id: u64,
    base_url: String,
    work: Work,
}

enum Work {
    Turn(ChatRequest),
    Score {
        prompt: Vec<u32>,
        continuation: Vec<u32>,
    },
}

pub(crate) fn scope() -> Option<DedicatedWorkerGlobalScope> {
    SCOPE.with(Clone::clone)
}

fn post(message: &FromModel) {
    if let Some(scope) = scope() {
        let _ = scope.post_message(&JsValue::from_str(&encode(message)));
    }
}

/// Runs when `workers/model.js` instantiates the module.
#[wasm_bindgen(start)]
pub fn start() {
    console_error_panic_hook::set_once();
    let Some(scope) = scope() else {
        return;
    };
    let handler = Closure::<dyn Fn(MessageEvent)>::new(|event: MessageEvent| on_message(&event));
    scope.set_onmessage(Some(handler.as_ref().unchecked_ref()));
    handler.forget();
    post(&FromModel::Ready);
}

fn on_message(event: &MessageEvent) {
    let Some(text) = event.data().as_string() else {
        post(&FromModel::Rejected {
            problem: "a model message must be a JSON string".to_owned(),
        });
        return;
    };
    match decode::<ToModel>(&text) {
        Err(error) => post(&FromModel::Rejected {
            problem: error.to_string(),
        }),
        Ok(ToModel::Turn {
            id,
            base_url,
            request,
        }) => enqueue(id, &base_url, Work::Turn(*request)),
        Ok(ToModel::Score {
            id,
            base_url,
            prompt,
            continuation,
        }) => enqueue(
            id,
            &base_url,
            Work::Score {
                prompt,
                continuation,
            },
        ),
        Ok(ToModel::Cancel { id }) => {
            CANCELLED.with(|cancelled| cancelled.borrow_mut().insert(id));
        }
        Ok(ToModel::Clear { id }) => wasm_bindgen_futures::spawn_local(async move {
            CLEARS.with(|clears| clears.set(clears.get() + 1));
            MODEL.with(|model| model.borrow_mut().take());
            match files::clear().await {
                Ok(()) => post(&FromModel::Cleared { id }),
                Err(failure) => post(&FromModel::Failed { id, failure }),
            }
        }),
    }
}

fn enqueue(id: u64, base_url: &str, work: Work) {
    QUEUE.with(|queue| {
        queue.borrow_mut().push_back(Job {
            id,
            base_url: base_url.trim_end_matches('/').to_owned(),
            work,
        });
    });
    if !WORKING.with(|working| working.replace(true)) {
        wasm_bindgen_futures::spawn_local(work_through_queue());
    }
}

fn cancelled(id: u64) -> bool {
    CANCELLED.with(|cancelled| cancelled.borrow_mut().remove(&id))
}

fn cleared_during(id: u64) {
    post(&FromModel::Failed {
        id,
        failure: files::failure(
            "model_unavailable",
            "the cached model was cleared during the turn".to_owned(),
            Some("send the message again: the model downloads afresh"),
        ),
    });
}

fn aborted(id: u64) {
    post(&FromModel::Failed {
        id,
        failure: files::failure("aborted", "the turn was cancelled".to_owned(), None),
    });
}

/// Works through the queue, one turn at a time.
async fn work_through_queue() {
    while let Some(job) = QUEUE.with(|queue| queue.borrow_mut().pop_front()) {
        if cancelled(job.id) {
            aborted(job.id);
            continue;
        }
        if let Err(failure) = load(&job.base_url).await {
            post(&FromModel::Status {
                status: ModelStatus::Failed {
                    failure: failure.clone(),
                },
            });
            post(&FromModel::Failed {
                id: job.id,
                failure,
            });
            continue;
        }
        match &job.work {
            Work::Turn(request) => run(job.id, request).await,
            Work::Score {
                prompt,
                continuation,
            } => score(job.id, prompt, continuation),
        }
    }
    // A cancel that came for a turn already ended is not kept for ever.
    CANCELLED.with(|cancelled| cancelled.borrow_mut().clear());
    WORKING.with(|working| working.set(false));
}

/// Loads the model from `base_url` unless it is loaded from there already.
async fn load(base_url: &str) -> Result<(), ModelFailure> {
    let loaded = MODEL.with(|model| {
        model
            .borrow()
            .as_ref()
            .is_some_and(|(from, _)| from == base_url)
    });
    if loaded {
        return Ok(());
    }
    MODEL.with(|model| model.borrow_mut().take());
    let started = now();
    let epoch = CLEARS.with(Cell::get);
    let cleared = move || CLEARS.with(Cell::get) != epoch;
    let manifest = files::manifest(base_url).await?;
    let total = manifest
        .weights
        .bytes
        .checked_add(manifest.tokenizer.bytes)
        .ok_or_else(|| {
            files::failure(
                "model_corrupt",
                "the manifest's sizes are not sizes".to_owned(),
                None,
            )
        })?;
    let progress = |loaded: u64, total: u64| {
        post(&FromModel::Status {
            status: ModelStatus::Downloading {
                loaded_bytes: loaded,
                total_bytes: total,
            },
        });
    };
    post(&FromModel::Status {
        status: ModelStatus::Reading { total_bytes: total },
    });
    let tokenizer =
        files::file(base_url, &manifest.tokenizer, 0, total, &progress, &cleared).await?;
    let weights = files::file(
        base_url,
        &manifest.weights,
        manifest.tokenizer.bytes,
        total,
        &progress,
        &cleared,
    )
    .await?;
    post(&FromModel::Status {
        status: ModelStatus::Loading,
    });
    // Let the status reach the page before the load holds this thread.
    yield_now().await;
    let model = match Model::load(&weights.bytes, &tokenizer.bytes) {
        Ok(model) => model,
        Err(error) => {
            files::forget_files(base_url, &manifest).await;
            let from_cache = weights.from_cache && tokenizer.from_cache;
            return Err(files::failure(
                error.code(),
                if from_cache {
                    format!("{error} (the cached copy was deleted)")
                } else {
                    format!("{error} (the files as the server sent them)")
                },
                Some("build and serve the app again, or clear the cached model, then retry"),
            ));
        }
    };
    drop(weights.bytes);
    if cleared() {
        return Err(files::failure(
            "model_unavailable",
            "the cached model was cleared while it loaded".to_owned(),
            Some("send the message again: the model downloads afresh"),
        ));
    }
    MODEL.with(|slot| *slot.borrow_mut() = Some((base_url.to_owned(), model)));
    post(&FromModel::Status {
        status: ModelStatus::Ready {
            from_cache: weights.from_cache && tokenizer.from_cache,
            load_ms: now() - started,
            weights_bytes: manifest.weights.bytes,
            memory_bytes: memory_bytes(),
            warning: weights.warning.or(tokenizer.warning),
        },
    });
    Ok(())
}

/// Runs `continuation` after `prompt` teacher-forced (`ToModel::Score`).
fn score(id: u64, prompt: &[u32], continuation: &[u32]) {
    let scored = MODEL.with(|slot| {
        slot.borrow_mut()
            .as_mut()
            .map(|(_, model)| model.score(prompt, continuation))
    });
    match scored {
        Some(Ok(steps)) => post(&FromModel::Scored { id, steps }),
        Some(Err(error)) => post(&FromModel::Failed {
            id,
            failure: files::failure(error.code(), error.to_string(), error.hint().as_deref()),
        }),
        None => aborted(id),
    }
}

/// Runs one turn, posting its events, until it ends or is cancelled.
async fn run(id: u64, request: &ChatRequest) {
    let started = MODEL.with(|slot| {
        slot.borrow()
            .as_ref()
            .map(|(_, model)| Turn::start(model, request))
    });
    let mut turn = match started {
        Some(Ok(turn)) => turn,
        Some(Err(error)) => {
            post(&FromModel::Failed {
                id,
                failure: files::failure(error.code(), error.to_string(), error.hint().as_deref()),
            });
            return;
        }
        None => return cleared_during(id),
    };
    let mut prompt_tokens = None;
    loop {
        if cancelled(id) {
            return aborted(id);
        }
        let step = MODEL.with(|slot| {
            slot.borrow_mut()
                .as_mut()
                .map(|(_, model)| turn.step(model))
        });
        let (events, finished) = match step {
            Some(Ok(Step::Events(events))) => (events, false),
            Some(Ok(Step::Finished(events))) => (events, true),
            Some(Err(error)) => {
                post(&FromModel::Failed {
                    id,
                    failure: files::failure(
                        error.code(),
                        error.to_string(),
                        error.hint().as_deref(),
                    ),
                });
                return;
            }
            None => return cleared_during(id),
        };
        let reading = MODEL.with(|slot| {
            slot.borrow()
                .as_ref()
                .and_then(|(_, model)| turn.reading(model))
        });
        // While the prompt is read, how far; once it is, that it was.
        let said = match reading {
            Some((read, total)) => {
                prompt_tokens = Some(total);
                Some((read, total))
            }
            None => prompt_tokens.take().map(|total| (total, total)),
        };
        if let Some((read, total)) = said {
            post(&FromModel::Status {
                status: ModelStatus::Prompt {
                    read_tokens: read as u64,
                    total_tokens: total as u64,
                },
            });
        }
        for event in events {
            post(&FromModel::Event { id, event });
        }
        if finished {
            MODEL.with(|slot| {
                if let Some((_, model)) = slot.borrow_mut().as_mut() {
                    turn.keep_state(model);
                }
            });
            return;
        }
        yield_now().await;
    }
}

/// Lets the worker read its messages (a cancel) before the next token: a
/// macrotask through a `MessageChannel`, which no timer clamping delays.
async fn yield_now() {
    let Ok(channel) = web_sys::MessageChannel::new() else {
        return;
    };
    let (sender, receiver) = futures::channel::oneshot::channel::<()>();
    let sender = RefCell::new(Some(sender));
    let handler = Closure::<dyn Fn()>::new(move || {
        if let Some(sender) = sender.borrow_mut().take() {
            let _ = sender.send(());
        }
    });
    channel
        .port1()
        .set_onmessage(Some(handler.as_ref().unchecked_ref()));
    if channel.port2().post_message(&JsValue::NULL).is_ok() {
        let _ = receiver.await;
    }
    channel.port1().set_onmessage(None);
    channel.port1().close();
}

fn now() -> f64 {
    scope()
        .and_then(|scope| scope.performance())
        .map_or(0.0, |performance| performance.now())
}

/// The worker's wasm memory, in bytes.
fn memory_bytes() -> u64 {
    wasm_bindgen::memory()
        .dyn_into::<js_sys::WebAssembly::Memory>()
        .map(|memory| {
            memory
                .buffer()
                .dyn_into::<js_sys::ArrayBuffer>()
                .map_or(0, |buffer| u64::from(buffer.byte_length()))
        })
        .unwrap_or(0)
}

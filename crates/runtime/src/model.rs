//! Kiln's own model in the browser (`ProviderKind::InProcess`): the model
//! worker (`workers/model.js`, `kiln-model-worker`), a nested worker this
//! runtime worker starts at the first turn that asks for it — never before,
//! so nobody who does not use it pays for it. [`ModelProvider`] is the
//! `Provider` every entrance gets from `kiln_providers::connect_with`: a turn
//! is a `turn` message, its events come back one by one, and dropping the
//! stream sends `cancel`. The worker's loading status is handed to
//! `on_status` (the page shows it in the chat).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use futures::Stream;
use futures::channel::{mpsc, oneshot};
use futures::future::LocalBoxFuture;
use futures::stream::StreamExt as _;
use kiln_providers::{
    ChatRequest, Event, EventStream, ModelInfo, Provider, ProviderError, ProviderKind, in_process,
};
use kiln_types::model::{FromModel, ModelFailure, ModelStatus, ToModel, decode, encode};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{MessageEvent, Worker, WorkerOptions, WorkerType};

type Reply = mpsc::UnboundedSender<Result<Event, ProviderError>>;

/// The model worker, started on demand, with the turns it is running.
pub(crate) struct ModelWorker {
    /// `workers/model.js`, absolute.
    script_url: String,
    /// The site's root, which a relative `base_url` (`models`) is read against.
    site_root: String,
    worker: RefCell<Option<Started>>,
    turns: RefCell<HashMap<u64, (String, Reply)>>,
    clears: RefCell<HashMap<u64, oneshot::Sender<Result<(), ModelFailure>>>>,
    next_id: Cell<u64>,
    on_status: Rc<dyn Fn(&ModelStatus)>,
}

struct Started {
    worker: Worker,
    /// Messages held until the worker's wasm says `ready` (a message posted
    /// before its handler is installed would be lost).
    outbox: Option<Vec<String>>,
    // Kept alive as long as the worker.
    _onmessage: Closure<dyn FnMut(MessageEvent)>,
    _onerror: Closure<dyn FnMut(web_sys::ErrorEvent)>,
}

impl ModelWorker {
    pub(crate) fn new(on_status: Rc<dyn Fn(&ModelStatus)>) -> Rc<Self> {
        let location = js_sys::global()
            .dyn_into::<web_sys::WorkerGlobalScope>()
            .map(|scope| scope.location().href())
            .unwrap_or_default();
        let resolve = |relative: &str| {
            web_sys::Url::new_with_base(relative, &location)
                .map(|url| url.href())
                .unwrap_or_default()
        };
        Rc::new(Self {
            script_url: resolve("model.js"),
            site_root: resolve("../"),
            worker: RefCell::new(None),
            turns: RefCell::new(HashMap::new()),
            clears: RefCell::new(HashMap::new()),
            next_id: Cell::new(1),
            on_status,
        })
    }

    /// Makes this worker the host of `ProviderKind::InProcess`.
    pub(crate) fn install(self: &Rc<Self>) {
        WORKER.with(|slot| *slot.borrow_mut() = Some(Rc::clone(self)));
        in_process::install(host);
    }

    fn next(&self) -> u64 {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        id
    }

    /// Posts `message`, starting the worker first if it is not running.
    fn send(self: &Rc<Self>, message: &ToModel) -> Result<(), String> {
        let text = encode(message);
        if self.worker.borrow().is_none() {
            let started = self.start()?;
            *self.worker.borrow_mut() = Some(started);
        }
        let mut slot = self.worker.borrow_mut();
        let Some(started) = slot.as_mut() else {
            return Err("the model worker is not running".to_owned());
        };
        match started.outbox.as_mut() {
            Some(outbox) => outbox.push(text),
            None => started
                .worker
                .post_message(&JsValue::from_str(&text))
                .map_err(|error| format!("{error:?}"))?,
        }
        Ok(())
    }

    fn start(self: &Rc<Self>) -> Result<Started, String> {
        let options = WorkerOptions::new();
        options.set_type(WorkerType::Module);
        options.set_name("kiln-model");
        let worker = Worker::new_with_options(&self.script_url, &options).map_err(|error| {
            format!(
                "the model worker ({}) did not start: {error:?}",
                self.script_url
            )
        })?;
        let this = Rc::downgrade(self);
        let onmessage = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
            if let (Some(this), Some(text)) = (this.upgrade(), event.data().as_string()) {
                this.receive(&text);
            }
        });
        worker.set_onmessage(Some(onmessage.as_ref().unchecked_ref()));
        let this = Rc::downgrade(self);
        let onerror =
            Closure::<dyn FnMut(web_sys::ErrorEvent)>::new(move |event: web_sys::ErrorEvent| {
                if let Some(this) = this.upgrade() {
                    this.lost(&format!("the model worker failed: {}", event.message()));
                }
            });
        worker.set_onerror(Some(onerror.as_ref().unchecked_ref()));
        Ok(Started {
            worker,
            outbox: Some(Vec::new()),
            _onmessage: onmessage,
            _onerror: onerror,
        })
    }

    fn receive(&self, text: &str) {
        let message = match decode::<FromModel>(text) {
            Ok(message) => message,
            Err(error) => {
                return self.lost(&format!(
                    "the model worker said something unreadable: {error}"
                ));
            }
        };
        match message {
            FromModel::Ready => {
                if let Some(started) = self.worker.borrow_mut().as_mut() {
                    for text in started.outbox.take().unwrap_or_default() {
                        let _ = started.worker.post_message(&JsValue::from_str(&text));
                    }
                }
            }
            FromModel::Status { status } => (self.on_status)(&status),
            FromModel::Event { id, event } => {
                let done = matches!(event, Event::Done { .. });
                let reply = if done {
                    self.turns.borrow_mut().remove(&id)
                } else {
                    self.turns.borrow().get(&id).cloned()
                };
                if let Some((_, reply)) = reply {
                    let _ = reply.unbounded_send(Ok(event));
                }
            }
            FromModel::Failed { id, failure } => {
                if let Some((base_url, reply)) = self.turns.borrow_mut().remove(&id) {
                    let _ = reply.unbounded_send(Err(in_process::error(
                        &base_url,
                        &failure.code,
                        failure.message,
                        failure.hint,
                    )));
                } else if let Some(clear) = self.clears.borrow_mut().remove(&id) {
                    let _ = clear.send(Err(failure));
                }
            }
            FromModel::Cleared { id } => {
                if let Some(clear) = self.clears.borrow_mut().remove(&id) {
                    let _ = clear.send(Ok(()));
                }
            }
            // The runtime sends no `score` (tests speak to the model worker directly).
            FromModel::Scored { .. } => {}
            FromModel::Rejected { problem } => self.lost(&problem),
        }
    }

    /// The worker is gone or broken: every turn waiting on it fails, and the
    /// next turn starts a new one.
    fn lost(&self, why: &str) {
        if let Some(started) = self.worker.borrow_mut().take() {
            started.worker.terminate();
        }
        let failure = ModelFailure {
            code: "model_unavailable".to_owned(),
            message: why.to_owned(),
            hint: Some("send the message again to start the model anew".to_owned()),
        };
        (self.on_status)(&ModelStatus::Failed {
            failure: failure.clone(),
        });
        for (_, (base_url, reply)) in self.turns.borrow_mut().drain() {
            let _ = reply.unbounded_send(Err(in_process::error(
                &base_url,
                &failure.code,
                failure.message.clone(),
                failure.hint.clone(),
            )));
        }
        for (_, clear) in self.clears.borrow_mut().drain() {
            let _ = clear.send(Err(failure.clone()));
        }
    }

    /// Deletes the cached model files (and the loaded model).
    pub(crate) async fn clear(self: &Rc<Self>) -> Result<(), ModelFailure> {
        let id = self.next();
        let (sender, receiver) = oneshot::channel();
        self.clears.borrow_mut().insert(id, sender);
        if let Err(why) = self.send(&ToModel::Clear { id }) {
            self.clears.borrow_mut().remove(&id);
            return Err(ModelFailure {
                code: "model_unavailable".to_owned(),
                message: why,
                hint: None,
            });
        }
        receiver.await.unwrap_or_else(|_| {
            Err(ModelFailure {
                code: "model_unavailable".to_owned(),
                message: "the model worker went away".to_owned(),
                hint: None,
            })
        })
    }
}

thread_local! {
    /// The runtime worker's model worker, for [`host`].
    static WORKER: RefCell<Option<Rc<ModelWorker>>> = const { RefCell::new(None) };
}

/// The provider of Kiln's own model at the address a configuration names
/// (relative to the site's root; `models` when it names none).
fn host(config: &kiln_providers::ProviderConfig) -> Rc<dyn Provider> {
    let Some(worker) = WORKER.with(|slot| slot.borrow().clone()) else {
        return in_process::unavailable(&config.base_url);
    };
    let base = match config.base_url.trim() {
        "" => kiln_types::chat::IN_PROCESS_MODELS,
        base => base,
    };
    let base_url = web_sys::Url::new_with_base(base, &worker.site_root)
        .map(|url| url.href())
        .unwrap_or_else(|_| base.to_owned());
    Rc::new(ModelProvider {
        worker,
        base_url: base_url.trim_end_matches('/').to_owned(),
    })
}

/// Kiln's own model at one address, as a provider.
struct ModelProvider {
    worker: Rc<ModelWorker>,
    base_url: String,
}

impl Provider for ModelProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::InProcess
    }

    fn base_url(&self) -> &str {
        &self.base_url
    }

    fn stream(&self, request: ChatRequest) -> EventStream {
        let (reply, receiver) = mpsc::unbounded();
        let fail = |code: &str, message: String, hint: Option<String>| {
            let error = in_process::error(&self.base_url, code, message, hint);
            futures::stream::once(async move { Err(error) }).boxed_local()
        };
        if let Err(error) = in_process::check_model(&self.base_url, &request.options.model) {
            return futures::stream::once(async move { Err(error) }).boxed_local();
        }
        let id = self.worker.next();
        self.worker
            .turns
            .borrow_mut()
            .insert(id, (self.base_url.clone(), reply));
        let sent = self.worker.send(&ToModel::Turn {
            id,
            base_url: self.base_url.clone(),
            request: Box::new(request),
        });
        if let Err(why) = sent {
            self.worker.turns.borrow_mut().remove(&id);
            return fail("model_unavailable", why, None);
        }
        TurnStream {
            id,
            receiver,
            worker: Rc::clone(&self.worker),
            ended: false,
        }
        .boxed_local()
    }

    fn models(&self) -> LocalBoxFuture<'static, Result<Vec<ModelInfo>, ProviderError>> {
        Box::pin(async { Ok(in_process::models()) })
    }
}

/// A turn's events; dropped before its end, it cancels the turn.
struct TurnStream {
    id: u64,
    receiver: mpsc::UnboundedReceiver<Result<Event, ProviderError>>,
    worker: Rc<ModelWorker>,
    ended: bool,
}

impl Stream for TurnStream {
    type Item = Result<Event, ProviderError>;

    fn poll_next(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.ended {
            return Poll::Ready(None);
        }
        let polled = self.receiver.poll_next_unpin(context);
        if let Poll::Ready(item) = &polled
            && matches!(item, None | Some(Err(_)) | Some(Ok(Event::Done { .. })))
        {
            self.ended = true;
        }
        polled
    }
}

impl Drop for TurnStream {
    fn drop(&mut self) {
        // A turn the worker still knows is cancelled there; one a lost worker
        // took with it is not (that would start a worker to cancel nothing).
        if !self.ended && self.worker.turns.borrow_mut().remove(&self.id).is_some() {
            let _ = self.worker.send(&ToModel::Cancel { id: self.id });
        }
    }
}

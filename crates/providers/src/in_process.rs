//! Kiln's own model as a provider ([`ProviderKind::InProcess`]): the entrance
//! installs the host it has (a thread of the CLI natively, the model worker in
//! the browser's runtime worker) and [`crate::connect_with`] hands it out for
//! every configuration of that kind, so that no caller asks which one it got.

use std::rc::Rc;
use std::sync::RwLock;

use futures::future::LocalBoxFuture;
use futures::stream::{self, StreamExt as _};

use crate::error::{ErrorKind, ProviderError, ProviderKind};
use crate::{ChatRequest, EventStream, ModelInfo, Provider, ProviderConfig};

/// Makes the provider for one configuration of Kiln's own model (its
/// `base_url` says where the model's files are), on the calling thread. A plain
/// function, so that one installed host serves every thread of the process
/// (the CLI's ladders run on threads of their own); what it keeps, it keeps
/// per thread.
pub type Host = fn(&ProviderConfig) -> Rc<dyn Provider>;

static HOST: RwLock<Option<Host>> = RwLock::new(None);

/// Installs the process's host of Kiln's own model. Without one, the kind
/// answers `model_unavailable`.
pub fn install(host: Host) {
    if let Ok(mut slot) = HOST.write() {
        *slot = Some(host);
    }
}

pub(crate) fn connect(config: &ProviderConfig) -> Rc<dyn Provider> {
    match HOST.read().ok().and_then(|slot| *slot) {
        Some(host) => host(config),
        None => unavailable(&config.base_url),
    }
}

/// Refuses, by name, a request for a model other than Kiln's own (an empty
/// id means it too): what every host of it checks before a turn.
pub fn check_model(base_url: &str, model: &str) -> Result<(), ProviderError> {
    let model = model.trim();
    if model.is_empty() || model == kiln_types::chat::IN_PROCESS_MODEL_ID {
        return Ok(());
    }
    Err(error(
        base_url,
        "model_not_found",
        format!(
            "this provider runs only `{}`",
            kiln_types::chat::IN_PROCESS_MODEL_ID
        ),
        Some(format!(
            "ask for the model `{}`",
            kiln_types::chat::IN_PROCESS_MODEL_ID
        )),
    ))
}

/// The provider of an entrance without Kiln's own model: every turn and model
/// list answers `model_unavailable`.
pub fn unavailable(base_url: &str) -> Rc<dyn Provider> {
    Rc::new(Unavailable {
        base_url: base_url.to_owned(),
    })
}

/// The one model Kiln's own provider lists.
pub fn models() -> Vec<ModelInfo> {
    vec![ModelInfo {
        id: kiln_types::chat::IN_PROCESS_MODEL_ID.to_owned(),
        display_name: Some(kiln_types::chat::IN_PROCESS_LABEL.to_owned()),
    }]
}

/// A failure of Kiln's own model, by its stable code (what `kiln-llm` and the
/// model worker say), in the words every provider error has.
pub fn error(base_url: &str, code: &str, message: String, hint: Option<String>) -> ProviderError {
    let kind = match code {
        "context_overflow" => ErrorKind::ContextOverflow,
        "bad_request" => ErrorKind::BadRequest,
        "model_not_found" => ErrorKind::ModelNotFound,
        "model_unavailable" => ErrorKind::ModelUnavailable,
        "model_corrupt" => ErrorKind::ModelCorrupt,
        "network" => ErrorKind::Network,
        _ => ErrorKind::Stream,
    };
    ProviderError {
        kind,
        provider: ProviderKind::InProcess,
        url: base_url.to_owned(),
        model: Some(kiln_types::chat::IN_PROCESS_MODEL_ID.to_owned()),
        status: None,
        message,
        hint,
    }
}

pub(crate) fn not_over_http(config: &ProviderConfig, model: Option<&str>) -> ProviderError {
    let mut error = error(
        &config.base_url,
        "model_unavailable",
        "Kiln's own model runs in-process, not over HTTP".to_owned(),
        Some("connect it with `kiln_providers::connect_with`".to_owned()),
    );
    error.model = model.map(str::to_owned);
    error
}

/// What an entrance without Kiln's own model answers.
struct Unavailable {
    base_url: String,
}

impl Unavailable {
    fn error(&self) -> ProviderError {
        error(
            &self.base_url,
            "model_unavailable",
            "this entrance has no in-process model".to_owned(),
            Some("the app (its model worker) and `kiln` with `--provider local` run it".to_owned()),
        )
    }
}

impl Provider for Unavailable {
    fn kind(&self) -> ProviderKind {
        ProviderKind::InProcess
    }

    fn base_url(&self) -> &str {
        &self.base_url
    }

    fn stream(&self, _request: ChatRequest) -> EventStream {
        let error = self.error();
        stream::once(async move { Err(error) }).boxed_local()
    }

    fn models(&self) -> LocalBoxFuture<'static, Result<Vec<ModelInfo>, ProviderError>> {
        let error = self.error();
        Box::pin(async move { Err(error) })
    }
}

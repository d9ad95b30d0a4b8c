//! [`HttpProvider`]: the one [`Provider`] implementation, over [`HttpClient`], speaking the
//! wire format its [`ProviderConfig`] names.

use std::rc::Rc;

use futures::future::LocalBoxFuture;
use futures::stream::{self, StreamExt as _};
use kiln_http::{Clock, HttpClient, Request, SystemClock};
use serde_json::Value;

use crate::drive::{self, Decoder, Framing, RetryPolicy, Timeouts, Turn};
use crate::error::{ErrorKind, ProviderError, ProviderKind};
use crate::failure::{Peer, from_http, from_status};
use crate::scrub::KeyGuard;
use crate::{ChatRequest, EventStream, ModelInfo, Provider, ProviderConfig};
use crate::{anthropic, ollama, openai};

/// A provider reached over HTTP.
pub struct HttpProvider {
    config: ProviderConfig,
    http: Rc<dyn HttpClient>,
    retry: RetryPolicy,
    /// What retries wait on.
    clock: Rc<dyn Clock>,
    timeouts: Timeouts,
}

impl HttpProvider {
    pub fn new(mut config: ProviderConfig, http: Rc<dyn HttpClient>) -> Self {
        config.base_url = config.base_url.trim().trim_end_matches('/').to_owned();
        Self {
            config,
            http,
            retry: RetryPolicy::default(),
            clock: Rc::new(SystemClock),
            timeouts: Timeouts::default(),
        }
    }

    #[must_use]
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Retries wait on `clock` instead of the system clock (a test's `FakeClock`). The
    /// request's own timeouts stay on the system clock: they bound real network waits.
    #[must_use]
    pub fn with_clock(mut self, clock: Rc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    #[must_use]
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// The request is refused before anything is sent when it cannot be right.
    fn check(&self, request: &ChatRequest, peer: &Peer) -> Result<(), ProviderError> {
        let problem = if request.options.model.trim().is_empty() {
            Some("no model was given")
        } else if request.options.max_tokens == 0 {
            Some("`max_tokens` must be at least 1")
        } else if !request
            .messages
            .iter()
            .any(|message| matches!(message, crate::Message::User { .. }))
        {
            Some("the conversation has no user message")
        } else {
            None
        };
        match problem {
            Some(problem) => Err(peer.error(ErrorKind::BadRequest, problem)),
            None => Ok(()),
        }
    }
}

impl Provider for HttpProvider {
    fn kind(&self) -> ProviderKind {
        self.config.kind
    }

    fn base_url(&self) -> &str {
        &self.config.base_url
    }

    fn stream(&self, request: ChatRequest) -> EventStream {
        if self.config.kind == ProviderKind::InProcess {
            let error =
                crate::in_process::not_over_http(&self.config, Some(&request.options.model));
            return stream::once(async move { Err(error) }).boxed_local();
        }
        let base = &self.config.base_url;
        let key = self.config.key.as_ref();
        let (url, headers, body, framing, decoder): (_, _, Value, _, Box<dyn Decoder>) =
            match self.config.kind {
                ProviderKind::OpenAi => (
                    openai::endpoint(base),
                    openai::headers(key),
                    openai::body(&request, openai::is_openai_itself(base)),
                    Framing::Sse,
                    Box::<openai::ChunkDecoder>::default(),
                ),
                ProviderKind::Anthropic => (
                    anthropic::endpoint(base),
                    anthropic::headers(key, Some(&request)),
                    anthropic::body(&request),
                    Framing::Sse,
                    Box::<anthropic::EventDecoder>::default(),
                ),
                ProviderKind::Ollama | ProviderKind::InProcess => (
                    ollama::endpoint(base),
                    ollama::headers(key),
                    ollama::body(&request),
                    Framing::Ndjson,
                    Box::<ollama::LineDecoder>::default(),
                ),
            };
        let peer = Peer::new(self.config.kind, &url, Some(&request.options.model));
        if let Err(error) = self.check(&request, &peer) {
            return stream::once(async move { Err(error) }).boxed_local();
        }
        let mut headers = headers;
        headers.push((
            "accept".to_owned(),
            match framing {
                Framing::Sse => "text/event-stream",
                Framing::Ndjson => "application/x-ndjson",
            }
            .to_owned(),
        ));
        let guard = KeyGuard::new(self.config.key.as_ref());
        let named = peer.clone();
        let events = drive::run(Turn {
            peer,
            http: Rc::clone(&self.http),
            request: Request {
                method: "POST".to_owned(),
                url,
                headers,
                body: Some(body.to_string().into_bytes()),
                timeout_ms: self.timeouts.response_ms,
                max_body_bytes: self.timeouts.max_body_bytes,
                redirect: kiln_http::Redirect::SameOrigin,
            },
            retry: self.retry,
            clock: Rc::clone(&self.clock),
            idle_ms: self.timeouts.idle_ms,
            framing,
            decoder,
        });
        guard.stream(events, named)
    }

    fn calls_tools(&self, model: &str) -> LocalBoxFuture<'static, Option<bool>> {
        if self.config.kind != ProviderKind::Ollama {
            return Box::pin(async { None });
        }
        let http = Rc::clone(&self.http);
        let request = Request {
            method: "POST".to_owned(),
            url: ollama::show_endpoint(&self.config.base_url),
            headers: ollama::headers(self.config.key.as_ref()),
            body: Some(serde_json::json!({"model": model}).to_string().into_bytes()),
            timeout_ms: 10_000,
            max_body_bytes: 8 << 20,
            redirect: kiln_http::Redirect::SameOrigin,
        };
        Box::pin(async move {
            let response = http.send(request).await.ok()?;
            if !(200..300).contains(&response.status) || response.truncated {
                return None;
            }
            let body: Value = serde_json::from_slice(&response.body).ok()?;
            ollama::calls_tools(&body)
        })
    }

    fn models(&self) -> LocalBoxFuture<'static, Result<Vec<ModelInfo>, ProviderError>> {
        if self.config.kind == ProviderKind::InProcess {
            let error = crate::in_process::not_over_http(&self.config, None);
            return Box::pin(async move { Err(error) });
        }
        let base = &self.config.base_url;
        let key = self.config.key.as_ref();
        let kind = self.config.kind;
        let (url, headers) = match kind {
            ProviderKind::OpenAi => (openai::models_endpoint(base), openai::headers(key)),
            ProviderKind::Anthropic => (
                anthropic::models_endpoint(base),
                anthropic::headers(key, None),
            ),
            ProviderKind::Ollama | ProviderKind::InProcess => {
                (ollama::models_endpoint(base), ollama::headers(key))
            }
        };
        let peer = Peer::new(kind, &url, None);
        let http = Rc::clone(&self.http);
        let request = Request {
            method: "GET".to_owned(),
            url,
            headers: headers
                .into_iter()
                .filter(|(name, _)| name != "content-type")
                .collect(),
            body: None,
            timeout_ms: 30_000,
            max_body_bytes: 8 << 20,
            redirect: kiln_http::Redirect::SameOrigin,
        };
        let guard = KeyGuard::new(self.config.key.as_ref());
        Box::pin(async move {
            let listed = list(http.as_ref(), request, kind, &peer)
                .await
                .map_err(|error| guard.error(error))?;
            guard
                .models(listed)
                .map_err(|why| peer.error(ErrorKind::Stream, why))
        })
    }
}

/// Asks for the model list and reads it.
async fn list(
    http: &dyn HttpClient,
    request: Request,
    kind: ProviderKind,
    peer: &Peer,
) -> Result<Vec<ModelInfo>, ProviderError> {
    let response = http
        .send(request)
        .await
        .map_err(|error| from_http(peer, &error))?;
    if !(200..300).contains(&response.status) {
        return Err(from_status(peer, response.status, &response.body, None));
    }
    if response.truncated {
        return Err(peer.error(ErrorKind::Stream, "the model list is longer than 8 MiB"));
    }
    let body: Value = serde_json::from_slice(&response.body).map_err(|error| {
        peer.error(
            ErrorKind::Stream,
            format!("the model list is not valid JSON: {error}"),
        )
    })?;
    let parsed = match kind {
        ProviderKind::OpenAi => openai::parse_models(&body),
        ProviderKind::Anthropic => anthropic::parse_models(&body),
        ProviderKind::Ollama | ProviderKind::InProcess => ollama::parse_models(&body),
    };
    parsed.map_err(|problem| peer.error(ErrorKind::Stream, problem))
}

/// The provider a configuration describes, on this platform's HTTP client.
pub fn connect(config: ProviderConfig) -> Rc<dyn Provider> {
    connect_with(config, kiln_http::default_client())
}

/// The provider a configuration describes: over `http` for the wire formats,
/// the entrance's in-process model ([`crate::in_process::install`]) for
/// [`ProviderKind::InProcess`].
pub fn connect_with(config: ProviderConfig, http: Rc<dyn HttpClient>) -> Rc<dyn Provider> {
    if config.kind == ProviderKind::InProcess {
        return crate::in_process::connect(&config);
    }
    Rc::new(HttpProvider::new(config, http))
}

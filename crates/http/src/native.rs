//! The native [`HttpClient`]: blocking `ureq` on a thread per request, answered through a
//! oneshot channel so the future needs no runtime (the CLI polls it with a `LocalPool`).

use std::io::Read as _;
use std::thread;
use std::time::Duration;

use futures::channel::oneshot;
use futures::future::LocalBoxFuture;
use ureq::http;

use crate::{HttpClient, HttpError, Request, Response, check_scheme};

/// `ureq` with statuses returned as responses, not errors. Connections are pooled across
/// requests of one client (cloning shares the pool).
#[derive(Clone)]
pub struct UreqClient {
    agent: ureq::Agent,
}

impl UreqClient {
    pub fn new() -> Self {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build();
        Self {
            agent: config.into(),
        }
    }
}

impl Default for UreqClient {
    fn default() -> Self {
        Self::new()
    }
}

impl HttpClient for UreqClient {
    fn send(&self, request: Request) -> LocalBoxFuture<'static, Result<Response, HttpError>> {
        let agent = self.agent.clone();
        let url = request.url.clone();
        let (sender, receiver) = oneshot::channel();
        let spawned = thread::Builder::new()
            .name("kiln-http".to_owned())
            .spawn(move || {
                // The receiver may be gone (the caller dropped the future): nothing to tell then.
                let _ = sender.send(send_blocking(&agent, request));
            });
        Box::pin(async move {
            if let Err(error) = spawned {
                return Err(HttpError::Unreachable {
                    url,
                    message: format!("cannot start a thread for the request: {error}"),
                });
            }
            match receiver.await {
                Ok(result) => result,
                Err(oneshot::Canceled) => Err(HttpError::Unreachable {
                    url,
                    message: "the request thread stopped without an answer".to_owned(),
                }),
            }
        })
    }
}

fn send_blocking(agent: &ureq::Agent, request: Request) -> Result<Response, HttpError> {
    check_scheme(&request.url)?;
    let url = request.url;
    let uri = http::Uri::try_from(url.as_str()).map_err(|error| HttpError::InvalidUrl {
        url: url.clone(),
        reason: error.to_string(),
    })?;
    let mut builder = http::Request::builder()
        .method(request.method.as_str())
        .uri(uri);
    for (name, value) in &request.headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    let timeout = Duration::from_millis(request.timeout_ms);
    let response = match request.body {
        Some(body) => run(agent, builder.body(body), timeout),
        None => run(agent, builder.body(()), timeout),
    };
    let response = response.map_err(|error| map_error(error, &url, request.timeout_ms))?;

    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(name, value)| {
            // `http` keeps names lower-cased already; values need not be UTF-8.
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect();
    let limit = u64::try_from(request.max_body_bytes)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    let mut body = Vec::new();
    // `into_reader` has no limit of its own; `take` reads one byte past the cap so a body of
    // exactly the cap is not called truncated.
    response
        .into_body()
        .into_reader()
        .take(limit)
        .read_to_end(&mut body)
        .map_err(|error| match ureq::Error::from(error) {
            ureq::Error::Timeout(_) => HttpError::Timeout {
                url: url.clone(),
                timeout_ms: request.timeout_ms,
            },
            other => HttpError::Body {
                url: url.clone(),
                message: other.to_string(),
            },
        })?;
    let truncated = body.len() > request.max_body_bytes;
    body.truncate(request.max_body_bytes);
    Ok(Response {
        status,
        headers,
        body,
        truncated,
    })
}

fn run<S: ureq::AsSendBody>(
    agent: &ureq::Agent,
    request: Result<http::Request<S>, http::Error>,
    timeout: Duration,
) -> Result<http::Response<ureq::Body>, ureq::Error> {
    let request = request.map_err(ureq::Error::Http)?;
    let request = agent
        .configure_request(request)
        .timeout_global(Some(timeout))
        .build();
    agent.run(request)
}

fn map_error(error: ureq::Error, url: &str, timeout_ms: u64) -> HttpError {
    let url = url.to_owned();
    match error {
        ureq::Error::Timeout(_) => HttpError::Timeout { url, timeout_ms },
        ureq::Error::BadUri(reason) => HttpError::InvalidUrl { url, reason },
        ureq::Error::Http(error) => HttpError::InvalidRequest {
            url,
            message: error.to_string(),
        },
        ureq::Error::HostNotFound => HttpError::Unreachable {
            url,
            message: "host not found (DNS)".to_owned(),
        },
        ureq::Error::Io(error) => HttpError::Unreachable {
            url,
            message: error.to_string(),
        },
        other => HttpError::Unreachable {
            url,
            message: other.to_string(),
        },
    }
}

#[cfg(test)]
mod tests;

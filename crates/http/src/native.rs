//! The native [`HttpClient`]: blocking `ureq` on a thread per request, answered through a
//! oneshot channel so the future needs no runtime (the CLI polls it with a `LocalPool`). A
//! streamed body comes through an unbounded channel the thread fills as it reads; the thread
//! stops when the channel's receiver is gone.
//!
//! [`HttpClient::send_public`] goes through an agent of its own whose resolver refuses any
//! address that is not public, so the check happens on the addresses connected to, on every
//! hop, and a pooled connection made for a person's private server (a local model, say) is
//! never reused for it. Through a proxy from the environment (`HTTPS_PROXY`, `ALL_PROXY`)
//! the proxy resolves names itself: then only the addresses and `localhost` names written
//! in URLs are checked, as in the browser.

use std::io::Read as _;
use std::net::IpAddr;
use std::thread;
use std::time::Duration;

use futures::StreamExt as _;
use futures::channel::{mpsc, oneshot};
use futures::future::{self, Either, LocalBoxFuture};
use ureq::http;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};

use crate::address::{self, AddressClass};
use crate::body::{BodyLimits, guard};
use crate::{
    HttpClient, HttpError, Redirect, Request, Response, StreamingResponse, check_scheme,
    public_request,
};

/// `ureq` with statuses returned as responses, not errors. Connections are pooled across
/// requests of one client (cloning shares the pools).
#[derive(Clone)]
pub struct UreqClient {
    agent: ureq::Agent,
    /// For [`HttpClient::send_public`]: connects only to public addresses, with a pool of
    /// its own.
    public: ureq::Agent,
}

impl UreqClient {
    pub fn new() -> Self {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build();
        Self {
            agent: config.clone().into(),
            public: ureq::Agent::with_parts(config, DefaultConnector::default(), PublicOnly),
        }
    }
}

/// Resolves as ureq does, then refuses the lot if any address is not public: a name that
/// answers with a public and a private address is refused, not half-trusted. The proxy's own
/// address is the person's choice, not the request's, and passes.
#[derive(Debug)]
struct PublicOnly;

impl Resolver for PublicOnly {
    fn resolve(
        &self,
        uri: &http::Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let addresses = DefaultResolver::default().resolve(uri, config, timeout)?;
        if config.proxy().is_some_and(|proxy| proxy.uri() == uri) {
            return Ok(addresses);
        }
        check_resolved(
            uri.host().unwrap_or_default(),
            addresses.iter().map(|a| a.ip()),
        )
        .map_err(|refused| ureq::Error::Io(std::io::Error::other(refused)))?;
        Ok(addresses)
    }
}

/// The first address of `host` that is not public, if any.
fn check_resolved(host: &str, addresses: impl IntoIterator<Item = IpAddr>) -> Result<(), Refused> {
    for ip in addresses {
        let class = address::classify(ip);
        if !class.reachable_without_naming() {
            return Err(Refused {
                host: host.to_owned(),
                address: ip,
                class,
            });
        }
    }
    Ok(())
}

/// What [`PublicOnly`] refused, carried through ureq's error as an I/O error's payload.
#[derive(Debug, thiserror::Error)]
#[error("{}", address::refusal_reason(host, Some(*address), *class))]
struct Refused {
    host: String,
    address: IpAddr,
    class: AddressClass,
}

impl Default for UreqClient {
    fn default() -> Self {
        Self::new()
    }
}

impl HttpClient for UreqClient {
    fn send(&self, request: Request) -> LocalBoxFuture<'static, Result<Response, HttpError>> {
        send_on(self.agent.clone(), request)
    }

    /// Checks the URL's host first (no thread for what needs no DNS), then sends through the
    /// agent whose resolver refuses non-public addresses, on every hop when following.
    fn send_public(
        &self,
        request: Request,
    ) -> LocalBoxFuture<'static, Result<Response, HttpError>> {
        match public_request(request) {
            Ok(request) => send_on(self.public.clone(), request),
            Err(error) => Box::pin(future::ready(Err(error))),
        }
    }
    fn open(
        &self,
        request: Request,
        idle_timeout_ms: u64,
    ) -> LocalBoxFuture<'static, Result<StreamingResponse, HttpError>> {
        if let Err(error) = check_scheme(&request.url) {
            return Box::pin(future::ready(Err(error)));
        }
        let agent = self.agent.clone();
        let url = request.url.clone();
        let timeout_ms = request.timeout_ms;
        let max_body_bytes = request.max_body_bytes;
        let (head_sender, head_receiver) = oneshot::channel();
        let (chunk_sender, chunk_receiver) = mpsc::unbounded();
        let spawned = thread::Builder::new()
            .name("kiln-http-stream".to_owned())
            .spawn(move || {
                open_blocking(&agent, request, idle_timeout_ms, head_sender, chunk_sender);
            });
        Box::pin(async move {
            if let Err(error) = spawned {
                return Err(HttpError::Unreachable {
                    url,
                    message: format!("cannot start a thread for the request: {error}"),
                });
            }
            // Returning early drops the head's receiver: the thread sees it when the head
            // comes, and drops the response, closing the connection.
            let head = match future::select(head_receiver, crate::sleep(timeout_ms)).await {
                Either::Left((Ok(head), _)) => head?,
                Either::Left((Err(oneshot::Canceled), _)) => {
                    return Err(HttpError::Unreachable {
                        url,
                        message: "the request thread stopped without an answer".to_owned(),
                    });
                }
                Either::Right(((), _)) => return Err(HttpError::Timeout { url, timeout_ms }),
            };
            let (status, headers) = head;
            let limits = BodyLimits {
                url,
                idle_timeout_ms,
                max_body_bytes,
            };
            Ok(StreamingResponse {
                status,
                headers,
                body: guard(chunk_receiver.boxed_local(), limits),
            })
        })
    }
}

/// Sends `request` on `agent` from a thread of its own.
fn send_on(
    agent: ureq::Agent,
    request: Request,
) -> LocalBoxFuture<'static, Result<Response, HttpError>> {
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

fn send_blocking(agent: &ureq::Agent, request: Request) -> Result<Response, HttpError> {
    check_scheme(&request.url)?;
    let url = request.url.clone();
    let timeout_ms = request.timeout_ms;
    let max_body_bytes = request.max_body_bytes;
    let response = start(
        agent,
        request,
        Budget::Whole(Duration::from_millis(timeout_ms)),
    )?;
    let (status, headers) = head_of(&response);
    let limit = u64::try_from(max_body_bytes)
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
                timeout_ms,
            },
            other => HttpError::Body {
                url: url.clone(),
                message: other.to_string(),
            },
        })?;
    let truncated = body.len() > max_body_bytes;
    body.truncate(max_body_bytes);
    Ok(Response {
        status,
        headers,
        body,
        truncated,
    })
}

/// The status and headers of a streamed response, sent ahead of its body.
type Head = (u16, Vec<(String, String)>);

/// Runs on the request's own thread: sends the head through `head`, then each chunk the
/// body reader gives through `chunks`, until the body ends, fails, passes the cap, or
/// nobody listens any more (checked before each read and on each send).
fn open_blocking(
    agent: &ureq::Agent,
    request: Request,
    idle_timeout_ms: u64,
    head: oneshot::Sender<Result<Head, HttpError>>,
    chunks: mpsc::UnboundedSender<Result<Vec<u8>, HttpError>>,
) {
    let url = request.url.clone();
    let max_body_bytes = request.max_body_bytes;
    // The caller's side enforces both timeouts exactly; these bound the thread. Each phase up
    // to the headers gets the whole head budget, and each read of the body at most the longer
    // of the two timeouts: ureq's per-read timeout also covers reading the headers, so the
    // idle timeout alone would cut a slow head short. There is no overall deadline: a stream
    // lasts as long as chunks keep coming.
    let budget = Budget::Streaming {
        head: Duration::from_millis(request.timeout_ms),
        per_read: Duration::from_millis(idle_timeout_ms.max(request.timeout_ms)),
    };
    let response = match start(agent, request, budget) {
        Ok(response) => response,
        Err(error) => {
            let _ = head.send(Err(error));
            return;
        }
    };
    if head.send(Ok(head_of(&response))).is_err() {
        // The caller gave up on the head (its timeout, or the future was dropped); dropping
        // the response closes the connection.
        return;
    }
    let mut reader = response.into_body().into_reader();
    let mut buffer = vec![0; READ_BUFFER_BYTES];
    let mut received: usize = 0;
    // Past the cap the caller's side ends the stream; the thread stops reading there too, so
    // at most the cap and one buffer wait in the channel.
    while received <= max_body_bytes && !chunks.is_closed() {
        // `read` gives what has arrived without waiting to fill the buffer: an SSE event is
        // passed on as soon as it is in.
        let chunk = match reader.read(&mut buffer) {
            Ok(0) => return,
            Ok(length) => buffer.get(..length).unwrap_or_default().to_vec(),
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => {
                let error = match ureq::Error::from(error) {
                    ureq::Error::Timeout(_) => HttpError::Stalled {
                        url,
                        idle_ms: idle_timeout_ms,
                    },
                    other => HttpError::Body {
                        url,
                        message: other.to_string(),
                    },
                };
                let _ = chunks.unbounded_send(Err(error));
                return;
            }
        };
        received = received.saturating_add(chunk.len());
        if chunks.unbounded_send(Ok(chunk)).is_err() {
            return;
        }
    }
}

/// Each read of a streamed body asks for at most this much.
const READ_BUFFER_BYTES: usize = 16 * 1024;

/// How long ureq may take over one request.
enum Budget {
    /// `send`: one deadline over the whole exchange, body included.
    Whole(Duration),
    /// `open`: each phase up to the headers within `head`; the body has no overall deadline,
    /// only `per_read` for each read.
    Streaming { head: Duration, per_read: Duration },
}

impl Budget {
    /// What is left after `spent` of the time up to the headers (the body's per-read
    /// timeout is not a deadline and stays).
    fn less(&self, spent: Duration) -> Self {
        match *self {
            Self::Whole(timeout) => Self::Whole(timeout.saturating_sub(spent)),
            Self::Streaming { head, per_read } => Self::Streaming {
                head: head.saturating_sub(spent),
                per_read,
            },
        }
    }
}

/// Sends the request and waits for the status and headers; under
/// [`Redirect::SameOrigin`], follows the redirects that stay on the request's origin
/// ([`crate::same_origin_hop`]) and refuses the first that does not, before it is sent.
fn start(
    agent: &ureq::Agent,
    request: Request,
    budget: Budget,
) -> Result<http::Response<ureq::Body>, HttpError> {
    if request.redirect != Redirect::SameOrigin {
        return start_once(agent, request, budget);
    }
    let started = crate::now_ms();
    let timeout_ms = request.timeout_ms;
    let mut request = Request {
        redirect: Redirect::Stop,
        ..request
    };
    for _ in 0..=crate::MAX_SAME_ORIGIN_HOPS {
        // Every hop within what is left of the one budget.
        let spent = Duration::from_millis(crate::whole_ms(crate::now_ms() - started));
        let response = start_once(agent, request.clone(), budget.less(spent))?;
        let Some(location) = crate::redirect_location(response.status().as_u16(), |name| {
            response
                .headers()
                .get(name)
                .and_then(|value| value.to_str().ok())
        }) else {
            return Ok(response);
        };
        // Dropping the redirect's response closes its body before the next hop.
        let status = response.status().as_u16();
        drop(response);
        request = crate::same_origin_hop(request, status, &location)?;
    }
    Err(HttpError::InvalidRequest {
        url: request.url,
        message: format!(
            "more than {} redirects, which is not followed further (timeout {timeout_ms} ms)",
            crate::MAX_SAME_ORIGIN_HOPS
        ),
    })
}

/// Sends the request once and waits for the status and headers.
fn start_once(
    agent: &ureq::Agent,
    request: Request,
    budget: Budget,
) -> Result<http::Response<ureq::Body>, HttpError> {
    let url = request.url;
    let timeout_ms = request.timeout_ms;
    let redirect = request.redirect;
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
    let response = match request.body {
        Some(body) => run(agent, builder.body(body), budget, redirect),
        None => run(agent, builder.body(()), budget, redirect),
    };
    response.map_err(|error| map_error(error, &url, timeout_ms))
}

fn head_of(response: &http::Response<ureq::Body>) -> Head {
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
    (status, headers)
}

fn run<S: ureq::AsSendBody>(
    agent: &ureq::Agent,
    request: Result<http::Request<S>, http::Error>,
    budget: Budget,
    redirect: Redirect,
) -> Result<http::Response<ureq::Body>, ureq::Error> {
    let request = request.map_err(ureq::Error::Http)?;
    let config = agent.configure_request(request);
    // 0: a 3xx comes back as it is, never as an error.
    let config = match redirect {
        Redirect::Follow => config,
        // `start` follows a same-origin redirect itself, after checking where it leads.
        Redirect::Stop | Redirect::SameOrigin => config.max_redirects(0),
    };
    let config = match budget {
        Budget::Whole(timeout) => config.timeout_global(Some(timeout)),
        Budget::Streaming { head, per_read } => config
            .timeout_resolve(Some(head))
            .timeout_connect(Some(head))
            .timeout_send_request(Some(head))
            .timeout_send_body(Some(head))
            .timeout_recv_response(Some(head))
            .timeout_per_read(Some(per_read)),
    };
    agent.run(config.build())
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
        ureq::Error::Io(error) => match error.get_ref().and_then(|inner| inner.downcast_ref()) {
            Some(Refused {
                host,
                address,
                class,
            }) => HttpError::AddressRefused {
                url,
                host: host.clone(),
                address: Some(*address),
                class: *class,
            },
            None => HttpError::Unreachable {
                url,
                message: error.to_string(),
            },
        },
        other => HttpError::Unreachable {
            url,
            message: other.to_string(),
        },
    }
}

#[cfg(test)]
mod tests;

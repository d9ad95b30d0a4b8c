//! A small HTTP seam: one request in, one bounded response out, or a body read as it
//! arrives.
//!
//! Capabilities and LLM providers talk HTTP through [`HttpClient`], so the same code runs
//! natively and in the browser. Two implementations sit behind [`default_client`]: `ureq` on
//! a thread of its own natively (`native.rs`), the global `fetch` in a Window or a Worker in
//! the browser (`browser.rs`). The clock seam ([`Clock`], [`SystemClock`], and the system
//! clock's [`now_ms`] and [`sleep`]) comes from `kiln-clock` and is re-exported here, so that
//! callers (retry back-off, deadlines) need no platform API and no other crate for time;
//! `FakeClock` too, under the `fake-clock` feature tests turn on. This crate's own timeouts
//! run on the system clock: they bound real network waits.
//!
//! - [`address`]: which addresses a request may reach, decided without I/O.
//! - [`reflection`]: a secret a server answered back, as its bytes or encoded.
//! - `body`: the platform-independent half of a streamed body: the idle timeout, the size
//!   cap, and ending after the first error.
//! - `native` and `browser`: the two implementations, one per platform.
//!
//! What every implementation keeps:
//! - a status that is not 2xx is a [`Response`], not an error: the caller decides;
//! - only `http` and `https` URLs are sent anywhere ([`HttpError::InvalidUrl`]);
//! - nothing a peer sends can panic: every failure is an [`HttpError`] naming the URL;
//! - a redirect is followed only as the request's [`Redirect`] says: always ([`Redirect::Follow`]),
//!   within the request's origin ([`Redirect::SameOrigin`], for credentialed requests; in the
//!   browser, not at all), or never ([`Redirect::Stop`]: natively the `3xx` is handed back);
//! - [`HttpClient::send_public`] reaches only public addresses ([`address`] says which are,
//!   and what each platform can check).
//!
//! [`HttpClient::send`] reads the whole body: it is cut at [`Request::max_body_bytes`]
//! ([`Response::truncated`] says so) and [`Request::timeout_ms`] covers the whole exchange.
//!
//! [`HttpClient::open`] (an SSE or NDJSON stream) answers once the status and headers are in,
//! within [`Request::timeout_ms`]; the body then comes as a [`BodyStream`] of chunks as the
//! platform hands them over, with no overall deadline, however long the stream lasts. It ends
//! with [`HttpError::Stalled`] when no chunk comes within the idle timeout, with
//! [`HttpError::TooLarge`] past [`Request::max_body_bytes`], with [`HttpError::Body`] when the
//! connection breaks. Dropping the [`StreamingResponse`] (or the pending future) stops the
//! request: `fetch` is aborted; natively the reading thread stops at its next chunk, or after
//! at most the longer of the idle timeout and [`Request::timeout_ms`] of silence, and closes
//! the connection.

use std::rc::Rc;

use futures::future::LocalBoxFuture;
use futures::stream::LocalBoxStream;

pub mod address;
mod body;
#[cfg(target_arch = "wasm32")]
mod browser;
#[cfg(not(target_arch = "wasm32"))]
mod native;
pub mod reflection;

#[cfg(target_arch = "wasm32")]
pub use browser::FetchClient;
#[cfg(feature = "fake-clock")]
pub use kiln_clock::FakeClock;
pub use kiln_clock::{Clock, SystemClock, now_ms, sleep, whole_ms};
#[cfg(not(target_arch = "wasm32"))]
pub use native::UreqClient;

/// One HTTP request. Every field is spelled out: there are no hidden defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `POST`, `DELETE`...
    pub method: String,
    /// An absolute `http` or `https` URL.
    pub url: String,
    /// Sent in this order; a name may repeat.
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
    /// [`HttpClient::send`]: for the whole exchange, connecting, sending, and reading the
    /// whole body. [`HttpClient::open`]: up to the status and headers only.
    pub timeout_ms: u64,
    /// [`HttpClient::send`]: the body is cut here and [`Response::truncated`] is set.
    /// [`HttpClient::open`]: past it the body stream ends with [`HttpError::TooLarge`].
    pub max_body_bytes: usize,
    /// Whether the platform follows a redirect or hands it back.
    pub redirect: Redirect,
}

/// What happens to a `3xx` answer with a `Location`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redirect {
    /// The platform follows it (up to 10 hops natively, 20 in the browser) and answers the
    /// last response: what providers and MCP servers want, whose URLs a person configured.
    /// Nobody checks where the hops lead (but see [`HttpClient::send_public`]).
    Follow,
    /// Followed only while it stays on the request's origin (scheme, host and port; an
    /// `http` URL may move to `https` on the same host), so whatever the request carries
    /// (a key in any header) never reaches another origin: a redirect elsewhere fails with
    /// [`HttpError::CrossOriginRedirect`] before anything is sent there. What LLM providers
    /// use. In the browser `fetch` cannot show where a redirect leads before it follows it,
    /// so there this is [`Redirect::Stop`]: any redirect fails with [`HttpError::Redirected`].
    SameOrigin,
    /// The platform does not follow it, so the caller can check where it leads first.
    /// Natively the `3xx` comes back as a [`Response`] (status, `location` header, body). In
    /// the browser `fetch` hides a redirect it does not follow (an opaque response: no status,
    /// no headers), so the request fails with [`HttpError::Redirected`].
    Stop,
}

/// One HTTP response, whatever its status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// Names lower-cased, in the order the platform gave them.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The body was longer than [`Request::max_body_bytes`] and was cut there.
    pub truncated: bool,
}

impl Response {
    /// The first value of the header `name`, compared case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(header_name, _)| header_name.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

/// Why a request got no response. A status that is not 2xx is not one of these.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    #[error("invalid URL `{url}`: {reason}")]
    InvalidUrl { url: String, reason: String },
    /// A method or header the platform refuses to send.
    #[error("cannot send the request to `{url}`: {message}")]
    InvalidRequest { url: String, message: String },
    /// Refused, DNS, reset, TLS; in the browser also a CORS refusal, which `fetch` does not
    /// tell apart from a network error.
    #[error("cannot reach `{url}`: {message}")]
    Unreachable { url: String, message: String },
    #[error("no complete response from `{url}` within {timeout_ms} ms")]
    Timeout { url: String, timeout_ms: u64 },
    /// The status and headers arrived, then reading the body failed.
    #[error("reading the response body from `{url}` failed: {message}")]
    Body { url: String, message: String },
    /// A streamed body sent nothing for `idle_ms`.
    #[error("the response from `{url}` stalled: no data for {idle_ms} ms")]
    Stalled { url: String, idle_ms: u64 },
    /// A streamed body went past its cap.
    #[error("the response body from `{url}` is longer than {limit} bytes")]
    TooLarge { url: String, limit: usize },
    /// [`HttpClient::send_public`] would have connected to an address that is not public
    /// (see [`address`]): nothing was sent. `address` is `None` for a `localhost` name,
    /// refused without asking DNS.
    #[error(
        "refused `{url}` before connecting: {}, reached only when named",
        address::refusal_reason(host, *address, *class)
    )]
    AddressRefused {
        url: String,
        host: String,
        address: Option<std::net::IpAddr>,
        class: address::AddressClass,
    },
    /// In the browser, the answer to a [`Redirect::Stop`] request was a redirect: `fetch`
    /// hides where it leads (an opaque redirect, no status and no headers), so it can be
    /// neither checked nor followed.
    #[error(
        "`{url}` answered with a redirect, which is not followed: the browser does not show \
         where a redirect leads unless it follows it, so its address cannot be checked"
    )]
    Redirected { url: String },
    /// A [`Redirect::SameOrigin`] request was redirected to another origin: nothing was
    /// sent there.
    #[error(
        "`{url}` redirected to `{to}`, another origin, which is not followed: the request's \
         credentials would go with it. Point the URL at the final address."
    )]
    CrossOriginRedirect { url: String, to: String },
}

/// How many same-origin redirects a [`Redirect::SameOrigin`] request follows (as many as
/// `ureq` follows by default).
#[cfg(not(target_arch = "wasm32"))]
const MAX_SAME_ORIGIN_HOPS: usize = 10;

/// The `Location` of a redirect status (301, 302, 303, 307, 308), read through `header`.
#[cfg(not(target_arch = "wasm32"))]
fn redirect_location<'a>(status: u16, header: impl Fn(&str) -> Option<&'a str>) -> Option<String> {
    matches!(status, 301 | 302 | 303 | 307 | 308)
        .then(|| header("location"))
        .flatten()
        .map(str::to_owned)
}

/// The next request after `request` was answered `status` with `location`, if it stays on
/// the request's origin (or moves from `http` to `https` on the same host); the method as
/// `fetch` changes it (303, and 301/302 after a `POST`, become a `GET` without a body).
#[cfg(not(target_arch = "wasm32"))]
fn same_origin_hop(request: Request, status: u16, location: &str) -> Result<Request, HttpError> {
    let from = address::Target::parse(&request.url)?;
    let to = from.join(location)?;
    let (before, after) = (from.origin(), to.origin());
    let upgrade = before.scheme == address::Scheme::Http
        && after.scheme == address::Scheme::Https
        && before.host == after.host
        && before.port == before.scheme.default_port()
        && after.port == after.scheme.default_port();
    if before != after && !upgrade {
        return Err(HttpError::CrossOriginRedirect {
            url: request.url,
            to: to.url().to_owned(),
        });
    }
    let to_get = status == 303 || (matches!(status, 301 | 302) && request.method == "POST");
    Ok(Request {
        url: to.url().to_owned(),
        method: if to_get {
            "GET".to_owned()
        } else {
            request.method
        },
        body: if to_get { None } else { request.body },
        ..request
    })
}

/// The body of a [`StreamingResponse`]: chunks as they arrive, in order.
pub type BodyStream = LocalBoxStream<'static, Result<Vec<u8>, HttpError>>;

/// A response whose body is read as it arrives (an SSE or NDJSON stream).
///
/// Dropping it (or its `body`) stops the request: `fetch` is aborted, the native reader
/// stops and closes the connection.
pub struct StreamingResponse {
    pub status: u16,
    /// Names lower-cased, in the order the platform gave them.
    pub headers: Vec<(String, String)>,
    /// Ends after the last chunk, or after the first `Err`: [`HttpError::Stalled`] when no
    /// chunk came within the idle timeout, [`HttpError::TooLarge`] past
    /// [`Request::max_body_bytes`], [`HttpError::Body`] when the connection broke.
    pub body: BodyStream,
}

impl StreamingResponse {
    /// The first value of the header `name`, compared case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(header_name, _)| header_name.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

/// Sends one request. The future owns everything it needs (`'static`) and needs no
/// particular executor; it is not `Send`, as `fetch` futures cannot be.
pub trait HttpClient {
    fn send(&self, request: Request) -> LocalBoxFuture<'static, Result<Response, HttpError>>;

    /// Sends one request and answers as soon as the status and headers are in; the body
    /// follows as a stream. [`Request::timeout_ms`] bounds the wait for the headers,
    /// `idle_timeout_ms` the wait for each next chunk, [`Request::max_body_bytes`] the whole
    /// body (past it the stream ends with [`HttpError::TooLarge`]).
    fn open(
        &self,
        request: Request,
        idle_timeout_ms: u64,
    ) -> LocalBoxFuture<'static, Result<StreamingResponse, HttpError>>;

    /// [`HttpClient::send`], reaching only public addresses
    /// ([`AddressClass::reachable_without_naming`](address::AddressClass::reachable_without_naming)):
    /// anything else is [`HttpError::AddressRefused`] before a byte is sent. The URL is sent
    /// as [`address::Target`] parses it, so the host checked is the host reached.
    ///
    /// This default checks what can be known without DNS (an address written in the URL, a
    /// `localhost` name) and does not follow redirects, whatever `redirect` says, since it
    /// cannot check where they lead: the browser's `fetch` keeps it. [`UreqClient`] also
    /// checks every address a name resolves to, as it connects, on every hop.
    fn send_public(
        &self,
        request: Request,
    ) -> LocalBoxFuture<'static, Result<Response, HttpError>> {
        match public_request(request) {
            Ok(request) => self.send(Request {
                redirect: Redirect::Stop,
                ..request
            }),
            Err(error) => Box::pin(futures::future::ready(Err(error))),
        }
    }
}

/// `request` with its URL as parsed, once its host passed the checks that need no DNS.
fn public_request(request: Request) -> Result<Request, HttpError> {
    let target = address::Target::parse(&request.url)?;
    target.check_public()?;
    Ok(Request {
        url: target.url().to_owned(),
        ..request
    })
}

/// The platform's client: [`UreqClient`] natively, `FetchClient` in the browser.
#[cfg(not(target_arch = "wasm32"))]
pub fn default_client() -> Rc<dyn HttpClient> {
    Rc::new(UreqClient::new())
}

/// The platform's client: [`UreqClient`] natively, [`FetchClient`] in the browser.
#[cfg(target_arch = "wasm32")]
pub fn default_client() -> Rc<dyn HttpClient> {
    Rc::new(FetchClient::new())
}

/// Refuses any scheme but `http` and `https` before a platform sees the URL (callers may ask
/// first, before spending anything on a request): `fetch` would
/// happily read `data:` or `blob:` URLs, and neither is a network peer.
pub fn check_scheme(url: &str) -> Result<(), HttpError> {
    let invalid = |reason: String| HttpError::InvalidUrl {
        url: url.to_owned(),
        reason,
    };
    let Some((scheme, rest)) = url.split_once(':') else {
        return Err(invalid(
            "no scheme: expected `http://` or `https://`".to_owned(),
        ));
    };
    if !(scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")) {
        return Err(invalid(format!(
            "scheme `{scheme}` is not allowed: only http and https are"
        )));
    }
    if !rest.starts_with("//") || rest.len() == 2 {
        return Err(invalid("no host after the scheme".to_owned()));
    }
    Ok(())
}

/// `url` as messages and logs show it: user info and the query (where credentials often
/// ride) replaced by `…`, the fragment dropped.
#[must_use]
pub fn shown_url(url: &str) -> String {
    let url = url.split_once('#').map_or(url, |(before, _)| before);
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let rest = match rest.split_once('@') {
        Some((userinfo, host)) if !userinfo.contains('/') => format!("…@{host}"),
        _ => rest.to_owned(),
    };
    let rest = match rest.split_once('?') {
        Some((path, _)) => format!("{path}?…"),
        None => rest,
    };
    if scheme.is_empty() {
        rest
    } else {
        format!("{scheme}://{rest}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_lookup_ignores_case() {
        let response = Response {
            status: 200,
            headers: vec![("content-type".into(), "text/plain".into())],
            body: Vec::new(),
            truncated: false,
        };
        assert_eq!(response.header("Content-Type"), Some("text/plain"));
        assert_eq!(response.header("mcp-session-id"), None);
    }

    #[test]
    fn only_http_and_https_schemes_pass() {
        let cases = [
            ("http://127.0.0.1:1/x", None),
            ("HTTPS://example.com", None),
            (
                "ftp://example.com/f",
                Some("scheme `ftp` is not allowed: only http and https are"),
            ),
            (
                "data:text/plain,hi",
                Some("scheme `data` is not allowed: only http and https are"),
            ),
            (
                "example.com/path",
                Some("no scheme: expected `http://` or `https://`"),
            ),
            ("http://", Some("no host after the scheme")),
            ("http:example.com", Some("no host after the scheme")),
        ];
        for (url, expected_reason) in cases {
            let got = check_scheme(url).err().map(|error| match error {
                HttpError::InvalidUrl { reason, .. } => reason,
                other => panic!("{url}: unexpected {other:?}"),
            });
            assert_eq!(got.as_deref(), expected_reason, "{url}");
        }
    }

    #[test]
    fn shown_urls_hide_credentials() {
        for (url, shown) in [
            (
                "https://user:pw@host.example/mcp?api_key=K",
                "https://…@host.example/mcp?…",
            ),
            ("http://127.0.0.1:3001/mcp", "http://127.0.0.1:3001/mcp"),
            ("http://h/mcp?token=K#x", "http://h/mcp?…"),
            ("http://h/a#secret", "http://h/a"),
            ("http://h/p@q", "http://h/p@q"),
        ] {
            assert_eq!(shown_url(url), shown, "{url}");
        }
    }
}

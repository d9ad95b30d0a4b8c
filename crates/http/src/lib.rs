//! A small HTTP seam: one request in, one bounded response out.
//!
//! Capabilities (and later LLM providers) talk HTTP through [`HttpClient`], so the same
//! code runs natively and in the browser. Two implementations sit behind
//! [`default_client`]: `ureq` on a thread of its own natively (`native.rs`), the global
//! `fetch` in a Window or a Worker in the browser (`browser.rs`).
//!
//! What every implementation keeps:
//! - a status that is not 2xx is a [`Response`], not an error: the caller decides;
//! - the body is cut at [`Request::max_body_bytes`] and [`Response::truncated`] says so;
//! - [`Request::timeout_ms`] covers the whole exchange, body included;
//! - only `http` and `https` URLs are sent anywhere ([`HttpError::InvalidUrl`]);
//! - nothing a peer sends can panic: every failure is an [`HttpError`] naming the URL.

use std::rc::Rc;

use futures::future::LocalBoxFuture;

#[cfg(target_arch = "wasm32")]
mod browser;
#[cfg(not(target_arch = "wasm32"))]
mod native;

#[cfg(target_arch = "wasm32")]
pub use browser::FetchClient;
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
    /// For the whole exchange: connecting, sending, and reading the whole body.
    pub timeout_ms: u64,
    /// The body is cut here and [`Response::truncated`] is set.
    pub max_body_bytes: usize,
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
}

/// Sends one request. The future owns everything it needs (`'static`) and needs no
/// particular executor; it is not `Send`, as `fetch` futures cannot be.
pub trait HttpClient {
    fn send(&self, request: Request) -> LocalBoxFuture<'static, Result<Response, HttpError>>;
}

/// The platform's client: [`UreqClient`] natively, [`FetchClient`] in the browser.
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
}

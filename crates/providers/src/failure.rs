//! From what a provider answered (a status and a body) or failed to answer (an
//! [`HttpError`]) to a typed [`ProviderError`] with a message and a hint.
//!
//! Error envelopes read here:
//! - OpenAI: `{"error": {"message", "type", "code"}}`
//!   (<https://platform.openai.com/docs/guides/error-codes>);
//! - Anthropic: `{"type": "error", "error": {"type", "message"}}`
//!   (<https://docs.anthropic.com/en/api/errors>);
//! - Ollama: `{"error": "..."}` (<https://github.com/ollama/ollama/blob/main/docs/api.md>).

use kiln_http::{HttpError, shown_url};
use serde_json::Value;

use crate::assemble::preview;
use crate::error::{ErrorKind, ProviderError, ProviderKind};

/// Who was asked: for the messages.
#[derive(Debug, Clone)]
pub(crate) struct Peer {
    pub kind: ProviderKind,
    /// Shown without user info or query.
    pub url: String,
    pub model: Option<String>,
}

impl Peer {
    pub(crate) fn new(kind: ProviderKind, url: &str, model: Option<&str>) -> Self {
        Self {
            kind,
            url: shown_url(url),
            model: model.map(str::to_owned),
        }
    }

    pub(crate) fn error(&self, kind: ErrorKind, message: impl Into<String>) -> ProviderError {
        ProviderError {
            kind,
            provider: self.kind,
            url: self.url.clone(),
            model: self.model.clone(),
            status: None,
            message: message.into(),
            hint: None,
        }
    }
}

/// The provider's own error message and code, from any of the three envelopes.
fn read_envelope(body: &[u8]) -> (Option<String>, Option<String>) {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        let text = String::from_utf8_lossy(body);
        let text = text.trim();
        return ((!text.is_empty()).then(|| preview(text)), None);
    };
    let error = value.get("error").unwrap_or(&value);
    if let Some(text) = error.as_str() {
        return (Some(text.to_owned()), None);
    }
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let code = error
        .get("code")
        .and_then(|code| match code {
            Value::String(text) => Some(text.clone()),
            Value::Number(number) => Some(number.to_string()),
            _ => None,
        })
        .or_else(|| error.get("type").and_then(Value::as_str).map(str::to_owned));
    (message, code)
}

/// Words providers use when a prompt does not fit the context window.
fn is_context_overflow(message: &str, code: Option<&str>) -> bool {
    let lower = message.to_ascii_lowercase();
    code == Some("context_length_exceeded")
        || [
            "context length",
            "context_length",
            "context window",
            "prompt is too long",
            "too many tokens",
            "exceeds the context",
            "exceed context",
            "input is too long",
        ]
        .iter()
        .any(|marker| lower.contains(marker))
}

fn mentions_model(message: &str, code: Option<&str>) -> bool {
    let lower = message.to_ascii_lowercase();
    code == Some("model_not_found") || lower.contains("model")
}

/// The seconds (or `retry-after-ms` milliseconds) a provider asked us to wait.
pub(crate) fn retry_after_ms(header: impl Fn(&str) -> Option<String>) -> Option<u64> {
    if let Some(ms) = header("retry-after-ms").and_then(|value| value.trim().parse::<f64>().ok()) {
        return (ms.is_finite() && ms >= 0.0).then(|| ms.ceil() as u64);
    }
    let seconds = header("retry-after")?.trim().parse::<f64>().ok()?;
    (seconds.is_finite() && seconds >= 0.0).then(|| (seconds * 1000.0).ceil() as u64)
}

const KEY_HINT: &str = "check the API key of this provider (the Providers panel in the app; \
                        `--key-env VAR` for `kiln chat`)";

/// A response whose status is not 2xx.
pub(crate) fn from_status(
    peer: &Peer,
    status: u16,
    body: &[u8],
    retry_after_ms: Option<u64>,
) -> ProviderError {
    let (message, code) = read_envelope(body);
    let said = message
        .clone()
        .unwrap_or_else(|| "no error message".to_owned());
    let (kind, message, hint) = match status {
        401 | 403 => (
            ErrorKind::KeyRejected,
            format!("the key was rejected (HTTP {status}): {said}"),
            Some(KEY_HINT.to_owned()),
        ),
        404 if mentions_model(&said, code.as_deref()) => (
            ErrorKind::ModelNotFound,
            match &peer.model {
                Some(model) => format!("model `{model}` not found (HTTP 404): {said}"),
                None => format!("model not found (HTTP 404): {said}"),
            },
            Some("pick a model from the provider's model list".to_owned()),
        ),
        404 => (
            ErrorKind::BadRequest,
            format!("no such endpoint (HTTP 404): {said}"),
            Some(base_url_hint(peer.kind)),
        ),
        429 => (
            ErrorKind::RateLimited { retry_after_ms },
            match retry_after_ms {
                Some(ms) => format!("rate limited (HTTP 429; asked to wait {ms} ms): {said}"),
                None => format!("rate limited (HTTP 429): {said}"),
            },
            Some("wait and try again, or lower the request rate".to_owned()),
        ),
        400 | 413 | 422 if is_context_overflow(&said, code.as_deref()) => (
            ErrorKind::ContextOverflow,
            format!("the prompt does not fit the model's context window (HTTP {status}): {said}"),
            Some(
                "shorten the conversation (compact it) or pick a model with a larger context"
                    .to_owned(),
            ),
        ),
        500..=599 => (
            ErrorKind::Server,
            format!("server error (HTTP {status}): {said}"),
            None,
        ),
        _ => (
            ErrorKind::BadRequest,
            format!("the request was refused (HTTP {status}): {said}"),
            None,
        ),
    };
    let mut error = peer.error(kind, message);
    error.status = Some(status);
    error.hint = hint;
    error
}

fn base_url_hint(kind: ProviderKind) -> String {
    match kind {
        ProviderKind::OpenAi => "check the base URL: it must end where `/chat/completions` \
                                 follows, usually in `/v1`"
            .to_owned(),
        ProviderKind::Anthropic => "check the base URL: it is the root `/v1/messages` follows, \
                                    e.g. `https://api.anthropic.com`"
            .to_owned(),
        ProviderKind::Ollama => "check the base URL: it is the root `/api/chat` follows, e.g. \
                                 `http://127.0.0.1:11434`"
            .to_owned(),
        ProviderKind::InProcess => "check where the model's files are: the build writes them \
                                    into `pkg/models/` (`cargo xtask build`)"
            .to_owned(),
    }
}

fn is_loopback(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit('@').next().unwrap_or(authority);
    let host = match host_port.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or(""),
        None => host_port.split(':').next().unwrap_or(""),
    };
    host.eq_ignore_ascii_case("localhost") || host == "::1" || host.starts_with("127.")
}

/// What to check when a provider cannot be reached, in the words of where
/// Kiln runs: in the browser a CORS refusal looks the same as a server that
/// is down, so the hint names the origin the server must allow; natively
/// there is no origin to allow.
fn unreachable_hint(peer: &Peer, in_browser: bool) -> String {
    let mut hint = String::from("check the base URL and that the server is up");
    let loopback = is_loopback(&peer.url);
    if in_browser {
        hint.push_str(
            "; in the browser a refusal by CORS looks the same, so the server must also allow \
             this page's origin",
        );
        if loopback {
            hint.push_str(match peer.kind {
                ProviderKind::Ollama => {
                    " (for Ollama start it with OLLAMA_ORIGINS set to this page's origin)"
                }
                _ => " (llama.cpp's server allows every origin by default)",
            });
        }
    } else if loopback && peer.kind == ProviderKind::Ollama {
        hint.push_str(" (`ollama serve` starts Ollama on 127.0.0.1:11434)");
    }
    hint
}

/// No usable response at all.
pub(crate) fn from_http(peer: &Peer, error: &HttpError) -> ProviderError {
    match error {
        HttpError::Unreachable { message, .. } => {
            let hint = unreachable_hint(peer, cfg!(target_arch = "wasm32"));
            let mut error = peer.error(ErrorKind::Network, format!("cannot reach it: {message}"));
            error.hint = Some(hint);
            error
        }
        HttpError::Timeout { timeout_ms, .. } => peer.error(
            ErrorKind::Timeout,
            format!("no response within {timeout_ms} ms"),
        ),
        HttpError::InvalidUrl { reason, .. } => {
            let mut error = peer.error(ErrorKind::BadRequest, format!("invalid URL: {reason}"));
            error.hint = Some(base_url_hint(peer.kind));
            error
        }
        HttpError::InvalidRequest { message, .. } => peer.error(
            ErrorKind::BadRequest,
            format!("the request cannot be sent: {message}"),
        ),
        HttpError::Body { message, .. } => peer.error(
            ErrorKind::Stream,
            format!("the response broke off: {message}"),
        ),
        HttpError::Stalled { idle_ms, .. } => peer.error(
            ErrorKind::Timeout,
            format!("the stream stalled: no data for {idle_ms} ms"),
        ),
        HttpError::TooLarge { limit, .. } => peer.error(
            ErrorKind::Stream,
            format!("the response is longer than {limit} bytes"),
        ),
        // A redirect elsewhere is refused, natively before it is followed, in the browser
        // whatever its target (`Redirect::SameOrigin`): the key must not go with it.
        error @ (HttpError::CrossOriginRedirect { .. } | HttpError::Redirected { .. }) => {
            ProviderError {
                hint: Some(
                    "the provider's address answers with a redirect, and Kiln does not send \
                     a key after one to another address: set the base URL to where it leads"
                        .to_owned(),
                ),
                ..peer.error(ErrorKind::Network, error.to_string())
            }
        }
        // Only `send_public` gives this; providers do not use it.
        error @ HttpError::AddressRefused { .. } => {
            peer.error(ErrorKind::Network, error.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer() -> Peer {
        Peer::new(
            ProviderKind::OpenAi,
            "https://user:pw@api.example.com/v1/chat/completions?key=1",
            Some("gpt-x"),
        )
    }

    #[test]
    fn statuses_map_to_kinds() {
        let cases: &[(u16, &str, &str)] = &[
            (
                401,
                r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#,
                "key_rejected",
            ),
            (
                403,
                r#"{"type":"error","error":{"type":"permission_error","message":"no"}}"#,
                "key_rejected",
            ),
            (
                404,
                r#"{"error":{"message":"The model `gpt-x` does not exist","code":"model_not_found"}}"#,
                "model_not_found",
            ),
            (
                404,
                r#"{"error":"model 'llama9' not found"}"#,
                "model_not_found",
            ),
            (404, "Not Found", "bad_request"),
            (
                429,
                r#"{"error":{"message":"Rate limited"}}"#,
                "rate_limited",
            ),
            (
                400,
                r#"{"error":{"message":"This model's maximum context length is 128000 tokens.","code":"context_length_exceeded"}}"#,
                "context_overflow",
            ),
            (
                400,
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
                "context_overflow",
            ),
            (
                400,
                r#"{"error":{"message":"bad temperature"}}"#,
                "bad_request",
            ),
            (500, "", "server_error"),
            (
                529,
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                "server_error",
            ),
        ];
        for (status, body, code) in cases {
            let error = from_status(&peer(), *status, body.as_bytes(), None);
            assert_eq!(error.code(), *code, "{status} {body}: {error}");
            assert_eq!(error.status, Some(*status));
        }
    }

    #[test]
    fn messages_name_provider_url_and_model_but_no_secrets() {
        let error = from_status(
            &peer(),
            401,
            br#"{"error":{"message":"Incorrect API key"}}"#,
            None,
        );
        let text = error.to_string();
        assert!(
            text.starts_with(
                "OpenAI-compatible at https://…@api.example.com/v1/chat/completions?… (model `gpt-x`): \
             the key was rejected (HTTP 401): Incorrect API key"
            ),
            "{text}"
        );
        assert!(text.contains("hint: check the API key"), "{text}");
        assert!(!text.contains("pw") && !text.contains("key=1"), "{text}");
    }

    #[test]
    fn retry_after_is_read_in_seconds_or_milliseconds() {
        let headers = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(key, _)| *key == name)
                    .map(|(_, value)| (*value).to_owned())
            }
        };
        assert_eq!(retry_after_ms(headers(&[("retry-after", "2")])), Some(2000));
        assert_eq!(
            retry_after_ms(headers(&[("retry-after", "0.5")])),
            Some(500)
        );
        assert_eq!(
            retry_after_ms(headers(&[("retry-after-ms", "250")])),
            Some(250)
        );
        assert_eq!(retry_after_ms(headers(&[("retry-after", "soon")])), None);
        assert_eq!(retry_after_ms(headers(&[("retry-after", "-1")])), None);
        assert_eq!(retry_after_ms(headers(&[])), None);
    }

    #[test]
    fn loopback_hosts_are_recognised() {
        for (url, loopback) in [
            ("http://127.0.0.1:11434/api/chat", true),
            ("http://localhost/v1", true),
            ("http://[::1]:8080/v1", true),
            ("http://u:p@127.0.0.2/v1", true),
            ("https://api.openai.com/v1", false),
            ("http://10.0.0.1/v1?h=127.0.0.1", false),
        ] {
            assert_eq!(is_loopback(url), loopback, "{url}");
        }
    }

    #[test]
    fn an_unreachable_provider_is_hinted_in_the_words_of_where_kiln_runs() {
        let ollama = Peer::new(
            ProviderKind::Ollama,
            "http://127.0.0.1:11434/api/chat",
            None,
        );
        let browser = unreachable_hint(&ollama, true);
        assert!(browser.contains("CORS"), "{browser}");
        assert!(browser.contains("OLLAMA_ORIGINS"), "{browser}");
        let native = unreachable_hint(&ollama, false);
        assert_eq!(
            native,
            "check the base URL and that the server is up (`ollama serve` starts Ollama on 127.0.0.1:11434)"
        );
        let remote = Peer::new(
            ProviderKind::OpenAi,
            "https://api.example.com/v1/models",
            None,
        );
        assert_eq!(
            unreachable_hint(&remote, false),
            "check the base URL and that the server is up"
        );

        let error = from_http(
            &ollama,
            &HttpError::Unreachable {
                url: "x".into(),
                message: "connection refused".into(),
            },
        );
        assert_eq!(error.code(), "network");
        // These tests run natively: no browser words.
        assert!(!error.to_string().contains("CORS"), "{error}");
    }
}

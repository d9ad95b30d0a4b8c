//! `http_request`, the built-in fetch capability (category `external`):
//! http(s) only, under the run's fetch budgets (`RunLimits::fetch_calls`,
//! `fetch_body_bytes`, `fetch_timeout_ms`; the reference's 20 requests, 1 MB
//! and 15 s by default). `secret_headers` put secrets from the run's scope into
//! headers by name: `{"Authorization": "Bearer ${API_KEY}"}`. The guest never
//! sees the value, and the dispatcher scrubs it from whatever comes back. A
//! secret bound to origins is refused (`secret_not_allowed`) for any other.

use std::rc::Rc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use futures::future::LocalBoxFuture;
use kiln_http::{HttpClient, HttpError, Request};
use kiln_types::BYTES_KEY;
use kiln_types::tool_result::{CallOutcome, ToolFailure, ToolReply};
use serde_json::{Map, Value, json};

use crate::dispatch::{CallContext, Permit};
use crate::registry::Implementation;
use crate::spec::{CapabilitySpec, Category, Source};

pub const NAME: &str = "http_request";

/// The spec, as data.
#[must_use]
pub fn spec() -> CapabilitySpec {
    CapabilitySpec {
        name: NAME.into(),
        description: "Sends one HTTP(S) request and answers its status, headers and body. \
                      Counts against the run's request budget; the body is cut at the run's \
                      body budget (`truncated: true`)."
            .into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "An absolute http:// or https:// URL."},
                "method": {"type": "string", "enum": ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"], "default": "GET"},
                "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                "secret_headers": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                    "description": "Header values with ${NAME} replaced by the run's secret NAME."
                },
                "body": {
                    "description": "Text, or bytes as a Uint8Array.",
                    "anyOf": [
                        {"type": "string"},
                        {"type": "object", "properties": {"$bytes": {"type": "string"}}, "required": ["$bytes"], "additionalProperties": false}
                    ]
                },
                "response_type": {"type": "string", "enum": ["text", "bytes"], "default": "text"}
            },
            "required": ["url"],
            "additionalProperties": false
        }),
        category: Category::External,
        result: json!({
            "type": "object",
            "properties": {
                "url": {"type": "string"},
                "status": {"type": "integer"},
                "headers": {"type": "object"},
                "body": {"description": "Text (invalid UTF-8 replaced), or a Uint8Array for response_type bytes."},
                "truncated": {"type": "boolean"}
            }
        }),
        source: Source::Builtin,
    }
}

/// The implementation, over the platform's HTTP client.
pub struct HttpRequest {
    http: Rc<dyn HttpClient>,
}

impl HttpRequest {
    #[must_use]
    pub fn new(http: Rc<dyn HttpClient>) -> Self {
        Self { http }
    }
}

fn failure(code: &str, message: String) -> ToolFailure {
    ToolFailure {
        code: code.into(),
        message,
        detail: None,
        outcome: CallOutcome::Error,
    }
}

/// `${NAME}` in `template` replaced by the scoped secret NAME.
fn fill(template: &str, url: &str, context: &CallContext) -> Result<String, ToolFailure> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(failure(
                "invalid_arguments",
                "a secret header has `${` without a closing `}`".into(),
            ));
        };
        let name = &after[..end];
        let secret = context
            .secrets
            .get(name)
            .map_err(|why| failure("secret_unavailable", why))?;
        secret.allows(url).map_err(|why| {
            failure(
                "secret_not_allowed",
                format!("the secret `{name}` was not sent: {why}"),
            )
        })?;
        out.push_str(secret.expose());
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

impl Implementation for HttpRequest {
    fn call(
        &self,
        args: Value,
        context: CallContext,
        _permit: Permit,
    ) -> LocalBoxFuture<'static, ToolReply> {
        let http = self.http.clone();
        Box::pin(async move {
            let text = |key: &str| args.get(key).and_then(Value::as_str);
            let url = text("url").unwrap_or_default().to_owned();
            let method = text("method").unwrap_or("GET").to_owned();
            let mut headers = Vec::new();
            for (key, source) in [("headers", false), ("secret_headers", true)] {
                for (name, value) in args
                    .get(key)
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                {
                    let value = value.as_str().unwrap_or_default();
                    let value = if source {
                        fill(value, &url, &context)?
                    } else {
                        value.to_owned()
                    };
                    headers.push((name.clone(), value));
                }
            }
            let body = match args.get("body") {
                None | Some(Value::Null) => None,
                Some(Value::String(text)) => Some(text.clone().into_bytes()),
                Some(bytes) => {
                    let encoded = bytes
                        .get(BYTES_KEY)
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    Some(STANDARD.decode(encoded).map_err(|error| {
                        failure(
                            "invalid_arguments",
                            format!("`body` bytes are not base64: {error}"),
                        )
                    })?)
                }
            };
            let as_bytes = text("response_type") == Some("bytes");
            // A URL that could not be sent does not spend the run's budget.
            kiln_http::check_scheme(&url)
                .map_err(|error| failure("invalid_arguments", error.to_string()))?;
            context.run.take_fetch(&context.tool, context.call_number)?;
            let limits = context.run.limits;
            let request = Request {
                method,
                url: url.clone(),
                headers,
                body,
                timeout_ms: limits.fetch_timeout_ms,
                max_body_bytes: limits.fetch_body_bytes,
            };
            let response = http.send(request).await.map_err(|error| {
                let code = match error {
                    HttpError::InvalidUrl { .. } | HttpError::InvalidRequest { .. } => {
                        "invalid_arguments"
                    }
                    HttpError::Timeout { .. } | HttpError::Stalled { .. } => "timeout",
                    HttpError::Unreachable { .. }
                    | HttpError::Body { .. }
                    | HttpError::TooLarge { .. } => "network_error",
                };
                failure(code, error.to_string())
            })?;
            let mut header_map = Map::new();
            for (name, value) in response.headers {
                match header_map.get_mut(&name) {
                    Some(Value::String(existing)) => {
                        existing.push_str(", ");
                        existing.push_str(&value);
                    }
                    _ => {
                        header_map.insert(name, Value::String(value));
                    }
                }
            }
            let body = if as_bytes {
                json!({ BYTES_KEY: STANDARD.encode(&response.body) })
            } else {
                Value::String(String::from_utf8_lossy(&response.body).into_owned())
            };
            Ok(json!({
                "url": url,
                "status": response.status,
                "headers": header_map,
                "body": body,
                "truncated": response.truncated,
            }))
        })
    }
}

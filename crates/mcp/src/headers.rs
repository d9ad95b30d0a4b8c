//! The headers a client sends beyond the protocol's own ([`Header`]: an
//! `Authorization` filled from a secret, say), and what keeps their secrets
//! out of everything the client answers (`Scrub`).
//!
//! A header is checked when it is made: its name is HTTP token characters
//! (RFC 9110 §5.6.2) and neither one the client sets itself nor one `fetch`
//! forbids a page to set (the Fetch standard's forbidden request-header
//! names: the browser would drop it, or refuse the request); its value has
//! no control character, so it cannot end the header early. Its value never
//! prints.
//!
//! A server may echo what it was sent: in an error page, in a tool's result.
//! So the client replaces each secret it was given with `[redacted:NAME]` (the
//! run's scrub writes the same) in every result, and in every error text
//! before the error leaves the client. An excerpt cut inside a secret (an
//! error quotes at most 300 characters of a reply) shows the marker, not the
//! secret's first characters. A secret sent in another form (base64, escapes)
//! is not looked for.

use std::fmt;

use kiln_types::Redacted;
use serde_json::Value;

use crate::McpError;

/// The headers the client sets itself on some exchange (Transports).
const CLIENT_HEADERS: [&str; 5] = [
    "accept",
    "content-type",
    "last-event-id",
    "mcp-protocol-version",
    "mcp-session-id",
];

/// The Fetch standard's forbidden request-header names (§2.2.2), less the
/// prefixes `proxy-` and `sec-`, checked apart.
const FORBIDDEN_HEADERS: [&str; 21] = [
    "accept-charset",
    "accept-encoding",
    "access-control-request-headers",
    "access-control-request-method",
    "connection",
    "content-length",
    "cookie",
    "cookie2",
    "date",
    "dnt",
    "expect",
    "host",
    "keep-alive",
    "origin",
    "referer",
    "set-cookie",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "via",
];

/// Why a header cannot be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("`{name}` is not a header name: use letters, digits and !#$%&'*+-.^_`|~, nothing else")]
    NotAToken { name: String },
    #[error("the MCP client sets the header `{name}` itself")]
    ClientSets { name: String },
    #[error("a browser does not let a page set the header `{name}`")]
    Forbidden { name: String },
    #[error("the value of the header `{name}` holds a line break or another control character")]
    ControlCharacter { name: String },
}

/// Checks a header's name: HTTP token characters, not one the client sets
/// itself, not one `fetch` forbids.
///
/// # Errors
///
/// What is wrong with it.
pub fn check_header_name(name: &str) -> Result<(), HeaderError> {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || !name.chars().all(token) {
        return Err(HeaderError::NotAToken {
            name: name.to_owned(),
        });
    }
    let lower = name.to_ascii_lowercase();
    if CLIENT_HEADERS.contains(&lower.as_str()) {
        return Err(HeaderError::ClientSets {
            name: name.to_owned(),
        });
    }
    if FORBIDDEN_HEADERS.contains(&lower.as_str())
        || lower.starts_with("proxy-")
        || lower.starts_with("sec-")
    {
        return Err(HeaderError::Forbidden {
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// Whether `text` may stand in a header's value: no control character but
/// the tab (RFC 9110 §5.5).
#[must_use]
pub fn fits_header_value(text: &str) -> bool {
    !text.chars().any(|c| c.is_control() && c != '\t')
}

/// One header the client sends on every exchange, checked when made; its
/// value never prints.
#[derive(Clone, PartialEq, Eq)]
pub struct Header {
    name: String,
    value: Redacted,
}

impl Header {
    /// # Errors
    ///
    /// A name [`check_header_name`] refuses, or a value with a control character.
    pub fn new(name: impl Into<String>, value: Redacted) -> Result<Self, HeaderError> {
        let name = name.into();
        check_header_name(&name)?;
        if !fits_header_value(value.expose()) {
            return Err(HeaderError::ControlCharacter { name });
        }
        Ok(Self { name, value })
    }

    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name and the value, for the request that sends it.
    pub(crate) fn pair(&self) -> (String, String) {
        (self.name.clone(), self.value.expose().to_owned())
    }
}

impl fmt::Debug for Header {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: <redacted>", self.name)
    }
}

/// The secrets nothing the client answers may carry, longest first (a
/// secret inside another is replaced with it, not left half).
#[derive(Clone, Default)]
pub(crate) struct Scrub {
    secrets: Vec<(String, Redacted)>,
}

impl fmt::Debug for Scrub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.secrets.iter().map(|(name, _)| name))
            .finish()
    }
}

/// What stands where an excerpt was cut ([`crate::reply`]'s `excerpt`).
const CUT: char = '…';

impl Scrub {
    /// Over `secrets` (name, value); an empty value hides nothing and is left out.
    pub(crate) fn new(secrets: Vec<(String, Redacted)>) -> Self {
        let mut secrets: Vec<_> = secrets
            .into_iter()
            .filter(|(_, value)| !value.expose().is_empty())
            .collect();
        secrets.sort_by_key(|(_, value)| std::cmp::Reverse(value.expose().len()));
        Self { secrets }
    }

    /// `text` with each secret replaced by `[redacted:NAME]`, and the start of
    /// one that an excerpt's cut (`…`) ends too.
    pub(crate) fn text(&self, text: &str) -> String {
        if self.secrets.is_empty() {
            return text.to_owned();
        }
        let pieces: Vec<&str> = text.split(CUT).collect();
        let last = pieces.len() - 1;
        let mut out = String::with_capacity(text.len());
        for (index, piece) in pieces.into_iter().enumerate() {
            if index > 0 {
                out.push(CUT);
            }
            let (kept, cut) = if index < last {
                self.cut_secret(piece)
            } else {
                (piece, None)
            };
            out.push_str(&self.whole(kept));
            if let Some(name) = cut {
                out.push_str(&marker(name));
            }
        }
        // A secret with the cut's character in it was split above.
        for (name, value) in &self.secrets {
            if value.expose().contains(CUT) && out.contains(value.expose()) {
                out = out.replace(value.expose(), &marker(name));
            }
        }
        out
    }

    /// `text` with each whole secret replaced, longest first.
    fn whole(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for (name, value) in &self.secrets {
            if out.contains(value.expose()) {
                out = out.replace(value.expose(), &marker(name));
            }
        }
        out
    }

    /// `piece`, which an excerpt's cut follows, less its end when that is the
    /// start of a secret (or a whole one), and the secret's name. The longest
    /// such end is taken, a whole secret before the start of a longer one.
    fn cut_secret<'a>(&self, piece: &'a str) -> (&'a str, Option<&str>) {
        let found = self
            .secrets
            .iter()
            .filter_map(|(name, value)| {
                let value = value.expose();
                (1..=value.len())
                    .rev()
                    .filter(|&length| value.is_char_boundary(length))
                    .find(|&length| piece.ends_with(&value[..length]))
                    .map(|length| (name.as_str(), length, length == value.len()))
            })
            .max_by_key(|&(_, length, whole)| (length, whole));
        match found {
            Some((name, length, _)) => (&piece[..piece.len() - length], Some(name)),
            None => (piece, None),
        }
    }

    /// `value` with every string in it scrubbed, keys included.
    pub(crate) fn value(&self, value: Value) -> Value {
        if self.secrets.is_empty() {
            return value;
        }
        match value {
            Value::String(text) => Value::String(self.text(&text)),
            Value::Array(items) => Value::Array(items.into_iter().map(|v| self.value(v)).collect()),
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .map(|(key, v)| (self.text(&key), self.value(v)))
                    .collect(),
            ),
            other => other,
        }
    }

    /// `error` with every text in it scrubbed.
    pub(crate) fn error(&self, error: McpError) -> McpError {
        if self.secrets.is_empty() {
            return error;
        }
        let text = |text: String| self.text(&text);
        match error {
            McpError::InvalidUrl {
                server,
                url,
                reason,
            } => McpError::InvalidUrl {
                server,
                url: text(url),
                reason: text(reason),
            },
            McpError::Unreachable {
                server,
                url,
                message,
            } => McpError::Unreachable {
                server,
                url: text(url),
                message: text(message),
            },
            McpError::Timeout {
                server,
                url,
                method,
                timeout_ms,
            } => McpError::Timeout {
                server,
                url: text(url),
                method: text(method),
                timeout_ms,
            },
            McpError::Http {
                server,
                url,
                method,
                status,
                body,
            } => McpError::Http {
                server,
                url: text(url),
                method: text(method),
                status,
                body: text(body),
            },
            McpError::Protocol {
                server,
                method,
                message,
            } => McpError::Protocol {
                server,
                method: text(method),
                message: text(message),
            },
            McpError::Rpc {
                server,
                method,
                code,
                message,
            } => McpError::Rpc {
                server,
                method: text(method),
                code,
                message: text(message),
            },
            McpError::SessionLost { server } => McpError::SessionLost { server },
        }
    }
}

fn marker(name: &str) -> String {
    format!("[redacted:{name}]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_is_checked_when_made() {
        let value = || Redacted::new("Bearer tok");
        let cases: [(&str, &str, Option<&str>); 8] = [
            ("Authorization", "Bearer tok", None),
            ("X-Api-Key", "k\tk", None),
            ("", "v", Some("`` is not a header name")),
            ("X Key", "v", Some("`X Key` is not a header name")),
            ("mcp-session-id", "v", Some("the MCP client sets")),
            ("Host", "v", Some("a browser does not let a page set")),
            (
                "Sec-Fetch-Mode",
                "v",
                Some("a browser does not let a page set"),
            ),
            ("X-Key", "a\r\nX-Other: b", Some("line break")),
        ];
        for (name, text, refused) in cases {
            let made = Header::new(name, Redacted::new(text));
            match refused {
                None => assert!(made.is_ok(), "{name}: {made:?}"),
                Some(why) => {
                    let error = made.err().map(|e| e.to_string()).unwrap_or_default();
                    assert!(error.contains(why), "{name}: {error}");
                }
            }
        }
        let header = Header::new("Authorization", value()).ok();
        assert_eq!(
            format!("{header:?}"),
            "Some(Authorization: <redacted>)",
            "the value never prints"
        );
    }

    #[test]
    fn secrets_are_scrubbed_whole_and_where_an_excerpt_cut_them() {
        let scrub = Scrub::new(vec![
            ("SHORT".into(), Redacted::new("tok")),
            ("LONG".into(), Redacted::new("tok-123456")),
            ("EMPTY".into(), Redacted::new("")),
        ]);
        let cases = [
            (
                "sent tok-123456 and tok",
                "sent [redacted:LONG] and [redacted:SHORT]",
            ),
            ("cut at tok-12…", "cut at [redacted:LONG]…"),
            ("cut at tok…", "cut at [redacted:SHORT]…"),
            ("tok-1… and more", "[redacted:LONG]… and more"),
            ("nothing here…", "nothing here…"),
            ("uncut: tok-1", "uncut: [redacted:SHORT]-1"),
        ];
        for (text, scrubbed) in cases {
            assert_eq!(scrub.text(text), scrubbed, "{text}");
        }
        let value = scrub.value(serde_json::json!({"tok": ["tok-123456", 1]}));
        assert_eq!(
            value,
            serde_json::json!({"[redacted:SHORT]": ["[redacted:LONG]", 1]})
        );
    }
}

//! A run's secret scope. A capability reads a secret only by a name in the
//! run's scope; guest code never sees one. Values never print: `Debug` and
//! `Display` say `<redacted>`, and everything a call answers (results, errors,
//! approval cards) is scrubbed of every value in scope before it leaves the
//! dispatcher. A capability puts a secret into what it sends through a
//! [`SecretTemplate`] (`Bearer ${API_KEY}`).

use std::collections::BTreeMap;
use std::fmt;

use kiln_types::Redacted;
use serde_json::Value;

/// One secret value (the one redacting string, [`Redacted`]). It prints
/// redacted; only [`Secret::expose`] reads it. It may be bound to origins
/// (`https://api.example.com`): then it is sent nowhere else, whatever the
/// program asks.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Redacted, Vec<String>);

impl Secret {
    /// A secret that names no origins: `http_request` sends it only where the
    /// run names its origins (never under "any public address").
    #[must_use]
    pub fn new(value: impl Into<String>) -> Self {
        Self(Redacted::new(value), Vec::new())
    }

    /// A secret that may be sent only to `origins` (`scheme://host[:port]`).
    #[must_use]
    pub fn for_origins(value: impl Into<String>, origins: Vec<String>) -> Self {
        let origins = origins
            .iter()
            .filter_map(|origin| origin_of(origin))
            .collect();
        Self(Redacted::new(value), origins)
    }

    /// The value, for the one place that sends it (a header to its service).
    #[must_use]
    pub fn expose(&self) -> &str {
        self.0.expose()
    }

    /// Whether it names the origins it may be sent to.
    #[must_use]
    pub fn names_origins(&self) -> bool {
        !self.1.is_empty()
    }

    /// Whether it may be sent to `url`; `Err` names the origin it may not.
    pub fn allows(&self, url: &str) -> Result<(), String> {
        if self.1.is_empty() {
            return Ok(());
        }
        let origin = origin_of(url).unwrap_or_else(|| url.to_owned());
        if self.1.contains(&origin) {
            Ok(())
        } else {
            Err(format!(
                "it may be sent only to {}, not to {origin}",
                self.1.join(", ")
            ))
        }
    }
}

/// `scheme://host[:port]` of an http(s) URL as `fetch` reads it (the URL
/// standard: host lower-cased, a numeric host as its address, default port
/// dropped, user info ignored); `None` for anything else. The same parser as
/// the one that decides where `http_request` connects, so a secret is checked
/// against the origin it would really reach.
#[must_use]
pub fn origin_of(url: &str) -> Option<String> {
    kiln_http::address::Target::parse(url)
        .ok()
        .map(|target| target.origin().to_string())
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// The secrets one run may use, by name.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SecretScope {
    secrets: BTreeMap<String, Secret>,
}

impl fmt::Debug for SecretScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.secrets.keys()).finish()
    }
}

impl SecretScope {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    pub fn insert(&mut self, name: impl Into<String>, secret: Secret) {
        self.secrets.insert(name.into(), secret);
    }

    /// The secret `name`, or an error naming it and what the scope holds.
    pub fn get(&self, name: &str) -> Result<&Secret, String> {
        self.secrets.get(name).ok_or_else(|| {
            let names: Vec<&str> = self.secrets.keys().map(String::as_str).collect();
            format!(
                "no secret named `{name}` in this run's scope (it holds {})",
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names
                        .iter()
                        .map(|n| format!("`{n}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            )
        })
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` with every secret value in scope replaced by `[redacted:NAME]`.
    #[must_use]
    pub fn redact_text(&self, text: &str) -> String {
        let mut out = text.to_owned();
        // Longest values first, so a secret that contains another is
        // replaced whole rather than leaving its tail.
        let mut secrets: Vec<(&String, &Secret)> = self.secrets.iter().collect();
        secrets.sort_by_key(|(_, secret)| std::cmp::Reverse(secret.expose().len()));
        for (name, secret) in secrets {
            let value = secret.expose();
            // An empty value would match everywhere; it hides nothing anyway.
            if !value.is_empty() && out.contains(value) {
                out = out.replace(value, &format!("[redacted:{name}]"));
            }
        }
        out
    }

    /// The secrets to scrub from what a call answers: every one it sent
    /// (`used`), and every other one whose value the program did not itself
    /// put into the call's arguments (`passed`, as JSON text). Scrubbing an echo
    /// of the program's own guess would tell it the guess was right (a tool
    /// that echoes, or an argument error that lists what it was passed); left
    /// alone, the echo is the same whether the guess was right or wrong.
    #[must_use]
    pub fn for_reply(&self, used: &std::collections::BTreeSet<String>, passed: &str) -> Self {
        Self {
            secrets: self
                .secrets
                .iter()
                .filter(|(name, secret)| used.contains(*name) || !passed.contains(secret.expose()))
                .map(|(name, secret)| (name.clone(), secret.clone()))
                .collect(),
        }
    }

    /// The length in bytes of the longest value in scope (0 when it is empty).
    #[must_use]
    pub fn longest(&self) -> usize {
        self.secrets
            .values()
            .map(|secret| secret.expose().len())
            .max()
            .unwrap_or(0)
    }

    /// `bytes` with every secret value in scope replaced by `[redacted:NAME]`,
    /// longest first, as bytes: what a response body carries is scrubbed before
    /// anything encodes it (base64 would hide a secret from [`Self::redact_text`]).
    #[must_use]
    pub fn redact_bytes(&self, bytes: &[u8]) -> Vec<u8> {
        let mut out = bytes.to_vec();
        let mut secrets: Vec<(&String, &Secret)> = self.secrets.iter().collect();
        secrets.sort_by_key(|(_, secret)| std::cmp::Reverse(secret.expose().len()));
        for (name, secret) in secrets {
            let marker = format!("[redacted:{name}]");
            out = kiln_http::reflection::scrub(&out, secret.expose().as_bytes(), marker.as_bytes());
        }
        out
    }

    /// `value` with every string (keys included) scrubbed.
    #[must_use]
    pub fn redact(&self, value: Value) -> Value {
        if self.secrets.is_empty() {
            return value;
        }
        match value {
            Value::String(text) => Value::String(self.redact_text(&text)),
            // A numeric secret can come back as a number.
            Value::Number(number) => {
                let text = number.to_string();
                let redacted = self.redact_text(&text);
                if redacted == text {
                    Value::Number(number)
                } else {
                    Value::String(redacted)
                }
            }
            Value::Array(items) => {
                Value::Array(items.into_iter().map(|v| self.redact(v)).collect())
            }
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .map(|(k, v)| (self.redact_text(&k), self.redact(v)))
                    .collect(),
            ),
            other => other,
        }
    }
}

/// A text with `${NAME}` placeholders, each naming a secret of the run's scope
/// (`Bearer ${API_KEY}`): `http_request`'s `secret_headers` and an MCP
/// server's headers. The one reader of them: read once ([`Self::parse`]),
/// filled where the text is sent ([`Self::fill`]), its secrets checked there
/// by whoever sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretTemplate {
    parts: Vec<TemplatePart>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum TemplatePart {
    Text(String),
    Secret(String),
}

impl SecretTemplate {
    /// Reads `text`; anything but `${NAME}` is kept as written.
    ///
    /// # Errors
    ///
    /// A `${` without its closing `}`, or a `${}` that names nothing.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            if start > 0 {
                parts.push(TemplatePart::Text(rest[..start].to_owned()));
            }
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                return Err("`${` without a closing `}`".into());
            };
            let name = &after[..end];
            if name.is_empty() {
                return Err("`${}`, which names no secret (write `${NAME}`)".into());
            }
            parts.push(TemplatePart::Secret(name.to_owned()));
            rest = &after[end + 1..];
        }
        if !rest.is_empty() {
            parts.push(TemplatePart::Text(rest.to_owned()));
        }
        Ok(Self { parts })
    }

    /// The names of the secrets it uses, in order (a name used twice is here twice).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|part| match part {
            TemplatePart::Secret(name) => Some(name.as_str()),
            TemplatePart::Text(_) => None,
        })
    }

    /// The text written around the placeholders, for checks on it.
    pub fn literal_parts(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|part| match part {
            TemplatePart::Text(text) => Some(text.as_str()),
            TemplatePart::Secret(_) => None,
        })
    }

    /// The text with each `${NAME}` replaced by the value of the secret
    /// `secret(NAME)` answers: the caller looks it up and checks it may go
    /// where the text is sent.
    ///
    /// # Errors
    ///
    /// The first error `secret` gives.
    pub fn fill<'s, E>(
        &self,
        mut secret: impl FnMut(&str) -> Result<&'s Secret, E>,
    ) -> Result<String, E> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                TemplatePart::Text(text) => out.push_str(text),
                TemplatePart::Secret(name) => out.push_str(secret(name)?.expose()),
            }
        }
        Ok(out)
    }
}

/// Arguments as an approval card shows them: the run's secrets scrubbed
/// wherever they appear (under any key, inside any text), everything else
/// shown, so the person sees what the call would send (a program cannot hide
/// what it sends under a key named `X-Session-Token`), and cut to a card's
/// length ([`kiln_types::permission::card_arguments`]).
#[must_use]
pub fn redact_for_display(scope: &SecretScope, args: Value) -> Value {
    kiln_types::permission::card_arguments(&scope.redact(args))
}

//! The one redacting string: an API key, a stored key, a secret's value. It
//! prints `<redacted>` however it is printed (`{}`, `{:?}`, in a panic, in a
//! log); [`Redacted::expose`] is the one way to its text, used only where
//! the request to its own service is built. On the wire and in storage it is
//! the plain string.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A string that never prints.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Redacted(String);

impl Redacted {
    pub fn new(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    /// The text itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_never_prints_and_crosses_as_its_text() {
        let key = Redacted::new("sk-secret");
        assert_eq!(
            format!("{key} {key:?} {:?}", Some(&key)),
            "<redacted> <redacted> Some(<redacted>)"
        );
        assert_eq!(key.expose(), "sk-secret");
        let wire = serde_json::to_string(&key).unwrap_or_default();
        assert_eq!(wire, "\"sk-secret\"");
        assert_eq!(serde_json::from_str::<Redacted>(&wire).ok(), Some(key));
    }
}

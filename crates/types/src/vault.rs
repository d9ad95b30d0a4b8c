//! The secrets vault as it crosses to the page: what a secret is called,
//! where it may be sent and which agents may use it — never its value,
//! which is written once and never read back out ([`SecretInfo`]); and a
//! change a page asks for ([`SecretPut`]), whose value, when it carries one,
//! prints redacted.

use serde::{Deserialize, Serialize};

use crate::Redacted;
use crate::profile::{check_secret_name, check_slug};

/// The most origins one secret may be sent to, and the most agents named.
pub const MAX_NAMED: usize = 16;
/// The longest value, in bytes.
pub const MAX_VALUE_BYTES: usize = 16 * 1024;

/// A secret as the page sees it: everything but the value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretInfo {
    pub name: String,
    /// Where it may be sent (`https://api.github.com`); nowhere else.
    pub origins: Vec<String>,
    /// The agents that may use it, by slug; an agent's profile must name it
    /// too. Empty: any agent whose profile names it.
    pub agents: Vec<String>,
    /// When its value was last written.
    pub set_ms: u64,
    /// When a job was last given it, if ever.
    #[serde(default)]
    pub used_ms: Option<u64>,
    #[serde(default)]
    pub version: u64,
}

/// `secrets.put`: a secret's settings and, for a new secret or a new value,
/// the value. Without a value the stored one stays.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretPut {
    pub name: String,
    #[serde(default)]
    pub value: Option<Redacted>,
    pub origins: Vec<String>,
    #[serde(default)]
    pub agents: Vec<String>,
    /// The version read (0: a new secret).
    #[serde(default)]
    pub version: u64,
}

/// `scheme://host[:port]` of an `http`/`https` origin, lower-cased, or why not.
fn origin(text: &str) -> Result<String, String> {
    let trimmed = text.trim().trim_end_matches('/');
    let lower = trimmed.to_ascii_lowercase();
    let rest = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"))
        .ok_or_else(|| {
            format!(
                "`{}` is not an origin: write it as https://host (or http://host:port)",
                crate::words::clip(text, 80)
            )
        })?;
    let good = !rest.is_empty()
        && rest
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
    if good {
        Ok(lower)
    } else {
        Err(format!(
            "`{}` is not an origin: scheme and host only, no path, query or credentials",
            crate::words::clip(text, 80)
        ))
    }
}

impl SecretPut {
    /// Holds the change to its rules; answers its origins as origins
    /// (lower-case, no trailing slash).
    ///
    /// # Errors
    ///
    /// The first problem, naming the secret and the field.
    pub fn check(&self) -> Result<Vec<String>, String> {
        check_secret_name(&self.name)?;
        let who = &self.name;
        if let Some(value) = &self.value {
            let value = value.expose();
            if value.is_empty() || value.len() > MAX_VALUE_BYTES {
                return Err(format!(
                    "secret `{who}`: the value must be 1 to {MAX_VALUE_BYTES} bytes"
                ));
            }
            if value.chars().any(|c| c == '\r' || c == '\n') {
                return Err(format!(
                    "secret `{who}`: the value has a line break, which no header can carry"
                ));
            }
        } else if self.version == 0 {
            return Err(format!("secret `{who}`: a new secret needs its value"));
        }
        if self.origins.is_empty() || self.origins.len() > MAX_NAMED {
            return Err(format!(
                "secret `{who}`: name 1 to {MAX_NAMED} origins it may be sent to (https://api.example.com)"
            ));
        }
        if self.agents.len() > MAX_NAMED {
            return Err(format!("secret `{who}`: name at most {MAX_NAMED} agents"));
        }
        for agent in &self.agents {
            check_slug(agent).map_err(|why| format!("secret `{who}`: agent {why}"))?;
        }
        self.origins
            .iter()
            .map(|text| origin(text).map_err(|why| format!("secret `{who}`: {why}")))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(value: Option<&str>, origins: &[&str]) -> SecretPut {
        SecretPut {
            name: "GITHUB_TOKEN".into(),
            value: value.map(Redacted::new),
            origins: origins.iter().map(|o| (*o).to_owned()).collect(),
            agents: Vec::new(),
            version: 0,
        }
    }

    #[test]
    fn a_change_is_held_to_its_rules_and_its_value_prints_redacted() {
        let good = put(Some("ghp_secret"), &["https://API.github.com/"]);
        assert_eq!(good.check(), Ok(vec!["https://api.github.com".to_owned()]));
        assert!(!format!("{good:?}").contains("ghp_secret"));
        for (change, said) in [
            (
                put(None, &["https://a.example"]),
                "a new secret needs its value",
            ),
            (put(Some("x"), &[]), "name 1 to 16 origins"),
            (put(Some("x"), &["api.github.com"]), "is not an origin"),
            (
                put(Some("x"), &["https://a.example/path"]),
                "no path, query or credentials",
            ),
            (put(Some("a\nb"), &["https://a.example"]), "line break"),
        ] {
            let error = change.check().unwrap_err();
            assert!(error.contains(said), "{error}");
        }
        let kept = SecretPut {
            version: 3,
            ..put(None, &["https://a.example"])
        };
        assert!(kept.check().is_ok(), "an edit may leave the value as it is");
    }
}

//! The web search a workspace may configure (reference/003's `web_search`):
//! which search API, where it answers, and the vault secret that holds its
//! key. Until one is configured no job has the tool.

use serde::{Deserialize, Serialize};

use crate::profile::check_secret_name;

/// A search API Kiln speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchProvider {
    /// A SearXNG instance's JSON API (`/search?format=json`), no key.
    Searxng,
    /// Brave's Web Search API, key in `X-Subscription-Token`.
    Brave,
    /// Tavily's search API, key as a bearer token.
    Tavily,
}

impl SearchProvider {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Searxng => "searxng",
            Self::Brave => "brave",
            Self::Tavily => "tavily",
        }
    }

    /// Where it answers when the setting names no `base_url`.
    #[must_use]
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            Self::Searxng => None,
            Self::Brave => Some("https://api.search.brave.com"),
            Self::Tavily => Some("https://api.tavily.com"),
        }
    }

    /// Whether it needs a key.
    #[must_use]
    pub fn needs_key(self) -> bool {
        !matches!(self, Self::Searxng)
    }
}

/// The workspace's web search.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebSearch {
    pub provider: SearchProvider,
    /// The API's root (`https://searx.example.org`); the provider's own when empty.
    #[serde(default)]
    pub base_url: String,
    /// The vault secret holding its key (Brave, Tavily).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_secret: Option<String>,
}

impl WebSearch {
    /// The API root this setting reaches.
    #[must_use]
    pub fn root(&self) -> String {
        let given = self.base_url.trim().trim_end_matches('/');
        if given.is_empty() {
            self.provider
                .default_base_url()
                .unwrap_or_default()
                .to_owned()
        } else {
            given.to_owned()
        }
    }

    /// Holds the setting to its rules.
    ///
    /// # Errors
    ///
    /// What is missing or malformed, by field.
    pub fn check(&self) -> Result<(), String> {
        let root = self.root();
        if root.is_empty() {
            return Err(format!(
                "web search: {} needs `base_url`, the instance's address (https://searx.example.org)",
                self.provider.as_str()
            ));
        }
        if !(root.starts_with("https://") || root.starts_with("http://")) {
            return Err(format!(
                "web search: `base_url` must be an http:// or https:// address, not `{}`",
                crate::words::clip(&root, 80)
            ));
        }
        match (&self.key_secret, self.provider.needs_key()) {
            (None, true) => Err(format!(
                "web search: {} needs its key: put it in the vault and name it in `key_secret`",
                self.provider.as_str()
            )),
            (Some(name), _) => check_secret_name(name).map_err(|why| format!("web search: {why}")),
            (None, false) => Ok(()),
        }
    }
}

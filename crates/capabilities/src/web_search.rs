//! `web_search` (reference/003's always-on search, over the API a workspace
//! configured): SearXNG's JSON API, Brave's Web Search API or Tavily's, one
//! request a call, answered as `[{title, url, snippet}]`. The host mounts it
//! only when a search is configured ([`add_web_search`]); its key comes from
//! the vault and goes only to the API's origin, in the header that API
//! reads, and never into an answer or an error.

use std::rc::Rc;

use futures::future::LocalBoxFuture;
use kiln_http::{HttpClient, Redirect, Request};
use kiln_types::Redacted;
use kiln_types::search::{SearchProvider, WebSearch};
use kiln_types::tool_result::ToolReply;
use serde_json::{Value, json};

use crate::dispatch::{CallContext, Permit};
use crate::registry::{Implementation, Registry};
use crate::spec::{CapabilitySpec, Category, Source};
use crate::storage::failure;

pub const WEB_SEARCH: &str = "web_search";

/// The most results one call answers, and how many when it does not say.
pub const MAX_COUNT: u64 = 10;
pub const DEFAULT_COUNT: u64 = 5;
/// The longest snippet, in characters.
const MAX_SNIPPET: usize = 400;
/// How long a search may take.
const TIMEOUT_MS: u64 = 15_000;
/// The most bytes of an answer read.
const MAX_BODY: usize = 2 * 1024 * 1024;

/// `web_search`'s spec.
#[must_use]
pub fn spec(provider: SearchProvider) -> CapabilitySpec {
    CapabilitySpec {
        name: WEB_SEARCH.into(),
        description: format!(
            "Searches the web ({}) and answers the results, [{{title, url, snippet}}]; read a page with http_request when the workspace lets programs reach it.",
            provider.as_str()
        ),
        input_schema: json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": 400},
                "count": {"type": "integer", "minimum": 1, "maximum": MAX_COUNT, "default": DEFAULT_COUNT}
            },
            "required": ["query"],
            "additionalProperties": false
        }),
        category: Category::External,
        result: json!({"type": "array"}),
        source: Source::Builtin,
    }
}

/// Percent-encodes `text` for a query string.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (byte as char).to_string()
            }
            b' ' => "+".into(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// The request one search sends.
fn request(setting: &WebSearch, key: Option<&Redacted>, query: &str, count: u64) -> Request {
    let root = setting.root();
    let (method, url, mut headers, body) = match setting.provider {
        SearchProvider::Searxng => (
            "GET",
            format!("{root}/search?q={}&format=json", encode(query)),
            Vec::new(),
            None,
        ),
        SearchProvider::Brave => (
            "GET",
            format!("{root}/res/v1/web/search?q={}&count={count}", encode(query)),
            key.map(|key| vec![("X-Subscription-Token".to_owned(), key.expose().to_owned())])
                .unwrap_or_default(),
            None,
        ),
        SearchProvider::Tavily => (
            "POST",
            format!("{root}/search"),
            key.map(|key| {
                vec![(
                    "Authorization".to_owned(),
                    format!("Bearer {}", key.expose()),
                )]
            })
            .unwrap_or_default(),
            Some(
                json!({"query": query, "max_results": count})
                    .to_string()
                    .into_bytes(),
            ),
        ),
    };
    headers.push(("Accept".into(), "application/json".into()));
    if body.is_some() {
        headers.push(("Content-Type".into(), "application/json".into()));
    }
    Request {
        method: method.into(),
        url,
        headers,
        body,
        timeout_ms: TIMEOUT_MS,
        max_body_bytes: MAX_BODY,
        redirect: Redirect::SameOrigin,
    }
}

/// The results of an answer, by the provider's own shape.
fn results(provider: SearchProvider, answer: &Value, count: u64) -> Vec<Value> {
    let (list, snippet) = match provider {
        SearchProvider::Searxng | SearchProvider::Tavily => (answer.get("results"), "content"),
        SearchProvider::Brave => (
            answer.get("web").and_then(|web| web.get("results")),
            "description",
        ),
    };
    list.and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|item| {
                    let url = item.get("url").and_then(Value::as_str)?;
                    let title = item.get("title").and_then(Value::as_str).unwrap_or(url);
                    let text = item
                        .get(snippet)
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    Some(json!({
                        "title": kiln_types::words::clip(title, 200),
                        "url": url,
                        "snippet": kiln_types::words::clip(text, MAX_SNIPPET),
                    }))
                })
                .take(usize::try_from(count).unwrap_or(usize::MAX))
                .collect()
        })
        .unwrap_or_default()
}

/// `web_search` over one configured API.
struct Search {
    http: Rc<dyn HttpClient>,
    setting: WebSearch,
    key: Option<Redacted>,
}

impl Implementation for Search {
    fn call(&self, args: Value, _: CallContext, _: Permit) -> LocalBoxFuture<'static, ToolReply> {
        let http = self.http.clone();
        let setting = self.setting.clone();
        let key = self.key.clone();
        Box::pin(async move {
            let query = args
                .get("query")
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|query| !query.is_empty())
                .ok_or_else(|| {
                    failure(
                        "invalid_arguments",
                        "web_search needs `query`, the words to search for".into(),
                    )
                })?
                .to_owned();
            let count = args
                .get("count")
                .and_then(Value::as_u64)
                .unwrap_or(DEFAULT_COUNT)
                .clamp(1, MAX_COUNT);
            let provider = setting.provider;
            let scrub = |text: String| match &key {
                Some(key) if !key.expose().is_empty() => text.replace(key.expose(), "[redacted]"),
                _ => text,
            };
            let response = http
                .send(request(&setting, key.as_ref(), &query, count))
                .await
                .map_err(|error| {
                    failure(
                        "search_failed",
                        scrub(format!(
                            "web_search could not reach {}: {error}",
                            setting.root()
                        )),
                    )
                })?;
            if response.status != 200 {
                let said = String::from_utf8_lossy(&response.body);
                return Err(failure(
                    if matches!(response.status, 401 | 403) {
                        "search_unauthorized"
                    } else {
                        "search_failed"
                    },
                    scrub(format!(
                        "web_search: {} answered {}: {}",
                        provider.as_str(),
                        response.status,
                        kiln_types::words::clip(said.trim(), 200)
                    )),
                ));
            }
            let answer: Value = serde_json::from_slice(&response.body).map_err(|error| {
                failure(
                    "search_failed",
                    format!(
                        "web_search: {}'s answer is not JSON ({error}); is `base_url` the search API?",
                        provider.as_str()
                    ),
                )
            })?;
            let found = results(provider, &answer, count);
            let text = scrub(Value::Array(found).to_string());
            Ok(serde_json::from_str(&text).unwrap_or(Value::Array(Vec::new())))
        })
    }
}

/// Mounts `web_search` over `setting` (checked by the caller), its key
/// `key` when the API needs one.
pub fn add_web_search(
    registry: &mut Registry,
    http: &Rc<dyn HttpClient>,
    setting: &WebSearch,
    key: Option<Redacted>,
) {
    // Built-in specs are ours and compile (tested).
    let _ = registry.add(
        spec(setting.provider),
        Rc::new(Search {
            http: http.clone(),
            setting: setting.clone(),
            key,
        }),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_provider_is_asked_in_its_own_shape() {
        let key = Redacted::new("k-123");
        let searx = WebSearch {
            provider: SearchProvider::Searxng,
            base_url: "http://127.0.0.1:8888/".into(),
            key_secret: None,
        };
        let asked = request(&searx, None, "rust wasm & more", 3);
        assert_eq!(
            asked.url,
            "http://127.0.0.1:8888/search?q=rust+wasm+%26+more&format=json"
        );
        let brave = WebSearch {
            provider: SearchProvider::Brave,
            base_url: String::new(),
            key_secret: Some("BRAVE_KEY".into()),
        };
        let asked = request(&brave, Some(&key), "kiln", 3);
        assert_eq!(
            asked.url,
            "https://api.search.brave.com/res/v1/web/search?q=kiln&count=3"
        );
        assert!(
            asked
                .headers
                .contains(&("X-Subscription-Token".into(), "k-123".into()))
        );
        let tavily = WebSearch {
            provider: SearchProvider::Tavily,
            base_url: String::new(),
            key_secret: Some("TAVILY_KEY".into()),
        };
        let asked = request(&tavily, Some(&key), "kiln", 3);
        assert_eq!(asked.method, "POST");
        assert!(
            asked
                .headers
                .contains(&("Authorization".into(), "Bearer k-123".into()))
        );
    }

    #[test]
    fn results_are_read_from_each_providers_answer() {
        let searx = json!({"results": [{"title": "Kiln", "url": "https://kiln.example", "content": "An agent runtime."}, {"title": "no url"}]});
        assert_eq!(
            results(SearchProvider::Searxng, &searx, 5),
            [
                json!({"title": "Kiln", "url": "https://kiln.example", "snippet": "An agent runtime."})
            ]
        );
        let brave = json!({"web": {"results": [{"title": "A", "url": "https://a.example", "description": "a"}, {"title": "B", "url": "https://b.example", "description": "b"}]}});
        assert_eq!(results(SearchProvider::Brave, &brave, 1).len(), 1);
        assert!(results(SearchProvider::Tavily, &json!({"nothing": 1}), 5).is_empty());
    }
}

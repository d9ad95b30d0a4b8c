//! What the Providers panel and the Chat box keep and say, as plain data and strings: a
//! provider as the workspace's configuration stores it (`kiln_store::config`), the list an
//! earlier Kiln kept in `localStorage` (imported once), the local model's
//! `local-provider.json`, the form's checks, which provider is selected, and the line under
//! a reply. Pure, so it is tested natively.

use kiln_providers::{ApiKey, ProviderConfig, ProviderError, ProviderKind, StopReason, Usage};
use kiln_store::config::{ProviderRecord, StoredKey};
use serde::{Deserialize, Serialize};

/// The `localStorage` key an earlier Kiln kept the provider list under; read once, imported
/// into the configuration, then removed.
pub(crate) const STORAGE_KEY: &str = "kiln.providers.v1";

/// The API root a kind usually has, shown as the base URL's placeholder and used when the
/// field is left empty.
pub(crate) fn default_base_url(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::OpenAi => "https://api.openai.com/v1",
        ProviderKind::Anthropic => "https://api.anthropic.com",
        ProviderKind::Ollama => "http://127.0.0.1:11434",
    }
}

/// One provider: a name for people, where it is, its key and the model chats use.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SavedProvider {
    pub name: String,
    pub kind: ProviderKind,
    pub base_url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<ApiKey>,
    pub model: String,
    /// The stored record's version (0: not stored yet); the next write expects it.
    #[serde(skip)]
    pub version: u64,
}

impl SavedProvider {
    pub(crate) fn config(&self) -> ProviderConfig {
        ProviderConfig {
            kind: self.kind,
            base_url: self.base_url.clone(),
            key: self.key.clone(),
        }
    }

    /// The record the configuration keeps, written over `self.version`.
    pub(crate) fn to_record(&self) -> ProviderRecord {
        ProviderRecord {
            name: self.name.clone(),
            kind: self.kind.as_str().to_owned(),
            base_url: self.base_url.clone(),
            model: self.model.clone(),
            key: self.key.as_ref().map(|key| StoredKey::new(key.expose())),
            version: self.version,
        }
    }

    /// A stored record. `Err` is a sentence saying why it cannot be used.
    pub(crate) fn from_record(record: ProviderRecord) -> Result<Self, String> {
        let Some(kind) = ProviderKind::parse(&record.kind) else {
            return Err(format!(
                "The saved provider `{}` has the kind `{}`, which this Kiln does not know; it is \
                 left out of the list.",
                record.name, record.kind
            ));
        };
        Ok(Self {
            name: record.name,
            kind,
            base_url: record.base_url,
            key: record.key.map(|key| ApiKey::new(key.expose())),
            model: record.model,
            version: record.version,
        })
    }
}

/// Everything an earlier Kiln kept under [`STORAGE_KEY`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StoredProviders {
    #[serde(default)]
    pub providers: Vec<SavedProvider>,
    /// The name of the provider the chat uses, when the person picked one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selected: Option<String>,
}

impl StoredProviders {
    /// Reads what was stored. `Err` is a sentence for the page saying why it was ignored.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let mut stored: Self = serde_json::from_str(text).map_err(|error| {
            format!(
                "The saved providers (`localStorage` key `{STORAGE_KEY}`) could not be read \
                 ({error}) and were ignored; saving a provider replaces them."
            )
        })?;
        // Names identify providers: a second one of the same name could not be picked.
        let mut seen = std::collections::HashSet::new();
        stored
            .providers
            .retain(|provider| seen.insert(provider.name.clone()));
        Ok(stored)
    }

    /// The text an earlier Kiln wrote (the page now only reads it, to import it).
    #[cfg(test)]
    pub(crate) fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// `local-provider.json`, written by `cargo xtask serve` beside the app when it started the
/// local model.
#[derive(Deserialize)]
struct LocalProviderFile {
    name: String,
    kind: ProviderKind,
    base_url: String,
    model: String,
}

/// Reads `local-provider.json`. `Err` says why it cannot be used.
pub(crate) fn parse_local_provider(text: &str) -> Result<SavedProvider, String> {
    let file: LocalProviderFile = serde_json::from_str(text)
        .map_err(|error| format!("`local-provider.json` could not be read: {error}"))?;
    if file.name.trim().is_empty() || file.model.trim().is_empty() {
        return Err("`local-provider.json` has an empty `name` or `model`".to_owned());
    }
    if !has_http_scheme(&file.base_url) {
        return Err(format!(
            "`local-provider.json` has the base URL `{}`; expected an http:// or https:// URL",
            file.base_url
        ));
    }
    Ok(SavedProvider {
        name: file.name,
        kind: file.kind,
        base_url: file.base_url,
        key: None,
        model: file.model,
        version: 0,
    })
}

/// The URL of `file` in the folder of the page at `page_url` (whose query and fragment are
/// dropped): where `cargo xtask serve` puts `local-provider.json`, wherever the app is served.
pub(crate) fn sibling_url(page_url: &str, file: &str) -> String {
    let page = page_url.split(['?', '#']).next().unwrap_or(page_url);
    let path_start = page.find("://").map_or(0, |at| at + 3);
    match page[path_start..].rfind('/') {
        Some(at) => format!("{}{file}", &page[..path_start + at + 1]),
        None => format!("{page}/{file}"),
    }
}

fn has_http_scheme(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    ["http://", "https://"]
        .iter()
        .any(|scheme| lower.len() > scheme.len() && lower.starts_with(scheme))
}

/// One row of the provider list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ProviderEntry {
    pub provider: SavedProvider,
    /// The local model `cargo xtask serve` announced: not stored, not editable.
    pub local: bool,
}

/// The person's providers, then the local model's unless one of theirs has its name (theirs
/// wins: the local default never replaces a provider the person saved).
pub(crate) fn all_providers(
    saved: &[SavedProvider],
    local: Option<&SavedProvider>,
) -> Vec<ProviderEntry> {
    let mut entries: Vec<ProviderEntry> = saved
        .iter()
        .map(|provider| ProviderEntry {
            provider: provider.clone(),
            local: false,
        })
        .collect();
    if let Some(local) = local
        && !saved.iter().any(|provider| provider.name == local.name)
    {
        entries.push(ProviderEntry {
            provider: local.clone(),
            local: true,
        });
    }
    entries
}

/// The provider the chat uses: the person's pick while it exists, else the local model (so
/// a newcomer can chat without configuring anything), else the first one.
pub(crate) fn selected_provider<'a>(
    entries: &'a [ProviderEntry],
    picked: Option<&str>,
) -> Option<&'a ProviderEntry> {
    picked
        .and_then(|name| entries.iter().find(|entry| entry.provider.name == name))
        .or_else(|| entries.iter().find(|entry| entry.local))
        .or_else(|| entries.first())
}

/// What the provider form holds when it is saved.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ProviderForm {
    pub name: String,
    pub kind: Option<ProviderKind>,
    pub base_url: String,
    /// A key typed now; empty keeps `kept_key`.
    pub key: String,
    /// The key of the provider being edited, unless the person removed it.
    pub kept_key: Option<KeptKey>,
    pub model: String,
}

/// A saved provider's key while its form is edited, with where it was meant to go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KeptKey {
    pub key: ApiKey,
    pub kind: ProviderKind,
    pub base_url: String,
}

/// `scheme://host[:port]` of a URL, lower-cased: where a key may be sent.
pub(crate) fn origin(url: &str) -> String {
    let url = url.trim();
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or(authority);
    format!(
        "{}://{}",
        scheme.to_ascii_lowercase(),
        host.to_ascii_lowercase()
    )
}

impl ProviderForm {
    /// The connection the form describes so far (for Load models and Test connection).
    pub(crate) fn config(&self) -> ProviderConfig {
        let kind = self.kind.unwrap_or(ProviderKind::OpenAi);
        let base_url = match self.base_url.trim() {
            "" => default_base_url(kind).to_owned(),
            url => url.to_owned(),
        };
        let key = match self.key.trim() {
            // A kept key goes only where it was saved for: changing the kind or the
            // address while editing must not send it to another server.
            "" => self
                .kept_key
                .as_ref()
                .filter(|kept| {
                    let saved = match kept.base_url.trim() {
                        "" => default_base_url(kept.kind),
                        url => url,
                    };
                    kept.kind == kind && origin(saved) == origin(&base_url)
                })
                .map(|kept| kept.key.clone()),
            key => Some(ApiKey::new(key)),
        };
        ProviderConfig {
            kind,
            base_url,
            key,
        }
    }

    /// The provider to save, checked against the others (`editing` is the name of the one
    /// being replaced). `Err` is a sentence naming what is wrong.
    pub(crate) fn check(
        &self,
        saved: &[SavedProvider],
        editing: Option<&str>,
    ) -> Result<SavedProvider, String> {
        let name = self.name.trim();
        if name.is_empty() {
            return Err("Give the provider a name.".to_owned());
        }
        if editing != Some(name) && saved.iter().any(|provider| provider.name == name) {
            return Err(format!(
                "A provider named `{name}` is saved already; pick another name, or edit that one."
            ));
        }
        let config = self.config();
        if !has_http_scheme(&config.base_url) {
            return Err(format!(
                "The base URL `{}` must start with http:// or https://.",
                config.base_url
            ));
        }
        let model = self.model.trim();
        if model.is_empty() {
            return Err("Pick a model: load the provider's model list, or type a model id.".into());
        }
        Ok(SavedProvider {
            name: name.to_owned(),
            kind: config.kind,
            base_url: config.base_url,
            key: config.key,
            model: model.to_owned(),
            version: 0,
        })
    }
}

/// A provider's error for the page: the sentence, then what to do, if anything.
pub(crate) fn error_lines(error: &ProviderError) -> (String, Option<String>) {
    let mut text = format!("{} at {}", error.provider.label(), error.url);
    if let Some(model) = &error.model {
        text.push_str(&format!(" (model `{model}`)"));
    }
    text.push_str(": ");
    text.push_str(&error.message);
    (
        text,
        error.hint.as_ref().map(|hint| format!("hint: {hint}")),
    )
}

/// How a reply ended, in a word or two; `aborted` is the Stop button.
pub(crate) fn stop_label(reason: &StopReason) -> String {
    match reason {
        StopReason::EndTurn => "Finished".to_owned(),
        StopReason::ToolUse => "Asked for tools".to_owned(),
        StopReason::MaxTokens => "Cut at the token limit".to_owned(),
        StopReason::StopSequence => "Hit a stop sequence".to_owned(),
        StopReason::ContentFilter => "Filtered by the provider".to_owned(),
        StopReason::Budget => "Over budget".to_owned(),
        StopReason::Deadline => "Past the deadline".to_owned(),
        StopReason::Turns => "Out of turns".to_owned(),
        StopReason::Aborted => "Stopped".to_owned(),
        StopReason::Other(reason) => format!("Ended ({reason})"),
    }
}

/// The tokens a reply used, as the provider reported them.
pub(crate) fn usage_line(usage: Usage) -> String {
    if usage == Usage::default() {
        "no token counts reported".to_owned()
    } else {
        format!(
            "{} in · {} out tokens",
            usage.input_tokens, usage.output_tokens
        )
    }
}

#[cfg(test)]
mod tests {
    use kiln_providers::ErrorKind;

    use super::*;

    fn provider(name: &str) -> SavedProvider {
        SavedProvider {
            name: name.to_owned(),
            kind: ProviderKind::OpenAi,
            base_url: "http://127.0.0.1:1/v1".to_owned(),
            key: None,
            model: "m".to_owned(),
            version: 0,
        }
    }

    #[test]
    fn stored_text_round_trips_and_bad_text_is_a_sentence() {
        let stored = StoredProviders {
            providers: vec![SavedProvider {
                key: Some(ApiKey::new("sk-1")),
                ..provider("a")
            }],
            selected: Some("a".to_owned()),
        };
        let json = stored.to_json();
        assert_eq!(
            json,
            r#"{"providers":[{"name":"a","kind":"openai","base_url":"http://127.0.0.1:1/v1","key":"sk-1","model":"m"}],"selected":"a"}"#
        );
        assert_eq!(StoredProviders::parse(&json), Ok(stored));
        assert_eq!(StoredProviders::parse("{}"), Ok(StoredProviders::default()));
        // A key never prints, even in a debug dump of the list.
        assert!(!format!("{:?}", StoredProviders::parse(&json)).contains("sk-1"));
        let cases = [
            "not json",
            r#"{"providers": 3}"#,
            r#"{"providers": [{"name": "a", "kind": "gemini", "base_url": "x", "model": "m"}]}"#,
        ];
        for text in cases {
            let error = StoredProviders::parse(text).unwrap_err();
            assert!(
                error.starts_with(
                    "The saved providers (`localStorage` key `kiln.providers.v1`) could not be read ("
                ),
                "{error}"
            );
            assert!(
                error.ends_with("and were ignored; saving a provider replaces them."),
                "{error}"
            );
        }
        let twice = r#"{"providers": [
            {"name": "a", "kind": "openai", "base_url": "http://x", "model": "first"},
            {"name": "a", "kind": "ollama", "base_url": "http://y", "model": "second"}]}"#;
        let parsed = StoredProviders::parse(twice).unwrap();
        assert_eq!(parsed.providers.len(), 1);
        assert_eq!(parsed.providers[0].model, "first");
    }

    #[test]
    fn a_provider_as_the_configuration_keeps_it() {
        let saved = SavedProvider {
            key: Some(ApiKey::new("sk-secret-1")),
            kind: ProviderKind::Anthropic,
            version: 3,
            ..provider("a")
        };
        let record = saved.to_record();
        assert_eq!(
            (record.name.as_str(), record.kind.as_str(), record.version),
            ("a", "anthropic", 3)
        );
        assert_eq!(
            record.key.as_ref().map(StoredKey::expose),
            Some("sk-secret-1")
        );
        // The key never prints, as a record or as a provider.
        assert!(!format!("{record:?}").contains("sk-secret-1"));
        assert!(!format!("{saved:?}").contains("sk-secret-1"));
        assert_eq!(SavedProvider::from_record(record), Ok(saved));
        for kind in ProviderKind::ALL {
            let record = SavedProvider {
                kind,
                ..provider("k")
            }
            .to_record();
            assert_eq!(SavedProvider::from_record(record).map(|p| p.kind), Ok(kind));
        }
        let unknown = ProviderRecord {
            kind: "gemini".to_owned(),
            ..provider("g").to_record()
        };
        assert_eq!(
            SavedProvider::from_record(unknown),
            Err(
                "The saved provider `g` has the kind `gemini`, which this Kiln does not know; it \
                 is left out of the list."
                    .to_owned()
            )
        );
    }

    #[test]
    fn local_provider_file() {
        let good = r#"{"name": "Local SmolLM2 (135M)", "kind": "openai", "base_url": "http://127.0.0.1:4100/v1", "model": "smollm2-135m-instruct"}"#;
        assert_eq!(
            parse_local_provider(good),
            Ok(SavedProvider {
                name: "Local SmolLM2 (135M)".to_owned(),
                kind: ProviderKind::OpenAi,
                base_url: "http://127.0.0.1:4100/v1".to_owned(),
                key: None,
                model: "smollm2-135m-instruct".to_owned(),
                version: 0,
            })
        );
        let cases = [
            (
                "<!doctype html>",
                "`local-provider.json` could not be read: expected value",
            ),
            (
                r#"{"name": "x", "kind": "openai", "base_url": "file:///etc", "model": "m"}"#,
                "`local-provider.json` has the base URL `file:///etc`; expected an http:// or https:// URL",
            ),
            (
                r#"{"name": "", "kind": "openai", "base_url": "http://x", "model": "m"}"#,
                "`local-provider.json` has an empty `name` or `model`",
            ),
        ];
        for (text, expected) in cases {
            let error = parse_local_provider(text).unwrap_err();
            assert!(error.starts_with(expected), "{error}");
        }
    }

    #[test]
    fn the_local_provider_file_sits_beside_the_page() {
        let cases = [
            (
                "http://127.0.0.1:8080/",
                "http://127.0.0.1:8080/local-provider.json",
            ),
            (
                "http://127.0.0.1:8080",
                "http://127.0.0.1:8080/local-provider.json",
            ),
            (
                "http://h/index.html?x=/y#z/w",
                "http://h/local-provider.json",
            ),
            (
                "https://h/kiln/app/",
                "https://h/kiln/app/local-provider.json",
            ),
            (
                "https://h/kiln/index.html",
                "https://h/kiln/local-provider.json",
            ),
        ];
        for (page, expected) in cases {
            assert_eq!(sibling_url(page, "local-provider.json"), expected, "{page}");
        }
    }

    #[test]
    fn the_list_and_the_selection() {
        let local = SavedProvider {
            model: "local".to_owned(),
            ..provider("Local")
        };
        let names = |entries: &[ProviderEntry]| {
            entries
                .iter()
                .map(|entry| (entry.provider.name.clone(), entry.local))
                .collect::<Vec<_>>()
        };
        let selected = |entries: &[ProviderEntry], picked: Option<&str>| {
            selected_provider(entries, picked).map(|entry| entry.provider.name.clone())
        };

        let none = all_providers(&[], None);
        assert_eq!(selected(&none, Some("a")), None);

        let only_local = all_providers(&[], Some(&local));
        assert_eq!(names(&only_local), [("Local".to_owned(), true)]);
        assert_eq!(selected(&only_local, None).as_deref(), Some("Local"));

        let both = all_providers(&[provider("a"), provider("b")], Some(&local));
        assert_eq!(
            names(&both),
            [
                ("a".to_owned(), false),
                ("b".to_owned(), false),
                ("Local".to_owned(), true)
            ]
        );
        let cases = [
            (Some("b"), "b"),
            (None, "Local"),
            (Some("gone"), "Local"),
            (Some("Local"), "Local"),
        ];
        for (picked, expected) in cases {
            assert_eq!(
                selected(&both, picked).as_deref(),
                Some(expected),
                "{picked:?}"
            );
        }
        let without_local = all_providers(&[provider("a"), provider("b")], None);
        assert_eq!(selected(&without_local, Some("gone")).as_deref(), Some("a"));

        // The person's own provider of the same name wins over the local one.
        let clash = all_providers(&[provider("Local")], Some(&local));
        assert_eq!(names(&clash), [("Local".to_owned(), false)]);
        assert_eq!(clash[0].provider.model, "m");
    }

    #[test]
    fn the_form_is_checked() {
        let form = |name: &str, base_url: &str, model: &str| ProviderForm {
            name: name.to_owned(),
            kind: Some(ProviderKind::Anthropic),
            base_url: base_url.to_owned(),
            key: String::new(),
            kept_key: None,
            model: model.to_owned(),
        };
        let saved = [provider("a"), provider("b")];
        let cases = [
            (form(" ", "", "m"), None, Err("Give the provider a name.")),
            (
                form("a", "", "m"),
                None,
                Err("A provider named `a` is saved already; pick another name, or edit that one."),
            ),
            (
                form("b", "", "m"),
                Some("a"),
                Err("A provider named `b` is saved already; pick another name, or edit that one."),
            ),
            (
                form("c", "api.anthropic.com", "m"),
                None,
                Err("The base URL `api.anthropic.com` must start with http:// or https://."),
            ),
            (
                form("c", "", " "),
                None,
                Err("Pick a model: load the provider's model list, or type a model id."),
            ),
            (
                form(" c ", "", " m "),
                None,
                Ok("https://api.anthropic.com"),
            ),
            (form("a", " http://h:1 ", "m"), Some("a"), Ok("http://h:1")),
        ];
        for (form, editing, expected) in cases {
            let checked = form.check(&saved, editing);
            match expected {
                Err(message) => assert_eq!(checked, Err(message.to_owned())),
                Ok(base_url) => {
                    let provider = checked.unwrap();
                    assert_eq!(provider.base_url, base_url);
                    assert_eq!(provider.model, "m");
                    assert_eq!(provider.kind, ProviderKind::Anthropic);
                    assert!(!provider.name.starts_with(' '));
                }
            }
        }
    }

    #[test]
    fn a_kept_key_goes_only_where_it_was_saved_for() {
        let form = |kind: ProviderKind, base_url: &str| ProviderForm {
            name: "a".to_owned(),
            kind: Some(kind),
            base_url: base_url.to_owned(),
            kept_key: Some(KeptKey {
                key: ApiKey::new("sk-old"),
                kind: ProviderKind::OpenAi,
                base_url: "https://api.openai.com/v1".to_owned(),
            }),
            model: "m".to_owned(),
            ..ProviderForm::default()
        };
        let cases = [
            (ProviderKind::OpenAi, "https://api.openai.com/v1", true),
            (ProviderKind::OpenAi, "https://API.openai.com/v2/", true),
            (ProviderKind::OpenAi, "", true),
            (ProviderKind::OpenAi, "http://192.168.1.5:11434/v1", false),
            (ProviderKind::OpenAi, "http://api.openai.com/v1", false),
            (ProviderKind::Ollama, "https://api.openai.com/v1", false),
        ];
        for (kind, base_url, kept) in cases {
            assert_eq!(
                form(kind, base_url).config().key.is_some(),
                kept,
                "{kind:?} {base_url}"
            );
        }
    }

    #[test]
    fn a_typed_key_replaces_the_kept_one_and_an_empty_field_keeps_it() {
        let mut form = ProviderForm {
            name: "a".to_owned(),
            kept_key: Some(KeptKey {
                key: ApiKey::new("old"),
                kind: ProviderKind::OpenAi,
                base_url: "https://api.openai.com/v1".to_owned(),
            }),
            model: "m".to_owned(),
            ..ProviderForm::default()
        };
        assert_eq!(form.config().key, Some(ApiKey::new("old")));
        assert_eq!(form.config().base_url, "https://api.openai.com/v1");
        form.key = " new ".to_owned();
        assert_eq!(form.check(&[], None).unwrap().key, Some(ApiKey::new("new")));
        form.key.clear();
        form.kept_key = None;
        assert_eq!(form.check(&[], None).unwrap().key, None);
    }

    #[test]
    fn lines_under_a_reply() {
        let cases = [
            (StopReason::EndTurn, "Finished"),
            (StopReason::Aborted, "Stopped"),
            (StopReason::MaxTokens, "Cut at the token limit"),
            (StopReason::Other("length".to_owned()), "Ended (length)"),
        ];
        for (reason, label) in cases {
            assert_eq!(stop_label(&reason), label);
        }
        assert_eq!(
            usage_line(Usage {
                input_tokens: 12,
                output_tokens: 5
            }),
            "12 in · 5 out tokens"
        );
        assert_eq!(usage_line(Usage::default()), "no token counts reported");
    }

    #[test]
    fn an_error_is_a_sentence_and_a_hint() {
        let error = ProviderError {
            kind: ErrorKind::KeyRejected,
            provider: ProviderKind::OpenAi,
            url: "http://127.0.0.1:9/v1/chat/completions".to_owned(),
            model: Some("gpt-4o-mini".to_owned()),
            status: Some(401),
            message: "the key was rejected (HTTP 401): Incorrect API key provided".to_owned(),
            hint: Some("check the API key".to_owned()),
        };
        assert_eq!(
            error_lines(&error),
            (
                "OpenAI-compatible at http://127.0.0.1:9/v1/chat/completions (model `gpt-4o-mini`): \
                 the key was rejected (HTTP 401): Incorrect API key provided"
                    .to_owned(),
                Some("hint: check the API key".to_owned())
            )
        );
    }
}

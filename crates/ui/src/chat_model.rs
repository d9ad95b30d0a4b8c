//! What the Providers panel and the Chat box keep and say, as plain data and strings: a
//! provider as the workspace's configuration keeps it (`kiln_types::records`), the list an
//! earlier Kiln kept in `localStorage` (imported once), the local model's
//! `local-provider.json`, the in-browser model that is always there, the form's checks,
//! which provider is selected, the line under a reply, and what the chat says while the
//! in-browser model loads. Pure, so it is tested natively.

use kiln_types::chat::{
    ApiKey, IN_PROCESS_LABEL, IN_PROCESS_MODEL_ID, IN_PROCESS_MODELS, ProviderKind, Usage,
    key_goes_to,
};
use kiln_types::model::ModelStatus;
use kiln_types::records::ProviderInfo;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The `localStorage` key an earlier Kiln kept the provider list under; read once, imported
/// into the configuration, then removed.
pub(crate) const STORAGE_KEY: &str = "kiln.providers.v1";

/// One provider: a name for people, where it is and the model chats use.
/// A provider the workspace keeps has its key in the runtime worker, which
/// never gives it back: the page knows only whether there is one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SavedProvider {
    pub name: String,
    pub kind: ProviderKind,
    pub base_url: String,
    /// The key itself, only for a provider the page holds alone (storage
    /// is not available, or an earlier Kiln's list being imported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<ApiKey>,
    pub model: String,
    /// Whether a key is kept with it.
    #[serde(skip)]
    pub has_key: bool,
    /// Kept in the workspace (else in this page only).
    #[serde(skip)]
    pub stored: bool,
    /// The stored record's version (0: not stored yet); the next write expects it.
    #[serde(skip)]
    pub version: u64,
}

impl SavedProvider {
    /// The provider as a chat turn or a model list names it: a kept one by
    /// name (the runtime worker adds its key), else whole.
    pub(crate) fn wire(&self) -> Value {
        if self.stored {
            return json!({"stored": self.name});
        }
        let mut wire = json!({"kind": self.kind, "base_url": self.base_url});
        if let Some(key) = &self.key {
            wire["key"] = key.expose().into();
        }
        wire
    }

    /// A provider as the workspace keeps it. `Err` is a sentence saying why
    /// it cannot be used.
    pub(crate) fn from_info(info: ProviderInfo) -> Result<Self, String> {
        let Some(kind) = ProviderKind::parse(&info.kind) else {
            return Err(format!(
                "The saved provider `{}` has the kind `{}`, which this Kiln does not know; it is \
                 left out of the list.",
                info.name, info.kind
            ));
        };
        Ok(Self {
            name: info.name,
            kind,
            base_url: info.base_url,
            key: None,
            model: info.model,
            has_key: info.has_key,
            stored: true,
            version: info.version,
        })
    }

    /// The `config.provider.put` arguments that save it (in place of
    /// `replacing`), with what becomes of its key.
    pub(crate) fn put_args(&self, key: &KeyChange, replacing: Option<&str>) -> Value {
        let mut args = json!({
            "name": self.name,
            "kind": self.kind,
            "base_url": self.base_url,
            "model": self.model,
            "version": self.version,
        });
        match key {
            KeyChange::Typed(key) => args["key"] = key.expose().into(),
            KeyChange::None => args["key"] = "".into(),
            KeyChange::Keep => {}
        }
        if let Some(old) = replacing.filter(|old| *old != self.name) {
            args["replacing"] = old.into();
        }
        args
    }
}

/// What a save does to the provider's key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum KeyChange {
    /// The key the person typed.
    Typed(ApiKey),
    /// The key kept with the provider being edited (the runtime worker keeps
    /// it only for the same kind and origin).
    Keep,
    /// No key.
    None,
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
        for provider in &mut stored.providers {
            provider.has_key = provider.key.is_some();
        }
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
        has_key: false,
        stored: false,
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

/// Kiln's own model, run in this browser by the runtime worker's model worker: always
/// offered, never stored, no key, no server. Its files are the build's `models/`, beside
/// the app.
pub(crate) fn in_browser_provider() -> SavedProvider {
    SavedProvider {
        name: IN_PROCESS_LABEL.to_owned(),
        kind: ProviderKind::InProcess,
        base_url: IN_PROCESS_MODELS.to_owned(),
        key: None,
        model: IN_PROCESS_MODEL_ID.to_owned(),
        has_key: false,
        stored: false,
        version: 0,
    }
}

/// Where a row of the provider list comes from, which says what the panel may do with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// The person's own: kept in the workspace (or in this page), edited and removed.
    Saved,
    /// The local model `cargo xtask serve` announced in `local-provider.json`: read at each
    /// load, not editable.
    Local,
    /// Kiln's own model in this browser ([`in_browser_provider`]): always there, not editable.
    InBrowser,
}

/// What the look for `local-provider.json` found so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum LocalLook {
    /// Still looking: the in-browser model is not offered yet, so that the chat does not
    /// pick it over a local model about to be announced.
    Looking,
    /// No local model (the usual case), or one that could not be used.
    Absent,
    Found(SavedProvider),
}

impl LocalLook {
    pub(crate) fn provider(&self) -> Option<&SavedProvider> {
        match self {
            Self::Found(provider) => Some(provider),
            Self::Looking | Self::Absent => None,
        }
    }
}

/// One row of the provider list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ProviderEntry {
    pub provider: SavedProvider,
    pub origin: Origin,
}

/// The person's providers, then the local model's, then the in-browser model (once the look
/// for the local one is over). A provider of the person's with the same name as one of the
/// others wins: neither ever replaces a provider the person saved.
pub(crate) fn all_providers(saved: &[SavedProvider], local: &LocalLook) -> Vec<ProviderEntry> {
    let mut entries: Vec<ProviderEntry> = saved
        .iter()
        .map(|provider| ProviderEntry {
            provider: provider.clone(),
            origin: Origin::Saved,
        })
        .collect();
    let in_browser = match local {
        LocalLook::Looking => None,
        LocalLook::Absent | LocalLook::Found(_) => Some(in_browser_provider()),
    };
    let others = [
        local
            .provider()
            .cloned()
            .map(|provider| (provider, Origin::Local)),
        in_browser.map(|provider| (provider, Origin::InBrowser)),
    ];
    for (provider, origin) in others.into_iter().flatten() {
        if !entries
            .iter()
            .any(|entry| entry.provider.name == provider.name)
        {
            entries.push(ProviderEntry { provider, origin });
        }
    }
    entries
}

/// The provider the chat uses: the person's pick while it exists, else the local model (so
/// a newcomer who ran `cargo xtask serve` chats with it), else the person's first, else the
/// in-browser model (so a newcomer on any static host can chat, with no key and no server).
pub(crate) fn selected_provider<'a>(
    entries: &'a [ProviderEntry],
    picked: Option<&str>,
) -> Option<&'a ProviderEntry> {
    let first = |origin: Origin| entries.iter().find(|entry| entry.origin == origin);
    picked
        .and_then(|name| entries.iter().find(|entry| entry.provider.name == name))
        .or_else(|| first(Origin::Local))
        .or_else(|| first(Origin::Saved))
        .or_else(|| first(Origin::InBrowser))
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
    /// The provider it is kept with.
    pub name: String,
    pub kind: ProviderKind,
    pub base_url: String,
    /// Kept in the workspace: the runtime worker holds the key.
    pub stored: bool,
    /// The key, for a provider the page holds alone.
    pub key: Option<ApiKey>,
}

impl ProviderForm {
    /// The kind, and the base URL or the kind's default.
    fn address(&self) -> (ProviderKind, String) {
        let kind = self.kind.unwrap_or(ProviderKind::OpenAi);
        let base_url = match self.base_url.trim() {
            "" => kind.default_base_url().to_owned(),
            url => url.to_owned(),
        };
        (kind, base_url)
    }

    /// Where the form's requests go.
    pub(crate) fn base_url(&self) -> String {
        self.address().1
    }

    /// The kept key, when it may go where the form now points: a kept key
    /// goes only where it was saved for (`kiln_types::chat::key_goes_to`).
    pub(crate) fn kept_key_applies(&self) -> Option<&KeptKey> {
        let (kind, base_url) = self.address();
        self.kept_key.as_ref().filter(|kept| {
            key_goes_to(kept.kind.as_str(), &kept.base_url, kind.as_str(), &base_url)
        })
    }

    /// The provider the form describes so far, as Load models and Test
    /// connection name it: a key typed now goes along; a kept one is added
    /// by the runtime worker, which applies the same rule.
    pub(crate) fn wire(&self) -> Value {
        let (kind, base_url) = self.address();
        match (self.key.trim(), self.kept_key_applies()) {
            ("", Some(kept)) if kept.stored => {
                json!({"stored": kept.name, "kind": kind, "base_url": base_url})
            }
            ("", Some(kept)) => {
                json!({"kind": kind, "base_url": base_url, "key": kept.key.as_ref().map(ApiKey::expose)})
            }
            ("", None) => json!({"kind": kind, "base_url": base_url}),
            (key, _) => json!({"kind": kind, "base_url": base_url, "key": key}),
        }
    }

    /// The provider to save and what becomes of its key, checked against
    /// the others (`editing` is the name of the one being replaced). `Err`
    /// is a sentence naming what is wrong.
    pub(crate) fn check(
        &self,
        saved: &[SavedProvider],
        editing: Option<&str>,
    ) -> Result<(SavedProvider, KeyChange), String> {
        let name = self.name.trim();
        if name.is_empty() {
            return Err("Give the provider a name.".to_owned());
        }
        if editing != Some(name) && saved.iter().any(|provider| provider.name == name) {
            return Err(format!(
                "A provider named `{name}` is saved already; pick another name, or edit that one."
            ));
        }
        let (kind, base_url) = self.address();
        if !has_http_scheme(&base_url) {
            return Err(format!(
                "The base URL `{base_url}` must start with http:// or https://."
            ));
        }
        let model = self.model.trim();
        if model.is_empty() {
            return Err("Pick a model: load the provider's model list, or type a model id.".into());
        }
        let (key, change) = match (self.key.trim(), self.kept_key_applies()) {
            ("", Some(kept)) => (kept.key.clone(), KeyChange::Keep),
            ("", None) => (None, KeyChange::None),
            (typed, _) => (
                Some(ApiKey::new(typed)),
                KeyChange::Typed(ApiKey::new(typed)),
            ),
        };
        let version = saved
            .iter()
            .find(|provider| Some(provider.name.as_str()) == editing && provider.name == name)
            .map_or(0, |provider| provider.version);
        Ok((
            SavedProvider {
                name: name.to_owned(),
                kind,
                base_url,
                has_key: change != KeyChange::None,
                key,
                model: model.to_owned(),
                stored: false,
                version,
            },
            change,
        ))
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

/// What the chat says about the in-browser model's loading, from the statuses the runtime
/// worker broadcasts.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ModelLine {
    /// Still on its way: the status line's text.
    Working(String),
    /// Loaded: a short note, and what could not be kept when something could not.
    Ready {
        note: String,
        warning: Option<String>,
    },
    /// Loading failed: the sentence and its `hint:` line (the turn then fails too; the
    /// chat says it once, with Retry and Clear cached model).
    Failed {
        message: String,
        hint: Option<String>,
    },
}

impl ModelLine {
    pub(crate) fn new(status: &ModelStatus) -> Self {
        match status {
            ModelStatus::Downloading {
                loaded_bytes,
                total_bytes,
            } => Self::Working(download_line(*loaded_bytes, *total_bytes)),
            ModelStatus::Reading { total_bytes } => Self::Working(format!(
                "Checking this browser's cache for the in-browser model ({} MB)\u{2026}",
                megabytes(*total_bytes)
            )),
            ModelStatus::Loading => Self::Working("Loading the model\u{2026}".to_owned()),
            ModelStatus::Prompt {
                read_tokens,
                total_tokens,
            } if read_tokens < total_tokens => Self::Working(format!(
                "Reading the conversation: {read_tokens} of {total_tokens} tokens\u{2026}"
            )),
            ModelStatus::Prompt { total_tokens, .. } => Self::Ready {
                note: format!("Read the conversation ({total_tokens} tokens)"),
                warning: None,
            },
            ModelStatus::Ready {
                from_cache,
                load_ms,
                warning,
                ..
            } => Self::Ready {
                note: if *from_cache {
                    format!("Loaded from this browser's cache in {}", seconds(*load_ms))
                } else {
                    format!("Downloaded and loaded in {}", seconds(*load_ms))
                },
                warning: warning
                    .as_ref()
                    .map(|warning| format!("warning: {warning}")),
            },
            ModelStatus::Failed { failure } => Self::Failed {
                message: format!(
                    "The in-browser model could not be loaded: {}.",
                    failure.message.trim_end_matches('.')
                ),
                hint: failure.hint.as_ref().map(|hint| format!("hint: {hint}")),
            },
        }
    }
}

/// The status line while the model downloads: both figures in MB with one decimal, and the
/// share rounded down, so that it says 100 % only once every byte is in.
pub(crate) fn download_line(loaded_bytes: u64, total_bytes: u64) -> String {
    if total_bytes == 0 {
        return format!(
            "Downloading the in-browser model: {} MB",
            megabytes(loaded_bytes)
        );
    }
    let percent = (u128::from(loaded_bytes.min(total_bytes)) * 100) / u128::from(total_bytes);
    format!(
        "Downloading the in-browser model: {} of {} MB ({percent} %)",
        megabytes(loaded_bytes),
        megabytes(total_bytes)
    )
}

/// Bytes in decimal megabytes (10^6, as download sizes are given), with one decimal.
pub(crate) fn megabytes(bytes: u64) -> String {
    // Tenths of a megabyte, rounded to the nearest, in integers: no float rounding at .x5.
    let tenths = (u128::from(bytes) + 50_000) / 100_000;
    format!("{}.{}", tenths / 10, tenths % 10)
}

/// Milliseconds as seconds with one decimal.
pub(crate) fn seconds(ms: f64) -> String {
    format!("{:.1} s", ms.max(0.0) / 1000.0)
}

/// Whether a failed turn of the in-browser model failed for want of the model (its files
/// could not be fetched, read or loaded), which Retry or Clear cached model may mend; any
/// other failure (the context overflowed, say) is a plain error.
pub(crate) fn is_model_failure(code: Option<&str>) -> bool {
    matches!(
        code,
        Some("model_unavailable" | "model_corrupt" | "network")
    )
}

/// What the chat says under the message box when the in-browser model answers.
pub(crate) const IN_BROWSER_NOTE: &str = "The in-browser model is small (135M parameters): fine \
     for short answers, poor at writing code. For real work, add a provider with a key.";

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(name: &str) -> SavedProvider {
        SavedProvider {
            name: name.to_owned(),
            kind: ProviderKind::OpenAi,
            base_url: "http://127.0.0.1:1/v1".to_owned(),
            key: None,
            model: "m".to_owned(),
            has_key: false,
            stored: false,
            version: 0,
        }
    }

    #[test]
    fn stored_text_round_trips_and_bad_text_is_a_sentence() {
        let stored = StoredProviders {
            providers: vec![SavedProvider {
                key: Some(ApiKey::new("sk-1")),
                has_key: true,
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
        let info = ProviderInfo {
            name: "a".to_owned(),
            kind: "anthropic".to_owned(),
            base_url: "https://api.anthropic.com".to_owned(),
            model: "m".to_owned(),
            has_key: true,
            version: 3,
        };
        let saved = SavedProvider::from_info(info.clone()).unwrap();
        assert_eq!(
            (saved.kind, saved.has_key, saved.stored, saved.version),
            (ProviderKind::Anthropic, true, true, 3)
        );
        // A kept provider is named, and its key added by the worker.
        assert_eq!(saved.wire(), json!({"stored": "a"}));
        // Saved again: the key stays unless one is typed or it is forgotten.
        let args = saved.put_args(&KeyChange::Keep, Some("a"));
        assert_eq!(
            args,
            json!({"name": "a", "kind": "anthropic", "base_url": "https://api.anthropic.com",
                "model": "m", "version": 3})
        );
        assert_eq!(saved.put_args(&KeyChange::None, None)["key"], "");
        let typed = saved.put_args(&KeyChange::Typed(ApiKey::new("sk-new")), Some("old"));
        assert_eq!(
            (&typed["key"], &typed["replacing"]),
            (&json!("sk-new"), &json!("old"))
        );
        // A provider the page holds alone is sent whole; its key never prints.
        let alone = SavedProvider {
            key: Some(ApiKey::new("sk-secret-1")),
            has_key: true,
            ..provider("b")
        };
        assert_eq!(alone.wire()["key"], "sk-secret-1");
        assert!(!format!("{alone:?}").contains("sk-secret-1"));
        let unknown = ProviderInfo {
            kind: "gemini".to_owned(),
            name: "g".to_owned(),
            ..info
        };
        assert_eq!(
            SavedProvider::from_info(unknown),
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
                has_key: false,
                stored: false,
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
                .map(|entry| (entry.provider.name.clone(), entry.origin))
                .collect::<Vec<_>>()
        };
        let selected = |entries: &[ProviderEntry], picked: Option<&str>| {
            selected_provider(entries, picked).map(|entry| entry.provider.name.clone())
        };
        let in_browser = (IN_PROCESS_LABEL.to_owned(), Origin::InBrowser);

        // While `local-provider.json` is looked for, only the person's own are listed.
        let looking = all_providers(&[], &LocalLook::Looking);
        assert_eq!(selected(&looking, Some("a")), None);
        let looking = all_providers(&[provider("a")], &LocalLook::Looking);
        assert_eq!(names(&looking), [("a".to_owned(), Origin::Saved)]);

        // A newcomer with nothing configured chats with the in-browser model.
        let newcomer = all_providers(&[], &LocalLook::Absent);
        assert_eq!(names(&newcomer), std::slice::from_ref(&in_browser));
        assert_eq!(selected(&newcomer, None).as_deref(), Some(IN_PROCESS_LABEL));
        assert_eq!(
            selected(&newcomer, Some("gone")).as_deref(),
            Some(IN_PROCESS_LABEL)
        );

        let only_local = all_providers(&[], &LocalLook::Found(local.clone()));
        assert_eq!(
            names(&only_local),
            [("Local".to_owned(), Origin::Local), in_browser.clone()]
        );
        assert_eq!(selected(&only_local, None).as_deref(), Some("Local"));

        let all = all_providers(
            &[provider("a"), provider("b")],
            &LocalLook::Found(local.clone()),
        );
        assert_eq!(
            names(&all),
            [
                ("a".to_owned(), Origin::Saved),
                ("b".to_owned(), Origin::Saved),
                ("Local".to_owned(), Origin::Local),
                in_browser.clone(),
            ]
        );
        // (picked, with the local model, without it)
        let cases = [
            (Some("b"), "b", "b"),
            (None, "Local", "a"),
            (Some("gone"), "Local", "a"),
            (Some("Local"), "Local", "a"),
            (Some(IN_PROCESS_LABEL), IN_PROCESS_LABEL, IN_PROCESS_LABEL),
        ];
        let without_local = all_providers(&[provider("a"), provider("b")], &LocalLook::Absent);
        for (picked, with, without) in cases {
            assert_eq!(selected(&all, picked).as_deref(), Some(with), "{picked:?}");
            assert_eq!(
                selected(&without_local, picked).as_deref(),
                Some(without),
                "{picked:?}"
            );
        }

        // The person's own provider of the same name wins over the local one and the
        // in-browser one.
        let clash = all_providers(
            &[provider("Local"), provider(IN_PROCESS_LABEL)],
            &LocalLook::Found(local),
        );
        assert_eq!(
            names(&clash),
            [
                ("Local".to_owned(), Origin::Saved),
                (IN_PROCESS_LABEL.to_owned(), Origin::Saved)
            ]
        );
        assert_eq!(clash[0].provider.model, "m");
    }

    #[test]
    fn the_in_browser_model_goes_to_the_worker_by_kind() {
        let in_browser = in_browser_provider();
        assert_eq!(
            in_browser.wire(),
            json!({"kind": "browser", "base_url": "models"})
        );
        assert_eq!(in_browser.model, "smollm2-135m-instruct");
        assert_eq!(in_browser.name, "In-browser SmolLM2 (135M)");
        // A provider the page holds without a key sends none.
        assert_eq!(
            provider("a").wire(),
            json!({"kind": "openai", "base_url": "http://127.0.0.1:1/v1"})
        );
    }

    #[test]
    fn what_the_chat_says_while_the_model_loads() {
        use kiln_types::model::ModelFailure;
        let working = |text: &str| ModelLine::Working(text.to_owned());
        let downloading = |loaded_bytes, total_bytes| ModelStatus::Downloading {
            loaded_bytes,
            total_bytes,
        };
        let ready = |from_cache, load_ms, warning: Option<&str>| ModelStatus::Ready {
            from_cache,
            load_ms,
            weights_bytes: 144_811_072,
            memory_bytes: 300_000_000,
            warning: warning.map(str::to_owned),
        };
        let cases = [
            (
                downloading(41_300_000, 146_178_742),
                working("Downloading the in-browser model: 41.3 of 146.2 MB (28 %)"),
            ),
            (
                downloading(0, 146_178_742),
                working("Downloading the in-browser model: 0.0 of 146.2 MB (0 %)"),
            ),
            // The share is rounded down: 100 % only once the last byte is in.
            (
                downloading(146_178_741, 146_178_742),
                working("Downloading the in-browser model: 146.2 of 146.2 MB (99 %)"),
            ),
            (
                downloading(146_178_742, 146_178_742),
                working("Downloading the in-browser model: 146.2 of 146.2 MB (100 %)"),
            ),
            // More than announced, or no total: never past 100 %, never a division by zero.
            (
                downloading(2_000_000, 1_000_000),
                working("Downloading the in-browser model: 2.0 of 1.0 MB (100 %)"),
            ),
            (
                downloading(1_250_000, 0),
                working("Downloading the in-browser model: 1.3 MB"),
            ),
            (
                ModelStatus::Reading {
                    total_bytes: 146_178_742,
                },
                working(
                    "Checking this browser's cache for the in-browser model (146.2 MB)\u{2026}",
                ),
            ),
            (ModelStatus::Loading, working("Loading the model\u{2026}")),
            (
                ModelStatus::Prompt {
                    read_tokens: 512,
                    total_tokens: 2354,
                },
                working("Reading the conversation: 512 of 2354 tokens\u{2026}"),
            ),
            (
                ModelStatus::Prompt {
                    read_tokens: 2354,
                    total_tokens: 2354,
                },
                ModelLine::Ready {
                    note: "Read the conversation (2354 tokens)".to_owned(),
                    warning: None,
                },
            ),
            (
                ready(true, 612.0, None),
                ModelLine::Ready {
                    note: "Loaded from this browser's cache in 0.6 s".to_owned(),
                    warning: None,
                },
            ),
            (
                ready(
                    false,
                    3_249.9,
                    Some("the browser did not keep the model (quota)"),
                ),
                ModelLine::Ready {
                    note: "Downloaded and loaded in 3.2 s".to_owned(),
                    warning: Some("warning: the browser did not keep the model (quota)".to_owned()),
                },
            ),
            (
                ModelStatus::Failed {
                    failure: ModelFailure {
                        code: "network".to_owned(),
                        message: "http://h/models/m.gguf could not be fetched: TypeError"
                            .to_owned(),
                        hint: Some("check the connection, then retry".to_owned()),
                    },
                },
                ModelLine::Failed {
                    message: "The in-browser model could not be loaded: \
                              http://h/models/m.gguf could not be fetched: TypeError."
                        .to_owned(),
                    hint: Some("hint: check the connection, then retry".to_owned()),
                },
            ),
        ];
        for (status, expected) in cases {
            assert_eq!(ModelLine::new(&status), expected, "{status:?}");
        }
    }

    #[test]
    fn sizes_and_times_as_people_read_them() {
        // (bytes, MB)
        let sizes = [
            (0, "0.0"),
            (49_999, "0.0"),
            (50_000, "0.1"),
            (1_000_000, "1.0"),
            (144_811_072, "144.8"),
            (146_178_742, "146.2"),
            (u64::MAX, "18446744073709.6"),
        ];
        for (bytes, expected) in sizes {
            assert_eq!(megabytes(bytes), expected, "{bytes}");
        }
        // (ms, shown)
        let times = [
            (0.0, "0.0 s"),
            (49.0, "0.0 s"),
            (612.0, "0.6 s"),
            (12_345.0, "12.3 s"),
            (-5.0, "0.0 s"),
            (f64::NAN, "0.0 s"),
        ];
        for (ms, expected) in times {
            assert_eq!(seconds(ms), expected, "{ms}");
        }
    }

    #[test]
    fn which_failures_retry_and_clear_may_mend() {
        let cases = [
            (Some("model_unavailable"), true),
            (Some("model_corrupt"), true),
            (Some("network"), true),
            (Some("context_overflow"), false),
            (Some("aborted"), false),
            (None, false),
        ];
        for (code, mended) in cases {
            assert_eq!(is_model_failure(code), mended, "{code:?}");
        }
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
                    let (provider, _) = checked.unwrap();
                    assert_eq!(provider.base_url, base_url);
                    assert_eq!(provider.model, "m");
                    assert_eq!(provider.kind, ProviderKind::Anthropic);
                    assert!(!provider.name.starts_with(' '));
                }
            }
        }
    }

    fn kept(stored: bool) -> KeptKey {
        KeptKey {
            name: "a".to_owned(),
            kind: ProviderKind::OpenAi,
            base_url: "https://api.openai.com/v1".to_owned(),
            stored,
            key: (!stored).then(|| ApiKey::new("sk-old")),
        }
    }

    #[test]
    fn a_kept_key_goes_only_where_it_was_saved_for() {
        let form = |kind: ProviderKind, base_url: &str, stored: bool| ProviderForm {
            name: "a".to_owned(),
            kind: Some(kind),
            base_url: base_url.to_owned(),
            kept_key: Some(kept(stored)),
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
        for (kind, base_url, goes) in cases {
            // Held by the page: the key itself goes along, or nothing.
            let alone = form(kind, base_url, false).wire();
            assert_eq!(
                alone["key"] == "sk-old",
                goes,
                "{kind:?} {base_url}: {alone}"
            );
            // Kept in the workspace: named, for the worker to add the key.
            let kept = form(kind, base_url, true).wire();
            assert_eq!(
                kept.get("stored").is_some(),
                goes,
                "{kind:?} {base_url}: {kept}"
            );
            assert_eq!(kept.get("key"), None, "{kept}");
            // The worker reads the same rule.
            assert_eq!(
                key_goes_to(
                    "openai",
                    "https://api.openai.com/v1",
                    kind.as_str(),
                    base_url
                ),
                goes
            );
        }
    }

    #[test]
    fn a_typed_key_replaces_the_kept_one_and_an_empty_field_keeps_it() {
        let mut form = ProviderForm {
            name: "a".to_owned(),
            kept_key: Some(kept(true)),
            model: "m".to_owned(),
            ..ProviderForm::default()
        };
        assert_eq!(
            form.wire(),
            json!({"stored": "a", "kind": "openai", "base_url": "https://api.openai.com/v1"})
        );
        assert_eq!(form.check(&[], None).unwrap().1, KeyChange::Keep);
        form.key = " new ".to_owned();
        assert_eq!(
            form.check(&[], None).unwrap().1,
            KeyChange::Typed(ApiKey::new("new"))
        );
        assert_eq!(form.wire()["key"], "new");
        form.key.clear();
        form.kept_key = None;
        assert_eq!(form.check(&[], None).unwrap().1, KeyChange::None);
    }

    #[test]
    fn the_tokens_under_a_reply() {
        assert_eq!(
            usage_line(Usage {
                input_tokens: 12,
                output_tokens: 5
            }),
            "12 in · 5 out tokens"
        );
        assert_eq!(usage_line(Usage::default()), "no token counts reported");
    }
}

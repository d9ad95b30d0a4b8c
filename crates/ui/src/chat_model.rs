//! What the Providers panel and the Chat box keep and say, as plain data and strings: a
//! provider as the workspace's configuration keeps it (`kiln_types::records`), the list an
//! earlier Kiln kept in `localStorage` (imported once), the local model's
//! `local-provider.json`, the form's checks, which provider is selected, and the line under
//! a reply. Pure, so it is tested natively.

use kiln_types::chat::{ApiKey, ProviderKind, Usage, key_goes_to};
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
            json!({"stored": self.name})
        } else {
            json!({"kind": self.kind, "base_url": self.base_url, "key": self.key.as_ref().map(ApiKey::expose)})
        }
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

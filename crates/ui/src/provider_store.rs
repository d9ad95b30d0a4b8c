//! The providers the chat can use, kept in the workspace's configuration (in
//! IndexedDB, through the runtime worker's storage operations): `ProviderStore`,
//! which the Providers panel of `providers_panel` edits and the chat picks from.
//!
//! Each provider is written at the version it was read (compare-and-swap), and the
//! pick in `Settings.selected_provider`; a kept provider's key stays in the worker,
//! which adds it to the requests it sends. Another tab's change reaches this one
//! through the change feed. A list an earlier Kiln kept in `localStorage` is
//! imported once, when the store has none, and the old key removed. The local
//! model `cargo xtask serve` started is announced in `local-provider.json` beside
//! the page and is listed too, without being stored, and so is Kiln's own small
//! model, run in this browser (`{kind: "browser"}`), which the chat uses when
//! nothing else is there: a newcomer can chat without configuring anything, on
//! any static host.

use leptos::prelude::*;
use leptos::task::spawn_local;

use std::rc::Rc;

use crate::RuntimeStart;
use crate::chat_model::{
    KeyChange, LocalLook, Origin, ProviderEntry, STORAGE_KEY, SavedProvider, StoredProviders,
    all_providers, parse_local_provider, selected_provider, sibling_url,
};
use crate::runtime::Runtime;
use crate::storage::{StorageSignals, Stores};
use crate::storage_model::ErrorText;
use kiln_types::chat::ModelInfo;
use kiln_types::records::ConfigView;
use kiln_types::runtime::{Problem, ToRuntime};
use serde_json::{Value, json};

/// The file `cargo xtask serve` writes beside the page when it started the local model.
const LOCAL_PROVIDER_FILE: &str = "local-provider.json";

/// What an embedded chat (the widget) may offer, from its deployment's settings
/// (`widget.json`): the app offers everything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Reach {
    /// Kiln's own model in this browser.
    pub(crate) browser: bool,
    /// The visitor's own providers and keys.
    pub(crate) visitor: bool,
    /// The site's endpoint, listed where the app lists the local model.
    pub(crate) site: Option<SavedProvider>,
    /// What the chat uses until the visitor picks.
    pub(crate) first: Origin,
}

impl Reach {
    fn offers(&self, origin: Origin) -> bool {
        match origin {
            Origin::Saved => self.visitor,
            Origin::Local => self.site.is_some(),
            Origin::InBrowser => self.browser,
        }
    }
}

/// The providers the page knows and the one the chat uses, shared by the panel and the chat.
#[derive(Clone, Copy)]
pub(crate) struct ProviderStore {
    /// The person's own, as stored, by name.
    saved: RwSignal<Vec<SavedProvider>>,
    /// The local model, when `local-provider.json` announced one. Never stored: its port
    /// changes from one `cargo xtask serve` to the next, so it is read afresh at each load.
    /// Until the look is over the in-browser model is not offered either.
    local: RwSignal<LocalLook>,
    /// The person's pick, by name.
    picked: RwSignal<Option<String>>,
    /// A problem with the stored list or with `local-provider.json`, shown above the chat.
    pub(crate) notice: RwSignal<Option<String>>,
    /// Whether the stored list has been read (the chat waits for it).
    pub(crate) loaded: RwSignal<bool>,
    /// Where the list is kept, once storage is open; `None` keeps it in the page only.
    stores: RwSignal<Option<Stores>, LocalStorage>,
    /// This tab's runtime worker, which runs the turns and asks for model lists.
    runtime: StoredValue<RuntimeStart, LocalStorage>,
    /// What an embedded chat may offer; `None` in the app.
    reach: StoredValue<Option<Reach>>,
}

impl ProviderStore {
    /// Reads the stored list once storage is open (importing an earlier Kiln's
    /// `localStorage` list the first time), follows the configuration's changes, and starts
    /// looking for the local model.
    pub(crate) fn load(
        storage: StorageSignals,
        runtime: RuntimeStart,
        reach: Option<Reach>,
    ) -> Self {
        let store = Self {
            saved: RwSignal::new(Vec::new()),
            local: RwSignal::new(LocalLook::Looking),
            picked: RwSignal::new(None),
            notice: RwSignal::new(None),
            loaded: RwSignal::new(false),
            stores: storage.stores,
            runtime: StoredValue::new_local(runtime),
            reach: StoredValue::new(reach.clone()),
        };
        match reach {
            None => store.look_for_local_model(),
            Some(reach) => store.local.set(match reach.site {
                Some(site) => LocalLook::Found(site),
                None => LocalLook::Absent,
            }),
        }
        let imported = StoredValue::new(false);
        // The stored configuration, read again at each of its changes; the answer to an
        // older read is dropped by the resource.
        let config = LocalResource::new(move || {
            let settled = storage.settled.get();
            storage.revisions.config.track();
            let stores = storage.stores.get();
            async move {
                if !settled {
                    return None;
                }
                let Some(stores) = stores else {
                    return Some(Err(
                        "Storage is not available: providers you add here last until the page \
                         is reloaded."
                            .to_owned(),
                    ));
                };
                let mut import_notice = None;
                if !imported.get_value() {
                    imported.set_value(true);
                    import_notice = import_legacy(&stores).await;
                }
                Some(
                    read_config(&stores)
                        .await
                        .map(|mut loaded| {
                            loaded.notice = import_notice.or(loaded.notice);
                            loaded
                        })
                        .map_err(|error| {
                            ErrorText::with_prefix(
                                "The saved providers could not be read: ",
                                &error,
                            )
                            .sentence()
                        }),
                )
            }
        });
        // The page's copy follows each answer; it also changes at once when the person
        // saves, picks or removes here.
        Effect::new(move || {
            let Some(Some(read)) = config.get() else {
                return;
            };
            match read {
                Ok(loaded) => {
                    store.saved.set(loaded.providers);
                    store.picked.set(loaded.selected);
                    if let Some(notice) = loaded.notice {
                        store.notice.set(Some(notice));
                    }
                }
                Err(notice) => store.notice.set(Some(notice)),
            }
            store.loaded.set(true);
        });
        store
    }

    pub(crate) fn entries(&self) -> Vec<ProviderEntry> {
        let mut entries = self
            .saved
            .with(|saved| self.local.with(|local| all_providers(saved, local)));
        self.reach.with_value(|reach| {
            if let Some(reach) = reach {
                entries.retain(|entry| reach.offers(entry.origin));
            }
        });
        entries
    }

    pub(crate) fn current(&self) -> Option<ProviderEntry> {
        let entries = self.entries();
        let first = self
            .reach
            .with_value(|reach| reach.as_ref().map(|reach| reach.first));
        self.picked.with(|picked| {
            let picked = picked
                .as_deref()
                .filter(|name| entries.iter().any(|entry| entry.provider.name == *name));
            match (picked, first) {
                (None, Some(first)) => entries
                    .iter()
                    .find(|entry| entry.origin == first)
                    .or_else(|| selected_provider(&entries, None))
                    .cloned(),
                _ => selected_provider(&entries, picked).cloned(),
            }
        })
    }

    /// This tab's runtime worker, once it has started.
    pub(crate) async fn runtime(&self) -> Result<Rc<Runtime>, Problem> {
        self.runtime
            .get_value()
            .await
            .map_err(crate::storage::runtime_problem)
    }

    /// Reads the person's saved providers.
    pub(crate) fn with_saved<T>(&self, read: impl FnOnce(&[SavedProvider]) -> T) -> T {
        self.saved.with_untracked(|saved| read(saved))
    }

    /// The models `provider` (a `ProviderConfig` as the protocol carries it) lists.
    pub(crate) async fn models(&self, provider: Value) -> Result<Vec<ModelInfo>, Problem> {
        let runtime = self.runtime().await?;
        let value = runtime
            .call(move |id| ToRuntime::Models { id, provider })
            .await
            .unwrap_or_else(|_| {
                Err(crate::storage::runtime_problem(
                    "the runtime worker went away",
                ))
            })?;
        serde_json::from_value(value).map_err(|error| {
            crate::storage::runtime_problem(format!(
                "the runtime worker's model list is not readable: {error}"
            ))
        })
    }

    /// Deletes the in-browser model's cached files (they download again at the next turn
    /// that asks for it). `Err` is what the worker said.
    pub(crate) async fn clear_model(&self) -> Result<(), Problem> {
        let runtime = self.runtime().await?;
        runtime
            .call(|id| ToRuntime::ClearModel { id })
            .await
            .unwrap_or_else(|_| {
                Err(crate::storage::runtime_problem(
                    "the runtime worker went away",
                ))
            })
            .map(|_| ())
    }

    /// The `<option>`s of a provider select (the chat's and Settings'): each
    /// provider with its model, the one the chat uses selected.
    pub(crate) fn options(&self) -> impl IntoView + use<> {
        let current = self.current().map(|entry| entry.provider.name);
        self.entries()
            .into_iter()
            .map(|entry| {
                let name = entry.provider.name;
                let label = format!("{} — {}", name, entry.provider.model);
                let selected = current.as_deref() == Some(name.as_str());
                view! { <option value=name selected=selected>{label}</option> }
            })
            .collect_view()
    }

    pub(crate) fn pick(&self, name: String) {
        self.picked.set(Some(name.clone()));
        let store = *self;
        spawn_local(async move {
            if let Err(error) = store.select(Some(name)).await {
                store.notice.set(Some(
                    ErrorText::with_prefix("The chosen provider was not kept: ", &error).sentence(),
                ));
            }
        });
    }

    /// Writes the pick into the settings, over another tab's (the pick is this person's
    /// latest word).
    async fn select(&self, name: Option<String>) -> Result<(), Problem> {
        match self.stores.get_untracked() {
            Some(stores) => stores.act("config.select", json!({"provider": name})).await,
            None => Ok(()),
        }
    }

    /// Saves `provider` in place of `replacing` (or as a new one) and picks it for the chat:
    /// the person just set it up. `Err` is what the store said.
    pub(crate) async fn put(
        &self,
        replacing: Option<String>,
        mut provider: SavedProvider,
        key: KeyChange,
    ) -> Result<(), ErrorText> {
        let name = provider.name.clone();
        if let Some(stores) = self.stores.get_untracked() {
            // The worker writes the record (removing the one it renames) and picks it.
            let args = provider.put_args(&key, replacing.as_deref());
            #[derive(serde::Deserialize)]
            struct Put {
                version: u64,
            }
            let put: Put = stores
                .op("config.provider.put", args)
                .await
                .map_err(|error| {
                    ErrorText::with_prefix(&format!("`{name}` was not saved: "), &error)
                })?;
            provider.version = put.version;
            provider.stored = true;
            provider.key = None;
            // "Saving a provider replaces them": an earlier Kiln's unreadable list goes.
            forget_legacy();
        }
        self.saved.update(|saved| {
            if let Some(old) = replacing.as_deref() {
                saved.retain(|p| p.name != old);
            }
            saved.retain(|p| p.name != provider.name);
            saved.push(provider);
            saved.sort_by(|a, b| a.name.cmp(&b.name));
        });
        self.picked.set(Some(name));
        Ok(())
    }

    pub(crate) async fn remove(&self, name: String) -> Result<(), ErrorText> {
        let version = self
            .saved
            .with_untracked(|saved| saved.iter().find(|p| p.name == name).map(|p| p.version));
        if let (Some(stores), Some(version)) = (self.stores.get_untracked(), version) {
            stores
                .act(
                    "config.provider.remove",
                    json!({"name": name, "version": version}),
                )
                .await
                .map_err(|error| {
                    ErrorText::with_prefix(&format!("`{name}` was not removed: "), &error)
                })?;
        }
        self.saved
            .update(|saved| saved.retain(|provider| provider.name != name));
        if self
            .picked
            .with_untracked(|picked| picked.as_deref() == Some(name.as_str()))
        {
            self.picked.set(None);
        }
        Ok(())
    }

    fn look_for_local_model(self) {
        let Some(url) = web_sys::window()
            .and_then(|window| window.location().href().ok())
            .map(|href| sibling_url(&href, LOCAL_PROVIDER_FILE))
        else {
            self.local.set(LocalLook::Absent);
            return;
        };
        // The query keeps a cached copy from being used: the port changes between serves.
        let url = format!("{url}?t={}", js_sys::Math::random().to_bits());
        spawn_local(async move {
            // No file (404, the usual case) says nothing. Nor does a host that answers every
            // path with the page itself: only something that looks like JSON is read.
            let mut found = LocalLook::Absent;
            if let Ok(Some(text)) = fetch_text(&url).await
                && text.trim_start().starts_with('{')
            {
                match parse_local_provider(&text) {
                    Ok(provider) => found = LocalLook::Found(provider),
                    Err(problem) => self
                        .notice
                        .set(Some(format!("The local model was not added: {problem}."))),
                }
            }
            self.local.set(found);
        });
    }
}

/// The body of a `GET` of `url` (a file beside the page): `None` when it answers 404,
/// `Err` naming why when it cannot be had otherwise.
pub(crate) async fn fetch_text(url: &str) -> Result<Option<String>, String> {
    use wasm_bindgen::JsCast as _;
    let window = web_sys::window().ok_or("no window")?;
    let response = wasm_bindgen_futures::JsFuture::from(window.fetch_with_str(url))
        .await
        .map_err(|error| format!("could not be fetched: {}", crate::error_text(&error)))?
        .dyn_into::<web_sys::Response>()
        .map_err(|_| "no response".to_owned())?;
    match response.status() {
        404 => return Ok(None),
        200 => {}
        status => return Err(format!("answered HTTP {status}")),
    }
    let body = response.text().map_err(|_| "no body".to_owned())?;
    let text = wasm_bindgen_futures::JsFuture::from(body)
        .await
        .map_err(|error| format!("its body could not be read: {}", crate::error_text(&error)))?;
    Ok(text.as_string())
}

/// What the configuration holds for the chat.
#[derive(Clone)]
struct Loaded {
    providers: Vec<SavedProvider>,
    selected: Option<String>,
    /// Records that could not be used, in a sentence.
    notice: Option<String>,
}

/// The providers (by name) and the pick; a record of an unknown kind is left out with a
/// notice.
async fn read_config(stores: &Stores) -> Result<Loaded, Problem> {
    let config: ConfigView = stores.op("config.get", json!({})).await?;
    let mut providers = Vec::new();
    let mut problems = Vec::new();
    for info in config.providers {
        match SavedProvider::from_info(info) {
            Ok(provider) => providers.push(provider),
            Err(problem) => problems.push(problem),
        }
    }
    Ok(Loaded {
        providers,
        selected: config.settings.selected_provider,
        notice: (!problems.is_empty()).then(|| problems.join(" ")),
    })
}

/// Imports the list an earlier Kiln kept in `localStorage`, when the configuration has no
/// providers yet, then removes it. Answers a notice when there is something to say: the old
/// text could not be read (it stays until a provider is saved), or the store refused.
async fn import_legacy(stores: &Stores) -> Option<String> {
    let text = match read_legacy() {
        Ok(Some(text)) => text,
        Ok(None) => return None,
        Err(notice) => return Some(notice),
    };
    match stores.op::<ConfigView>("config.get", json!({})).await {
        Ok(config) if config.providers.is_empty() => {}
        // The store has its own list (another tab imported it, or it was made here).
        Ok(_) => {
            forget_legacy();
            return None;
        }
        Err(error) => {
            return Some(
                ErrorText::with_prefix("The saved providers could not be read: ", &error)
                    .sentence(),
            );
        }
    }
    let stored = match StoredProviders::parse(&text) {
        Ok(stored) => stored,
        Err(notice) => return Some(notice),
    };
    for provider in &stored.providers {
        let key = match &provider.key {
            Some(key) => KeyChange::Typed(key.clone()),
            None => KeyChange::None,
        };
        match stores
            .act("config.provider.put", provider.put_args(&key, None))
            .await
        {
            // Another tab imported the same list at the same time.
            Ok(()) => {}
            Err(error) if error.code.as_deref() == Some("conflict") => {}
            Err(error) => {
                return Some(
                    ErrorText::with_prefix(
                        &format!(
                            "The providers kept by an earlier Kiln (`localStorage` key \
                             `{STORAGE_KEY}`) were not imported: "
                        ),
                        &error,
                    )
                    .sentence(),
                );
            }
        }
    }
    // Each put picked its provider; the earlier Kiln's own pick wins, else none (another
    // tab's pick, written since, would stand: this only runs when the list was empty).
    let _ = stores
        .act("config.select", json!({"provider": stored.selected}))
        .await;
    forget_legacy();
    None
}

// An earlier Kiln kept the list, keys included, in this browser's `localStorage`. It is read
// once to import it into the configuration and then removed.
fn local_storage() -> Result<web_sys::Storage, String> {
    let window = web_sys::window().ok_or("there is no window")?;
    match window.local_storage() {
        Ok(Some(storage)) => Ok(storage),
        Ok(None) => Err("this browser offers no `localStorage`".to_owned()),
        Err(error) => Err(crate::error_text(&error)),
    }
}

fn read_legacy() -> Result<Option<String>, String> {
    let problem = |why: String| {
        format!(
            "The providers an earlier Kiln kept (`localStorage` key `{STORAGE_KEY}`) could not \
             be read ({why}); they were not imported."
        )
    };
    local_storage()
        .map_err(problem)?
        .get_item(STORAGE_KEY)
        .map_err(|error| problem(crate::error_text(&error)))
}

fn forget_legacy() {
    if let Ok(storage) = local_storage() {
        let _ = storage.remove_item(STORAGE_KEY);
    }
}

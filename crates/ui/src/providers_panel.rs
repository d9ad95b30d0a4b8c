//! The Providers panel: the list of providers the chat can use (the person's,
//! kept in the workspace's configuration, the local model `cargo xtask serve`
//! announced, and the in-browser model, whose cached files it can delete), and
//! the form that adds or edits one: its kind and address, a key
//! that is never shown again once saved, the model typed or picked from the
//! provider's own list, "Test connection" and "Load models" through the runtime
//! worker.

use crate::said::said;
use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::chat_model::{KeptKey, Origin, ProviderForm, SavedProvider};
use crate::provider_store::ProviderStore;
use crate::storage_model::ErrorText;
use kiln_types::chat::{ModelInfo, ProviderKind};
use kiln_types::runtime::Problem;

/// What a status line under the form says.
#[derive(Clone, Debug, PartialEq)]
struct Status {
    tone: &'static str,
    text: String,
    hint: Option<String>,
}

impl Status {
    fn ok(text: impl Into<String>) -> Self {
        Self {
            tone: "ok",
            text: text.into(),
            hint: None,
        }
    }

    fn working(text: impl Into<String>) -> Self {
        Self {
            tone: "working",
            text: text.into(),
            hint: None,
        }
    }

    fn failure(text: impl Into<String>) -> Self {
        Self {
            tone: "failure",
            text: text.into(),
            hint: None,
        }
    }

    fn from_store(error: ErrorText) -> Self {
        Self {
            tone: "failure",
            text: error.message,
            hint: error.hint,
        }
    }

    fn from_error(before: &str, error: &Problem) -> Self {
        Self::from_store(ErrorText::with_prefix(before, error))
    }
}

/// Why the model list is asked for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ListFor {
    /// "Load models": fill the model choice.
    Choice,
    /// "Test connection": say whether the provider answers.
    Test,
    /// "Save" without a model: pick the first listed, then save.
    Save,
}

/// The form's fields and state, and what its buttons do. Copy: every
/// button holds one.
#[derive(Clone, Copy)]
struct Form {
    store: ProviderStore,
    name: RwSignal<String>,
    kind: RwSignal<ProviderKind>,
    base_url: RwSignal<String>,
    key: RwSignal<String>,
    /// The key of the provider being edited: never shown, only "key set".
    kept_key: RwSignal<Option<KeptKey>>,
    model: RwSignal<String>,
    /// The provider's model list, once loaded; without it the model is typed.
    models: RwSignal<Option<Vec<String>>>,
    /// The name of the provider being edited, if one is.
    editing: RwSignal<Option<String>>,
    status: RwSignal<Option<Status>>,
    /// One request at a time: a second click while the list loads would race the first.
    busy: RwSignal<bool>,
    name_input: NodeRef<leptos::html::Input>,
}

impl Form {
    fn new(store: ProviderStore) -> Self {
        Self {
            store,
            name: RwSignal::new(String::new()),
            kind: RwSignal::new(ProviderKind::OpenAi),
            base_url: RwSignal::new(String::new()),
            key: RwSignal::new(String::new()),
            kept_key: RwSignal::new(None),
            model: RwSignal::new(String::new()),
            models: RwSignal::new(None),
            editing: RwSignal::new(None),
            status: RwSignal::new(None),
            busy: RwSignal::new(false),
            name_input: NodeRef::new(),
        }
    }

    /// What is typed now.
    fn typed(self) -> ProviderForm {
        ProviderForm {
            name: self.name.get_untracked(),
            kind: Some(self.kind.get_untracked()),
            base_url: self.base_url.get_untracked(),
            key: self.key.get_untracked(),
            kept_key: self.kept_key.get_untracked(),
            model: self.model.get_untracked(),
        }
    }

    fn reset(self) {
        self.name.set(String::new());
        self.base_url.set(String::new());
        self.key.set(String::new());
        self.kept_key.set(None);
        self.model.set(String::new());
        self.models.set(None);
        self.editing.set(None);
    }

    /// Checks `form` and saves it in place of the provider being edited.
    fn commit(self, form: ProviderForm) {
        let replacing = self.editing.get_untracked();
        let checked = self
            .store
            .with_saved(|saved| form.check(saved, replacing.as_deref()));
        let (provider, key) = match checked {
            Ok(checked) => checked,
            Err(problem) => {
                self.status.set(Some(Status::failure(problem)));
                return;
            }
        };
        let said = format!(
            "Saved `{}` ({}, model `{}`); the chat uses it now.",
            provider.name,
            provider.kind.label(),
            provider.model
        );
        self.busy.set(true);
        self.status.set(Some(Status::working(format!(
            "Saving `{}`…",
            provider.name
        ))));
        spawn_local(async move {
            match self.store.put(replacing, provider, key).await {
                Ok(()) => {
                    self.reset();
                    self.status.set(Some(Status::ok(said)));
                }
                // The form keeps what was typed: nothing is lost.
                Err(error) => self.status.set(Some(Status::from_store(error))),
            }
            self.busy.set(false);
        });
    }

    /// Asks the provider for its models, for `purpose`.
    fn list_models(self, purpose: ListFor) {
        if self.busy.get_untracked() {
            return;
        }
        let form = self.typed();
        let provider = form.wire();
        self.busy.set(true);
        self.status.set(Some(Status::working(format!(
            "Asking {} for its models…",
            form.base_url()
        ))));
        spawn_local(async move {
            let listed = self.store.models(provider).await;
            // Before a save goes on (which holds `busy` itself until it is written).
            self.busy.set(false);
            match listed {
                Ok(list) => self.listed(purpose, form, list),
                Err(error) => {
                    self.models.set(None);
                    let before = match purpose {
                        ListFor::Save => {
                            "No model was given and the model list could not be loaded, so \
                             nothing was saved: type a model id. "
                        }
                        ListFor::Choice => "The model list could not be loaded (type a model id): ",
                        ListFor::Test => "",
                    };
                    self.status.set(Some(Status::from_error(before, &error)));
                }
            }
        });
    }

    /// The provider listed its models: offer them, and go on with `purpose`.
    fn listed(self, purpose: ListFor, form: ProviderForm, list: Vec<ModelInfo>) {
        let ids: Vec<String> = list.into_iter().map(|model| model.id).collect();
        let count = ids.len();
        let plural = if count == 1 { "" } else { "s" };
        if let Some(first) = ids.first()
            && !ids.contains(&self.model.get_untracked())
        {
            self.model.set(first.clone());
        }
        self.models.set((!ids.is_empty()).then_some(ids));
        match purpose {
            ListFor::Test => self.status.set(Some(Status::ok(format!(
                "Connected: {count} model{plural}"
            )))),
            ListFor::Choice => self
                .status
                .set(Some(Status::ok(format!("{count} model{plural} listed.")))),
            ListFor::Save => self.commit(ProviderForm {
                model: self.model.get_untracked(),
                ..form
            }),
        }
    }

    fn save(self) {
        let form = self.typed();
        if form.model.trim().is_empty() && !form.name.trim().is_empty() {
            self.list_models(ListFor::Save);
        } else {
            self.commit(form);
        }
    }

    /// Fills the form with `provider` to edit it (its key is kept, not shown).
    fn edit(self, provider: SavedProvider) {
        self.name.set(provider.name.clone());
        self.kind.set(provider.kind);
        self.base_url.set(provider.base_url.clone());
        self.key.set(String::new());
        self.kept_key.set(provider.has_key.then(|| KeptKey {
            name: provider.name.clone(),
            kind: provider.kind,
            base_url: provider.base_url.clone(),
            stored: provider.stored,
            key: provider.key.clone(),
        }));
        self.model.set(provider.model);
        self.models.set(None);
        self.editing.set(Some(provider.name));
        self.status.set(None);
        if let Some(input) = self.name_input.get_untracked() {
            let _ = input.focus();
        }
    }

    /// Deletes the in-browser model's cached files.
    fn clear_model(self) {
        self.status.set(Some(Status::working(
            "Deleting the in-browser model's cached files\u{2026}",
        )));
        spawn_local(async move {
            match self.store.clear_model().await {
                Ok(()) => self.status.set(Some(Status::ok(
                    "The in-browser model's cached files were deleted; they download again at \
                     its next message.",
                ))),
                Err(error) => self.status.set(Some(Status::from_error(
                    "The in-browser model's cached files were not deleted: ",
                    &error,
                ))),
            }
        });
    }

    fn remove(self, name: String) {
        spawn_local(async move {
            match self.store.remove(name.clone()).await {
                Ok(()) => {
                    if self
                        .editing
                        .with_untracked(|editing| editing.as_deref() == Some(name.as_str()))
                    {
                        self.reset();
                    }
                    self.status
                        .set(Some(Status::ok(format!("Removed `{name}`."))));
                }
                Err(error) => self.status.set(Some(Status::from_store(error))),
            }
        });
    }

    /// What the key line says: typed, kept (and whether it goes where the form
    /// now points), or none.
    fn key_state(self) -> &'static str {
        if self.key.with(|key| !key.trim().is_empty()) {
            "a new key is typed"
        } else if self.kept_key.with(Option::is_some) {
            // The form's own rule: a kept key goes only where it was saved for (read
            // tracked, so the line follows the kind and the address as they change).
            let applies = ProviderForm {
                kind: Some(self.kind.get()),
                base_url: self.base_url.get(),
                kept_key: self.kept_key.get(),
                ..ProviderForm::default()
            }
            .kept_key_applies()
            .is_some();
            if applies {
                "key set (leave empty to keep it)"
            } else {
                "the saved key is not sent to this kind or address: type it again"
            }
        } else {
            "no key"
        }
    }
}

/// The provider list and the form that adds or edits one.
#[component]
pub(crate) fn ProvidersPanel(store: ProviderStore) -> impl IntoView {
    let form = Form::new(store);
    view! {
        <details class="providers" data-testid="providers">
            // The count is of the list it heads, the built-in model included.
            <summary>{move || format!("Providers ({})", store.entries().len())}</summary>
            <ul class="provider-list" data-testid="provider-list">{move || provider_rows(form)}</ul>
            <ProviderFormView form=form />
            <p class="hint">
                "Keys are kept in this browser's storage and sent only to their own provider. "
                "The provider must allow this page's origin (CORS)."
            </p>
        </details>
    }
}

/// Each provider with its kind, address, model and key state; the person's
/// own can be edited and removed; the in-browser model's cached files deleted.
fn provider_rows(form: Form) -> impl IntoView {
    form.store
        .entries()
        .into_iter()
        .map(|entry| {
            let provider = entry.provider;
            let key_state = if provider.has_key { "key set" } else { "no key" };
            let actions = match entry.origin {
                Origin::InBrowser => return in_browser_row(form, provider),
                Origin::Local => view! {
                    <span class="hint">"from " <code>"cargo xtask serve"</code> ", read at each load"</span>
                }
                .into_any(),
                Origin::Saved => {
                let edit_label = format!("Edit {}", provider.name);
                let remove_label = format!("Remove {}", provider.name);
                let for_edit = provider.clone();
                let for_remove = provider.name.clone();
                view! {
                    <button type="button" class="secondary small" aria-label=edit_label data-testid="provider-edit" on:click=move |_| form.edit(for_edit.clone())>"Edit"</button>
                    <button type="button" class="secondary small" aria-label=remove_label data-testid="provider-remove" on:click=move |_| form.remove(for_remove.clone())>"Remove"</button>
                }
                .into_any()
                }
            };
            view! {
                <li data-testid="provider-item" data-name=provider.name.clone()>
                    <strong>{provider.name.clone()}</strong>
                    " · "{provider.kind.label()}" · "<code>{provider.base_url.clone()}</code>
                    " · model "<code>{provider.model.clone()}</code>
                    " · "<span data-testid="provider-key-state">{key_state}</span>" "
                    {actions}
                </li>
            }
            .into_any()
        })
        .collect_view()
}

/// Kiln's own model: built in, so not edited or removed; its files, once downloaded, are
/// kept in this browser until deleted here.
fn in_browser_row(form: Form, provider: SavedProvider) -> AnyView {
    view! {
        <li data-testid="provider-builtin" data-name=provider.name.clone()>
            <strong>{provider.name.clone()}</strong>
            " · runs in this browser, no key, no server · model "<code>{provider.model.clone()}</code>
            " · built in: downloaded at its first message, then kept in this browser "
            <button type="button" class="secondary small" data-testid="provider-clear-model"
                on:click=move |_| form.clear_model()>"Clear cached model"</button>
        </li>
    }
    .into_any()
}

/// The form: name, kind, address, key, model, and its buttons and status line.
#[component]
fn ProviderFormView(form: Form) -> impl IntoView {
    let Form {
        name,
        kind,
        base_url,
        key,
        kept_key,
        editing,
        status,
        busy,
        ..
    } = form;
    let kind_options = move || {
        ProviderKind::ALL
            .into_iter()
            .map(|option| {
                view! {
                    <option value=option.as_str() selected=move || kind.get() == option>{option.label()}</option>
                }
            })
            .collect_view()
    };
    view! {
        <form class="provider-form" data-testid="provider-form" on:submit=move |event| { event.prevent_default(); form.save(); }>
            <fieldset>
                <legend>{move || match editing.get() {
                    Some(name) => format!("Edit `{name}`"),
                    None => "Add a provider".to_owned(),
                }}</legend>
                <label for="provider-name">"Name"</label>
                <input id="provider-name" data-testid="provider-name" node_ref=form.name_input autocomplete="off"
                    placeholder="e.g. OpenAI" prop:value=name on:input=move |event| name.set(event_target_value(&event)) />
                <label for="provider-kind">"Kind"</label>
                <select id="provider-kind" data-testid="provider-kind" on:change=move |event| {
                    if let Some(parsed) = ProviderKind::parse(&event_target_value(&event)) {
                        kind.set(parsed);
                        form.models.set(None);
                    }
                }>{kind_options}</select>
                <label for="provider-base-url">"Base URL"</label>
                <input id="provider-base-url" data-testid="provider-base-url" type="url" autocomplete="off" spellcheck="false"
                    placeholder=move || kind.get().default_base_url()
                    prop:value=base_url on:input=move |event| base_url.set(event_target_value(&event)) />
                <label for="provider-key">"API key"</label>
                <span class="key-field">
                    <input id="provider-key" data-testid="provider-key" type="password" autocomplete="off" spellcheck="false"
                        aria-describedby="provider-key-state"
                        placeholder=move || if kept_key.with(Option::is_some) { "•••• (kept)" } else { "none needed for local servers" }
                        prop:value=key on:input=move |event| key.set(event_target_value(&event)) />
                    <span id="provider-key-state" class="hint" data-testid="provider-form-key-state">{move || form.key_state()}</span>
                    {move || kept_key.with(Option::is_some).then(|| view! {
                        <button type="button" class="secondary small" data-testid="provider-forget-key" on:click=move |_| kept_key.set(None)>"Forget key"</button>
                    })}
                </span>
                <label for="provider-model">"Model"</label>
                <span class="model-field">
                    {move || model_field(form)}
                    <button type="button" class="secondary small" data-testid="provider-load-models" disabled=busy on:click=move |_| form.list_models(ListFor::Choice)>"Load models"</button>
                </span>
            </fieldset>
            <div class="actions">
                <button type="submit" data-testid="provider-save" disabled=busy>"Save provider"</button>
                <button type="button" class="secondary" data-testid="provider-test" disabled=busy on:click=move |_| form.list_models(ListFor::Test)>"Test connection"</button>
                {move || editing.with(Option::is_some).then(|| view! {
                    <button type="button" class="secondary" data-testid="provider-cancel" on:click=move |_| { form.reset(); status.set(None); }>"Cancel edit"</button>
                })}
            </div>
            <p class="provider-status" data-testid="provider-status" role="status">
                {move || status.get().map(|status| view! {
                    <span class=status.tone>{said(status.text)}</span>
                    {status.hint.map(|hint| view! { <span class="hint">{said(hint)}</span> })}
                })}
            </p>
        </form>
    }
}

/// The model: a choice of the listed models once they are loaded, else typed.
fn model_field(form: Form) -> AnyView {
    let model = form.model;
    match form.models.get() {
        Some(list) => {
            let options = list
                .into_iter()
                .map(|id| {
                    let current = id.clone();
                    view! { <option value=id.clone() selected=move || model.with(|model| *model == current)>{id.clone()}</option> }
                })
                .collect_view();
            view! {
                <select id="provider-model" data-testid="provider-model" on:change=move |event| model.set(event_target_value(&event))>
                    {options}
                </select>
            }
            .into_any()
        }
        None => view! {
            <input id="provider-model" data-testid="provider-model" placeholder="a model id, or Load models"
                autocomplete="off" spellcheck="false"
                prop:value=model on:input=move |event| model.set(event_target_value(&event)) />
        }
        .into_any(),
    }
}

//! The workspace's storage as the page holds it: opened once at start
//! (IndexedDB `kiln-default` for records, OPFS `default` for files), the
//! stores above it, the change feed turned into one revision signal per
//! panel, and the banner that says when storage could not be opened. The
//! rest of the page works without storage; runs then go without its tools.

use std::rc::Rc;

use futures::future::LocalBoxFuture;
use leptos::prelude::*;
use leptos::task::spawn_local;

use kiln_store::config::Config;
use kiln_store::custody::Custody;
use kiln_store::durable::DurableMemory;
use kiln_store::files::FileTree;
use kiln_store::history::History;
use kiln_store::{Backend, Change, Subscription};

use crate::storage_model::{ErrorText, affected, format_time};

/// The one workspace the page has, for now.
pub(crate) const WORKSPACE: &str = "default";
/// Its IndexedDB database.
pub(crate) const DATABASE: &str = "kiln-default";

/// The stores over the workspace's records, and who runs its jobs.
#[derive(Clone)]
pub(crate) struct Stores {
    pub backend: Rc<dyn Backend>,
    pub memory: DurableMemory,
    pub history: History,
    pub config: Config,
    /// The page's owner lock: the jobs it starts carry its id.
    pub custody: Rc<dyn Custody>,
}

impl Stores {
    fn new(backend: Rc<dyn Backend>, custody: Rc<dyn Custody>) -> Self {
        Self {
            memory: DurableMemory::new(backend.clone()),
            history: History::new(backend.clone()),
            config: Config::new(backend.clone()),
            backend,
            custody,
        }
    }
}

/// What opening found. Held for the page's life: it keeps the change feed
/// subscribed.
pub(crate) struct Opened {
    pub stores: Option<Stores>,
    pub files: Option<Rc<dyn FileTree>>,
    /// Why a half could not be opened.
    pub problems: Vec<ErrorText>,
    _feed: Option<Subscription>,
}

/// Bumped when a committed change (this tab's or another's) touches what a
/// panel shows; panels reload when theirs moves.
#[derive(Clone, Copy)]
pub(crate) struct Revisions {
    pub memories: RwSignal<u64>,
    pub jobs: RwSignal<u64>,
    pub run_entries: RwSignal<u64>,
    pub config: RwSignal<u64>,
    pub messages: RwSignal<u64>,
}

impl Revisions {
    fn new() -> Self {
        Self {
            memories: RwSignal::new(0),
            jobs: RwSignal::new(0),
            run_entries: RwSignal::new(0),
            config: RwSignal::new(0),
            messages: RwSignal::new(0),
        }
    }

    fn feed(self, changes: &[Change]) {
        let touched = affected(changes);
        let bump = |revision: RwSignal<u64>, yes: bool| {
            if yes {
                // The page may be going away (a signal disposed): nothing to refresh then.
                revision.try_update(|n| *n += 1);
            }
        };
        bump(self.memories, touched.memories);
        bump(self.jobs, touched.jobs);
        bump(self.run_entries, touched.run_entries);
        bump(self.config, touched.config);
        bump(self.messages, touched.messages);
    }
}

/// The page's storage, as the panels read it.
#[derive(Clone, Copy)]
pub(crate) struct StorageSignals {
    /// What opening found, kept while the page lives.
    opened: StoredValue<Option<Rc<Opened>>, LocalStorage>,
    pub stores: RwSignal<Option<Stores>, LocalStorage>,
    pub files: RwSignal<Option<Rc<dyn FileTree>>, LocalStorage>,
    /// Whether opening is over (whatever it found).
    pub settled: RwSignal<bool>,
    /// Why a half could not be opened, for the banner.
    pub problems: RwSignal<Vec<ErrorText>>,
    pub revisions: Revisions,
}

/// Opens the workspace's storage once, in the background.
pub(crate) fn open() -> StorageSignals {
    let signals = StorageSignals {
        opened: StoredValue::new_local(None),
        stores: RwSignal::new_local(None),
        files: RwSignal::new_local(None),
        settled: RwSignal::new(false),
        problems: RwSignal::new(Vec::new()),
        revisions: Revisions::new(),
    };
    let revisions = signals.revisions;
    let opening: LocalBoxFuture<'static, Rc<Opened>> = Box::pin(async move {
        let mut problems = Vec::new();
        let stores = match platform::open_backend(DATABASE).await {
            Ok((backend, custody)) => {
                let stores = Stores::new(backend, custody);
                // The runs a closed tab left `running` are over: say so first.
                if let Err(error) = stores.history.interrupt_abandoned(&*stores.custody).await {
                    problems.push(ErrorText::with_prefix(
                        "Runs left unfinished by a closed tab could not be marked interrupted: ",
                        &error,
                    ));
                }
                Some(stores)
            }
            Err(error) => {
                problems.push(ErrorText::with_prefix(
                    "Memory, history and settings cannot be kept: ",
                    &error,
                ));
                None
            }
        };
        let files = match platform::open_files(WORKSPACE).await {
            Ok(tree) => Some(tree),
            Err(error) => {
                problems.push(ErrorText::with_prefix(
                    "Workspace files cannot be kept: ",
                    &error,
                ));
                None
            }
        };
        let feed = stores.as_ref().map(|stores| {
            stores
                .backend
                .subscribe(Rc::new(move |changes: &[Change]| revisions.feed(changes)))
        });
        Rc::new(Opened {
            stores,
            files,
            problems,
            _feed: feed,
        })
    });
    spawn_local(async move {
        let opened = opening.await;
        signals.stores.set(opened.stores.clone());
        signals.files.set(opened.files.clone());
        signals.problems.set(opened.problems.clone());
        // Kept for the page's life: it holds the change feed's subscription.
        signals.opened.set_value(Some(opened));
        signals.settled.set(true);
    });
    signals
}

mod platform;

/// A moment in the person's time zone.
pub(crate) fn local_time(epoch_ms: u64) -> String {
    let offset = js_sys::Date::new_0().get_timezone_offset();
    format_time(epoch_ms, offset as i64)
}

/// The banner over the page when storage could not be opened.
#[component]
pub(crate) fn StorageBanner(storage: StorageSignals) -> impl IntoView {
    move || {
        let problems = storage.problems.get();
        (!problems.is_empty()).then(|| {
            let items = problems
                .into_iter()
                .map(|problem| view! { <ErrorLines error=problem /> })
                .collect_view();
            view! {
                <section class="storage-banner" data-testid="storage-banner" role="alert">
                    <h2>"Storage is not available"</h2>
                    {items}
                    <p class="hint">"Everything else works: programs run without the storage tools, and what you change lasts until the page is reloaded."</p>
                </section>
            }
        })
    }
}

/// A store error: its sentence, then its hint.
#[component]
pub(crate) fn ErrorLines(error: ErrorText) -> impl IntoView {
    view! {
        <p class="error-message" data-code=error.code>{error.message}</p>
        {error.hint.map(|hint| view! { <p class="hint error-hint">{hint}</p> })}
    }
}

/// An error in a panel, as an alert (`role="alert"`) under its `testid`.
pub(crate) fn error_alert(testid: &'static str, error: ErrorText) -> impl IntoView + use<> {
    view! {
        <div class="store-error" data-testid=testid role="alert">
            <ErrorLines error=error />
        </div>
    }
}

//! The workspace's storage as the page holds it: kept by this tab's runtime
//! worker (IndexedDB `kiln-default` for records, OPFS `default` for files),
//! reached here as storage operations over the runtime protocol; the change
//! feed turned into one revision signal per panel, and the banner that says
//! when storage could not be opened. The rest of the page works without
//! storage; runs then go without its tools.

use std::rc::Rc;

use crate::said::said;
use leptos::prelude::*;
use leptos::task::spawn_local;
use serde::de::DeserializeOwned;
use serde_json::Value;

use kiln_types::records::Change;
use kiln_types::runtime::Problem;

use crate::RuntimeStart;
use crate::runtime::Runtime;
use crate::storage_model::{ErrorText, affected, format_time};

/// The one workspace the page has, for now.
pub(crate) const WORKSPACE: &str = "default";

/// The workspace's stores, as the runtime worker serves them.
#[derive(Clone)]
pub(crate) struct Stores {
    runtime: Rc<Runtime>,
}

/// A problem of the page's own side of the protocol.
pub(crate) fn runtime_problem(message: impl Into<String>) -> Problem {
    Problem {
        bad_request: false,
        message: message.into(),
        code: Some("runtime".into()),
        hint: Some("reload the page".into()),
        status: None,
    }
}

impl Stores {
    /// Runs the storage operation `op` (`memory.list`, `files.read`, …; see
    /// `kiln_runtime::store_op`) and reads its answer as `T`.
    pub(crate) async fn op<T: DeserializeOwned>(
        &self,
        op: &str,
        args: Value,
    ) -> Result<T, Problem> {
        let answer = self
            .runtime
            .store(op, args)
            .await
            .map_err(|_| runtime_problem("the runtime worker went away"))??;
        serde_json::from_value(answer).map_err(|error| {
            runtime_problem(format!(
                "the runtime worker's answer to `{op}` is not readable: {error}"
            ))
        })
    }

    /// Runs `op` for its effect alone.
    pub(crate) async fn act(&self, op: &str, args: Value) -> Result<(), Problem> {
        self.op::<Value>(op, args).await.map(drop)
    }
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
    /// The workspace's files changed in a way the change feed does not
    /// carry (an import wrote some): bumped by whoever did it.
    pub files: RwSignal<u64>,
}

impl Revisions {
    fn new() -> Self {
        Self {
            memories: RwSignal::new(0),
            jobs: RwSignal::new(0),
            run_entries: RwSignal::new(0),
            config: RwSignal::new(0),
            messages: RwSignal::new(0),
            files: RwSignal::new(0),
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
    pub stores: RwSignal<Option<Stores>, LocalStorage>,
    /// Whether opening is over (whatever it found).
    pub settled: RwSignal<bool>,
    /// Why storage could not be opened, for the banner.
    pub problems: RwSignal<Vec<ErrorText>>,
    pub revisions: Revisions,
}

impl StorageSignals {
    /// Runs `act` with the stores (its future on this thread's executor),
    /// unless storage is unavailable.
    pub(crate) fn with_stores<F>(self, act: impl FnOnce(Stores) -> F)
    where
        F: Future<Output = ()> + 'static,
    {
        if let Some(stores) = self.stores.get_untracked() {
            spawn_local(act(stores));
        }
    }
}

/// Waits for the runtime worker to open the workspace, then follows its
/// change feed.
pub(crate) fn open(runtime: RuntimeStart) -> StorageSignals {
    let signals = StorageSignals {
        stores: RwSignal::new_local(None),
        settled: RwSignal::new(false),
        problems: RwSignal::new(Vec::new()),
        revisions: Revisions::new(),
    };
    let revisions = signals.revisions;
    spawn_local(async move {
        const LOST: &str = "Memory, history and settings cannot be kept: ";
        match runtime.await {
            Err(problem) => signals.problems.set(vec![ErrorText::with_prefix(
                LOST,
                &runtime_problem(problem),
            )]),
            Ok(runtime) => match runtime.storage.clone() {
                Some(problem) => signals
                    .problems
                    .set(vec![ErrorText::with_prefix(LOST, &problem)]),
                None => {
                    runtime.watch(Rc::new(move |changes: Value| {
                        if let Ok(changes) = serde_json::from_value::<Vec<Change>>(changes) {
                            revisions.feed(&changes);
                        }
                    }));
                    signals.stores.set(Some(Stores { runtime }));
                }
            },
        }
        signals.settled.set(true);
    });
    signals
}

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
        <p class="error-message" data-code=error.code>{said(error.message)}</p>
        {error.hint.map(|hint| view! { <p class="hint error-hint">{said(hint)}</p> })}
    }
}

/// What a panel loads through the runtime worker: the answer, `None` while
/// storage is unavailable, or the problem as the panel shows it. Loads are
/// `LocalResource`s, so an answer that arrives after a newer load began is
/// dropped by the resource.
pub(crate) type Loaded<T> = Result<Option<T>, ErrorText>;

/// A load's line under `<Transition>` and `<ErrorBoundary>`: "Loading…"
/// before the first answer only (a reload keeps what is shown until the new
/// answer is in), the problem as an alert under `error_testid`, or the line
/// `empty` finds to say about an answer (that it found nothing).
pub(crate) fn load_status<T>(
    resource: LocalResource<Loaded<T>>,
    error_testid: &'static str,
    empty_testid: &'static str,
    empty: impl Fn(&T) -> Option<String> + Copy + Send + Sync + 'static,
) -> impl IntoView
where
    T: Clone + Send + Sync + 'static,
{
    let line = move || {
        Suspend::new(async move {
            resource.await.map(|found| {
                found.as_ref().and_then(empty).map(|text| {
                    view! { <p class="hint" data-testid=empty_testid>{said(text)}</p> }
                })
            })
        })
    };
    view! {
        <Transition fallback=|| view! { <p class="hint loading" data-testid="loading">"Loading…"</p> }>
            <ErrorBoundary fallback=move |errors| error_alerts(error_testid, errors)>{line}</ErrorBoundary>
        </Transition>
    }
}

/// The first error an `<ErrorBoundary>` caught, as an alert.
fn error_alerts(testid: &'static str, errors: ArcRwSignal<Errors>) -> impl IntoView {
    move || {
        errors.with(|errors| {
            errors.iter().next().map(|(_, error)| {
                let text = (**error)
                    .downcast_ref::<ErrorText>()
                    .cloned()
                    .unwrap_or_else(|| ErrorText::plain(error.to_string()));
                error_alert(testid, text)
            })
        })
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

/// Reads the workspace's configuration when storage opens and again whenever
/// a tab changes it, and gives it to `apply` (a read that fails is left: the
/// next change reads again).
pub(crate) fn follow_config(
    storage: StorageSignals,
    apply: impl Fn(kiln_types::records::ConfigView) + Clone + 'static,
) {
    Effect::new(move |_| {
        storage.revisions.config.track();
        let Some(stores) = storage.stores.get() else {
            return;
        };
        let apply = apply.clone();
        spawn_local(async move {
            if let Ok(config) = stores
                .op::<kiln_types::records::ConfigView>("config.get", serde_json::json!({}))
                .await
            {
                apply(config);
            }
        });
    });
}

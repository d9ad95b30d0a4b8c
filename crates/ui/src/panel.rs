//! What the Agents and Skills views, an agent's schedules and Settings'
//! secrets share: their lists read from the workspace's configuration, the
//! line saying what the last action did (with Undo while a deleted record
//! can come back), the alerts saying why an action on the list or the form
//! failed, whether the form is open and whether its save is on its way, and
//! the storage check before anything is written. Written once, so that the
//! four say and do the same.

use std::future::Future;

use crate::said::said;
use leptos::ev::KeyboardEvent;
use leptos::prelude::*;
use leptos::task::spawn_local;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::storage::{Loaded, StorageSignals, Stores, error_alert};
use crate::storage_model::ErrorText;

/// The longest slug (`kiln_types::profile::check_slug`): an agent's handle,
/// a skill's name.
const MAX_SLUG: usize = 64;

/// The first of `BASE-copy`, `BASE-copy-2`, `BASE-copy-3`, … that nothing
/// in `taken` is, `BASE` cut to leave room for the ending: a duplicate's
/// slug (an agent's) or name (a skill's), still a slug.
pub(crate) fn copy_slug(base: &str, taken: &[String]) -> String {
    let mut n = 1_usize;
    loop {
        let ending = if n == 1 {
            "-copy".to_owned()
        } else {
            format!("-copy-{n}")
        };
        let stem: String = base.chars().take(MAX_SLUG - ending.len()).collect();
        let slug = format!("{}{ending}", stem.trim_end_matches('-'));
        if !taken.contains(&slug) {
            return slug;
        }
        n += 1;
    }
}

/// A list as the person types it (a skill's tools, a secret's origins):
/// commas or white space between, each item once, in the order typed.
pub(crate) fn typed_list(text: &str) -> Vec<String> {
    let mut items: Vec<String> = Vec::new();
    for item in text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|item| !item.is_empty())
    {
        if !items.iter().any(|known| known == item) {
            items.push(item.to_owned());
        }
    }
    items
}

/// The runtime's answer to `op` (`skills.list`), read once storage is open
/// and again at each change of the workspace's configuration (another
/// tab's too); `Ok(None)` without storage, a failure after `failed`'s words
/// (`The skills could not be read: `). The answer to an older read is
/// dropped by the resource.
pub(crate) fn config_read<T>(
    storage: StorageSignals,
    op: &'static str,
    failed: &'static str,
) -> LocalResource<Loaded<T>>
where
    T: DeserializeOwned + 'static,
{
    LocalResource::new(move || {
        let stores = storage.stores.get();
        storage.revisions.config.track();
        async move {
            let Some(stores) = stores else {
                return Ok(None);
            };
            stores
                .op::<T>(op, json!({}))
                .await
                .map(Some)
                .map_err(|problem| ErrorText::with_prefix(failed, &problem))
        }
    })
}

/// Focuses the element `id` on the next frame (once it is drawn).
pub(crate) fn focus_soon(id: &'static str) {
    request_animation_frame(move || {
        crate::focus_element(id);
    });
}

/// A form's keys: Escape cancels it (`on_cancel`).
pub(crate) fn escape_cancels(
    on_cancel: impl Fn() + Copy + 'static,
) -> impl Fn(KeyboardEvent) + Copy + 'static {
    move |event: KeyboardEvent| {
        if event.key() == "Escape" {
            event.prevent_default();
            on_cancel();
        }
    }
}

/// What tells one panel's line and alerts from another's.
#[derive(Clone, Copy)]
pub(crate) struct PanelNames {
    /// The status line's `data-testid` (`agents-status`).
    pub(crate) status: &'static str,
    /// The `data-testid` of the alert of an action on the list that failed
    /// (`agents-action-error`).
    pub(crate) action_error: &'static str,
    /// What the panel says when storage is not there to write to.
    pub(crate) unavailable: &'static str,
}

/// A record a panel deletes with Undo: how it is removed, written back and named.
pub(crate) trait Undoable: Clone + Send + Sync + 'static {
    /// The Undo button's id and `data-testid`: it takes the focus after a delete.
    const UNDO: &'static str;
    /// The element that takes the focus once Undo is done (the New button).
    const AFTER_UNDO: &'static str;
    /// The runtime's operation that removes it at the version read, and its arguments.
    fn remove_op(&self) -> (&'static str, Value);
    /// The operation that writes it back as a new record, and its arguments.
    fn restore_op(&self) -> (&'static str, Value);
    /// Its key, as a failure names it (`ada`).
    fn key(&self) -> &str;
    /// How the status line names it: its key (`` `tidy-data` ``), unless
    /// it has a name of its own (``Ada (`ada`)``).
    fn title(&self) -> String {
        format!("`{}`", self.key())
    }
}

/// A panel's state, as signals: what the last action did, the record it
/// deleted (`Deleted`: `()` for a panel without Undo), why an action or the
/// form failed, whether the form is open and whether it is being saved.
pub(crate) struct PanelState<Deleted: Send + Sync + 'static = ()> {
    status: RwSignal<Option<String>>,
    deleted: RwSignal<Option<Deleted>>,
    failure: RwSignal<Option<ErrorText>>,
    /// Why the form was not saved: its alert.
    pub(crate) form_failure: RwSignal<Option<ErrorText>>,
    /// A save is on its way: the form's Save waits.
    pub(crate) saving: RwSignal<bool>,
    /// Whether the form is shown.
    pub(crate) form_open: RwSignal<bool>,
    names: PanelNames,
}

impl<Deleted: Send + Sync + 'static> Clone for PanelState<Deleted> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<Deleted: Send + Sync + 'static> Copy for PanelState<Deleted> {}

impl<Deleted: Send + Sync + 'static> PanelState<Deleted> {
    /// A panel that has said nothing yet, its form closed.
    pub(crate) fn new(names: PanelNames) -> Self {
        Self {
            status: RwSignal::new(None),
            deleted: RwSignal::new(None),
            failure: RwSignal::new(None),
            form_failure: RwSignal::new(None),
            saving: RwSignal::new(false),
            form_open: RwSignal::new(false),
            names,
        }
    }

    /// The status line says `text`; the last failure and Undo go.
    pub(crate) fn say(self, text: String) {
        self.failure.set(None);
        self.deleted.set(None);
        self.status.set(Some(text));
    }

    /// An action on the list failed: the alert says why.
    pub(crate) fn failed(self, error: ErrorText) {
        self.failure.set(Some(error));
    }

    /// The form was not saved: its alert says why.
    pub(crate) fn form_failed(self, error: ErrorText) {
        self.form_failure.set(Some(error));
    }

    /// What the panel says when storage is not there.
    pub(crate) fn unavailable(self) -> ErrorText {
        ErrorText::plain(self.names.unavailable)
    }

    /// The stores to act on; when there are none, the alert says so.
    pub(crate) fn stores(self, storage: StorageSignals) -> Option<Stores> {
        let stores = storage.stores.get_untracked();
        if stores.is_none() {
            self.failed(self.unavailable());
        }
        stores
    }

    /// Opens the form (loaded beforehand) with no alert, the focus on `first`.
    pub(crate) fn open_form(self, first: &'static str) {
        self.form_failure.set(None);
        self.form_open.set(true);
        focus_soon(first);
    }

    /// Closes the form and its alert.
    pub(crate) fn close_form(self) {
        self.form_open.set(false);
        self.form_failure.set(None);
    }

    /// Starts a save, unless one is on its way: what `check` makes of the
    /// form, and the stores to write it to. A form that does not check, or
    /// no storage, is said in the form's alert and nothing starts.
    pub(crate) fn begin_save<Checked>(
        self,
        storage: StorageSignals,
        check: impl FnOnce() -> Result<Checked, String>,
    ) -> Option<(Stores, Checked)> {
        if self.saving.get_untracked() {
            return None;
        }
        let checked = match check() {
            Ok(checked) => checked,
            Err(why) => {
                self.form_failed(ErrorText::plain(why));
                return None;
            }
        };
        let Some(stores) = storage.stores.get_untracked() else {
            self.form_failed(self.unavailable());
            return None;
        };
        self.saving.set(true);
        self.form_failure.set(None);
        Some((stores, checked))
    }

    /// Waits for a save `begin_save` started; then the form may be saved again.
    pub(crate) async fn finish_save<Answer>(self, write: impl Future<Output = Answer>) -> Answer {
        let answer = write.await;
        self.saving.set(false);
        answer
    }

    /// The status line, with `undo` after what it says, and the alert of a
    /// failed action under it.
    fn lines(self, undo: impl IntoView + 'static) -> impl IntoView {
        let (status, failure, action_error) = (self.status, self.failure, self.names.action_error);
        view! {
            <div class="agents-status" data-testid=self.names.status role="status" aria-live="polite">
                {move || status.get().map(|text| view! { <span>{said(text)}</span> })}
                {undo}
            </div>
            {move || failure.get().map(|error| error_alert(action_error, error))}
        }
    }

    /// The status line and the alert of a failed action.
    pub(crate) fn status_line(self) -> impl IntoView {
        self.lines(())
    }
}

impl<Deleted: Undoable> PanelState<Deleted> {
    /// The status line with Undo while a deleted record can come back, and
    /// the alert of a failed action.
    pub(crate) fn status_line_with_undo(self, storage: StorageSignals) -> impl IntoView {
        let deleted = self.deleted;
        self.lines(move || {
            deleted.with(Option::is_some).then(|| view! {
                " "<button type="button" class="secondary small" id=Deleted::UNDO data-testid=Deleted::UNDO
                    on:click=move |_| self.undo(storage)>"Undo"</button>
            })
        })
    }

    /// Removes `record`; once it is gone the form closes if `form_shows` it,
    /// the status line says so with Undo, and Undo takes the focus.
    pub(crate) fn remove(
        self,
        storage: StorageSignals,
        record: Deleted,
        form_shows: impl FnOnce(&Deleted) -> bool + 'static,
    ) {
        let Some(stores) = self.stores(storage) else {
            return;
        };
        spawn_local(async move {
            let (op, args) = record.remove_op();
            match stores.act(op, args).await {
                Ok(()) => {
                    if self.form_open.get_untracked() && form_shows(&record) {
                        self.form_open.set(false);
                    }
                    self.say(format!("Deleted {}.", record.title()));
                    self.deleted.set(Some(record));
                    // Its row is gone, and the focus with it: Undo has it now.
                    focus_soon(Deleted::UNDO);
                }
                Err(problem) => self.failed(ErrorText::with_prefix(
                    &format!("`{}` was not deleted: ", record.key()),
                    &problem,
                )),
            }
        });
    }

    /// Writes the deleted record back, as a new one.
    fn undo(self, storage: StorageSignals) {
        let Some(record) = self.deleted.get_untracked() else {
            return;
        };
        let Some(stores) = self.stores(storage) else {
            return;
        };
        spawn_local(async move {
            let (op, args) = record.restore_op();
            match stores.act(op, args).await {
                Ok(()) => self.say(format!("{} is back.", record.title())),
                Err(problem) => self.failed(ErrorText::with_prefix(
                    &format!("`{}` was not brought back: ", record.key()),
                    &problem,
                )),
            }
            focus_soon(Deleted::AFTER_UNDO);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|name| (*name).to_owned()).collect()
    }

    #[test]
    fn a_typed_list_is_each_item_once_in_order() {
        let cases: [(&str, &[&str]); 7] = [
            ("", &[]),
            ("http_request", &["http_request"]),
            (
                " http_request,  web_search ",
                &["http_request", "web_search"],
            ),
            ("a b,,c\nb", &["a", "b", "c"]),
            (",", &[]),
            (
                " https://a.example\n\nhttps://b.example/ , https://a.example\r\n",
                &["https://a.example", "https://b.example/"],
            ),
            ("\n \n", &[]),
        ];
        for (typed, items) in cases {
            assert_eq!(typed_list(typed), names(items), "{typed:?}");
        }
    }

    #[test]
    fn a_copy_takes_the_first_free_slug_and_stays_a_slug() {
        assert_eq!(copy_slug("tidy-data", &[]), "tidy-data-copy");
        assert_eq!(
            copy_slug("tidy-data", &names(&["tidy-data-copy"])),
            "tidy-data-copy-2"
        );
        assert_eq!(
            copy_slug("tidy-data", &names(&["tidy-data-copy", "tidy-data-copy-2"])),
            "tidy-data-copy-3"
        );
        let long = "a".repeat(64);
        let copied = copy_slug(&long, &[]);
        assert_eq!(copied.len(), 64);
        assert!(copied.ends_with("-copy"));
        assert_eq!(kiln_types::profile::check_slug(&copied), Ok(()));
        // A cut that would end on a dash does not double it.
        let dashed = format!("{}-b", "a".repeat(58));
        assert_eq!(copy_slug(&dashed, &[]), format!("{}-copy", "a".repeat(58)));
    }
}

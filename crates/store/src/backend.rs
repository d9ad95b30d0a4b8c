//! The seam every store is written over: a few tables of JSON records, each
//! with a version, read by key, by key prefix and by term, and written in
//! batches that apply all or none.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::rc::{Rc, Weak};

use futures::future::LocalBoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::StoreError;
pub use kiln_types::records::{Change, Table};

/// A record's JSON as stored: `value` without a `version` field (the record
/// itself carries the version).
pub(crate) fn stored_value<T: Serialize>(value: &T) -> Value {
    let mut value = serde_json::to_value(value).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.remove("version");
    }
    value
}

/// What a backend call returns.
pub type StoreFuture<'a, T> = LocalBoxFuture<'a, Result<T, StoreError>>;

/// What [`Backend::update`] makes of the record it read: the batch to
/// commit, or why there is none.
pub type Update<'a> = Box<dyn FnOnce(Option<Record>) -> Result<Vec<Op>, StoreError> + 'a>;

/// One stored record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub key: String,
    /// 1 for a new record, one more at every write.
    pub version: u64,
    pub value: Value,
}

/// What a write expects to find, checked inside the transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    /// Whatever is there (last writer wins: only for records one writer owns).
    Any,
    /// Nothing: the key is new.
    Absent,
    /// Exactly this version.
    Version(u64),
}

impl Expect {
    /// Checks `found` (the stored version, if any).
    pub fn check(self, table: Table, key: &str, found: Option<u64>) -> Result<(), StoreError> {
        let ok = match self {
            Expect::Any => true,
            Expect::Absent => found.is_none(),
            Expect::Version(version) => found == Some(version),
        };
        if ok {
            return Ok(());
        }
        let show =
            |version: Option<u64>| version.map_or_else(|| "absent".to_owned(), |v| v.to_string());
        Err(StoreError::Conflict {
            table,
            key: key.to_owned(),
            expected: match self {
                Expect::Any => "any".into(),
                Expect::Absent => "absent".into(),
                Expect::Version(version) => version.to_string(),
            },
            found: show(found),
        })
    }
}

/// Runs `attempt` again each time it loses a compare-and-swap, `attempts`
/// times at most; when every one lost, the last [`StoreError::Conflict`] is
/// the answer. Each attempt must read afresh what it writes, so a retry
/// builds on the other writer's change instead of overwriting it.
pub async fn retry_on_conflict<T, F, Fut>(attempts: usize, mut attempt: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    let mut tried = 0;
    loop {
        tried += 1;
        match attempt().await {
            Err(StoreError::Conflict { .. }) if tried < attempts => {}
            answer => return answer,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Write {
    Put(Value),
    Delete,
}

/// One write of a batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Op {
    pub table: Table,
    pub key: String,
    pub expect: Expect,
    pub write: Write,
}

impl Op {
    #[must_use]
    pub fn put(table: Table, key: impl Into<String>, value: Value, expect: Expect) -> Self {
        Self {
            table,
            key: key.into(),
            expect,
            write: Write::Put(value),
        }
    }

    #[must_use]
    pub fn delete(table: Table, key: impl Into<String>, expect: Expect) -> Self {
        Self {
            table,
            key: key.into(),
            expect,
            write: Write::Delete,
        }
    }
}

/// Which records a scan reads.
#[derive(Debug, Clone, Copy, Default)]
pub struct Scan<'a> {
    /// Keys starting with this (empty: all).
    pub prefix: &'a str,
    /// Largest key first.
    pub reverse: bool,
    pub limit: Option<usize>,
}

/// Refuses a batch of [`Backend::update`] that writes a table outside its
/// scope (`scope` and the table it read), on every backend alike: IndexedDB
/// could not, its transaction having been opened over the scope.
pub(crate) fn within(scope: &[Table], table: Table, ops: &[Op]) -> Result<(), StoreError> {
    match ops
        .iter()
        .find(|op| op.table != table && !scope.contains(&op.table))
    {
        Some(op) => Err(StoreError::Invalid(format!(
            "an update that read `{table}` may write only {} and `{table}`, not `{}`",
            scope
                .iter()
                .map(|table| format!("`{table}`"))
                .collect::<Vec<_>>()
                .join(", "),
            op.table
        ))),
        None => Ok(()),
    }
}

/// A transactional table store. Implementations: `native::MemoryBackend`,
/// `native::LogBackend` (on disk, shared by processes) and, in the browser,
/// `browser::IdbBackend`.
pub trait Backend {
    /// Where the data lives, for messages (`IndexedDB \`kiln-default\``).
    fn describe(&self) -> String;

    fn get<'a>(&'a self, table: Table, key: &'a str) -> StoreFuture<'a, Option<Record>>;

    /// Records in key order (or reverse), at most `limit`.
    fn scan<'a>(&'a self, table: Table, scan: Scan<'a>) -> StoreFuture<'a, Vec<Record>>;

    /// For each of `terms`, in order, every record of `table` indexed under
    /// it. Only tables with [`Table::has_terms`].
    fn search<'a>(&'a self, table: Table, terms: &'a [String])
    -> StoreFuture<'a, Vec<Vec<Record>>>;

    /// How many records `table` holds.
    fn count(&self, table: Table) -> StoreFuture<'_, u64>;

    /// Applies every op or none. Each op's [`Expect`] is checked inside the
    /// same transaction; the first that fails is the error and nothing is
    /// written. A returned `Ok` is durable: a reload (or another process)
    /// right after finds it. The changes are also fed to subscribers.
    fn commit(&self, ops: Vec<Op>) -> StoreFuture<'_, Vec<Change>>;

    /// Reads `key` of `table` and commits the batch `update` makes of what
    /// it found, as [`Backend::commit`] does. Where the platform has
    /// transactions that can read and then write (IndexedDB), both happen in
    /// one transaction over `scope`, the tables the batch may write, which
    /// saves a transaction of its own for the read. Elsewhere the record is
    /// read and the batch committed after: either way the batch's
    /// [`Expect`]s decide, and a write that came between fails it with
    /// [`StoreError::Conflict`].
    fn update<'a>(
        &'a self,
        scope: &'a [Table],
        table: Table,
        key: &'a str,
        update: Update<'a>,
    ) -> StoreFuture<'a, Vec<Change>> {
        Box::pin(async move {
            let found = self.get(table, key).await?;
            let ops = update(found)?;
            within(scope, table, &ops)?;
            self.commit(ops).await
        })
    }

    /// Feeds `listener` every committed change: this handle's, and those of
    /// other tabs where the platform lets it see them. Dropping the
    /// [`Subscription`] stops it.
    fn subscribe(&self, listener: Listener) -> Subscription;
}

/// A change-feed listener.
pub type Listener = Rc<dyn Fn(&[Change])>;

/// The listeners of one backend handle.
#[derive(Default)]
pub struct Listeners {
    next: Cell<u64>,
    list: RefCell<Vec<(u64, Listener)>>,
}

impl Listeners {
    #[must_use]
    pub fn new() -> Rc<Self> {
        Rc::new(Self::default())
    }

    pub fn add(self: &Rc<Self>, listener: Listener) -> Subscription {
        let id = self.next.get();
        self.next.set(id + 1);
        self.list.borrow_mut().push((id, listener));
        Subscription {
            listeners: Rc::downgrade(self),
            id,
        }
    }

    /// Calls every listener with `changes` (none when empty).
    pub fn notify(&self, changes: &[Change]) {
        if changes.is_empty() {
            return;
        }
        // Cloned out first: a listener may subscribe or unsubscribe.
        let listeners: Vec<Listener> = self.list.borrow().iter().map(|(_, l)| l.clone()).collect();
        for listener in listeners {
            listener(changes);
        }
    }
}

/// Keeps a listener subscribed until dropped.
pub struct Subscription {
    listeners: Weak<Listeners>,
    id: u64,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(listeners) = self.listeners.upgrade() {
            listeners.list.borrow_mut().retain(|(id, _)| *id != self.id);
        }
    }
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscription")
            .field("id", &self.id)
            .finish()
    }
}

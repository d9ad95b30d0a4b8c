//! [`IdbBackend`]: the browser's [`Backend`], one IndexedDB database.
//!
//! Layout (schema [`SCHEMA_VERSION`]): one object store per
//! [`Table::name`], keyed by the path `k`. Each stored object is
//! `{k: key, v: version, d: value as JSON text, t: [terms]}`; the value is
//! kept as text because structured-cloning one string is cheaper than a tree
//! of objects. The three tables with [`Table::has_terms`] have a multi-entry
//! index `terms` on `t`, which holds [`terms_for`] computed at write time.
//!
//! Schema 1 had the same stores holding `{k, v, d}` and no index; opening it
//! adds the index and backfills `t` on every record, inside the upgrade
//! transaction, so a crash midway leaves schema 1 untouched.
//!
//! A commit is one `readwrite` transaction with `durability: "strict"` over
//! every table it touches: it reads the versions, checks every [`Expect`],
//! writes, and answers only once the transaction completed. Its changes go
//! to this handle's listeners and, as JSON on the `BroadcastChannel`
//! `kiln-store:<name>`, to every other handle on the database (other tabs,
//! workers, or a second handle in this page).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use ::idb::{
    CursorDirection, Factory, IndexParams, KeyPath, KeyRange, ObjectStore, ObjectStoreParams,
    Query, TransactionMode,
};
use futures::channel::oneshot;
use futures::future::{self, Either};
use js_sys::{Array, Object, Reflect};
use serde_json::Value;
use wasm_bindgen::prelude::*;
use web_sys::{
    BroadcastChannel, Event, IdbCursorWithValue, IdbDatabase, IdbOpenDbRequest, IdbRequest,
    IdbTransaction, IdbVersionChangeEvent, MessageEvent,
};

use super::js::{JsFailure, sleep};
use super::request::{Finished, Pending};
use crate::SCHEMA_VERSION;
use crate::backend::{
    Backend, Change, Listener, Listeners, Op, Record, Scan, StoreFuture, Subscription, Table,
    Update, Write,
};
use crate::error::StoreError;
use crate::text::terms_for;

/// The multi-entry index over `t` on the tables with terms.
const TERMS_INDEX: &str = "terms";
/// How long an open or a delete may stay blocked by another tab's
/// connection before it is given up.
const BLOCKED_MS: u32 = 5_000;

#[wasm_bindgen]
extern "C" {
    /// An `IDBDatabase`, for the one method web-sys offers only behind
    /// `--cfg=web_sys_unstable_apis`.
    #[wasm_bindgen(extends = IdbDatabase)]
    type Connection;

    /// `IDBDatabase.transaction(names, mode, options)`.
    #[wasm_bindgen(method, catch, js_name = transaction)]
    fn transaction_with_options(
        this: &Connection,
        names: &Array,
        mode: &str,
        options: &Object,
    ) -> Result<IdbTransaction, JsValue>;
}

/// One open IndexedDB database. Made by [`IdbBackend::open`]; closed when
/// dropped, or at once when another tab upgrades or deletes the database
/// (every later call then answers [`StoreError::Closed`]).
pub struct IdbBackend {
    name: String,
    db: IdbDatabase,
    /// Why the connection is gone, once it is.
    closed: Rc<RefCell<Option<String>>>,
    listeners: Rc<Listeners>,
    channel: Option<BroadcastChannel>,
    _on_version_change: Closure<dyn FnMut(Event)>,
    _on_close: Closure<dyn FnMut(Event)>,
    _on_message: Option<Closure<dyn FnMut(MessageEvent)>>,
}

impl IdbBackend {
    /// Opens (creating or upgrading) the database `name` at
    /// [`SCHEMA_VERSION`].
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] without IndexedDB (or when another tab
    /// keeps an older schema open for more than 5 s),
    /// [`StoreError::TooNew`] for a database of a newer schema,
    /// [`StoreError::QuotaExceeded`], or [`StoreError::Io`].
    pub async fn open(name: &str) -> Result<Rc<Self>, StoreError> {
        let db = open_database(name).await?;
        Ok(Rc::new(Self::attach(name, db)))
    }

    /// Deletes the database `name` (a missing one is fine). Open handles on
    /// it close and answer [`StoreError::Closed`] from then on.
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] without IndexedDB, or when a connection
    /// does not let go for 5 s; [`StoreError::Io`] otherwise.
    pub async fn delete(name: &str) -> Result<(), StoreError> {
        let factory = factory()?;
        let request: IdbOpenDbRequest = factory
            .delete(name)
            .map_err(|error| open_error(name, &idb_failure(&error)))?
            .into();
        match wait_unblocked(&request).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(error)) => Err(open_error(name, &JsFailure::from_value(&error))),
            Err(Blocked) => Err(blocked(name)),
        }
    }

    /// Closes the connection now (it also closes when dropped); later calls
    /// answer [`StoreError::Closed`].
    pub fn close(&self) {
        self.closed
            .borrow_mut()
            .get_or_insert_with(|| "this handle was closed".to_owned());
        self.db.close();
    }

    fn attach(name: &str, db: IdbDatabase) -> Self {
        let closed: Rc<RefCell<Option<String>>> = Rc::default();
        let on_version_change = {
            let closed = closed.clone();
            let db = db.clone();
            Closure::<dyn FnMut(Event)>::new(move |event: Event| {
                let detail = match event
                    .dyn_ref::<IdbVersionChangeEvent>()
                    .and_then(IdbVersionChangeEvent::new_version)
                {
                    None => "it is being deleted".to_owned(),
                    Some(version) => format!("it is being upgraded to schema {version}"),
                };
                closed.borrow_mut().get_or_insert(detail);
                // Closing lets the other tab's upgrade or delete go on.
                db.close();
            })
        };
        db.set_onversionchange(Some(on_version_change.as_ref().unchecked_ref()));
        let on_close = {
            let closed = closed.clone();
            Closure::<dyn FnMut(Event)>::new(move |_: Event| {
                closed.borrow_mut().get_or_insert_with(|| {
                    "the browser closed it (site data cleared, or a storage failure)".to_owned()
                });
            })
        };
        db.set_onclose(Some(on_close.as_ref().unchecked_ref()));

        let listeners = Listeners::new();
        let (channel, on_message) = match BroadcastChannel::new(&channel_name(name)) {
            Ok(channel) => {
                let feed = listeners.clone();
                let on_message =
                    Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
                        // Anything can post on the channel: only a list of
                        // changes is taken, the rest is ignored.
                        let parsed = event
                            .data()
                            .as_string()
                            .and_then(|text| serde_json::from_str::<Vec<Change>>(&text).ok());
                        if let Some(changes) = parsed {
                            feed.notify(&changes);
                        }
                    });
                channel.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
                (Some(channel), Some(on_message))
            }
            // No BroadcastChannel: this handle still sees its own changes.
            Err(_) => (None, None),
        };
        Self {
            name: name.to_owned(),
            db,
            closed,
            listeners,
            channel,
            _on_version_change: on_version_change,
            _on_close: on_close,
            _on_message: on_message,
        }
    }

    fn check_open(&self) -> Result<(), StoreError> {
        match &*self.closed.borrow() {
            Some(detail) => Err(self.closed_error(detail)),
            None => Ok(()),
        }
    }

    fn closed_error(&self, detail: &str) -> StoreError {
        StoreError::Closed {
            name: self.name.clone(),
            detail: detail.to_owned(),
        }
    }

    /// The store's error for a failure of this database.
    fn error(&self, failure: &JsFailure) -> StoreError {
        if failure.is("QuotaExceededError") {
            return StoreError::QuotaExceeded {
                detail: format!(
                    "the browser's storage quota for this site is used up (IndexedDB `{}`: {})",
                    self.name, failure
                ),
            };
        }
        if let Some(detail) = &*self.closed.borrow() {
            return self.closed_error(detail);
        }
        StoreError::Io(format!("IndexedDB `{}`: {failure}", self.name))
    }

    fn corrupt(&self, table: Table, key: &str, detail: impl Into<String>) -> StoreError {
        StoreError::Corrupt {
            place: format!("IndexedDB `{}`, {table} `{key}`", self.name),
            detail: detail.into(),
            hint: None,
        }
    }

    /// A new transaction over `tables`; a connection that is closing makes
    /// [`StoreError::Closed`].
    fn transaction(
        &self,
        tables: &[Table],
        mode: TransactionMode,
    ) -> Result<IdbTransaction, StoreError> {
        self.check_open()?;
        let names: Array = tables
            .iter()
            .map(|table| JsValue::from_str(table.name()))
            .collect();
        let made = match mode {
            TransactionMode::ReadWrite => {
                // An acknowledged commit must survive a crash right after:
                // Chromium's default durability may still hold it in memory.
                let options = Object::new();
                let _ = Reflect::set(&options, &"durability".into(), &"strict".into());
                self.db
                    .unchecked_ref::<Connection>()
                    .transaction_with_options(&names, "readwrite", &options)
            }
            _ => self
                .db
                .transaction_with_str_sequence_and_mode(&names, mode.into()),
        };
        made.map_err(|error| {
            let failure = JsFailure::from_value(&error);
            if failure.is("InvalidStateError") {
                let detail = self
                    .closed
                    .borrow()
                    .clone()
                    .unwrap_or_else(|| "the connection is closing".to_owned());
                return self.closed_error(&detail);
            }
            self.error(&failure)
        })
    }

    /// A store of `transaction`.
    fn store(&self, transaction: &IdbTransaction, table: Table) -> Result<ObjectStore, StoreError> {
        transaction
            .object_store(table.name())
            .map(ObjectStore::from)
            .map_err(|error| self.error(&JsFailure::from_value(&error)))
    }

    /// A read-only transaction's store of `table`.
    fn read_store(&self, table: Table) -> Result<ObjectStore, StoreError> {
        let transaction = self.transaction(&[table], TransactionMode::ReadOnly)?;
        self.store(&transaction, table)
    }

    /// Awaits a request of this database.
    async fn wait(&self, request: impl Into<IdbRequest>) -> Result<JsValue, StoreError> {
        Pending::new(request)
            .await
            .map_err(|error| self.error(&JsFailure::from_value(&error)))
    }

    fn decode(&self, table: Table, stored: &JsValue) -> Result<Record, StoreError> {
        let field = |name: &str| Reflect::get(stored, &JsValue::from_str(name)).ok();
        let Some(key) = field("k").and_then(|key| key.as_string()) else {
            return Err(self.corrupt(table, "?", "a stored object without a text key `k`"));
        };
        let version = self.version_field(table, &key, stored)?;
        let Some(text) = field("d").and_then(|text| text.as_string()) else {
            return Err(self.corrupt(table, &key, "no JSON text `d`"));
        };
        let value: Value = serde_json::from_str(&text)
            .map_err(|error| self.corrupt(table, &key, format!("`d` is not JSON: {error}")))?;
        Ok(Record {
            key,
            version,
            value,
        })
    }

    fn version_field(&self, table: Table, key: &str, stored: &JsValue) -> Result<u64, StoreError> {
        let version = Reflect::get(stored, &JsValue::from_str("v"))
            .ok()
            .and_then(|version| version.as_f64());
        match version {
            Some(version) if version >= 1.0 && version.fract() == 0.0 => Ok(version as u64),
            _ => Err(self.corrupt(table, key, "no version `v` of 1 or more")),
        }
    }

    /// The stored version of what `get` found (`undefined`: absent).
    fn version_of(
        &self,
        table: Table,
        key: &str,
        stored: &JsValue,
    ) -> Result<Option<u64>, StoreError> {
        if stored.is_undefined() {
            return Ok(None);
        }
        self.version_field(table, key, stored).map(Some)
    }

    fn decode_all(&self, table: Table, stored: &JsValue) -> Result<Vec<Record>, StoreError> {
        let Some(array) = stored.dyn_ref::<Array>() else {
            return Err(self.error(&JsFailure::new("TypeError", "getAll did not answer a list")));
        };
        array
            .iter()
            .map(|stored| self.decode(table, &stored))
            .collect()
    }

    async fn get_now(&self, table: Table, key: &str) -> Result<Option<Record>, StoreError> {
        let store = self.read_store(table)?;
        let request = store
            .get(Query::from(JsValue::from_str(key)))
            .map_err(|error| self.error(&idb_failure(&error)))?;
        let stored = self.wait(request).await?;
        if stored.is_undefined() {
            return Ok(None);
        }
        self.decode(table, &stored).map(Some)
    }

    async fn scan_now(&self, table: Table, scan: Scan<'_>) -> Result<Vec<Record>, StoreError> {
        let limit = scan.limit.unwrap_or(usize::MAX);
        let store = self.read_store(table)?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        let range = if scan.prefix.is_empty() {
            None
        } else {
            // Every key that starts with the prefix sorts between it and
            // the prefix followed by the largest UTF-16 code unit.
            let upper = format!("{}\u{ffff}", scan.prefix);
            let range = KeyRange::bound(
                &JsValue::from_str(scan.prefix),
                &JsValue::from_str(&upper),
                Some(false),
                Some(false),
            )
            .map_err(|error| self.error(&idb_failure(&error)))?;
            Some(range)
        };
        // One request instead of one per record: a cursor step is a round
        // trip through the event loop (about 0.25 ms in Chromium).
        let count = u32::try_from(limit).ok();
        let raw: web_sys::IdbObjectStore = store.clone().into();
        let bulk: Option<IdbRequest> = if scan.reverse {
            // `getAllRecords({direction: "prev"})` (Chromium 141 on); without it, the cursor.
            Reflect::get(&raw, &"getAllRecords".into())
                .ok()
                .and_then(|method| method.dyn_into::<js_sys::Function>().ok())
                .and_then(|method| {
                    let options = Object::new();
                    if let Some(range) = &range {
                        let range: web_sys::IdbKeyRange = range.clone().into();
                        let _ = Reflect::set(&options, &"query".into(), &range);
                    }
                    if let Some(count) = count {
                        let _ = Reflect::set(&options, &"count".into(), &count.into());
                    }
                    let _ = Reflect::set(&options, &"direction".into(), &"prev".into());
                    method.call1(&raw, &options).ok()?.dyn_into().ok()
                })
        } else {
            let query = range.clone().map(Query::from);
            Some(
                store
                    .get_all(query, count)
                    .map_err(|error| self.error(&idb_failure(&error)))?
                    .into(),
            )
        };
        if let Some(request) = bulk {
            let found = self.wait(request).await?;
            let mut records = Vec::new();
            for item in Array::from(&found).iter() {
                // `getAllRecords` answers `IDBRecord`s, `getAll` the values.
                let stored = if scan.reverse {
                    Reflect::get(&item, &"value".into()).unwrap_or(JsValue::UNDEFINED)
                } else {
                    item
                };
                let record = self.decode(table, &stored)?;
                if record.key.starts_with(scan.prefix) {
                    records.push(record);
                }
            }
            return Ok(records);
        }
        let range = range.map(Query::from);
        let direction = if scan.reverse {
            CursorDirection::Prev
        } else {
            CursorDirection::Next
        };
        let request: IdbRequest = store
            .open_cursor(range, Some(direction))
            .map_err(|error| self.error(&idb_failure(&error)))?
            .into();
        let mut records = Vec::new();
        loop {
            let step = self.wait(request.clone()).await?;
            // `null`: the cursor is past the last record.
            let Ok(cursor) = step.dyn_into::<IdbCursorWithValue>() else {
                break;
            };
            let stored = cursor
                .value()
                .map_err(|error| self.error(&JsFailure::from_value(&error)))?;
            let record = self.decode(table, &stored)?;
            if record.key.starts_with(scan.prefix) {
                records.push(record);
            }
            if records.len() >= limit {
                break;
            }
            cursor
                .continue_()
                .map_err(|error| self.error(&JsFailure::from_value(&error)))?;
        }
        Ok(records)
    }

    async fn search_now(
        &self,
        table: Table,
        terms: &[String],
    ) -> Result<Vec<Vec<Record>>, StoreError> {
        if !table.has_terms() {
            return Ok(vec![Vec::new(); terms.len()]);
        }
        let store = self.read_store(table)?;
        let index = store
            .index(TERMS_INDEX)
            .map_err(|error| self.error(&idb_failure(&error)))?;
        // Every request is made first: IndexedDB answers them in order.
        let mut pending = Vec::with_capacity(terms.len());
        for term in terms {
            let request = index
                .get_all(Some(Query::from(JsValue::from_str(term))), None)
                .map_err(|error| self.error(&idb_failure(&error)))?;
            pending.push(Pending::new(request));
        }
        let mut found = Vec::with_capacity(terms.len());
        for request in pending {
            let stored = request
                .await
                .map_err(|error| self.error(&JsFailure::from_value(&error)))?;
            found.push(self.decode_all(table, &stored)?);
        }
        Ok(found)
    }

    async fn count_now(&self, table: Table) -> Result<u64, StoreError> {
        let store = self.read_store(table)?;
        let request = store
            .count(None)
            .map_err(|error| self.error(&idb_failure(&error)))?;
        let count = self.wait(request).await?;
        match count.as_f64() {
            Some(count) if count >= 0.0 => Ok(count as u64),
            _ => Err(self.error(&JsFailure::new(
                "TypeError",
                "count did not answer a number",
            ))),
        }
    }

    async fn commit_now(&self, ops: Vec<Op>) -> Result<Vec<Change>, StoreError> {
        self.check_open()?;
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        let mut tables: Vec<Table> = ops.iter().map(|op| op.table).collect();
        tables.sort();
        tables.dedup();
        let transaction = self.transaction(&tables, TransactionMode::ReadWrite)?;
        let finished = Finished::new(&transaction);
        let applied = self.apply(&transaction, &ops).await;
        self.finish(&transaction, finished, applied).await
    }

    /// [`Backend::update`] in one transaction over `scope`: the read, then
    /// the batch made of it.
    async fn update_now(
        &self,
        scope: &[Table],
        table: Table,
        key: &str,
        update: Update<'_>,
    ) -> Result<Vec<Change>, StoreError> {
        self.check_open()?;
        let mut tables: Vec<Table> = scope.iter().copied().chain([table]).collect();
        tables.sort();
        tables.dedup();
        let transaction = self.transaction(&tables, TransactionMode::ReadWrite)?;
        let finished = Finished::new(&transaction);
        let applied = async {
            let request = self
                .store(&transaction, table)?
                .get(Query::from(JsValue::from_str(key)))
                .map_err(|error| self.error(&idb_failure(&error)))?;
            let stored = Pending::new(request)
                .await
                .map_err(|error| self.error(&JsFailure::from_value(&error)))?;
            let found = if stored.is_undefined() {
                None
            } else {
                Some(self.decode(table, &stored)?)
            };
            let ops = update(found)?;
            crate::backend::within(scope, table, &ops)?;
            self.apply(&transaction, &ops).await
        }
        .await;
        self.finish(&transaction, finished, applied).await
    }

    /// Ends a read-write transaction whose batch `applied` answered: aborts
    /// it on an error, else waits for it to commit and feeds the changes to
    /// this handle's listeners and the other tabs.
    async fn finish(
        &self,
        transaction: &IdbTransaction,
        finished: Finished,
        applied: Result<Vec<Change>, StoreError>,
    ) -> Result<Vec<Change>, StoreError> {
        let changes = match applied {
            Ok(changes) => changes,
            Err(error) => {
                // Nothing of the batch is written. The transaction may be
                // aborting already (a failed request): then this throws.
                let _ = transaction.abort();
                let _ = finished.await;
                return Err(error);
            }
        };
        if let Err(reason) = finished.await {
            return Err(self.aborted(reason.as_ref()));
        }
        self.listeners.notify(&changes);
        if let Some(channel) = &self.channel
            && let Ok(text) = serde_json::to_string(&changes)
        {
            // Best effort: other handles miss this change if the post fails.
            let _ = channel.post_message(&JsValue::from_str(&text));
        }
        Ok(changes)
    }

    /// Reads every touched key's version, checks the batch, and writes it,
    /// inside `transaction`.
    async fn apply(
        &self,
        transaction: &IdbTransaction,
        ops: &[Op],
    ) -> Result<Vec<Change>, StoreError> {
        let mut stores: BTreeMap<Table, ObjectStore> = BTreeMap::new();
        for op in ops {
            if let std::collections::btree_map::Entry::Vacant(entry) = stores.entry(op.table) {
                entry.insert(self.store(transaction, op.table)?);
            }
        }
        let store_of = |table: Table| {
            stores
                .get(&table)
                .ok_or_else(|| StoreError::Io(format!("no store `{table}` in the transaction")))
        };
        // All reads are made at once; they see the state before the batch.
        let mut reads = Vec::new();
        let mut versions: BTreeMap<(Table, &str), Option<u64>> = BTreeMap::new();
        for op in ops {
            let id = (op.table, op.key.as_str());
            if versions.insert(id, None).is_none() {
                let request = store_of(op.table)?
                    .get(Query::from(JsValue::from_str(&op.key)))
                    .map_err(|error| self.error(&idb_failure(&error)))?;
                reads.push((id, Pending::new(request)));
            }
        }
        for (id, read) in reads {
            let stored = read
                .await
                .map_err(|error| self.error(&JsFailure::from_value(&error)))?;
            versions.insert(id, self.version_of(id.0, id.1, &stored)?);
        }
        // Checked in order, as the batch goes: a batch may write a key twice.
        let mut changes = Vec::with_capacity(ops.len());
        for op in ops {
            let id = (op.table, op.key.as_str());
            let found = versions.get(&id).copied().flatten();
            op.expect.check(op.table, &op.key, found)?;
            let next = match op.write {
                Write::Put(_) => Some(found.unwrap_or(0) + 1),
                Write::Delete => None,
            };
            versions.insert(id, next);
            changes.push(Change {
                table: op.table,
                key: op.key.clone(),
                version: next,
            });
        }
        // The writes are not awaited one by one: a failed one aborts the
        // transaction, which `commit` reports.
        for (op, change) in ops.iter().zip(&changes) {
            let store = store_of(op.table)?;
            match (&op.write, change.version) {
                (Write::Put(value), Some(version)) => {
                    let stored = encode(&op.key, version, value, &terms_for(op.table, value));
                    store
                        .put(&stored, None)
                        .map_err(|error| self.error(&idb_failure(&error)))?;
                }
                _ => {
                    store
                        .delete(Query::from(JsValue::from_str(&op.key)))
                        .map_err(|error| self.error(&idb_failure(&error)))?;
                }
            }
        }
        Ok(changes)
    }

    /// The error of a commit whose transaction aborted.
    fn aborted(&self, reason: Option<&JsValue>) -> StoreError {
        match reason {
            Some(reason) => self.error(&JsFailure::from_value(reason)),
            None => self.error(&JsFailure::new("AbortError", "the transaction was aborted")),
        }
    }
}

impl Drop for IdbBackend {
    fn drop(&mut self) {
        self.db.set_onversionchange(None);
        self.db.set_onclose(None);
        self.db.close();
        if let Some(channel) = &self.channel {
            channel.set_onmessage(None);
            channel.close();
        }
    }
}

impl Backend for IdbBackend {
    fn describe(&self) -> String {
        format!("IndexedDB `{}`", self.name)
    }

    fn get<'a>(&'a self, table: Table, key: &'a str) -> StoreFuture<'a, Option<Record>> {
        Box::pin(self.get_now(table, key))
    }

    fn scan<'a>(&'a self, table: Table, scan: Scan<'a>) -> StoreFuture<'a, Vec<Record>> {
        Box::pin(self.scan_now(table, scan))
    }

    fn search<'a>(
        &'a self,
        table: Table,
        terms: &'a [String],
    ) -> StoreFuture<'a, Vec<Vec<Record>>> {
        Box::pin(self.search_now(table, terms))
    }

    fn count(&self, table: Table) -> StoreFuture<'_, u64> {
        Box::pin(self.count_now(table))
    }

    fn commit(&self, ops: Vec<Op>) -> StoreFuture<'_, Vec<Change>> {
        Box::pin(self.commit_now(ops))
    }

    fn update<'a>(
        &'a self,
        scope: &'a [Table],
        table: Table,
        key: &'a str,
        update: Update<'a>,
    ) -> StoreFuture<'a, Vec<Change>> {
        Box::pin(self.update_now(scope, table, key, update))
    }

    fn subscribe(&self, listener: Listener) -> Subscription {
        self.listeners.add(listener)
    }
}

/// The `BroadcastChannel` that carries the changes of the database `name`.
#[must_use]
pub fn channel_name(name: &str) -> String {
    format!("kiln-store:{name}")
}

/// A record as stored: `{k, v, d, t}`.
fn encode(key: &str, version: u64, value: &Value, terms: &[String]) -> JsValue {
    let stored = Object::new();
    let terms: Array = terms.iter().map(|term| JsValue::from_str(term)).collect();
    // Setting a property of a new plain object cannot fail.
    let _ = Reflect::set(&stored, &"k".into(), &JsValue::from_str(key));
    let _ = Reflect::set(&stored, &"v".into(), &JsValue::from_f64(version as f64));
    let _ = Reflect::set(&stored, &"d".into(), &JsValue::from_str(&value.to_string()));
    let _ = Reflect::set(&stored, &"t".into(), &terms);
    stored.into()
}

/// `indexedDB` of this scope.
fn factory() -> Result<Factory, StoreError> {
    Factory::new().map_err(|error| {
        let failure = idb_failure(&error);
        StoreError::Unavailable {
            detail: if failure.is("SecurityError") {
                format!("IndexedDB is refused here: {failure}")
            } else {
                "this context has no IndexedDB".to_owned()
            },
        }
    })
}

/// The store's error for an open (or delete) of `name` that failed.
pub(super) fn open_error(name: &str, failure: &JsFailure) -> StoreError {
    match failure.name.as_str() {
        "SecurityError" | "InvalidStateError" | "UnknownError" => StoreError::Unavailable {
            detail: format!("opening IndexedDB `{name}` failed: {failure}"),
        },
        "QuotaExceededError" => StoreError::QuotaExceeded {
            detail: format!(
                "the browser's storage quota for this site is used up (IndexedDB `{name}`: {})",
                failure
            ),
        },
        _ => StoreError::Io(format!("opening IndexedDB `{name}` failed: {failure}")),
    }
}

fn blocked(name: &str) -> StoreError {
    StoreError::Blocked {
        name: name.to_owned(),
        detail: format!(
            "another tab keeps it open at an older schema and did not let go for {} s",
            BLOCKED_MS / 1000
        ),
    }
}

/// What an `idb` error carries: the thrown `DOMException` or value, read
/// as a [`JsFailure`].
fn idb_failure(error: &::idb::Error) -> JsFailure {
    use ::idb::Error as E;
    match error {
        E::DomException(exception) => JsFailure::from_value(exception),
        E::AddFailed(value)
        | E::CountFailed(value)
        | E::DeleteFailed(value)
        | E::GetAllFailed(value)
        | E::GetAllKeysFailed(value)
        | E::GetFailed(value)
        | E::IndexCreateFailed(value)
        | E::IndexNotFound(value)
        | E::IndexedDbDeleteFailed(value)
        | E::IndexedDbNotFound(value)
        | E::IndexedDbOpenFailed(value)
        | E::KeyRangeCreateFailed(value)
        | E::ObjectStoreCreateFailed(value)
        | E::ObjectStoreNotFound(value)
        | E::OpenCursorFailed(value)
        | E::TransactionOpenFailed(value)
        | E::UpdateFailed(value) => JsFailure::from_value(value),
        other => JsFailure::new("Error", other.to_string()),
    }
}

/// An open or delete request stayed blocked for [`BLOCKED_MS`].
struct Blocked;

/// Waits for an open or delete request: its outcome, or [`Blocked`] when
/// other connections held it up for [`BLOCKED_MS`]. Given up, the request
/// is left harmless: a late upgrade is aborted and a late connection closed.
async fn wait_unblocked(request: &IdbOpenDbRequest) -> Result<Result<JsValue, JsValue>, Blocked> {
    let (blocked_sender, blocked_receiver) = oneshot::channel::<()>();
    let mut blocked_sender = Some(blocked_sender);
    let on_blocked = Closure::<dyn FnMut(Event)>::new(move |_: Event| {
        if let Some(sender) = blocked_sender.take() {
            let _ = sender.send(());
        }
    });
    request.set_onblocked(Some(on_blocked.as_ref().unchecked_ref()));
    let outcome = Box::pin(Pending::new(request.clone()));
    let give_up = Box::pin(async move {
        match blocked_receiver.await {
            Ok(()) => sleep(BLOCKED_MS).await,
            Err(_) => future::pending::<()>().await,
        }
    });
    let answer = match future::select(outcome, give_up).await {
        Either::Left((outcome, _)) => Ok(outcome),
        Either::Right(((), outcome)) => {
            drop(outcome);
            leave_harmless(request);
            Err(Blocked)
        }
    };
    request.set_onblocked(None);
    answer
}

/// Handlers for a request nobody waits for any more. `once_into_js` hands
/// them to the JS garbage collector (the one never called stays, a few bytes).
fn leave_harmless(request: &IdbOpenDbRequest) {
    let upgrading = request.clone();
    let abort_upgrade = Closure::once_into_js(move |_: Event| {
        if let Some(transaction) = upgrading.transaction() {
            let _ = transaction.abort();
        }
    });
    request.set_onupgradeneeded(Some(abort_upgrade.unchecked_ref()));
    let opened = request.clone();
    let close_late = Closure::once_into_js(move |_: Event| {
        if let Ok(db) = opened.result().and_then(|db| db.dyn_into::<IdbDatabase>()) {
            db.close();
        }
    });
    request.set_onsuccess(Some(close_late.unchecked_ref()));
}

/// Opens `name` at [`SCHEMA_VERSION`], creating or upgrading it.
async fn open_database(name: &str) -> Result<IdbDatabase, StoreError> {
    let factory = factory()?;
    let request: IdbOpenDbRequest = factory
        .open(name, Some(SCHEMA_VERSION))
        .map_err(|error| open_error(name, &idb_failure(&error)))?
        .into();
    // Why the upgrade failed, when it did (the open then fails `AbortError`).
    let failure: Rc<RefCell<Option<StoreError>>> = Rc::default();
    let on_upgrade = {
        let request = request.clone();
        let failure = failure.clone();
        let name = name.to_owned();
        Closure::<dyn FnMut(IdbVersionChangeEvent)>::new(move |event: IdbVersionChangeEvent| {
            if let Err(error) = upgrade(&request, &name, event.old_version(), &failure) {
                fail_upgrade(&request, &failure, error);
            }
        })
    };
    request.set_onupgradeneeded(Some(on_upgrade.as_ref().unchecked_ref()));
    let outcome = wait_unblocked(&request).await;
    if outcome.is_ok() {
        request.set_onupgradeneeded(None);
    }
    match outcome {
        Ok(Ok(db)) => db.dyn_into::<IdbDatabase>().map_err(|_| {
            StoreError::Io(format!(
                "opening IndexedDB `{name}` answered something other than a database"
            ))
        }),
        Ok(Err(error)) => {
            if let Some(error) = failure.borrow_mut().take() {
                return Err(error);
            }
            let failure = JsFailure::from_value(&error);
            if failure.is("VersionError") {
                return Err(StoreError::TooNew {
                    name: name.to_owned(),
                    // The exception does not say; "at least one more" if
                    // reading it fails too.
                    found: stored_version(name).await.unwrap_or(SCHEMA_VERSION + 1),
                    supported: SCHEMA_VERSION,
                });
            }
            Err(open_error(name, &failure))
        }
        Err(Blocked) => Err(blocked(name)),
    }
}

/// The version `name` has on disk, opened without asking for one.
async fn stored_version(name: &str) -> Option<u32> {
    let request: IdbOpenDbRequest = factory().ok()?.open(name, None).ok()?.into();
    let db = Pending::new(request)
        .await
        .ok()?
        .dyn_into::<IdbDatabase>()
        .ok()?;
    let version = db.version();
    db.close();
    Some(version as u32)
}

/// Records why the upgrade failed and aborts it, so the database stays at
/// its old schema.
fn fail_upgrade(
    request: &IdbOpenDbRequest,
    failure: &Rc<RefCell<Option<StoreError>>>,
    error: StoreError,
) {
    failure.borrow_mut().get_or_insert(error);
    if let Some(transaction) = request.transaction() {
        let _ = transaction.abort();
    }
}

/// `upgradeneeded`: makes every store that is missing, and the term index
/// where it is missing; a store that had records without the index (schema
/// 1) gets `t` backfilled on each of them.
fn upgrade(
    request: &IdbOpenDbRequest,
    name: &str,
    old_version: f64,
    failure: &Rc<RefCell<Option<StoreError>>>,
) -> Result<(), StoreError> {
    let failed = |what: &str, failure: JsFailure| {
        StoreError::Io(format!(
            "upgrading IndexedDB `{name}` from schema {old_version} to {SCHEMA_VERSION}: {what}: {failure}"
        ))
    };
    let db = request
        .result()
        .and_then(|db| db.dyn_into::<IdbDatabase>())
        .map_err(|error| failed("no database", JsFailure::from_value(&error)))?;
    let Some(transaction) = request.transaction() else {
        return Err(failed(
            "no upgrade transaction",
            JsFailure::new("InvalidStateError", ""),
        ));
    };
    let database = ::idb::Database::from(db);
    let existing = database.store_names();
    for table in Table::ALL {
        let existed = existing.iter().any(|store| store == table.name());
        let store = if existed {
            transaction
                .object_store(table.name())
                .map(ObjectStore::from)
                .map_err(|error| failed(table.name(), JsFailure::from_value(&error)))?
        } else {
            let mut params = ObjectStoreParams::new();
            params.key_path(Some(KeyPath::new_single("k")));
            database
                .create_object_store(table.name(), params)
                .map_err(|error| failed(table.name(), idb_failure(&error)))?
        };
        let indexed = store.index_names().iter().any(|index| index == TERMS_INDEX);
        if table.has_terms() && !indexed {
            let mut params = IndexParams::new();
            params.multi_entry(true);
            store
                .create_index(TERMS_INDEX, KeyPath::new_single("t"), Some(params))
                .map_err(|error| failed(table.name(), idb_failure(&error)))?;
            if existed {
                let cursor: IdbRequest = store
                    .open_cursor(None, None)
                    .map_err(|error| failed(table.name(), idb_failure(&error)))?
                    .into();
                let request = request.clone();
                let failure = failure.clone();
                let name = name.to_owned();
                wasm_bindgen_futures::spawn_local(async move {
                    if let Err(error) = backfill(table, cursor, &name).await {
                        fail_upgrade(&request, &failure, error);
                    }
                });
            }
        }
    }
    Ok(())
}

/// Sets `t` on every record `cursor` walks (inside the upgrade transaction).
/// A record whose `d` does not read as JSON gets no terms: `get` reports it
/// as corrupt, and the rest of the database stays usable.
async fn backfill(table: Table, cursor: IdbRequest, name: &str) -> Result<(), StoreError> {
    let failed = |failure: JsFailure| {
        StoreError::Io(format!(
            "upgrading IndexedDB `{name}`: indexing the words of {table}: {failure}"
        ))
    };
    loop {
        let step = Pending::new(cursor.clone())
            .await
            .map_err(|error| failed(JsFailure::from_value(&error)))?;
        let Ok(step) = step.dyn_into::<IdbCursorWithValue>() else {
            return Ok(());
        };
        let stored = step
            .value()
            .map_err(|error| failed(JsFailure::from_value(&error)))?;
        let terms: Array = Reflect::get(&stored, &"d".into())
            .ok()
            .and_then(|text| text.as_string())
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .map(|value| terms_for(table, &value))
            .unwrap_or_default()
            .iter()
            .map(|term| JsValue::from_str(term))
            .collect();
        Reflect::set(&stored, &"t".into(), &terms)
            .map_err(|error| failed(JsFailure::from_value(&error)))?;
        step.update(&stored)
            .map_err(|error| failed(JsFailure::from_value(&error)))?;
        step.continue_()
            .map_err(|error| failed(JsFailure::from_value(&error)))?;
    }
}

/// Test support for the browser suite (the `contract` feature, never in a
/// shipped build): databases as older builds left them.
#[cfg(feature = "contract")]
pub mod testing {
    use super::*;

    /// Writes the database `name` exactly as schema 1 did: the six stores
    /// keyed by `k`, objects `{k, v, d}`, no term index. `name` must not exist.
    ///
    /// # Errors
    ///
    /// [`StoreError::Io`] when IndexedDB refuses any of it.
    pub async fn create_v1(name: &str, records: &[(Table, Record)]) -> Result<(), StoreError> {
        let failed = |what: &str, failure: JsFailure| {
            StoreError::Io(format!("writing schema 1 `{name}`: {what}: {failure}"))
        };
        let request: IdbOpenDbRequest = factory()?
            .open(name, Some(1))
            .map_err(|error| failed("open", idb_failure(&error)))?
            .into();
        let on_upgrade = {
            let request = request.clone();
            Closure::<dyn FnMut(Event)>::new(move |_: Event| {
                let Ok(db) = request.result().and_then(|db| db.dyn_into::<IdbDatabase>()) else {
                    return;
                };
                let database = ::idb::Database::from(db);
                for table in Table::ALL {
                    let mut params = ObjectStoreParams::new();
                    params.key_path(Some(KeyPath::new_single("k")));
                    // A failure shows as a missing store when writing below.
                    let _ = database.create_object_store(table.name(), params);
                }
            })
        };
        request.set_onupgradeneeded(Some(on_upgrade.as_ref().unchecked_ref()));
        let opened = Pending::new(request.clone()).await;
        request.set_onupgradeneeded(None);
        let db = opened
            .and_then(|db| db.dyn_into::<IdbDatabase>())
            .map_err(|error| failed("open", JsFailure::from_value(&error)))?;
        let written = write_v1(&db, records).await;
        db.close();
        written.map_err(|failure| failed("write", failure))
    }

    async fn write_v1(db: &IdbDatabase, records: &[(Table, Record)]) -> Result<(), JsFailure> {
        if records.is_empty() {
            return Ok(());
        }
        let names: Array = Table::ALL
            .iter()
            .map(|table| JsValue::from_str(table.name()))
            .collect();
        let transaction = db
            .transaction_with_str_sequence_and_mode(&names, TransactionMode::ReadWrite.into())
            .map_err(|error| JsFailure::from_value(&error))?;
        let finished = Finished::new(&transaction);
        for (table, record) in records {
            let stored = Object::new();
            let _ = Reflect::set(&stored, &"k".into(), &JsValue::from_str(&record.key));
            let _ = Reflect::set(
                &stored,
                &"v".into(),
                &JsValue::from_f64(record.version as f64),
            );
            let _ = Reflect::set(
                &stored,
                &"d".into(),
                &JsValue::from_str(&record.value.to_string()),
            );
            let store = transaction
                .object_store(table.name())
                .map_err(|error| JsFailure::from_value(&error))?;
            store
                .put(&stored)
                .map_err(|error| JsFailure::from_value(&error))?;
        }
        finished.await.map_err(|reason| match reason {
            Some(reason) => JsFailure::from_value(&reason),
            None => JsFailure::new("AbortError", "aborted"),
        })
    }
}

//! A backend held in memory: the twin native tests and the page's fallback
//! use. Nothing survives the process.

use std::cell::RefCell;
use std::rc::Rc;

use super::Tables;
use crate::backend::{
    Backend, Change, Listener, Listeners, Op, Record, Scan, StoreFuture, Subscription, Table,
};

#[derive(Default)]
pub struct MemoryBackend {
    tables: RefCell<Tables>,
    listeners: Rc<Listeners>,
}

impl MemoryBackend {
    #[must_use]
    pub fn new() -> Rc<Self> {
        Rc::new(Self::default())
    }
}

impl Backend for MemoryBackend {
    fn describe(&self) -> String {
        "memory".into()
    }

    fn get<'a>(&'a self, table: Table, key: &'a str) -> StoreFuture<'a, Option<Record>> {
        let found = self.tables.borrow().get(table, key);
        Box::pin(async move { Ok(found) })
    }

    fn scan<'a>(&'a self, table: Table, scan: Scan<'a>) -> StoreFuture<'a, Vec<Record>> {
        let found = self.tables.borrow().scan(table, scan);
        Box::pin(async move { Ok(found) })
    }

    fn search<'a>(
        &'a self,
        table: Table,
        terms: &'a [String],
    ) -> StoreFuture<'a, Vec<Vec<Record>>> {
        let found = self.tables.borrow().search(table, terms);
        Box::pin(async move { Ok(found) })
    }

    fn count(&self, table: Table) -> StoreFuture<'_, u64> {
        let count = self.tables.borrow().count(table);
        Box::pin(async move { Ok(count) })
    }

    fn commit(&self, ops: Vec<Op>) -> StoreFuture<'_, Vec<Change>> {
        let applied = self.tables.borrow_mut().apply(&ops);
        if let Ok(changes) = &applied {
            self.listeners.notify(changes);
        }
        Box::pin(async move { applied })
    }

    fn subscribe(&self, listener: Listener) -> Subscription {
        self.listeners.add(listener)
    }
}

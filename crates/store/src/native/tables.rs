//! Tables held in memory with their term index: what [`super::MemoryBackend`]
//! serves and what [`super::LogBackend`] replays its log into.

use std::collections::{BTreeMap, BTreeSet};

use crate::backend::{Change, Op, Record, Scan, Table, Write};
use crate::error::StoreError;
use crate::text::terms_for;

#[derive(Debug, Default, Clone)]
pub struct Tables {
    records: BTreeMap<Table, BTreeMap<String, Record>>,
    /// table → term → keys.
    terms: BTreeMap<Table, BTreeMap<String, BTreeSet<String>>>,
}

impl Tables {
    #[must_use]
    pub fn get(&self, table: Table, key: &str) -> Option<Record> {
        self.records
            .get(&table)
            .and_then(|records| records.get(key))
            .cloned()
    }

    #[must_use]
    pub fn scan(&self, table: Table, scan: Scan<'_>) -> Vec<Record> {
        let Some(records) = self.records.get(&table) else {
            return Vec::new();
        };
        let matching = records
            .range(scan.prefix.to_owned()..)
            .take_while(|(key, _)| key.starts_with(scan.prefix))
            .map(|(_, record)| record);
        let limit = scan.limit.unwrap_or(usize::MAX);
        if scan.reverse {
            let all: Vec<&Record> = matching.collect();
            all.into_iter().rev().take(limit).cloned().collect()
        } else {
            matching.take(limit).cloned().collect()
        }
    }

    #[must_use]
    pub fn search(&self, table: Table, terms: &[String]) -> Vec<Vec<Record>> {
        let index = self.terms.get(&table);
        terms
            .iter()
            .map(|term| {
                index
                    .and_then(|index| index.get(term))
                    .map(|keys| keys.iter().filter_map(|key| self.get(table, key)).collect())
                    .unwrap_or_default()
            })
            .collect()
    }

    #[must_use]
    pub fn count(&self, table: Table) -> u64 {
        self.records
            .get(&table)
            .map_or(0, |records| records.len() as u64)
    }

    /// Checks every op's expectation, then applies them all; on an error
    /// nothing changed.
    pub fn apply(&mut self, ops: &[Op]) -> Result<Vec<Change>, StoreError> {
        // Versions as the batch goes: a batch may write one key twice.
        let mut seen: BTreeMap<(Table, &str), Option<u64>> = BTreeMap::new();
        for op in ops {
            let found = match seen.get(&(op.table, op.key.as_str())) {
                Some(version) => *version,
                None => self.get(op.table, &op.key).map(|record| record.version),
            };
            op.expect.check(op.table, &op.key, found)?;
            let next = match op.write {
                Write::Put(_) => Some(found.unwrap_or(0) + 1),
                Write::Delete => None,
            };
            seen.insert((op.table, op.key.as_str()), next);
        }
        Ok(ops.iter().map(|op| self.apply_one(op)).collect())
    }

    fn apply_one(&mut self, op: &Op) -> Change {
        let old = self
            .records
            .get(&op.table)
            .and_then(|records| records.get(&op.key))
            .cloned();
        if let Some(old) = &old {
            self.unindex(op.table, old);
        }
        match &op.write {
            Write::Put(value) => {
                let record = Record {
                    key: op.key.clone(),
                    version: old.map_or(0, |old| old.version) + 1,
                    value: value.clone(),
                };
                let version = record.version;
                self.index(op.table, &record);
                self.records
                    .entry(op.table)
                    .or_default()
                    .insert(op.key.clone(), record);
                Change {
                    table: op.table,
                    key: op.key.clone(),
                    version: Some(version),
                }
            }
            Write::Delete => {
                if let Some(records) = self.records.get_mut(&op.table) {
                    records.remove(&op.key);
                }
                Change {
                    table: op.table,
                    key: op.key.clone(),
                    version: None,
                }
            }
        }
    }

    /// Puts a record back exactly as it was stored (a replayed snapshot).
    pub fn restore(&mut self, table: Table, record: Record) {
        if let Some(old) = self.get(table, &record.key) {
            self.unindex(table, &old);
        }
        self.index(table, &record);
        self.records
            .entry(table)
            .or_default()
            .insert(record.key.clone(), record);
    }

    /// Every record, by table.
    pub fn all(&self) -> impl Iterator<Item = (Table, &Record)> {
        self.records
            .iter()
            .flat_map(|(table, records)| records.values().map(move |record| (*table, record)))
    }

    fn index(&mut self, table: Table, record: &Record) {
        for term in terms_for(table, &record.value) {
            self.terms
                .entry(table)
                .or_default()
                .entry(term)
                .or_default()
                .insert(record.key.clone());
        }
    }

    fn unindex(&mut self, table: Table, record: &Record) {
        let Some(index) = self.terms.get_mut(&table) else {
            return;
        };
        for term in terms_for(table, &record.value) {
            if let Some(keys) = index.get_mut(&term) {
                keys.remove(&record.key);
                if keys.is_empty() {
                    index.remove(&term);
                }
            }
        }
    }
}

//! Words for the full-text index, and BM25 ranking over what the index
//! returns. The same tokenizer runs when a record is written and when a
//! query is read, on every backend.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::backend::{Record, Table};

/// At most this many distinct terms are indexed per record.
pub const MAX_TERMS: usize = 512;

/// The words of `text`: lowercase runs of letters and digits, two characters
/// or more, a plural `s` folded (`memories` stays, `notes` → `note`).
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| word.chars().count() >= 2)
        .map(|word| {
            let mut word = word.to_lowercase();
            if word.len() > 3 && word.ends_with('s') && !word.ends_with("ss") {
                word.pop();
            }
            word
        })
}

/// The searchable text of a record of `table`.
#[must_use]
pub fn searchable(table: Table, value: &Value) -> String {
    let field = |name: &str| value.get(name).and_then(Value::as_str).unwrap_or("");
    match table {
        Table::Memories | Table::Messages => field("text").to_owned(),
        Table::Jobs => format!(
            "{}\n{}\n{}",
            field("title"),
            field("input"),
            field("output")
        ),
        Table::RunEntries | Table::Threads | Table::Config => String::new(),
    }
}

/// The distinct terms a record is indexed under (none for tables without a
/// term index).
#[must_use]
pub fn terms_for(table: Table, value: &Value) -> Vec<String> {
    if !table.has_terms() {
        return Vec::new();
    }
    let mut terms = BTreeSet::new();
    for word in words(&searchable(table, value)) {
        if terms.len() >= MAX_TERMS {
            break;
        }
        terms.insert(word);
    }
    terms.into_iter().collect()
}

/// The distinct terms of a query, in the order they were typed.
#[must_use]
pub fn query_terms(query: &str) -> Vec<String> {
    let mut seen = BTreeSet::new();
    words(query)
        .filter(|word| seen.insert(word.clone()))
        .collect()
}

/// Ranks the records found for each term (`hits[i]` for `terms[i]`) by BM25
/// over `searchable` text, given the table's size. Best first; ties by key,
/// newest (largest) first.
#[must_use]
pub fn rank(
    table: Table,
    terms: &[String],
    hits: Vec<Vec<Record>>,
    n_records: u64,
) -> Vec<(f64, Record)> {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    let n = n_records.max(1) as f64;
    let mut documents: BTreeMap<String, Record> = BTreeMap::new();
    let mut idf = Vec::with_capacity(terms.len());
    for records in hits {
        let df = records.len() as f64;
        idf.push(((n - df + 0.5) / (df + 0.5) + 1.0).ln());
        for record in records {
            documents.entry(record.key.clone()).or_insert(record);
        }
    }
    let counted: Vec<(Record, BTreeMap<String, usize>, usize)> = documents
        .into_values()
        .map(|record| {
            let mut counts = BTreeMap::new();
            let mut length = 0;
            for word in words(&searchable(table, &record.value)) {
                length += 1;
                *counts.entry(word).or_insert(0) += 1;
            }
            (record, counts, length)
        })
        .collect();
    let average = (counted.iter().map(|(_, _, length)| *length).sum::<usize>() as f64
        / counted.len().max(1) as f64)
        .max(1.0);
    let mut ranked: Vec<(f64, Record)> = counted
        .into_iter()
        .map(|(record, counts, length)| {
            let score = terms
                .iter()
                .zip(&idf)
                .map(|(term, idf)| {
                    let tf = counts.get(term).copied().unwrap_or(0) as f64;
                    idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * length as f64 / average))
                })
                .sum();
            (score, record)
        })
        .collect();
    ranked.sort_by(|(a, ra), (b, rb)| b.total_cmp(a).then_with(|| rb.key.cmp(&ra.key)));
    ranked
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn words_fold_case_and_plurals() {
        let found: Vec<String> = words("The user's Notes: Paris, 2 cats; class A").collect();
        assert_eq!(found, ["the", "user", "note", "pari", "cat", "class"]);
    }

    #[test]
    fn rank_prefers_more_matching_terms_and_shorter_texts() {
        let record = |key: &str, text: &str| Record {
            key: key.into(),
            version: 1,
            value: json!({"text": text}),
        };
        let terms = query_terms("favourite colour");
        let hits = vec![
            vec![
                record("a", "favourite colour is teal"),
                record(
                    "b",
                    "favourite food is a very long story about soup and bread",
                ),
            ],
            vec![record("a", "favourite colour is teal")],
        ];
        let ranked = rank(Table::Memories, &terms, hits, 10);
        let keys: Vec<&str> = ranked.iter().map(|(_, r)| r.key.as_str()).collect();
        assert_eq!(keys, ["a", "b"]);
    }
}

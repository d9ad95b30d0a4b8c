//! Everything Kiln keeps, behind one small seam.
//!
//! A [`Backend`] ([`backend`]) is a transactional table store: get, ordered
//! scans, a full-text term index, and [`Backend::commit`], which applies a
//! batch of writes all or none, each checked against the version it expects
//! (compare-and-swap). It has two implementations: IndexedDB in the browser
//! (`browser`) and a native twin (`native`: in memory, or an append-only log on
//! disk that several processes share). Everything above it is written once:
//!
//! - [`run`]: [`run::RunMemory`], the run's `step:` / `task:` / `input:` /
//!   `shared:` entries with their metadata (list, read, publish, subscribe);
//! - [`durable`]: [`durable::DurableMemory`], facts an agent keeps across jobs,
//!   ranked full-text query, helpful / outdated marks;
//! - [`history`]: [`history::History`], threads, messages and job records,
//!   searchable;
//! - [`threads`]: [`threads::Threads`], the person's conversations as the app
//!   and `kiln chat` keep them: what each turn showed and what the model reads,
//!   renamed, pinned, deleted with undo, forked;
//! - [`config`]: [`config::Config`], agents, providers with their keys,
//!   permission mode, the brake;
//! - [`schedules`]: an agent's schedules and each occurrence's firing, claimed
//!   by exactly one runner;
//! - [`skills`]: [`skills::Skills`], the build's system skills and the
//!   workspace's own as one catalog, shipped names reserved;
//! - [`vault`]: [`vault::Vault`], secrets written once and sealed by a
//!   [`vault::Sealer`] (a non-extractable WebCrypto key in the browser),
//!   opened only for the agents allowed;
//! - [`files`]: [`files::FileTree`], the workspace's files (OPFS in the browser,
//!   a directory natively), every path contained by [`files::WorkspacePath`];
//! - [`export`]: everything as one JSON document and back, validated before
//!   anything is written.
//!
//! What they share:
//!
//! - [`error`]: [`StoreError`], one error type for every store, each variant
//!   naming what was wrong and, where a person can act, a hint.
//! - [`owners`]: who is running the workspace's jobs, so that a job left
//!   `running` by an owner that died is marked `interrupted` at the next open.
//! - [`text`]: words for the full-text index, and BM25 ranking over what it
//!   returns.
//! - [`ids`]: the one source of random ids, from the platform's generator.
//! - [`clock`]: wall-clock time in milliseconds since the epoch, for `created`
//!   fields.
//!
//! **Architecture invariant**: nothing above [`Backend`] knows which platform
//! it runs on; the contract suite (`contract`, built only with the `contract`
//! feature this crate's tests turn on) runs the same checks against every
//! backend, natively and in Chromium.

pub mod backend;
#[cfg(target_arch = "wasm32")]
pub mod browser;
pub mod clock;
pub mod config;
#[cfg(feature = "contract")]
pub mod contract;
pub mod durable;
pub mod error;
pub mod export;
pub mod files;
pub mod history;
pub mod ids;
pub mod native;
pub mod owners;
pub mod run;
pub mod schedules;
pub mod skills;
pub mod text;
pub mod threads;
pub mod vault;

pub use backend::{
    Backend, Change, Expect, Op, Record, Scan, Subscription, Table, Update, Write,
    retry_on_conflict,
};
pub use error::StoreError;

/// The schema every backend opens or upgrades to. Version 1 had no term
/// index; version 2 indexes memories, messages and jobs by their words
/// (`text::terms_for`), backfilled on upgrade.
pub const SCHEMA_VERSION: u32 = 2;

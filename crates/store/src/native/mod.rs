//! The native twin of the browser's storage: [`MemoryBackend`] (in memory,
//! for tests) and [`LogBackend`] (an append-only log on disk that several
//! processes share, for the CLI), both over [`Tables`]; [`MemoryTree`] and
//! [`DirTree`] for workspace files.

#[cfg(not(target_arch = "wasm32"))]
mod dir;
#[cfg(not(target_arch = "wasm32"))]
mod fs;
#[cfg(not(target_arch = "wasm32"))]
mod log;
mod memory;
#[cfg(not(target_arch = "wasm32"))]
mod owners;
mod tables;
mod tree;

#[cfg(not(target_arch = "wasm32"))]
pub use dir::DirTree;
#[cfg(not(target_arch = "wasm32"))]
pub use log::{COMPACT_MIN_BYTES, COMPACT_RATIO, LOCK_FILE, LOG_FILE, LogBackend, TMP_FILE};
pub use memory::MemoryBackend;
#[cfg(not(target_arch = "wasm32"))]
pub use owners::{FileOwners, OWNERS_FOLDER};
pub use tables::Tables;
pub use tree::MemoryTree;

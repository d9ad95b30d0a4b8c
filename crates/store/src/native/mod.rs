//! The native twin of the browser's storage: [`MemoryBackend`] (in memory,
//! for tests) and [`LogBackend`] (an append-only log on disk that several
//! processes share, for the CLI), both over [`Tables`]; [`MemoryTree`] and
//! [`DirTree`] for workspace files.

mod memory;
mod tables;
mod tree;

pub use memory::MemoryBackend;
pub use tables::Tables;
pub use tree::MemoryTree;

//! The browser's storage: [`IdbBackend`] (IndexedDB) behind
//! [`crate::Backend`] and [`OpfsTree`] (the origin private file system)
//! behind [`crate::files::FileTree`]. Their native twins are in
//! [`crate::native`]; the same contract suite (`crate::contract`) runs on
//! both, natively and in headless Chromium (`tests/browser.rs`).
//! [`sealer::BrowserSealer`] is the secrets vault's [`crate::vault::Sealer`]:
//! AES-GCM under a non-extractable WebCrypto key kept in IndexedDB.
//!
//! Nothing here panics on what the browser answers: every exception and
//! rejection becomes a [`crate::StoreError`] by its `DOMException` name.

mod idb;
mod js;
mod locks;
mod opfs;
mod request;
pub mod sealer;

#[cfg(feature = "contract")]
pub use self::idb::testing;
pub use self::idb::{IdbBackend, channel_name};
pub use self::locks::{LOCK_PREFIX, WebLocks};
pub use self::opfs::{OpfsTree, WORKSPACES_FOLDER};

//! One error type for every store, one variant per failure, each naming what
//! was wrong and, where a person can act, a hint.

use crate::backend::Table;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// A compare-and-swap lost: someone else changed the record first.
    #[error(
        "`{key}` in {table} was changed elsewhere (expected version {expected}, found {found}); nothing was written\nhint: reload it and apply the change again"
    )]
    Conflict {
        table: Table,
        key: String,
        /// What the writer expected: a version, or `absent`.
        expected: String,
        /// What the store holds: a version, or `absent`.
        found: String,
    },
    #[error("{what} `{key}` does not exist")]
    NotFound { what: &'static str, key: String },
    /// Input from outside (a model, a page, a file) that the store refuses.
    #[error("{0}")]
    Invalid(String),
    /// No room left: the browser's quota for the site, or a full disk.
    #[error(
        "there is no room to store this: {detail}; nothing was written\nhint: delete old files or memories, or export the workspace and clear it"
    )]
    QuotaExceeded { detail: String },
    /// Another tab holds the database open at an older schema.
    #[error(
        "the database `{name}` could not be upgraded: {detail}\nhint: close or reload the other tabs that have Kiln open, then reload this one"
    )]
    Blocked { name: String, detail: String },
    #[error(
        "storage is not available here ({detail})\nhint: private windows and blocked site data turn storage off; allow site data for this page or use a normal window"
    )]
    Unavailable { detail: String },
    #[error(
        "the database `{name}` was deleted or upgraded by another tab while open ({detail}); nothing was written\nhint: reload the page"
    )]
    Closed { name: String, detail: String },
    /// The store's schema is newer than this build understands.
    #[error(
        "`{name}` was written by a newer Kiln (schema {found}, this build reads up to {supported})\nhint: use the newer Kiln, or export from it and import here"
    )]
    TooNew {
        name: String,
        found: u32,
        supported: u32,
    },
    /// Stored data that does not read back (a damaged record or log line).
    #[error("{place}: {detail}")]
    Corrupt { place: String, detail: String },
    #[error("{0}")]
    Io(String),
}

impl StoreError {
    /// A stable code for results and page errors.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Conflict { .. } => "conflict",
            Self::NotFound { .. } => "not_found",
            Self::Invalid(_) => "invalid",
            Self::QuotaExceeded { .. } => "quota_exceeded",
            Self::Unavailable { .. } => "storage_unavailable",
            Self::Blocked { .. } => "storage_blocked",
            Self::Closed { .. } => "storage_closed",
            Self::TooNew { .. } => "schema_too_new",
            Self::Corrupt { .. } => "corrupt",
            Self::Io(_) => "io",
        }
    }
}

//! One error type for every store, one variant per failure, each naming what
//! was wrong and, where a person can act, a hint.
//!
//! The hint is data, not text: `Display` is the message alone and
//! [`StoreError::hint`] says what to do, so a page can set them apart
//! (`Error.message`, `Error.hint`) and an edge that prints one text (a tool
//! failure, the CLI, a warning) renders both with [`StoreError::with_hint`].

use std::fmt;

use crate::backend::Table;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// A compare-and-swap lost: someone else changed the record first.
    #[error(
        "`{key}` in {table} was changed elsewhere (expected version {expected}, found {found}); nothing was written"
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
    /// An import that does not read as a Kiln export (code `invalid`).
    #[error("the import is not a Kiln export ({detail}); nothing was imported")]
    NotAnExport { detail: String },
    /// No room left: the browser's quota for the site, or a full disk.
    #[error("there is no room to store this: {detail}; nothing was written")]
    QuotaExceeded { detail: String },
    /// Another tab holds the database open at an older schema.
    #[error("the database `{name}` could not be upgraded: {detail}")]
    Blocked { name: String, detail: String },
    #[error("storage is not available here ({detail})")]
    Unavailable { detail: String },
    #[error(
        "the database `{name}` was deleted or upgraded by another tab while open ({detail}); nothing was written"
    )]
    Closed { name: String, detail: String },
    /// The store's schema is newer than this build understands.
    #[error(
        "`{name}` was written by a newer Kiln (schema {found}, this build reads up to {supported})"
    )]
    TooNew {
        name: String,
        found: u32,
        supported: u32,
    },
    /// Stored data that does not read back (a damaged record or log line).
    #[error("{place}: {detail}")]
    Corrupt {
        place: String,
        detail: String,
        /// How to get the rest back, where the place says how (a log line).
        hint: Option<String>,
    },
    /// The vault's key is not to be had here (natively: no OS keyring
    /// answered, or it lacks the workspace's key), with what to do instead.
    #[error("the vault's key cannot be had here: {detail}")]
    KeyUnavailable { detail: String, hint: String },
    #[error("{0}")]
    Io(String),
    /// The system refused a file operation on the store's folder (code `io`).
    #[error("{0}")]
    PermissionDenied(String),
}

impl StoreError {
    /// A stable code for results and page errors.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Conflict { .. } => "conflict",
            Self::NotFound { .. } => "not_found",
            Self::Invalid(_) | Self::NotAnExport { .. } => "invalid",
            Self::QuotaExceeded { .. } => "quota_exceeded",
            Self::Unavailable { .. } => "storage_unavailable",
            Self::Blocked { .. } => "storage_blocked",
            Self::Closed { .. } => "storage_closed",
            Self::TooNew { .. } => "schema_too_new",
            Self::Corrupt { .. } => "corrupt",
            Self::KeyUnavailable { .. } => "key_unavailable",
            Self::Io(_) | Self::PermissionDenied(_) => "io",
        }
    }

    /// What a person can do about it, if anything (without `hint: `).
    #[must_use]
    pub fn hint(&self) -> Option<&str> {
        match self {
            Self::Conflict { .. } => Some("reload it and apply the change again"),
            Self::NotAnExport { .. } => {
                Some("import a file made by `kiln memory export` or the page's `exportAll()`")
            }
            Self::QuotaExceeded { .. } => {
                Some("delete old files or memories, or export the workspace and clear it")
            }
            Self::Blocked { .. } => {
                Some("close or reload the other tabs that have Kiln open, then reload this one")
            }
            Self::Unavailable { .. } => Some(
                "private windows and blocked site data turn storage off; allow site data for this page or use a normal window",
            ),
            Self::Closed { .. } => Some("reload the page"),
            Self::TooNew { .. } => Some("use the newer Kiln, or export from it and import here"),
            Self::Corrupt { hint, .. } => hint.as_deref(),
            Self::KeyUnavailable { hint, .. } => Some(hint),
            Self::PermissionDenied(_) => {
                Some("check that this user may read and write the store's folder")
            }
            Self::NotFound { .. } | Self::Invalid(_) | Self::Io(_) => None,
        }
    }

    /// The message, then the hint on its own `hint: ` line: the error as
    /// one text, for an edge that shows it to a person or a model.
    #[must_use]
    pub fn with_hint(&self) -> WithHint<'_> {
        WithHint(self)
    }
}

/// A [`StoreError`] shown with its hint ([`StoreError::with_hint`]).
#[derive(Debug, Clone, Copy)]
pub struct WithHint<'a>(&'a StoreError);

impl fmt::Display for WithHint<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        match self.0.hint() {
            Some(hint) => write!(f, "\nhint: {hint}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hint_is_apart_from_the_message_and_rendered_on_its_own_line() {
        let conflict = StoreError::Conflict {
            table: Table::Memories,
            key: "m-1".to_owned(),
            expected: "1".to_owned(),
            found: "2".to_owned(),
        };
        let message = "`m-1` in memories was changed elsewhere (expected version 1, found 2); nothing was written";
        assert_eq!(conflict.to_string(), message);
        assert_eq!(
            conflict.hint(),
            Some("reload it and apply the change again")
        );
        assert_eq!(
            conflict.with_hint().to_string(),
            format!("{message}\nhint: reload it and apply the change again")
        );
        let plain = StoreError::Invalid("a memory's text is empty".to_owned());
        assert_eq!(plain.hint(), None);
        assert_eq!(plain.with_hint().to_string(), "a memory's text is empty");
        let damaged = StoreError::Corrupt {
            place: "`store.log` line 3".to_owned(),
            detail: "the line is not a batch".to_owned(),
            hint: Some("restore `store.log` from a backup".to_owned()),
        };
        assert_eq!(damaged.code(), "corrupt");
        assert_eq!(
            damaged.with_hint().to_string(),
            "`store.log` line 3: the line is not a batch\nhint: restore `store.log` from a backup"
        );
    }
}

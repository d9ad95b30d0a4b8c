//! What the on-disk twins share: the error of a failed file operation and
//! syncing a folder after a rename.

use std::fs::File;
use std::io::{self, ErrorKind};
use std::path::Path;

use crate::error::StoreError;

/// The error for a failed file operation: a full disk is
/// [`StoreError::QuotaExceeded`], a refusal [`StoreError::PermissionDenied`],
/// anything else [`StoreError::Io`].
pub(super) fn io_error(action: &str, path: &Path, error: &io::Error) -> StoreError {
    match error.kind() {
        ErrorKind::StorageFull | ErrorKind::QuotaExceeded => StoreError::QuotaExceeded {
            detail: format!(
                "could not {action} `{}`: the disk is full: {error}",
                path.display()
            ),
        },
        ErrorKind::PermissionDenied => StoreError::PermissionDenied(format!(
            "could not {action} `{}`: {error}",
            path.display()
        )),
        _ => StoreError::Io(format!("could not {action} `{}`: {error}", path.display())),
    }
}

#[cfg(unix)]
pub(super) fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|handle| handle.sync_all())
        .map_err(|error| io_error("sync", dir, &error))
}

#[cfg(not(unix))]
pub(super) fn sync_dir(_dir: &Path) -> Result<(), StoreError> {
    // Folders cannot be opened to sync here; the rename is as durable as the platform makes it.
    Ok(())
}

//! [`FileOwners`]: the owners of an on-disk store's running jobs, as file
//! locks in its `owners/` folder. A `kiln` process holds an exclusive lock
//! on `owners/<owner>.lock` for its life; the kernel releases it when the
//! process ends, however it ends, so a lock that can be taken is an owner
//! that is gone.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

use futures::future::LocalBoxFuture;

use crate::StoreError;
use crate::owners::Owners;

/// The folder of the owners' lock files, inside the store's folder.
pub const OWNERS_FOLDER: &str = "owners";

pub struct FileOwners {
    owner: String,
    folder: PathBuf,
    /// Locked for this process's life.
    _held: File,
}

fn io_error(path: &Path, error: &std::io::Error) -> StoreError {
    StoreError::Io(format!("{}: {error}", path.display()))
}

impl FileOwners {
    /// Takes this process's lock in `store/owners/`.
    ///
    /// # Errors
    ///
    /// The folder or the lock file cannot be made, or the lock taken.
    pub fn acquire(store: &Path) -> Result<Self, StoreError> {
        let folder = store.join(OWNERS_FOLDER);
        std::fs::create_dir_all(&folder).map_err(|error| io_error(&folder, &error))?;
        let owner = format!("p{}-{}", std::process::id(), crate::ids::random_suffix());
        let path = folder.join(format!("{owner}.lock"));
        let held = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|error| io_error(&path, &error))?;
        held.lock().map_err(|error| io_error(&path, &error))?;
        Ok(Self {
            owner,
            folder,
            _held: held,
        })
    }
}

impl Drop for FileOwners {
    fn drop(&mut self) {
        // A clean end leaves no file behind (a crash leaves one, which the
        // next look at it finds unlocked and removes).
        let _ = std::fs::remove_file(self.folder.join(format!("{}.lock", self.owner)));
    }
}

impl Owners for FileOwners {
    fn owner(&self) -> &str {
        &self.owner
    }

    fn is_alive<'a>(&'a self, owner: &'a str) -> LocalBoxFuture<'a, bool> {
        Box::pin(std::future::ready(self.alive(owner)))
    }
}

impl FileOwners {
    fn alive(&self, owner: &str) -> bool {
        if owner == self.owner {
            return true;
        }
        // An id that is not a file name of ours was never an owner here.
        if owner.is_empty() || owner.contains(['/', '\\', '.']) {
            return false;
        }
        let path = self.folder.join(format!("{owner}.lock"));
        let file = match OpenOptions::new().write(true).open(&path) {
            Ok(file) => file,
            // No lock file: the owner ended (cleanly, or its file was removed).
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return false,
            // Cannot tell: count it alive, so a live job is never interrupted.
            Err(_) => return true,
        };
        match file.try_lock() {
            Ok(()) => {
                let _ = file.unlock();
                let _ = std::fs::remove_file(&path);
                false
            }
            Err(TryLockError::WouldBlock) => true,
            Err(TryLockError::Error(_)) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;

    #[test]
    fn an_owner_is_alive_while_it_holds_its_lock() {
        let store =
            std::env::temp_dir().join(format!("kiln-owners-{}", crate::ids::random_suffix()));
        let first = FileOwners::acquire(&store).expect("first");
        let second = FileOwners::acquire(&store).expect("second");
        assert!(block_on(second.is_alive(first.owner())), "a live owner");
        assert!(block_on(first.is_alive(first.owner())), "itself");
        assert!(!block_on(first.is_alive("p1-gone")), "never an owner");
        assert!(!block_on(first.is_alive("../x")), "not a name of ours");
        let gone = first.owner().to_owned();
        // A crash leaves the file, unlocked: simulated by releasing the lock
        // without the clean end's removal.
        let FileOwners { _held, .. } = &first;
        _held.unlock().expect("unlocked");
        assert!(!block_on(second.is_alive(&gone)), "its lock is free");
        assert!(
            !store
                .join(OWNERS_FOLDER)
                .join(format!("{gone}.lock"))
                .exists(),
            "the stale file is removed"
        );
        drop(first);
        drop(second);
        let _ = std::fs::remove_dir_all(&store);
    }
}

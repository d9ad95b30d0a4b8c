//! [`FileOwners`]: the owners of an on-disk store's running jobs, as file
//! locks in its `owners/` folder. A `kiln` process holds an exclusive lock
//! on `owners/<owner>.lock` for its life; the kernel releases it when the
//! process ends, however it ends, so a lock that can be taken is an owner
//! that is gone.
//!
//! **Architecture invariant**: the folder holds a record for each live owner
//! and nothing that outlives one for long. An owner removes its own record
//! when it ends cleanly ([`Drop`]); one killed leaves it, unlocked, and the
//! next [`FileOwners::acquire`] sweeps every record whose lock it can take.
//! A record is only ever removed by whoever holds its lock, and a new owner
//! checks its record is still there once it holds the lock, so a sweep
//! racing an owner's first moments never takes a live owner's record.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use futures::future::LocalBoxFuture;

use crate::StoreError;
use crate::owners::Owners;

/// The folder of the owners' lock files, inside the store's folder.
pub const OWNERS_FOLDER: &str = "owners";

/// The extension of an owner's record: `owners/<owner>.lock`.
const RECORD_EXTENSION: &str = "lock";

/// How many times [`FileOwners::acquire`] makes a new record when a sweep
/// in another process removed the one it had just made (before it held the
/// lock). One retry is nearly always enough; the bound keeps a folder
/// something keeps emptying from looping.
const MAX_ACQUIRE_ATTEMPTS: usize = 8;

pub struct FileOwners {
    owner: String,
    folder: PathBuf,
    /// Locked for this process's life.
    _held: File,
}

fn io_error(path: &Path, error: &std::io::Error) -> StoreError {
    StoreError::Io(format!("{}: {error}", path.display()))
}

/// Whether `owner` can name a record in the folder (no separator, no dot:
/// never a path out of it, never a file that is not a record).
fn is_owner_name(owner: &str) -> bool {
    !owner.is_empty() && !owner.contains(['/', '\\', '.'])
}

/// The record of `owner` in `folder`.
fn record(folder: &Path, owner: &str) -> PathBuf {
    folder.join(format!("{owner}.{RECORD_EXTENSION}"))
}

impl FileOwners {
    /// Takes this process's lock in `store/owners/`, then sweeps the records
    /// of owners that are gone (their lock free).
    ///
    /// # Errors
    ///
    /// The folder or the lock file cannot be made, or the lock taken.
    pub fn acquire(store: &Path) -> Result<Self, StoreError> {
        let folder = store.join(OWNERS_FOLDER);
        std::fs::create_dir_all(&folder).map_err(|error| io_error(&folder, &error))?;
        let mut attempt = 0;
        let owners = loop {
            attempt += 1;
            if let Some(owners) = Self::try_acquire(&folder)? {
                break owners;
            }
            if attempt == MAX_ACQUIRE_ATTEMPTS {
                return Err(StoreError::Io(format!(
                    "{}: the owner's record was removed before its lock was taken, {attempt} times",
                    folder.display()
                )));
            }
        };
        owners.sweep();
        Ok(owners)
    }

    /// Makes a new record and locks it: `None` when a sweep removed it
    /// between the two (the lock is then on a file no other process can
    /// find, so it would not say this owner is alive).
    fn try_acquire(folder: &Path) -> Result<Option<Self>, StoreError> {
        let owner = format!("p{}-{}", std::process::id(), crate::ids::random_suffix());
        let path = record(folder, &owner);
        let held = match OpenOptions::new().create_new(true).write(true).open(&path) {
            Ok(held) => held,
            // Another owner's name, however unlikely: draw again.
            Err(error) if error.kind() == ErrorKind::AlreadyExists => return Ok(None),
            Err(error) => return Err(io_error(&path, &error)),
        };
        held.lock().map_err(|error| io_error(&path, &error))?;
        // Names are never reused and only a lock's holder removes a record:
        // if it is there now that this process holds the lock, it stays.
        match std::fs::symlink_metadata(&path) {
            Ok(_) => Ok(Some(Self {
                owner,
                folder: folder.to_owned(),
                _held: held,
            })),
            Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
            Err(error) => Err(io_error(&path, &error)),
        }
    }

    /// Removes the records of owners that are gone. Best effort: a record
    /// that cannot be read or removed now is left for a later sweep.
    fn sweep(&self) {
        let Ok(entries) = std::fs::read_dir(&self.folder) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(owner) = name
                .to_str()
                .and_then(|name| name.strip_suffix(RECORD_EXTENSION))
                .and_then(|name| name.strip_suffix('.'))
            else {
                continue;
            };
            if owner != self.owner && is_owner_name(owner) {
                let _ = remove_if_gone(&entry.path());
            }
        }
    }
}

/// Whether the owner whose record is at `path` is gone, removing the record
/// if so: `None` when it cannot tell.
fn remove_if_gone(path: &Path) -> Option<bool> {
    let file = match OpenOptions::new().write(true).open(path) {
        Ok(file) => file,
        // No record: the owner ended (cleanly, or its record was swept).
        Err(error) if error.kind() == ErrorKind::NotFound => return Some(true),
        Err(_) => return None,
    };
    match file.try_lock() {
        Ok(()) => {
            // Removed while the lock is held, so that the path names the
            // file that was locked (see `try_acquire`); the lock goes with
            // the handle.
            let _ = std::fs::remove_file(path);
            Some(true)
        }
        Err(TryLockError::WouldBlock) => Some(false),
        Err(TryLockError::Error(_)) => None,
    }
}

impl Drop for FileOwners {
    fn drop(&mut self) {
        // A clean end leaves no record behind (a crash leaves one, which the
        // next open sweeps). Removed before the lock goes with `_held`.
        let _ = std::fs::remove_file(record(&self.folder, &self.owner));
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
        if !is_owner_name(owner) {
            return false;
        }
        // Cannot tell: count it alive, so a live job is never interrupted.
        !remove_if_gone(&record(&self.folder, owner)).unwrap_or(false)
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

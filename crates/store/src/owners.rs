//! Who is running the workspace's jobs, so that a job left `running` by a
//! tab that closed or a process that died is told apart from one still
//! going in another tab, and marked `interrupted` when the workspace is next
//! opened ([`crate::history::History::interrupt_abandoned`]).
//!
//! Each runtime that runs jobs (a tab's runtime worker, the app's page, a
//! `kiln` process) is an **owner**: it holds a lock named by its owner id
//! for as long as it lives, and every job it starts carries that id. The
//! platform releases the lock when the owner ends however it ends (a closed
//! tab, a crash, `kill -9`), so "is the lock held" is "is the owner alive",
//! with no heartbeat and no clock. The browser's locks are the Web Locks
//! API (`browser::WebLocks`), shared by every tab and worker of the origin;
//! natively they are file locks in the store's folder
//! (`native::FileOwners`), whose files an owner removes when it ends and the
//! next owner to open the store sweeps when it was killed; [`Solo`] is the
//! in-memory store's, which no other process can share.

use futures::future::LocalBoxFuture;

/// The owners of the workspace's running jobs.
pub trait Owners {
    /// This runtime's owner id, held for its life; the jobs it starts carry it.
    fn owner(&self) -> &str;
    /// Whether `owner` is alive (still holds its lock). When the platform
    /// cannot tell, it answers `true`: a live job is never marked
    /// interrupted.
    fn is_alive<'a>(&'a self, owner: &'a str) -> LocalBoxFuture<'a, bool>;
}

/// The owners of a store only this runtime can reach (in memory): every
/// other owner is gone.
pub struct Solo {
    owner: String,
}

impl Solo {
    #[must_use]
    pub fn new() -> Self {
        Self {
            owner: format!("solo-{}", crate::ids::random_suffix()),
        }
    }
}

impl Default for Solo {
    fn default() -> Self {
        Self::new()
    }
}

impl Owners for Solo {
    fn owner(&self) -> &str {
        &self.owner
    }

    fn is_alive<'a>(&'a self, owner: &'a str) -> LocalBoxFuture<'a, bool> {
        Box::pin(std::future::ready(owner == self.owner))
    }
}

//! Where the page's records and files live: IndexedDB and OPFS in the
//! browser. A native build (the unit tests) never opens storage; its twin is
//! in memory.

use std::rc::Rc;

use kiln_store::custody::Custody;
use kiln_store::files::FileTree;
use kiln_store::{Backend, StoreError};

/// The records' backend and the page's owner lock (taken first, so no job
/// of this page is ever seen without its owner).
type Opened = (Rc<dyn Backend>, Rc<dyn Custody>);

#[cfg(target_arch = "wasm32")]
pub(super) async fn open_backend(name: &str) -> Result<Opened, StoreError> {
    let custody: Rc<dyn Custody> = Rc::new(kiln_store::browser::WebLocks::acquire().await?);
    let backend: Rc<dyn Backend> = kiln_store::browser::IdbBackend::open(name).await?;
    Ok((backend, custody))
}

#[cfg(target_arch = "wasm32")]
pub(super) async fn open_files(workspace: &str) -> Result<Rc<dyn FileTree>, StoreError> {
    let tree: Rc<dyn FileTree> = kiln_store::browser::OpfsTree::open(workspace).await?;
    Ok(tree)
}

#[cfg(not(target_arch = "wasm32"))]
pub(super) async fn open_backend(_name: &str) -> Result<Opened, StoreError> {
    Ok((
        kiln_store::native::MemoryBackend::new(),
        Rc::new(kiln_store::custody::Solo::new()),
    ))
}

#[cfg(not(target_arch = "wasm32"))]
pub(super) async fn open_files(_workspace: &str) -> Result<Rc<dyn FileTree>, StoreError> {
    Ok(kiln_store::native::MemoryTree::new())
}

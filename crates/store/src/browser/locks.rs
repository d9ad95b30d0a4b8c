//! [`WebLocks`]: the owners of the workspace's running jobs, as Web Locks
//! (`navigator.locks`), which every tab and worker of the origin shares. A
//! runtime takes an exclusive lock named by its owner id and never lets go;
//! the browser releases it when the tab or worker ends, however it ends.
//! Where the API is missing (an insecure context), nobody can be told
//! apart, so every owner counts as alive and no job is marked interrupted.

use futures::future::LocalBoxFuture;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

use crate::StoreError;
use crate::owners::Owners;

/// The prefix of every owner lock's name.
pub const LOCK_PREFIX: &str = "kiln-owner-";

#[wasm_bindgen(inline_js = r#"
export function kilnLocksSupported() {
  return typeof navigator !== "undefined" && !!navigator.locks;
}
export function kilnHoldLock(name) {
  return new Promise((granted, failed) => {
    navigator.locks
      .request(name, { mode: "exclusive" }, () => {
        granted();
        // Held for the life of this tab or worker.
        return new Promise(() => {});
      })
      .catch(failed);
  });
}
export async function kilnHeldLocks() {
  const snapshot = await navigator.locks.query();
  return snapshot.held.map((lock) => lock.name);
}
"#)]
extern "C" {
    #[wasm_bindgen(js_name = kilnLocksSupported)]
    fn locks_supported() -> bool;
    #[wasm_bindgen(catch, js_name = kilnHoldLock)]
    fn hold_lock(name: &str) -> Result<js_sys::Promise, JsValue>;
    #[wasm_bindgen(catch, js_name = kilnHeldLocks)]
    fn held_locks() -> Result<js_sys::Promise, JsValue>;
}

pub struct WebLocks {
    owner: String,
    supported: bool,
}

impl WebLocks {
    /// Takes this runtime's owner lock, resolving once it is held (so no
    /// job of this runtime can be seen before its owner is).
    ///
    /// # Errors
    ///
    /// The browser refused the lock.
    pub async fn acquire() -> Result<Self, StoreError> {
        let owner = format!(
            "{LOCK_PREFIX}{}{}",
            crate::ids::random_suffix(),
            crate::ids::random_suffix()
        );
        if !locks_supported() {
            return Ok(Self {
                owner,
                supported: false,
            });
        }
        let granted = hold_lock(&owner).map_err(|error| lock_error(&error))?;
        JsFuture::from(granted)
            .await
            .map_err(|error| lock_error(&error))?;
        Ok(Self {
            owner,
            supported: true,
        })
    }
}

fn lock_error(error: &JsValue) -> StoreError {
    StoreError::Io(format!(
        "the owner lock (Web Locks) was refused: {}",
        super::js::JsFailure::from_value(error)
    ))
}

impl Owners for WebLocks {
    fn owner(&self) -> &str {
        &self.owner
    }

    fn is_alive<'a>(&'a self, owner: &'a str) -> LocalBoxFuture<'a, bool> {
        Box::pin(async move {
            if owner == self.owner || !self.supported {
                return true;
            }
            let Ok(query) = held_locks() else {
                return true;
            };
            match JsFuture::from(query).await {
                Ok(names) => js_sys::Array::from(&names)
                    .iter()
                    .any(|name| name.as_string().as_deref() == Some(owner)),
                // Cannot tell: a live job is never interrupted.
                Err(_) => true,
            }
        })
    }
}

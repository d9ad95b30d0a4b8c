//! [`BrowserSealer`]: the vault's [`Sealer`] in the browser. AES-GCM under a
//! 256-bit WebCrypto key made non-extractable, one per workspace, kept in
//! IndexedDB so it outlives a reload; script in this origin can use the key
//! through `crypto.subtle` but never read its bytes, and a copy of the
//! workspace's database is useless without it.
//!
//! Layout: a database of its own, [`KEYS_DATABASE`] (version 1, never
//! upgraded with the workspace's schema), one object store [`KEYS_STORE`]
//! with out-of-line keys: the workspace name maps to its `CryptoKey`, stored
//! as the object itself (a structured clone keeps it non-extractable).
//!
//! The first open of a workspace makes its key; two tabs doing so at once
//! end with one key: the key is written in a read-write transaction that
//! reads first and keeps what is there (IndexedDB runs overlapping
//! read-write transactions on a store one after the other).
//!
//! Everything is reached on `globalThis`, so it works in the runtime worker
//! (a dedicated worker) and in a page alike.

use std::rc::Rc;

use futures::future::LocalBoxFuture;
use js_sys::{Array, ArrayBuffer, Reflect, Uint8Array};
use wasm_bindgen::prelude::Closure;
use wasm_bindgen::{JsCast as _, JsValue};
use web_sys::{
    AesGcmParams, AesKeyGenParams, Crypto, CryptoKey, IdbDatabase, IdbFactory, IdbOpenDbRequest,
    IdbTransactionMode, SubtleCrypto,
};

use super::idb::open_error;
use super::js::{JsFailure, cast, global_object, settle};
use super::request::{Finished, Pending};
use crate::error::StoreError;
use crate::vault::{Sealed, Sealer, unopenable};

/// The database that keeps the vault's keys, apart from every workspace's.
pub const KEYS_DATABASE: &str = "kiln-vault-keys";
/// Its one object store: workspace name → `CryptoKey`.
pub const KEYS_STORE: &str = "keys";
/// The keys database's version; a change here needs an upgrade path.
const KEYS_VERSION: u32 = 1;
/// AES-GCM's recommended nonce length, in bytes.
const NONCE_BYTES: u32 = 12;
const ALGORITHM: &str = "AES-GCM";

/// Seals and opens a workspace's secrets with its non-extractable key. Made
/// by [`BrowserSealer::open`]; holds the key, never its bytes.
pub struct BrowserSealer {
    crypto: Crypto,
    subtle: SubtleCrypto,
    key: CryptoKey,
}

impl BrowserSealer {
    /// The sealer of `workspace`: its stored key, made and stored first if
    /// it has none.
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] without WebCrypto (not a secure context)
    /// or IndexedDB, [`StoreError::QuotaExceeded`], [`StoreError::Corrupt`]
    /// when the stored entry is not a key, or [`StoreError::Io`].
    pub async fn open(workspace: &str) -> Result<Rc<Self>, StoreError> {
        let crypto = crypto()?;
        let subtle = crypto.subtle();
        let db = open_keys().await?;
        let key = key_of(&db, &subtle, workspace).await;
        db.close();
        Ok(Rc::new(Self {
            crypto,
            subtle,
            key: key?,
        }))
    }

    /// Deletes the key of `workspace` (a missing one is fine): what it
    /// sealed can never be opened again. For a workspace being deleted.
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] without IndexedDB, or [`StoreError::Io`].
    pub async fn forget(workspace: &str) -> Result<(), StoreError> {
        let db = open_keys().await?;
        let forgotten = async {
            let transaction = db
                .transaction_with_str_and_mode(KEYS_STORE, IdbTransactionMode::Readwrite)
                .map_err(|error| keys_error("forgetting a key", &error))?;
            let finished = Finished::new(&transaction);
            transaction
                .object_store(KEYS_STORE)
                .and_then(|store| store.delete(&JsValue::from_str(workspace)))
                .map_err(|error| keys_error("forgetting a key", &error))?;
            finished
                .await
                .map_err(|error| keys_error("forgetting a key", &error.unwrap_or_default()))
        }
        .await;
        db.close();
        forgotten
    }
}

impl Sealer for BrowserSealer {
    fn seal(&self, plain: Vec<u8>) -> LocalBoxFuture<'static, Result<Sealed, StoreError>> {
        let (crypto, subtle, key) = (self.crypto.clone(), self.subtle.clone(), self.key.clone());
        Box::pin(async move {
            let failed =
                |failure: JsFailure| StoreError::Io(format!("sealing a secret failed: {failure}"));
            let nonce = Uint8Array::new_with_length(NONCE_BYTES);
            crypto
                .get_random_values_with_js_u8_array(&nonce)
                .map_err(|error| failed(JsFailure::from_value(&error)))?;
            let params = AesGcmParams::new_with_u8_array(ALGORITHM, &nonce);
            // A copy in JavaScript's memory, not a view of wasm's.
            let data = Uint8Array::from(plain.as_slice());
            let promise = subtle
                .encrypt_with_object_and_js_u8_array(&params, &key, &data)
                .map_err(|error| failed(JsFailure::from_value(&error)))?;
            let sealed = settle(promise).await.and_then(bytes).map_err(failed)?;
            Ok(Sealed::of(&nonce.to_vec(), &sealed))
        })
    }

    fn open(&self, sealed: Sealed) -> LocalBoxFuture<'static, Result<Vec<u8>, StoreError>> {
        let (subtle, key) = (self.subtle.clone(), self.key.clone());
        Box::pin(async move {
            let (nonce, data) = sealed.bytes()?;
            let params =
                AesGcmParams::new_with_u8_array(ALGORITHM, &Uint8Array::from(nonce.as_slice()));
            let promise = subtle
                .decrypt_with_object_and_js_u8_array(
                    &params,
                    &key,
                    &Uint8Array::from(data.as_slice()),
                )
                .map_err(|error| decrypt_failed(&JsFailure::from_value(&error)))?;
            settle(promise)
                .await
                .and_then(bytes)
                .map_err(|failure| decrypt_failed(&failure))
        })
    }
}

/// AES-GCM fails `OperationError` on a wrong key or a changed ciphertext;
/// it says no more, on purpose.
fn decrypt_failed(failure: &JsFailure) -> StoreError {
    if failure.is("OperationError") {
        unopenable("it was sealed in another browser or profile, or changed since")
    } else {
        unopenable(&format!("decrypting failed ({})", failure.name))
    }
}

/// The bytes of an `ArrayBuffer` WebCrypto answered.
fn bytes(value: JsValue) -> Result<Vec<u8>, JsFailure> {
    let buffer: ArrayBuffer = cast(value, "an ArrayBuffer")?;
    Ok(Uint8Array::new(&buffer).to_vec())
}

/// `globalThis.crypto`, with `subtle` (only in a secure context).
fn crypto() -> Result<Crypto, StoreError> {
    let unavailable = |detail: &str| StoreError::Unavailable {
        detail: detail.to_owned(),
    };
    let crypto =
        global_object("crypto").ok_or_else(|| unavailable("this context has no WebCrypto"))?;
    let subtle = Reflect::get(&crypto, &JsValue::from_str("subtle")).unwrap_or_default();
    if !subtle.is_object() {
        return Err(unavailable(
            "WebCrypto's `crypto.subtle` is missing: the page is not a secure context (https or localhost)",
        ));
    }
    Ok(crypto.unchecked_into())
}

fn keys_error(what: &str, error: &JsValue) -> StoreError {
    let failure = JsFailure::from_value(error);
    if failure.is("QuotaExceededError") {
        StoreError::QuotaExceeded {
            detail: format!(
                "the browser's storage quota for this site is used up ({what}: {failure})"
            ),
        }
    } else {
        StoreError::Io(format!("IndexedDB `{KEYS_DATABASE}`: {what}: {failure}"))
    }
}

/// Opens [`KEYS_DATABASE`], making its store the first time.
async fn open_keys() -> Result<IdbDatabase, StoreError> {
    let factory: IdbFactory = global_object("indexedDB")
        .ok_or_else(|| StoreError::Unavailable {
            detail: "this context has no IndexedDB".to_owned(),
        })?
        .unchecked_into();
    let request: IdbOpenDbRequest = factory
        .open_with_u32(KEYS_DATABASE, KEYS_VERSION)
        .map_err(|error| open_error(KEYS_DATABASE, &JsFailure::from_value(&error)))?;
    let on_upgrade = {
        let request = request.clone();
        Closure::<dyn FnMut()>::new(move || {
            let made = request
                .result()
                .and_then(|db| db.dyn_into::<IdbDatabase>())
                .and_then(|db| {
                    if db.object_store_names().contains(KEYS_STORE) {
                        return Ok(());
                    }
                    db.create_object_store(KEYS_STORE).map(drop)
                });
            // Failing here aborts the upgrade, and the open fails with it.
            if made.is_err()
                && let Some(transaction) = request.transaction()
            {
                let _ = transaction.abort();
            }
        })
    };
    request.set_onupgradeneeded(Some(on_upgrade.as_ref().unchecked_ref()));
    let opened = Pending::new(request.clone()).await;
    request.set_onupgradeneeded(None);
    let db = opened.map_err(|error| open_error(KEYS_DATABASE, &JsFailure::from_value(&error)))?;
    // A later version of this database (from a newer Kiln) would have to
    // close for it: this connection lives only for one open or forget.
    cast(db, "a database").map_err(|failure| open_error(KEYS_DATABASE, &failure))
}

/// The key of `workspace` in `db`: the stored one, else a new one stored
/// unless another tab stored one first (then that one).
async fn key_of(
    db: &IdbDatabase,
    subtle: &SubtleCrypto,
    workspace: &str,
) -> Result<CryptoKey, StoreError> {
    let id = JsValue::from_str(workspace);
    let request = db
        .transaction_with_str(KEYS_STORE)
        .and_then(|transaction| transaction.object_store(KEYS_STORE))
        .and_then(|store| store.get(&id))
        .map_err(|error| keys_error("reading a key", &error))?;
    let stored = Pending::new(request)
        .await
        .map_err(|error| keys_error("reading a key", &error))?;
    if let Some(key) = stored_key(stored, workspace)? {
        return Ok(key);
    }
    let made = generate(subtle).await?;
    let transaction = db
        .transaction_with_str_and_mode(KEYS_STORE, IdbTransactionMode::Readwrite)
        .map_err(|error| keys_error("storing a key", &error))?;
    let finished = Finished::new(&transaction);
    let store = transaction
        .object_store(KEYS_STORE)
        .map_err(|error| keys_error("storing a key", &error))?;
    let request = store
        .get(&id)
        .map_err(|error| keys_error("storing a key", &error))?;
    let there = Pending::new(request)
        .await
        .map_err(|error| keys_error("storing a key", &error))?;
    let key = match stored_key(there, workspace)? {
        Some(theirs) => theirs,
        None => {
            // `add`, not `put`: it fails rather than overwrite a key.
            store
                .add_with_key(&made, &id)
                .map_err(|error| keys_error("storing a key", &error))?;
            made
        }
    };
    finished
        .await
        .map_err(|error| keys_error("storing a key", &error.unwrap_or_default()))?;
    Ok(key)
}

/// What the keys store held for `workspace`: nothing, or a key.
fn stored_key(value: JsValue, workspace: &str) -> Result<Option<CryptoKey>, StoreError> {
    if value.is_undefined() {
        return Ok(None);
    }
    value
        .dyn_into::<CryptoKey>()
        .map(Some)
        .map_err(|_| StoreError::Corrupt {
            place: format!("IndexedDB `{KEYS_DATABASE}`, the key of `{workspace}`"),
            detail: "it holds something other than a WebCrypto key".to_owned(),
            hint: Some(
                "clear this site's data to make a new key, then set every secret again".to_owned(),
            ),
        })
}

/// A new AES-GCM 256 key that cannot be exported.
async fn generate(subtle: &SubtleCrypto) -> Result<CryptoKey, StoreError> {
    let failed =
        |failure: JsFailure| StoreError::Io(format!("making the vault's key failed: {failure}"));
    let usages = Array::of2(&JsValue::from_str("encrypt"), &JsValue::from_str("decrypt"));
    let promise = subtle
        .generate_key_with_object(&AesKeyGenParams::new(ALGORITHM, 256), false, &usages)
        .map_err(|error| failed(JsFailure::from_value(&error)))?;
    let key = settle(promise).await.map_err(failed)?;
    cast(key, "a CryptoKey").map_err(failed)
}

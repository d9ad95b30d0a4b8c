//! The secrets vault in a terminal: [`KeyringSealer`], the vault's
//! [`Sealer`] natively. The browser's twin is `kiln_store::browser::sealer`.
//!
//! A workspace's secrets are sealed with AES-256-GCM (RustCrypto's
//! `aes-gcm`) under a random 256-bit key that lives in the operating
//! system's keyring, not in the store: the Secret Service over D-Bus on
//! Linux and the BSDs (GNOME Keyring, KWallet, KeePassXC), the login
//! Keychain on macOS, the Credential Manager on Windows (keyring-core and
//! its stores). The entry is service `kiln`, user the name the store keeps
//! for it ([`kiln_store::vault::keyring_name`]), so a copied store directory
//! is useless on a machine whose keyring lacks the key, as a copied browser
//! database is without its non-extractable key.
//!
//! The keyring is reached only when a value is sealed or opened, never to
//! list secrets; where none answers (a server with no D-Bus session, a
//! container), sealing and opening fail with a sentence that says so and
//! points to `--secret NAME=ENV`, the environment way that needs no vault.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use aes_gcm::aead::Aead as _;
use aes_gcm::{Aes256Gcm, KeyInit as _, Nonce};
use futures::future::LocalBoxFuture;
use keyring_core::{CredentialStore, Entry};
use kiln_store::vault::{Sealed, Sealer, Vault, unopenable};
use kiln_store::{Backend, StoreError};

/// The keyring entry's service.
pub(crate) const SERVICE: &str = "kiln";
/// AES-256's key length.
const KEY_BYTES: usize = 32;
/// AES-GCM's recommended nonce length.
const NONCE_BYTES: usize = 12;

/// Seals with the workspace's key from the OS keyring, fetched (or made,
/// for the first seal) on first use and held for the process's life.
pub(crate) struct KeyringSealer {
    backend: Rc<dyn Backend>,
    cipher: Rc<RefCell<Option<Aes256Gcm>>>,
}

impl KeyringSealer {
    /// The vault of the workspace `backend` holds, sealed by the OS keyring.
    pub(crate) fn vault(backend: Rc<dyn Backend>) -> Vault {
        let sealer = Self {
            backend: backend.clone(),
            cipher: Rc::default(),
        };
        Vault::new(backend, Rc::new(sealer))
    }

    /// The cipher under the workspace's key; `make` lets a first seal make
    /// the key (opening never does: a value sealed under another key stays
    /// unopened, said so).
    fn cipher(&self, make: bool) -> impl Future<Output = Result<Aes256Gcm, StoreError>> + 'static {
        let (backend, held) = (self.backend.clone(), self.cipher.clone());
        async move {
            if let Some(cipher) = held.borrow().clone() {
                return Ok(cipher);
            }
            let name = kiln_store::vault::keyring_name(backend.as_ref()).await?;
            let key = keyring_key(&name, make)?;
            let cipher = Aes256Gcm::new_from_slice(&key)
                .map_err(|_| StoreError::Io("the vault's key is not an AES-256 key".to_owned()))?;
            *held.borrow_mut() = Some(cipher.clone());
            Ok(cipher)
        }
    }
}

impl Sealer for KeyringSealer {
    fn seal(&self, plain: Vec<u8>) -> LocalBoxFuture<'static, Result<Sealed, StoreError>> {
        let cipher = self.cipher(true);
        Box::pin(async move {
            let cipher = cipher.await?;
            let mut nonce = [0_u8; NONCE_BYTES];
            getrandom::fill(&mut nonce).map_err(|error| {
                StoreError::Io(format!(
                    "sealing a secret failed: no random nonce ({error})"
                ))
            })?;
            let data = cipher
                .encrypt(Nonce::from_slice(&nonce), plain.as_slice())
                .map_err(|_| StoreError::Io("sealing a secret failed".to_owned()))?;
            Ok(Sealed::of(&nonce, &data))
        })
    }

    fn open(&self, sealed: Sealed) -> LocalBoxFuture<'static, Result<Vec<u8>, StoreError>> {
        let cipher = self.cipher(false);
        Box::pin(async move {
            let (nonce, data) = sealed.bytes()?;
            if nonce.len() != NONCE_BYTES {
                return Err(unopenable("its nonce is not 12 bytes"));
            }
            let cipher = cipher.await?;
            cipher
                .decrypt(Nonce::from_slice(&nonce), data.as_slice())
                .map_err(|_| {
                    unopenable("it was sealed under another key (another machine's keyring, or a browser's), or changed since")
                })
        })
    }
}

/// Without a keyring a terminal still has a way.
const WITHOUT: &str = "without one, give a run its secrets from the environment: --secret NAME=ENV";

fn unavailable(detail: String, hint: &str) -> StoreError {
    StoreError::KeyUnavailable {
        detail,
        hint: hint.to_owned(),
    }
}

/// The workspace's key from the keyring entry `kiln`/`name`; made and
/// stored first when `make` and there is none.
fn keyring_key(name: &str, make: bool) -> Result<Vec<u8>, StoreError> {
    let store = os_keyring().map_err(|detail| unavailable(detail, WITHOUT))?;
    let entry = Entry::new_in_store(&store, SERVICE, name).map_err(|error| {
        unavailable(
            format!("the OS keyring refused the entry {SERVICE}/{name}: {error}"),
            WITHOUT,
        )
    })?;
    match entry.get_secret() {
        Ok(key) if key.len() == KEY_BYTES => Ok(key),
        Ok(other) => Err(unavailable(
            format!(
                "the OS keyring's entry {SERVICE}/{name} holds {} bytes, not this workspace's {KEY_BYTES}-byte key",
                other.len()
            ),
            "remove that entry from the keyring, then set the workspace's secrets again: kiln secrets set NAME",
        )),
        Err(keyring_core::Error::NoEntry) if make => {
            let mut key = vec![0_u8; KEY_BYTES];
            getrandom::fill(&mut key).map_err(|error| {
                StoreError::Io(format!("no random key for the vault ({error})"))
            })?;
            entry.set_secret(&key).map_err(|error| {
                unavailable(
                    format!(
                        "the OS keyring did not keep the vault's key {SERVICE}/{name}: {error}"
                    ),
                    "unlock the keyring (your desktop's Passwords and Keys), then try again",
                )
            })?;
            Ok(key)
        }
        Err(keyring_core::Error::NoEntry) => Err(unavailable(
            format!(
                "the OS keyring has no key {SERVICE}/{name} for this workspace (the store was copied from another machine, or the entry was removed)"
            ),
            "set the workspace's secrets again: kiln secrets set NAME",
        )),
        Err(error) => Err(unavailable(
            format!("the OS keyring could not give the vault's key {SERVICE}/{name}: {error}"),
            "unlock the keyring (your desktop's Passwords and Keys), then try again",
        )),
    }
}

/// This system's keyring, or why there is none.
fn os_keyring() -> Result<Arc<CredentialStore>, String> {
    #[cfg(any(target_os = "linux", target_os = "freebsd", target_os = "openbsd"))]
    let store = zbus_secret_service_keyring_store::Store::new()
        .map(|store| store as Arc<CredentialStore>)
        .map_err(|error| {
            format!("no OS keyring answered (the Secret Service on the D-Bus session bus: {error})")
        });
    #[cfg(target_os = "macos")]
    let store = apple_native_keyring_store::keychain::Store::new()
        .map(|store| store as Arc<CredentialStore>)
        .map_err(|error| format!("the login Keychain did not answer ({error})"));
    #[cfg(windows)]
    let store = windows_native_keyring_store::Store::new()
        .map(|store| store as Arc<CredentialStore>)
        .map_err(|error| format!("the Credential Manager did not answer ({error})"));
    #[cfg(not(any(
        target_os = "linux",
        target_os = "freebsd",
        target_os = "openbsd",
        target_os = "macos",
        windows
    )))]
    let store = Err("Kiln knows no OS keyring on this system".to_owned());
    store
}

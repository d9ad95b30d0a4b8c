//! The secrets vault: a secret's value written once, sealed, and never read
//! back out to a page; its settings (the origins it may be sent to, the
//! agents that may use it) edited freely. Records are `secret:<name>` in the
//! configuration table; the value is sealed by a [`Sealer`] before it is
//! written, so the store never holds it in the clear.
//!
//! - In the browser the sealer is AES-GCM under a non-extractable WebCrypto
//!   key kept in IndexedDB (`browser::sealer`): script can use the key
//!   through the runtime worker but never read it, and a copied database is
//!   useless without it.
//! - Natively the CLI's sealer is AES-GCM under a key kept in the operating
//!   system's keyring (`kiln_cli::vault`), found by the name
//!   [`keyring_name`] keeps in the store; where no keyring answers, `kiln`
//!   says so and takes secrets from the environment (`--secret NAME=ENV`).
//!
//! A job gets, sealed open, only the secrets its agent may use
//! ([`Vault::for_agent`]): those its profile names whose own agent list is
//! empty or names it; each bound to its origins.

use std::rc::Rc;

use futures::future::LocalBoxFuture;
use kiln_types::Redacted;
use kiln_types::vault::{SecretInfo, SecretPut};
use serde::{Deserialize, Serialize};

use crate::backend::{Backend, Expect, Op, Scan, Table, stored_value};
use crate::error::StoreError;

/// A sealed value: the nonce and the ciphertext, each in standard base64.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sealed {
    pub nonce: String,
    pub data: String,
}

impl Sealed {
    /// Seals `data` under `nonce`, each kept in standard base64.
    #[must_use]
    pub fn of(nonce: &[u8], data: &[u8]) -> Self {
        use base64::Engine as _;
        let base64 = base64::engine::general_purpose::STANDARD;
        Self {
            nonce: base64.encode(nonce),
            data: base64.encode(data),
        }
    }

    /// The nonce and the ciphertext, or why they do not read.
    ///
    /// # Errors
    ///
    /// [`unopenable`]: either is not base64.
    pub fn bytes(&self) -> Result<(Vec<u8>, Vec<u8>), StoreError> {
        use base64::Engine as _;
        let base64 = base64::engine::general_purpose::STANDARD;
        match (base64.decode(&self.nonce), base64.decode(&self.data)) {
            (Ok(nonce), Ok(data)) => Ok((nonce, data)),
            _ => Err(unopenable("its sealed value is not base64")),
        }
    }
}

/// A sealed value a sealer cannot open, and why (never the value).
#[must_use]
pub fn unopenable(why: &str) -> StoreError {
    StoreError::Corrupt {
        place: "a sealed secret".to_owned(),
        detail: format!("it cannot be opened here: {why}"),
        hint: Some("set the secret again".to_owned()),
    }
}

/// Seals a secret's value before it is stored and opens it for a job.
pub trait Sealer {
    /// `plain`, sealed.
    fn seal(&self, plain: Vec<u8>) -> LocalBoxFuture<'static, Result<Sealed, StoreError>>;
    /// A value this sealer sealed.
    fn open(&self, sealed: Sealed) -> LocalBoxFuture<'static, Result<Vec<u8>, StoreError>>;
}

const PREFIX: &str = "secret:";

/// The configuration record naming this workspace's key outside the store.
/// Never exported: the key it names stays on this machine.
pub const KEYRING_NAME_KEY: &str = "vault:keyring";

/// The name a host keeps this workspace's sealing key under outside the
/// store (natively, the OS keyring's entry): `workspace-` and 32 random hex
/// digits, made on first use and kept in the store, so that two workspaces
/// never share a key and a copied store names a key the copy's machine does
/// not have.
///
/// # Errors
///
/// The store's failure, or a record that does not read.
pub async fn keyring_name(backend: &dyn Backend) -> Result<String, StoreError> {
    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Named {
        name: String,
    }
    loop {
        if let Some(record) = backend.get(Table::Config, KEYRING_NAME_KEY).await? {
            let named: Named = serde_json::from_value(record.value)
                .map_err(|error| corrupt(KEYRING_NAME_KEY, error.to_string()))?;
            return Ok(named.name);
        }
        let random: String = (0..2)
            .flat_map(|_| crate::ids::random_bytes())
            .map(|byte| format!("{byte:02x}"))
            .collect();
        let named = Named {
            name: format!("workspace-{random}"),
        };
        let put = Op::put(
            Table::Config,
            KEYRING_NAME_KEY.to_owned(),
            stored_value(&named),
            Expect::Absent,
        );
        match backend.commit(vec![put]).await {
            Ok(_) => return Ok(named.name),
            // Another process named it first: read theirs.
            Err(StoreError::Conflict { .. }) => {}
            Err(error) => return Err(error),
        }
    }
}

/// What the store keeps per secret.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Kept {
    name: String,
    origins: Vec<String>,
    #[serde(default)]
    agents: Vec<String>,
    set_ms: u64,
    #[serde(default)]
    used_ms: Option<u64>,
    sealed: Sealed,
}

impl Kept {
    fn info(self, version: u64) -> SecretInfo {
        SecretInfo {
            name: self.name,
            origins: self.origins,
            agents: self.agents,
            set_ms: self.set_ms,
            used_ms: self.used_ms,
            version,
        }
    }
}

/// A secret opened for a job: its name, value and origins.
pub struct Opened {
    pub name: String,
    pub value: Redacted,
    pub origins: Vec<String>,
}

/// The vault of one workspace.
#[derive(Clone)]
pub struct Vault {
    backend: Rc<dyn Backend>,
    sealer: Rc<dyn Sealer>,
}

fn corrupt(key: &str, detail: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        place: format!("config `{key}`"),
        detail: detail.into(),
        hint: Some("set the secret again".into()),
    }
}

impl Vault {
    #[must_use]
    pub fn new(backend: Rc<dyn Backend>, sealer: Rc<dyn Sealer>) -> Self {
        Self { backend, sealer }
    }

    async fn kept(&self) -> Result<Vec<(Kept, u64)>, StoreError> {
        let scan = Scan {
            prefix: PREFIX,
            ..Scan::default()
        };
        self.backend
            .scan(Table::Config, scan)
            .await?
            .into_iter()
            .map(|record| {
                let kept: Kept = serde_json::from_value(record.value)
                    .map_err(|error| corrupt(&record.key, error.to_string()))?;
                Ok((kept, record.version))
            })
            .collect()
    }

    /// Every secret, by name, without its value.
    pub async fn list(&self) -> Result<Vec<SecretInfo>, StoreError> {
        Ok(self
            .kept()
            .await?
            .into_iter()
            .map(|(kept, version)| kept.info(version))
            .collect())
    }

    /// Writes `change` at its version (0: a new secret), its value sealed
    /// when it carries one, else the stored value kept; answers the version.
    pub async fn put(&self, change: &SecretPut, now_ms: u64) -> Result<u64, StoreError> {
        let origins = change.check().map_err(StoreError::Invalid)?;
        let key = format!("{PREFIX}{}", change.name);
        let before = self
            .kept()
            .await?
            .into_iter()
            .find(|(kept, _)| kept.name == change.name);
        let (sealed, set_ms, used_ms) = match (&change.value, before) {
            (Some(value), before) => (
                self.sealer.seal(value.expose().as_bytes().to_vec()).await?,
                now_ms,
                before.and_then(|(kept, _)| kept.used_ms),
            ),
            (None, Some((kept, _))) => (kept.sealed, kept.set_ms, kept.used_ms),
            (None, None) => {
                return Err(StoreError::Invalid(format!(
                    "secret `{}`: there is no value to keep; give one",
                    change.name
                )));
            }
        };
        let kept = Kept {
            name: change.name.clone(),
            origins,
            agents: change.agents.clone(),
            set_ms,
            used_ms,
            sealed,
        };
        let expect = if change.version == 0 {
            Expect::Absent
        } else {
            Expect::Version(change.version)
        };
        let changes = self
            .backend
            .commit(vec![Op::put(
                Table::Config,
                key,
                stored_value(&kept),
                expect,
            )])
            .await?;
        Ok(changes
            .first()
            .and_then(|change| change.version)
            .unwrap_or(change.version + 1))
    }

    /// Removes the secret `name` at `version`.
    pub async fn remove(&self, name: &str, version: u64) -> Result<(), StoreError> {
        self.backend
            .commit(vec![Op::delete(
                Table::Config,
                format!("{PREFIX}{name}"),
                Expect::Version(version),
            )])
            .await?;
        Ok(())
    }

    /// The secrets the agent `slug` may use among `named` (its profile's),
    /// opened, each with its origins; a name the vault does not keep or does
    /// not give this agent is left out and said in the answer's second part.
    /// Each one given is marked used at `now_ms`.
    pub async fn for_agent(
        &self,
        slug: &str,
        named: &[String],
        now_ms: u64,
    ) -> Result<(Vec<Opened>, Vec<String>), StoreError> {
        let kept = self.kept().await?;
        let mut opened = Vec::new();
        let mut problems = Vec::new();
        for name in named {
            let Some((secret, version)) = kept.iter().find(|(kept, _)| &kept.name == name) else {
                problems.push(format!(
                    "the secret `{name}` this agent names is not in the vault; set it in Settings → Secrets (in a terminal: `kiln secrets set {name}`)"
                ));
                continue;
            };
            if !secret.agents.is_empty() && !secret.agents.iter().any(|agent| agent == slug) {
                problems.push(format!(
                    "the vault gives the secret `{name}` only to {}, not to `{slug}`",
                    secret
                        .agents
                        .iter()
                        .map(|agent| format!("`{agent}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                continue;
            }
            let key = format!("{PREFIX}{name}");
            let bytes = self.sealer.open(secret.sealed.clone()).await?;
            let value = String::from_utf8(bytes)
                .map_err(|_| corrupt(&key, "the opened value is not UTF-8"))?;
            opened.push(Opened {
                name: name.clone(),
                value: Redacted::new(value),
                origins: secret.origins.clone(),
            });
            let used = Kept {
                used_ms: Some(now_ms),
                ..secret.clone()
            };
            // Marking it used is worth a retry only to a person; a lost race
            // (another tab marked it too) changes nothing they would see.
            let _ = self
                .backend
                .commit(vec![Op::put(
                    Table::Config,
                    key,
                    stored_value(&used),
                    Expect::Version(*version),
                )])
                .await;
        }
        Ok((opened, problems))
    }
}

#[cfg(any(test, feature = "contract"))]
pub mod testing {
    //! A sealer for native tests of everything around the seal: it keeps
    //! values in a table of its own and stores only an index, so a test
    //! can still grep the store for a value and find none. The browser's
    //! real sealer is tested in Chromium.

    use std::cell::RefCell;
    use std::rc::Rc;

    use base64::Engine as _;
    use futures::future::LocalBoxFuture;

    use super::{Sealed, Sealer};
    use crate::error::StoreError;

    /// Values kept beside the store, by index.
    #[derive(Default)]
    pub struct TableSealer(RefCell<Vec<Vec<u8>>>);

    impl TableSealer {
        #[must_use]
        pub fn new() -> Rc<Self> {
            Rc::default()
        }
    }

    impl Sealer for TableSealer {
        fn seal(&self, plain: Vec<u8>) -> LocalBoxFuture<'static, Result<Sealed, StoreError>> {
            let mut table = self.0.borrow_mut();
            table.push(plain);
            let index = (table.len() - 1).to_string();
            Box::pin(async move {
                Ok(Sealed {
                    nonce: String::new(),
                    data: base64::engine::general_purpose::STANDARD.encode(index),
                })
            })
        }

        fn open(&self, sealed: Sealed) -> LocalBoxFuture<'static, Result<Vec<u8>, StoreError>> {
            let found = base64::engine::general_purpose::STANDARD
                .decode(&sealed.data)
                .ok()
                .and_then(|index| String::from_utf8(index).ok())
                .and_then(|index| index.parse::<usize>().ok())
                .and_then(|index| self.0.borrow().get(index).cloned());
            Box::pin(async move {
                found.ok_or_else(|| StoreError::Invalid("not sealed by this sealer".into()))
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::native::MemoryBackend;
    use futures::executor::block_on;

    fn put(name: &str, value: Option<&str>, agents: &[&str], version: u64) -> SecretPut {
        SecretPut {
            name: name.into(),
            value: value.map(Redacted::new),
            origins: vec!["https://api.github.com".into()],
            agents: agents.iter().map(|agent| (*agent).to_owned()).collect(),
            version,
        }
    }

    #[test]
    fn a_value_is_written_once_sealed_and_given_only_to_the_agents_allowed() {
        let backend = MemoryBackend::new();
        let vault = Vault::new(backend.clone(), testing::TableSealer::new());
        block_on(async {
            let version = vault
                .put(&put("GITHUB_TOKEN", Some("ghp_s3cret"), &[], 0), 10)
                .await
                .unwrap();
            vault
                .put(&put("DEPLOY_KEY", Some("dk_s3cret"), &["ops"], 0), 10)
                .await
                .unwrap();
            // Settings change without the value: it stays.
            let version = vault
                .put(&put("GITHUB_TOKEN", None, &[], version), 20)
                .await
                .unwrap();
            let listed = vault.list().await.unwrap();
            assert_eq!(listed.len(), 2);
            assert_eq!(listed[1].name, "GITHUB_TOKEN");
            assert_eq!(listed[1].set_ms, 10, "the value was set once");
            assert_eq!(listed[1].version, version);
            // Nothing in the store holds a value in the clear.
            let dump = format!(
                "{:?}",
                backend.scan(Table::Config, Scan::default()).await.unwrap()
            );
            assert!(!dump.contains("s3cret"), "{dump}");
            // The agent gets what its profile names and the vault allows.
            let (opened, problems) = vault
                .for_agent(
                    "ada",
                    &["GITHUB_TOKEN".into(), "DEPLOY_KEY".into(), "NOPE".into()],
                    30,
                )
                .await
                .unwrap();
            assert_eq!(opened.len(), 1);
            assert_eq!(opened[0].value.expose(), "ghp_s3cret");
            assert_eq!(opened[0].origins, ["https://api.github.com"]);
            assert!(
                problems[0].contains("only to `ops`, not to `ada`"),
                "{problems:?}"
            );
            assert!(problems[1].contains("`NOPE`"), "{problems:?}");
            let used = vault.list().await.unwrap();
            assert_eq!(used[1].used_ms, Some(30));
            assert_eq!(used[0].used_ms, None, "not given, not marked");
            // A stale write is refused; a removal at the version read works.
            let stale = vault
                .put(&put("GITHUB_TOKEN", None, &[], version), 40)
                .await
                .unwrap_err();
            assert_eq!(stale.code(), "conflict");
            vault.remove("DEPLOY_KEY", used[0].version).await.unwrap();
            assert_eq!(vault.list().await.unwrap().len(), 1);
        });
    }

    #[test]
    fn a_new_secret_without_a_value_is_refused_and_nothing_written() {
        let vault = Vault::new(MemoryBackend::new(), testing::TableSealer::new());
        block_on(async {
            let refused = vault.put(&put("X", None, &[], 0), 1).await.unwrap_err();
            assert!(refused.to_string().contains("needs its value"), "{refused}");
            assert!(vault.list().await.unwrap().is_empty());
        });
    }

    #[test]
    fn the_keyring_name_is_made_once_per_workspace_and_never_exported() {
        block_on(async {
            let one = MemoryBackend::new();
            let name = keyring_name(one.as_ref()).await.unwrap();
            assert!(name.starts_with("workspace-") && name.len() == 42, "{name}");
            assert_eq!(keyring_name(one.as_ref()).await.unwrap(), name, "kept");
            let other = keyring_name(MemoryBackend::new().as_ref()).await.unwrap();
            assert_ne!(other, name, "another workspace, another key");
            let vault = Vault::new(one.clone(), testing::TableSealer::new());
            vault
                .put(&put("GITHUB_TOKEN", Some("ghp_s3cret"), &[], 0), 10)
                .await
                .unwrap();
            let exported = crate::export::export(one.as_ref(), None, Default::default())
                .await
                .unwrap();
            let text = serde_json::to_string(&exported).unwrap();
            assert!(
                !text.contains(&name) && !text.contains(KEYRING_NAME_KEY),
                "{text}"
            );
            assert!(!text.contains("GITHUB_TOKEN"), "{text}");
        });
    }
}

//! `IdbBackend` and `OpfsTree` in headless Chromium: the shared contract
//! suite, then what only a browser shows — a reload keeps a commit, two
//! handles race on one record, the change feed crosses handles (and shrugs
//! off junk on its channel), schema 1 upgrades, a database deleted or
//! upgraded underneath an open handle, a newer schema on disk, and an
//! upgrade blocked by a connection that does not let go. Then the vault's
//! sealer: AES-GCM under a key script cannot read, kept per workspace.
//!
//! Run with `wasm-bindgen-test-runner` as the wasm32 runner (see `cargo xtask test`).

#![cfg_attr(
    target_arch = "wasm32",
    expect(
        clippy::disallowed_methods,
        reason = "a test's own deadline and timings are real time: they bound and check what ran, not the code's clock"
    )
)]
#![cfg(target_arch = "wasm32")]
#![expect(
    clippy::unwrap_used,
    reason = "clippy does not see `wasm_bindgen_test` functions as tests; a panic is a failed test"
)]

use std::cell::RefCell;
use std::rc::Rc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use js_sys::{Function, Promise, Reflect};
use kiln_store::backend::{Backend, Change, Expect, Op, Record, Table};
use kiln_store::browser::sealer::{BrowserSealer, KEYS_DATABASE, KEYS_STORE};
use kiln_store::browser::{IdbBackend, OpfsTree, channel_name, testing};
use kiln_store::contract::{backend_suite, tree_suite};
use kiln_store::vault::{Sealed, Sealer, Vault};
use kiln_store::{SCHEMA_VERSION, StoreError};
use kiln_types::Redacted;
use kiln_types::vault::SecretPut;
use serde_json::json;
use wasm_bindgen::JsCast as _;
use wasm_bindgen::JsValue;
use wasm_bindgen::prelude::Closure;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};
use web_sys::{BroadcastChannel, CryptoKey, IdbDatabase, IdbFactory, IdbOpenDbRequest, IdbRequest};

wasm_bindgen_test_configure!(run_in_browser);

/// A name no other test (or earlier run) uses.
fn unique(label: &str) -> String {
    format!(
        "kiln-test-{label}-{}-{:08x}",
        js_sys::Date::now() as u64,
        (js_sys::Math::random() * f64::from(u32::MAX)) as u32
    )
}

async fn sleep(ms: u32) {
    let promise = Promise::new(&mut |resolve: Function, _reject| {
        let set_timeout: Function = Reflect::get(&js_sys::global(), &"setTimeout".into())
            .unwrap()
            .unchecked_into();
        set_timeout
            .call2(&JsValue::NULL, &resolve, &JsValue::from(ms))
            .unwrap();
    });
    JsFuture::from(promise).await.unwrap();
}

/// Polls `done` every 20 ms for up to 3 s.
async fn eventually(what: &str, done: impl Fn() -> bool) {
    for _ in 0..150 {
        if done() {
            return;
        }
        sleep(20).await;
    }
    panic!("{what}: not seen within 3 s");
}

fn indexed_db() -> IdbFactory {
    Reflect::get(&js_sys::global(), &"indexedDB".into())
        .unwrap()
        .unchecked_into()
}

/// Awaits a raw IndexedDB request: its result, or its error.
async fn raw(request: &IdbRequest) -> Result<JsValue, JsValue> {
    let promise = Promise::new(&mut |resolve: Function, reject: Function| {
        let answering = request.clone();
        let on_success = Closure::once_into_js(move || {
            let _ = resolve.call1(&JsValue::NULL, &answering.result().unwrap_or_default());
        });
        let failing = request.clone();
        let on_error = Closure::once_into_js(move || {
            let error = failing.error().ok().flatten().map(JsValue::from);
            let _ = reject.call1(&JsValue::NULL, &error.unwrap_or_default());
        });
        request.set_onsuccess(Some(on_success.unchecked_ref()));
        request.set_onerror(Some(on_error.unchecked_ref()));
    });
    JsFuture::from(promise).await
}

/// `indexedDB.open(name, version)` with no upgrade handler and no
/// `versionchange` handler: a connection that never lets go by itself.
async fn raw_open(name: &str, version: u32) -> IdbDatabase {
    let request: IdbOpenDbRequest = indexed_db().open_with_u32(name, version).unwrap();
    raw(&request).await.unwrap().unchecked_into()
}

/// `indexedDB.deleteDatabase(name)`.
async fn raw_delete(name: &str) {
    let request = indexed_db().delete_database(name).unwrap();
    raw(&request).await.unwrap();
}

fn put(table: Table, key: &str, value: serde_json::Value, expect: Expect) -> Vec<Op> {
    vec![Op::put(table, key, value, expect)]
}

#[wasm_bindgen_test]
async fn indexeddb_keeps_the_backend_contract() {
    let (name_a, name_b) = (unique("contract-a"), unique("contract-b"));
    let a = IdbBackend::open(&name_a).await.unwrap();
    let b = IdbBackend::open(&name_b).await.unwrap();
    assert_eq!(a.describe(), format!("IndexedDB `{name_a}`"));
    backend_suite(a, b).await;
    IdbBackend::delete(&name_a).await.unwrap();
    IdbBackend::delete(&name_b).await.unwrap();
}

#[wasm_bindgen_test]
async fn opfs_keeps_the_tree_contract() {
    let workspace = unique("tree");
    let tree = OpfsTree::open(&workspace).await.unwrap();
    tree_suite(tree).await;
    OpfsTree::delete_workspace(&workspace).await.unwrap();
    let refused = OpfsTree::open("a/b").await.err().unwrap();
    assert_eq!(refused.code(), "invalid", "{refused}");
}

#[wasm_bindgen_test]
async fn a_commit_is_there_after_reopening() {
    let name = unique("reopen");
    let first = IdbBackend::open(&name).await.unwrap();
    first
        .commit(put(Table::Config, "k", json!({"n": 1}), Expect::Absent))
        .await
        .unwrap();
    first
        .commit(put(Table::Config, "k", json!({"n": 2}), Expect::Version(1)))
        .await
        .unwrap();
    drop(first);
    let again = IdbBackend::open(&name).await.unwrap();
    let record = again.get(Table::Config, "k").await.unwrap();
    assert_eq!(
        record,
        Some(Record {
            key: "k".into(),
            version: 2,
            value: json!({"n": 2})
        })
    );
    drop(again);
    IdbBackend::delete(&name).await.unwrap();
}

#[wasm_bindgen_test]
async fn two_handles_racing_on_one_record_one_wins_one_conflicts() {
    let name = unique("race");
    let a = IdbBackend::open(&name).await.unwrap();
    let b = IdbBackend::open(&name).await.unwrap();
    a.commit(put(
        Table::Config,
        "provider:x",
        json!("v1"),
        Expect::Absent,
    ))
    .await
    .unwrap();
    let read_a = a.get(Table::Config, "provider:x").await.unwrap().unwrap();
    let read_b = b.get(Table::Config, "provider:x").await.unwrap().unwrap();
    assert_eq!((read_a.version, read_b.version), (1, 1));
    // Both commits start before either finishes; IndexedDB runs overlapping
    // read-write transactions in the order they were made.
    let (won, lost) = futures::future::join(
        a.commit(put(
            Table::Config,
            "provider:x",
            json!("from a"),
            Expect::Version(1),
        )),
        b.commit(put(
            Table::Config,
            "provider:x",
            json!("from b"),
            Expect::Version(1),
        )),
    )
    .await;
    assert_eq!(won.unwrap()[0].version, Some(2));
    let lost = lost.unwrap_err();
    assert!(
        matches!(&lost, StoreError::Conflict { expected, found, .. } if expected == "1" && found == "2"),
        "{lost}"
    );
    let stored = b.get(Table::Config, "provider:x").await.unwrap().unwrap();
    assert_eq!((stored.version, stored.value), (2, json!("from a")));
    drop((a, b));
    IdbBackend::delete(&name).await.unwrap();
}

#[wasm_bindgen_test]
async fn the_change_feed_crosses_handles_and_ignores_junk() {
    let name = unique("feed");
    let a = IdbBackend::open(&name).await.unwrap();
    let b = IdbBackend::open(&name).await.unwrap();
    let seen_by = |backend: &Rc<IdbBackend>| {
        let seen: Rc<RefCell<Vec<Change>>> = Rc::default();
        let sink = seen.clone();
        let subscription = backend.subscribe(Rc::new(move |changes: &[Change]| {
            sink.borrow_mut().extend_from_slice(changes)
        }));
        (seen, subscription)
    };
    let (seen_a, _subscription_a) = seen_by(&a);
    let (seen_b, _subscription_b) = seen_by(&b);

    a.commit(put(Table::Config, "f:1", json!(1), Expect::Any))
        .await
        .unwrap();
    let expected = vec![Change {
        table: Table::Config,
        key: "f:1".into(),
        version: Some(1),
    }];
    assert_eq!(*seen_a.borrow(), expected, "the writer sees it at once");
    eventually("b sees a's commit", || *seen_b.borrow() == expected).await;

    let junk = BroadcastChannel::new(&channel_name(&name)).unwrap();
    for message in [
        JsValue::from_str("not json"),
        JsValue::from_str("{}"),
        JsValue::from_str(r#"[{"table": "nope", "key": "x", "version": 1}]"#),
        JsValue::from_f64(42.0),
        JsValue::NULL,
        js_sys::Object::new().into(),
    ] {
        junk.post_message(&message).unwrap();
    }
    sleep(200).await;
    assert_eq!(*seen_b.borrow(), expected, "junk on the channel is ignored");
    junk.close();

    a.commit(vec![Op::delete(Table::Config, "f:1", Expect::Version(1))])
        .await
        .unwrap();
    eventually("b still listens after the junk", || {
        seen_b.borrow().len() == 2
    })
    .await;
    assert_eq!(seen_b.borrow()[1].version, None);
    assert_eq!(seen_a.borrow().len(), 2, "no echo of a's own commits");
    drop((a, b));
    IdbBackend::delete(&name).await.unwrap();
}

#[wasm_bindgen_test]
async fn schema_1_upgrades_with_its_words_indexed() {
    let name = unique("v1");
    let record = |key: &str, version: u64, value: serde_json::Value| Record {
        key: key.into(),
        version,
        value,
    };
    testing::create_v1(
        &name,
        &[
            (
                Table::Memories,
                record(
                    "m-1",
                    3,
                    json!({"id": "m-1", "text": "The favourite colour is teal", "agent": "ada", "created_ms": 1}),
                ),
            ),
            (
                Table::Jobs,
                record(
                    "j-1",
                    1,
                    json!({"id": "j-1", "kind": "program", "agent": "ada", "title": "Sum invoices", "status": "ok", "started_ms": 1}),
                ),
            ),
            (Table::Config, record("settings", 5, json!({"brake": true}))),
        ],
    )
    .await
    .unwrap();

    let backend = IdbBackend::open(&name).await.unwrap();
    let memory = backend.get(Table::Memories, "m-1").await.unwrap().unwrap();
    assert_eq!(memory.version, 3, "versions are kept");
    let found = backend
        .search(Table::Memories, &["teal".into(), "colour".into()])
        .await
        .unwrap();
    let keys: Vec<Vec<&str>> = found
        .iter()
        .map(|records| records.iter().map(|r| r.key.as_str()).collect())
        .collect();
    assert_eq!(keys, [["m-1"], ["m-1"]], "backfilled terms");
    let jobs = backend
        .search(Table::Jobs, &["invoice".into()])
        .await
        .unwrap();
    assert_eq!(jobs[0].len(), 1);
    let settings = backend.get(Table::Config, "settings").await.unwrap();
    assert_eq!(settings.map(|r| r.version), Some(5));
    backend
        .commit(put(
            Table::Memories,
            "m-1",
            json!({"id": "m-1", "text": "now green", "agent": "ada", "created_ms": 1}),
            Expect::Version(3),
        ))
        .await
        .unwrap();
    let found = backend
        .search(Table::Memories, &["teal".into(), "green".into()])
        .await
        .unwrap();
    assert_eq!((found[0].len(), found[1].len()), (0, 1));
    drop(backend);

    let reopened = raw_open(&name, SCHEMA_VERSION).await;
    assert_eq!(reopened.version(), f64::from(SCHEMA_VERSION));
    reopened.close();
    IdbBackend::delete(&name).await.unwrap();
}

#[wasm_bindgen_test]
async fn a_database_deleted_underneath_closes_the_handle() {
    let name = unique("deleted");
    let backend = IdbBackend::open(&name).await.unwrap();
    backend
        .commit(put(Table::Config, "k", json!(1), Expect::Absent))
        .await
        .unwrap();
    // Fires `versionchange` on the open handle, which must let go for the
    // delete to finish at all.
    raw_delete(&name).await;
    let closed = backend
        .commit(put(Table::Config, "k", json!(2), Expect::Any))
        .await
        .unwrap_err();
    assert!(
        matches!(&closed, StoreError::Closed { name: closed_name, .. } if *closed_name == name),
        "{closed}"
    );
    let message = closed.to_string();
    assert!(
        message.contains("deleted") && closed.hint() == Some("reload the page"),
        "{message}"
    );
    assert_eq!(
        backend.get(Table::Config, "k").await.unwrap_err().code(),
        "storage_closed"
    );
}

#[wasm_bindgen_test]
async fn a_database_upgraded_underneath_closes_the_handle() {
    let name = unique("upgraded");
    let backend = IdbBackend::open(&name).await.unwrap();
    let newer = raw_open(&name, SCHEMA_VERSION + 1).await;
    let closed = backend.count(Table::Config).await.unwrap_err();
    assert!(
        closed
            .to_string()
            .contains(&format!("schema {}", SCHEMA_VERSION + 1)),
        "{closed}"
    );
    newer.close();
    drop(backend);
    raw_delete(&name).await;
}

#[wasm_bindgen_test]
async fn a_newer_schema_on_disk_is_too_new() {
    let name = unique("too-new");
    raw_open(&name, 99).await.close();
    let refused = IdbBackend::open(&name).await.err().unwrap();
    assert_eq!(
        refused,
        StoreError::TooNew {
            name: name.clone(),
            found: 99,
            supported: SCHEMA_VERSION
        }
    );
    assert!(refused.hint().is_some(), "{refused}");
    raw_delete(&name).await;
}

#[wasm_bindgen_test]
async fn an_upgrade_blocked_by_another_connection_gives_up_after_5_s() {
    let name = unique("blocked");
    // An old connection (schema 1, no stores) that ignores `versionchange`.
    let old = raw_open(&name, 1).await;
    let started = js_sys::Date::now();
    let refused = IdbBackend::open(&name).await.err().unwrap();
    let waited = js_sys::Date::now() - started;
    assert_eq!(refused.code(), "storage_blocked", "{refused}");
    assert!(
        refused
            .hint()
            .is_some_and(|hint| hint.contains("close or reload the other tabs that have Kiln open")),
        "{}",
        refused.with_hint()
    );
    assert!(waited >= 4_900.0, "gave up after {waited} ms");
    // Once the old connection goes, the abandoned upgrade is aborted, not
    // left half done, and a new open upgrades properly.
    old.close();
    sleep(100).await;
    let backend = IdbBackend::open(&name).await.unwrap();
    backend
        .commit(put(
            Table::Memories,
            "m",
            json!({"text": "word"}),
            Expect::Absent,
        ))
        .await
        .unwrap();
    let found = backend
        .search(Table::Memories, &["word".into()])
        .await
        .unwrap();
    assert_eq!(found[0].len(), 1);
    drop(backend);
    IdbBackend::delete(&name).await.unwrap();
}

/// Whether `haystack` holds `needle` anywhere.
fn holds(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

/// What the keys database holds for `workspace`, read past the sealer.
async fn stored_key(workspace: &str) -> JsValue {
    let db = raw_open(KEYS_DATABASE, 1).await;
    let request = db
        .transaction_with_str(KEYS_STORE)
        .unwrap()
        .object_store(KEYS_STORE)
        .unwrap()
        .get(&JsValue::from_str(workspace))
        .unwrap();
    let value = raw(&request).await.unwrap();
    db.close();
    value
}

/// An opening the sealer refuses: the message says so, the hint says what
/// to do, and neither carries the value.
fn assert_unopenable(refused: &StoreError, value: &str) {
    let text = refused.with_hint().to_string();
    assert_eq!(refused.code(), "corrupt", "{text}");
    assert!(text.contains("cannot be opened here"), "{text}");
    assert_eq!(refused.hint(), Some("set the secret again"), "{text}");
    assert!(!text.contains(value), "{text}");
}

#[wasm_bindgen_test]
async fn a_sealed_secret_opens_again_and_reads_as_noise() {
    let workspace = unique("seal");
    let sealer = BrowserSealer::open(&workspace).await.unwrap();
    let plain = b"ghp_0123456789abcdefghijklmnopqrstuvwxyz".to_vec();
    let once = sealer.seal(plain.clone()).await.unwrap();
    let twice = sealer.seal(plain.clone()).await.unwrap();

    assert_eq!(sealer.open(once.clone()).await.unwrap(), plain);
    assert_eq!(sealer.open(twice.clone()).await.unwrap(), plain);
    let nonce = STANDARD.decode(&once.nonce).unwrap();
    let data = STANDARD.decode(&once.data).unwrap();
    assert_eq!(nonce.len(), 12);
    assert_eq!(data.len(), plain.len() + 16, "the ciphertext and its tag");
    assert!(!holds(&data, &plain) && !holds(&data, b"ghp_"), "{data:?}");
    assert!(!once.data.contains("ghp_"), "{once:?}");
    assert_ne!(once.nonce, twice.nonce, "a fresh nonce for each value");
    assert_ne!(once.data, twice.data);

    let mut changed = data.clone();
    changed[0] ^= 1;
    let tampered = Sealed {
        nonce: once.nonce.clone(),
        data: STANDARD.encode(&changed),
    };
    assert_unopenable(&sealer.open(tampered).await.unwrap_err(), "ghp_");
    let garbled = Sealed {
        nonce: "not base64!".into(),
        data: once.data,
    };
    assert_unopenable(&sealer.open(garbled).await.unwrap_err(), "ghp_");
    BrowserSealer::forget(&workspace).await.unwrap();
}

#[wasm_bindgen_test]
async fn the_vault_key_is_kept_where_script_cannot_read_it() {
    let workspace = unique("key");
    let _sealer = BrowserSealer::open(&workspace).await.unwrap();
    let key: CryptoKey = stored_key(&workspace).await.dyn_into().unwrap();
    assert!(!key.extractable(), "the stored key is not extractable");
    let algorithm = key.algorithm().unwrap();
    assert_eq!(
        Reflect::get(&algorithm, &"name".into()).unwrap(),
        JsValue::from_str("AES-GCM")
    );
    assert_eq!(
        Reflect::get(&algorithm, &"length".into()).unwrap(),
        JsValue::from_f64(256.0)
    );
    let crypto: web_sys::Crypto = Reflect::get(&js_sys::global(), &"crypto".into())
        .unwrap()
        .unchecked_into();
    for format in ["raw", "jwk"] {
        let exported = JsFuture::from(crypto.subtle().export_key(format, &key).unwrap()).await;
        let refused = exported.unwrap_err();
        assert_eq!(
            refused.unchecked_ref::<web_sys::DomException>().name(),
            "InvalidAccessError",
            "exportKey({format}) is refused"
        );
    }
    BrowserSealer::forget(&workspace).await.unwrap();
    assert!(stored_key(&workspace).await.is_undefined(), "forgotten");
}

#[wasm_bindgen_test]
async fn the_key_outlives_its_sealer_and_opens_nothing_of_another_workspace() {
    let (workspace, other) = (unique("ws-a"), unique("ws-b"));
    let value = "sk-live-outlives";
    let sealed = {
        let first = BrowserSealer::open(&workspace).await.unwrap();
        first.seal(value.as_bytes().to_vec()).await.unwrap()
    };
    let again = BrowserSealer::open(&workspace).await.unwrap();
    assert_eq!(
        again.open(sealed.clone()).await.unwrap(),
        value.as_bytes(),
        "the key was kept"
    );
    let stranger = BrowserSealer::open(&other).await.unwrap();
    assert_unopenable(&stranger.open(sealed.clone()).await.unwrap_err(), value);

    // A forgotten key is gone for good: a new one opens nothing old.
    BrowserSealer::forget(&workspace).await.unwrap();
    let renewed = BrowserSealer::open(&workspace).await.unwrap();
    assert_unopenable(&renewed.open(sealed).await.unwrap_err(), value);
    BrowserSealer::forget(&workspace).await.unwrap();
    BrowserSealer::forget(&other).await.unwrap();
}

#[wasm_bindgen_test]
async fn two_sealers_making_the_first_key_at_once_end_with_one() {
    let workspace = unique("two-tabs");
    let (a, b) = futures::future::join(
        BrowserSealer::open(&workspace),
        BrowserSealer::open(&workspace),
    )
    .await;
    let (a, b) = (a.unwrap(), b.unwrap());
    let from_a = a.seal(b"from a".to_vec()).await.unwrap();
    let from_b = b.seal(b"from b".to_vec()).await.unwrap();
    assert_eq!(b.open(from_a).await.unwrap(), b"from a");
    assert_eq!(a.open(from_b.clone()).await.unwrap(), b"from b");
    let later = BrowserSealer::open(&workspace).await.unwrap();
    assert_eq!(later.open(from_b).await.unwrap(), b"from b");
    BrowserSealer::forget(&workspace).await.unwrap();
}

#[wasm_bindgen_test]
async fn the_vault_stores_no_value_in_the_clear() {
    let workspace = unique("vault");
    let backend = IdbBackend::open(&workspace).await.unwrap();
    let sealer = BrowserSealer::open(&workspace).await.unwrap();
    let vault = Vault::new(backend.clone(), sealer);
    let value = "ghp_vaultvalue0123456789";
    let put = SecretPut {
        name: "GITHUB_TOKEN".into(),
        value: Some(Redacted::new(value)),
        origins: vec!["https://api.github.com".into()],
        agents: Vec::new(),
        version: 0,
    };
    vault.put(&put, 1_000).await.unwrap();

    let (opened, problems) = vault
        .for_agent("ada", &["GITHUB_TOKEN".into()], 2_000)
        .await
        .unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(opened.len(), 1);
    assert_eq!(opened[0].value.expose(), value);

    // Every stored byte of every table, read past the backend: not the
    // value, nor the value merely encoded.
    let encoded = STANDARD.encode(value);
    let db = raw_open(&workspace, SCHEMA_VERSION).await;
    let mut records = 0;
    for table in Table::ALL {
        let request = db
            .transaction_with_str(table.name())
            .unwrap()
            .object_store(table.name())
            .unwrap()
            .get_all()
            .unwrap();
        let all: js_sys::Array = raw(&request).await.unwrap().unchecked_into();
        for record in all.iter() {
            records += 1;
            let text = String::from(js_sys::JSON::stringify(&record).unwrap());
            assert!(!text.contains(value), "{table}: {text}");
            assert!(!text.contains("ghp_"), "{table}: {text}");
            assert!(!text.contains(&encoded[..20]), "merely base64: {text}");
        }
    }
    assert_eq!(records, 1, "the secret's one record was read");
    db.close();
    drop((vault, backend));
    IdbBackend::delete(&workspace).await.unwrap();
    BrowserSealer::forget(&workspace).await.unwrap();
}

//! Settings → Data: what the workspace takes of this browser's storage and
//! how much there is (`navigator.storage.estimate()`), "keep my data"
//! (`navigator.storage.persist()`: without it the browser may evict the
//! workspace under storage pressure), the whole workspace exported as one
//! file and imported back, and deleting everything.

use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::{Value, json};
use wasm_bindgen::JsCast as _;
use wasm_bindgen_futures::JsFuture;

use crate::storage::{StorageSignals, Stores};
use crate::storage_model::ErrorText;

/// What the browser says of the origin's storage.
#[derive(Clone, Debug, PartialEq)]
struct Estimate {
    usage: f64,
    quota: f64,
}

/// Bytes for people: "12.3 MB" (decimal units, as browsers report quota).
pub(crate) fn bytes_text(bytes: f64) -> String {
    const UNITS: [&str; 5] = ["bytes", "KB", "MB", "GB", "TB"];
    let mut value = bytes.max(0.0);
    let mut unit = 0;
    while value >= 1000.0 && unit < UNITS.len() - 1 {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{value:.0} bytes")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

fn storage_manager() -> Option<web_sys::StorageManager> {
    web_sys::window().map(|window| window.navigator().storage())
}

async fn estimate() -> Option<Estimate> {
    let promise = storage_manager()?.estimate().ok()?;
    let value = JsFuture::from(promise).await.ok()?;
    let estimate: web_sys::StorageEstimate = value.unchecked_into();
    Some(Estimate {
        usage: estimate.get_usage().unwrap_or(0.0),
        quota: estimate.get_quota().unwrap_or(0.0),
    })
}

/// Whether the browser keeps the workspace (`Some(true)`), may evict it
/// (`Some(false)`), or cannot say.
pub(crate) async fn persisted() -> Option<bool> {
    let promise = storage_manager()?.persisted().ok()?;
    JsFuture::from(promise).await.ok()?.as_bool()
}

async fn persist() -> Option<bool> {
    let promise = storage_manager()?.persist().ok()?;
    JsFuture::from(promise).await.ok()?.as_bool()
}

/// Asks the browser to keep the workspace; answers what it said, as a sentence.
pub(crate) async fn ask_to_keep() -> (Option<bool>, String) {
    let kept = persist().await;
    let said = match kept {
        Some(true) => "This browser keeps your workspace: it will not delete it to free space.",
        Some(false) => {
            "This browser did not agree to keep it for now (browsers decide from how often you use a site); \
             it is still saved, and you can export it below."
        }
        None => "This browser cannot be asked to keep it; export it below to keep a copy.",
    };
    (kept, said.to_owned())
}

/// Where this browser remembers that the person was asked once.
const KEEP_ASKED: &str = "kiln:keep-asked";

fn keep_asked() -> bool {
    web_sys::window()
        .and_then(|window| window.local_storage().ok().flatten())
        .and_then(|storage| storage.get_item(KEEP_ASKED).ok().flatten())
        .is_some()
}

fn mark_keep_asked() {
    if let Some(storage) =
        web_sys::window().and_then(|window| window.local_storage().ok().flatten())
    {
        let _ = storage.set_item(KEEP_ASKED, "1");
    }
}

/// Asked once, in the chat, when the first conversation has been kept and the
/// browser may still evict the workspace: whether to ask it to keep it, and
/// why. Either answer is remembered in this browser; Settings → Your data
/// asks again on demand. `kept` is whether a conversation is kept yet.
#[component]
pub(crate) fn KeepOffer(kept: Signal<bool>) -> impl IntoView {
    let offered = RwSignal::new(false);
    let said = RwSignal::new(None::<String>);
    Effect::new(move |_| {
        if !kept.get() || keep_asked() || offered.get_untracked() {
            return;
        }
        spawn_local(async move {
            if persisted().await == Some(false) && !keep_asked() {
                offered.set(true);
            }
        });
    });
    let keep = move || {
        mark_keep_asked();
        offered.set(false);
        spawn_local(async move {
            let (_, sentence) = ask_to_keep().await;
            said.set(Some(sentence.replace(" below", " in Settings → Your data")));
        });
    };
    let not_now = move || {
        mark_keep_asked();
        offered.set(false);
    };
    view! {
        {move || offered.get().then(|| view! {
            <section class="keep-offer" data-testid="keep-offer" aria-labelledby="keep-offer-title">
                <h3 id="keep-offer-title">"Keep your conversations?"</h3>
                <p>"Everything Kiln keeps — conversations, memory, files, keys — lives only in this browser. When space runs low, a browser may delete a site's data unless it was asked to keep it."</p>
                <div class="actions">
                    <button type="button" data-testid="keep-offer-yes" on:click=move |_| keep()>"Keep my data"</button>
                    <button type="button" class="secondary" data-testid="keep-offer-no" on:click=move |_| not_now()>"Not now"</button>
                </div>
                <p class="hint">"Settings → Your data can ask again, and export a copy."</p>
            </section>
        })}
        {move || said.get().map(|text| view! {
            <p class="keep-said hint" role="status" data-testid="keep-offer-said">{crate::said::said(text)}" "
                <button type="button" class="icon" data-testid="keep-offer-dismiss" aria-label="Dismiss"
                    on:click=move |_| said.set(None)>"\u{2715}"</button>
            </p>
        })}
    }
}

/// Offers `text` as a download named `name`.
fn download(name: &str, text: &str) -> Result<(), String> {
    let parts = js_sys::Array::of1(&wasm_bindgen::JsValue::from_str(text));
    let options = web_sys::BlobPropertyBag::new();
    options.set_type("application/json");
    let blob = web_sys::Blob::new_with_str_sequence_and_options(&parts, &options)
        .map_err(|_| "the browser could not make the file".to_owned())?;
    let url = web_sys::Url::create_object_url_with_blob(&blob)
        .map_err(|_| "the browser could not offer the file".to_owned())?;
    let anchor: web_sys::HtmlAnchorElement = web_sys::window()
        .and_then(|window| window.document())
        .and_then(|document| document.create_element("a").ok())
        .and_then(|element| element.dyn_into().ok())
        .ok_or_else(|| "the page has no document".to_owned())?;
    anchor.set_href(&url);
    anchor.set_download(name);
    anchor.click();
    let _ = web_sys::Url::revoke_object_url(&url);
    Ok(())
}

/// The export's file name: the day it was made.
fn export_name() -> String {
    let date = js_sys::Date::new_0();
    format!(
        "kiln-workspace-{:04}-{:02}-{:02}.json",
        date.get_full_year(),
        date.get_month() + 1,
        date.get_date()
    )
}

/// What an import or a delete did, in a sentence.
pub(crate) fn summary_line(verb: &str, summary: &Value) -> String {
    let records: u64 = summary["records"]
        .as_object()
        .map(|tables| tables.values().filter_map(Value::as_u64).sum())
        .unwrap_or(0);
    let files = summary["files"].as_u64().unwrap_or(0);
    let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    format!(
        "{verb} {} and {}.",
        plural(records, "record", "records"),
        plural(files, "file", "files")
    )
}

#[component]
pub(crate) fn DataSettings(storage: StorageSignals) -> impl IntoView {
    let usage = LocalResource::new(move || {
        storage.revisions.memories.track();
        storage.revisions.messages.track();
        estimate()
    });
    let kept = RwSignal::new(None::<bool>);
    let said = RwSignal::new(None::<String>);
    spawn_local(async move {
        kept.try_set(persisted().await);
    });
    let keep = move || {
        spawn_local(async move {
            let (answer, sentence) = ask_to_keep().await;
            kept.try_set(answer);
            said.try_set(Some(sentence));
        });
    };
    let include_keys = RwSignal::new(false);
    let status = RwSignal::new(None::<Result<String, ErrorText>>);
    let confirming = RwSignal::new(false);
    let busy = RwSignal::new(false);
    let run =
        move |work: fn(
            Stores,
            bool,
        )
            -> futures::future::LocalBoxFuture<'static, Result<String, ErrorText>>| {
            let keys = include_keys.get_untracked();
            busy.set(true);
            storage.with_stores(move |stores| async move {
                let done = work(stores, keys).await;
                status.try_set(Some(done));
                busy.try_set(false);
            });
        };
    let export = move || {
        run(|stores, keys| {
            Box::pin(async move {
                let doc: Value = stores
                    .op("export", json!({"include_keys": keys}))
                    .await
                    .map_err(|problem| ErrorText::new(&problem))?;
                let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
                download(&export_name(), &text).map_err(ErrorText::plain)?;
                Ok(format!(
                    "Exported {} as one file.",
                    bytes_text(text.len() as f64)
                ))
            })
        });
    };
    let file_input = NodeRef::<leptos::html::Input>::new();
    let import = move || {
        let Some(file) = file_input
            .get_untracked()
            .and_then(|input| input.files())
            .and_then(|files| files.get(0))
        else {
            return;
        };
        busy.set(true);
        storage.with_stores(move |stores| async move {
            let done = async {
                let text = JsFuture::from(file.text())
                    .await
                    .ok()
                    .and_then(|text| text.as_string())
                    .ok_or_else(|| ErrorText::plain("The file could not be read.".to_owned()))?;
                let doc: Value = serde_json::from_str(&text).map_err(|error| {
                    ErrorText::plain(format!(
                        "The file is not a Kiln export (not JSON: {error})."
                    ))
                })?;
                let summary: Value = stores.op("import", doc).await.map_err(|problem| {
                    ErrorText::with_prefix("Nothing was imported: ", &problem)
                })?;
                // Its records reached the views through the change feed, maybe
                // before its files were written; the files are listed again now.
                storage.revisions.files.try_update(|n| *n += 1);
                Ok(summary_line("Imported", &summary))
            }
            .await;
            status.try_set(Some(done));
            busy.try_set(false);
            if let Some(input) = file_input.get_untracked() {
                input.set_value("");
            }
        });
    };
    let clear = move || {
        confirming.set(false);
        crate::chat::remember_thread(None);
        run(|stores, _| {
            Box::pin(async move {
                let summary: Value = stores
                    .op("workspace.clear", json!({"confirm": "delete everything"}))
                    .await
                    .map_err(|problem| ErrorText::new(&problem))?;
                // Nothing on the page may show what is gone: it starts again, empty.
                if let Some(window) = web_sys::window() {
                    let _ = window.location().replace("#/chat");
                    let _ = window.location().reload();
                }
                Ok(summary_line("Deleted", &summary))
            })
        });
    };
    let usage_line = move || {
        usage.get().map(|estimate| match estimate {
            Some(Estimate { usage, quota }) if quota > 0.0 => format!(
                "This site uses {} of the {} this browser allows it ({:.1} %).",
                bytes_text(usage),
                bytes_text(quota),
                usage / quota * 100.0
            ),
            _ => "This browser does not say how much storage the site uses.".to_owned(),
        })
    };
    view! {
        <section class="data-settings" data-testid="data-settings" aria-labelledby="data-title">
            <h3 id="data-title">"Your data"</h3>
            <p>"Conversations, memory, files, providers and settings are kept in this browser only, for this site."</p>
            <p data-testid="storage-usage">{usage_line}</p>
            <div class="keep">
                <p data-testid="persist-state">{move || match kept.get() {
                    Some(true) => "Kept: this browser will not delete your workspace to free space.",
                    Some(false) => "Not kept yet: under storage pressure this browser may delete the workspace.",
                    None => "This browser does not say whether it keeps the workspace.",
                }}</p>
                <button type="button" data-testid="persist-ask" hidden=move || kept.get() == Some(true)
                    on:click=move |_| keep()>"Keep my data"</button>
                {move || said.get().map(|text| view! { <p class="hint" data-testid="persist-said" role="status">{crate::said::said(text)}</p> })}
            </div>
            <div class="export">
                <label class="inline"><input type="checkbox" data-testid="export-keys" prop:checked=include_keys
                    on:change=move |event| include_keys.set(event_target_checked(&event)) />
                    " Include API keys (anyone with the file can use them)"</label>
                <div class="actions">
                    <button type="button" data-testid="export-workspace" disabled=busy on:click=move |_| export()>"Export everything"</button>
                    <label class="button secondary file-button">"Import a file\u{2026}"
                        <input type="file" accept=".json,application/json" data-testid="import-workspace" node_ref=file_input
                            disabled=busy on:change=move |_| import() /></label>
                </div>
                <p class="hint">"An import adds to what is here; a record with the same key is replaced."</p>
            </div>
            <div class="danger-zone">
                {move || if confirming.get() {
                    view! {
                        <p role="alert">"Delete every conversation, memory, file, provider and setting of this workspace? This cannot be undone."</p>
                        <div class="actions">
                            <button type="button" class="danger" data-testid="clear-confirm" on:click=move |_| clear()>"Delete everything"</button>
                            <button type="button" class="secondary" data-testid="clear-cancel" on:click=move |_| confirming.set(false)>"Cancel"</button>
                        </div>
                    }.into_any()
                } else {
                    view! {
                        <button type="button" class="secondary danger" data-testid="clear-workspace" disabled=busy
                            on:click=move |_| confirming.set(true)>"Delete everything\u{2026}"</button>
                    }.into_any()
                }}
            </div>
            {move || status.get().map(|done| match done {
                Ok(text) => view! { <p class="status success" data-testid="data-status" role="status">{crate::said::said(text)}</p> }.into_any(),
                Err(error) => crate::storage::error_alert("data-error", error).into_any(),
            })}
        </section>
    }
}

#[cfg(test)]
mod tests {
    use super::{bytes_text, summary_line};
    use serde_json::json;

    #[test]
    fn sizes_and_summaries_read_as_sentences() {
        assert_eq!(bytes_text(0.0), "0 bytes");
        assert_eq!(bytes_text(999.0), "999 bytes");
        assert_eq!(bytes_text(12_345_678.0), "12.3 MB");
        assert_eq!(bytes_text(2.5e12), "2.5 TB");
        assert_eq!(
            summary_line(
                "Imported",
                &json!({"records": {"memories": 2, "threads": 1}, "files": 1})
            ),
            "Imported 3 records and 1 file."
        );
        assert_eq!(
            summary_line("Deleted", &json!({})),
            "Deleted 0 records and 0 files."
        );
    }
}

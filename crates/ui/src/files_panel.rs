//! The Files panel: the workspace's files (OPFS) by folder — a breadcrumb,
//! folders first, a file opened as text (or its size when it is binary),
//! uploads into the open folder, downloads through an object URL, new
//! folders, and deleting one file or one empty folder (the store refuses the
//! rest, and says why).

use crate::said::said;
use leptos::prelude::*;
use leptos::task::spawn_local;
use wasm_bindgen::JsCast as _;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use kiln_types::records::{DirEntry, MAX_FILE_BYTES};
use serde::Deserialize;
use serde_json::json;

use crate::storage::{
    StorageSignals, Stores, error_alert, load_status, local_time, runtime_problem,
};
use crate::storage_model::{ErrorText, Preview, breadcrumb, child_path, format_bytes, preview};

/// A file the person opened.
#[derive(Clone, Debug, PartialEq)]
struct Opened {
    path: String,
    preview: Preview,
}

/// The panel's state and what the person can do in it. Copy: every row's
/// buttons hold one.
#[derive(Clone, Copy)]
struct Files {
    storage: StorageSignals,
    /// The open folder.
    dir: RwSignal<String>,
    /// What the last action said went wrong.
    error: RwSignal<Option<ErrorText>>,
    /// What the last action did.
    status: RwSignal<Option<String>>,
    opened: RwSignal<Option<Opened>>,
    /// Bumped after this panel's own writes; a finished job (a program may
    /// have written files) reloads the listing too.
    reload: RwSignal<u64>,
}

impl Files {
    fn new(storage: StorageSignals) -> Self {
        Self {
            storage,
            dir: RwSignal::new(String::new()),
            error: RwSignal::new(None),
            status: RwSignal::new(None),
            opened: RwSignal::new(None),
            reload: RwSignal::new(0),
        }
    }

    fn failed(self, before: &str, failure: &kiln_types::runtime::Problem) {
        self.error
            .set(Some(ErrorText::with_prefix(before, failure)));
    }

    /// Opens the folder `path`.
    fn go(self, path: String) {
        self.opened.set(None);
        self.error.set(None);
        self.status.set(None);
        self.dir.set(path);
    }

    /// A write succeeded: says so and lists the folder again.
    fn done(self, said: String) {
        self.error.set(None);
        self.status.set(Some(said));
        self.reload.update(|n| *n += 1);
    }

    fn open(self, path: String) {
        self.storage.with_stores(move |tree| async move {
            match read(&tree, &path).await {
                Ok(bytes) => {
                    self.error.set(None);
                    self.opened.set(Some(Opened {
                        preview: preview(&bytes),
                        path,
                    }));
                }
                Err(failure) => self.failed(&format!("`{path}` could not be opened: "), &failure),
            }
        });
    }

    fn download(self, path: String, name: String) {
        self.storage.with_stores(move |tree| async move {
            let result = match read(&tree, &path).await {
                Ok(bytes) => save_as(&name, &bytes).map_err(ErrorText::plain),
                Err(failure) => Err(ErrorText::with_prefix(
                    &format!("`{path}` could not be read: "),
                    &failure,
                )),
            };
            match result {
                Ok(()) => self.status.set(Some(format!("Downloaded `{path}`."))),
                Err(problem) => self.error.set(Some(problem)),
            }
        });
    }

    fn remove(self, path: String, is_dir: bool) {
        self.storage.with_stores(move |tree| async move {
            match tree.act("files.remove", json!({"path": path})).await {
                Ok(()) => {
                    if self
                        .opened
                        .with_untracked(|o| o.as_ref().is_some_and(|o| o.path == path))
                    {
                        self.opened.set(None);
                    }
                    self.done(format!(
                        "Deleted the {} `{path}`.",
                        if is_dir { "folder" } else { "file" }
                    ));
                }
                Err(failure) => self.failed(&format!("`{path}` was not deleted: "), &failure),
            }
        });
    }

    /// Makes the folder `name` in the open folder; `made` runs once it is made.
    fn make_folder(self, name: &str, made: impl FnOnce() + 'static) {
        let path = match child_path(&self.dir.get_untracked(), name) {
            Ok(path) => path,
            Err(problem) => {
                self.error.set(Some(ErrorText::plain(problem)));
                return;
            }
        };
        self.storage.with_stores(move |tree| async move {
            match tree.act("files.mkdir", json!({"path": path})).await {
                Ok(()) => {
                    made();
                    self.done(format!("Made the folder `{path}`."));
                }
                Err(failure) => {
                    self.failed(&format!("The folder `{path}` was not made: "), &failure);
                }
            }
        });
    }

    /// Uploads the files picked in `input` into the open folder, one by one,
    /// stopping at the first that fails; `busy` is set meanwhile.
    fn upload(self, input: web_sys::HtmlInputElement, busy: RwSignal<bool>) {
        let Some(list) = input.files() else { return };
        let files: Vec<web_sys::File> = (0..list.length()).filter_map(|i| list.get(i)).collect();
        if files.is_empty() {
            return;
        }
        let folder = self.dir.get_untracked();
        self.storage.with_stores(move |tree| {
            busy.set(true);
            self.status
                .set(Some(format!("Uploading {} file(s)…", files.len())));
            async move {
                let mut written = Vec::new();
                let mut failed = None;
                for file in files {
                    match upload_one(&tree, &folder, &file).await {
                        Ok(said) => written.push(said),
                        Err(problem) => {
                            failed = Some(problem);
                            break;
                        }
                    }
                }
                input.set_value("");
                busy.set(false);
                self.reload.update(|n| *n += 1);
                self.status.set(
                    (!written.is_empty()).then(|| format!("Uploaded {}.", written.join(", "))),
                );
                self.error.set(failed);
            }
        });
    }
}

#[component]
pub(crate) fn FilesPanel(storage: StorageSignals) -> impl IntoView {
    let files = Files::new(storage);
    let listing = LocalResource::new(move || {
        let tree = storage.stores.get();
        let folder = files.dir.get();
        files.reload.track();
        storage.revisions.jobs.track();
        storage.revisions.files.track();
        async move {
            let Some(tree) = tree else { return Ok(None) };
            let mut listed = tree
                .op::<Vec<DirEntry>>("files.list", json!({"path": folder}))
                .await
                .map_err(|failure| {
                    ErrorText::with_prefix(
                        &format!("The folder `{folder}` could not be listed: "),
                        &failure,
                    )
                })?;
            // Folders first, then by name (the tree promises it; the page keeps it).
            listed.sort_by(|a, b| b.is_dir.cmp(&a.is_dir).then_with(|| a.name.cmp(&b.name)));
            Ok(Some(listed))
        }
    });
    let nothing_listed = move || {
        listing.with(|listed| !matches!(listed, Some(Ok(Some(entries))) if !entries.is_empty()))
    };
    let rows = move || {
        listing.with(|listed| match listed {
            Some(Ok(Some(entries))) => entries
                .iter()
                .map(|entry| file_row(entry, files))
                .collect_view(),
            _ => Vec::new(),
        })
    };
    let unavailable = move || storage.settled.get() && storage.stores.with(Option::is_none);

    view! {
        <section class="storage-panel files-panel" data-testid="files-panel" aria-labelledby="files-title">
            <h2 id="files-title">"Files"</h2>
            {move || unavailable().then(|| view! {
                <p class="hint" data-testid="files-unavailable">"Workspace files are not available (see the message at the top)."</p>
            })}
            <Breadcrumb files=files />
            <FileActions files=files />
            <p class="hint" role="status" data-testid="files-status">{move || files.status.get().map(said)}</p>
            {move || files.error.get().map(|error| error_alert("files-error", error))}
            {load_status(listing, "files-list-error", "files-empty", |entries: &Vec<DirEntry>| {
                entries.is_empty().then(|| "This folder is empty.".to_owned())
            })}
            <table class="data-table file-table" data-testid="file-list" hidden=nothing_listed>
                <thead><tr><th>"Name"</th><th>"Size"</th><th>"Changed"</th><th><span class="visually-hidden">"Actions"</span></th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
            {move || files.opened.get().map(|file| file_view(file, files))}
        </section>
    }
}

/// The open folder's path, each part a button back to it.
#[component]
fn Breadcrumb(files: Files) -> impl IntoView {
    let crumbs = move || {
        let parts = breadcrumb(&files.dir.get());
        let last = parts.len() - 1;
        parts
            .into_iter()
            .enumerate()
            .map(|(index, crumb)| {
                let here = index == last;
                let path = crumb.path.clone();
                view! {
                    <li>
                        <button type="button" class="link" aria-current=here.then_some("page")
                            data-testid="files-crumb" disabled=here on:click=move |_| files.go(path.clone())>{crumb.label}</button>
                    </li>
                }
            })
            .collect_view()
    };
    view! {
        <nav aria-label="Folder">
            <ol class="breadcrumb" data-testid="files-breadcrumb">{crumbs}</ol>
        </nav>
    }
}

/// Uploading into the open folder, and making a folder in it.
#[component]
fn FileActions(files: Files) -> impl IntoView {
    let folder_name = RwSignal::new(String::new());
    let busy = RwSignal::new(false);
    let upload_input = NodeRef::<leptos::html::Input>::new();
    let no_tree = move || files.storage.stores.with(Option::is_none);
    let upload = move || {
        if let Some(input) = upload_input.get_untracked() {
            files.upload(input, busy);
        }
    };
    let make_folder = move || {
        files.make_folder(&folder_name.get_untracked(), move || {
            folder_name.set(String::new())
        });
    };
    view! {
        <div class="files-actions">
            <label class="upload">
                "Upload files into this folder "
                <input type="file" multiple=true data-testid="files-upload" node_ref=upload_input
                    disabled=move || busy.get() || no_tree() on:change=move |_| upload() />
            </label>
            <form class="new-folder" on:submit=move |event| { event.prevent_default(); make_folder(); }>
                <label for="new-folder-name">"New folder"</label>
                <input id="new-folder-name" data-testid="files-folder-name" autocomplete="off" placeholder="name"
                    prop:value=folder_name on:input=move |event| folder_name.set(event_target_value(&event)) />
                <button type="submit" class="secondary small" data-testid="files-new-folder" disabled=no_tree>"Make folder"</button>
            </form>
        </div>
    }
}

/// One entry of the open folder: a folder opens, a file shows; files download; both delete.
fn file_row(entry: &DirEntry, files: Files) -> impl IntoView + use<> {
    let path = entry.path.clone();
    let name = entry.name.clone();
    let is_dir = entry.is_dir;
    let open_label = if is_dir {
        format!("Open the folder {name}")
    } else {
        format!("Open {name}")
    };
    let for_open = path.clone();
    let for_remove = path.clone();
    let shown_name = if is_dir {
        format!("{name}/")
    } else {
        name.clone()
    };
    let download = (!is_dir).then(|| {
        let name = name.clone();
        view! {
            <button type="button" class="secondary small" data-testid="file-download"
                aria-label=format!("Download {name}") on:click=move |_| files.download(path.clone(), name.clone())>"Download"</button>
        }
    });
    view! {
        <tr data-testid="file-item" data-name=name.clone() data-kind=if is_dir { "folder" } else { "file" }>
            <td>
                <button type="button" class="link" class:folder=is_dir aria-label=open_label
                    on:click=move |_| if is_dir { files.go(for_open.clone()) } else { files.open(for_open.clone()) }>
                    {shown_name}
                </button>
            </td>
            <td class="number">{if is_dir { "folder".to_owned() } else { format_bytes(entry.size) }}</td>
            <td>{entry.modified_ms.map(local_time).unwrap_or_default()}</td>
            <td class="row-actions">
                {download}
                <button type="button" class="secondary small danger" data-testid="file-delete"
                    aria-label=format!("Delete {name}") on:click=move |_| files.remove(for_remove.clone(), is_dir)>"Delete"</button>
            </td>
        </tr>
    }
}

/// The file the person opened: its text, or its size when it is binary.
fn file_view(file: Opened, files: Files) -> impl IntoView {
    view! {
        <div class="file-view" data-testid="file-view">
            <h3><code>{file.path.clone()}</code></h3>
            {match file.preview {
                Preview::Text { text, cut } => view! {
                    <pre data-testid="file-text">{text}</pre>
                    {cut.then(|| view! { <p class="hint">"Only the beginning is shown; download the file for all of it."</p> })}
                }.into_any(),
                Preview::Binary { bytes } => view! {
                    <p data-testid="file-binary">{format!("A binary file of {}. Download it to open it.", format_bytes(bytes))}</p>
                }.into_any(),
            }}
            <button type="button" class="secondary small" data-testid="file-close" on:click=move |_| files.opened.set(None)>"Close"</button>
        </div>
    }
}

/// A file's bytes, as `files.read` answers them (text, or base64).
async fn read(tree: &Stores, path: &str) -> Result<Vec<u8>, kiln_types::runtime::Problem> {
    #[derive(Deserialize)]
    struct Read {
        #[serde(default)]
        text: Option<String>,
        #[serde(default)]
        base64: Option<String>,
    }
    let read: Read = tree.op("files.read", json!({"path": path})).await?;
    match (read.text, read.base64) {
        (Some(text), _) => Ok(text.into_bytes()),
        (None, Some(encoded)) => STANDARD.decode(encoded).map_err(|error| {
            runtime_problem(format!(
                "the runtime worker sent `{path}` as bad base64: {error}"
            ))
        }),
        (None, None) => Err(runtime_problem(format!(
            "the runtime worker sent `{path}` with neither text nor bytes"
        ))),
    }
}

/// Reads one picked file and writes it into `folder`; answers what was written.
async fn upload_one(
    tree: &Stores,
    folder: &str,
    file: &web_sys::File,
) -> Result<String, ErrorText> {
    let name = file.name();
    let path = child_path(folder, &name).map_err(ErrorText::plain)?;
    let size = file.size() as u64;
    if size > MAX_FILE_BYTES as u64 {
        return Err(ErrorText::plain(format!(
            "`{name}` is {}; the workspace takes files of up to {}.",
            format_bytes(size),
            format_bytes(MAX_FILE_BYTES as u64)
        )));
    }
    let buffer = wasm_bindgen_futures::JsFuture::from(file.array_buffer())
        .await
        .map_err(|error| {
            ErrorText::plain(format!(
                "`{name}` could not be read: {}",
                crate::error_text(&error)
            ))
        })?;
    let bytes = js_sys::Uint8Array::new(&buffer).to_vec();
    let content = match String::from_utf8(bytes) {
        Ok(text) => json!({"path": path, "text": text}),
        Err(bytes) => json!({"path": path, "base64": STANDARD.encode(bytes.into_bytes())}),
    };
    tree.act("files.write", content).await.map_err(|failure| {
        ErrorText::with_prefix(&format!("`{path}` was not uploaded: "), &failure)
    })?;
    Ok(format!("`{path}` ({})", format_bytes(size)))
}

/// Hands `bytes` to the browser as a download named `name`: a Blob, an
/// object URL and a temporary `<a download>`.
fn save_as(name: &str, bytes: &[u8]) -> Result<(), String> {
    let problem = |error: wasm_bindgen::JsValue| {
        format!(
            "`{name}` could not be downloaded: {}",
            crate::error_text(&error)
        )
    };
    let document = web_sys::window()
        .and_then(|window| window.document())
        .ok_or_else(|| "there is no document to download into".to_owned())?;
    let parts = js_sys::Array::of1(&js_sys::Uint8Array::from(bytes));
    let options = web_sys::BlobPropertyBag::new();
    options.set_type("application/octet-stream");
    let blob =
        web_sys::Blob::new_with_u8_array_sequence_and_options(&parts, &options).map_err(problem)?;
    let url = web_sys::Url::create_object_url_with_blob(&blob).map_err(problem)?;
    let link: web_sys::HtmlAnchorElement = document
        .create_element("a")
        .map_err(problem)?
        .dyn_into()
        .map_err(|_| "the page could not make a link".to_owned())?;
    link.set_href(&url);
    link.set_download(name);
    link.set_hidden(true);
    let body = document
        .body()
        .ok_or_else(|| "the page has no body".to_owned())?;
    body.append_child(&link).map_err(problem)?;
    link.click();
    link.remove();
    // The download reads the URL after this task: free it a little later.
    spawn_local(async move {
        crate::sleep_ms(10_000).await;
        let _ = web_sys::Url::revoke_object_url(&url);
    });
    Ok(())
}

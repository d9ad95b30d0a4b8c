//! [`OpfsTree`]: a workspace's files in the browser's origin private file
//! system, under `kiln-workspaces/<workspace>/`.
//!
//! A write goes through `createWritable()`: the browser writes a swap file
//! and puts it in place on `close()`, so a crash leaves the old bytes or the
//! new ones, never a mix. Folder-versus-file mistakes and missing paths
//! answer the same errors, worded the same, as `native::MemoryTree` (the
//! shared contract checks them).

use std::rc::Rc;

use js_sys::{Promise, Reflect, Uint8Array};
use wasm_bindgen::JsCast as _;
use web_sys::{
    File, FileSystemDirectoryHandle, FileSystemFileHandle, FileSystemGetDirectoryOptions,
    FileSystemGetFileOptions, FileSystemRemoveOptions, FileSystemWritableFileStream,
    StorageManager,
};

use super::js::{JsFailure, cast, global_object, settle};
use crate::backend::StoreFuture;
use crate::error::StoreError;
use crate::files::{DirEntry, FileStat, FileTree, WorkspacePath};

/// The OPFS folder that holds one folder per workspace.
pub const WORKSPACES_FOLDER: &str = "kiln-workspaces";

/// One workspace's folder in OPFS.
pub struct OpfsTree {
    workspace: String,
    root: FileSystemDirectoryHandle,
}

/// A path that exists.
enum Node {
    Dir(FileSystemDirectoryHandle),
    File(FileSystemFileHandle),
}

impl OpfsTree {
    /// Opens (creating) the folder `kiln-workspaces/<workspace>`.
    ///
    /// # Errors
    ///
    /// [`StoreError::Invalid`] for a workspace name that is not one folder
    /// name, [`StoreError::Unavailable`] where OPFS is missing or refused.
    pub async fn open(workspace: &str) -> Result<Rc<Self>, StoreError> {
        check_workspace(workspace)?;
        let workspaces = workspaces_folder().await?;
        let root = child_folder(&workspaces, workspace, true)
            .await
            .map_err(|failure| {
                opened_error(&format!("{WORKSPACES_FOLDER}/{workspace}"), &failure)
            })?;
        Ok(Rc::new(Self {
            workspace: workspace.to_owned(),
            root,
        }))
    }

    /// Deletes the workspace's folder and everything in it (a missing one is
    /// fine). Trees that are open on it see a missing folder afterwards.
    ///
    /// # Errors
    ///
    /// As [`OpfsTree::open`], and [`StoreError::Io`] when OPFS refuses.
    pub async fn delete_workspace(workspace: &str) -> Result<(), StoreError> {
        check_workspace(workspace)?;
        let workspaces = workspaces_folder().await?;
        let options = FileSystemRemoveOptions::new();
        options.set_recursive(true);
        match settle(workspaces.remove_entry_with_options(workspace, &options)).await {
            Ok(_) => Ok(()),
            Err(failure) if failure.is("NotFoundError") => Ok(()),
            Err(failure) => Err(opened_error(
                &format!("{WORKSPACES_FOLDER}/{workspace}"),
                &failure,
            )),
        }
    }

    /// The store's error for a failure at `path`.
    fn error(&self, path: &WorkspacePath, failure: &JsFailure) -> StoreError {
        match failure.name.as_str() {
            "QuotaExceededError" => StoreError::QuotaExceeded {
                detail: format!(
                    "the browser's storage quota for this site is used up ({}: writing `{path}`: {})",
                    self.describe(),
                    failure
                ),
            },
            // Removed by someone else between two steps.
            "NotFoundError" => not_found(path),
            "SecurityError" | "NotAllowedError" => StoreError::Unavailable {
                detail: format!("{}: `{path}`: {failure}", self.describe()),
            },
            _ => StoreError::Io(format!("{}: `{path}`: {failure}", self.describe())),
        }
    }

    /// The folder at `path`; `None` when it, or a folder on the way, is
    /// missing or a file.
    async fn find_folder(
        &self,
        path: &WorkspacePath,
    ) -> Result<Option<FileSystemDirectoryHandle>, StoreError> {
        let mut folder = self.root.clone();
        for part in path.parts() {
            match child_folder(&folder, part, false).await {
                Ok(inner) => folder = inner,
                Err(failure) if failure.is("NotFoundError") || failure.is("TypeMismatchError") => {
                    return Ok(None);
                }
                Err(failure) => return Err(self.error(path, &failure)),
            }
        }
        Ok(Some(folder))
    }

    /// What is at `path`, if anything.
    async fn node(&self, path: &WorkspacePath) -> Result<Option<Node>, StoreError> {
        let Some((parent, name)) = path.split_last() else {
            return Ok(Some(Node::Dir(self.root.clone())));
        };
        let Some(folder) = self.find_folder(&parent).await? else {
            return Ok(None);
        };
        match child_file(&folder, name, false).await {
            Ok(file) => return Ok(Some(Node::File(file))),
            Err(failure) if failure.is("NotFoundError") => return Ok(None),
            Err(failure) if failure.is("TypeMismatchError") => {}
            Err(failure) => return Err(self.error(path, &failure)),
        }
        match child_folder(&folder, name, false).await {
            Ok(inner) => Ok(Some(Node::Dir(inner))),
            Err(failure) if failure.is("NotFoundError") => Ok(None),
            Err(failure) => Err(self.error(path, &failure)),
        }
    }

    /// Makes the folder `path` and its parents.
    async fn make_folders(
        &self,
        path: &WorkspacePath,
    ) -> Result<FileSystemDirectoryHandle, StoreError> {
        let mut folder = self.root.clone();
        let mut walked = WorkspacePath::root();
        for part in path.parts() {
            walked = walked.join(part);
            match child_folder(&folder, part, true).await {
                Ok(inner) => folder = inner,
                Err(failure) if failure.is("TypeMismatchError") => {
                    return Err(StoreError::Invalid(format!(
                        "`{walked}` is a file, not a folder"
                    )));
                }
                Err(failure) => return Err(self.error(&walked, &failure)),
            }
        }
        Ok(folder)
    }

    async fn file_of(
        &self,
        path: &WorkspacePath,
        handle: &FileSystemFileHandle,
    ) -> Result<File, StoreError> {
        let file = settle(handle.get_file())
            .await
            .and_then(|file| cast::<File>(file, "a File"));
        file.map_err(|failure| self.error(path, &failure))
    }

    async fn stat_file(
        &self,
        path: &WorkspacePath,
        handle: &FileSystemFileHandle,
    ) -> Result<FileStat, StoreError> {
        let file = self.file_of(path, handle).await?;
        Ok(FileStat::file(
            path,
            file.size() as u64,
            Some(file.last_modified() as u64),
        ))
    }

    async fn read_now(&self, path: &WorkspacePath) -> Result<Vec<u8>, StoreError> {
        match self.node(path).await? {
            Some(Node::File(handle)) => {
                let file = self.file_of(path, &handle).await?;
                let buffer = settle(file.array_buffer())
                    .await
                    .map_err(|failure| self.error(path, &failure))?;
                Ok(Uint8Array::new(&buffer).to_vec())
            }
            Some(Node::Dir(_)) => Err(StoreError::Invalid(format!(
                "`{path}` is a folder, not a file"
            ))),
            None => Err(not_found(path)),
        }
    }

    async fn write_now(
        &self,
        path: &WorkspacePath,
        bytes: Vec<u8>,
    ) -> Result<FileStat, StoreError> {
        let Some((parent, name)) = path.split_last() else {
            return Err(StoreError::Invalid(
                "the workspace root is a folder, not a file".into(),
            ));
        };
        let folder = self.make_folders(&parent).await?;
        let handle = match child_file(&folder, name, true).await {
            Ok(handle) => handle,
            Err(failure) if failure.is("TypeMismatchError") => {
                return Err(StoreError::Invalid(format!(
                    "`{path}` is a folder, not a file"
                )));
            }
            Err(failure) => return Err(self.error(path, &failure)),
        };
        let writable = settle(handle.create_writable())
            .await
            .and_then(|writable| cast::<FileSystemWritableFileStream>(writable, "a writable"))
            .map_err(|failure| self.error(path, &failure))?;
        // A copy in JS memory: a view of wasm memory could move while the
        // browser writes it.
        let data = Uint8Array::from(bytes.as_slice());
        let written = async {
            let write = writable
                .write_with_js_u8_array(&data)
                .map_err(|error| JsFailure::from_value(&error))?;
            settle(write).await?;
            settle(writable.close()).await
        }
        .await;
        if let Err(failure) = written {
            // Dropping the swap file keeps the old bytes.
            let _ = settle(writable.abort()).await;
            return Err(self.error(path, &failure));
        }
        self.stat_file(path, &handle).await
    }

    async fn list_now(&self, dir: &WorkspacePath) -> Result<Vec<DirEntry>, StoreError> {
        let folder = match self.node(dir).await? {
            Some(Node::Dir(folder)) => folder,
            Some(Node::File(_)) => {
                return Err(StoreError::Invalid(format!(
                    "`{dir}` is a file, not a folder"
                )));
            }
            None => {
                return Err(StoreError::NotFound {
                    what: "folder",
                    key: dir.to_string(),
                });
            }
        };
        let entries = folder.values();
        let mut listed = Vec::new();
        // Files are read for their size and time all at once afterwards: one
        // `getFile()` after another costs a round trip each (about 1 ms).
        let mut files: Vec<(WorkspacePath, FileSystemFileHandle)> = Vec::new();
        loop {
            let next = entries
                .next()
                .map_err(|error| self.error(dir, &JsFailure::from_value(&error)))?;
            let next = settle(next)
                .await
                .map_err(|failure| self.error(dir, &failure))?;
            let done = Reflect::get(&next, &"done".into())
                .ok()
                .and_then(|done| done.as_bool())
                .unwrap_or(true);
            if done {
                break;
            }
            let Ok(handle) = Reflect::get(&next, &"value".into()) else {
                continue;
            };
            if let Some(file) = handle.dyn_ref::<FileSystemFileHandle>() {
                files.push((dir.join(&file.name()), file.clone()));
            } else if let Some(folder) = handle.dyn_ref::<FileSystemDirectoryHandle>() {
                listed.push(DirEntry {
                    name: folder.name(),
                    path: dir.join(&folder.name()).as_str().to_owned(),
                    is_dir: true,
                    size: 0,
                    modified_ms: None,
                });
            }
        }
        let stats =
            futures::future::join_all(files.iter().map(|(path, file)| self.stat_file(path, file)))
                .await;
        for ((_, file), stat) in files.iter().zip(stats) {
            let stat = stat?;
            listed.push(DirEntry {
                name: file.name(),
                path: stat.path,
                is_dir: false,
                size: stat.size,
                modified_ms: stat.modified_ms,
            });
        }
        listed.sort_by(|a, b| b.is_dir.cmp(&a.is_dir).then_with(|| a.name.cmp(&b.name)));
        Ok(listed)
    }

    async fn stat_now(&self, path: &WorkspacePath) -> Result<FileStat, StoreError> {
        match self.node(path).await? {
            None => Ok(FileStat::missing(path)),
            Some(Node::Dir(_)) => Ok(FileStat::folder(path)),
            Some(Node::File(handle)) => self.stat_file(path, &handle).await,
        }
    }

    async fn remove_now(&self, path: &WorkspacePath) -> Result<(), StoreError> {
        let Some((parent, name)) = path.split_last() else {
            return Err(StoreError::Invalid(
                "the workspace root cannot be removed".into(),
            ));
        };
        let Some(folder) = self.find_folder(&parent).await? else {
            return Err(not_found(path));
        };
        // Without `recursive`, OPFS itself refuses a folder with entries.
        match settle(folder.remove_entry(name)).await {
            Ok(_) => Ok(()),
            Err(failure) if failure.is("InvalidModificationError") => {
                Err(StoreError::Invalid(format!(
                    "folder `{path}` is not empty; remove its files first (a tree is never removed at once)"
                )))
            }
            Err(failure) => Err(self.error(path, &failure)),
        }
    }
}

impl FileTree for OpfsTree {
    fn describe(&self) -> String {
        format!("OPFS `{WORKSPACES_FOLDER}/{}`", self.workspace)
    }

    fn read<'a>(&'a self, path: &'a WorkspacePath) -> StoreFuture<'a, Vec<u8>> {
        Box::pin(self.read_now(path))
    }

    fn write<'a>(&'a self, path: &'a WorkspacePath, bytes: Vec<u8>) -> StoreFuture<'a, FileStat> {
        Box::pin(self.write_now(path, bytes))
    }

    fn list<'a>(&'a self, dir: &'a WorkspacePath) -> StoreFuture<'a, Vec<DirEntry>> {
        Box::pin(self.list_now(dir))
    }

    fn stat<'a>(&'a self, path: &'a WorkspacePath) -> StoreFuture<'a, FileStat> {
        Box::pin(self.stat_now(path))
    }

    fn mkdir<'a>(&'a self, path: &'a WorkspacePath) -> StoreFuture<'a, ()> {
        Box::pin(async move { self.make_folders(path).await.map(|_| ()) })
    }

    fn remove<'a>(&'a self, path: &'a WorkspacePath) -> StoreFuture<'a, ()> {
        Box::pin(self.remove_now(path))
    }
}

fn not_found(path: &WorkspacePath) -> StoreError {
    StoreError::NotFound {
        what: "file",
        key: path.to_string(),
    }
}

/// A workspace names one folder.
fn check_workspace(workspace: &str) -> Result<(), StoreError> {
    let one_name = WorkspacePath::parse(workspace)
        .is_ok_and(|path| path.as_str() == workspace && path.parts().count() == 1);
    if one_name {
        Ok(())
    } else {
        Err(StoreError::Invalid(format!(
            "workspace `{workspace}` is not a folder name; use one name without `/`, `..` or control characters"
        )))
    }
}

/// The error of opening (or deleting) the OPFS folder `folder`.
fn opened_error(folder: &str, failure: &JsFailure) -> StoreError {
    match failure.name.as_str() {
        "SecurityError" | "NotAllowedError" => StoreError::Unavailable {
            detail: format!("OPFS refused `{folder}`: {failure}"),
        },
        "QuotaExceededError" => StoreError::QuotaExceeded {
            detail: format!(
                "the browser's storage quota for this site is used up (OPFS `{folder}`: {})",
                failure
            ),
        },
        _ => StoreError::Io(format!("OPFS `{folder}`: {failure}")),
    }
}

/// `navigator.storage.getDirectory()`, then `kiln-workspaces` in it.
async fn workspaces_folder() -> Result<FileSystemDirectoryHandle, StoreError> {
    let unavailable = |detail: String| StoreError::Unavailable { detail };
    let storage = global_object("navigator")
        .and_then(|navigator| Reflect::get(&navigator, &"storage".into()).ok())
        .and_then(|storage| storage.dyn_into::<StorageManager>().ok())
        .ok_or_else(|| {
            unavailable(
                "this context has no `navigator.storage` (OPFS needs a secure context: https or localhost)".into(),
            )
        })?;
    let has_opfs = Reflect::get(&storage, &"getDirectory".into())
        .is_ok_and(|get_directory| get_directory.is_function());
    if !has_opfs {
        return Err(unavailable(
            "this browser has no origin private file system (`navigator.storage.getDirectory`)"
                .into(),
        ));
    }
    let top = settle(storage.get_directory())
        .await
        .and_then(|top| cast::<FileSystemDirectoryHandle>(top, "a folder"))
        .map_err(|failure| opened_error("/", &failure))?;
    child_folder(&top, WORKSPACES_FOLDER, true)
        .await
        .map_err(|failure| opened_error(WORKSPACES_FOLDER, &failure))
}

async fn child_folder(
    folder: &FileSystemDirectoryHandle,
    name: &str,
    create: bool,
) -> Result<FileSystemDirectoryHandle, JsFailure> {
    let options = FileSystemGetDirectoryOptions::new();
    options.set_create(create);
    let promise: Promise = folder.get_directory_handle_with_options(name, &options);
    cast(settle(promise).await?, "a folder")
}

async fn child_file(
    folder: &FileSystemDirectoryHandle,
    name: &str,
    create: bool,
) -> Result<FileSystemFileHandle, JsFailure> {
    let options = FileSystemGetFileOptions::new();
    options.set_create(create);
    let promise: Promise = folder.get_file_handle_with_options(name, &options);
    cast(settle(promise).await?, "a file")
}

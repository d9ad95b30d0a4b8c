//! A workspace's files in a directory on disk, with [`super::MemoryTree`]'s
//! semantics and wording: whole-file replaces through a temp file and a
//! rename, one file or one empty folder removed at a time, and no symbolic
//! link followed out of the root.

use std::cell::Cell;
use std::fs::{self, File, Metadata};
use std::io::{self, ErrorKind, Write as _};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::UNIX_EPOCH;

use super::fs::{io_error, sync_dir};
use crate::backend::StoreFuture;
use crate::error::StoreError;
use crate::files::{DirEntry, FileStat, FileTree, WorkspacePath};
use crate::ids::random_suffix;

pub use crate::files::TMP_PREFIX;

/// A directory holding a workspace's files.
pub struct DirTree {
    /// Canonical: symbolic links are judged against it.
    root: PathBuf,
    /// Tells this handle's temp files apart.
    n_writes: Cell<u64>,
}

/// What a path is on disk, links followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Missing,
    Dir,
    File,
}

fn not_found(path: &WorkspacePath) -> StoreError {
    StoreError::NotFound {
        what: "file",
        key: path.to_string(),
    }
}

fn is_missing(error: &io::Error) -> bool {
    matches!(error.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory)
}

fn modified_ms(metadata: &Metadata) -> Option<u64> {
    let since = metadata.modified().ok()?.duration_since(UNIX_EPOCH).ok()?;
    u64::try_from(since.as_millis()).ok()
}

impl DirTree {
    /// Opens (creating it if needed) the folder `root`.
    pub fn open(root: &Path) -> Result<Rc<DirTree>, StoreError> {
        fs::create_dir_all(root).map_err(|error| io_error("create", root, &error))?;
        let canonical = fs::canonicalize(root).map_err(|error| io_error("open", root, &error))?;
        if !canonical.is_dir() {
            return Err(StoreError::Invalid(format!(
                "`{}` is not a folder; the workspace's files need one",
                root.display()
            )));
        }
        Ok(Rc::new(DirTree {
            root: canonical,
            n_writes: Cell::new(0),
        }))
    }

    /// The folder the files are in.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where `path` is on disk, once every part of it that exists is known
    /// not to be a symbolic link leading outside the root.
    fn resolve(&self, path: &WorkspacePath) -> Result<PathBuf, StoreError> {
        let mut walked = self.root.clone();
        let mut checking = true;
        for part in path.parts() {
            walked.push(part);
            if !checking {
                continue;
            }
            match fs::symlink_metadata(&walked) {
                Ok(metadata) if metadata.file_type().is_symlink() => {
                    match fs::canonicalize(&walked) {
                        Ok(target) if target.starts_with(&self.root) => {}
                        Ok(_) => {
                            return Err(StoreError::Invalid(format!(
                                "path `{path}` leads outside the workspace through a symbolic link"
                            )));
                        }
                        Err(_) => {
                            return Err(StoreError::Invalid(format!(
                                "path `{path}` goes through a symbolic link that leads nowhere; remove the link or point it inside the workspace"
                            )));
                        }
                    }
                }
                Ok(_) => {}
                // Nothing below a missing part exists to lead anywhere.
                Err(error) if is_missing(&error) => checking = false,
                Err(error) => return Err(io_error("read", &walked, &error)),
            }
        }
        Ok(walked)
    }

    fn kind(&self, on_disk: &Path) -> Result<(Kind, Option<Metadata>), StoreError> {
        match fs::metadata(on_disk) {
            Ok(metadata) if metadata.is_dir() => Ok((Kind::Dir, Some(metadata))),
            Ok(metadata) => Ok((Kind::File, Some(metadata))),
            Err(error) if is_missing(&error) => Ok((Kind::Missing, None)),
            Err(error) => Err(io_error("read", on_disk, &error)),
        }
    }

    fn make_dirs(&self, path: &WorkspacePath) -> Result<(), StoreError> {
        self.resolve(path)?;
        let mut walked = WorkspacePath::root();
        let mut on_disk = self.root.clone();
        for part in path.parts() {
            walked = walked.join(part);
            on_disk.push(part);
            match self.kind(&on_disk)?.0 {
                Kind::Dir => {}
                Kind::File => {
                    return Err(StoreError::Invalid(format!(
                        "`{walked}` is a file, not a folder"
                    )));
                }
                Kind::Missing => match fs::create_dir(&on_disk) {
                    Ok(()) => {}
                    // Made meanwhile by another writer.
                    Err(error) if error.kind() == ErrorKind::AlreadyExists && on_disk.is_dir() => {}
                    Err(error) => return Err(io_error("create", &on_disk, &error)),
                },
            }
        }
        Ok(())
    }

    fn stat_now(&self, path: &WorkspacePath) -> Result<FileStat, StoreError> {
        let on_disk = self.resolve(path)?;
        Ok(match self.kind(&on_disk)? {
            (Kind::Dir, _) => FileStat::folder(path),
            (Kind::File, Some(metadata)) => {
                FileStat::file(path, metadata.len(), modified_ms(&metadata))
            }
            _ => FileStat::missing(path),
        })
    }

    fn read_now(&self, path: &WorkspacePath) -> Result<Vec<u8>, StoreError> {
        let on_disk = self.resolve(path)?;
        match self.kind(&on_disk)?.0 {
            Kind::File => fs::read(&on_disk).map_err(|error| {
                if is_missing(&error) {
                    not_found(path)
                } else {
                    io_error("read", &on_disk, &error)
                }
            }),
            Kind::Dir => Err(StoreError::Invalid(format!(
                "`{path}` is a folder, not a file"
            ))),
            Kind::Missing => Err(not_found(path)),
        }
    }

    fn write_now(&self, path: &WorkspacePath, bytes: &[u8]) -> Result<FileStat, StoreError> {
        let Some((parent, _)) = path.split_last() else {
            return Err(StoreError::Invalid(
                "the workspace root is a folder, not a file".into(),
            ));
        };
        let on_disk = self.resolve(path)?;
        if self.kind(&on_disk)?.0 == Kind::Dir {
            return Err(StoreError::Invalid(format!(
                "`{path}` is a folder, not a file"
            )));
        }
        self.make_dirs(&parent)?;
        let folder = self.resolve(&parent)?;
        let n_write = self.n_writes.get();
        self.n_writes.set(n_write + 1);
        let tmp = folder.join(format!(
            "{TMP_PREFIX}{}-{n_write}-{}",
            std::process::id(),
            random_suffix()
        ));
        let written = (|| {
            let mut file = File::create_new(&tmp)?;
            file.write_all(bytes)?;
            file.sync_all()?;
            fs::rename(&tmp, &on_disk)
        })();
        if let Err(error) = written {
            let _ = fs::remove_file(&tmp);
            return Err(io_error("write", &on_disk, &error));
        }
        sync_dir(&folder)?;
        self.stat_now(path)
    }

    fn list_now(&self, dir: &WorkspacePath) -> Result<Vec<DirEntry>, StoreError> {
        let on_disk = self.resolve(dir)?;
        match self.kind(&on_disk)?.0 {
            Kind::Missing => {
                return Err(StoreError::NotFound {
                    what: "folder",
                    key: dir.to_string(),
                });
            }
            Kind::File => {
                return Err(StoreError::Invalid(format!(
                    "`{dir}` is a file, not a folder"
                )));
            }
            Kind::Dir => {}
        }
        let read = fs::read_dir(&on_disk).map_err(|error| io_error("list", &on_disk, &error))?;
        let mut entries = Vec::new();
        for entry in read {
            let entry = entry.map_err(|error| io_error("list", &on_disk, &error))?;
            let Ok(name) = entry.file_name().into_string() else {
                // Not UTF-8: no workspace path can name it.
                continue;
            };
            let addressable =
                WorkspacePath::parse(&name).is_ok_and(|parsed| parsed.as_str() == name);
            if name.starts_with(TMP_PREFIX) || !addressable {
                continue;
            }
            let entry_path = entry.path();
            let is_link = entry
                .file_type()
                .is_ok_and(|file_type| file_type.is_symlink());
            if is_link
                && !fs::canonicalize(&entry_path).is_ok_and(|target| target.starts_with(&self.root))
            {
                // A link out of the workspace (or to nothing) is not part of it.
                continue;
            }
            let Ok(metadata) = fs::metadata(&entry_path) else {
                // Removed meanwhile.
                continue;
            };
            let is_dir = metadata.is_dir();
            entries.push(DirEntry {
                path: dir.join(&name).as_str().to_owned(),
                name,
                is_dir,
                size: if is_dir { 0 } else { metadata.len() },
                modified_ms: if is_dir { None } else { modified_ms(&metadata) },
            });
        }
        entries.sort_by(|a, b| b.is_dir.cmp(&a.is_dir).then_with(|| a.name.cmp(&b.name)));
        Ok(entries)
    }

    fn remove_now(&self, path: &WorkspacePath) -> Result<(), StoreError> {
        if path.is_root() {
            return Err(StoreError::Invalid(
                "the workspace root cannot be removed".into(),
            ));
        }
        let on_disk = self.resolve(path)?;
        let is_link =
            fs::symlink_metadata(&on_disk).is_ok_and(|metadata| metadata.file_type().is_symlink());
        if is_link {
            // The link goes, never what it points to.
            return fs::remove_file(&on_disk).map_err(|error| io_error("remove", &on_disk, &error));
        }
        match self.kind(&on_disk)?.0 {
            Kind::Missing => Err(not_found(path)),
            Kind::File => fs::remove_file(&on_disk).map_err(|error| {
                if is_missing(&error) {
                    not_found(path)
                } else {
                    io_error("remove", &on_disk, &error)
                }
            }),
            Kind::Dir => {
                let read =
                    fs::read_dir(&on_disk).map_err(|error| io_error("list", &on_disk, &error))?;
                let mut leftovers = Vec::new();
                for entry in read {
                    let entry = entry.map_err(|error| io_error("list", &on_disk, &error))?;
                    if entry.file_name().to_string_lossy().starts_with(TMP_PREFIX) {
                        leftovers.push(entry.path());
                    } else {
                        return Err(StoreError::Invalid(format!(
                            "folder `{path}` is not empty; remove its files first (a tree is never removed at once)"
                        )));
                    }
                }
                // Temp files of writes cut short are not the person's files.
                for leftover in leftovers {
                    let _ = fs::remove_file(leftover);
                }
                fs::remove_dir(&on_disk).map_err(|error| io_error("remove", &on_disk, &error))
            }
        }
    }
}

/// Makes a rename in `dir` durable.
impl FileTree for DirTree {
    fn describe(&self) -> String {
        self.root.display().to_string()
    }

    fn read<'a>(&'a self, path: &'a WorkspacePath) -> StoreFuture<'a, Vec<u8>> {
        let result = self.read_now(path);
        Box::pin(async move { result })
    }

    fn write<'a>(&'a self, path: &'a WorkspacePath, bytes: Vec<u8>) -> StoreFuture<'a, FileStat> {
        let result = self.write_now(path, &bytes);
        Box::pin(async move { result })
    }

    fn list<'a>(&'a self, dir: &'a WorkspacePath) -> StoreFuture<'a, Vec<DirEntry>> {
        let result = self.list_now(dir);
        Box::pin(async move { result })
    }

    fn stat<'a>(&'a self, path: &'a WorkspacePath) -> StoreFuture<'a, FileStat> {
        let result = self.stat_now(path);
        Box::pin(async move { result })
    }

    fn mkdir<'a>(&'a self, path: &'a WorkspacePath) -> StoreFuture<'a, ()> {
        let result = self.make_dirs(path);
        Box::pin(async move { result })
    }

    fn remove<'a>(&'a self, path: &'a WorkspacePath) -> StoreFuture<'a, ()> {
        let result = self.remove_now(path);
        Box::pin(async move { result })
    }
}

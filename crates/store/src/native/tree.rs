//! A file tree held in memory, for native tests.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use crate::backend::StoreFuture;
use crate::clock::epoch_ms;
use crate::error::StoreError;
use crate::files::{DirEntry, FileStat, FileTree, WorkspacePath};

#[derive(Debug, Clone)]
enum Node {
    Dir,
    File { bytes: Vec<u8>, modified_ms: u64 },
}

#[derive(Default)]
pub struct MemoryTree {
    /// Every folder and file by path; the root is implicit.
    nodes: RefCell<BTreeMap<String, Node>>,
}

impl MemoryTree {
    #[must_use]
    pub fn new() -> Rc<Self> {
        Rc::new(Self::default())
    }

    fn node(&self, path: &WorkspacePath) -> Option<Node> {
        if path.is_root() {
            return Some(Node::Dir);
        }
        self.nodes.borrow().get(path.as_str()).cloned()
    }

    fn make_dirs(&self, path: &WorkspacePath) -> Result<(), StoreError> {
        let mut walked = WorkspacePath::root();
        for part in path.parts() {
            walked = walked.join(part);
            match self.node(&walked) {
                Some(Node::Dir) => {}
                Some(Node::File { .. }) => {
                    return Err(StoreError::Invalid(format!(
                        "`{walked}` is a file, not a folder"
                    )));
                }
                None => {
                    self.nodes
                        .borrow_mut()
                        .insert(walked.as_str().to_owned(), Node::Dir);
                }
            }
        }
        Ok(())
    }

    fn stat_now(&self, path: &WorkspacePath) -> FileStat {
        match self.node(path) {
            None => FileStat::missing(path),
            Some(Node::Dir) => FileStat::folder(path),
            Some(Node::File { bytes, modified_ms }) => {
                FileStat::file(path, bytes.len() as u64, Some(modified_ms))
            }
        }
    }
}

fn not_found(path: &WorkspacePath) -> StoreError {
    StoreError::NotFound {
        what: "file",
        key: path.to_string(),
    }
}

impl FileTree for MemoryTree {
    fn describe(&self) -> String {
        "memory".into()
    }

    fn read<'a>(&'a self, path: &'a WorkspacePath) -> StoreFuture<'a, Vec<u8>> {
        let result = match self.node(path) {
            Some(Node::File { bytes, .. }) => Ok(bytes),
            Some(Node::Dir) => Err(StoreError::Invalid(format!(
                "`{path}` is a folder, not a file"
            ))),
            None => Err(not_found(path)),
        };
        Box::pin(async move { result })
    }

    fn write<'a>(&'a self, path: &'a WorkspacePath, bytes: Vec<u8>) -> StoreFuture<'a, FileStat> {
        let result = (|| {
            let Some((parent, _)) = path.split_last() else {
                return Err(StoreError::Invalid(
                    "the workspace root is a folder, not a file".into(),
                ));
            };
            if let Some(Node::Dir) = self.node(path) {
                return Err(StoreError::Invalid(format!(
                    "`{path}` is a folder, not a file"
                )));
            }
            self.make_dirs(&parent)?;
            self.nodes.borrow_mut().insert(
                path.as_str().to_owned(),
                Node::File {
                    bytes,
                    modified_ms: epoch_ms(),
                },
            );
            Ok(self.stat_now(path))
        })();
        Box::pin(async move { result })
    }

    fn list<'a>(&'a self, dir: &'a WorkspacePath) -> StoreFuture<'a, Vec<DirEntry>> {
        let result = match self.node(dir) {
            None => Err(StoreError::NotFound {
                what: "folder",
                key: dir.to_string(),
            }),
            Some(Node::File { .. }) => Err(StoreError::Invalid(format!(
                "`{dir}` is a file, not a folder"
            ))),
            Some(Node::Dir) => {
                let prefix = if dir.is_root() {
                    String::new()
                } else {
                    format!("{}/", dir.as_str())
                };
                let mut entries: Vec<DirEntry> = self
                    .nodes
                    .borrow()
                    .range(prefix.clone()..)
                    .take_while(|(key, _)| key.starts_with(&prefix))
                    .filter(|(key, _)| !key[prefix.len()..].contains('/'))
                    .map(|(key, node)| DirEntry {
                        name: key[prefix.len()..].to_owned(),
                        path: key.clone(),
                        is_dir: matches!(node, Node::Dir),
                        size: match node {
                            Node::File { bytes, .. } => bytes.len() as u64,
                            Node::Dir => 0,
                        },
                        modified_ms: match node {
                            Node::File { modified_ms, .. } => Some(*modified_ms),
                            Node::Dir => None,
                        },
                    })
                    .collect();
                entries.sort_by(|a, b| b.is_dir.cmp(&a.is_dir).then_with(|| a.name.cmp(&b.name)));
                Ok(entries)
            }
        };
        Box::pin(async move { result })
    }

    fn stat<'a>(&'a self, path: &'a WorkspacePath) -> StoreFuture<'a, FileStat> {
        let stat = self.stat_now(path);
        Box::pin(async move { Ok(stat) })
    }

    fn mkdir<'a>(&'a self, path: &'a WorkspacePath) -> StoreFuture<'a, ()> {
        let result = self.make_dirs(path);
        Box::pin(async move { result })
    }

    fn remove<'a>(&'a self, path: &'a WorkspacePath) -> StoreFuture<'a, ()> {
        let result = (|| {
            if path.is_root() {
                return Err(StoreError::Invalid(
                    "the workspace root cannot be removed".into(),
                ));
            }
            match self.node(path) {
                None => Err(not_found(path)),
                Some(Node::Dir) => {
                    let prefix = format!("{}/", path.as_str());
                    let has_children = self
                        .nodes
                        .borrow()
                        .range(prefix.clone()..)
                        .next()
                        .is_some_and(|(key, _)| key.starts_with(&prefix));
                    if has_children {
                        return Err(StoreError::Invalid(format!(
                            "folder `{path}` is not empty; remove its files first (a tree is never removed at once)"
                        )));
                    }
                    self.nodes.borrow_mut().remove(path.as_str());
                    Ok(())
                }
                Some(Node::File { .. }) => {
                    self.nodes.borrow_mut().remove(path.as_str());
                    Ok(())
                }
            }
        })();
        Box::pin(async move { result })
    }
}

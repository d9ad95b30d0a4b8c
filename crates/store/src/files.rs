//! The workspace's files: a tree behind [`FileTree`] (OPFS in the browser, a
//! directory or memory natively), and what is written once above it:
//! containment ([`WorkspacePath`]), text reads, exact-string edits, search.

use std::rc::Rc;

use serde::{Deserialize, Serialize};

use crate::backend::StoreFuture;
use crate::error::StoreError;
pub use kiln_types::records::{DirEntry, MAX_FILE_BYTES};

/// The longest path, in bytes.
pub const MAX_PATH_BYTES: usize = 1024;
/// The longest file or folder name, in bytes.
pub const MAX_NAME_BYTES: usize = 255;

/// A path inside the workspace: relative, `/`-separated, no `..`, no empty
/// or `.` parts (they are dropped), no control characters. The empty path
/// is the workspace's root.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct WorkspacePath(String);

/// Names of writes in progress (or left by a crash), which no listing shows:
/// no path may use one, so nothing a program writes is hidden from the person.
pub const TMP_PREFIX: &str = ".kiln-tmp-";

impl WorkspacePath {
    #[must_use]
    pub fn root() -> Self {
        Self(String::new())
    }

    /// Checks `input`; a path that could leave the workspace is refused by name.
    pub fn parse(input: &str) -> Result<Self, StoreError> {
        let refuse = |why: &str| Err(StoreError::Invalid(format!("path `{input}` {why}")));
        if input.starts_with('/') || input.starts_with('\\') {
            return refuse(
                "is absolute; paths are relative to the workspace (write `notes/a.txt`, not `/notes/a.txt`)",
            );
        }
        if input.len() >= 2
            && input.as_bytes()[1] == b':'
            && input.as_bytes()[0].is_ascii_alphabetic()
        {
            return refuse("names a drive; paths are relative to the workspace");
        }
        if input.contains('\\') {
            return refuse("contains `\\`; separate folders with `/`");
        }
        if input.chars().any(char::is_control) {
            return refuse("contains a control character");
        }
        if input.len() > MAX_PATH_BYTES {
            return refuse(&format!(
                "is {} bytes long; at most {MAX_PATH_BYTES}",
                input.len()
            ));
        }
        let mut parts = Vec::new();
        for part in input.split('/') {
            match part {
                "" | "." => {}
                ".." => return refuse("contains `..`; paths cannot leave the workspace"),
                part if part.len() > MAX_NAME_BYTES => {
                    return refuse(&format!("has a name longer than {MAX_NAME_BYTES} bytes"));
                }
                part if part.starts_with(TMP_PREFIX) => {
                    return refuse(&format!(
                        "has a name beginning `{TMP_PREFIX}`, which Kiln keeps for writes in progress and never lists"
                    ));
                }
                part => parts.push(part),
            }
        }
        Ok(Self(parts.join("/")))
    }

    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    #[must_use]
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The folders and the name, in order.
    pub fn parts(&self) -> impl Iterator<Item = &str> {
        self.0.split('/').filter(|part| !part.is_empty())
    }

    /// The folder holding this path and this path's name (`None` for the root).
    #[must_use]
    pub fn split_last(&self) -> Option<(WorkspacePath, &str)> {
        if self.is_root() {
            return None;
        }
        Some(match self.0.rsplit_once('/') {
            Some((parent, name)) => (WorkspacePath(parent.to_owned()), name),
            None => (WorkspacePath::root(), self.0.as_str()),
        })
    }

    #[must_use]
    pub fn join(&self, name: &str) -> WorkspacePath {
        if self.is_root() {
            WorkspacePath(name.to_owned())
        } else {
            WorkspacePath(format!("{}/{name}", self.0))
        }
    }
}

impl std::fmt::Display for WorkspacePath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_root() {
            f.write_str("/")
        } else {
            f.write_str(&self.0)
        }
    }
}

/// What `stat` answers; a missing path is `exists: false`, not an error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStat {
    pub path: String,
    pub exists: bool,
    pub is_file: bool,
    pub is_dir: bool,
    pub size: u64,
    /// Last write, when the platform knows it.
    pub modified_ms: Option<u64>,
}

impl FileStat {
    #[must_use]
    pub fn missing(path: &WorkspacePath) -> Self {
        Self {
            path: path.as_str().to_owned(),
            exists: false,
            is_file: false,
            is_dir: false,
            size: 0,
            modified_ms: None,
        }
    }

    #[must_use]
    pub fn folder(path: &WorkspacePath) -> Self {
        Self {
            exists: true,
            is_dir: true,
            ..Self::missing(path)
        }
    }

    #[must_use]
    pub fn file(path: &WorkspacePath, size: u64, modified_ms: Option<u64>) -> Self {
        Self {
            exists: true,
            is_file: true,
            size,
            modified_ms,
            ..Self::missing(path)
        }
    }
}

/// A workspace's file tree. Every method takes a checked path.
pub trait FileTree {
    /// Where the files live, for messages.
    fn describe(&self) -> String;

    /// A file's bytes; a folder or a missing file is an error naming the path.
    fn read<'a>(&'a self, path: &'a WorkspacePath) -> StoreFuture<'a, Vec<u8>>;

    /// Creates or replaces a file, making its folders. The replace is whole:
    /// a crash leaves the old bytes or the new ones.
    fn write<'a>(&'a self, path: &'a WorkspacePath, bytes: Vec<u8>) -> StoreFuture<'a, FileStat>;

    /// A folder's entries, folders first then by name.
    fn list<'a>(&'a self, dir: &'a WorkspacePath) -> StoreFuture<'a, Vec<DirEntry>>;

    fn stat<'a>(&'a self, path: &'a WorkspacePath) -> StoreFuture<'a, FileStat>;

    /// Makes a folder and its parents; an existing folder is fine.
    fn mkdir<'a>(&'a self, path: &'a WorkspacePath) -> StoreFuture<'a, ()>;

    /// Removes one file or one empty folder, never a tree.
    fn remove<'a>(&'a self, path: &'a WorkspacePath) -> StoreFuture<'a, ()>;
}

/// A match of [`search`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SearchMatch {
    pub path: String,
    /// 1-based.
    pub line: usize,
    pub text: String,
}

/// The most matches one search answers.
pub const MAX_MATCHES: usize = 200;
/// The most files one search reads.
pub const MAX_SEARCHED_FILES: usize = 5_000;
/// The most bytes one search reads (32 MiB).
pub const MAX_SEARCHED_BYTES: u64 = 32 << 20;

/// Reads a file as UTF-8 text.
pub async fn read_text(tree: &dyn FileTree, path: &WorkspacePath) -> Result<String, StoreError> {
    let bytes = tree.read(path).await?;
    String::from_utf8(bytes).map_err(|_| {
        StoreError::Invalid(format!(
            "`{path}` is not UTF-8 text (a binary file); text reads and edits cannot take it"
        ))
    })
}

/// Replaces `old` with `new` in a text file: exactly one occurrence unless
/// `replace_all`. Answers how many were replaced.
pub async fn edit(
    tree: &dyn FileTree,
    path: &WorkspacePath,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<usize, StoreError> {
    if old.is_empty() {
        return Err(StoreError::Invalid(
            "`old_text` is empty; say which text to replace".into(),
        ));
    }
    let text = read_text(tree, path).await?;
    let count = text.matches(old).count();
    if count == 0 {
        return Err(StoreError::Invalid(format!(
            "`{path}` does not contain the text to replace"
        )));
    }
    if count > 1 && !replace_all {
        return Err(StoreError::Invalid(format!(
            "`{path}` contains the text to replace {count} times; give more context to pick one, or set `replace_all`"
        )));
    }
    let edited = if replace_all {
        text.replace(old, new)
    } else {
        text.replacen(old, new, 1)
    };
    tree.write(path, edited.into_bytes()).await?;
    Ok(count)
}

/// Every file under `dir`, depth first, by name.
pub async fn walk(
    tree: &dyn FileTree,
    dir: &WorkspacePath,
    limit: usize,
) -> Result<Vec<DirEntry>, StoreError> {
    let mut files = Vec::new();
    let mut pending = vec![dir.clone()];
    while let Some(folder) = pending.pop() {
        let entries = tree.list(&folder).await?;
        for entry in entries.into_iter().rev() {
            if entry.is_dir {
                pending.push(WorkspacePath::parse(&entry.path)?);
            } else if files.len() < limit {
                files.push(entry);
            }
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// Every line of the files under `dir` that contains `pattern`, ignoring
/// case, up to [`MAX_MATCHES`], reading at most [`MAX_SEARCHED_BYTES`].
pub async fn search(
    tree: &dyn FileTree,
    dir: &WorkspacePath,
    pattern: &str,
) -> Result<Vec<SearchMatch>, StoreError> {
    let budget = std::cell::Cell::new(MAX_SEARCHED_BYTES);
    Ok(search_within(tree, dir, pattern, &budget).await?.matches)
}

/// What [`search_within`] found, and why it stopped before the end, if it did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Searched {
    pub matches: Vec<SearchMatch>,
    /// `matches` (the most matches were found), `files` ([`MAX_SEARCHED_FILES`]
    /// read), `bytes` (a next file would pass this search's
    /// [`MAX_SEARCHED_BYTES`]) or `budget` (it would pass `budget`).
    pub stopped: Option<&'static str>,
}

/// [`search`], taking the bytes it reads from `budget` (a run's, say, shared
/// by its searches) as well as from its own [`MAX_SEARCHED_BYTES`]: a search
/// stops before a file that would pass either, so no call reads without bound.
pub async fn search_within(
    tree: &dyn FileTree,
    dir: &WorkspacePath,
    pattern: &str,
    budget: &std::cell::Cell<u64>,
) -> Result<Searched, StoreError> {
    if pattern.is_empty() {
        return Err(StoreError::Invalid("the search pattern is empty".into()));
    }
    let needle = pattern.to_lowercase();
    let mut found = Vec::new();
    let mut read = 0_u64;
    let files = walk(tree, dir, MAX_SEARCHED_FILES + 1).await?;
    let mut stopped = (files.len() > MAX_SEARCHED_FILES).then_some("files");
    for file in files.into_iter().take(MAX_SEARCHED_FILES) {
        if read.saturating_add(file.size) > MAX_SEARCHED_BYTES {
            stopped = Some("bytes");
            break;
        }
        if file.size > budget.get() {
            stopped = Some("budget");
            break;
        }
        read += file.size;
        budget.set(budget.get() - file.size);
        let path = WorkspacePath::parse(&file.path)?;
        let Ok(text) = read_text(tree, &path).await else {
            continue;
        };
        for (index, line) in text.lines().enumerate() {
            if line.to_lowercase().contains(&needle) {
                found.push(SearchMatch {
                    path: file.path.clone(),
                    line: index + 1,
                    text: line.chars().take(300).collect(),
                });
                if found.len() >= MAX_MATCHES {
                    return Ok(Searched {
                        matches: found,
                        stopped: Some("matches"),
                    });
                }
            }
        }
    }
    Ok(Searched {
        matches: found,
        stopped,
    })
}

/// A shared tree handle.
pub type SharedTree = Rc<dyn FileTree>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_contained() {
        let cases = [
            ("notes/a.txt", Ok("notes/a.txt")),
            ("./notes//a.txt/", Ok("notes/a.txt")),
            ("", Ok("")),
            ("/etc/passwd", Err("is absolute")),
            ("../secret", Err("contains `..`")),
            ("a/../../b", Err("contains `..`")),
            ("C:/x", Err("names a drive")),
            ("a\\b", Err("contains `\\`")),
            ("a\u{0}b", Err("control character")),
            (".kiln-tmp-hidden", Err("beginning `.kiln-tmp-`")),
            ("notes/.kiln-tmp-x/a", Err("never lists")),
            (".kiln-tmp", Ok(".kiln-tmp")),
        ];
        for (input, expected) in cases {
            let got = WorkspacePath::parse(input);
            match (got, expected) {
                (Ok(path), Ok(want)) => assert_eq!(path.as_str(), want, "{input}"),
                (Err(error), Err(want)) => {
                    let message = error.to_string();
                    assert!(
                        message.contains(want) && message.contains(&format!("`{input}`")),
                        "{input}: {message}"
                    );
                }
                (got, want) => panic!("{input}: got {got:?}, want {want:?}"),
            }
        }
    }
}

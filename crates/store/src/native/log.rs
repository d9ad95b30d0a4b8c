//! A backend on disk that several processes share: an append-only log of
//! JSON lines replayed into [`Tables`], guarded by a file lock, fsynced per
//! commit, safe against a process killed mid-write.
//!
//! The folder holds:
//!
//! - `store.log`: the first line is a header `{"kiln_store":2,"generation":N}`
//!   ([`crate::SCHEMA_VERSION`]; the generation counts rewrites); every
//!   further line is one committed batch `{"ops":[Op, ...]}`, or, after a
//!   compaction, one record `{"snapshot":{"table":T,"record":Record}}`.
//! - `store.lock`: the lock file. Readers hold it shared, the writer
//!   exclusive; a handle reads the lines appended since its last look (other
//!   processes write too) under the lock before it answers.
//! - `store.log.tmp`: a rewrite in progress (upgrade or compaction), renamed
//!   over `store.log` once complete and fsynced.
//!
//! **Kill-safety**: a batch is appended as one `write_all` of the line and
//! its `\n`, then `sync_data`, before `commit` answers `Ok`. A process
//! killed mid-append leaves a last line without `\n` (or one that does not
//! parse): readers ignore it, and the next writer cuts the file back to the
//! end of the last complete line before appending. A line that does not
//! parse with complete lines after it is [`StoreError::Corrupt`], naming the
//! file and the line.
//!
//! **Compaction**: when the log is over [`COMPACT_MIN_BYTES`] and more than
//! [`COMPACT_RATIO`] times the size of the live data, the writer rewrites it
//! as one snapshot line per record (versions kept) with the next generation;
//! other handles see the generation (or the file) change and replay from the
//! start.

use std::cell::RefCell;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead as _, BufReader, ErrorKind, Read as _, Seek as _, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use serde::{Deserialize, Serialize};

use super::Tables;
use super::fs::{io_error, sync_dir};
use crate::SCHEMA_VERSION;
use crate::backend::{
    Backend, Change, Expect, Listener, Listeners, Op, Record, Scan, StoreFuture, Subscription,
    Table,
};
use crate::error::StoreError;

/// The log's file name inside the store's folder.
pub const LOG_FILE: &str = "store.log";
/// The lock file's name.
pub const LOCK_FILE: &str = "store.lock";
/// Where a rewrite is written before it is renamed over the log.
pub const TMP_FILE: &str = "store.log.tmp";
/// A log smaller than this is never compacted.
pub const COMPACT_MIN_BYTES: u64 = 1 << 20;
/// A log is compacted when it is more than this many times the live data.
pub const COMPACT_RATIO: u64 = 4;
/// A header line longer than this is not a header.
const MAX_HEADER_BYTES: u64 = 4096;

/// The log's first line.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Header {
    kiln_store: u32,
    /// One more at every rewrite (upgrade, compaction): how another handle
    /// knows to replay from the start. Absent in schema 1 logs.
    #[serde(default)]
    generation: u64,
}

/// A line after the header, as read.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum Line {
    Ops(Vec<Op>),
    Snapshot { table: Table, record: Record },
}

/// A line after the header, as written.
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum LineRef<'a> {
    Ops(&'a [Op]),
    Snapshot { table: Table, record: &'a Record },
}

/// Which file a handle last read (a rewrite renames a new one into place).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    device: u64,
    inode: u64,
}

#[cfg(unix)]
fn identity(metadata: &fs::Metadata) -> Option<Identity> {
    use std::os::unix::fs::MetadataExt as _;
    Some(Identity {
        device: metadata.dev(),
        inode: metadata.ino(),
    })
}

#[cfg(not(unix))]
fn identity(_metadata: &fs::Metadata) -> Option<Identity> {
    // The header's generation alone tells a rewrite apart here.
    None
}

/// What one handle has replayed.
#[derive(Default)]
struct State {
    tables: Tables,
    /// The end of the last complete line replayed; 0 before the first read
    /// (or after a failed write, to replay from the start).
    offset: u64,
    /// Complete lines replayed, the header included.
    lines: u64,
    header_len: u64,
    schema: u32,
    generation: u64,
    identity: Option<Identity>,
    /// The log length at which the writer next weighs a compaction.
    next_compaction_check: u64,
}

/// The on-disk backend: see the module's documentation for the format.
/// `subscribe` feeds this handle's own commits only; other processes'
/// writes are seen at the next read but not fed to listeners.
pub struct LogBackend {
    log_path: PathBuf,
    tmp_path: PathBuf,
    dir: PathBuf,
    lock: File,
    lock_path: PathBuf,
    state: RefCell<State>,
    listeners: Rc<Listeners>,
}

/// Holds the lock file's lock until dropped.
struct Locked<'a>(&'a File);

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        // Closing the handle releases it too; an error here leaves nothing to undo.
        let _ = self.0.unlock();
    }
}

/// Writes nowhere, counting bytes: the size a snapshot would have.
struct Counter(u64);

impl Write for Counter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0 += bytes.len() as u64;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl LogBackend {
    /// Opens the store in `dir` (created if needed): creates the log when
    /// there is none, upgrades a schema-1 log, replays it.
    pub fn open(dir: &Path) -> Result<Rc<LogBackend>, StoreError> {
        fs::create_dir_all(dir).map_err(|error| io_error("create", dir, &error))?;
        let lock_path = dir.join(LOCK_FILE);
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(|error| io_error("open", &lock_path, &error))?;
        let backend = LogBackend {
            log_path: dir.join(LOG_FILE),
            tmp_path: dir.join(TMP_FILE),
            dir: dir.to_owned(),
            lock,
            lock_path,
            state: RefCell::new(State::default()),
            listeners: Listeners::new(),
        };
        {
            let _locked = backend.lock_exclusive()?;
            let mut state = backend.state.borrow_mut();
            let empty = match fs::metadata(&backend.log_path) {
                Ok(metadata) => metadata.len() == 0,
                Err(error) if error.kind() == ErrorKind::NotFound => true,
                Err(error) => return Err(io_error("read", &backend.log_path, &error)),
            };
            if empty {
                // A new store (or one whose creation was cut short before the rename).
                backend.create_log()?;
            }
            backend.catch_up(&mut state)?;
            if state.schema < SCHEMA_VERSION {
                backend.upgrade(&mut state)?;
            }
        }
        Ok(Rc::new(backend))
    }

    /// The log file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.log_path
    }

    fn lock_exclusive(&self) -> Result<Locked<'_>, StoreError> {
        self.lock
            .lock()
            .map_err(|error| io_error("lock", &self.lock_path, &error))?;
        Ok(Locked(&self.lock))
    }

    fn lock_shared(&self) -> Result<Locked<'_>, StoreError> {
        self.lock
            .lock_shared()
            .map_err(|error| io_error("lock", &self.lock_path, &error))?;
        Ok(Locked(&self.lock))
    }

    fn corrupt(&self, line: u64, detail: impl std::fmt::Display) -> StoreError {
        StoreError::Corrupt {
            place: format!("`{}` line {line}", self.log_path.display()),
            detail: detail.to_string(),
            hint: Some(format!(
                "restore `{}` from a backup, or delete line {line} by hand to keep the rest",
                self.log_path.display()
            )),
        }
    }

    /// Reads the header line of the open log of `len` bytes: the header and
    /// its length with the `\n`.
    fn read_header(&self, file: &mut File, len: u64) -> Result<(Header, u64), StoreError> {
        if len == 0 {
            return Err(self.corrupt(1, "the log is empty; it has no header"));
        }
        let mut first = Vec::new();
        BufReader::new(file.take(MAX_HEADER_BYTES))
            .read_until(b'\n', &mut first)
            .map_err(|error| io_error("read", &self.log_path, &error))?;
        if first.last() != Some(&b'\n') {
            return Err(self.corrupt(
                1,
                "the header line is incomplete; expected `{\"kiln_store\": <schema>}`",
            ));
        }
        let header: Header = serde_json::from_slice(&first).map_err(|error| {
            self.corrupt(
                1,
                format!("the header is not `{{\"kiln_store\": <schema>}}` ({error})"),
            )
        })?;
        if header.kiln_store > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                name: self.log_path.display().to_string(),
                found: header.kiln_store,
                supported: SCHEMA_VERSION,
            });
        }
        if header.kiln_store == 0 {
            return Err(self.corrupt(1, "the header names schema 0, which never existed"));
        }
        Ok((header, first.len() as u64))
    }

    /// Replays the lines appended since this handle last read (all of them
    /// when the log was rewritten meanwhile). Call with the lock held.
    fn catch_up(&self, state: &mut State) -> Result<(), StoreError> {
        let mut file =
            File::open(&self.log_path).map_err(|error| io_error("open", &self.log_path, &error))?;
        let metadata = file
            .metadata()
            .map_err(|error| io_error("read", &self.log_path, &error))?;
        let len = metadata.len();
        let (header, header_len) = self.read_header(&mut file, len)?;
        let file_identity = identity(&metadata);
        let rewritten = state.offset == 0
            || state.identity != file_identity
            || state.generation != header.generation
            || len < state.offset;
        if rewritten {
            *state = State {
                offset: header_len,
                lines: 1,
                header_len,
                schema: header.kiln_store,
                generation: header.generation,
                identity: file_identity,
                ..State::default()
            };
        }
        if len <= state.offset {
            return Ok(());
        }
        file.seek(SeekFrom::Start(state.offset))
            .map_err(|error| io_error("read", &self.log_path, &error))?;
        let mut bytes = Vec::new();
        file.take(len - state.offset)
            .read_to_end(&mut bytes)
            .map_err(|error| io_error("read", &self.log_path, &error))?;
        self.replay(state, &bytes)
    }

    /// Applies the complete lines of `bytes` (read from `state.offset`).
    /// A last line that is cut short or does not parse is a torn write: it
    /// is left out and `state.offset` stops before it.
    fn replay(&self, state: &mut State, bytes: &[u8]) -> Result<(), StoreError> {
        // A complete line that did not parse: torn if nothing complete follows it.
        let mut unparsed: Option<(u64, serde_json::Error)> = None;
        let mut number = state.lines;
        let mut start = 0;
        while let Some(end) = bytes[start..].iter().position(|&byte| byte == b'\n') {
            let line = &bytes[start..start + end];
            number += 1;
            start += end + 1;
            if let Some((bad, error)) = unparsed.take() {
                return Err(self.corrupt(bad, format!("the line is not a batch ({error})")));
            }
            match serde_json::from_slice::<Line>(line) {
                Ok(Line::Ops(mut ops)) => {
                    // Each batch was checked when it was written; replay only redoes it.
                    for op in &mut ops {
                        op.expect = Expect::Any;
                    }
                    state.tables.apply(&ops).map_err(|error| {
                        self.corrupt(number, format!("the batch does not apply ({error})"))
                    })?;
                }
                Ok(Line::Snapshot { table, record }) => state.tables.restore(table, record),
                Err(error) => {
                    unparsed = Some((number, error));
                    continue;
                }
            }
            state.offset += (end + 1) as u64;
            state.lines = number;
        }
        Ok(())
    }

    /// Writes a new log holding only the header, through the temp file.
    fn create_log(&self) -> Result<(), StoreError> {
        let header = Header {
            kiln_store: SCHEMA_VERSION,
            generation: 0,
        };
        self.replace_log(|out| write_header(out, header))?;
        Ok(())
    }

    /// Rewrites the header of a schema-1 log to the current schema. The
    /// lines are the same in both (terms are computed on replay).
    fn upgrade(&self, state: &mut State) -> Result<(), StoreError> {
        let header = Header {
            kiln_store: SCHEMA_VERSION,
            generation: state.generation + 1,
        };
        let mut lines = Vec::new();
        let mut file =
            File::open(&self.log_path).map_err(|error| io_error("open", &self.log_path, &error))?;
        file.seek(SeekFrom::Start(state.header_len))
            .map_err(|error| io_error("read", &self.log_path, &error))?;
        file.take(state.offset - state.header_len)
            .read_to_end(&mut lines)
            .map_err(|error| io_error("read", &self.log_path, &error))?;
        let (len, file_identity) = self.replace_log(|out| {
            write_header(out, header)?;
            out.write_all(&lines)
        })?;
        state.header_len = len - lines.len() as u64;
        state.offset = len;
        state.schema = SCHEMA_VERSION;
        state.generation = header.generation;
        state.identity = file_identity;
        Ok(())
    }

    /// Writes `contents` to the temp file, fsyncs it and renames it over the
    /// log. Answers the new log's length and identity.
    fn replace_log(
        &self,
        contents: impl FnOnce(&mut io::BufWriter<&File>) -> io::Result<()>,
    ) -> Result<(u64, Option<Identity>), StoreError> {
        let written = (|| {
            let file = File::create(&self.tmp_path)?;
            let mut out = io::BufWriter::new(&file);
            contents(&mut out)?;
            out.flush()?;
            drop(out);
            file.sync_all()?;
            file.metadata()
        })();
        let metadata = match written {
            Ok(metadata) => metadata,
            Err(error) => {
                let _ = fs::remove_file(&self.tmp_path);
                return Err(io_error("write", &self.tmp_path, &error));
            }
        };
        if let Err(error) = fs::rename(&self.tmp_path, &self.log_path) {
            let _ = fs::remove_file(&self.tmp_path);
            return Err(io_error("replace", &self.log_path, &error));
        }
        sync_dir(&self.dir)?;
        Ok((metadata.len(), identity(&metadata)))
    }

    /// Appends one line at `state.offset`, cutting a torn tail first.
    fn append(&self, state: &State, line: &[u8]) -> Result<(), StoreError> {
        let file = OpenOptions::new()
            .append(true)
            .open(&self.log_path)
            .map_err(|error| io_error("open", &self.log_path, &error))?;
        let written = (|| {
            if file.metadata()?.len() > state.offset {
                // A torn tail left by a writer that was killed mid-append.
                file.set_len(state.offset)?;
            }
            // One write of the line and its `\n`: a kill leaves a prefix, never a
            // line that looks complete.
            (&file).write_all(line)?;
            file.sync_data()
        })();
        if let Err(error) = written {
            // An `Err` must mean nothing was written: cut back what got in.
            let _ = file.set_len(state.offset);
            let _ = file.sync_data();
            return Err(io_error("write", &self.log_path, &error));
        }
        Ok(())
    }

    /// Rewrites the log as snapshots when it has grown [`COMPACT_RATIO`]
    /// times past its live data. A failed compaction leaves the log as it
    /// was, which is still whole, so it is not an error of the commit.
    fn maybe_compact(&self, state: &mut State) {
        let len = state.offset;
        if len <= COMPACT_MIN_BYTES || len < state.next_compaction_check {
            return;
        }
        let header = Header {
            kiln_store: SCHEMA_VERSION,
            generation: state.generation + 1,
        };
        let mut live = Counter(0);
        if write_snapshot(&mut live, header, &state.tables).is_err() {
            return;
        }
        if len <= COMPACT_RATIO.saturating_mul(live.0) {
            // Weigh again only after another quarter of growth: counting costs
            // a pass over every record.
            state.next_compaction_check = len + len / 4;
            return;
        }
        let tables = &state.tables;
        let Ok((new_len, file_identity)) =
            self.replace_log(|out| write_snapshot(out, header, tables))
        else {
            return;
        };
        state.lines = 1 + state.tables.all().count() as u64;
        state.offset = new_len;
        state.generation = header.generation;
        state.identity = file_identity;
        state.header_len = header_len(header);
        state.next_compaction_check = 0;
    }

    fn read<T>(&self, answer: impl FnOnce(&Tables) -> T) -> Result<T, StoreError> {
        let _locked = self.lock_shared()?;
        let mut state = self.state.borrow_mut();
        self.catch_up(&mut state)?;
        Ok(answer(&state.tables))
    }

    fn commit_now(&self, ops: &[Op]) -> Result<Vec<Change>, StoreError> {
        let locked = self.lock_exclusive()?;
        let mut state = self.state.borrow_mut();
        self.catch_up(&mut state)?;
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        let mut line = serde_json::to_vec(&LineRef::Ops(ops))
            .map_err(|error| StoreError::Invalid(format!("the batch is not JSON: {error}")))?;
        // A line the replay could not read would stop every later open: what
        // is written is only what reads back.
        let depth = json_text_depth(&line);
        if depth > MAX_LINE_DEPTH {
            return Err(StoreError::Invalid(format!(
                "the batch nests {depth} levels deep as JSON; the log keeps at most \
                 {MAX_LINE_DEPTH} (values at most {} levels)",
                kiln_types::MAX_VALUE_DEPTH
            )));
        }
        line.push(b'\n');
        // Checks every expectation before changing anything.
        let changes = state.tables.apply(ops)?;
        if let Err(error) = self.append(&state, &line) {
            // The tables hold a batch the log does not: replay from the start.
            state.offset = 0;
            return Err(error);
        }
        state.offset += line.len() as u64;
        state.lines += 1;
        self.maybe_compact(&mut state);
        drop(state);
        drop(locked);
        Ok(changes)
    }
}

fn write_header(out: &mut impl Write, header: Header) -> io::Result<()> {
    serde_json::to_writer(&mut *out, &header)?;
    out.write_all(b"\n")
}

fn header_len(header: Header) -> u64 {
    let mut counter = Counter(0);
    let _ = write_header(&mut counter, header);
    counter.0
}

/// The header and one snapshot line per record.
fn write_snapshot(out: &mut impl Write, header: Header, tables: &Tables) -> io::Result<()> {
    write_header(out, header)?;
    for (table, record) in tables.all() {
        serde_json::to_writer(&mut *out, &LineRef::Snapshot { table, record })?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// Makes a rename in `dir` durable.
impl Backend for LogBackend {
    fn describe(&self) -> String {
        self.log_path.display().to_string()
    }

    fn get<'a>(&'a self, table: Table, key: &'a str) -> StoreFuture<'a, Option<Record>> {
        let found = self.read(|tables| tables.get(table, key));
        Box::pin(async move { found })
    }

    fn scan<'a>(&'a self, table: Table, scan: Scan<'a>) -> StoreFuture<'a, Vec<Record>> {
        let found = self.read(|tables| tables.scan(table, scan));
        Box::pin(async move { found })
    }

    fn search<'a>(
        &'a self,
        table: Table,
        terms: &'a [String],
    ) -> StoreFuture<'a, Vec<Vec<Record>>> {
        let found = self.read(|tables| tables.search(table, terms));
        Box::pin(async move { found })
    }

    fn count(&self, table: Table) -> StoreFuture<'_, u64> {
        let count = self.read(|tables| tables.count(table));
        Box::pin(async move { count })
    }

    fn commit(&self, ops: Vec<Op>) -> StoreFuture<'_, Vec<Change>> {
        let applied = self.commit_now(&ops);
        // After the lock is released: a listener may read the store.
        if let Ok(changes) = &applied {
            self.listeners.notify(changes);
        }
        Box::pin(async move { applied })
    }

    /// Feeds `listener` the commits of this handle only: other processes'
    /// writes are read at the next call, not fed.
    fn subscribe(&self, listener: Listener) -> Subscription {
        self.listeners.add(listener)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_quota_exceeded_naming_the_file() {
        let path = Path::new("/stores/a/store.log");
        for kind in [ErrorKind::StorageFull, ErrorKind::QuotaExceeded] {
            let full = io_error("write", path, &io::Error::from(kind));
            assert_eq!(full.code(), "quota_exceeded", "{kind:?}");
            assert!(full.to_string().contains("`/stores/a/store.log`"), "{full}");
        }
        let denied = io_error("open", path, &io::Error::from(ErrorKind::PermissionDenied));
        assert_eq!(denied.code(), "io");
        let message = denied.to_string();
        assert!(
            message.starts_with("could not open `/stores/a/store.log`"),
            "{message}"
        );
        assert!(
            denied
                .hint()
                .is_some_and(|hint| hint.contains("read and write the store's folder")),
            "{}",
            denied.with_hint()
        );
    }
}

/// The deepest a log line may nest: `serde_json` reads 128 levels, and the
/// replay must read every line the log wrote.
const MAX_LINE_DEPTH: usize = 120;

/// How deep the JSON text `bytes` nests (brackets and braces outside strings).
fn json_text_depth(bytes: &[u8]) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0_usize, 0, false, false);
    for &byte in bytes {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
mod depth_tests {
    use super::json_text_depth;

    #[test]
    fn the_depth_of_json_text_skips_what_strings_hold() {
        for (text, depth) in [
            ("1", 0),
            ("[]", 1),
            (r#"{"a": [1, {"b": 2}]}"#, 3),
            (r#"["[[[{{", "\"[["]"#, 1),
        ] {
            assert_eq!(json_text_depth(text.as_bytes()), depth, "{text}");
        }
    }
}

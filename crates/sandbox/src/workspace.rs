//! The guest's `workspace` object: the workspace's files for programs, as a
//! thin layer over the file capabilities.
//!
//! `workspace.read(path)` → the text, `write(path, content)` → a stat,
//! `list(path = "")` → `file_list`'s entries `[{name, path, is_dir, size,
//! modified_ms}]`, `stat(path)` → `file_stat`'s `{path, exists, is_file,
//! is_dir, size, modified_ms}` (a missing path is `exists: false`, not a
//! rejection): one shape per concept, the tools' own, with their names, `mkdir(path)` and `remove(path)` (one
//! file or one empty folder). Each method is exactly one call of one tool
//! (`file_read`, `file_write`, `file_list`, `file_stat`, `file_mkdir`,
//! `file_remove`) through the same function `tools.<name>` uses, so it goes
//! to the [`crate::tools::ToolHost`] like any call: the host's ladder gates
//! it, it counts against the run's call budget and appears in the call
//! summaries, and a refusal rejects with the tool's `Error` (`code`,
//! `message`, `detail`), catchable, and failing the run with that code when
//! uncaught.
//!
//! `workspace` is defined only when the run's catalog exposes at least one of
//! those tools; otherwise reading it is a `ReferenceError`, like any unknown
//! global. When only some are exposed, the methods of the missing ones reject
//! with a `TypeError` naming the tool (`workspace.write needs
//! tools.file_write, which this run does not have`) and make no call. The
//! methods bind to whatever tool of that name the run has: a host that
//! serves its own `file_stat` gets its answers mapped the same way.
//!
//! The object is written in JavaScript (`workspace.js`), made and installed
//! as every tool namespace is (`namespace`): frozen, and a program cannot
//! replace `workspace` or its methods.

use crate::namespace::Namespace;

/// The tools `workspace` calls, in the order `workspace.js` takes them.
pub const FILE_TOOLS: [&str; 6] = [
    "file_read",
    "file_write",
    "file_list",
    "file_stat",
    "file_mkdir",
    "file_remove",
];

/// The global `workspace` ([`crate::namespace`]).
pub(crate) static NAMESPACE: Namespace = Namespace {
    global: "workspace",
    source: include_str!("workspace.js"),
    tools: &FILE_TOOLS,
};

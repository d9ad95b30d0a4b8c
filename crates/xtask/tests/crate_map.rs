//! The map names every room: each crate under `crates/` has a line in
//! `crates/README.md` and a heading in ARCHITECTURE.md, and each crate root's
//! `//!` names every module the root declares, so a newcomer reading either
//! finds every crate and every module. Each check is a pure function over
//! text, tried on fixtures before it runs on the tree.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|error| panic!("{}: cannot read it: {error}", path.display()))
}

/// Each crate: its folder and its package name.
fn crates(root: &Path) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = std::fs::read_dir(root.join("crates"))
        .unwrap_or_else(|error| panic!("crates/: {error}"))
        .filter_map(Result::ok)
        .filter(|entry| entry.path().join("Cargo.toml").is_file())
        .map(|entry| {
            let folder = entry.file_name().to_string_lossy().into_owned();
            let manifest = read(&entry.path().join("Cargo.toml"));
            let name = manifest
                .lines()
                .find_map(|line| line.strip_prefix("name = "))
                .map(|name| name.trim().trim_matches('"').to_owned())
                .unwrap_or_else(|| folder.clone());
            (folder, name)
        })
        .collect();
    found.sort();
    found
}

/// The crates `crates/README.md` has no `- **<package>**` line for, and those
/// ARCHITECTURE.md has no `### ` heading naming `` `crates/<folder>` `` for.
fn check_index(crates: &[(String, String)], readme: &str, architecture: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for (folder, package) in crates {
        if !readme
            .lines()
            .any(|line| line.starts_with(&format!("- **{package}**")))
        {
            problems.push(format!(
                "crates/README.md: no line for `{package}`\n    hint: add `- **{package}** — what it is for.`"
            ));
        }
        if !architecture
            .lines()
            .any(|line| line.starts_with("### ") && line.contains(&format!("`crates/{folder}`")))
        {
            problems.push(format!(
                "ARCHITECTURE.md: no heading for `crates/{folder}`\n    hint: add `### \\`crates/{folder}\\` (\\`{package}\\`)` with a paragraph: what it is for, its seams, its invariants"
            ));
        }
    }
    problems
}

/// The modules a crate root declares (`mod x;`, `pub mod x;`, with any
/// attributes or visibility before them), in order.
fn declared_modules(root_source: &str) -> Vec<String> {
    root_source
        .lines()
        .map(str::trim)
        .filter_map(|line| {
            let line = line
                .strip_prefix("pub(crate) ")
                .or_else(|| line.strip_prefix("pub "))
                .unwrap_or(line);
            let name = line.strip_prefix("mod ")?.strip_suffix(';')?;
            Some(name.trim().to_owned())
        })
        .collect()
}

/// The root's `//!` text: its leading inner doc comment.
fn crate_doc(root_source: &str) -> String {
    root_source
        .lines()
        .take_while(|line| line.trim_start().starts_with("//!") || line.trim().is_empty())
        .filter_map(|line| line.trim_start().strip_prefix("//!"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The modules `path`'s root declares and its `//!` does not name as
/// `` `module` `` (or [`module`], or `module.rs`).
fn check_root(path: &str, root_source: &str) -> Vec<String> {
    let doc = crate_doc(root_source);
    declared_modules(root_source)
        .into_iter()
        .filter(|module| module != "tests")
        .filter(|module| {
            !(doc.contains(&format!("`{module}`"))
                || doc.contains(&format!("`{module}.rs`"))
                || doc.contains(&format!("[`{module}`]")))
        })
        .map(|module| {
            format!(
                "{path}: declares `mod {module}` but its `//!` does not name it\n    hint: say in the crate's `//!` what `{module}` is for (as `` `{module}` ``)"
            )
        })
        .collect()
}

/// A crate's root file: `src/lib.rs`, else `src/main.rs`.
fn root_file(root: &Path, folder: &str) -> Option<PathBuf> {
    ["lib.rs", "main.rs"]
        .iter()
        .map(|file| root.join("crates").join(folder).join("src").join(file))
        .find(|path| path.is_file())
}

#[test]
fn every_crate_is_in_the_index_and_the_map() {
    let root = root();
    let problems = check_index(
        &crates(&root),
        &read(&root.join("crates/README.md")),
        &read(&root.join("ARCHITECTURE.md")),
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_crate_root_names_its_modules() {
    let root = root();
    let mut problems = Vec::new();
    for (folder, _) in crates(&root) {
        if let Some(file) = root_file(&root, &folder) {
            let shown = format!(
                "crates/{folder}/src/{}",
                file.file_name()
                    .map(|name| name.to_string_lossy().into_owned())
                    .unwrap_or_default()
            );
            problems.extend(check_root(&shown, &read(&file)));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_crate_missing_from_the_index_or_the_map_is_named() {
    let crates = vec![
        ("run".to_owned(), "kiln-run".to_owned()),
        ("http".to_owned(), "kiln-http".to_owned()),
        ("mcp".to_owned(), "kiln-mcp".to_owned()),
    ];
    let readme = "# Crates\n\n- **kiln-run** — one run.\n- **kiln-http** — requests.\n";
    let architecture = "### `crates/run` (`kiln-run`)\n\n### `crates/http` (`kiln-http`) and `crates/mcp` (`kiln-mcp`)\n";
    assert_eq!(
        check_index(&crates, readme, architecture),
        [
            "crates/README.md: no line for `kiln-mcp`\n    hint: add `- **kiln-mcp** — what it is for.`"
        ]
    );
    let bare = check_index(&crates, readme, "## Code map\n\nThe `crates/run` folder.\n");
    assert_eq!(bare.len(), 4, "{bare:?}");
}

#[test]
fn a_module_the_root_doc_does_not_name_is_named() {
    let source = "//! The crate: [`request`] reads, `ladder.rs` assembles.\n\n#[cfg(feature = \"bench\")]\npub mod bench;\nmod ladder;\npub(crate) mod request;\nmod record;\n\n#[cfg(test)]\nmod tests;\n";
    assert_eq!(
        declared_modules(source),
        ["bench", "ladder", "request", "record", "tests"]
    );
    let problems = check_root("crates/run/src/lib.rs", source);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].contains("`mod bench`"), "{problems:?}");
    assert!(problems[1].contains("`mod record`"), "{problems:?}");
}

//! Tidy tests: what ARCHITECTURE.md states about the tree, checked against it —
//! the dependency direction matches every `crates/*/Cargo.toml`, Boa stays in
//! the sandbox, the agent layer names no platform crate, and every `src` file
//! opens with a `//!` line. Each check is a pure function over text, tried on
//! small fixtures here before it runs on the real tree.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

/// The workspace root: this crate is `crates/xtask`.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Reads a file of the tree; a tidy test that cannot read what it checks can only fail.
fn read(path: &Path) -> String {
    fs::read_to_string(path)
        .unwrap_or_else(|error| panic!("{}: cannot read it: {error}", path.display()))
}

/// One thing wrong with the tree: the file to change, what is wrong, what to do.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Problem {
    path: String,
    what: String,
    hint: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}\n    hint: {}", self.path, self.what, self.hint)
    }
}

/// Every problem, one after another, for one assertion that lists them all.
fn report(problems: &[Problem]) -> String {
    let lines: Vec<String> = problems.iter().map(Problem::to_string).collect();
    format!("{} problem(s):\n\n{}\n", problems.len(), lines.join("\n"))
}

// --- Manifests -------------------------------------------------------------

/// Which dependency table a dependency sits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DepKind {
    Normal,
    /// Counted with the normal edges: a build script is part of every build.
    Build,
    Dev,
}

const DEP_KINDS: [DepKind; 3] = [DepKind::Normal, DepKind::Build, DepKind::Dev];

impl DepKind {
    fn table(self) -> &'static str {
        match self {
            DepKind::Normal => "dependencies",
            DepKind::Build => "build-dependencies",
            DepKind::Dev => "dev-dependencies",
        }
    }
}

/// One dependency a manifest names.
#[derive(Debug)]
struct Dependency {
    kind: DepKind,
    /// Where it is named, as TOML spells the table: `[dependencies]`,
    /// `[target.'cfg(...)'.dev-dependencies]`.
    table: String,
    /// The key, and the package it names (they differ under `package = "..."`).
    key: String,
    package: String,
}

/// One `crates/<folder>/Cargo.toml`.
#[derive(Debug)]
struct Manifest {
    /// `crates/<folder>/Cargo.toml`, as messages name it.
    path: String,
    /// The folder name: what ARCHITECTURE.md calls the crate.
    folder: String,
    package: String,
    dependencies: Vec<Dependency>,
}

/// The root manifest's `[workspace.dependencies]`: key → the package it names, so
/// that `foo.workspace = true` resolves to the package behind `foo`.
fn workspace_packages(root_manifest: &str) -> Result<BTreeMap<String, String>, String> {
    let table: toml::Table = root_manifest
        .parse()
        .map_err(|error| format!("Cargo.toml: not valid TOML: {error}"))?;
    let Some(dependencies) = table
        .get("workspace")
        .and_then(|workspace| workspace.get("dependencies"))
        .and_then(toml::Value::as_table)
    else {
        return Ok(BTreeMap::new());
    };
    Ok(dependencies
        .iter()
        .map(|(key, spec)| {
            let package = spec.get("package").and_then(toml::Value::as_str);
            (key.clone(), package.unwrap_or(key).to_owned())
        })
        .collect())
}

/// Reads one crate's manifest: its package name and every dependency, in
/// `[dependencies]`, `[build-dependencies]`, `[dev-dependencies]` and each
/// `[target.'cfg(...)'.*]` twin.
fn parse_manifest(
    folder: &str,
    text: &str,
    workspace: &BTreeMap<String, String>,
) -> Result<Manifest, String> {
    let path = format!("crates/{folder}/Cargo.toml");
    let table: toml::Table = text
        .parse()
        .map_err(|error| format!("{path}: not valid TOML: {error}"))?;
    let package = table
        .get("package")
        .and_then(|package| package.get("name"))
        .and_then(toml::Value::as_str)
        .ok_or_else(|| format!("{path}: no `package.name`"))?
        .to_owned();

    let mut tables: Vec<(DepKind, String, &toml::Value)> = Vec::new();
    for kind in DEP_KINDS {
        if let Some(deps) = table.get(kind.table()) {
            tables.push((kind, format!("[{}]", kind.table()), deps));
        }
    }
    if let Some(targets) = table.get("target").and_then(toml::Value::as_table) {
        for (cfg, target) in targets {
            for kind in DEP_KINDS {
                if let Some(deps) = target.get(kind.table()) {
                    tables.push((kind, format!("[target.'{cfg}'.{}]", kind.table()), deps));
                }
            }
        }
    }

    let mut dependencies = Vec::new();
    for (kind, table, deps) in tables {
        let deps = deps
            .as_table()
            .ok_or_else(|| format!("{path}: `{table}` is not a table"))?;
        for (key, spec) in deps {
            let package = if let Some(name) = spec.get("package").and_then(toml::Value::as_str) {
                name.to_owned()
            } else if spec.get("workspace").and_then(toml::Value::as_bool) == Some(true) {
                workspace.get(key).unwrap_or(key).clone()
            } else {
                key.clone()
            };
            dependencies.push(Dependency {
                kind,
                table: table.clone(),
                key: key.clone(),
                package,
            });
        }
    }
    Ok(Manifest {
        path,
        folder: folder.to_owned(),
        package,
        dependencies,
    })
}

/// Every crate of the workspace: each folder under `crates/` with a `Cargo.toml`.
fn load_manifests(root: &Path) -> Vec<Manifest> {
    let workspace = workspace_packages(&read(&root.join("Cargo.toml")))
        .unwrap_or_else(|error| panic!("{error}"));
    let crates = root.join("crates");
    let entries = fs::read_dir(&crates)
        .unwrap_or_else(|error| panic!("{}: cannot list it: {error}", crates.display()));
    let mut folders: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|entry| entry.path().join("Cargo.toml").is_file())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    folders.sort();
    folders
        .iter()
        .map(|folder| {
            let text = read(&crates.join(folder).join("Cargo.toml"));
            parse_manifest(folder, &text, &workspace).unwrap_or_else(|error| panic!("{error}"))
        })
        .collect()
}

// --- ARCHITECTURE.md's Dependency direction ---------------------------------

/// The two lists of `## Dependency direction`: crate → the workspace crates it may
/// depend on (`Dependencies:`) and may dev-depend on (`Dev-dependencies ...`).
#[derive(Debug, Default)]
struct DirectionMap {
    normal: BTreeMap<String, BTreeSet<String>>,
    dev: BTreeMap<String, BTreeSet<String>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum List {
    Normal,
    Dev,
}

impl List {
    fn heading(self) -> &'static str {
        match self {
            List::Normal => "Dependencies:",
            List::Dev => "Dev-dependencies",
        }
    }
}

const SECTION: &str = "## Dependency direction";

/// Reads the section from its heading to the next `## `: after the line
/// `Dependencies:` and after the line starting `Dev-dependencies`, each list is
/// the lines ``- `crate`: `dep`, `dep` `` or ``- `crate`: none`` up to the next
/// paragraph.
fn parse_direction(architecture: &str) -> Result<DirectionMap, String> {
    let mut lines = architecture
        .lines()
        .enumerate()
        .skip_while(|(_, line)| line.trim_end() != SECTION);
    if lines.next().is_none() {
        return Err(format!("ARCHITECTURE.md: no `{SECTION}` section"));
    }
    let mut map = DirectionMap::default();
    let mut list = None;
    let mut items_in_list = 0;
    for (index, line) in lines.take_while(|(_, line)| !line.starts_with("## ")) {
        let line = line.trim_end();
        if line == List::Normal.heading() {
            (list, items_in_list) = (Some(List::Normal), 0);
        } else if line.starts_with(List::Dev.heading()) {
            (list, items_in_list) = (Some(List::Dev), 0);
        } else if let (Some(current), Some(item)) = (list, line.strip_prefix("- ")) {
            let Some((name, deps)) = parse_item(item) else {
                return Err(format!(
                    "ARCHITECTURE.md line {}: `{line}` is not ``- `crate`: `dep`, `dep` `` \
                     or ``- `crate`: none``",
                    index + 1
                ));
            };
            let entries = match current {
                List::Normal => &mut map.normal,
                List::Dev => &mut map.dev,
            };
            if entries.insert(name.clone(), deps).is_some() {
                return Err(format!(
                    "ARCHITECTURE.md line {}: `{name}` has a second line under `{}`",
                    index + 1,
                    current.heading()
                ));
            }
            items_in_list += 1;
        } else if !line.is_empty() && items_in_list > 0 {
            // A paragraph after the items ends the list.
            list = None;
        }
    }
    if map.normal.is_empty() {
        return Err(format!(
            "ARCHITECTURE.md: `{SECTION}` has no `Dependencies:` line followed by a list"
        ));
    }
    Ok(map)
}

/// ``- `crate`: `dep`, `dep` `` or ``- `crate`: none``, without its `- `.
fn parse_item(item: &str) -> Option<(String, BTreeSet<String>)> {
    let (name, deps) = item.split_once(':')?;
    let name = backticked(name.trim())?;
    let deps = deps.trim();
    if deps == "none" {
        return Some((name, BTreeSet::new()));
    }
    let deps = deps
        .split(',')
        .map(|dep| backticked(dep.trim()))
        .collect::<Option<BTreeSet<String>>>()?;
    Some((name, deps))
}

fn backticked(text: &str) -> Option<String> {
    let inner = text.strip_prefix('`')?.strip_suffix('`')?;
    (!inner.is_empty() && !inner.contains('`')).then(|| inner.to_owned())
}

// --- The checks --------------------------------------------------------------

/// One crate's workspace edges: dependency folder → the package and the table
/// that names it, for messages.
type Edges = BTreeMap<String, (String, String)>;

/// Each crate's normal edges (normal and build dependencies, target-specific
/// ones included) and dev edges (dev-dependencies that are not also normal).
fn workspace_edges(manifests: &[Manifest]) -> BTreeMap<&str, (Edges, Edges)> {
    let folder_of: BTreeMap<&str, &str> = manifests
        .iter()
        .map(|manifest| (manifest.package.as_str(), manifest.folder.as_str()))
        .collect();
    let mut all = BTreeMap::new();
    for manifest in manifests {
        let (mut normal, mut dev) = (Edges::new(), Edges::new());
        for dep in &manifest.dependencies {
            let Some(folder) = folder_of.get(dep.package.as_str()) else {
                continue;
            };
            let edges = match dep.kind {
                DepKind::Normal | DepKind::Build => &mut normal,
                DepKind::Dev => &mut dev,
            };
            edges
                .entry((*folder).to_owned())
                .or_insert_with(|| (dep.package.clone(), dep.table.clone()));
        }
        dev.retain(|folder, _| !normal.contains_key(folder));
        all.insert(manifest.folder.as_str(), (normal, dev));
    }
    all
}

/// ``- `crate`: `a`, `b` `` (or `none`): the line a list would need for these edges.
fn list_line(folder: &str, edges: &Edges) -> String {
    let deps: Vec<String> = edges.keys().map(|dep| format!("`{dep}`")).collect();
    let deps = if deps.is_empty() {
        "none".to_owned()
    } else {
        deps.join(", ")
    };
    format!("- `{folder}`: {deps}")
}

/// The manifests against the map: an edge a manifest has that the map does not
/// list, a listed edge no manifest has, a crate with no `Dependencies:` line, a
/// listed crate that does not exist.
fn check_direction(map: &DirectionMap, manifests: &[Manifest]) -> Vec<Problem> {
    let edges = workspace_edges(manifests);
    let mut problems = Vec::new();
    let direction = "ARCHITECTURE.md's Dependency direction";

    for manifest in manifests {
        let folder = manifest.folder.as_str();
        let Some((normal, dev)) = edges.get(folder) else {
            continue;
        };
        let lists = [
            (List::Normal, map.normal.get(folder), normal),
            (List::Dev, map.dev.get(folder), dev),
        ];
        for (list, allowed, actual) in lists {
            let heading = list.heading();
            let allowed = match allowed {
                Some(allowed) => allowed,
                // A crate without dev edges needs no `Dev-dependencies` line.
                None if list == List::Dev => &BTreeSet::new(),
                None => {
                    problems.push(Problem {
                        path: manifest.path.clone(),
                        what: format!(
                            "crate `{folder}` has no line under `{heading}` in {direction}"
                        ),
                        hint: format!("add this line there: {}", list_line(folder, actual)),
                    });
                    continue;
                }
            };
            for (dep, (package, table)) in actual {
                if !allowed.contains(dep) {
                    problems.push(Problem {
                        path: manifest.path.clone(),
                        what: format!(
                            "`{table}` names `{package}`: the edge `{folder}` → `{dep}` \
                             is not listed under `{heading}` in {direction}"
                        ),
                        hint: format!(
                            "list `{dep}` on `{folder}`'s line under `{heading}` in {direction}, \
                             or remove the dependency (nothing points up)"
                        ),
                    });
                }
            }
        }
    }

    for (list, entries) in [(List::Normal, &map.normal), (List::Dev, &map.dev)] {
        let heading = list.heading();
        for (folder, deps) in entries {
            let path = format!("crates/{folder}/Cargo.toml");
            let Some((normal, dev)) = edges.get(folder.as_str()) else {
                problems.push(Problem {
                    path,
                    what: format!(
                        "{direction} lists crate `{folder}` under `{heading}`, \
                         but there is no such crate"
                    ),
                    hint: format!("remove `{folder}`'s line from {direction}, or create the crate"),
                });
                continue;
            };
            let actual = match list {
                List::Normal => normal,
                List::Dev => dev,
            };
            for dep in deps.iter().filter(|dep| !actual.contains_key(*dep)) {
                let tables = match list {
                    List::Normal => "`[dependencies]`",
                    List::Dev => "`[dev-dependencies]` (and not `[dependencies]`)",
                };
                problems.push(Problem {
                    path: path.clone(),
                    what: format!(
                        "{direction} lists the edge `{folder}` → `{dep}` under `{heading}`, \
                         but no {tables} table here names it: the map drifted"
                    ),
                    hint: format!(
                        "remove `{dep}` from `{folder}`'s line under `{heading}` in {direction}, \
                         or add the dependency"
                    ),
                });
            }
        }
    }
    problems.sort();
    problems
}

/// The `boa_*` packages a crate other than the sandbox may name: the
/// parser and its AST, for static checks (`crates/jscheck`), never the
/// engine.
const BOA_PARSER_ONLY: &[&str] = &["boa_parser", "boa_ast", "boa_interner"];

/// `boa_engine`, `boa_gc` and every other `boa_*` package: in `crates/sandbox`
/// only; `crates/jscheck` may name the parser's ([`BOA_PARSER_ONLY`]).
fn check_boa(manifests: &[Manifest]) -> Vec<Problem> {
    let mut problems = Vec::new();
    for manifest in manifests
        .iter()
        .filter(|manifest| manifest.folder != "sandbox")
    {
        for dep in &manifest.dependencies {
            if !(dep.package.starts_with("boa_") || dep.key.starts_with("boa_")) {
                continue;
            }
            if manifest.folder == "jscheck" && BOA_PARSER_ONLY.contains(&dep.package.as_str()) {
                continue;
            }
            problems.push(Problem {
                path: manifest.path.clone(),
                what: format!(
                    "`{}` names `{}`: only crates/sandbox may know Boa's engine, and only crates/jscheck its parser",
                    dep.table, dep.package
                ),
                hint: "remove the dependency and reach Boa through kiln-sandbox, or parse through kiln-jscheck \
                       (ARCHITECTURE.md, Architecture invariant)"
                    .to_owned(),
            });
        }
    }
    problems.sort();
    problems
}

/// The browser's crates: the agent layer runs natively and in the browser alike,
/// so it names none of them outside its tests.
const PLATFORM_CRATES: &[&str] = &[
    "web-sys",
    "js-sys",
    "wasm-bindgen",
    "wasm-bindgen-futures",
    "getrandom",
    "gloo",
];

fn is_platform_crate(name: &str) -> bool {
    PLATFORM_CRATES.contains(&name) || name.starts_with("gloo-")
}

/// The orchestration layer: pure logic over traits, tested natively.
const ORCHESTRATION: [&str; 3] = ["run", "agent", "nodes"];

/// The orchestration crates' normal dependencies (target-specific included)
/// name no platform crate; their dev-dependencies may.
fn check_agent(manifests: &[Manifest]) -> Vec<Problem> {
    let mut problems = Vec::new();
    for manifest in manifests
        .iter()
        .filter(|manifest| ORCHESTRATION.contains(&manifest.folder.as_str()))
    {
        for dep in &manifest.dependencies {
            if dep.kind == DepKind::Normal
                && (is_platform_crate(&dep.package) || is_platform_crate(&dep.key))
            {
                problems.push(Problem {
                    path: manifest.path.clone(),
                    what: format!(
                        "`{}` names `{}`: the orchestration layer (run, agent, nodes) names no platform crate",
                        dep.table, dep.package
                    ),
                    hint: "move the browser code behind a trait the entrance crates (ui, page) \
                           implement, or into `[dev-dependencies]` if only tests need it \
                           (ARCHITECTURE.md, Architecture invariant)"
                        .to_owned(),
                });
            }
        }
    }
    problems.sort();
    problems
}

/// Edges the layers forbid whatever the map lists (DESIGN.md, "Layers"):
/// a program run knows no model loop and no node, and the evals reach no
/// build but the CLI's.
fn check_layers(manifests: &[Manifest]) -> Vec<Problem> {
    let mut problems = Vec::new();
    for manifest in manifests {
        for dep in manifest
            .dependencies
            .iter()
            .filter(|dep| dep.kind != DepKind::Dev)
        {
            let why = match (manifest.folder.as_str(), dep.package.as_str()) {
                ("run", "kiln-agent" | "kiln-nodes") => {
                    "a program run never knows a model loop or a code node exists"
                }
                (folder, "kiln-evals") if folder != "cli" => {
                    "only the CLI runs evals: they never reach a wasm build"
                }
                _ => continue,
            };
            problems.push(Problem {
                path: manifest.path.clone(),
                what: format!("`{}` names `{}`: {why}", dep.table, dep.package),
                hint: "move what is shared down into `kiln-run` or `kiln-types` \
                       (ARCHITECTURE.md, Dependency direction)"
                    .to_owned(),
            });
        }
    }
    problems.sort();
    problems
}

/// The entrances a person or a page uses: they speak only the runtime
/// protocol, through its one client.
const ENTRANCES: [&str; 2] = ["ui", "page"];

/// The workspace crates (by folder) an entrance may name: the protocol's
/// types, its one client, and the clock (a leaf: the time, and nothing that
/// runs a tool or keeps a record).
const ENTRANCE_MAY_NAME: [&str; 3] = ["types", "runtime-client", "clock"];

/// `crates/ui` and `crates/page` name no workspace crate but `kiln-types`,
/// `kiln-runtime-client` and `kiln-clock` in their normal dependencies
/// (target-specific included).
fn check_entrances(manifests: &[Manifest]) -> Vec<Problem> {
    let edges = workspace_edges(manifests);
    let mut problems = Vec::new();
    for manifest in manifests
        .iter()
        .filter(|manifest| ENTRANCES.contains(&manifest.folder.as_str()))
    {
        let Some((normal, _)) = edges.get(manifest.folder.as_str()) else {
            continue;
        };
        for (folder, (package, table)) in normal
            .iter()
            .filter(|(folder, _)| !ENTRANCE_MAY_NAME.contains(&folder.as_str()))
        {
            problems.push(Problem {
                path: manifest.path.clone(),
                what: format!(
                    "`{table}` names `{package}`: `{}` speaks only the runtime protocol, so \
                     `kiln-types`, `kiln-runtime-client` and `kiln-clock` are the workspace \
                     crates it may depend on (not `{folder}`)",
                    manifest.folder
                ),
                hint: "send what it needs to the runtime worker as a `kiln_types::runtime` \
                       message, and move the data it shows into `kiln-types` \
                       (ARCHITECTURE.md, Architecture invariant)"
                    .to_owned(),
            });
        }
    }
    problems.sort();
    problems
}

/// The first non-empty line is a `//!` module doc.
fn opens_with_module_doc(text: &str) -> bool {
    text.lines()
        .find(|line| !line.trim().is_empty())
        .is_some_and(|line| line.trim_start().starts_with("//!"))
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let entries = fs::read_dir(dir)
        .unwrap_or_else(|error| panic!("{}: cannot list it: {error}", dir.display()));
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            files.push(path);
        }
    }
}

// --- The tree ------------------------------------------------------------------

#[test]
fn dependency_direction_matches_the_manifests() {
    let root = root();
    let map = parse_direction(&read(&root.join("ARCHITECTURE.md")))
        .unwrap_or_else(|error| panic!("{error}"));
    let problems = check_direction(&map, &load_manifests(&root));
    assert!(problems.is_empty(), "{}", report(&problems));
}

#[test]
fn boa_is_in_the_sandbox_manifest_only() {
    let problems = check_boa(&load_manifests(&root()));
    assert!(problems.is_empty(), "{}", report(&problems));
}

#[test]
fn agent_names_no_platform_crate() {
    let problems = check_agent(&load_manifests(&root()));
    assert!(problems.is_empty(), "{}", report(&problems));
}

#[test]
fn the_layers_forbid_their_upward_edges() {
    let problems = check_layers(&load_manifests(&root()));
    assert!(problems.is_empty(), "{}", report(&problems));
}

#[test]
fn an_upward_edge_the_layers_forbid_is_refused() {
    let workspace = workspace_packages(FIXTURE_WORKSPACE).unwrap_or_else(|error| panic!("{error}"));
    let manifests: Vec<Manifest> = [
        ("run", "[package]\nname = \"kiln-run\"\n[dependencies]\nkiln-nodes = { path = \"../nodes\" }\n"),
        ("ui", "[package]\nname = \"kiln-ui\"\n[dependencies]\nkiln-evals = { path = \"../evals\" }\n"),
        ("cli", "[package]\nname = \"kiln-cli\"\n[dependencies]\nkiln-evals = { path = \"../evals\" }\n"),
        ("agent", "[package]\nname = \"kiln-agent\"\n[dev-dependencies]\nkiln-evals = { path = \"../evals\" }\n"),
    ]
    .iter()
    .map(|(folder, text)| parse_manifest(folder, text, &workspace).unwrap_or_else(|error| panic!("{error}")))
    .collect();
    let hint = "move what is shared down into `kiln-run` or `kiln-types` (ARCHITECTURE.md, Dependency direction)";
    assert_eq!(
        rendered(&check_layers(&manifests)),
        [
            format!(
                "crates/run/Cargo.toml: `[dependencies]` names `kiln-nodes`: a program run never knows a model loop or a code node exists\n    hint: {hint}"
            ),
            format!(
                "crates/ui/Cargo.toml: `[dependencies]` names `kiln-evals`: only the CLI runs evals: they never reach a wasm build\n    hint: {hint}"
            ),
        ]
    );
}

#[test]
fn the_ui_and_the_page_depend_on_the_protocol_alone() {
    let problems = check_entrances(&load_manifests(&root()));
    assert!(problems.is_empty(), "{}", report(&problems));
}

#[test]
fn every_src_file_opens_with_a_module_doc() {
    let root = root();
    let mut files = Vec::new();
    for manifest in load_manifests(&root) {
        let src = root.join("crates").join(&manifest.folder).join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    files.sort();
    let problems: Vec<Problem> = files
        .iter()
        .filter(|file| !opens_with_module_doc(&read(file)))
        .map(|file| Problem {
            path: file
                .strip_prefix(&root)
                .unwrap_or(file)
                .display()
                .to_string(),
            what: "the first non-empty line is not a `//!` module doc".to_owned(),
            hint: "open the file with a `//!` line saying what the module is for \
                   (../shared/STYLE.md, habit 7)"
                .to_owned(),
        })
        .collect();
    assert!(problems.is_empty(), "{}", report(&problems));
}

// --- The checks on fixtures ------------------------------------------------------

/// A map with one of each kind of drift against [`FIXTURE_MANIFESTS`].
const FIXTURE_MAP: &str = "\
# Map

## Dependency direction

Nothing points up.

Dependencies:

- `types`: none
- `store`: `types`
- `ui`: `store`, `ghost`
- `ghost`: `types`
- `kit`: none
- `sandbox`: none

Dev-dependencies (tests only):

- `store`: `kit`
- `ui`: `kit`

A paragraph ends the list:

- `types`: `not-a-list-item`

## Next section

- `ui`: `not-in-the-section`
";

/// Folder and manifest. `kit`'s package is not `kiln-kit`: folders come from
/// `package.name`, not from the key.
const FIXTURE_MANIFESTS: &[(&str, &str)] = &[
    (
        "types",
        r#"
        [package]
        name = "kiln-types"
        [target.'cfg(not(target_arch = "wasm32"))'.dev-dependencies]
        kiln-testkit = { path = "../kit" }
        "#,
    ),
    (
        "store",
        r#"
        [package]
        name = "kiln-store"
        [dependencies]
        kiln-types.workspace = true
        [dev-dependencies]
        kit = { package = "kiln-testkit", path = "../kit" }
        "#,
    ),
    (
        "ui",
        r#"
        [package]
        name = "kiln-ui"
        [dependencies]
        kiln-store = { path = "../store" }
        boa_gc = "0.22"
        [target.'cfg(target_arch = "wasm32")'.dependencies]
        kiln-types.workspace = true
        [dev-dependencies]
        kiln-store = { path = "../store" }
        "#,
    ),
    (
        "kit",
        r#"
        [package]
        name = "kiln-testkit"
        "#,
    ),
    (
        "agent",
        r#"
        [package]
        name = "kiln-agent"
        [dependencies]
        serde = "1"
        [target.'cfg(target_arch = "wasm32")'.dependencies]
        rand = { package = "getrandom", version = "0.3" }
        gloo-timers = "0.3"
        [dev-dependencies]
        web-sys = "0.3"
        wasm-bindgen-test = "0.3"
        "#,
    ),
    (
        "sandbox",
        r#"
        [package]
        name = "kiln-sandbox"
        [dependencies]
        boa_engine.workspace = true
        "#,
    ),
];

const FIXTURE_WORKSPACE: &str = r#"
[workspace.dependencies]
kiln-types = { path = "crates/types" }
boa_engine = "0.22"
"#;

fn fixture_manifests() -> Vec<Manifest> {
    let workspace = workspace_packages(FIXTURE_WORKSPACE).unwrap_or_else(|error| panic!("{error}"));
    FIXTURE_MANIFESTS
        .iter()
        .map(|(folder, text)| {
            parse_manifest(folder, text, &workspace).unwrap_or_else(|error| panic!("{error}"))
        })
        .collect()
}

fn rendered(problems: &[Problem]) -> Vec<String> {
    problems.iter().map(Problem::to_string).collect()
}

#[test]
fn direction_check_reports_each_kind_of_drift() {
    let map = parse_direction(FIXTURE_MAP).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(
        rendered(&check_direction(&map, &fixture_manifests())),
        [
            "crates/agent/Cargo.toml: crate `agent` has no line under `Dependencies:` in ARCHITECTURE.md's Dependency direction\n    hint: add this line there: - `agent`: none",
            "crates/ghost/Cargo.toml: ARCHITECTURE.md's Dependency direction lists crate `ghost` under `Dependencies:`, but there is no such crate\n    hint: remove `ghost`'s line from ARCHITECTURE.md's Dependency direction, or create the crate",
            "crates/types/Cargo.toml: `[target.'cfg(not(target_arch = \"wasm32\"))'.dev-dependencies]` names `kiln-testkit`: the edge `types` → `kit` is not listed under `Dev-dependencies` in ARCHITECTURE.md's Dependency direction\n    hint: list `kit` on `types`'s line under `Dev-dependencies` in ARCHITECTURE.md's Dependency direction, or remove the dependency (nothing points up)",
            "crates/ui/Cargo.toml: ARCHITECTURE.md's Dependency direction lists the edge `ui` → `ghost` under `Dependencies:`, but no `[dependencies]` table here names it: the map drifted\n    hint: remove `ghost` from `ui`'s line under `Dependencies:` in ARCHITECTURE.md's Dependency direction, or add the dependency",
            "crates/ui/Cargo.toml: ARCHITECTURE.md's Dependency direction lists the edge `ui` → `kit` under `Dev-dependencies`, but no `[dev-dependencies]` (and not `[dependencies]`) table here names it: the map drifted\n    hint: remove `kit` from `ui`'s line under `Dev-dependencies` in ARCHITECTURE.md's Dependency direction, or add the dependency",
            "crates/ui/Cargo.toml: `[target.'cfg(target_arch = \"wasm32\")'.dependencies]` names `kiln-types`: the edge `ui` → `types` is not listed under `Dependencies:` in ARCHITECTURE.md's Dependency direction\n    hint: list `types` on `ui`'s line under `Dependencies:` in ARCHITECTURE.md's Dependency direction, or remove the dependency (nothing points up)",
        ]
    );
}

#[test]
fn direction_lines_that_are_not_items_are_refused() {
    let cases = [
        "- `a` `b`",
        "- a: none",
        "- `a`: `b` `c`",
        "- `a`: `b`,",
        "- `a`:",
        "- ``: none",
    ];
    for line in cases {
        let map = format!("{SECTION}\n\nDependencies:\n\n{line}\n");
        let parsed = parse_direction(&map);
        assert!(parsed.is_err(), "`{line}` was read as {parsed:?}");
    }
    let twice = format!("{SECTION}\n\nDependencies:\n\n- `a`: none\n- `a`: `b`\n");
    assert!(
        parse_direction(&twice).is_err(),
        "a crate listed twice was accepted"
    );
    assert!(
        parse_direction("# Map\n").is_err(),
        "a map without the section was accepted"
    );
}

#[test]
fn an_entrance_that_names_another_kiln_crate_is_refused() {
    assert_eq!(
        rendered(&check_entrances(&fixture_manifests())),
        [
            "crates/ui/Cargo.toml: `[dependencies]` names `kiln-store`: `ui` speaks only the runtime protocol, so `kiln-types`, `kiln-runtime-client` and `kiln-clock` are the workspace crates it may depend on (not `store`)\n    hint: send what it needs to the runtime worker as a `kiln_types::runtime` message, and move the data it shows into `kiln-types` (ARCHITECTURE.md, Architecture invariant)",
        ]
    );
}

#[test]
fn boa_and_platform_checks_read_every_table() {
    let manifests = fixture_manifests();
    assert_eq!(
        rendered(&check_boa(&manifests)),
        [
            "crates/ui/Cargo.toml: `[dependencies]` names `boa_gc`: only crates/sandbox may know Boa's engine, and only crates/jscheck its parser\n    hint: remove the dependency and reach Boa through kiln-sandbox, or parse through kiln-jscheck (ARCHITECTURE.md, Architecture invariant)",
        ]
    );
    let hint = "move the browser code behind a trait the entrance crates (ui, page) implement, or into `[dev-dependencies]` if only tests need it (ARCHITECTURE.md, Architecture invariant)";
    assert_eq!(
        rendered(&check_agent(&manifests)),
        [
            format!(
                "crates/agent/Cargo.toml: `[target.'cfg(target_arch = \"wasm32\")'.dependencies]` names `getrandom`: the orchestration layer (run, agent, nodes) names no platform crate\n    hint: {hint}"
            ),
            format!(
                "crates/agent/Cargo.toml: `[target.'cfg(target_arch = \"wasm32\")'.dependencies]` names `gloo-timers`: the orchestration layer (run, agent, nodes) names no platform crate\n    hint: {hint}"
            ),
        ]
    );
}

#[test]
fn module_doc_is_the_first_non_empty_line() {
    let cases = [
        ("//! A module.\n", true),
        ("\n\n//! After blank lines.\n", true),
        ("   //! Indented.\n", true),
        ("// A plain comment.\n//! Too late.\n", false),
        ("#![cfg(test)]\n//! Too late.\n", false),
        ("/// An item doc.\nfn f() {}\n", false),
        ("", false),
    ];
    for (text, expected) in cases {
        assert_eq!(opens_with_module_doc(text), expected, "{text:?}");
    }
}

//! `cargo xtask check [PACKAGE …]`: the fast check for the edit-compile loop,
//! beside the full test command. `cargo fmt --check`, host clippy with
//! warnings denied, then the native tests — of the packages named, or else of
//! the packages whose files the working tree changed against `HEAD` (and of
//! the packages that depend on them). It installs only what those tests
//! start (the npm test peers, the local model's venv) and prepares Kiln's
//! own model only when a package that loads it is among them. Nothing for
//! the browser: `cargo xtask test` runs that.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, ExitCode};

use anyhow::{Context as _, Result, bail};

use crate::build::describe;
use crate::{model, tools};

/// The packages whose native tests load Kiln's own model.
const LOADS_MODEL: &[&str] = &["kiln-llm", "kiln-cli"];

pub fn run(root: &Path, named: &[String]) -> Result<ExitCode> {
    let metadata = Metadata::read(root)?;
    let packages: BTreeSet<String> = if named.is_empty() {
        let touched = metadata.touched(root)?;
        metadata.with_dependents(&touched)
    } else {
        for name in named {
            if !metadata
                .packages
                .iter()
                .any(|package| &package.name == name)
            {
                bail!("`{name}` is not a package of this workspace");
            }
        }
        named.iter().cloned().collect()
    };
    if packages.is_empty() {
        eprintln!("xtask: no package changed against HEAD; name some: cargo xtask check kiln-run");
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!(
        "xtask: checking {}",
        packages.iter().cloned().collect::<Vec<_>>().join(", ")
    );
    let selected: Vec<String> = packages
        .iter()
        .flat_map(|package| ["--package".to_owned(), package.clone()])
        .collect();

    let mut fmt = Command::new("cargo");
    fmt.current_dir(root)
        .args(["fmt", "--all", "--", "--check"]);
    step(&mut fmt)?;

    let mut clippy = Command::new("cargo");
    clippy
        .current_dir(root)
        .args(["clippy", "--all-targets", "--quiet"])
        .args(&selected)
        .args(["--", "-D", "warnings"]);
    step(&mut clippy)?;

    let mut test = Command::new("cargo");
    test.current_dir(root).arg("test").args(&selected);
    test.envs(tools::test_servers_env(root)?);
    if packages
        .iter()
        .any(|package| LOADS_MODEL.contains(&package.as_str()))
    {
        test.env("KILN_MODEL_DIR", model::prepare(root)?.dir);
    }
    step(&mut test)?;
    Ok(ExitCode::SUCCESS)
}

fn step(command: &mut Command) -> Result<()> {
    eprintln!("xtask: running `{}`", describe(command));
    let status = command
        .status()
        .with_context(|| format!("starting `{}`", describe(command)))?;
    if !status.success() {
        bail!("`{}` failed", describe(command));
    }
    Ok(())
}

/// One workspace package: its name, its folder, the workspace packages it
/// depends on (any kind).
struct Package {
    name: String,
    dir: String,
    deps: Vec<String>,
}

struct Metadata {
    packages: Vec<Package>,
}

impl Metadata {
    /// `cargo metadata --no-deps`, read for names, folders and edges.
    fn read(root: &Path) -> Result<Self> {
        let output = Command::new("cargo")
            .current_dir(root)
            .args(["metadata", "--no-deps", "--format-version", "1"])
            .output()
            .context("running `cargo metadata`")?;
        if !output.status.success() {
            bail!(
                "`cargo metadata` failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let value: serde_json::Value =
            serde_json::from_slice(&output.stdout).context("`cargo metadata` is not JSON")?;
        let root_text = root.to_string_lossy().into_owned();
        let packages = value["packages"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter_map(|package| {
                let name = package["name"].as_str()?.to_owned();
                let manifest = package["manifest_path"].as_str()?;
                let dir = Path::new(manifest).parent()?.to_string_lossy().into_owned();
                let dir = dir
                    .strip_prefix(&root_text)
                    .map_or(dir.clone(), |relative| {
                        relative.trim_start_matches('/').to_owned()
                    });
                let deps = package["dependencies"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                    .iter()
                    .filter(|dep| dep["path"].is_string())
                    .filter_map(|dep| dep["name"].as_str().map(str::to_owned))
                    .collect();
                Some(Package { name, dir, deps })
            })
            .collect();
        Ok(Self { packages })
    }

    /// The packages holding a file the working tree changed against `HEAD`
    /// (untracked files included).
    fn touched(&self, root: &Path) -> Result<BTreeSet<String>> {
        let output = Command::new("git")
            .current_dir(root)
            .args(["status", "--porcelain", "--untracked-files=all"])
            .output()
            .context("running `git status`")?;
        let text = String::from_utf8_lossy(&output.stdout);
        let mut touched = BTreeSet::new();
        for line in text.lines() {
            // `XY path`, or `XY old -> new` for a rename: both ends count.
            for path in line.get(3..).unwrap_or_default().split(" -> ") {
                let owner = self
                    .packages
                    .iter()
                    .filter(|package| {
                        !package.dir.is_empty() && path.starts_with(&format!("{}/", package.dir))
                    })
                    .max_by_key(|package| package.dir.len());
                if let Some(package) = owner {
                    touched.insert(package.name.clone());
                }
            }
        }
        Ok(touched)
    }

    /// `start` and every package that depends on one of them, directly or not.
    fn with_dependents(&self, start: &BTreeSet<String>) -> BTreeSet<String> {
        let mut all = start.clone();
        loop {
            let before = all.len();
            for package in &self.packages {
                if package.deps.iter().any(|dep| all.contains(dep)) {
                    all.insert(package.name.clone());
                }
            }
            if all.len() == before {
                return all;
            }
        }
    }
}

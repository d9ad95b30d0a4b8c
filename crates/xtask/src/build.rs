//! Builds the static site into `pkg/`: release wasm for the page and the sandbox
//! worker, `wasm-bindgen --target web`, `wasm-opt`, and the files of `www/` and
//! `workers/`, and Kiln's own model in `models/` (`model.rs`). The result is
//! what any static host serves.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result, bail};

use crate::model::{self, PreparedModel};
use crate::tools::{self, BuildTools, WASM_TARGET};

/// One wasm module of the site.
pub struct WasmModule {
    /// Cargo package.
    pub package: &'static str,
    /// `--bin` name, for a binary crate; `None` for a cdylib.
    pub bin: Option<&'static str>,
    /// Cargo profile: speed for the sandbox, size for the page.
    pub profile: &'static str,
    /// The file name cargo writes, without `.wasm`.
    pub artifact: &'static str,
    /// The name of the module in `pkg/`.
    pub out_name: &'static str,
    /// `wasm-opt` level.
    pub wasm_opt_level: &'static str,
    /// The cargo features `cargo xtask bench` adds (its hooks), never in the
    /// site `serve` and `test` build.
    pub bench_features: Option<&'static str>,
}

/// Which site to build: the one people get, or the bench's, whose runtime
/// worker also answers the bench hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Site {
    Shipped,
    Bench,
}

pub const MODULES: [WasmModule; 7] = [
    WasmModule {
        package: "kiln-sandbox-worker",
        bin: None,
        profile: "release",
        artifact: "kiln_sandbox_worker",
        out_name: "kiln_sandbox_worker",
        wasm_opt_level: "-O3",
        bench_features: None,
    },
    WasmModule {
        package: "kiln-ui",
        bin: Some("kiln-ui"),
        profile: "wasm-ui",
        artifact: "kiln-ui",
        out_name: "kiln_ui",
        wasm_opt_level: "-Oz",
        bench_features: None,
    },
    WasmModule {
        package: "kiln-runtime",
        bin: None,
        profile: "wasm-ui",
        artifact: "kiln_runtime",
        out_name: "kiln_runtime",
        wasm_opt_level: "-Oz",
        bench_features: Some("bench"),
    },
    WasmModule {
        // Kiln's own model: speed, like the sandbox (candle's kernels run every token).
        package: "kiln-model-worker",
        bin: None,
        profile: "release",
        artifact: "kiln_model_worker",
        out_name: "kiln_model_worker",
        wasm_opt_level: "-O3",
        bench_features: None,
    },
    WasmModule {
        // The library modules outside the engine (kiln:html, kiln:markdown, kiln:diff,
        // kiln:zip), loaded by the sandbox worker before the first run that imports one:
        // speed, like the sandbox (a call is guest time, measured against JS peers).
        package: "kiln-modules-wasm",
        bin: None,
        profile: "release",
        artifact: "kiln_modules_wasm",
        out_name: "kiln_modules",
        wasm_opt_level: "-O3",
        bench_features: None,
    },
    WasmModule {
        // TypeScript's stripper, loaded by the runtime worker on first need.
        package: "kiln-ts-wasm",
        bin: None,
        profile: "wasm-ui",
        artifact: "kiln_ts_wasm",
        out_name: "kiln_ts",
        wasm_opt_level: "-Oz",
        bench_features: None,
    },
    WasmModule {
        package: "kiln-page",
        bin: None,
        profile: "wasm-ui",
        artifact: "kiln_page",
        out_name: "kiln_page",
        wasm_opt_level: "-Oz",
        bench_features: None,
    },
];

/// Builds everything into `root/pkg`, with the prepared model's files in
/// `pkg/models/` when there is one.
pub fn build_app(root: &Path, site: Site, model: Option<&PreparedModel>) -> Result<()> {
    let tools = tools::ensure_build_tools(root)?;
    let pkg = root.join("pkg");
    if pkg.exists() {
        std::fs::remove_dir_all(&pkg).with_context(|| format!("clearing {}", pkg.display()))?;
    }
    for module in &MODULES {
        build_module(root, &tools, module, site, &pkg)?;
    }
    copy_dir(&root.join("www"), &pkg)?;
    copy_dir(&root.join("workers"), &pkg.join("workers"))?;
    write_service_worker(&pkg)?;
    if let Some(model) = model {
        model.place(&pkg.join(model::SITE_FOLDER))?;
    }
    eprintln!("xtask: the app is in {}", pkg.display());
    Ok(())
}

/// The files of `pkg` the app's service worker keeps (`www/sw.js`): the shell and
/// every module and worker the app loads, not the page API's (other sites load
/// it), not the model's files (the model worker keeps them) and not what
/// `cargo xtask serve` writes beside them.
fn shell_files(pkg: &Path) -> Result<Vec<String>> {
    fn walk(dir: &Path, prefix: &str, files: &mut Vec<String>) -> Result<()> {
        for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = format!("{prefix}{name}");
            if entry.file_type()?.is_dir() {
                walk(&entry.path(), &format!("{path}/"), files)?;
            } else {
                files.push(path);
            }
        }
        Ok(())
    }
    let mut files = Vec::new();
    walk(pkg, "", &mut files)?;
    files.retain(|file| {
        !(file == "sw.js"
            || file == "kiln.js"
            || file.starts_with("kiln_page")
            || file.starts_with("snippets/kiln-page-")
            || file.starts_with(&format!("{}/", model::SITE_FOLDER))
            || file == "local-provider.json"
            || file == "widget.json")
    });
    files.sort();
    Ok(files)
}

/// Writes the build's id (a digest of the shell's files) and their list into
/// `pkg/sw.js`, so that each build is a new service worker the browser sees.
fn write_service_worker(pkg: &Path) -> Result<()> {
    use sha2::Digest as _;
    let files = shell_files(pkg)?;
    let mut digest = sha2::Sha256::new();
    for file in &files {
        let bytes = std::fs::read(pkg.join(file)).with_context(|| format!("reading pkg/{file}"))?;
        digest.update(file.as_bytes());
        digest.update((bytes.len() as u64).to_le_bytes());
        digest.update(&bytes);
    }
    let build: String = digest
        .finalize()
        .iter()
        .take(8)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let path = pkg.join("sw.js");
    let template =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let listed = files
        .iter()
        .map(|file| serde_json::Value::String(file.clone()).to_string())
        .collect::<Vec<_>>()
        .join(", ");
    if !template.contains("__KILN_BUILD__") || !template.contains("[\"__KILN_FILES__\"]") {
        anyhow::bail!(
            "{} has no __KILN_BUILD__ or [\"__KILN_FILES__\"] to fill in",
            path.display()
        );
    }
    let worker = template
        .replace("__KILN_BUILD__", &build)
        .replace("[\"__KILN_FILES__\"]", &format!("[{listed}]"));
    std::fs::write(&path, worker).with_context(|| format!("writing {}", path.display()))?;
    eprintln!(
        "xtask: service worker for build {build} keeps {} files",
        files.len()
    );
    Ok(())
}

fn build_module(
    root: &Path,
    tools: &BuildTools,
    module: &WasmModule,
    site: Site,
    pkg: &Path,
) -> Result<()> {
    eprintln!(
        "xtask: building {} ({} profile)",
        module.package, module.profile
    );
    let mut cargo = Command::new("cargo");
    cargo
        .args([
            "build",
            "--target",
            WASM_TARGET,
            "--package",
            module.package,
            "--profile",
            module.profile,
        ])
        .current_dir(root);
    if let Some(bin) = module.bin {
        cargo.args(["--bin", bin]);
    }
    if let (Site::Bench, Some(features)) = (site, module.bench_features) {
        cargo.args(["--features", features]);
    }
    run_checked(&mut cargo)?;

    let wasm = target_dir(root)
        .join(WASM_TARGET)
        .join(module.profile)
        .join(format!("{}.wasm", module.artifact));
    let staged = stage(root, tools, module, &wasm)?;
    copy_dir(&staged, pkg)
}

/// Runs `wasm-bindgen` and `wasm-opt` on `wasm` into a staging folder under
/// `target/`, unless that folder already holds the output for this exact input
/// (wasm-opt on the sandbox takes minutes).
fn stage(root: &Path, tools: &BuildTools, module: &WasmModule, wasm: &Path) -> Result<PathBuf> {
    let staged = target_dir(root).join("kiln-site").join(module.out_name);
    let stamp_path = staged.with_extension("stamp");
    let input = std::fs::read(wasm).with_context(|| format!("reading {}", wasm.display()))?;
    let stamp = format!(
        "{:016x} {} {}",
        fnv1a(&input),
        module.wasm_opt_level,
        tools.wasm_bindgen.display()
    );
    if std::fs::read_to_string(&stamp_path).ok().as_deref() == Some(stamp.as_str())
        && staged.is_dir()
    {
        return Ok(staged);
    }
    if staged.exists() {
        std::fs::remove_dir_all(&staged)
            .with_context(|| format!("clearing {}", staged.display()))?;
    }

    let mut bindgen = Command::new(&tools.wasm_bindgen);
    bindgen
        .args([
            "--target",
            "web",
            "--no-typescript",
            "--out-name",
            module.out_name,
            "--out-dir",
        ])
        .arg(&staged)
        .arg(wasm);
    run_checked(&mut bindgen)?;

    eprintln!(
        "xtask: wasm-opt {} {}",
        module.wasm_opt_level, module.out_name
    );
    let bg = staged.join(format!("{}_bg.wasm", module.out_name));
    let mut opt = Command::new(&tools.wasm_opt);
    opt.arg(module.wasm_opt_level)
        // Features the Rust toolchain's wasm32 target emits by default.
        .args([
            "--enable-bulk-memory",
            "--enable-nontrapping-float-to-int",
            "--enable-sign-ext",
            "--enable-mutable-globals",
            "--enable-reference-types",
            "--enable-multivalue",
            // `.cargo/config.toml` turns on simd128 for every wasm module.
            "--enable-simd",
        ])
        .arg(&bg)
        .arg("-o")
        .arg(&bg);
    run_checked(&mut opt)?;
    std::fs::write(&stamp_path, stamp)
        .with_context(|| format!("writing {}", stamp_path.display()))?;
    Ok(staged)
}

/// FNV-1a over the bytes: a cheap fingerprint of a build artifact.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Cargo's target directory (honours `CARGO_TARGET_DIR`).
pub fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from)
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target).with_context(|| {
                format!("copying {} to {}", entry.path().display(), target.display())
            })?;
        }
    }
    Ok(())
}

/// Runs a command with inherited output and fails with its command line if it fails.
pub fn run_checked(command: &mut Command) -> Result<()> {
    let status = command
        .status()
        .with_context(|| format!("starting `{}`", describe(command)))?;
    if !status.success() {
        bail!("`{}` failed ({status})", describe(command));
    }
    Ok(())
}

/// A command line as a person would type it.
pub fn describe(command: &Command) -> String {
    std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|part| part.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

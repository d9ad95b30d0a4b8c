//! `cargo xtask test`: every test of the project, in order — lints, native tests,
//! `wasm-bindgen-test` suites in headless Chromium, Playwright specs against the
//! built app — ending with one line `N passed, N failed`. Kiln's own model is
//! prepared first: the native tests load it, and the app ships it.

#![expect(
    clippy::disallowed_methods,
    reason = "the build driver says how long its steps took, in real time"
)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::{Context as _, Result};

use crate::build::{build_app, describe, target_dir};
use crate::model;
use crate::serve::StaticServer;
use crate::tools::{self, CHROMEDRIVER, CHROMIUM};

/// Counts of one stage or of the whole run.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Tally {
    passed: usize,
    failed: usize,
}

impl std::ops::AddAssign for Tally {
    fn add_assign(&mut self, other: Self) {
        self.passed += other.passed;
        self.failed += other.failed;
    }
}

/// Reads one line of a test runner's output; `Some` for a line that reports counts.
type SummaryParser = fn(&str) -> Option<Tally>;

/// The packages with `wasm-bindgen-test` suites.
const WASM_SUITES: &[&str] = &["kiln-sandbox", "kiln-http", "kiln-store", "kiln-ui"];

pub fn run_all(root: &Path) -> Result<ExitCode> {
    let started = Instant::now();
    warn_if_disk_short(root);
    let tools = tools::ensure_build_tools(root)?;
    tools::ensure_browser()?;
    tools::ensure_keyring()?;
    let node_modules = tools::ensure_npm_packages(&root.join("playwright"))?;
    // Unlike `serve`, no run without it: kiln-llm's tests load it.
    let model = model::prepare(root)
        .context("Kiln's own model, which the native tests load, could not be prepared")?;
    // Real peers the tests start on 127.0.0.1 themselves (and stop after): the
    // MCP reference server, aimock, the local model.
    let servers = tools::test_servers_env(root)?;
    let mut total = Tally::default();
    let mut stages = Vec::new();

    let mut record = |name: &str, tally: Tally| {
        eprintln!(
            "xtask: {name}: {} passed, {} failed",
            tally.passed, tally.failed
        );
        stages.push(format!(
            "{name}: {} passed, {} failed",
            tally.passed, tally.failed
        ));
        total += tally;
    };

    record("lints", lints(root));

    let mut native = cargo(root);
    native
        .args(["test", "--workspace"])
        .envs(servers.iter().cloned())
        .env("KILN_MODEL_DIR", &model.dir);
    record("native tests", run_counted(&mut native, parse_cargo_line));

    // The app is built before the browser stages; a build failure fails them all.
    let built = build_app(root, crate::build::Site::Shipped, Some(&model));
    if let Err(error) = &built {
        eprintln!("xtask: the app did not build: {error:#}");
    }

    for package in WASM_SUITES {
        let mut wasm = cargo(root);
        wasm.args([
            "test",
            "--release",
            "--target",
            tools::WASM_TARGET,
            "--package",
            package,
        ])
        .envs(servers.iter().cloned())
        .env(
            "CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER",
            &tools.wasm_bindgen_test_runner,
        )
        .env("CHROMEDRIVER", CHROMEDRIVER)
        .env(
            "WASM_BINDGEN_TEST_WEBDRIVER_JSON",
            root.join("tests/webdriver.json"),
        )
        .env("WASM_BINDGEN_TEST_TIMEOUT", "120");
        record(
            &format!("wasm tests ({package})"),
            run_counted(&mut wasm, parse_cargo_line),
        );
    }

    if built.is_ok() {
        let server = StaticServer::start(&root.join("pkg"), 0)?;
        let specs = spec_files(&root.join("playwright/specs"))?;
        let mut playwright = Command::new("node");
        playwright
            .args(["--test", "--test-reporter=spec", "--test-concurrency=1"])
            .args(&specs)
            .current_dir(root.join("playwright"))
            .env("KILN_URL", server.url())
            .env("KILN_CHROMIUM", CHROMIUM)
            // The native stage built both; browser-model.spec holds the model
            // worker's replies to theirs.
            .env("KILN_CLI", target_dir(root).join("debug/kiln"))
            .env(
                "KILN_GREEDY",
                target_dir(root).join("debug/examples/greedy"),
            )
            .envs(servers.iter().cloned())
            .env("NODE_PATH", &node_modules);
        record("playwright", run_counted(&mut playwright, parse_node_line));
        drop(server);
    } else {
        record(
            "browser stages (app did not build)",
            Tally {
                passed: 0,
                failed: 1,
            },
        );
    }

    eprintln!();
    for stage in &stages {
        eprintln!("  {stage}");
    }
    eprintln!("  took {:.1} min", started.elapsed().as_secs_f64() / 60.0);
    println!("{} passed, {} failed", total.passed, total.failed);
    Ok(if total.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// What a clean clone's build of every test holds in `target/` at its end
/// (3,965 MiB, i.e. 4.2 GB, measured; ARCHITECTURE.md "Build profiles"), with some room.
const CLEAN_BUILD_BYTES: u64 = 4_500_000_000;

/// Says so up front when the disk under `target/` has less room than a clean
/// build takes, instead of leaving it to a compiler's "No space left on device"
/// halfway through. A warm `target/` needs less, so this only warns.
fn warn_if_disk_short(root: &Path) {
    let target = target_dir(root);
    let probe = if target.exists() {
        target
    } else {
        root.to_path_buf()
    };
    let Some(free) = free_bytes(&probe) else {
        return;
    };
    if free < CLEAN_BUILD_BYTES {
        eprintln!(
            "xtask: warning: {:.1} GB free on the disk under {}; a clean build of the tests \
             takes about {:.1} GB there (free space or set CARGO_TARGET_DIR)",
            free as f64 / 1e9,
            probe.display(),
            CLEAN_BUILD_BYTES as f64 / 1e9
        );
    }
}

/// Free bytes on the file system holding `path`, from POSIX `df -Pk`.
fn free_bytes(path: &Path) -> Option<u64> {
    let output = Command::new("df").arg("-Pk").arg(path).output().ok()?;
    if !output.status.success() {
        return None;
    }
    parse_df_available(&String::from_utf8_lossy(&output.stdout))
}

/// The "Available" column (1024-byte blocks) of `df -Pk`'s one data line, in bytes.
fn parse_df_available(text: &str) -> Option<u64> {
    let line = text.lines().nth(1)?;
    let kilobytes: u64 = line.split_whitespace().nth(3)?.parse().ok()?;
    kilobytes.checked_mul(1024)
}

/// The Playwright specs (`*.spec.mjs`), in name order. Node 20's `--test` does not
/// find files by that name on its own, so they are passed explicitly.
fn spec_files(dir: &Path) -> Result<Vec<std::path::PathBuf>> {
    let mut specs: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.to_string_lossy().ends_with(".spec.mjs"))
        .collect();
    specs.sort();
    Ok(specs)
}

/// The packages that never build for the browser: the native command, the test
/// peers it starts (processes on loopback ports), and this driver. Every other
/// package is linted for wasm32 as well, so a new crate is browser-clean from
/// its first commit.
const NATIVE_ONLY: &[&str] = &["kiln-cli", "kiln-evals", "kiln-testkit", "xtask"];

/// `cargo fmt --check`, then `clippy -D warnings` for the host and for wasm32,
/// one check each. The wasm32 runs lint what a host build never compiles (the
/// `browser` modules, every `#[cfg(target_arch = "wasm32")]` item): each
/// browser crate's lib, then the `wasm-bindgen-test` suites with their unit
/// tests (`--tests`, not `--all-targets`: the other packages' tests and
/// examples need the native-only test peers and do not build for wasm32).
/// Last the docs, with rustdoc's lints of `[workspace.lints.rustdoc]` denied.
fn lints(root: &Path) -> Tally {
    let deny_warnings = ["--quiet", "--", "-D", "warnings"];
    // The bench hooks are linted too, though only `cargo xtask bench` builds them.
    let bench_features = [
        "--features",
        "kiln-run/bench,kiln-agent/bench,kiln-nodes/bench,kiln-capabilities/bench,kiln-providers/bench,kiln-runtime/bench",
    ];
    let mut wasm_libs = vec!["clippy", "--target", tools::WASM_TARGET, "--workspace"];
    wasm_libs.extend(bench_features);
    for package in NATIVE_ONLY {
        wasm_libs.extend(["--exclude", package]);
    }
    wasm_libs.extend(deny_warnings);
    let mut wasm_tests = vec!["clippy", "--target", tools::WASM_TARGET, "--tests"];
    for package in WASM_SUITES {
        wasm_tests.extend(["--package", package]);
    }
    wasm_tests.extend(deny_warnings);
    // The host also lints the build's step that prepares Kiln's own model
    // (`kiln-model-prepare`, native only).
    let host_features = format!("{},kiln-llm/prepare", bench_features[1]);
    let mut host = vec!["clippy", "--workspace", "--all-targets", "--features"];
    host.push(&host_features);
    host.extend(deny_warnings);

    // The docs, with the workspace's rustdoc lints (broken or private intra-doc
    // links, bare URLs) denied: the `//!` of each crate is part of the map.
    let docs = vec!["doc", "--no-deps", "--workspace", "--quiet"];

    let mut tally = Tally::default();
    let checks = [
        vec!["fmt", "--all", "--", "--check"],
        host,
        wasm_libs,
        wasm_tests,
        docs,
    ];
    for args in checks {
        let mut command = cargo(root);
        command.args(args);
        match command.status() {
            Ok(status) if status.success() => tally.passed += 1,
            _ => {
                eprintln!("xtask: `{}` failed", describe(&command));
                tally.failed += 1;
            }
        }
    }
    tally
}

/// `cargo` in the workspace, not incremental: the test command builds each crate
/// once per change, a clean clone (CI) never reuses that cache, and the cache was
/// a fifth of the debug target on disk — CI once ran out of disk building it.
fn cargo(root: &Path) -> Command {
    let mut command = Command::new("cargo");
    command.current_dir(root).env("CARGO_INCREMENTAL", "0");
    command
}

/// Runs a test command, echoing its output and counting what its runner reports.
/// A command that fails without reporting a failure (it did not build, say)
/// counts as one failure.
fn run_counted(command: &mut Command, parse: SummaryParser) -> Tally {
    eprintln!("xtask: running `{}`", describe(command));
    let mut tally = Tally::default();
    let child = command.stdout(Stdio::piped()).spawn();
    let mut child = match child.with_context(|| format!("starting `{}`", describe(command))) {
        Ok(child) => child,
        Err(error) => {
            eprintln!("xtask: {error:#}");
            return Tally {
                passed: 0,
                failed: 1,
            };
        }
    };
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // Test output goes to stderr so that the summary is the last line of stdout.
            eprintln!("{line}");
            if let Some(counts) = parse(&line) {
                tally += counts;
            }
        }
    }
    let success = child.wait().is_ok_and(|status| status.success());
    if !success && tally.failed == 0 {
        eprintln!(
            "xtask: `{}` failed before reporting a failed test",
            describe(command)
        );
        tally.failed = 1;
    }
    tally
}

/// `test result: ok. 3 passed; 0 failed; ...` (libtest and wasm-bindgen-test).
fn parse_cargo_line(line: &str) -> Option<Tally> {
    let rest = line.trim().strip_prefix("test result: ")?;
    let count = |word: &str| -> Option<usize> {
        let before = rest.split(&format!(" {word}")).next()?;
        before.rsplit([' ', '.', ';']).next()?.parse().ok()
    };
    Some(Tally {
        passed: count("passed")?,
        failed: count("failed")?,
    })
}

/// `ℹ pass 3` / `ℹ fail 0` (node's spec reporter), one count per line.
fn parse_node_line(line: &str) -> Option<Tally> {
    let rest = line.trim().strip_prefix('ℹ')?.trim();
    let (word, number) = rest.split_once(' ')?;
    let number: usize = number.trim().parse().ok()?;
    match word {
        "pass" => Some(Tally {
            passed: number,
            failed: 0,
        }),
        "fail" => Some(Tally {
            passed: 0,
            failed: number,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A runner's line, its parser, and the (passed, failed) it should read.
    type Case = (&'static str, SummaryParser, Option<(usize, usize)>);

    #[test]
    fn reads_df_available() {
        let df = "Filesystem     1024-blocks     Used Available Capacity Mounted on\n\
                  /dev/vda         264212084 38202852  57083036      41% /\n";
        assert_eq!(parse_df_available(df), Some(57_083_036 * 1024));
        assert_eq!(parse_df_available("Filesystem\n"), None);
        assert_eq!(parse_df_available("header\n/dev/vda 1 2 lots 4% /\n"), None);
    }

    #[test]
    fn reads_runner_summaries() {
        let cases: &[Case] = &[
            (
                "test result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.12s",
                parse_cargo_line,
                Some((3, 0)),
            ),
            (
                "test result: FAILED. 12 passed; 2 failed; 0 ignored",
                parse_cargo_line,
                Some((12, 2)),
            ),
            ("test tests::x ... ok", parse_cargo_line, None),
            ("ℹ pass 4", parse_node_line, Some((4, 0))),
            ("ℹ fail 1", parse_node_line, Some((0, 1))),
            ("ℹ tests 5", parse_node_line, None),
        ];
        for (line, parse, expected) in cases {
            let actual = parse(line).map(|tally| (tally.passed, tally.failed));
            assert_eq!(actual, *expected, "{line}");
        }
    }
}

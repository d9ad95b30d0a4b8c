//! `cargo xtask bench`: the wasm files' sizes (raw and gzipped), the page
//! figures measured in headless Chromium by `playwright/bench/page.mjs`, and
//! the sandbox side by side with the peer `quickjs-emscripten` (in Chromium)
//! and natively through the release `kiln` CLI (`playwright/bench/sandbox.mjs`),
//! the CodeAct loop's figures natively (`crates/agent/examples/codeact.rs`),
//! the code nodes' natively: a node's overhead beyond its program's run in
//! the sandbox, and a graph of 20 nodes beside its critical path
//! (`crates/agent/examples/nodes.rs`),
//! the capability ladder's cost per call and MCP round trips beside Ajv
//! and the MCP TypeScript SDK, natively and in Chromium
//! (`playwright/bench/ladder.mjs`), and the providers' SSE parsing throughput
//! beside `eventsource-parser`, the cost accounting per turn, and the time to
//! first token through Kiln over that of a direct request to the same local
//! model, natively and in Chromium (`playwright/bench/providers.mjs`); storage with
//! 10,000 memories and 1,000 files in Chromium (`playwright/bench/storage.mjs`);
//! conversations in Chromium: a thread's write per message, the app opening a
//! thread of 1,000 messages and scrolling it, a reload from the service worker
//! (`playwright/bench/threads.mjs`); the embedded widget's size, opening time, host
//! long tasks and host-tool round trip (`playwright/bench/widget.mjs`); the
//! guest's `kiln:` modules and `crypto.digest` beside papaparse, cheerio,
//! js-yaml, marked, diff and WebCrypto (`playwright/bench/stdlib.mjs`);
//! Kiln's own model in Chromium beside wllama in the same page and llama.cpp
//! natively, all on one thread: generation rate, first token, memory and
//! download (`playwright/bench/model.mjs`, `servers/model_bench.py`);
//! a `codemode` call's round trip to `kiln mcp serve` over Streamable HTTP and
//! stdio beside a direct `tools/call` of the same tool (`crates/cli/examples/mcp_serve.rs`).

use std::io::Write as _;
use std::path::Path;
use std::process::Command;

use anyhow::{Context as _, Result};
use flate2::Compression;
use flate2::write::GzEncoder;

use crate::build::{build_app, run_checked};
use crate::model;
use crate::serve::StaticServer;
use crate::tools::{self, CHROMIUM};

/// `node playwright/bench/NAME.mjs` as every browser figure runs: from `playwright/`, with
/// the built site, Chromium, the real servers and the npm packages.
fn bench_script(
    root: &Path,
    name: &str,
    pkg: &Path,
    node_modules: &Path,
    servers: &[(&str, std::ffi::OsString)],
) -> Command {
    let mut node = Command::new("node");
    node.arg(root.join(format!("playwright/bench/{name}.mjs")))
        .current_dir(root.join("playwright"))
        .env("KILN_PKG", pkg)
        .env("KILN_CHROMIUM", CHROMIUM)
        .envs(servers.iter().cloned())
        .env("NODE_PATH", node_modules);
    node
}

pub fn run(root: &Path) -> Result<()> {
    tools::ensure_browser()?;
    let node_modules = tools::ensure_npm_packages(&root.join("playwright"))?;
    // The real servers, as `cargo xtask test` passes them (MCP, aimock, the local model).
    let servers = tools::test_servers_env(root)?;
    let model = model::prepare_for_site(root);
    build_app(root, crate::build::Site::Bench, model.as_ref())?;

    println!("wasm and JavaScript files of pkg/ (bytes):");
    let pkg = root.join("pkg");
    let mut files: Vec<_> = std::fs::read_dir(&pkg)?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "wasm" || extension == "js")
        })
        .collect();
    files.sort();
    for path in files {
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let mut gzip = GzEncoder::new(Vec::new(), Compression::best());
        gzip.write_all(&bytes)?;
        let gzipped = gzip.finish()?.len();
        let name = path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        println!(
            "  {name:<34} raw {:>9}   gzip -9 {:>9}",
            bytes.len(),
            gzipped
        );
    }

    let server = StaticServer::start(&pkg, 0)?;
    println!("page figures (headless Chromium, {}):", server.url());
    let mut node = bench_script(root, "page", &pkg, &node_modules, &servers);
    node.env("KILN_URL", server.url());
    run_checked(&mut node)?;
    drop(server);

    println!(
        "storage (headless Chromium: IndexedDB + OPFS through the page API, beside raw IndexedDB):"
    );
    let mut node = bench_script(root, "storage", &pkg, &node_modules, &servers);
    run_checked(&mut node)?;

    println!(
        "conversations (headless Chromium: thread writes through the page API, the app opening a long thread, reloads from the service worker):"
    );
    let mut node = bench_script(root, "threads", &pkg, &node_modules, &servers);
    run_checked(&mut node)?;

    println!(
        "the embedded widget (headless Chromium: Kiln on 127.0.0.1, the host page on localhost):"
    );
    let mut node = bench_script(root, "widget", &pkg, &node_modules, &servers);
    run_checked(&mut node)?;

    if model.is_some() {
        println!(
            "Kiln's own model beside wllama (same page) and llama.cpp natively, one thread, greedy:"
        );
        let mut node = bench_script(root, "model", &pkg, &node_modules, &servers);
        run_checked(&mut node)?;
    } else {
        println!("Kiln's own model: skipped, it could not be prepared (the reason is above)");
    }

    eprintln!("xtask: building the release `kiln` CLI for the native figures");
    run_checked(
        Command::new("cargo")
            .args(["build", "--release", "--package", "kiln-cli"])
            .current_dir(root),
    )?;
    println!(
        "the guest's standard library beside the JavaScript libraries the reference bridges (headless Chromium, ms a call, medians; speed = peer ÷ Kiln):"
    );
    let mut node = bench_script(root, "stdlib", &pkg, &node_modules, &servers);
    run_checked(&mut node)?;

    println!("sandbox figures, Kiln beside quickjs-emscripten (ms, medians):");
    let mut node = bench_script(root, "sandbox", &pkg, &node_modules, &servers);
    node.env("KILN_CLI", root.join("target/release/kiln"));
    run_checked(&mut node)?;

    let example = ExampleBench {
        root,
        pkg: &pkg,
        node_modules: &node_modules,
        servers: &servers,
    };
    example.run(
        "kiln-capabilities",
        "ladder",
        "KILN_LADDER_BIN",
        "capability ladder and MCP round trips, Kiln beside Ajv and the MCP TypeScript SDK:",
    )?;
    example.run(
        "kiln-providers",
        "providers",
        "KILN_PROVIDERS_BIN",
        "providers: SSE beside eventsource-parser, cost per turn, time to first token over a direct request:",
    )?;
    eprintln!("xtask: building the native codeact and nodes benchmarks");
    build_release(
        root,
        &[
            "--package",
            "kiln-agent",
            "--package",
            "kiln-nodes",
            "--example",
            "codeact",
            "--example",
            "nodes",
            "--features",
            "kiln-agent/bench,kiln-nodes/bench",
        ],
    )?;
    println!(
        "the CodeAct loop: its overhead per turn, an action's start, the prompt's size beside direct tools:"
    );
    run_checked(&mut Command::new(
        root.join("target/release/examples/codeact"),
    ))?;
    println!(
        "code nodes: a node's run beside its program's in the sandbox alone, and a graph of 20 beside its critical path:"
    );
    run_checked(&mut Command::new(
        root.join("target/release/examples/nodes"),
    ))?;
    eprintln!("xtask: building the native kiln mcp serve benchmark");
    build_release(
        root,
        &[
            "--package",
            "kiln-cli",
            "--bin",
            "kiln",
            "--example",
            "mcp_serve",
        ],
    )?;
    println!(
        "kiln mcp serve: a codemode call's round trip over Streamable HTTP and stdio beside a direct tools/call:"
    );
    run_checked(
        Command::new(root.join("target/release/examples/mcp_serve"))
            .env("KILN_CLI", root.join("target/release/kiln"))
            .envs(servers.iter().cloned()),
    )
}

/// `cargo build --release` with `args`, in the workspace.
fn build_release(root: &Path, args: &[&str]) -> Result<()> {
    run_checked(
        Command::new("cargo")
            .args(["build", "--release"])
            .args(args)
            .current_dir(root),
    )
}

/// A native figure from a release example beside its peers in Node and Chromium: builds
/// `example` of `package` and runs `playwright/bench/<example>.mjs`, which runs the
/// example it finds at `$<bin_env>`.
struct ExampleBench<'a> {
    root: &'a Path,
    pkg: &'a Path,
    node_modules: &'a Path,
    servers: &'a [(&'static str, std::ffi::OsString)],
}

impl ExampleBench<'_> {
    fn run(&self, package: &str, example: &str, bin_env: &str, heading: &str) -> Result<()> {
        eprintln!("xtask: building the native {example} benchmark");
        build_release(
            self.root,
            &[
                "--package",
                package,
                "--example",
                example,
                "--features",
                "bench",
            ],
        )?;
        println!("{heading}");
        let mut node = bench_script(
            self.root,
            example,
            self.pkg,
            self.node_modules,
            self.servers,
        );
        node.env(
            bin_env,
            self.root.join("target/release/examples").join(example),
        );
        run_checked(&mut node)
    }
}

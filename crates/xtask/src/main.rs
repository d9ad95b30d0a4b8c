//! `cargo xtask`: the two commands of the README (`serve`, `test`) and the ones
//! behind them (`build`, `bench`). Each installs what it needs on a fresh machine.

mod bench;
mod build;
mod serve;
mod test;
mod tools;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  serve [--port N]   install what is missing, build the app, serve it on http://127.0.0.1:8080
  test               install what is missing, run every test, print `N passed, N failed`
  build              build the app into pkg/ (release wasm)
  bench              build the app and print the benchmark figures";

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<ExitCode> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = workspace_root()?;
    match args.first().map(String::as_str) {
        Some("serve") => {
            let port = parse_port(&args[1..])?;
            tools::ensure_build_tools(&root)?;
            build::build_app(&root)?;
            serve::serve_forever(&root.join("pkg"), port)?;
            Ok(ExitCode::SUCCESS)
        }
        Some("build") => {
            tools::ensure_build_tools(&root)?;
            build::build_app(&root)?;
            Ok(ExitCode::SUCCESS)
        }
        Some("test") => test::run_all(&root),
        Some("bench") => {
            bench::run(&root)?;
            Ok(ExitCode::SUCCESS)
        }
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        Some(other) => bail!("unknown command `{other}`\n\n{USAGE}"),
        None => bail!("no command given\n\n{USAGE}"),
    }
}

fn parse_port(args: &[String]) -> Result<u16> {
    match args {
        [] => Ok(8080),
        [flag, value] if flag == "--port" => value
            .parse()
            .with_context(|| format!("`--port {value}` is not a port number (1-65535)")),
        [flag] if flag.starts_with("--port=") => {
            let value = &flag["--port=".len()..];
            value
                .parse()
                .with_context(|| format!("`{flag}` is not a port number (1-65535)"))
        }
        other => bail!("unexpected arguments `{}`\n\n{USAGE}", other.join(" ")),
    }
}

/// The workspace root: the parent of `crates/xtask`.
fn workspace_root() -> Result<PathBuf> {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .context("xtask is not inside the workspace's crates/ folder")
}

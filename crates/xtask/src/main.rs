//! `cargo xtask`: the two commands of the README (`serve`, `test`), the ones
//! behind them (`build`, `bench`, `model`) and the fast `check` while
//! editing. Each installs what it needs on a fresh machine, through `tools`:
//! once, from a registry this machine reaches, into caches later runs reuse.

mod bench;
mod build;
mod check;
mod model;
mod serve;
mod test;
mod tools;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  serve [--port N] [--model-port N]
                     install what is missing, build the app, serve it on http://127.0.0.1:8080
                     beside the local model (SmolLM2-135M, a free port unless --model-port)
  test               install what is missing, run every test, print `N passed, N failed`
  check [PACKAGE …]  the fast check while editing: fmt, host clippy and the native tests of the
                     packages named, or else of those the working tree changed and their dependents
  build              build the app into pkg/ (release wasm, Kiln's own model in pkg/models/)
  bench              build the app and print the benchmark figures
  model              prepare Kiln's own model into target/kiln-model/ and print that folder
                     (`KILN_MODEL_DIR=$(cargo xtask model) cargo test -p kiln-llm`)";

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
            let options = ServeOptions::parse(&args[1..])?;
            tools::ensure_build_tools(&root)?;
            let model = model::prepare_for_site(&root);
            build::build_app(&root, build::Site::Shipped, model.as_ref())?;
            // Stopped when this returns; when Ctrl+C ends xtask, it gets the
            // SIGINT too and its stdin closes, either of which stops it.
            let _model = serve::start_local_model(&root, options.model_port);
            serve::serve_forever(&root, options.port)?;
            Ok(ExitCode::SUCCESS)
        }
        Some("build") => {
            tools::ensure_build_tools(&root)?;
            let model = model::prepare_for_site(&root);
            build::build_app(&root, build::Site::Shipped, model.as_ref())?;
            Ok(ExitCode::SUCCESS)
        }
        Some("model") => {
            let model = model::prepare(&root)?;
            println!("{}", model.dir.display());
            Ok(ExitCode::SUCCESS)
        }
        Some("test") => test::run_all(&root),
        Some("check") => check::run(&root, &args[1..]),
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

/// `serve`'s arguments.
#[derive(Debug, PartialEq, Eq)]
struct ServeOptions {
    port: u16,
    model_port: Option<u16>,
}

impl ServeOptions {
    fn parse(args: &[String]) -> Result<Self> {
        let mut options = Self {
            port: 8080,
            model_port: None,
        };
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) => (flag, Some(value.to_owned())),
                None => (arg.as_str(), None),
            };
            if flag != "--port" && flag != "--model-port" {
                bail!("unexpected argument `{arg}`\n\n{USAGE}");
            }
            let Some(value) = inline.or_else(|| args.next().cloned()) else {
                bail!("`{flag}` needs a port number\n\n{USAGE}");
            };
            let port: u16 = value
                .parse()
                .with_context(|| format!("`{flag} {value}` is not a port number (1-65535)"))?;
            if flag == "--port" {
                options.port = port;
            } else {
                options.model_port = Some(port);
            }
        }
        Ok(options)
    }
}

/// The workspace root: the parent of `crates/xtask`.
pub(crate) fn workspace_root() -> Result<PathBuf> {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .context("xtask is not inside the workspace's crates/ folder")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<ServeOptions> {
        ServeOptions::parse(&args.iter().map(|arg| (*arg).to_owned()).collect::<Vec<_>>())
    }

    #[test]
    fn reads_serve_options() {
        assert_eq!(
            parse(&[]).unwrap(),
            ServeOptions {
                port: 8080,
                model_port: None
            }
        );
        assert_eq!(
            parse(&["--model-port", "9000", "--port=8081"]).unwrap(),
            ServeOptions {
                port: 8081,
                model_port: Some(9000)
            }
        );
        assert!(parse(&["--port"]).is_err());
        assert!(parse(&["--port", "x"]).is_err());
        assert!(parse(&["--port", "65536"]).is_err());
        assert!(parse(&["--verbose"]).is_err());
    }
}

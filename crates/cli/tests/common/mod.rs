//! What the CLI's tests share: `kiln` run as a person runs it, its exit
//! code and both streams kept.

// Each test binary includes this module and uses the part it needs.
#![allow(dead_code, reason = "each test binary uses the part of it it needs")]

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Command, Stdio};

use serde_json::Value;

/// How one `kiln` ran.
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// Its stdout as JSON, after checking `kiln` exited 0.
    #[must_use]
    pub fn json_ok(&self) -> Value {
        assert_eq!(self.code, 0, "stderr: {}", self.stderr);
        self.json()
    }

    /// Its stdout as JSON; a panic naming both streams when it is not.
    #[must_use]
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|error| panic!("{error}: {}\n{}", self.stdout, self.stderr))
    }
}

/// `kiln ARGS`, its stdin closed at once.
#[must_use]
pub fn kiln(args: &[&str]) -> Output {
    kiln_with(args, &[], "")
}

/// `kiln ARGS` with `env` added (and no `KILN_STORE` from the caller's
/// environment) and `input` on its stdin.
#[must_use]
pub fn kiln_with(args: &[&str], env: &[(&str, &str)], input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(args)
        .env_remove("KILN_STORE")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("kiln did not start: {error}"));
    if let Some(mut stdin) = child.stdin.take() {
        // A kiln that exits before reading its input closes the pipe: not this helper's failure.
        let _ = stdin.write_all(input.as_bytes());
    }
    let output = child
        .wait_with_output()
        .unwrap_or_else(|error| panic!("kiln did not finish: {error}"));
    Output {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// A `kiln mcp serve --http 0` and its endpoint's URL.
pub struct HttpServer {
    pub child: std::process::Child,
    pub url: String,
    /// What it said on stderr before it listened.
    pub said: Vec<String>,
}

impl HttpServer {
    #[must_use]
    pub fn start(args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kiln"))
            .args(["mcp", "serve", "--http", "0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("kiln did not start: {error}"));
        let Some(piped) = child.stderr.take() else {
            panic!("stderr is piped");
        };
        let mut stderr = BufReader::new(piped).lines();
        let mut said = Vec::new();
        let url = loop {
            let Some(Ok(line)) = stderr.next() else {
                panic!("kiln mcp serve ended, having said: {said:?}");
            };
            if let Some(url) = line.strip_prefix("kiln: serving MCP at ") {
                break url.to_owned();
            }
            said.push(line);
        };
        // The rest of stderr (the runs' notes) is drained so the server never blocks on it.
        std::thread::spawn(move || stderr.for_each(drop));
        Self { child, url, said }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fresh on-disk store at `name` under the test binary's scratch folder,
/// keeping the provider `mock` (aimock's OpenAI wire at `base_url`, model
/// `gpt-4o-mini`) and the agent `ada` that uses it with `prompt` as her
/// system prompt. Answers its folder and its configuration (drop it before
/// a `kiln` process writes the store).
#[must_use]
pub fn store_with_ada(
    name: &str,
    base_url: &str,
    prompt: &str,
) -> (String, kiln_store::config::Config) {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    let backend: std::rc::Rc<dyn kiln_store::Backend> = kiln_store::native::LogBackend::open(&dir)
        .unwrap_or_else(|error| panic!("the store at {}: {error}", dir.display()));
    let config = kiln_store::config::Config::new(backend);
    let saved = futures::executor::block_on(async {
        config
            .put_provider(&kiln_store::config::ProviderRecord {
                name: "mock".into(),
                kind: "openai".into(),
                base_url: base_url.into(),
                model: "gpt-4o-mini".into(),
                key: None,
                version: 0,
            })
            .await?;
        config
            .put_agent(&kiln_types::profile::AgentRecord {
                system_prompt: prompt.into(),
                provider: "mock".into(),
                ..kiln_types::profile::AgentRecord::new("ada", "Ada")
            })
            .await
    });
    if let Err(error) = saved {
        panic!("seeding the store at {}: {error}", dir.display());
    }
    (dir.to_string_lossy().into_owned(), config)
}

/// The `add` tool's catalog the `kiln-agent-sum` fixture calls (it answers
/// `{"sum": 50}`), written to this test binary's scratch folder as
/// `<prefix>-catalog.json`; answers its path.
#[must_use]
pub fn add_catalog(prefix: &str) -> String {
    let path = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{prefix}-catalog.json"));
    let tools = serde_json::json!([{
        "name": "add",
        "description": "Adds two numbers.",
        "input_schema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]},
        "category": "read",
        "returns": {"sum": 50}
    }]);
    std::fs::write(&path, tools.to_string())
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    path.to_string_lossy().into_owned()
}

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

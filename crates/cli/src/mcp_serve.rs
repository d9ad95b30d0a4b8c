//! `kiln mcp serve --stdio`: Kiln as another agent's sandbox, an MCP server
//! (protocol 2025-06-18, newline-delimited JSON-RPC on stdin and stdout) with one
//! tool, `codemode({code, description?, limits?})`: a run of the program over the
//! tools this server mounts (the scripted catalog, MCP servers, the store, the
//! network as allowed), answered with its `tool-result/v1` object, which is an MCP
//! `CallToolResult` (`content`, `structuredContent`, `isError`).
//!
//! Each call is `kiln run -` in a child process with this server's flags, so it
//! has the watchdog, the memory budget and the run record every run has; calls
//! run side by side, each on a thread of its own; `notifications/cancelled`
//! interrupts the call's child (it answers with what it had; the answer is not
//! sent, as the protocol asks). The gate is headless: mode `auto` (the client's
//! person connected Kiln on purpose), and a call the ladder would ask about is
//! denied naming the host, on stderr, which is the child's too. The protocol
//! framing is `kiln_mcp::server`'s; nothing here reads JSON-RPC itself.
//!
//! Not yet: keyed runs, the interim reply, `late_results`, `withdraw`, the
//! Streamable HTTP transport (issue 19).

use std::collections::HashMap;
use std::io::{BufRead as _, Write as _};
use std::process::{Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};

use clap::{Args, Subcommand};
use kiln_mcp::server::{self, Incoming, ServerSpec};
use serde_json::{Value, json};

/// `kiln mcp …`.
#[derive(Subcommand)]
pub(crate) enum McpCommand {
    /// Serve the `codemode` tool to an MCP client on standard input and output.
    Serve(ServeArgs),
}

#[derive(Args)]
pub(crate) struct ServeArgs {
    /// Speak MCP over standard input and output (one JSON-RPC message per
    /// line). The only transport for now, so also the default.
    #[arg(long)]
    stdio: bool,
    #[command(flatten)]
    belt: crate::BeltFlags,
    /// Whose runs they are in the history and memory.
    #[arg(long, value_name = "NAME", default_value = "mcp")]
    agent: String,
}

/// The arguments `codemode` takes.
const CODEMODE_ARGS: [&str; 3] = ["code", "description", "limits"];

pub(crate) fn run(command: &McpCommand) -> ExitCode {
    let McpCommand::Serve(args) = command;
    if let Some(path) = &args.belt.tools
        && let Err(error) = crate::program::read_json(path, "tool catalog")
    {
        eprintln!("kiln: {error:#}");
        return ExitCode::from(2);
    }
    let spec = ServerSpec {
        name: "kiln".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        instructions: Some(
            "Call `codemode` with a JavaScript program to do the work in one step: it runs in a sandbox, calls the tools with `await tools.NAME(args)`, and what it returns is the result."
                .into(),
        ),
        tools: vec![codemode_tool(args)],
    };
    let out = Arc::new(Mutex::new(std::io::stdout()));
    // Each call in flight: its child's pid once started, and whether the client cancelled it.
    let calls: Arc<Mutex<HashMap<String, Call>>> = Arc::default();
    let mut threads = Vec::new();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        match server::read(&line, &spec) {
            Incoming::Reply(reply) => write(&out, &reply),
            Incoming::Nothing => {}
            Incoming::Cancelled { request_id } => {
                if let Some(call) = lock(&calls).get_mut(&request_id.to_string()) {
                    call.cancelled = true;
                    if let Some(pid) = call.pid {
                        crate::program::pass_on_interrupt(pid);
                    }
                }
            }
            Incoming::Call { id, arguments, .. } => {
                let key = id.to_string();
                lock(&calls).insert(key.clone(), Call::default());
                let out = out.clone();
                let calls = calls.clone();
                let flags = flags(args);
                threads.push(std::thread::spawn(move || {
                    let result = codemode(&arguments, &flags, |pid| {
                        if let Some(call) = lock(&calls).get_mut(&key) {
                            call.pid = Some(pid);
                            if call.cancelled {
                                crate::program::pass_on_interrupt(pid);
                            }
                        }
                    });
                    let call = lock(&calls).remove(&key);
                    if !call.is_some_and(|call| call.cancelled) {
                        write(&out, &server::call_result(&id, result));
                    }
                }));
            }
        }
    }
    // The client has gone: the runs still going are interrupted, and end.
    for call in lock(&calls).values() {
        if let Some(pid) = call.pid {
            crate::program::pass_on_interrupt(pid);
        }
    }
    for thread in threads {
        let _ = thread.join();
    }
    ExitCode::SUCCESS
}

#[derive(Default)]
struct Call {
    pid: Option<u32>,
    cancelled: bool,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write(out: &Mutex<std::io::Stdout>, message: &Value) {
    let mut out = lock(out);
    // A client that closed its end has gone; there is nobody to tell.
    let _ = writeln!(out, "{message}");
    let _ = out.flush();
}

/// `codemode` as `tools/list` describes it.
fn codemode_tool(args: &ServeArgs) -> Value {
    let mut mounted = Vec::new();
    if args.belt.tools.is_some() {
        mounted.push("the scripted catalog's tools".to_owned());
    }
    for spec in &args.belt.mcp {
        if let Some((name, _)) = spec.split_once('=') {
            mounted.push(format!("`{name}_*` (an MCP server's)"));
        }
    }
    if args.belt.store.is_some() {
        mounted.push("memory, history and file tools, and `workspace`".to_owned());
    }
    if args.belt.allow_net.is_some() {
        mounted.push("`http_request`".to_owned());
    }
    let tools = if mounted.is_empty() {
        "no tools (a pure computation)".to_owned()
    } else {
        mounted.join(", ")
    };
    json!({
        "name": "codemode",
        "title": "Run a program in Kiln's sandbox",
        "description": format!(
            "Runs `code`, the body of an async JavaScript function, in a Boa sandbox with no network, no timers but `sleep`, and no host objects. \
             It calls tools as `await tools.NAME(args)` (here: {tools}); `console.log` is kept; what it returns is the result's value. \
             The result's text part says how the run went; `structuredContent` has the run id, status, calls, value, output and warnings; a failure is `isError` with an `errorCode`."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "The program: the body of an async function."},
                "description": {"type": "string", "description": "What the program does, in a few words, for the run's record."},
                "limits": {
                    "type": "object",
                    "description": "Budgets (each at most its ceiling): js_cpu_ms, tool_calls, wall_ms, person_wait_ms, return_bytes, console_bytes, memory_bytes, fetch_calls, fetch_body_bytes, fetch_timeout_ms.",
                    "properties": {
                        "js_cpu_ms": {"type": "integer", "minimum": 1},
                        "tool_calls": {"type": "integer", "minimum": 0},
                        "wall_ms": {"type": "integer", "minimum": 1},
                        "person_wait_ms": {"type": "integer", "minimum": 0},
                        "return_bytes": {"type": "integer", "minimum": 1},
                        "console_bytes": {"type": "integer", "minimum": 0},
                        "memory_bytes": {"type": "integer", "minimum": 1},
                        "fetch_calls": {"type": "integer", "minimum": 0},
                        "fetch_body_bytes": {"type": "integer", "minimum": 0},
                        "fetch_timeout_ms": {"type": "integer", "minimum": 1}
                    },
                    "additionalProperties": false
                }
            },
            "required": ["code"],
            "additionalProperties": false
        }
    })
}

/// The `kiln run` flags every call's child gets.
fn flags(args: &ServeArgs) -> Vec<String> {
    let mut flags = vec![
        "--permission-mode".to_owned(),
        "auto".to_owned(),
        "--agent".to_owned(),
        args.agent.clone(),
    ];
    if let Some(tools) = &args.belt.tools {
        flags.extend(["--tools".to_owned(), tools.display().to_string()]);
    }
    for spec in &args.belt.mcp {
        flags.extend(["--mcp".to_owned(), spec.clone()]);
    }
    if let Some(store) = &args.belt.store {
        flags.extend(["--store".to_owned(), store.display().to_string()]);
    }
    match args.belt.allow_net.as_deref() {
        Some("") => flags.push("--allow-net".to_owned()),
        Some(origins) => flags.push(format!("--allow-net={origins}")),
        None => {}
    }
    flags
}

/// One `codemode` call: its `CallToolResult`. `started` hears the child's pid.
fn codemode(arguments: &Value, flags: &[String], started: impl FnOnce(u32)) -> Value {
    let unknown: Vec<&str> = arguments
        .as_object()
        .map(|arguments| {
            arguments
                .keys()
                .map(String::as_str)
                .filter(|name| !CODEMODE_ARGS.contains(name))
                .collect()
        })
        .unwrap_or_default();
    if !unknown.is_empty() {
        return refused(&format!(
            "codemode takes {}; not {}",
            CODEMODE_ARGS.map(|name| format!("`{name}`")).join(", "),
            unknown
                .iter()
                .map(|name| format!("`{name}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let Some(code) = arguments["code"].as_str() else {
        return refused("`code` is missing or not a string: give the program's text");
    };
    let mut limits_file = None;
    let mut command = Command::new(match std::env::current_exe() {
        Ok(exe) => exe,
        Err(error) => return refused(&format!("kiln cannot find its own program: {error}")),
    });
    command.args(["run", "-"]).args(flags);
    match &arguments["limits"] {
        Value::Null => {}
        Value::Object(limits) => {
            let path = std::env::temp_dir().join(format!(
                "kiln-mcp-limits-{}-{:016x}.json",
                std::process::id(),
                u64::from_le_bytes(kiln_store::ids::random_bytes())
            ));
            if let Err(error) = std::fs::write(&path, Value::Object(limits.clone()).to_string()) {
                return refused(&format!("the limits could not be passed on: {error}"));
            }
            command.arg("--limits").arg(&path);
            limits_file = Some(path);
        }
        other => {
            return refused(&format!(
                "`limits` must be an object, not {}",
                kiln_types::words::json_type(other)
            ));
        }
    }
    let ran = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            started(child.id());
            if let Some(mut stdin) = child.stdin.take() {
                stdin.write_all(code.as_bytes())?;
            }
            child.wait_with_output()
        });
    let shown_limits = limits_file.as_ref().map(|path| path.display().to_string());
    if let Some(path) = limits_file {
        let _ = std::fs::remove_file(path);
    }
    let output = match ran {
        Err(error) => return refused(&format!("the run could not start: {error}")),
        Ok(output) => output,
    };
    let said = String::from_utf8_lossy(&output.stderr).into_owned();
    // What the run said (a denied call's note, naming the host) goes on to this server's stderr.
    eprint!("{said}");
    match serde_json::from_slice::<Value>(&output.stdout) {
        Ok(result) if result.get("content").is_some() => result,
        // `kiln run` refused before anything ran (exit 2: limits it could not read, a
        // store it could not open), saying why on stderr.
        _ => {
            let mut why = said.trim().trim_start_matches("error: ").to_owned();
            if let Some(path) = shown_limits {
                why = why.replace(&format!("the limits `{path}`"), "the call's `limits`");
            }
            if why.is_empty() {
                why = format!("kiln run exited {}", output.status.code().unwrap_or(-1));
            }
            refused(&why)
        }
    }
}

/// A call refused before anything ran, as a tool error the model can read.
fn refused(message: &str) -> Value {
    json!({
        "content": [{"type": "text", "text": format!("refused: {message}")}],
        "structuredContent": {"status": "refused", "error": {"code": "invalid_arguments", "message": message}},
        "isError": true,
        "errorCode": "invalid_arguments"
    })
}

//! The figures `cargo xtask bench` reads from inside the runtime worker
//! ([`ToRuntime::Bench`](kiln_types::runtime::ToRuntime::Bench)): the
//! ladder's cost per call, MCP round trips over `fetch`, SSE parsing, and a
//! workspace's cold open. Built only with the `bench` feature; without it
//! every hook answers that the worker has none.

use std::rc::Rc;

use kiln_types::runtime::Problem;
use serde_json::Value;

/// The tools the bench adds to every run of a bench build: `bench_echo`, a
/// runtime-side tool (`kiln_capabilities::bench::add_echo`). A shipped
/// build adds none.
#[cfg(feature = "bench")]
pub(crate) fn own_tools() -> Option<kiln_agent::ladder::OwnTools> {
    Some(Rc::new(kiln_capabilities::bench::add_echo))
}

#[cfg(not(feature = "bench"))]
pub(crate) fn own_tools() -> Option<kiln_agent::ladder::OwnTools> {
    None
}

#[cfg(feature = "bench")]
pub(crate) async fn run(
    http: &Rc<dyn kiln_http::HttpClient>,
    hook: &str,
    args: Value,
) -> Result<Value, Problem> {
    let number = |name: &str| args.get(name).and_then(Value::as_u64).unwrap_or(0);
    let text = |name: &str| {
        args.get(name)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let now = &kiln_http::now_ms;
    match hook {
        "ladder" => Ok(to_value(&kiln_capabilities::bench::ladder(
            u32::try_from(number("iterations")).unwrap_or(u32::MAX),
            now,
        ))),
        "mcp" => kiln_capabilities::bench::mcp_round_trips(
            &text("url"),
            u32::try_from(number("calls")).unwrap_or(u32::MAX),
            http.clone(),
            now,
        )
        .await
        .map(|figures| to_value(&figures))
        .map_err(Problem::bad_request),
        "sse" => Ok(to_value(&kiln_providers::bench::sse_throughput(
            usize::try_from(number("bytes")).unwrap_or(usize::MAX),
            u32::try_from(number("rounds")).unwrap_or(u32::MAX),
            now,
        ))),
        "storage_open" => storage_open(&text("workspace")).await,
        other => Err(Problem::bad_request(format!(
            "`{other}` is not a bench hook: ladder, mcp, sse or storage_open"
        ))),
    }
}

/// Opens `workspace`'s stores as the worker does at start and reads one
/// count: `{open_ms, first_read_ms}`.
#[cfg(feature = "bench")]
async fn storage_open(workspace: &str) -> Result<Value, Problem> {
    let started = kiln_http::now_ms();
    let opened = crate::worker::open_workspace(workspace)
        .await
        .map_err(|error| crate::worker::store_problem(&error))?;
    let open = kiln_http::now_ms();
    opened
        .backend
        .count(kiln_store::Table::Memories)
        .await
        .map_err(|error| crate::worker::store_problem(&error))?;
    let read = kiln_http::now_ms();
    Ok(serde_json::json!({"open_ms": open - started, "first_read_ms": read - open}))
}

#[cfg(feature = "bench")]
fn to_value<T: serde::Serialize>(figures: &T) -> Value {
    serde_json::to_value(figures).unwrap_or_default()
}

#[cfg(not(feature = "bench"))]
pub(crate) async fn run(
    _http: &Rc<dyn kiln_http::HttpClient>,
    hook: &str,
    _args: Value,
) -> Result<Value, Problem> {
    Err(Problem::bad_request(format!(
        "this runtime worker was built without the bench hooks (`{hook}`): `cargo xtask bench` builds them"
    )))
}

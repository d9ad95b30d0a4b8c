//! The figures `cargo xtask bench` reads from inside the runtime worker
//! ([`ToRuntime::Bench`](kiln_types::runtime::ToRuntime::Bench)): the
//! ladder's cost per call, MCP round trips over `fetch`, SSE parsing, a
//! workspace's cold open, JSON against structured clones, and the CodeAct
//! loop's overhead and action start over the worker's pool. Built only with the `bench` feature; without it
//! every hook answers that the worker has none.

use std::rc::Rc;

use kiln_types::runtime::Problem;
use serde_json::Value;

/// The tools the bench adds to every run of a bench build: `bench_echo`, a
/// runtime-side tool (`kiln_capabilities::bench::add_echo`). A shipped
/// build adds none.
#[cfg(feature = "bench")]
pub(crate) fn own_tools() -> Option<kiln_run::OwnTools> {
    Some(Rc::new(kiln_capabilities::bench::add_echo))
}

#[cfg(not(feature = "bench"))]
pub(crate) fn own_tools() -> Option<kiln_run::OwnTools> {
    None
}

#[cfg(feature = "bench")]
pub(crate) async fn run(
    http: &Rc<dyn kiln_http::HttpClient>,
    pool: &kiln_host::SandboxPool,
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
        "codec" => codec(
            usize::try_from(number("rows")).unwrap_or(usize::MAX),
            u32::try_from(number("rounds")).unwrap_or(u32::MAX),
        ),
        // The CodeAct loop over this worker's pool of sandbox workers.
        "codeact" => kiln_agent::bench::codeact_loop(
            &kiln_run::bench::environment(kiln_run::bench::belt(10), http.clone()),
            Rc::new(crate::worker::PoolRunner(pool.clone())),
            u32::try_from(number("turns")).unwrap_or(u32::MAX),
            true,
            Rc::new(kiln_http::now_ms),
        )
        .await
        .map(|figures| to_value(&figures))
        .map_err(Problem::bad_request),
        other => Err(Problem::bad_request(format!(
            "`{other}` is not a bench hook: ladder, mcp, sse, storage_open, codec or codeact"
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

/// How a value should cross between workers: `rows` rows like the bench's
/// `rows` tool, each round encoded by the sender, copied as `postMessage`
/// copies it (`structuredClone`), and decoded by the receiver, as JSON text
/// (`serde_json` both ways) and as a structured clone of a JS object
/// (`serde-wasm-bindgen` both ways). `{json_ms, clone_ms, json_bytes}`,
/// medians of `rounds`.
#[cfg(feature = "bench")]
fn codec(rows: usize, rounds: u32) -> Result<Value, Problem> {
    use wasm_bindgen::JsCast as _;
    let value: Value = (0..rows.min(1_000_000))
        .map(|i| {
            serde_json::json!({
                "id": i, "name": format!("item-{i}"), "price": (i % 100) as f64 + 0.5,
                "qty": i % 7 + 1, "category": format!("cat-{}", i % 10), "active": i % 3 != 0,
            })
        })
        .collect();
    let clone: js_sys::Function =
        js_sys::Reflect::get(&js_sys::global(), &"structuredClone".into())
            .ok()
            .and_then(|f| f.dyn_into().ok())
            .ok_or_else(|| Problem::bad_request("this worker has no structuredClone"))?;
    let copy = |value: &wasm_bindgen::JsValue| {
        clone
            .call1(&wasm_bindgen::JsValue::UNDEFINED, value)
            .map_err(|_| Problem::bad_request("structuredClone refused the value"))
    };
    let fail = |what: &str, error: String| Problem::bad_request(format!("{what}: {error}"));
    let serializer = serde_wasm_bindgen::Serializer::json_compatible();
    let median = |mut samples: Vec<f64>| {
        samples.sort_by(f64::total_cmp);
        samples.get(samples.len() / 2).copied().unwrap_or(0.0)
    };
    let (mut json, mut cloned, mut bytes) = (Vec::new(), Vec::new(), 0);
    for _ in 0..rounds.clamp(1, 1_000) {
        let started = kiln_http::now_ms();
        let text = serde_json::to_string(&value).map_err(|e| fail("to JSON", e.to_string()))?;
        let carried = copy(&wasm_bindgen::JsValue::from_str(&text))?;
        let back: Value = serde_json::from_str(&carried.as_string().unwrap_or_default())
            .map_err(|e| fail("from JSON", e.to_string()))?;
        json.push(kiln_http::now_ms() - started);
        bytes = text.len();
        let started = kiln_http::now_ms();
        let object = serde::Serialize::serialize(&value, &serializer)
            .map_err(|e| fail("to a JS value", e.to_string()))?;
        let carried = copy(&object)?;
        let again: Value = serde_wasm_bindgen::from_value(carried)
            .map_err(|e| fail("from a JS value", e.to_string()))?;
        cloned.push(kiln_http::now_ms() - started);
        if back != again {
            return Err(Problem::bad_request(
                "the two ways decoded different values",
            ));
        }
    }
    Ok(
        serde_json::json!({"json_ms": median(json), "clone_ms": median(cloned), "json_bytes": bytes}),
    )
}

#[cfg(feature = "bench")]
fn to_value<T: serde::Serialize>(figures: &T) -> Value {
    serde_json::to_value(figures).unwrap_or_default()
}

#[cfg(not(feature = "bench"))]
pub(crate) async fn run(
    _http: &Rc<dyn kiln_http::HttpClient>,
    _pool: &kiln_host::SandboxPool,
    hook: &str,
    _args: Value,
) -> Result<Value, Problem> {
    Err(Problem::bad_request(format!(
        "this runtime worker was built without the bench hooks (`{hook}`): `cargo xtask bench` builds them"
    )))
}

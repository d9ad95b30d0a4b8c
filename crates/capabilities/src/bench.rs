//! Measurements `cargo xtask bench` prints, shared by the native example
//! (`examples/ladder.rs`) and the page's bench hook, so both measure the same
//! thing: the ladder's cost per call and its parts (lookup, coercion and
//! validation, decision), and MCP round trips. Nothing here asserts on time.

use std::rc::Rc;

use futures::FutureExt as _;
use futures::future::LocalBoxFuture;
use kiln_http::HttpClient;
use kiln_types::protocol::CallRequest;
use kiln_types::run::RunLimits;
use kiln_types::tool_result::ToolReply;
use serde::Serialize;
use serde_json::{Value, json};

use crate::dispatch::{CallContext, Dispatcher, Permit};
use crate::gate::{Gate, GateSettings, Mode};
use crate::registry::{Implementation, Registry};
use crate::secrets::SecretScope;
use crate::spec::{CapabilitySpec, Category, Source};

/// The schema of the measured tool: a typical one (a required id, an
/// optional bound integer, an array of strings, an enum).
#[must_use]
pub fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "workflow_id": {"type": "string", "minLength": 1},
            "limit": {"type": "integer", "minimum": 1, "maximum": 100},
            "tags": {"type": "array", "items": {"type": "string"}},
            "order": {"enum": ["asc", "desc"]}
        },
        "required": ["workflow_id"],
        "additionalProperties": false
    })
}

/// The arguments of every measured call: one camelCase key to fold.
#[must_use]
pub fn args() -> Value {
    json!({"workflowId": "wf-42", "limit": 10, "tags": ["a", "b"], "order": "desc"})
}

/// Answers at once, so the measurement is the ladder's alone.
struct Ready;

impl Implementation for Ready {
    fn call(&self, args: Value, _: CallContext, _: Permit) -> LocalBoxFuture<'static, ToolReply> {
        Box::pin(async move { Ok(args) })
    }
}

/// The name of [`add_echo`]'s tool.
pub const ECHO: &str = "bench_echo";

/// Registers `bench_echo`, a runtime-side tool that answers its arguments at
/// once: the bench's "200 calls of a runtime-side tool" crosses from the
/// guest to the worker that runs the ladder and back, and nothing else.
pub fn add_echo(registry: &mut Registry) {
    let spec = CapabilitySpec {
        name: ECHO.into(),
        description: "Answers its arguments (cargo xtask bench only).".into(),
        input_schema: json!({"type": "object"}),
        category: Category::Read,
        result: json!({}),
        source: Source::Builtin,
    };
    // The spec is fixed and valid: the registry takes it.
    let _ = registry.add(spec, Rc::new(Ready));
}

/// Nanoseconds per call, each the median over batches.
#[derive(Debug, Clone, Serialize)]
pub struct LadderFigures {
    pub iterations: u32,
    /// The whole ladder: lookup, arguments, decision, implementation (a no-op).
    pub call_ns: f64,
    pub lookup_ns: f64,
    /// Coercion and JSON Schema validation.
    pub arguments_ns: f64,
    pub decision_ns: f64,
}

/// Median per-item time of `batches` batches of `size` runs of `work`.
fn per_item(now_ms: &dyn Fn() -> f64, batches: u32, size: u32, work: &mut dyn FnMut()) -> f64 {
    let mut samples: Vec<f64> = (0..batches)
        .map(|_| {
            let started = now_ms();
            for _ in 0..size {
                work();
            }
            (now_ms() - started) * 1e6 / f64::from(size)
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

/// Measures `iterations` calls (in batches of 1,000) up the ladder in auto mode.
#[must_use]
pub fn ladder(iterations: u32, now_ms: &dyn Fn() -> f64) -> LadderFigures {
    let mut registry = Registry::new();
    let spec = CapabilitySpec {
        name: "get_workflow".into(),
        description: "Reads a workflow.".into(),
        input_schema: schema(),
        category: Category::Write,
        result: json!({}),
        source: Source::Builtin,
    };
    let _ = registry.add(spec, Rc::new(Ready));
    let settings = GateSettings {
        mode: Mode::Auto,
        ..GateSettings::default()
    };
    let gate = Gate::headless("bench", settings).ok();
    let registry = Rc::new(registry);
    let dispatcher = Dispatcher::new(
        registry.clone(),
        gate.clone(),
        SecretScope::new(),
        RunLimits::default(),
        "bench",
    );
    let held: crate::HeldSignal = Rc::new(|_| {});
    let batches = (iterations / 1_000).max(1);
    let mut number = 0_u32;
    let call_ns = per_item(now_ms, batches, 1_000, &mut || {
        number = number.wrapping_add(1);
        let request = CallRequest {
            call_number: number,
            tool: "get_workflow".into(),
            args: args(),
        };
        // The implementation answers at once: one poll settles the call.
        let _ = dispatcher.call(request, held.clone()).now_or_never();
    });
    let lookup_ns = per_item(now_ms, batches, 1_000, &mut || {
        let _ = registry.lookup("get_workflow");
    });
    let entry = registry.lookup("get_workflow").ok().cloned();
    let arguments_ns = per_item(now_ms, batches, 1_000, &mut || {
        if let Some(entry) = &entry {
            let _ = entry.schema().check("get_workflow (call 1)", args());
        }
    });
    let decision_ns = per_item(now_ms, batches, 1_000, &mut || {
        if let Some(gate) = &gate {
            let _ = gate.decide("get_workflow", Category::Write);
        }
    });
    LadderFigures {
        iterations: batches * 1_000,
        call_ns,
        lookup_ns,
        arguments_ns,
        decision_ns,
    }
}

/// MCP `tools/call` round trips on one session.
#[derive(Debug, Clone, Serialize)]
pub struct McpFigures {
    pub calls: u32,
    /// `initialize` + `notifications/initialized` + `tools/list`.
    pub connect_ms: f64,
    pub median_ms: f64,
    pub p90_ms: f64,
}

/// Connects to `url` and times `calls` sequential `get-sum` calls.
pub async fn mcp_round_trips(
    url: &str,
    calls: u32,
    http: Rc<dyn HttpClient>,
    now_ms: &dyn Fn() -> f64,
) -> Result<McpFigures, String> {
    let client = kiln_mcp::McpClient::new("bench", url, http);
    let started = now_ms();
    client.connect().await.map_err(|error| error.to_string())?;
    client
        .list_tools()
        .await
        .map_err(|error| error.to_string())?;
    let connect_ms = now_ms() - started;
    let mut samples = Vec::new();
    for i in 0..calls {
        let started = now_ms();
        client
            .call_tool("get-sum", json!({"a": i, "b": 1}))
            .await
            .map_err(|error| error.to_string())?;
        samples.push(now_ms() - started);
    }
    let _ = client.close().await;
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| {
        // `q` in [0, 1): an index within the samples.
        let index = (samples.len() as f64 * q) as usize;
        samples
            .get(index.min(samples.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    Ok(McpFigures {
        calls,
        connect_ms,
        median_ms: at(0.5),
        p90_ms: at(0.9),
    })
}

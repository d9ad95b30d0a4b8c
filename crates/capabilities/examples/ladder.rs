//! `cargo xtask bench` runs this natively: the ladder's cost per call and its
//! parts, and (with `KILN_MCP_URL` set) MCP round trips on loopback. Prints
//! one JSON object. Not a test: it asserts nothing about time.

#![expect(clippy::disallowed_methods, reason = "a benchmark measures real time")]

use std::time::Instant;

use futures::executor::block_on;
use kiln_capabilities::bench;

fn main() {
    let origin = Instant::now();
    let now_ms = move || origin.elapsed().as_secs_f64() * 1e3;
    let mut out = serde_json::Map::new();
    let ladder = bench::ladder(20_000, &now_ms);
    out.insert(
        "ladder".into(),
        serde_json::to_value(ladder).unwrap_or_default(),
    );
    if let Ok(url) = std::env::var("KILN_MCP_URL") {
        let http = kiln_http::default_client();
        let figures = block_on(bench::mcp_round_trips(&url, 200, http, &now_ms));
        let value = match figures {
            Ok(figures) => serde_json::to_value(figures).unwrap_or_default(),
            Err(problem) => serde_json::json!({"error": problem}),
        };
        out.insert("mcp".into(), value);
    }
    println!("{}", serde_json::Value::Object(out));
}

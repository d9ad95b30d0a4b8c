//! The page's built-in demo tools, served to programs until the capability
//! dispatcher replaces them: `echo`, `add`, `clock` and `wait`.

use futures::future::LocalBoxFuture;
use kiln_host::{PageTools, PersonHold};
use kiln_types::protocol::CallRequest;
use kiln_types::tool_result::{CallOutcome, ToolFailure, ToolReply};
use serde_json::{Value, json};

/// The longest `wait`, in milliseconds.
const MAX_WAIT_MS: u64 = 10_000;

pub struct DemoTools;

impl PageTools for DemoTools {
    fn catalog(&self) -> Value {
        json!([
            {"name": "echo", "description": "Returns its arguments unchanged.",
             "input_schema": {"type": "object"}},
            {"name": "add", "description": "Adds two numbers: {a, b} → a + b.",
             "input_schema": {"type": "object", "required": ["a", "b"],
                              "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}},
            {"name": "clock", "description": "The page's current time: {iso, epoch_ms}.",
             "input_schema": {"type": "object"}},
            {"name": "wait", "description": "Answers after {ms} milliseconds (at most 10000): {waited_ms}.",
             "input_schema": {"type": "object", "required": ["ms"],
                              "properties": {"ms": {"type": "integer", "minimum": 0, "maximum": 10000}}}},
        ])
    }

    fn call(&self, call: CallRequest, _person: PersonHold) -> LocalBoxFuture<'static, ToolReply> {
        let CallRequest { tool, args, .. } = call;
        Box::pin(async move {
            match tool.as_str() {
                "echo" => Ok(args),
                "add" => {
                    let a = args.get("a").and_then(Value::as_f64);
                    let b = args.get("b").and_then(Value::as_f64);
                    match (a, b) {
                        (Some(a), Some(b)) => Ok(json!(a + b)),
                        _ => Err(invalid(
                            &tool,
                            format!("add needs numbers `a` and `b`; got {args}"),
                        )),
                    }
                }
                "clock" => {
                    let now = js_sys::Date::new_0();
                    Ok(
                        json!({"iso": String::from(now.to_iso_string()), "epoch_ms": now.get_time()}),
                    )
                }
                "wait" => match args
                    .get("ms")
                    .and_then(Value::as_u64)
                    .filter(|ms| *ms <= MAX_WAIT_MS)
                {
                    Some(ms) => {
                        // At most 10,000 ms: exact as f64.
                        kiln_host::sleep_ms(ms as f64).await;
                        Ok(json!({"waited_ms": ms}))
                    }
                    None => Err(invalid(
                        &tool,
                        format!("wait needs `ms`, an integer from 0 to {MAX_WAIT_MS}; got {args}"),
                    )),
                },
                other => Err(ToolFailure {
                    code: "tool_unavailable".into(),
                    message: format!("the page serves no tool `{other}`"),
                    detail: None,
                    outcome: CallOutcome::ToolUnavailable,
                }),
            }
        })
    }
}

fn invalid(tool: &str, message: String) -> ToolFailure {
    ToolFailure {
        code: "invalid_arguments".into(),
        message,
        detail: Some(json!({"tool": tool})),
        outcome: CallOutcome::Error,
    }
}

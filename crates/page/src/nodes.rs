//! Code nodes from a page (reference/004): `kiln.codeNode(spec).run(values)`,
//! `kiln.graph({nodes, edges}).run(inputs)` and `kiln.authorCode(request)`,
//! each served by the runtime worker (`kiln_nodes::node`, `graph`,
//! `codegen`). `www/kiln.js` makes the handles; this is what they call.
//!
//! ```js
//! const total = kiln.codeNode({
//!   title: "Order total",
//!   code: "return { total: items.reduce((s, i) => s + i.price * i.qty, 0) };",
//!   inputs: [{name: "items", type: "list[{price: number, qty: integer}]"}],
//!   outputs: [{name: "total", type: "number"}],
//! });
//! const problems = await total.check();  // [] when it would run; else each a sentence
//! const run = await total.run({items: [{price: 2.5, qty: 4}]}, {tools, approve, signal,
//!   onEvent: ({type, percent, message}) => {}});  // the body's progress(percent, message)
//! // {outputs: {total: 10}, warnings, console, duration_ms, error?, result, job_id?}
//!
//! const graph = kiln.graph({nodes: [{id: "a", ...spec}, {id: "b", ...other}],
//!                           edges: [{from: "a.total", to: "b.amount"}]});
//! const ran = await graph.run({a: {items}}, {onEvent: (event) => {}, max_concurrent: 4});
//! // events: {type: "node", ...report} as each node settles, {type: "progress", node, percent, message?}
//! // {status, nodes: [{id, status, outputs, console, duration_ms, error?, …}]}
//!
//! const written = await kiln.authorCode({instruction, inputs, expectedOutput, code?,
//!   samples?, includeSamples?, provider: {stored: "work"}, model?, signal});
//! // {node, summary, telemetry}; kiln.authorPayload(request) → {messages, model}, nothing sent
//! ```
//!
//! A node's run resolves whatever its body does (a failed body is the run's
//! `error`); a request that does not read rejects with a `TypeError`, a
//! graph its build refuses with an `Error` whose `code` is `invalid_graph`,
//! and an authoring that accepted no node with an `Error` whose `code` is
//! the failure's (`provider_unavailable`, `aborted`, `no_valid_submission`,
//! `internal`, or `no_model`), with `errors` (the last validation reasons)
//! and `telemetry`.

use js_sys::{Promise, Reflect};
use kiln_types::runtime::ToRuntime;
use serde_json::Value;
use wasm_bindgen::prelude::*;

use crate::{Kiln, from_json_text, listener, optional_function, page_parts, rejection};

fn node_error(what: &str, message: &str) -> JsValue {
    js_sys::TypeError::new(&format!("{what}: {message}")).into()
}

#[wasm_bindgen]
impl Kiln {
    /// Runs one code node: `{node, values, tools?, limits?, permission?,
    /// approve?, mcp?, secrets?, builtins?, allow_net?, agent?, signal?,
    /// onEvent?}` (what `codeNode(spec).run(values, options)` sends);
    /// `onEvent` sees the body's progress reports.
    #[wasm_bindgen(js_name = runNode)]
    pub fn run_node(&self, request: JsValue) -> Promise {
        self.start_nodes(request, false)
    }

    /// Runs a graph: `{nodes, edges, inputs, max_concurrent?, onEvent?, ...}`
    /// with a node run's options (what `graph(spec).run(inputs, options)`
    /// sends); `onEvent` sees each node's report as it settles and the
    /// nodes' progress reports.
    #[wasm_bindgen(js_name = runGraph)]
    pub fn run_graph(&self, request: JsValue) -> Promise {
        self.start_nodes(request, true)
    }

    /// Checks a code node as it would run, without running it (what
    /// `codeNode(spec).check()` sends): resolves to the problems, each a
    /// sentence (its slots, its imports, whether its body parses as
    /// JavaScript or TypeScript, every output on every return path), `[]`
    /// when it would run.
    #[wasm_bindgen(js_name = checkNode)]
    pub fn check_node(&self, node: JsValue) -> Promise {
        const WHAT: &str = "kiln.codeNode().check";
        let sent = (|| {
            let text = crate::to_json_text(&node)
                .map_err(|problem| node_error(WHAT, &format!("the node {problem}")))?;
            let node: Value = serde_json::from_str(&text)
                .map_err(|error| node_error(WHAT, &format!("the node is not JSON: {error}")))?;
            Ok::<_, JsValue>(self.runtime.call(
                move |id| ToRuntime::CheckNode { id, node },
                None,
                None,
            ))
        })();
        wasm_bindgen_futures::future_to_promise(async move {
            match sent?.await {
                Ok(Ok(value)) => Ok(from_json_text(&value["problems"].to_string())),
                Ok(Err(problem)) => Err(rejection(WHAT, &problem)),
                Err(_) => Err(node_error(
                    WHAT,
                    "the runtime worker went away during the check",
                )),
            }
        })
    }

    /// Writes a code node with a model; see the module docs.
    #[wasm_bindgen(js_name = authorCode)]
    pub fn author_code(&self, request: JsValue) -> Promise {
        self.author(request, false)
    }

    /// What `authorCode(request)` would send first, and to which model:
    /// `{messages, model}`. Nothing is sent.
    #[wasm_bindgen(js_name = authorPayload)]
    pub fn author_payload(&self, request: JsValue) -> Promise {
        self.author(request, true)
    }
}

impl Kiln {
    fn start_nodes(&self, request: JsValue, graph: bool) -> Promise {
        let what = if graph {
            "kiln.graph().run"
        } else {
            "kiln.codeNode().run"
        };
        let sent = (|| {
            if !request.is_object() {
                return Err(node_error(
                    what,
                    "takes one object of the run's values and options",
                ));
            }
            let on_event =
                optional_function(&request, "onEvent", |problem| node_error(what, problem))?;
            let error: fn(&str) -> JsValue = if graph {
                |problem| node_error("kiln.graph().run", problem)
            } else {
                |problem| node_error("kiln.codeNode().run", problem)
            };
            let (request, calls, approve, signal) =
                page_parts(&request, &["signal", "onEvent"], error)?;
            let on_event = on_event.map(listener);
            let page = crate::runtime::JsPage {
                calls,
                approve,
                ask: None,
            };
            Ok(self.runtime.exchange(
                move |id, approve| {
                    if graph {
                        ToRuntime::Graph {
                            id,
                            request,
                            approve,
                        }
                    } else {
                        ToRuntime::Node {
                            id,
                            request,
                            approve,
                        }
                    }
                },
                page,
                signal,
                on_event,
            ))
        })();
        wasm_bindgen_futures::future_to_promise(async move {
            match sent?.await {
                Ok(Ok(value)) => Ok(from_json_text(&value.to_string())),
                Ok(Err(problem)) => Err(rejection(what, &problem)),
                Err(_) => Err(node_error(
                    what,
                    "the runtime worker went away during the run",
                )),
            }
        })
    }

    fn author(&self, request: JsValue, preview: bool) -> Promise {
        let what = if preview {
            "kiln.authorPayload"
        } else {
            "kiln.authorCode"
        };
        let sent = (|| {
            if !request.is_object() {
                return Err(node_error(
                    what,
                    "takes one object {instruction, inputs, expectedOutput?, code?, current?, samples?, includeSamples?, provider, model?, chatModel?, signal?}",
                ));
            }
            let error: fn(&str) -> JsValue = |problem| node_error("kiln.authorCode", problem);
            let (request, calls, _, signal) = page_parts(&request, &["signal"], error)?;
            if !calls.is_empty() {
                return Err(node_error(what, "authoring takes no `tools`"));
            }
            Ok(self.runtime.call(
                move |id| ToRuntime::AuthorCode {
                    id,
                    request,
                    preview,
                },
                None,
                signal,
            ))
        })();
        wasm_bindgen_futures::future_to_promise(async move {
            match sent?.await {
                Ok(Ok(value)) => match value.get("error") {
                    None => Ok(from_json_text(&value.to_string())),
                    Some(failure) => Err(authoring_failure(failure, &value)),
                },
                Ok(Err(problem)) => Err(rejection(what, &problem)),
                Err(_) => Err(node_error(what, "the runtime worker went away")),
            }
        })
    }
}

/// An authoring that accepted no node, as the `Error` it rejects with.
fn authoring_failure(failure: &Value, answer: &Value) -> JsValue {
    let text = |name: &str| {
        failure
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let error = js_sys::Error::new(text("message"));
    let _ = Reflect::set(&error, &"code".into(), &text("code").into());
    let errors = failure
        .get("errors")
        .cloned()
        .unwrap_or(Value::Array(Vec::new()));
    let _ = Reflect::set(
        &error,
        &"errors".into(),
        &from_json_text(&errors.to_string()),
    );
    if let Some(telemetry) = answer.get("telemetry") {
        let _ = Reflect::set(
            &error,
            &"telemetry".into(),
            &from_json_text(&telemetry.to_string()),
        );
    }
    error.into()
}

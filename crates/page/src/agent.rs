//! `kiln.agent(request)`: one agent turn — the CodeAct loop of
//! `kiln_agent::run_agent` — in the runtime worker. The model acts by writing
//! programs that call the turn's tools (the page's, MCP servers', the
//! workspace's), each run in a sandbox worker through the permission ladder.
//!
//! ```js
//! const result = await kiln.agent({
//!   provider: {kind: "openai", base_url: "https://api.openai.com/v1", key: "sk-…"},
//!   options: {model: "gpt-4o-mini", max_tokens: 1024},
//!   messages: [{role: "user", text: "Add 20 and 30, then double it"}],
//!   tools: {add: {description, input_schema, category: "read", call: (args) => ({sum: args.a + args.b})}},
//!   mcp: {everything: "http://127.0.0.1:3001/mcp"},   // optional, as for kiln.run (headers too)
//!   secrets: {DOCS_TOKEN: "…"},                       // optional, as for kiln.run
//!   builtins: ["http_request"], allow_net: [...],     // optional
//!   permission: {mode: "default"}, approve: (request) => "approve",
//!   ask: async (question) => prompt(question) ?? "",  // answers ask_user; without it, nobody can
//!   outputSchema: {type: "object", properties: {sum: {type: "number"}}, required: ["sum"]},
//!   budget: {max_usd: 0.50, deadline_ms: 120000},
//!   guards: {max_turns: 20, no_progress: 6},          // reference/003's, with its defaults
//!   system: "You are terse.",                         // a preamble to Kiln's contract
//!   onEvent: (event) => {},   // text_delta, tool_call_update, tool_result_update, approval_request, llm_call, stop, done, …
//!   signal: controller.signal,
//! });
//! // {text, value, finished, stop: {reason, code?, message?}, usage, spend, job_id, turns, actions,
//! //  messages}: `messages` is the thread as the model saw it, to continue the conversation
//! ```
//!
//! A request that cannot be read rejects with a `TypeError` naming the
//! field; everything that happens in the turn — a guard, the budget, the
//! provider's failure — is in the result's `stop`.

use js_sys::Promise;
use wasm_bindgen::prelude::*;

use crate::{Kiln, from_json_text, listener, optional_function, page_parts, rejection};
use kiln_types::runtime::ToRuntime;

fn agent_error(message: &str) -> JsValue {
    js_sys::TypeError::new(&format!("kiln.agent: {message}")).into()
}

#[wasm_bindgen]
impl Kiln {
    /// Runs one agent turn (see the module docs); resolves to its result.
    pub fn agent(&self, request: JsValue) -> Promise {
        let sent = (|| {
            if !request.is_object() {
                return Err(agent_error(
                    "takes one object, {provider, options, messages, tools?, mcp?, builtins?, permission?, approve?, ask?, outputSchema?, guards?, budget?, system?, onEvent?, signal?}",
                ));
            }
            let on_event = optional_function(&request, "onEvent", agent_error)?;
            let ask = optional_function(&request, "ask", agent_error)?;
            let (request, calls, approve, signal) = page_parts(
                &request,
                &["signal", "onEvent", "approve", "ask"],
                agent_error,
            )?;
            let on_event = on_event.map(listener);
            let asks = ask.is_some();
            let page = crate::runtime::JsPage {
                calls,
                approve,
                ask,
            };
            Ok(self.runtime.exchange(
                move |id, approve| ToRuntime::Agent {
                    id,
                    request,
                    approve,
                    ask: asks,
                },
                page,
                signal,
                on_event,
            ))
        })();
        wasm_bindgen_futures::future_to_promise(async move {
            match sent?.await {
                Ok(Ok(result)) => Ok(from_json_text(&result.to_string())),
                Ok(Err(problem)) => Err(rejection("kiln.agent", &problem)),
                Err(_) => Err(agent_error("the runtime worker went away during the turn")),
            }
        })
    }
}

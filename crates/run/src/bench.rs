//! What `cargo xtask bench` measures runs with (feature `bench`, never
//! shipped): [`Timed`], a runner that times the runner it wraps; [`belt`], a
//! scripted catalog of `n` tools; [`environment`], where a bench run is
//! assembled (every question approved, no workspace). Shared by the CodeAct
//! loop's figures (`kiln_agent::bench`) and the code nodes' (`kiln-nodes`'
//! `examples/nodes.rs`).

use std::cell::RefCell;
use std::rc::Rc;

use futures::future::LocalBoxFuture;
use kiln_capabilities::gate::{Fixed, SessionAllow};
use kiln_capabilities::{Answer, Dispatcher};
use kiln_types::cancel::AbortSignal;
use kiln_types::{RunLimits, RunResult};
use serde_json::{Value, json};

use crate::{Environment, People, SandboxRunner};

/// A clock in milliseconds.
pub type Now = Rc<dyn Fn() -> f64>;

/// When one action entered and left the runner, and the sandbox's own start.
#[derive(Debug, Clone, Copy)]
pub struct Inside {
    pub entered: f64,
    pub took: f64,
    /// `start_ms + context_ms` of the run's report.
    pub start: f64,
    /// The report's `duration_ms`.
    pub duration: f64,
}

/// A runner that times the runner it wraps.
pub struct Timed {
    inner: Rc<dyn SandboxRunner>,
    now: Now,
    inside: Rc<RefCell<Vec<Inside>>>,
}

impl Timed {
    /// Times `inner` on `now`.
    #[must_use]
    pub fn new(inner: Rc<dyn SandboxRunner>, now: Now) -> Self {
        Self {
            inner,
            now,
            inside: Rc::default(),
        }
    }

    /// The runs that have left the runner since the last call, in the order
    /// they left it.
    #[must_use]
    pub fn take(&self) -> Vec<Inside> {
        self.inside.take()
    }
}

impl SandboxRunner for Timed {
    fn run(
        &self,
        code: String,
        limits: RunLimits,
        tools: Rc<Dispatcher>,
        cancel: AbortSignal,
    ) -> LocalBoxFuture<'static, RunResult> {
        let now = self.now.clone();
        let inside = self.inside.clone();
        let entered = now();
        let ran = self.inner.run(code, limits, tools, cancel);
        Box::pin(async move {
            let result = ran.await;
            let took = now() - entered;
            inside.borrow_mut().push(Inside {
                entered,
                took,
                start: result.report.start_ms + result.report.context_ms,
                duration: result.report.duration_ms,
            });
            result
        })
    }
}

/// `n` MCP-style tools for a belt: `server_tool_0` … (read tools answering
/// `{ok: true}`), as a scripted catalog.
#[must_use]
pub fn belt(n: usize) -> Value {
    Value::Array(
        (0..n)
            .map(|i| {
                json!({
                    "name": format!("server_tool_{i}"),
                    "description": format!("Looks up record {i} of the server's catalog by id and returns its fields, with paging for long lists of results."),
                    "input_schema": {"type": "object", "properties": {
                        "id": {"type": "string", "description": "The record's id."},
                        "page": {"type": "integer", "description": "Which page of results."},
                        "fields": {"type": "array", "items": {"type": "string"}, "description": "Which fields to return."}
                    }, "required": ["id"]},
                    "category": "read",
                    "returns": {"ok": true}
                })
            })
            .collect(),
    )
}

/// Where a bench job is assembled: `tools` (a scripted catalog, such as
/// [`belt`]) as the job's own tools, every question approved, no workspace.
#[must_use]
pub fn environment(tools: Value, http: Rc<dyn kiln_http::HttpClient>) -> Environment {
    Environment {
        entrance: "bench".into(),
        tools_host: "bench".into(),
        http,
        people: People::Approver {
            host: "bench".into(),
            approver: Rc::new(Fixed(Answer::Approve)),
            session: SessionAllow::default(),
        },
        own_tools: Some(Rc::new(move |registry| {
            let _ = kiln_capabilities::scripted::add_catalog(registry, &tools, "bench");
        })),
        bridge: None,
        workspace: None,
        random: Rc::new(|| [1; 8]),
        on_gate: None,
        on_progress: None,
    }
}

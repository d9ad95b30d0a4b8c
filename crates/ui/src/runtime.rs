//! The app's side of the runtime protocol, over the one client
//! (`kiln-runtime-client`): starts this tab's runtime worker
//! (`workers/runtime.js`), which runs the programs — ladder, sandbox pool,
//! MCP sessions, the run's record — and names the exchanges the app sends:
//! a run from the editor, an agent turn, a code node, a storage operation,
//! the change feed, the permission settings. What a run asks of the app (a
//! call of one of its own tools, the person's approval, an agent's question)
//! is answered by the app's [`PageSide`].

use std::rc::Rc;

use kiln_runtime_client::{Answered, RuntimeClient, With};
use kiln_types::permission::GateSettings;
use kiln_types::runtime::{Problem, RuntimeOptions, ToRuntime};
use serde_json::Value;

pub(crate) use kiln_runtime_client::{Listener, PageCall, PageSide};

/// Where the runtime worker's bootstrap is served, relative to the page.
const RUNTIME_WORKER_URL: &str = "./workers/runtime.js";

/// This tab's runtime worker, started.
pub(crate) struct Runtime {
    /// Why the workspace's stores did not open, when they did not.
    pub(crate) storage: Option<Problem>,
    client: RuntimeClient,
}

/// `path` resolved against the page's address.
fn absolute(path: &str) -> String {
    web_sys::window()
        .and_then(|window| window.location().href().ok())
        .and_then(|base| web_sys::Url::new_with_base(path, &base).ok())
        .map_or_else(|| path.to_owned(), |url| url.href())
}

impl Runtime {
    /// Starts the worker for `workspace` and waits for its `ready`.
    pub(crate) async fn start(
        workspace: &str,
        sandbox_url: &str,
        pool_size: u32,
    ) -> Result<Self, String> {
        let options = RuntimeOptions {
            workspace: workspace.to_owned(),
            sandbox_url: absolute(sandbox_url),
            pool_size,
            reply_due_ms: None,
        };
        let client = RuntimeClient::start(&absolute(RUNTIME_WORKER_URL), &options).await?;
        Ok(Self {
            storage: client.storage().cloned(),
            client,
        })
    }

    /// Sends one run from the editor (`request` is the run request's JSON;
    /// the answer is a `RunAnswer`: the worker's report, model text and
    /// record); returns its id, for [`Runtime::cancel`], and its answer.
    pub(crate) fn run(&self, request: Value, page: Rc<dyn PageSide>) -> (u64, Answered) {
        self.exchange(
            |id| ToRuntime::Run {
                id,
                request,
                approve: true,
                report: true,
            },
            None,
            page,
        )
    }

    /// Sends the request `message(id)` makes, which calls nothing back on
    /// the page; resolves to its answer.
    pub(crate) fn call(&self, message: impl FnOnce(u64) -> ToRuntime) -> Answered {
        self.client.request(message)
    }

    /// Sends the exchange `message(id)` makes, whose calls back (page tools,
    /// approvals) `page` answers and whose events go to `on_event`; returns
    /// its id, for [`Runtime::cancel`], and its answer. A code node's run
    /// and a graph's go this way.
    pub(crate) fn exchange(
        &self,
        message: impl FnOnce(u64) -> ToRuntime,
        on_event: Option<Listener>,
        page: Rc<dyn PageSide>,
    ) -> (u64, Answered) {
        let with = With {
            page: Some(page),
            on_event,
            signal: None,
        };
        self.client.send(message, with)
    }

    /// Sends the storage operation `op` with `args`.
    pub(crate) fn store(&self, op: &str, args: Value) -> Answered {
        let op = op.to_owned();
        self.call(move |id| ToRuntime::Store { id, op, args })
    }

    /// Follows the workspace's committed changes (this tab's and other
    /// tabs'): `on_change` gets each batch, `[{table, key, version}]`.
    pub(crate) fn watch(&self, on_change: Rc<dyn Fn(Value)>) {
        self.client.watch(on_change);
    }

    /// Sends an agent turn (`request` as `kiln.agent` takes it, minus its
    /// functions): `on_event` gets each event, `page` answers its page tool
    /// calls, approvals and questions, and the answer is its result with the
    /// thread to continue from. Returns its id, for [`Runtime::cancel`].
    pub(crate) fn agent(
        &self,
        request: Value,
        on_event: Listener,
        page: Rc<dyn PageSide>,
    ) -> (u64, Answered) {
        let ask = page.can_ask();
        self.exchange(
            |id| ToRuntime::Agent {
                id,
                request,
                approve: true,
                ask,
            },
            Some(on_event),
            page,
        )
    }

    /// Follows the in-browser model's loading, whichever exchange is
    /// waiting on the model.
    pub(crate) fn on_model_status(&self, on_status: kiln_runtime_client::StatusListener) {
        self.client.on_model_status(on_status);
    }

    /// The person changed the permission settings: the runs going on decide
    /// their next call by them.
    pub(crate) fn permission(&self, settings: GateSettings) {
        self.client.tell(&ToRuntime::Permission { settings });
    }

    /// Ends run or turn `id` at once (the Stop button).
    pub(crate) fn cancel(&self, id: u64) {
        self.client.cancel(id);
    }
}

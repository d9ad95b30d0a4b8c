//! The sandbox Web Worker's wasm entry: the sandbox protocol's serving side
//! (`kiln_sandbox::server`) over `postMessage`: runs each program with
//! `kiln-sandbox`, its tool calls going to the host and its console lines as
//! it prints them, and posts back [`FromSandbox`] reports.
//!
//! It holds no logic of its own: admission and the run are the sandbox crate's,
//! what a tool does is the host's. One run at a time: the host sends the next
//! run only after this one's report (or terminates the worker when a budget
//! passes). Between runs the worker builds the next run's context, so a run
//! starts without paying for one.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::FutureExt as _;
use kiln_sandbox::Sandbox;
use kiln_sandbox::catalog::Admission;
use kiln_sandbox::server::{Order, Server, Transport};
use kiln_sandbox::tools::NoTools;
use kiln_types::protocol::{FromSandbox, encode};
use kiln_types::{RunError, RunLimits, RunReport};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{DedicatedWorkerGlobalScope, MessageEvent};

/// Every allocation of the worker counts against the running program's memory
/// budget (see `kiln-alloc`).
#[global_allocator]
static ALLOCATOR: kiln_alloc::Budgeted = kiln_alloc::Budgeted;

/// The run in progress, for the memory hook (which cannot reach thread-locals
/// safely while an allocation is half done).
static CURRENT_RUN: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The protocol's serving side, over `postMessage`.
    static SERVER: Rc<Server> = Server::new(Rc::new(PostMessage));
    /// The worker's global scope, looked up once (`None` outside a worker).
    static SCOPE: Option<DedicatedWorkerGlobalScope> = js_sys::global().dyn_into().ok();
    /// The next run's context, built while the worker waits for work.
    static NEXT: RefCell<Option<Sandbox>> = const { RefCell::new(None) };
}

/// The worker's messages go to the host page (or the runtime worker) that
/// started it.
struct PostMessage;

impl Transport for PostMessage {
    fn send(&self, message: &FromSandbox) {
        post(message);
    }
}

/// Runs when `workers/sandbox.js` instantiates the module: listens for runs,
/// builds the first context, and tells the host it is ready.
#[wasm_bindgen(start)]
pub fn start() {
    console_error_panic_hook::set_once();
    let Ok(scope) = js_sys::global().dyn_into::<DedicatedWorkerGlobalScope>() else {
        // Loaded outside a dedicated worker (a test page, say): nothing to serve.
        return;
    };
    let onmessage = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
        on_message(&event);
    });
    scope.set_onmessage(Some(onmessage.as_ref().unchecked_ref()));
    // The handler lives as long as the worker does.
    onmessage.forget();
    kiln_alloc::set_exhausted_hook(memory_exhausted);
    warm_up();
    prepare_next();
    post(&FromSandbox::Ready);
}

/// A program that touches the engine's common paths (literals, closures, array
/// methods, strings, JSON, exceptions, a promise, console, a tool call and its
/// failure, the value conversion), run once before the worker says it is
/// ready.
const WARM_UP: &str = r#"const rows = [1, 2, 3].map((n) => ({ n, s: "x" + n })).filter((r) => r.n > 1);
try { JSON.parse("{"); } catch (error) { console.log(error.name, rows.length); }
await Promise.resolve(rows);
try { await tools.warm_up({ rows }); } catch (error) { console.log(error.code); }
return { rows, text: JSON.stringify(rows).toUpperCase() };"#;

/// Runs [`WARM_UP`] in a context of its own: a fresh wasm instance compiles
/// each function the first time it runs, and without this the first real run
/// would pay for all of them. The program settles without host futures, so one
/// poll finishes it.
fn warm_up() {
    if let Ok(sandbox) = Sandbox::new() {
        let limits = RunLimits::default();
        let catalog =
            serde_json::json!([{"name": "warm_up", "description": "warms the call path"}]);
        let admission = Admission::admit(&catalog, "warm-up").unwrap_or_default();
        let run = sandbox.run(WARM_UP, &limits, Rc::new(admission), Rc::new(NoTools), None);
        let _ = run.now_or_never();
    }
}

/// Builds the next run's context now, so that a run starts without waiting
/// for one. A context that could not be built is retried at the run, which
/// then reports the engine failure.
fn prepare_next() {
    if NEXT.with(|next| next.borrow().is_none())
        && let Ok(sandbox) = Sandbox::new()
    {
        NEXT.with(|next| *next.borrow_mut() = Some(sandbox));
    }
}

fn on_message(event: &MessageEvent) {
    let received = kiln_clock::now_ms();
    let Some(text) = event.data().as_string() else {
        post(&FromSandbox::Rejected {
            problem: "a sandbox message must be a JSON string; this one was not a string".into(),
        });
        return;
    };
    let Some(order) = SERVER.with(|server| server.receive(&text)) else {
        return;
    };
    let Order {
        run_id,
        code,
        limits,
        admission,
    } = order;
    let sandbox = NEXT
        .with(|next| next.borrow_mut().take())
        .map_or_else(Sandbox::new, Ok);
    CURRENT_RUN.store(run_id, Ordering::SeqCst);
    // The budget counts the worker's whole heap, context included.
    kiln_alloc::set_limit(usize::try_from(limits.memory_bytes).unwrap_or(usize::MAX));
    wasm_bindgen_futures::spawn_local(async move {
        if kiln_sandbox::modules::imports_library(&code) {
            // Once per worker; a load that failed is tried again by the next
            // such run, and this one's import says why.
            let _ = wasm_bindgen_futures::JsFuture::from(load_library()).await;
        }
        let server = SERVER.with(Rc::clone);
        let warnings = admission.warnings.clone();
        let catalog_digest = admission.digest();
        let before_run = kiln_clock::now_ms() - received;
        let mut report: RunReport = match sandbox {
            Ok(sandbox) => {
                sandbox
                    .run(
                        &code,
                        &limits,
                        Rc::new(admission),
                        server.host(run_id),
                        None,
                    )
                    .await
            }
            Err(report) => *report,
        };
        if report.start_ms > 0.0 {
            // Reading the message and admitting the catalog came first.
            report.start_ms += before_run;
        }
        kiln_alloc::set_limit(usize::MAX);
        server.report(run_id, report, warnings, catalog_digest);
        // After the report is out: the host is not kept waiting for it.
        prepare_next();
    });
}

#[wasm_bindgen(inline_js = r#"
let loading;
// Loads the library's wasm (`kiln_modules.js` beside the app, for this
// worker's `workers/sandbox.js`) into `globalThis.__kilnLibrary`, where the
// sandbox's module exports find it; on failure says why in
// `globalThis.__kilnLibraryError`. Settles either way.
export function load_library() {
  if (globalThis.__kilnLibrary) return Promise.resolve();
  loading ??= import(new URL("../kiln_modules.js", self.location.href).href).then(async (module) => {
    await module.default();
    globalThis.__kilnLibrary = module;
    globalThis.__kilnLibraryError = undefined;
  }).catch((error) => {
    globalThis.__kilnLibraryError = String(error);
  }).finally(() => {
    loading = undefined;
  });
  return loading;
}
"#)]
extern "C" {
    fn load_library() -> js_sys::Promise;
}

/// The memory budget ran out: tell the host now, since the wasm aborts as soon
/// as this returns. The host ends the run and replaces this worker.
fn memory_exhausted(limit: usize) {
    post(&FromSandbox::Lost {
        run_id: CURRENT_RUN.load(Ordering::SeqCst),
        error: RunError::memory_budget(u64::try_from(limit).unwrap_or(u64::MAX)),
    });
}

fn post(message: &FromSandbox) {
    SCOPE.with(|scope| {
        if let Some(scope) = scope {
            // Posting a string cannot fail to clone; a closed port drops it, which
            // is what the host expects of a worker it terminated.
            let _ = scope.post_message(&JsValue::from_str(&encode(message)));
        }
    });
}

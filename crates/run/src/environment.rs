//! What an entrance supplies to every run it asks for ([`Environment`]):
//! its name, its HTTP client, who answers the ladder's questions
//! ([`People`]), its own tools, the bridge to the page's tools
//! ([`ToolBridge`]) and the workspace the runs are recorded in
//! ([`Workspace`]).

use std::rc::Rc;

use kiln_capabilities::gate::SessionAllow;
use kiln_capabilities::{Approver, Gate, Implementation, ProgressObserver, Registry};
use kiln_http::HttpClient;
use kiln_store::StoreError;
use kiln_store::backend::Backend;
use kiln_store::files::FileTree;
use kiln_store::owners::Owners;

/// A workspace's stores, open, and who is running its jobs.
#[derive(Clone)]
pub struct Workspace {
    pub backend: Rc<dyn Backend>,
    pub files: Rc<dyn FileTree>,
    /// This runtime's owner id (its jobs carry it) and who else is alive.
    pub owners: Rc<dyn Owners>,
}

impl Workspace {
    /// Marks `interrupted` the jobs whose runtime ended before they did (a
    /// closed tab, a killed process): what every entrance does when it opens
    /// the workspace. Answers how many.
    ///
    /// # Errors
    ///
    /// The store's, when the history cannot be read or written.
    pub async fn interrupt_abandoned(&self) -> Result<usize, StoreError> {
        let history = kiln_store::history::History::new(self.backend.clone());
        Ok(history.interrupt_abandoned(&*self.owners).await?.len())
    }
}

/// Who answers the ladder's questions.
#[derive(Clone)]
pub enum People {
    /// `approver` answers under the gate's `host` name; "allow for this
    /// session" answers are kept in `session` for the entrance's later runs.
    /// A request that names no mode gets `default` when the approver is a
    /// person who can be asked, else `auto` (a headless or fixed answer).
    Approver {
        host: String,
        approver: Rc<dyn Approver>,
        session: SessionAllow,
    },
    /// The entrance's own gate, whose settings a person changes while runs
    /// go on (the app's tools panel): the request's permission is not read.
    Gate(Rc<Gate>),
}

/// How an entrance answers the calls of the page tools a request declares
/// (`tools: {name: {description, input_schema, category}}`): the page keeps
/// each tool's `call`, and the bridge reaches it.
pub trait ToolBridge {
    /// The `call` of the page tool `name`, or `None` when the page gave none.
    fn implementation(&self, name: &str) -> Option<Rc<dyn Implementation>>;
}

/// Registers an entrance's own tools in a run's registry.
pub type OwnTools = Rc<dyn Fn(&mut Registry)>;

/// What an entrance supplies to every run it asks for.
#[derive(Clone)]
pub struct Environment {
    /// The entrance, as warnings and the dispatcher name it: `kiln.run`,
    /// `kiln run`, `page`.
    pub entrance: String,
    /// The host name of the request's page tools (`Source::Host`).
    pub tools_host: String,
    pub http: Rc<dyn HttpClient>,
    pub people: People,
    /// Registers the entrance's own tools first in each run's registry (the
    /// CLI's scripted catalog; the app's page tools and MCP servers).
    pub own_tools: Option<OwnTools>,
    pub bridge: Option<Rc<dyn ToolBridge>>,
    /// The workspace every run is recorded in and gets the storage tools
    /// of: `None` for an entrance without one (`kiln run` without
    /// `--store`), an error when it could not open (each run says why).
    pub workspace: Option<Rc<Result<Workspace, StoreError>>>,
    /// Eight random bytes, for run ids (the platform's source).
    pub random: Rc<dyn Fn() -> [u8; 8]>,
    /// Given the run's gate once it is made, so that the entrance can change
    /// its settings while the run goes on (the app's tools panel: a new mode
    /// applies from the run's next call).
    pub on_gate: Option<Rc<dyn Fn(Rc<Gate>)>>,
    /// Told each progress report a run's program makes
    /// (`progress(percent, message)`), as it makes it: the entrance shows it.
    pub on_progress: Option<ProgressObserver>,
}

impl Environment {
    /// Adds `more` to the entrance's own tools, after those it has (a tool
    /// the entrance mounts only for some jobs: the configured web search).
    pub fn add_own_tools(&mut self, more: impl Fn(&mut Registry) + 'static) {
        let before = self.own_tools.take();
        self.own_tools = Some(Rc::new(move |registry: &mut Registry| {
            if let Some(before) = &before {
                before(registry);
            }
            more(registry);
        }));
    }
}

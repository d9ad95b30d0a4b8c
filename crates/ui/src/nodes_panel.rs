//! The Code nodes view: a graph of code nodes, each with its typed input and
//! output handles; an output connected to an input by choosing it (refused
//! with the reason when the types do not fit, or it would make a cycle);
//! sample values for the inputs nothing feeds; Run, with each node's
//! outputs, console, duration and errors as it settles; Undo. The graph is
//! kept in the workspace store (`graphs.put`, one record per graph name) at
//! each change and found again after a reload; the undo history lasts for
//! the tab (`sessionStorage`), so Undo works across a reload too.
//!
//! "Write code with AI" and a node's "Ask AI" open the authoring dialog
//! (`author_dialog`); what it applies is one change, undone as one.

use std::collections::HashMap;
use std::rc::Rc;

use crate::said::said;
use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::{Map, Value, json};
use wasm_bindgen::JsCast as _;

use kiln_types::Progress;
use kiln_types::node::{CodeNode, GraphNode, SlotRef};
use kiln_types::records::GraphRecord;
use kiln_types::runtime::{ExchangeEvent, Problem, ToRuntime};

use crate::RuntimeStart;
use crate::author_dialog::{AuthorDialog, Target};
use crate::chat::Session;
use crate::nodes_model::{
    History, Sheet, example, parse_inputs, parse_outputs, sample_from_text, sample_text, slots_text,
};
use crate::provider_store::ProviderStore;
use crate::runtime::{Listener, PageSide};
use crate::storage::StorageSignals;
use crate::storage_model::{ErrorText, value_text};

/// The graph a workspace opens with, until the person names another.
const FIRST_GRAPH: &str = "main";

/// The Code nodes view's state, shared by its parts.
#[derive(Clone, Copy)]
pub(crate) struct Nodes {
    pub storage: StorageSignals,
    /// The saved graphs' names.
    pub names: RwSignal<Vec<String>>,
    /// The graph on show.
    pub name: RwSignal<String>,
    pub sheet: RwSignal<Sheet>,
    /// The saved version `sheet` was written at (0: never saved).
    version: RwSignal<u64>,
    history: RwSignal<History>,
    /// Whether the saved graphs have been read (until then nothing is saved).
    loaded: RwSignal<bool>,
    /// The last thing that happened, for the status line (`aria-live`).
    pub status: RwSignal<Option<(bool, String)>>,
    /// A save that failed, kept until the next one succeeds.
    save_error: RwSignal<Option<ErrorText>>,
    /// A refused connection: the input it was for, and why.
    refusal: RwSignal<Option<(SlotRef, String)>>,
    /// Each node's last report (`{status, outputs, warnings, console,
    /// duration_ms, error?}`), by id.
    pub results: RwSignal<HashMap<String, Value>>,
    /// The last progress each running node's body reported, by id, until
    /// its report comes.
    progress: RwSignal<HashMap<String, Progress>>,
    /// The graph run going on: its exchange, for Stop.
    running: RwSignal<Option<u64>>,
    saving: StoredValue<SaveQueue>,
    /// The dialog on show, and what it writes.
    pub dialog: RwSignal<Option<Target>>,
    pub runtime: StoredValue<RuntimeStart, LocalStorage>,
    pub page: StoredValue<Rc<dyn PageSide>, LocalStorage>,
    pub session: StoredValue<Session, LocalStorage>,
    pub providers: ProviderStore,
}

/// Saves one at a time: a change made while one is on its way is saved
/// after it, at the version it gives.
#[derive(Default)]
struct SaveQueue {
    in_flight: bool,
    again: bool,
}

impl Nodes {
    /// Makes `change` to the graph as one undoable step and saves it.
    /// Returns what `change` returned.
    pub(crate) fn change<R>(self, change: impl FnOnce(&mut Sheet) -> R) -> R {
        let before = self.sheet.get_untracked();
        let mut after = before.clone();
        let answer = change(&mut after);
        if after != before {
            self.history.update(|history| history.push(before));
            self.sheet.set(after);
            self.save();
        }
        answer
    }

    /// Puts the graph back as it was before the last change.
    fn undo(self) {
        let Some(before) = self
            .history
            .try_update(|history| history.past.pop())
            .flatten()
        else {
            return;
        };
        self.sheet.set(before);
        self.status.set(Some((true, "Undone.".into())));
        self.save();
    }

    fn save(self) {
        if !self.loaded.get_untracked() {
            return;
        }
        let busy = self.saving.try_update_value(|queue| {
            if queue.in_flight {
                queue.again = true;
                true
            } else {
                queue.in_flight = true;
                false
            }
        });
        if busy != Some(false) {
            return;
        }
        let Some(stores) = self.storage.stores.get_untracked() else {
            self.saving.update_value(|queue| queue.in_flight = false);
            self.save_error.set(Some(ErrorText::plain(
                "Storage is not available, so this graph lasts until the page closes.",
            )));
            return;
        };
        spawn_local(async move {
            loop {
                let sheet = self.sheet.get_untracked();
                let name = self.name.get_untracked();
                let record = GraphRecord {
                    name: name.clone(),
                    nodes: sheet.nodes,
                    edges: sheet.edges,
                    samples: sheet.samples,
                    version: self.version.get_untracked(),
                };
                let saved = stores
                    .op::<Value>(
                        "graphs.put",
                        serde_json::to_value(&record).unwrap_or_default(),
                    )
                    .await;
                match saved {
                    Ok(answer) => {
                        let version = answer["version"].as_u64().unwrap_or_default();
                        self.version.set(version);
                        self.history.update(|history| history.version = version);
                        keep_history(&name, &self.history.get_untracked());
                        self.save_error.set(None);
                        self.names.update(|names| {
                            if !names.contains(&name) {
                                names.push(name.clone());
                                names.sort();
                            }
                        });
                    }
                    Err(problem) => {
                        self.save_error.set(Some(ErrorText::with_prefix(
                            &format!("The graph `{name}` was not saved: "),
                            &problem,
                        )));
                    }
                }
                let again = self.saving.try_update_value(|queue| {
                    let again = queue.again;
                    queue.again = false;
                    queue.in_flight = again;
                    again
                });
                if again != Some(true) {
                    break;
                }
            }
        });
    }

    /// Reads the saved graphs and shows `name` (or the first, or a new
    /// `main`).
    fn load(self, name: Option<String>) {
        let Some(stores) = self.storage.stores.get_untracked() else {
            self.loaded.set(self.storage.settled.get_untracked());
            return;
        };
        spawn_local(async move {
            match stores
                .op::<Vec<GraphRecord>>("graphs.list", json!({}))
                .await
            {
                Ok(records) => {
                    let mut names: Vec<String> =
                        records.iter().map(|record| record.name.clone()).collect();
                    names.sort();
                    let wanted = name.unwrap_or_else(|| {
                        names
                            .first()
                            .cloned()
                            .unwrap_or_else(|| FIRST_GRAPH.to_owned())
                    });
                    let record = records.into_iter().find(|record| record.name == wanted);
                    self.show(wanted, record);
                    self.names.set(names);
                    self.loaded.set(true);
                }
                Err(problem) => {
                    self.save_error.set(Some(ErrorText::with_prefix(
                        "The saved graphs could not be read: ",
                        &problem,
                    )));
                }
            }
        });
    }

    /// Shows graph `name` as saved (or empty, when it never was), with the
    /// tab's undo history when it still applies.
    fn show(self, name: String, record: Option<GraphRecord>) {
        let (sheet, version) = match record {
            Some(record) => (
                Sheet {
                    nodes: record.nodes,
                    edges: record.edges,
                    samples: record.samples,
                },
                record.version,
            ),
            None => (Sheet::default(), 0),
        };
        let history = kept_history(&name)
            .filter(|history| history.version == version && version > 0)
            .unwrap_or_default();
        self.name.set(name);
        self.sheet.set(sheet);
        self.version.set(version);
        self.history.set(history);
        self.results.set(HashMap::new());
        self.refusal.set(None);
    }

    /// Checks a node just saved as it would run (the runtime's
    /// `kiln_nodes::check_node_typed`: its imports, whether its body parses,
    /// every output on every path) and, when something is wrong, says so
    /// after `saved` (the status it left), unless the status has moved on.
    fn check(self, node: CodeNode, saved: String) {
        let runtime = self.runtime.get_value();
        spawn_local(async move {
            let Ok(runtime) = runtime.await else {
                return;
            };
            let node = serde_json::to_value(&node).unwrap_or(Value::Null);
            let answered = runtime.call(move |id| ToRuntime::CheckNode { id, node });
            let Ok(Ok(answer)) = answered.await else {
                return;
            };
            let problems: Vec<String> = answer["problems"]
                .as_array()
                .map(|problems| {
                    problems
                        .iter()
                        .filter_map(|problem| problem.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            if problems.is_empty()
                || self.status.get_untracked().map(|(_, text)| text) != Some(saved.clone())
            {
                return;
            }
            self.status.set(Some((
                false,
                format!(
                    "{saved} It will not run as written: {}.",
                    problems.join("; ")
                ),
            )));
        });
    }

    /// Runs the graph: each node's report shows as it settles.
    fn run(self) {
        if self.running.get_untracked().is_some() {
            return;
        }
        let sheet = self.sheet.get_untracked();
        if sheet.nodes.is_empty() {
            return;
        }
        let mut request = self.session.with_value(|session| session());
        request["nodes"] = json!(sheet.nodes);
        request["edges"] = json!(sheet.edges);
        request["inputs"] = Value::Object(sheet.run_inputs());
        self.results.set(HashMap::new());
        self.progress.set(HashMap::new());
        self.status.set(Some((true, "Running the graph…".into())));
        let runtime = self.runtime.get_value();
        let page = self.page.get_value();
        // Marks the run as going on before the runtime worker has it, so a
        // second click does not start another.
        self.running.set(Some(0));
        spawn_local(async move {
            let answer = match runtime.await {
                Ok(runtime) => {
                    let on_event: Listener = Rc::new(move |event: ExchangeEvent| match event {
                        ExchangeEvent::Node(report) => {
                            let id = report.id.clone();
                            self.progress.update(|progress| {
                                progress.remove(&id);
                            });
                            let report = serde_json::to_value(report).unwrap_or(Value::Null);
                            self.results.update(|results| {
                                results.insert(id, report);
                            });
                        }
                        ExchangeEvent::Progress {
                            node: Some(id),
                            progress,
                        } => self.progress.update(|reported| {
                            reported.insert(id, progress);
                        }),
                        _ => {}
                    });
                    let (id, answered) = runtime.exchange(
                        |id| ToRuntime::Graph {
                            id,
                            request,
                            approve: true,
                        },
                        Some(on_event),
                        page,
                    );
                    self.running.set(Some(id));
                    answered.await.unwrap_or_else(|_| {
                        Err(Problem::bad_request(
                            "the runtime worker went away during the run",
                        ))
                    })
                }
                Err(problem) => Err(Problem::bad_request(problem)),
            };
            self.running.set(None);
            self.progress.set(HashMap::new());
            match answer {
                Ok(ran) => {
                    if let Some(nodes) = ran["nodes"].as_array() {
                        self.results.update(|results| {
                            for node in nodes {
                                if let Some(id) = node["id"].as_str() {
                                    results.insert(id.to_owned(), node.clone());
                                }
                            }
                        });
                    }
                    let failed = ran["nodes"]
                        .as_array()
                        .map(|nodes| {
                            nodes
                                .iter()
                                .filter(|node| node["status"] != "completed")
                                .count()
                        })
                        .unwrap_or_default();
                    let text = match (ran["status"].as_str(), failed) {
                        (Some("completed"), _) => "The graph ran: every node completed.".to_owned(),
                        (Some("aborted"), _) => "The graph run was stopped.".to_owned(),
                        (_, failed) => format!(
                            "The graph ran: {failed} node{} did not complete (see {}).",
                            if failed == 1 { "" } else { "s" },
                            if failed == 1 { "it" } else { "each" }
                        ),
                    };
                    self.status.set(Some((ran["status"] == "completed", text)));
                }
                Err(problem) => {
                    self.status.set(Some((
                        false,
                        format!("The graph did not run: {}", problem.message),
                    )));
                }
            }
        });
    }

    fn stop(self) {
        if let Some(id) = self.running.get_untracked().filter(|id| *id != 0) {
            let runtime = self.runtime.get_value();
            spawn_local(async move {
                if let Ok(runtime) = runtime.await {
                    runtime.cancel(id);
                }
            });
        }
    }
}

/// Where the tab keeps graph `name`'s undo history.
fn history_key(name: &str) -> String {
    format!("kiln.nodes.undo.{name}")
}

fn session_storage() -> Option<web_sys::Storage> {
    web_sys::window()?.session_storage().ok()?
}

fn keep_history(name: &str, history: &History) {
    if let (Some(storage), Ok(text)) = (session_storage(), serde_json::to_string(history)) {
        // A full sessionStorage costs the undo history across a reload, nothing else.
        let _ = storage.set_item(&history_key(name), &text);
    }
}

fn kept_history(name: &str) -> Option<History> {
    let text = session_storage()?.get_item(&history_key(name)).ok()??;
    serde_json::from_str(&text).ok()
}

/// The view, under the page's storage panels.
#[component]
pub(crate) fn NodesPanel(
    storage: StorageSignals,
    runtime: RuntimeStart,
    page: Rc<dyn PageSide>,
    session: Session,
    providers: ProviderStore,
) -> impl IntoView {
    let nodes = Nodes {
        storage,
        names: RwSignal::new(Vec::new()),
        name: RwSignal::new(FIRST_GRAPH.to_owned()),
        sheet: RwSignal::new(Sheet::default()),
        version: RwSignal::new(0),
        history: RwSignal::new(History::default()),
        loaded: RwSignal::new(false),
        status: RwSignal::new(None),
        save_error: RwSignal::new(None),
        refusal: RwSignal::new(None),
        results: RwSignal::new(HashMap::new()),
        progress: RwSignal::new(HashMap::new()),
        running: RwSignal::new(None),
        saving: StoredValue::new(SaveQueue::default()),
        dialog: RwSignal::new(None),
        runtime: StoredValue::new_local(runtime),
        page: StoredValue::new_local(page),
        session: StoredValue::new_local(session),
        providers,
    };
    // Read once storage has opened (or has said it cannot).
    Effect::new(move || {
        if storage.settled.get() && !nodes.loaded.get_untracked() {
            nodes.load(None);
        }
    });
    let new_name = RwSignal::new(String::new());
    let create = move || {
        let name = new_name.get_untracked().trim().to_owned();
        if name.is_empty() {
            return;
        }
        if nodes.names.with_untracked(|names| names.contains(&name)) {
            nodes.status.set(Some((
                false,
                format!("There is already a graph `{name}`; pick it in the list."),
            )));
            return;
        }
        new_name.set(String::new());
        nodes.show(name.clone(), None);
        nodes.status.set(Some((
            true,
            format!("New graph `{name}`: it is saved with its first node."),
        )));
    };
    let pick = move |name: String| {
        if name != nodes.name.get_untracked() {
            nodes.load(Some(name));
        }
    };
    let empty_node = move || {
        let node = CodeNode {
            title: "New node".into(),
            code: "return { result: null };".into(),
            inputs: Vec::new(),
            outputs: parse_outputs("result: any").unwrap_or_default(),
        };
        let id = nodes.change(|sheet| sheet.add(node));
        nodes.status.set(Some((
            true,
            format!("Added `{id}`; Edit it to write its code."),
        )));
    };
    let running = move || nodes.running.get().is_some();
    let can_undo = move || nodes.history.with(|history| !history.past.is_empty());
    let opener = StoredValue::new_local(None::<web_sys::HtmlElement>);
    let open = move |event: leptos::ev::MouseEvent, target: Target| {
        opener.set_value(
            event
                .current_target()
                .and_then(|target| target.dyn_into::<web_sys::HtmlElement>().ok()),
        );
        nodes.dialog.set(Some(target));
    };
    let closed = move || {
        nodes.dialog.set(None);
        if let Some(opener) = opener.get_value() {
            let _ = opener.focus();
        }
    };

    view! {
        <section class="storage-panel nodes-panel" data-testid="nodes-panel" aria-labelledby="nodes-title">
            <h2 id="nodes-title">"Code nodes"</h2>
            <p class="hint">
                "Each node is a JavaScript body with typed inputs and outputs, run in the sandbox. Feed an input from another node's output, or give it a value; Run runs the graph in order."
            </p>
            <div class="nodes-toolbar">
                <label>"Graph "
                    <select data-testid="graph-pick" prop:value=move || nodes.name.get()
                        on:change=move |event| pick(event_target_value(&event))>
                        {move || {
                            let mut names = nodes.names.get();
                            let current = nodes.name.get();
                            if !names.contains(&current) {
                                names.push(current);
                            }
                            names.into_iter().map(|name| view! { <option value=name.clone()>{name.clone()}</option> }).collect_view()
                        }}
                    </select>
                </label>
                <input type="text" data-testid="graph-new-name" aria-label="New graph's name" placeholder="new graph name"
                    prop:value=move || new_name.get() on:input=move |event| new_name.set(event_target_value(&event))
                    on:keydown=move |event: leptos::ev::KeyboardEvent| if event.key() == "Enter" { create() } />
                <button type="button" class="secondary" data-testid="graph-new" on:click=move |_| create()>"New graph"</button>
                <span class="spacer"></span>
                <button type="button" data-testid="write-with-ai" on:click=move |event| open(event, Target::New)>"Write code with AI"</button>
                <button type="button" class="secondary" data-testid="node-add" on:click=move |_| empty_node()>"Add an empty node"</button>
                <button type="button" class="secondary" data-testid="nodes-undo" disabled=move || !can_undo() on:click=move |_| nodes.undo()>"Undo"</button>
                <Show when=running fallback=move || view! {
                    <button type="button" data-testid="graph-run" disabled=move || nodes.sheet.with(|sheet| sheet.nodes.is_empty())
                        on:click=move |_| nodes.run()>"Run graph"</button>
                }>
                    <button type="button" class="stop" data-testid="graph-stop" on:click=move |_| nodes.stop()>"Stop"</button>
                </Show>
            </div>
            <p class="nodes-status" role="status" aria-live="polite" data-testid="nodes-status">
                {move || nodes.status.get().map(|(ok, text)| view! { <span class=if ok { "ok" } else { "failure" }>{said(text)}</span> })}
            </p>
            {move || nodes.save_error.get().map(|error| crate::storage::error_alert("nodes-save-error", error))}
            {move || nodes.sheet.with(|sheet| sheet.nodes.is_empty()).then(|| view! {
                <p class="hint" data-testid="nodes-empty">"No nodes yet. Write one with AI, or add an empty node and write its code."</p>
            })}
            <div class="node-cards">
                <For
                    each=move || nodes.sheet.with(|sheet| sheet.nodes.clone())
                    key=|node| (node.id.clone(), serde_json::to_string(&node.node).unwrap_or_default())
                    children=move |node| view! { <NodeCard nodes=nodes node=node open=open /> }
                />
            </div>
            {move || nodes.dialog.get().map(|target| view! { <AuthorDialog nodes=nodes target=target closed=closed /> })}
        </section>
    }
}

/// One node: its handles, its result, and what can be done to it.
#[component]
fn NodeCard<O>(nodes: Nodes, node: GraphNode, open: O) -> impl IntoView
where
    O: Fn(leptos::ev::MouseEvent, Target) + Copy + Send + Sync + 'static,
{
    let GraphNode { id, node } = node;
    let editing = RwSignal::new(false);
    let id = StoredValue::new(id);
    let result = move || id.with_value(|id| nodes.results.with(|results| results.get(id).cloned()));
    let progress =
        move || id.with_value(|id| nodes.progress.with(|progress| progress.get(id).cloned()));
    let inputs = node
        .inputs
        .iter()
        .map(|slot| {
            let to = SlotRef {
                node: id.get_value(),
                slot: slot.name.clone(),
            };
            view! { <InputHandle nodes=nodes to=to ty=slot.ty.clone() /> }
        })
        .collect_view();
    let outputs = node
        .outputs
        .iter()
        .map(|slot| {
            let name = StoredValue::new(slot.name.clone());
            let fed = move || {
                id.with_value(|id| {
                    name.with_value(|name| {
                        nodes.sheet.with(|sheet| {
                            sheet
                                .fed_from(id, name)
                                .iter()
                                .map(|edge| edge.to.to_string())
                                .collect::<Vec<_>>()
                                .join(", ")
                        })
                    })
                })
            };
            let value = move || {
                name.with_value(|name| result().and_then(|result| result["outputs"].get(name).cloned()))
            };
            view! {
                <li class="slot output" data-testid="node-output" data-slot=slot.name.clone()>
                    <code>{slot.name.clone()}</code>" "<span class="slot-type">{slot.ty.to_string()}</span>
                    <span class="handle" aria-hidden="true">"●"</span>
                    {move || { let fed = fed(); (!fed.is_empty()).then(|| view! { <span class="feeds">"→ "{fed}</span> }) }}
                    {move || value().map(|value| view! { <pre class="output-value" data-testid="output-value">{value_text(&value)}</pre> })}
                </li>
            }
        })
        .collect_view();
    let title = node.title.clone();
    let code = node.code.clone();
    let lines = code.lines().count();
    let remove = move |_| {
        let gone = id.get_value();
        nodes.change(|sheet| sheet.remove(&gone));
        nodes.status.set(Some((
            true,
            format!("Removed `{gone}`. Undo brings it back."),
        )));
    };
    let edited = node.clone();
    view! {
        <article class="node-card" data-testid="node-card" data-node=id.get_value() aria-label=format!("Node {}", node.title)>
            <header>
                <h3>{title}</h3>
                <code class="node-id">{id.get_value()}</code>
            </header>
            <div class="node-slots">
                <div>
                    <h4>"Inputs"</h4>
                    {node.inputs.is_empty().then(|| view! { <p class="hint">"None."</p> })}
                    <ul class="slots">{inputs}</ul>
                </div>
                <div>
                    <h4>"Outputs"</h4>
                    <ul class="slots">{outputs}</ul>
                </div>
            </div>
            <details class="node-code">
                <summary>{format!("Code ({lines} line{})", if lines == 1 { "" } else { "s" })}</summary>
                <pre data-testid="node-code">{code}</pre>
            </details>
            {move || progress().map(progress_view)}
            {move || result().map(result_view)}
            <div class="actions">
                <button type="button" class="secondary" data-testid="node-ask-ai" on:click=move |event| open(event, Target::Edit(id.get_value()))>"Ask AI"</button>
                <button type="button" class="secondary" data-testid="node-edit" aria-expanded=move || editing.get().to_string()
                    on:click=move |_| editing.update(|editing| *editing = !*editing)>"Edit"</button>
                <button type="button" class="secondary" data-testid="node-remove" on:click=remove>"Remove"</button>
            </div>
            {move || editing.get().then(|| view! { <NodeEditor nodes=nodes id=id.get_value() node=edited.clone() editing=editing /> })}
        </article>
    }
}

/// An input handle: what feeds it (a choice of the other nodes' outputs)
/// or its value.
#[component]
fn InputHandle(nodes: Nodes, to: SlotRef, ty: kiln_types::node::SlotType) -> impl IntoView {
    let to = StoredValue::new(to);
    let ty = StoredValue::new(ty);
    let fed = move || {
        to.with_value(|to| {
            nodes.sheet.with(|sheet| {
                sheet
                    .feeding(&to.node, &to.slot)
                    .map(|edge| edge.from.to_string())
            })
        })
    };
    // Every other node's outputs, each with its type: the list says what each gives.
    let choices = move || {
        to.with_value(|to| {
            nodes.sheet.with(|sheet| {
                sheet
                    .nodes
                    .iter()
                    .filter(|node| node.id != to.node)
                    .flat_map(|node| {
                        node.node.outputs.iter().map(|slot| {
                            (
                                format!("{}.{}", node.id, slot.name),
                                format!("{} · {} ({})", node.node.title, slot.name, slot.ty),
                            )
                        })
                    })
                    .collect::<Vec<_>>()
            })
        })
    };
    let choose = move |event: leptos::ev::Event| {
        let chosen = event_target_value(&event);
        let to_slot = to.get_value();
        if chosen.is_empty() {
            nodes.change(|sheet| sheet.disconnect(&to_slot));
            nodes.refusal.set(None);
            return;
        }
        let Ok(from) = serde_json::from_value::<SlotRef>(Value::String(chosen)) else {
            return;
        };
        let connected = nodes.change(|sheet| sheet.connect(from.clone(), to_slot.clone()));
        match connected {
            Ok(()) => {
                nodes.refusal.set(None);
                nodes
                    .status
                    .set(Some((true, format!("Connected {from} → {to_slot}."))));
            }
            Err(reason) => {
                // The choice goes back to what feeds the input.
                if let Some(select) = event
                    .target()
                    .and_then(|target| target.dyn_into::<web_sys::HtmlSelectElement>().ok())
                {
                    select.set_value(&fed().unwrap_or_default());
                }
                nodes
                    .status
                    .set(Some((false, format!("Not connected: {reason}."))));
                nodes.refusal.set(Some((to_slot, reason)));
            }
        }
    };
    let refusal = move || {
        to.with_value(|to| {
            nodes.refusal.with(|refusal| {
                refusal
                    .as_ref()
                    .filter(|(slot, _)| slot == to)
                    .map(|(_, reason)| reason.clone())
            })
        })
    };
    let sample_error = RwSignal::new(None::<String>);
    let set_sample = move |event: leptos::ev::Event| {
        let text = event_target_value(&event);
        let to = to.get_value();
        if text.trim().is_empty() {
            sample_error.set(None);
            nodes.change(|sheet| sheet.set_sample(&to.node, &to.slot, None));
            return;
        }
        match ty.with_value(|ty| sample_from_text(&to.slot, ty, &text)) {
            Ok(value) => {
                sample_error.set(None);
                nodes.change(|sheet| sheet.set_sample(&to.node, &to.slot, Some(value)));
            }
            Err(error) => sample_error.set(Some(error)),
        }
    };
    let sample = move || {
        to.with_value(|to| {
            ty.with_value(|ty| {
                nodes.sheet.with(|sheet| {
                    sheet
                        .sample(&to.node, &to.slot)
                        .map(|value| sample_text(ty, value))
                })
            })
        })
        .unwrap_or_default()
    };
    let name = to.with_value(|to| to.slot.clone());
    let label = to.with_value(|to| format!("Feed {to} from"));
    let value_label = ty.with_value(|ty| format!("Value of {name} ({ty})"));
    let placeholder = ty.with_value(example);
    view! {
        <li class="slot input" data-testid="node-input" data-slot=name.clone()>
            <span class="handle" aria-hidden="true">"●"</span>
            <code>{name.clone()}</code>" "<span class="slot-type">{ty.with_value(ToString::to_string)}</span>
            <select data-testid="connect-from" aria-label=label prop:value=move || fed().unwrap_or_default() on:change=choose>
                <option value="">"a value you give"</option>
                {move || choices().into_iter().map(|(value, text)| view! { <option value=value>{text}</option> }).collect_view()}
            </select>
            {move || fed().is_none().then(|| view! {
                <input type="text" class="sample" data-testid="sample" aria-label=value_label.clone() placeholder=placeholder.clone()
                    prop:value=sample on:change=set_sample />
            })}
            {move || sample_error.get().map(|error| view! { <p class="failure" role="alert" data-testid="sample-error">{said(error)}</p> })}
            {move || refusal().map(|reason| view! { <p class="failure" role="alert" data-testid="connect-refusal">{said(reason)}</p> })}
        </li>
    }
}

/// How far a running node's body says it has come.
fn progress_view(progress: Progress) -> impl IntoView {
    let percent = progress.percent.round();
    let text = match progress.message {
        Some(message) => format!("{percent:.0}% · {message}"),
        None => format!("{percent:.0}%"),
    };
    view! {
        <div class="node-progress" data-testid="node-progress">
            <progress max="100" value=percent aria-label="Progress"></progress>
            <span>{text}</span>
        </div>
    }
}

/// A node's last report: status, duration, warnings, error, console.
fn result_view(result: Value) -> impl IntoView {
    let status = result["status"].as_str().unwrap_or("completed").to_owned();
    let duration = result["duration_ms"].as_f64().unwrap_or_default();
    let warnings: Vec<String> = result["warnings"]
        .as_array()
        .map(|warnings| {
            warnings
                .iter()
                .filter_map(|w| w.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let console: Vec<(String, String)> = result["console"]
        .as_array()
        .map(|lines| {
            lines
                .iter()
                .map(|line| {
                    (
                        line["level"].as_str().unwrap_or("log").to_owned(),
                        line["text"]
                            .as_str()
                            .map_or_else(|| line.to_string(), str::to_owned),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let error = result["error"].is_object().then(|| {
        result["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    });
    let line = format!("{status} · {duration:.0} ms");
    view! {
        <div class=format!("node-result node-{status}") data-testid="node-result" data-status=status.clone()>
            <p class="node-status" data-testid="node-status">{said(line)}</p>
            {error.map(|error| view! { <p class="failure" data-testid="node-error">{said(error)}</p> })}
            {(!warnings.is_empty()).then(|| view! {
                <ul class="warnings" data-testid="node-warnings">{warnings.into_iter().map(|w| view! { <li>{said(w)}</li> }).collect_view()}</ul>
            })}
            {(!console.is_empty()).then(|| view! {
                <ol class="console" data-testid="node-console" aria-label="Console">
                    {console.into_iter().map(|(level, text)| view! { <li class=format!("console-{level}")>{text}</li> }).collect_view()}
                </ol>
            })}
        </div>
    }
}

/// Editing a node by hand: its title, slots and code; Save is one change.
#[component]
fn NodeEditor(nodes: Nodes, id: String, node: CodeNode, editing: RwSignal<bool>) -> impl IntoView {
    let title = RwSignal::new(node.title.clone());
    let inputs = RwSignal::new(slots_text(
        node.inputs
            .iter()
            .map(|slot| (slot.name.as_str(), &slot.ty)),
    ));
    let outputs = RwSignal::new(slots_text(
        node.outputs
            .iter()
            .map(|slot| (slot.name.as_str(), &slot.ty)),
    ));
    let code = RwSignal::new(node.code.clone());
    let problem = RwSignal::new(None::<String>);
    let id = StoredValue::new(id);
    let save = move |_| {
        let read = || -> Result<CodeNode, String> {
            let mut slots = parse_inputs(&inputs.get_untracked())
                .map_err(|error| format!("Inputs: {error}"))?;
            // What the slots kept from before (descriptions, defaults) stays.
            for slot in &mut slots {
                if let Some(old) = node
                    .inputs
                    .iter()
                    .find(|old| old.name == slot.name && old.ty == slot.ty)
                {
                    slot.clone_from(old);
                }
            }
            let outputs = parse_outputs(&outputs.get_untracked())
                .map_err(|error| format!("Outputs: {error}"))?;
            if outputs.is_empty() {
                return Err("Outputs: give at least one, `name: type`.".into());
            }
            Ok(CodeNode {
                title: title.get_untracked().trim().to_owned(),
                code: code.get_untracked(),
                inputs: slots,
                outputs,
            })
        };
        match read() {
            Ok(edited) => {
                let id = id.get_value();
                let (id, dropped) = nodes.change(|sheet| {
                    let dropped = sheet.replace(&id, edited.clone());
                    (sheet.follow_title(&id), dropped)
                });
                let mut text = format!("Saved `{id}`.");
                for line in dropped {
                    text.push(' ');
                    text.push_str(&line);
                    text.push('.');
                }
                nodes.status.set(Some((true, text.clone())));
                editing.set(false);
                nodes.check(edited, text);
            }
            Err(error) => problem.set(Some(error)),
        }
    };
    view! {
        <div class="node-editor" data-testid="node-editor">
            <label>"Title"<input type="text" data-testid="edit-title" prop:value=move || title.get() on:input=move |e| title.set(event_target_value(&e)) /></label>
            <label><span>"Inputs, one " <code>"name: type"</code> " per line"</span>
                <textarea data-testid="edit-inputs" prop:value=move || inputs.get() on:input=move |e| inputs.set(event_target_value(&e))></textarea></label>
            <label><span>"Outputs, one " <code>"name: type"</code> " per line"</span>
                <textarea data-testid="edit-outputs" prop:value=move || outputs.get() on:input=move |e| outputs.set(event_target_value(&e))></textarea></label>
            <label>"Code: the body of an async function that reads its inputs by name and returns one key per output"
                <textarea class="code" data-testid="edit-code" spellcheck="false" prop:value=move || code.get() on:input=move |e| code.set(event_target_value(&e))></textarea></label>
            {move || problem.get().map(|problem| view! { <p class="failure" role="alert" data-testid="edit-problem">{said(problem)}</p> })}
            <div class="actions">
                <button type="button" data-testid="edit-save" on:click=save>"Save"</button>
                <button type="button" class="secondary" on:click=move |_| editing.set(false)>"Cancel"</button>
            </div>
        </div>
    }
}

/// The samples a node's inputs have: its own values, or what last arrived
/// on each from the node feeding it.
pub(crate) fn latest_values(nodes: Nodes, id: &str) -> Map<String, Value> {
    nodes.sheet.with_untracked(|sheet| {
        let Some(node) = sheet.node(id) else {
            return Map::new();
        };
        let results = nodes.results.get_untracked();
        node.node
            .inputs
            .iter()
            .filter_map(|slot| {
                let value = match sheet.feeding(id, &slot.name) {
                    Some(edge) => results.get(&edge.from.node)?["outputs"]
                        .get(&edge.from.slot)
                        .cloned(),
                    None => sheet.sample(id, &slot.name).cloned(),
                }?;
                Some((slot.name.clone(), value))
            })
            .collect()
    })
}

//! The chat's side panel: what the agent is doing. For one reply of the open
//! conversation (the latest, live, unless the person picked another) it
//! shows the execution tree — each action with the calls its program made,
//! each direct call, a plan's tasks and steps, the sub-agents under the call
//! that spawned them, a compaction, a question — and the details of the node
//! picked there (by default the newest action): its program, console, calls,
//! error and result, and what the model reads of it (the observation the
//! model was given back).
//!
//! Beside the conversation from 1,100 px wide; narrower, a drawer the chat's
//! Activity button opens. The tree is folded by [`tree`] from the reply's
//! [`TurnView`], pure, so it is tested natively.

use leptos::prelude::*;

use crate::agent_view::{ActionResult, ChildTurn, Step, TurnView, shown};
use kiln_types::permission::card_text;
use kiln_types::plan::NodeStatus;

/// One node of a reply's execution tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Node {
    /// Where it is in the turn: the call and child ids from the turn down,
    /// `/`-joined (a call a program made: its action's key, `#`, its place).
    /// What a click selects.
    pub key: String,
    pub label: String,
    /// `running`, `completed`, `failed`, `cancelled`, `refused`, `ok`,
    /// `error`, a plan node's status, or how a sub-agent ended.
    pub status: String,
    pub children: Vec<Node>,
}

/// The execution tree of `turn`.
pub(crate) fn tree(turn: &TurnView) -> Vec<Node> {
    nodes(turn, "")
}

fn nodes(turn: &TurnView, scope: &str) -> Vec<Node> {
    let mut number = 0;
    let mut out = Vec::new();
    for step in &turn.steps {
        match step {
            Step::Action {
                call_id,
                result,
                refused,
                ..
            } => {
                number += 1;
                let key = format!("{scope}/{call_id}");
                let (status, timing) = action_status(result.as_ref(), refused.as_deref());
                let mut children: Vec<Node> = result
                    .iter()
                    .flat_map(|result| result.calls.iter().enumerate())
                    .map(|(at, call)| Node {
                        key: format!("{key}#{at}"),
                        label: format!("{} · {} ms", call.tool, call.duration_ms),
                        status: call.outcome.clone(),
                        children: Vec::new(),
                    })
                    .collect();
                children.extend(child_nodes(turn, call_id, &key));
                out.push(Node {
                    label: format!("Action {number}{timing}"),
                    key,
                    status,
                    children,
                });
            }
            Step::Call {
                call_id,
                name,
                answer,
                ..
            } => {
                let key = format!("{scope}/{call_id}");
                out.push(Node {
                    label: name.clone(),
                    status: match answer {
                        None => "running",
                        Some((_, false)) => "ok",
                        Some((_, true)) => "error",
                    }
                    .to_owned(),
                    children: child_nodes(turn, call_id, &key),
                    key,
                });
            }
            Step::PlanRun {
                call_id,
                plan,
                answer,
            } => {
                let key = format!("{scope}/{call_id}");
                let tasks = plan
                    .tasks
                    .iter()
                    .map(|task| Node {
                        key: format!("{key}/task:{}", task.id),
                        label: task.title.clone(),
                        status: task.status.as_str().to_owned(),
                        children: task
                            .steps
                            .iter()
                            .map(|step| {
                                // As the chat's plan tree keys them: by the turn's scope.
                                let step_key = format!("{scope}/step:{}", step.id);
                                Node {
                                    label: format!(
                                        "{} · {}",
                                        step.id,
                                        shown(&step.instructions, 60)
                                    ),
                                    status: step.status.as_str().to_owned(),
                                    children: turn
                                        .step_child(&step.id)
                                        .map(|child| nodes(&child.view, &step_key))
                                        .unwrap_or_default(),
                                    key: step_key,
                                }
                            })
                            .collect(),
                    })
                    .collect();
                out.push(Node {
                    label: format!("Plan: {}", shown(&plan.title, 60)),
                    status: match answer {
                        None if !plan.finished => "running",
                        Some((_, true)) => "refused",
                        _ if plan
                            .tasks
                            .iter()
                            .any(|task| task.status == NodeStatus::Failed) =>
                        {
                            "failed"
                        }
                        _ => "completed",
                    }
                    .to_owned(),
                    children: tasks,
                    key,
                });
            }
            Step::Compaction { replaced, .. } => out.push(Node {
                key: format!("{scope}/compaction:{}", out.len()),
                label: format!("Summarized {replaced} earlier messages"),
                status: "completed".to_owned(),
                children: Vec::new(),
            }),
            Step::Question(_) => out.push(Node {
                key: format!("{scope}/question:{}", out.len()),
                label: "Asked you".to_owned(),
                status: "completed".to_owned(),
                children: Vec::new(),
            }),
            Step::Text(_) | Step::Planned { .. } | Step::Note(_) => {}
        }
    }
    out
}

/// The sub-agents the call `call_id` spawned, each with what it did.
fn child_nodes(turn: &TurnView, call_id: &str, scope: &str) -> Vec<Node> {
    turn.children_of(call_id)
        .iter()
        .map(|child| child_node(child, scope))
        .collect()
}

fn child_node(child: &ChildTurn, scope: &str) -> Node {
    let key = format!("{scope}/{}", child.id);
    Node {
        label: format!("{} {}", card_text(&child.label), child.id),
        status: child
            .view
            .end
            .as_ref()
            .map_or("running", |end| end.class)
            .to_owned(),
        children: nodes(&child.view, &key),
        key,
    }
}

/// An action's status word and its timing (` · 12 ms`).
fn action_status(result: Option<&ActionResult>, refused: Option<&str>) -> (String, String) {
    match (result, refused) {
        (Some(result), _) => (
            result.status.clone(),
            format!(" · {} ms", result.duration_ms),
        ),
        (None, Some(why)) if why.starts_with("stopped") => ("cancelled".to_owned(), String::new()),
        (None, Some(_)) => ("refused".to_owned(), String::new()),
        (None, None) => ("running".to_owned(), String::new()),
    }
}

/// What the details of a node show.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Picked {
    Action {
        number: usize,
        code: String,
        result: Option<ActionResult>,
        refused: Option<String>,
    },
    Call {
        name: String,
        args: String,
        answer: Option<(String, bool)>,
    },
}

/// The action or direct call at `key` in `turn` (a call a program made
/// picks its action).
pub(crate) fn find(turn: &TurnView, key: &str) -> Option<Picked> {
    let key = key.split('#').next().unwrap_or(key);
    find_in(turn, "", key)
}

fn find_in(turn: &TurnView, scope: &str, key: &str) -> Option<Picked> {
    let mut number = 0;
    for step in &turn.steps {
        match step {
            Step::Action {
                call_id,
                code,
                result,
                refused,
            } => {
                number += 1;
                let here = format!("{scope}/{call_id}");
                if here == key {
                    return Some(Picked::Action {
                        number,
                        code: code.clone(),
                        result: result.clone(),
                        refused: refused.clone(),
                    });
                }
            }
            Step::Call {
                call_id,
                name,
                args,
                answer,
            } if format!("{scope}/{call_id}") == key => {
                return Some(Picked::Call {
                    name: name.clone(),
                    args: args.clone(),
                    answer: answer.clone(),
                });
            }
            _ => {}
        }
    }
    // Below: a sub-agent's (its key starts with the spawning call's), or a plan step's.
    turn.children.iter().find_map(|child| {
        let spawned = format!("{scope}/{}/{}", child.parent_call_id, child.id);
        let scope = match child.step() {
            Some(step) => format!("{scope}/step:{step}"),
            None => spawned,
        };
        key.starts_with(&format!("{scope}/"))
            .then(|| find_in(&child.view, &scope, key))
            .flatten()
    })
}

/// The key of the newest action of `turn` (at its own level), the details
/// shown when nothing is picked.
pub(crate) fn newest_action(turn: &TurnView) -> Option<String> {
    turn.steps.iter().rev().find_map(|step| match step {
        Step::Action { call_id, .. } => Some(format!("/{call_id}")),
        _ => None,
    })
}

/// What the panel shows of one reply.
#[derive(Clone, PartialEq)]
struct Shown {
    /// How it ended (or `Running`) and its caps line.
    summary: String,
    nodes: Vec<Node>,
    /// The node whose details show.
    picked: String,
    details: Option<Picked>,
}

/// A reply's turn, live: the context its action blocks' "Details" read.
#[derive(Clone, Copy)]
pub(crate) struct ReplyTurn(pub Signal<TurnView>);

/// The panel's state, shared by the chat (which shows a reply in it) and
/// the panel. Copy.
#[derive(Clone, Copy)]
pub(crate) struct Activity {
    /// The reply shown: its turn, live.
    pub turn: RwSignal<Option<Signal<TurnView>>>,
    /// The node picked in its tree; `None`: the newest action.
    pub picked: RwSignal<Option<String>>,
    /// Narrower than 1,100 px: the drawer is open.
    pub open: RwSignal<bool>,
}

impl Activity {
    pub(crate) fn new() -> Self {
        Self {
            turn: RwSignal::new(None),
            picked: RwSignal::new(None),
            open: RwSignal::new(false),
        }
    }

    /// Shows `turn`, with `key` picked (`None`: its newest action).
    pub(crate) fn show(self, turn: Signal<TurnView>, key: Option<String>) {
        self.turn.set(Some(turn));
        self.picked.set(key);
    }
}

/// Whether the panel is a column beside the conversation (the window is
/// 1,100 px wide or more, as `kiln.css` says), not a drawer.
pub(crate) fn beside() -> bool {
    web_sys::window()
        .and_then(|window| window.match_media("(min-width: 1100px)").ok().flatten())
        .is_some_and(|query| query.matches())
}

/// A status's mark, beside its word for screen readers and colour.
fn mark(status: &str) -> &'static str {
    match status {
        "running" | "waiting" => "◐",
        "completed" | "ok" | "answered" | "finished" => "✓",
        "cancelled" | "aborted" => "■",
        "refused" => "⊘",
        _ => "✗",
    }
}

fn tree_view(nodes: Vec<Node>, picked: String, activity: Activity) -> AnyView {
    view! {
        <ul class="activity-tree" role="list">
            {nodes.into_iter().map(|node| {
                let current = node.key == picked || picked.starts_with(&format!("{}#", node.key));
                let key = node.key.clone();
                let class = format!("activity-node status-{}", node.status);
                let shown_mark = mark(&node.status);
                let children = (!node.children.is_empty())
                    .then(|| tree_view(node.children, picked.clone(), activity));
                view! {
                    <li class=class>
                        <button type="button" class="activity-pick" data-testid="activity-node"
                            data-key=node.key data-status=node.status.clone()
                            aria-current=current.then_some("true")
                            on:click=move |_| activity.picked.set(Some(key.clone()))>
                            <span class="mark" aria-hidden="true">{shown_mark}</span>
                            <span class="label">{node.label}</span>
                            <span class="status">{node.status.clone()}</span>
                        </button>
                        {children}
                    </li>
                }
            }).collect_view()}
        </ul>
    }
    .into_any()
}

/// The picked node's details.
fn details_view(picked: Picked) -> AnyView {
    match picked {
        Picked::Action {
            number,
            code,
            result,
            refused,
        } => {
            let reads = result.as_ref().map(|result| result.observation.clone());
            view! {
                <h3 data-testid="activity-details-title">{format!("Action {number}")}</h3>
                {crate::chat::action_body(code, refused, result, "activity")}
                <h4>"What the model reads"</h4>
                {match reads {
                    Some(reads) => view! {
                        <pre class="console" tabindex="0" aria-label="What the model reads" data-testid="activity-reads">{crate::chat::card_lines(&reads)}</pre>
                    }.into_any(),
                    None => view! { <p class="hint" data-testid="activity-reads">"Nothing yet: the model reads the program's result once it ends."</p> }.into_any(),
                }}
            }
            .into_any()
        }
        Picked::Call { name, args, answer } => view! {
            <h3 data-testid="activity-details-title">{format!("Call {}", shown(&name, 80))}</h3>
            <h4>"Arguments"</h4>
            <pre class="value" tabindex="0" aria-label="Arguments" data-testid="activity-args">{shown(&args, 4000)}</pre>
            <h4>"What the model reads"</h4>
            {match answer {
                Some((text, is_error)) => view! {
                    <pre class="console" class:error=is_error tabindex="0" aria-label="What the model reads" data-testid="activity-reads">{shown(&text, 8000)}</pre>
                }.into_any(),
                None => view! { <p class="hint" data-testid="activity-reads">"Nothing yet: the call has not answered."</p> }.into_any(),
            }}
        }
        .into_any(),
    }
}

/// The side panel. `hidden` when the chat is not the view on show.
#[component]
pub(crate) fn ActivityPanel(activity: Activity, hidden: Signal<bool>) -> impl IntoView {
    let close = NodeRef::<leptos::html::Button>::new();
    // The drawer takes the focus when it opens, and gives it back to the chat's
    // Activity button when it closes.
    Effect::new(move |was_open: Option<bool>| {
        let open = activity.open.get();
        if open {
            // Once the drawer is drawn (the app's class that shows it is set in the same change).
            request_animation_frame(move || {
                if let Some(close) = close.get_untracked() {
                    let _ = close.focus();
                }
            });
        } else if was_open == Some(true) {
            crate::focus_element("activity-toggle");
        }
        open
    });
    // What the panel draws of the reply shown, as a memo: a streaming reply's
    // text deltas change none of it, so they draw nothing again.
    let shown = Memo::new(move |_| {
        activity.turn.get().map(|turn| {
            turn.with(|turn| {
                let picked = activity
                    .picked
                    .get()
                    .or_else(|| newest_action(turn))
                    .unwrap_or_default();
                Shown {
                    summary: match &turn.end {
                        None => format!("Running · {}", turn.caps.line()),
                        Some(end) => format!("{} · {}", end.label, turn.caps.line()),
                    },
                    nodes: tree(turn),
                    details: find(turn, &picked),
                    picked,
                }
            })
        })
    });
    let body = move || {
        let Some(Shown {
            summary,
            nodes,
            picked,
            details,
        }) = shown.get()
        else {
            return view! {
                <p class="hint" data-testid="activity-empty">
                    "Nothing has run in this conversation yet. When the agent acts, each program, tool call and sub-agent shows here as it happens, with what the model reads of it."
                </p>
            }
            .into_any();
        };
        view! {
            <p class="activity-summary hint" data-testid="activity-summary">{summary}</p>
            {if nodes.is_empty() {
                view! { <p class="hint" data-testid="activity-empty">"This reply ran nothing: the model answered in words."</p> }.into_any()
            } else {
                view! {
                    <h3>"What ran"</h3>
                    {tree_view(nodes, picked, activity)}
                }.into_any()
            }}
            {details.map(|picked| view! {
                <section class="activity-details" data-testid="activity-details" aria-label="Details">
                    {details_view(picked)}
                </section>
            })}
        }
        .into_any()
    };
    view! {
        <aside class="activity" id="activity" data-testid="activity" aria-labelledby="activity-title" hidden=hidden>
            <div class="activity-head">
                <h2 id="activity-title">"Activity"</h2>
                <button type="button" class="icon activity-close" data-testid="activity-close" node_ref=close
                    aria-label="Close the activity panel" on:click=move |_| activity.open.set(false)>"\u{2715}"</button>
            </div>
            {body}
        </aside>
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent_view::CallRow;
    use kiln_types::agent::Guards;

    fn action(call_id: &str, calls: &[(&str, &str)], observation: &str) -> Step {
        Step::Action {
            call_id: call_id.to_owned(),
            code: format!("// {call_id}"),
            result: Some(ActionResult {
                status: "completed".to_owned(),
                value: Some("100".to_owned()),
                error: None,
                console: String::new(),
                calls: calls
                    .iter()
                    .map(|(tool, outcome)| CallRow {
                        tool: (*tool).to_owned(),
                        outcome: (*outcome).to_owned(),
                        duration_ms: 5,
                    })
                    .collect(),
                duration_ms: 12,
                observation: observation.to_owned(),
            }),
            refused: None,
        }
    }

    #[test]
    fn a_turn_folds_into_its_tree_with_calls_and_sub_agents_nested() {
        let mut child = TurnView::new(Guards::default());
        child.steps = vec![action("c1", &[("read", "ok")], "read it")];
        let mut turn = TurnView::new(Guards::default());
        turn.steps = vec![
            Step::Text("I will add them.".to_owned()),
            action("a1", &[("add", "ok"), ("add", "error")], "sum is 50"),
            Step::Call {
                call_id: "d1".to_owned(),
                name: "run_subtask".to_owned(),
                args: "{}".to_owned(),
                answer: None,
            },
            Step::Action {
                call_id: "a2".to_owned(),
                code: "await sleep(1)".to_owned(),
                result: None,
                refused: None,
            },
        ];
        turn.children.push(ChildTurn {
            id: "sub-1".to_owned(),
            label: "subtask".to_owned(),
            parent_call_id: "d1".to_owned(),
            view: child,
        });
        let nodes = tree(&turn);
        let shape: Vec<(&str, &str, &str, usize)> = nodes
            .iter()
            .map(|node| {
                (
                    node.key.as_str(),
                    node.label.as_str(),
                    node.status.as_str(),
                    node.children.len(),
                )
            })
            .collect();
        assert_eq!(
            shape,
            [
                ("/a1", "Action 1 · 12 ms", "completed", 2),
                ("/d1", "run_subtask", "running", 1),
                ("/a2", "Action 2", "running", 0),
            ]
        );
        assert_eq!(nodes[0].children[1].key, "/a1#1");
        assert_eq!(nodes[0].children[1].status, "error");
        let sub = &nodes[1].children[0];
        assert_eq!(
            (sub.key.as_str(), sub.status.as_str()),
            ("/d1/sub-1", "running")
        );
        assert_eq!(sub.children[0].key, "/d1/sub-1/c1");

        // Picking finds the action (a call a program made picks its action), a
        // direct call, and a sub-agent's action; the default is the newest action.
        let Some(Picked::Action { number, result, .. }) = find(&turn, "/a1#1") else {
            panic!("no action at /a1#1");
        };
        assert_eq!(number, 1);
        assert_eq!(result.unwrap().observation, "sum is 50");
        assert!(
            matches!(find(&turn, "/d1"), Some(Picked::Call { name, .. }) if name == "run_subtask")
        );
        let Some(Picked::Action { code, .. }) = find(&turn, "/d1/sub-1/c1") else {
            panic!("no sub-agent action");
        };
        assert_eq!(code, "// c1");
        assert_eq!(find(&turn, "/nope"), None);
        assert_eq!(newest_action(&turn).as_deref(), Some("/a2"));
    }
}

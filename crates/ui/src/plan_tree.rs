//! How a turn's plans and children show in the chat: the card of a plan
//! `create_plan` made (before anything runs), the live tree of a plan
//! `execute_plan` runs — each task with its status mark, each step opening
//! to its result or failure and to what its loop did — and the sub-agents
//! nested under the call that spawned them. A `<details>` keeps its open
//! state across the re-renders each event causes ([`Opened`]).

use std::collections::BTreeSet;

use crate::said::said;
use leptos::prelude::*;
use wasm_bindgen::JsCast as _;

use crate::agent_view::{ChildTurn, PlanView, TurnView, shown};
use kiln_types::permission::card_text;
use kiln_types::plan::NodeStatus;

/// Which blocks of a reply the person opened, by key.
#[derive(Clone, Copy)]
pub(crate) struct Opened(RwSignal<BTreeSet<String>>);

impl Opened {
    pub(crate) fn new() -> Self {
        Self(RwSignal::new(BTreeSet::new()))
    }

    pub(crate) fn is_open(self, key: &str) -> bool {
        self.0.with_untracked(|open| open.contains(key))
    }

    /// The handler of a `<details>`'s `toggle`: remembers its state.
    pub(crate) fn on_toggle(self, key: String) -> impl Fn(leptos::ev::Event) + 'static {
        move |event: leptos::ev::Event| {
            let open = event
                .target()
                .and_then(|target| target.dyn_into::<web_sys::Element>().ok())
                .is_some_and(|element| element.has_attribute("open"));
            self.0.update_untracked(|set| {
                if open {
                    set.insert(key.clone());
                } else {
                    set.remove(&key);
                }
            });
        }
    }
}

fn mark(status: NodeStatus) -> &'static str {
    match status {
        NodeStatus::Waiting => "○",
        NodeStatus::Running => "◐",
        NodeStatus::Completed => "✓",
        NodeStatus::Failed | NodeStatus::Aborted => "✗",
    }
}

/// A value shown in a `<pre>`: cut to `max` characters (saying how much
/// was left out), its line breaks kept and every line's acting characters
/// escaped.
fn block(text: &str, max: usize) -> String {
    let count = text.chars().count();
    let kept: String = text.chars().take(max).collect();
    let mut shown = kept
        .split('\n')
        .map(card_text)
        .collect::<Vec<_>>()
        .join("\n");
    if count > max {
        shown.push_str(&format!("… ({} more characters)", count - max));
    }
    shown
}

fn duration(ms: Option<u64>) -> String {
    match ms {
        Some(ms) if ms >= 1000 => format!(" · {:.1} s", ms as f64 / 1000.0),
        Some(ms) => format!(" · {ms} ms"),
        None => String::new(),
    }
}

/// The plan `create_plan` made, before anything runs.
pub(crate) fn plan_card(plan: PlanView, summary: String) -> AnyView {
    view! {
        <section class="plan-card" data-testid="plan-card" aria-label="The plan">
            <h4>"Plan: "{card_text(&plan.title)}</h4>
            <p class="hint">{card_text(&summary)}" · nothing has run yet"</p>
            <ol class="plan-tasks">
                {plan.tasks.into_iter().map(|task| {
                    let after = (!task.depends_on.is_empty()).then(|| format!(" · after {}", task.depends_on.join(", ")));
                    view! {
                        <li data-testid="plan-card-task">
                            <strong>{card_text(&task.title)}</strong>" "<code>{card_text(&task.id)}</code>
                            {after.map(|after| view! { <span class="meta">{card_text(&after)}</span> })}
                            <ul>
                                {task.steps.into_iter().map(|step| view! {
                                    <li><code>{card_text(&step.id)}</code>" "{shown(&step.instructions, 300)}</li>
                                }).collect_view()}
                            </ul>
                        </li>
                    }
                }).collect_view()}
            </ol>
        </section>
    }
    .into_any()
}

/// The tree of a plan `execute_plan` runs, live.
pub(crate) fn plan_tree(
    plan: PlanView,
    answer: Option<(String, bool)>,
    turn: &TurnView,
    scope: &str,
    opened: Opened,
) -> AnyView {
    let status = match &answer {
        None => "running".to_owned(),
        Some((_, true)) => "refused".to_owned(),
        Some((text, false)) => serde_json::from_str::<serde_json::Value>(text)
            .ok()
            .and_then(|value| {
                value
                    .get("status")
                    .and_then(|s| s.as_str())
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| "finished".to_owned()),
    };
    let refusal = answer
        .as_ref()
        .filter(|(_, is_error)| *is_error)
        .map(|(text, _)| shown(text, 600));
    let tasks = plan
        .tasks
        .iter()
        .map(|task| {
            let steps = task
                .steps
                .iter()
                .filter(|_| task.steps.iter().any(|step| step.status != NodeStatus::Waiting))
                .map(|step| {
                    let key = format!("{scope}/step:{}", step.id);
                    let child = turn.step_child(&step.id).cloned();
                    let result = step.result.clone();
                    let error = step.error.clone();
                    let summary = format!(
                        "{} {} · {}{}",
                        mark(step.status),
                        step.id,
                        shown(&step.instructions, 120),
                        duration(step.duration_ms)
                    );
                    view! {
                        <li class=format!("plan-step status-{}", step.status.as_str())>
                            <details data-testid="plan-step" data-status=step.status.as_str()
                                prop:open=opened.is_open(&key) on:toggle=opened.on_toggle(key.clone())>
                                <summary>{summary}</summary>
                                {error.map(|error| view! { <p class="error" data-testid="plan-step-error">{card_text(&error)}</p> })}
                                {result.map(|result| view! { <pre class="value" data-testid="plan-step-result">{block(&result, 2000)}</pre> })}
                                {child.map(|child| child_body(&child, &key, opened))}
                            </details>
                        </li>
                    }
                })
                .collect_view();
            let detail = match (task.status, &task.error) {
                (NodeStatus::Waiting, _) => " · waiting".to_owned(),
                (NodeStatus::Failed | NodeStatus::Aborted, Some(error)) => format!(" · {}", card_text(error)),
                _ => format!(
                    " · {}/{} steps",
                    task.steps.iter().filter(|step| step.status == NodeStatus::Completed).count(),
                    task.steps.len()
                ),
            };
            view! {
                <li class=format!("plan-task status-{}", task.status.as_str()) data-testid="plan-task" data-status=task.status.as_str()>
                    <span class="mark" aria-label=task.status.as_str()>{mark(task.status)}</span>" "
                    <strong>{card_text(&task.title)}</strong>
                    <span class="meta">{detail}{duration(task.duration_ms)}</span>
                    <ul>{steps}</ul>
                </li>
            }
        })
        .collect_view();
    view! {
        <section class=format!("plan-tree plan-{status}") data-testid="plan-tree" data-status=status.clone() aria-label="The plan's progress">
            <h4>"◆ Plan: "{card_text(&plan.title)}<span class="meta">" · "{plan.progress()}" · "{status.clone()}</span></h4>
            {refusal.map(|why| view! { <p class="refused" data-testid="plan-refused">{said(why)}</p> })}
            <ul class="plan-tasks">{tasks}</ul>
        </section>
    }
    .into_any()
}

/// The sub-agents a call spawned, each opening to what it did.
pub(crate) fn children_view(children: Vec<ChildTurn>, scope: &str, opened: Opened) -> AnyView {
    if children.is_empty() {
        return ().into_any();
    }
    children
        .into_iter()
        .map(|child| {
            let key = format!("{scope}/{}", child.id);
            let end = child.view.end.clone();
            let status = match &end {
                None => "running".to_owned(),
                Some(end) => end.class.to_owned(),
            };
            let summary = format!(
                "{} {} {} · {}",
                if end.is_none() { "◐" } else if matches!(status.as_str(), "answered" | "finished") { "✓" } else { "✗" },
                card_text(&child.label),
                child.id,
                end.as_ref().map_or_else(|| "running…".to_owned(), |end| end.label.clone())
            );
            view! {
                <details class=format!("child child-{status}") data-testid="chat-child" data-status=status
                    prop:open=opened.is_open(&key) on:toggle=opened.on_toggle(key.clone())>
                    <summary data-testid="chat-child-summary">{summary}</summary>
                    {child_body(&child, &key, opened)}
                </details>
            }
        })
        .collect_view()
        .into_any()
}

/// What a child's loop did: its steps (and theirs), and how it ended.
fn child_body(child: &ChildTurn, scope: &str, opened: Opened) -> AnyView {
    let end = child.view.end.clone();
    let value = end.as_ref().and_then(|end| end.value.clone());
    view! {
        <div class="child-body">
            {crate::chat::turn_steps(&child.view, scope, opened)}
            {value.map(|value| view! { <pre class="finish-value">{block(&value, 2000)}</pre> })}
            {end.map(|end| view! {
                <p class="chat-end"><span class=format!("stop stop-{}", end.class)>{end.label}</span>
                {end.detail.map(|detail| view! { <span class="detail">" ("{card_text(&detail)}")"</span> })}</p>
            })}
        </div>
    }
    .into_any()
}

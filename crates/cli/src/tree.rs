//! The execution tree a terminal shows while a plan runs (reference/000,
//! "Execution Tree (CLI)"): `◆ Plan (3/5 tasks)`, then each task with its
//! status mark (✓ done, ◐ running, ○ waiting, ✗ failed), duration, steps
//! done and cost, each step under its task and each step's tool calls and
//! sub-agents under the step. Folded from the turn's events; pure, so it is
//! tested without a terminal.

use std::collections::BTreeMap;

use kiln_types::agent::AgentEvent;
use kiln_types::permission::card_text;
use kiln_types::plan::{NodeStatus, Plan, TaskEvent};

/// One tool call or sub-agent under a step.
#[derive(Debug, Clone, PartialEq)]
struct Leaf {
    call_id: String,
    label: String,
    status: NodeStatus,
}

#[derive(Debug, Clone, PartialEq)]
struct StepNode {
    id: String,
    instructions: String,
    status: NodeStatus,
    duration_ms: Option<f64>,
    error: Option<String>,
    leaves: Vec<Leaf>,
    cost: f64,
    /// The step's child id, once its events came.
    child: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
struct TaskNode {
    id: String,
    title: String,
    status: NodeStatus,
    duration_ms: Option<f64>,
    error: Option<String>,
    steps: Vec<StepNode>,
}

/// A plan's tree.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct PlanTree {
    title: String,
    tasks: Vec<TaskNode>,
    /// Child id → the step it runs (or a step's sub-agent → that step).
    children: BTreeMap<String, String>,
    finished: bool,
}

fn mark(status: NodeStatus) -> &'static str {
    match status {
        NodeStatus::Waiting => "○",
        NodeStatus::Running => "◐",
        NodeStatus::Completed => "✓",
        NodeStatus::Failed | NodeStatus::Aborted => "✗",
    }
}

fn seconds(ms: f64) -> String {
    if ms < 1000.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{:.1}s", ms / 1000.0)
    }
}

/// The first line of `text`, cut at `max` characters (escaped with the rest
/// of its line by [`PlanTree::render`]).
fn one_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or_default().to_owned();
    if line.chars().count() > max {
        format!("{}…", line.chars().take(max).collect::<String>())
    } else {
        line
    }
}

impl PlanTree {
    /// A tree of `plan`, every node waiting.
    pub(crate) fn new(plan: &Plan) -> Self {
        Self {
            title: plan.title.clone(),
            tasks: plan
                .tasks
                .iter()
                .map(|task| TaskNode {
                    id: task.id.clone(),
                    title: task.title.clone(),
                    status: NodeStatus::Waiting,
                    duration_ms: None,
                    error: None,
                    steps: task
                        .steps
                        .iter()
                        .map(|step| StepNode {
                            id: step.id.clone(),
                            instructions: step.instructions.clone(),
                            status: NodeStatus::Waiting,
                            duration_ms: None,
                            error: None,
                            leaves: Vec::new(),
                            cost: 0.0,
                            child: None,
                        })
                        .collect(),
                })
                .collect(),
            children: BTreeMap::new(),
            finished: false,
        }
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.finished
    }

    fn step_mut(&mut self, id: &str) -> Option<&mut StepNode> {
        self.tasks
            .iter_mut()
            .flat_map(|task| task.steps.iter_mut())
            .find(|step| step.id == id)
    }

    /// Folds one event of the turn in; answers whether the tree changed.
    pub(crate) fn apply(&mut self, event: &AgentEvent) -> bool {
        match event {
            AgentEvent::TaskUpdate {
                event,
                task_id,
                step_id,
                error,
                duration_ms,
                ..
            } => {
                if *event == TaskEvent::PlanFinished {
                    self.finished = true;
                    return true;
                }
                let status = match event {
                    TaskEvent::TaskStarted | TaskEvent::StepStarted => NodeStatus::Running,
                    TaskEvent::TaskCompleted | TaskEvent::StepCompleted => NodeStatus::Completed,
                    TaskEvent::TaskFailed | TaskEvent::StepFailed => NodeStatus::Failed,
                    _ => return false,
                };
                match step_id {
                    Some(step_id) => {
                        let Some(step) = self.step_mut(step_id) else {
                            return false;
                        };
                        step.status = status;
                        step.error.clone_from(error);
                        if duration_ms.is_some() {
                            step.duration_ms = *duration_ms;
                        }
                    }
                    None => {
                        let Some(task) = self.tasks.iter_mut().find(|task| &task.id == task_id)
                        else {
                            return false;
                        };
                        task.status = status;
                        task.error.clone_from(error);
                        if duration_ms.is_some() {
                            task.duration_ms = *duration_ms;
                        }
                    }
                }
                true
            }
            AgentEvent::Child {
                child,
                parent,
                label,
                event,
                ..
            } => {
                // A step's own events, or those of a sub-agent it spawned.
                let step = if let Some(step) = label.strip_prefix("step ") {
                    self.children.insert(child.clone(), step.to_owned());
                    step.to_owned()
                } else if let Some(step) = parent.as_ref().and_then(|p| self.children.get(p)) {
                    let step = step.clone();
                    self.children.insert(child.clone(), step.clone());
                    if let Some(node) = self.step_mut(&step)
                        && !node.leaves.iter().any(|leaf| &leaf.call_id == child)
                    {
                        node.leaves.push(Leaf {
                            call_id: child.clone(),
                            label: format!("{label} {child}"),
                            status: NodeStatus::Running,
                        });
                    }
                    if let AgentEvent::Done { result } = event.as_ref()
                        && let Some(node) = self.step_mut(&step)
                        && let Some(leaf) =
                            node.leaves.iter_mut().find(|leaf| &leaf.call_id == child)
                    {
                        leaf.status = if result.stop.is_success() {
                            NodeStatus::Completed
                        } else {
                            NodeStatus::Failed
                        };
                    }
                    return true;
                } else {
                    return false;
                };
                let Some(node) = self.step_mut(&step) else {
                    return false;
                };
                node.child = Some(child.clone());
                match event.as_ref() {
                    AgentEvent::ToolCallUpdate { call_id, name, .. } => {
                        node.leaves.push(Leaf {
                            call_id: call_id.clone(),
                            label: name.clone(),
                            status: NodeStatus::Running,
                        });
                        true
                    }
                    AgentEvent::ToolResultUpdate {
                        call_id, is_error, ..
                    } => {
                        if let Some(leaf) = node
                            .leaves
                            .iter_mut()
                            .rev()
                            .find(|leaf| &leaf.call_id == call_id)
                        {
                            leaf.status = if *is_error {
                                NodeStatus::Failed
                            } else {
                                NodeStatus::Completed
                            };
                        }
                        true
                    }
                    AgentEvent::LlmCall { cost_usd, .. } => {
                        node.cost += cost_usd.unwrap_or(0.0);
                        false
                    }
                    _ => false,
                }
            }
            _ => false,
        }
    }

    /// The tree as lines, at most `width` characters each. Titles,
    /// instructions, errors, ids and tool names all come from the model or a
    /// tool: every line is escaped whole with [`card_text`], so nothing in it
    /// acts on the terminal or breaks the line (the live tree is redrawn by
    /// counting its lines).
    pub(crate) fn render(&self, width: usize) -> Vec<String> {
        let done = self
            .tasks
            .iter()
            .filter(|task| task.status == NodeStatus::Completed)
            .count();
        let mut lines = vec![format!(
            "◆ Plan  ({done}/{} tasks)  {}",
            self.tasks.len(),
            one_line(&self.title, 60)
        )];
        for (at, task) in self.tasks.iter().enumerate() {
            let last_task = at + 1 == self.tasks.len();
            let (branch, rail) = if last_task {
                ("└─", "   ")
            } else {
                ("├─", "│  ")
            };
            let steps_done = task
                .steps
                .iter()
                .filter(|step| step.status == NodeStatus::Completed)
                .count();
            let cost: f64 = task.steps.iter().map(|step| step.cost).sum();
            let mut detail = match task.status {
                NodeStatus::Waiting => "waiting".to_owned(),
                NodeStatus::Failed | NodeStatus::Aborted => {
                    one_line(task.error.as_deref().unwrap_or("failed"), 60)
                }
                _ => format!("({steps_done}/{} steps)", task.steps.len()),
            };
            if let Some(ms) = task.duration_ms {
                detail = format!("{}  {detail}", seconds(ms));
            }
            if cost > 0.0 {
                detail.push_str(&format!("  ${cost:.4}"));
            }
            lines.push(format!(
                "{branch} {} Task {}: {}  {detail}",
                mark(task.status),
                task.id,
                one_line(&task.title, 40)
            ));
            // A task none of whose steps ran (waiting, or failed by a
            // dependency) is its own line.
            if task
                .steps
                .iter()
                .all(|step| step.status == NodeStatus::Waiting)
            {
                continue;
            }
            for (at, step) in task.steps.iter().enumerate() {
                let last_step = at + 1 == task.steps.len();
                let (branch, inner) = if last_step {
                    ("└─", "   ")
                } else {
                    ("├─", "│  ")
                };
                let mut detail = String::new();
                if let Some(ms) = step.duration_ms {
                    detail.push_str(&format!("  {}", seconds(ms)));
                }
                if let (NodeStatus::Failed, Some(error)) = (step.status, &step.error) {
                    detail.push_str(&format!("  {}", one_line(error, 60)));
                }
                lines.push(format!(
                    "{rail}{branch} {} {}  {}{detail}",
                    mark(step.status),
                    step.id,
                    one_line(&step.instructions, 40)
                ));
                for (at, leaf) in step.leaves.iter().enumerate() {
                    let branch = if at + 1 == step.leaves.len() {
                        "└─"
                    } else {
                        "├─"
                    };
                    lines.push(format!(
                        "{rail}{inner}{branch} {} {}",
                        mark(leaf.status),
                        leaf.label
                    ));
                }
            }
        }
        lines
            .into_iter()
            .map(|line| {
                let line = card_text(&line);
                if line.chars().count() > width {
                    format!(
                        "{}…",
                        line.chars()
                            .take(width.saturating_sub(1))
                            .collect::<String>()
                    )
                } else {
                    line
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use kiln_types::agent::{AgentResult, AgentStop, StopReason};
    use serde_json::json;

    use super::*;

    fn plan() -> Plan {
        serde_json::from_value(json!({"title": "Report", "tasks": [
            {"id": "search", "title": "Search sources", "steps": [{"id": "s1", "instructions": "Search the web"}]},
            {"id": "analyze", "title": "Analyze findings", "steps": [{"id": "s2", "instructions": "Analyze"}]},
            {"id": "write", "title": "Write report", "depends_on": ["search", "analyze"], "steps": [{"id": "s3", "instructions": "Write"}]}
        ]}))
        .unwrap()
    }

    fn update(event: TaskEvent, task: &str, step: Option<&str>, ms: Option<f64>) -> AgentEvent {
        AgentEvent::TaskUpdate {
            event,
            task_id: task.into(),
            step_id: step.map(str::to_owned),
            title: None,
            error: None,
            duration_ms: ms,
            plan: None,
        }
    }

    fn child(step: &str, event: AgentEvent) -> AgentEvent {
        AgentEvent::Child {
            child: format!("c-{step}"),
            parent: None,
            parent_call_id: "call_1".into(),
            depth: 1,
            label: format!("step {step}"),
            event: Box::new(event),
        }
    }

    #[test]
    fn the_tree_shows_tasks_steps_and_calls_with_their_marks() {
        let mut tree = PlanTree::new(&plan());
        for event in [
            update(TaskEvent::TaskStarted, "search", None, None),
            update(TaskEvent::StepStarted, "search", Some("s1"), None),
            child(
                "s1",
                AgentEvent::ToolCallUpdate {
                    call_id: "k1".into(),
                    name: "web_search".into(),
                    args: json!({}),
                    code: None,
                },
            ),
            child(
                "s1",
                AgentEvent::ToolResultUpdate {
                    call_id: "k1".into(),
                    name: "web_search".into(),
                    content: String::new(),
                    is_error: false,
                    run: None,
                },
            ),
            child(
                "s1",
                AgentEvent::LlmCall {
                    provider: "x".into(),
                    model: "m".into(),
                    input_tokens: 1,
                    output_tokens: 1,
                    cost_usd: Some(0.0012),
                    duration_ms: 1.0,
                },
            ),
            update(TaskEvent::StepCompleted, "search", Some("s1"), Some(3200.0)),
            update(TaskEvent::TaskCompleted, "search", None, Some(3200.0)),
            update(TaskEvent::TaskStarted, "analyze", None, None),
            update(TaskEvent::StepStarted, "analyze", Some("s2"), None),
            child(
                "s2",
                AgentEvent::ToolCallUpdate {
                    call_id: "k2".into(),
                    name: "execute_code".into(),
                    args: json!({}),
                    code: Some("1".into()),
                },
            ),
        ] {
            tree.apply(&event);
        }
        let lines = tree.render(100);
        assert_eq!(
            lines,
            [
                "◆ Plan  (1/3 tasks)  Report",
                "├─ ✓ Task search: Search sources  3.2s  (1/1 steps)  $0.0012",
                "│  └─ ✓ s1  Search the web  3.2s",
                "│     └─ ✓ web_search",
                "├─ ◐ Task analyze: Analyze findings  (0/1 steps)",
                "│  └─ ◐ s2  Analyze",
                "│     └─ ◐ execute_code",
                "└─ ○ Task write: Write report  waiting",
            ]
        );
    }

    #[test]
    fn a_failed_task_says_why_and_a_steps_sub_agent_nests_under_it() {
        let mut tree = PlanTree::new(&plan());
        tree.apply(&update(TaskEvent::TaskStarted, "search", None, None));
        tree.apply(&update(TaskEvent::StepStarted, "search", Some("s1"), None));
        tree.apply(&child(
            "s1",
            AgentEvent::LogUpdate {
                message: "hi".into(),
            },
        ));
        let grandchild = |event| AgentEvent::Child {
            child: "c9".into(),
            parent: Some("c-s1".into()),
            parent_call_id: "k1".into(),
            depth: 2,
            label: "subtask".into(),
            event: Box::new(event),
        };
        tree.apply(&grandchild(AgentEvent::LogUpdate {
            message: "working".into(),
        }));
        let result = AgentResult {
            text: String::new(),
            value: json!(1),
            finished: false,
            stop: AgentStop {
                reason: StopReason::Answered,
                code: None,
                message: None,
            },
            usage: kiln_types::chat::Usage::default(),
            spend: 0.0,
            job_id: None,
            turns: 1,
            actions: 0,
            guards: kiln_types::agent::Guards::default(),
        };
        tree.apply(&grandchild(AgentEvent::Done { result }));
        tree.apply(&AgentEvent::TaskUpdate {
            event: TaskEvent::TaskFailed,
            task_id: "write".into(),
            step_id: None,
            title: None,
            error: Some("dependency `search` failed".into()),
            duration_ms: None,
            plan: None,
        });
        let lines = tree.render(100);
        assert!(
            lines.contains(&"│     └─ ✓ subtask c9".to_owned()),
            "{lines:#?}"
        );
        assert_eq!(
            lines.last().unwrap(),
            "└─ ✗ Task write: Write report  dependency `search` failed"
        );
    }

    /// Issue 35 #5: what the model named and wrote — the plan's title, a
    /// task's id, a step's instructions, a tool's name, an error — is shown,
    /// never acted on, and never breaks a line of the tree.
    #[test]
    fn the_tree_shows_what_a_terminal_would_act_on_escaped() {
        let hostile = "\u{1b}]0;pwned\u{7}\u{1b}[2K\u{9b}31m\u{202e}\nnext";
        let plan: Plan = serde_json::from_value(json!({"title": hostile, "tasks": [
            {"id": format!("t{hostile}"), "title": hostile, "steps": [{"id": "s1", "instructions": hostile}]}
        ]}))
        .unwrap();
        let task_id = plan.tasks[0].id.clone();
        let mut tree = PlanTree::new(&plan);
        tree.apply(&update(TaskEvent::TaskStarted, &task_id, None, None));
        tree.apply(&update(TaskEvent::StepStarted, &task_id, Some("s1"), None));
        tree.apply(&child(
            "s1",
            AgentEvent::ToolCallUpdate {
                call_id: "k1".into(),
                name: hostile.into(),
                args: json!({}),
                code: None,
            },
        ));
        tree.apply(&AgentEvent::TaskUpdate {
            event: TaskEvent::StepFailed,
            task_id: task_id.clone(),
            step_id: Some("s1".into()),
            title: None,
            error: Some(hostile.into()),
            duration_ms: None,
            plan: None,
        });
        let lines = tree.render(400);
        assert_eq!(lines.len(), 4, "one line each: {lines:#?}");
        for line in &lines {
            assert!(
                !line.chars().any(|c| c.is_control()
                    || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')),
                "{line:?}"
            );
        }
        assert!(
            lines[3].ends_with(
                "\\u{001B}]0;pwned\\u{0007}\\u{001B}[2K\\u{009B}31m\\u{202E}\\u{000A}next"
            ),
            "the tool's name, shown: {lines:#?}"
        );
    }
}

//! A plan: tasks forming a DAG, each task steps forming a DAG of their own
//! (reference/000, "Task Plan Structure"). Snake case on every wire: this is
//! what `create_plan` answers, what `execute_plan` takes as its arguments
//! and what a person edits by hand. Only `kiln-agent`'s plan builder says
//! whether a plan may run.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A plan: a title and its tasks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub title: String,
    pub tasks: Vec<Task>,
}

/// One task: steps, and the tasks it waits for (`[]`: independent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    pub id: String,
    pub title: String,
    #[serde(default)]
    pub depends_on: Vec<String>,
    pub steps: Vec<Step>,
}

/// One step: what a CodeAct child is told to do, the steps of its task it
/// waits for, the tools it may use (all of the belt's when absent) and the
/// JSON Schema its result is finished against (prose when absent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub id: String,
    pub instructions: String,
    #[serde(default)]
    pub depends_on: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// A JSON Schema: an object, or its text (models often send it as a
    /// string, as the reference's `outputSchema?: string` does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
}

impl Plan {
    /// How many steps the plan has in all.
    #[must_use]
    pub fn step_count(&self) -> usize {
        self.tasks.iter().map(|task| task.steps.len()).sum()
    }
}

/// The shared-memory key of a step's result.
#[must_use]
pub fn step_key(id: &str) -> String {
    format!("step:{id}")
}

/// The shared-memory key of a task's result.
#[must_use]
pub fn task_key(id: &str) -> String {
    format!("task:{id}")
}

/// One thing wrong with a plan, naming what it is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanIssue {
    /// `duplicate_id`, `missing_dependency`, `cycle`, `unknown_tool`,
    /// `empty`, `bad_schema`, `bad_id`, `too_large` (a count past its limit:
    /// nothing else is checked then).
    pub code: String,
    pub message: String,
    /// The task it is about, when one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// The step it is about, when one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
}

/// How a node of a plan (a task or a step) settled, or that it has not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeStatus {
    Waiting,
    Running,
    Completed,
    Failed,
    Aborted,
}

impl NodeStatus {
    #[must_use]
    pub fn is_settled(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Aborted)
    }

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Waiting => "waiting",
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Aborted => "aborted",
        }
    }
}

/// A phase of planning, as `planning_update` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanningPhase {
    Initialization,
    Generation,
    Validation,
    Complete,
}

impl PlanningPhase {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Initialization => "initialization",
            Self::Generation => "generation",
            Self::Validation => "validation",
            Self::Complete => "complete",
        }
    }
}

/// What happened to a task or one of its steps, as `task_update` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskEvent {
    /// The plan is about to run: every task is `task_created` next.
    PlanStarted,
    TaskCreated,
    TaskStarted,
    StepStarted,
    StepCompleted,
    StepFailed,
    TaskCompleted,
    TaskFailed,
    /// Every task settled.
    PlanFinished,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_plan_reads_and_writes_snake_case() {
        let text = json!({
            "title": "Report",
            "tasks": [{
                "id": "search",
                "title": "Search",
                "depends_on": [],
                "steps": [{"id": "search_web", "instructions": "Find it", "tools": ["web_search"],
                            "output_schema": {"type": "object"}}]
            }, {
                "id": "write", "title": "Write", "depends_on": ["search"],
                "steps": [{"id": "write_it", "instructions": "Write", "depends_on": []}]
            }]
        });
        let plan: Plan = serde_json::from_value(text.clone()).unwrap();
        assert_eq!(plan.tasks[1].depends_on, ["search"]);
        assert_eq!(plan.step_count(), 2);
        let back = serde_json::to_value(&plan).unwrap();
        assert_eq!(back["tasks"][0]["steps"][0]["tools"], json!(["web_search"]));
        assert!(
            serde_json::from_value::<Plan>(json!({"title": "x", "tasks": [], "dependsOn": []}))
                .is_err(),
            "camelCase keys are not the wire"
        );
    }
}

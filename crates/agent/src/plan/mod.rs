//! Plans (reference/000, "Parallel Task Execution", "Plan Validation"): the
//! one builder that says what a plan may be, the event-driven DAG scheduler,
//! `execute_plan` over it and the planner behind `create_plan`.
//!
//! [`build`] is the only authority: `create_plan`'s planner checks each
//! `add_task` with [`Builder::add_task`] and `execute_plan` checks its
//! arguments with [`build`], so a plan the planner made cannot be refused
//! when it runs. Every offender is one [`PlanIssue`]; nothing runs while
//! there is one. A plan is counted before it is checked ([`Size`]): past a
//! limit it is refused by its counts alone, so no check, message or cycle
//! search ever sees more than the limits allow.

pub(crate) mod execute;
pub(crate) mod planner;

use std::collections::{BTreeMap, BTreeSet};

use kiln_capabilities::args::InputSchema;
use kiln_run::dag::{cycles, named, topological};
use kiln_types::plan::{Plan, PlanIssue, Step, Task};
use serde_json::{Value, json};

/// The most tasks one plan may have.
pub(crate) const MAX_TASKS: usize = 100;
/// The most steps one plan may have, over all its tasks.
pub(crate) const MAX_STEPS: usize = 500;
/// The most dependencies one plan may name, its tasks' and its steps'
/// `depends_on` together (a name listed twice counts twice): room for
/// every task to name every task before it (100 × 99 / 2 = 4,950).
pub(crate) const MAX_DEPENDENCIES: usize = 5_000;
/// The longest id, in characters: a task's, a step's, or a name in a
/// `depends_on`.
pub(crate) const MAX_ID_CHARS: usize = 64;

fn issue(code: &str, message: String, task: Option<&str>, step: Option<&str>) -> PlanIssue {
    PlanIssue {
        code: code.into(),
        message,
        task: task.map(str::to_owned),
        step: step.map(str::to_owned),
    }
}

/// What a plan holds, counted before anything in it is checked.
#[derive(Debug, Clone, Copy, Default)]
struct Size {
    tasks: usize,
    steps: usize,
    dependencies: usize,
}

impl Size {
    fn of(tasks: &[Task]) -> Self {
        tasks.iter().fold(Self::default(), |size, task| {
            let dependencies = task.depends_on.len()
                + task
                    .steps
                    .iter()
                    .map(|step| step.depends_on.len())
                    .sum::<usize>();
            Self {
                tasks: size.tasks + 1,
                steps: size.steps + task.steps.len(),
                dependencies: size.dependencies + dependencies,
            }
        })
    }

    fn plus(self, other: Self) -> Self {
        Self {
            tasks: self.tasks + other.tasks,
            steps: self.steps + other.steps,
            dependencies: self.dependencies + other.dependencies,
        }
    }

    /// One `too_large` issue per limit passed, naming the count and the
    /// limit; `adding` is the task whose `add_task` the count includes.
    fn issues(self, adding: Option<&str>) -> Vec<PlanIssue> {
        let subject = match adding {
            Some(id) => format!("with task `{}` the plan would have", shown(id)),
            None => "the plan has".to_owned(),
        };
        let mut issues = Vec::new();
        if self.tasks > MAX_TASKS {
            issues.push(format!(
                "{subject} {} tasks; a plan may have at most {MAX_TASKS} tasks",
                self.tasks
            ));
        }
        if self.steps > MAX_STEPS {
            issues.push(format!(
                "{subject} {} steps in all; a plan may have at most {MAX_STEPS} steps in all",
                self.steps
            ));
        }
        if self.dependencies > MAX_DEPENDENCIES {
            issues.push(format!(
                "{subject} {} dependencies in all; a plan may name at most {MAX_DEPENDENCIES} (its tasks' and steps' depends_on together)",
                self.dependencies
            ));
        }
        let adding = adding.filter(|id| id.chars().count() <= MAX_ID_CHARS);
        issues
            .into_iter()
            .map(|message| issue("too_large", message, adding, None))
            .collect()
    }
}

/// An id as a message quotes it: whole when it is within [`MAX_ID_CHARS`],
/// else its first 20 characters and `…`.
fn shown(id: &str) -> String {
    if id.chars().count() > MAX_ID_CHARS {
        format!("{}…", id.chars().take(20).collect::<String>())
    } else {
        id.to_owned()
    }
}

/// Every id and dependency name of `tasks` longer than [`MAX_ID_CHARS`],
/// each as a `bad_id` issue, found before any other check can quote one
/// in a message about every step of its task. An issue's `task` and `step`
/// hold only ids within the limit, so nothing long is repeated.
fn long_ids(tasks: &[Task]) -> Vec<PlanIssue> {
    let long = |id: &str| id.chars().count() > MAX_ID_CHARS;
    let within = |id: &str| (!long(id)).then(|| id.to_owned());
    let mut issues = Vec::new();
    let mut push = |message: String, task: &str, step: Option<&str>| {
        issues.push(PlanIssue {
            code: "bad_id".into(),
            message,
            task: within(task),
            step: step.and_then(within),
        });
    };
    for task in tasks {
        if long(&task.id) {
            push(
                format!(
                    "task id `{}` is longer than {MAX_ID_CHARS} characters",
                    shown(&task.id)
                ),
                &task.id,
                None,
            );
        }
        for dep in task.depends_on.iter().filter(|dep| long(dep)) {
            push(
                format!(
                    "task `{}` depends on `{}`, which is longer than {MAX_ID_CHARS} characters",
                    shown(&task.id),
                    shown(dep)
                ),
                &task.id,
                None,
            );
        }
        for step in &task.steps {
            if long(&step.id) {
                push(
                    format!(
                        "step id `{}` is longer than {MAX_ID_CHARS} characters",
                        shown(&step.id)
                    ),
                    &task.id,
                    Some(&step.id),
                );
            }
            for dep in step.depends_on.iter().filter(|dep| long(dep)) {
                push(
                    format!(
                        "step `{}` depends on `{}`, which is longer than {MAX_ID_CHARS} characters",
                        shown(&step.id),
                        shown(dep)
                    ),
                    &task.id,
                    Some(&step.id),
                );
            }
        }
    }
    issues
}

/// What refuses a plan of `size` before any other check: a limit passed
/// (the counts alone), else an over-long id among `new` (the tasks not yet
/// checked). `adding`: as [`Size::issues`].
fn oversized(size: Size, new: &[Task], adding: Option<&str>) -> Vec<PlanIssue> {
    let issues = size.issues(adding);
    if issues.is_empty() {
        long_ids(new)
    } else {
        issues
    }
}

/// The tool-call error of a plan that may not run: `invalid_plan`, one
/// issue per offender.
#[must_use]
pub(crate) fn rejection(issues: &[PlanIssue]) -> Value {
    let lines: Vec<&str> = issues.iter().map(|issue| issue.message.as_str()).collect();
    json!({
        "error": {
            "code": "invalid_plan",
            "message": format!("the plan was not run: {}", lines.join("; ")),
            "issues": issues,
        }
    })
}

/// Checks an id's shape: it becomes part of a memory key (`step:<id>`).
fn id_issue(kind: &str, id: &str, task: Option<&str>) -> Option<PlanIssue> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    // Its length was checked before anything else (`long_ids`).
    let why = if id.is_empty() {
        Some(format!("a {kind} has an empty id"))
    } else if !id.chars().all(ok_char) {
        Some(format!(
            "{kind} id `{}` may use only letters, digits, `_`, `-` and `.`",
            id.escape_debug()
        ))
    } else {
        None
    };
    why.map(|message| {
        let step = (kind == "step").then_some(id);
        issue("bad_id", message, task, step)
    })
}

/// A step's output schema as the host holds it: an object (a string is
/// parsed), compiled to be sure it is a JSON Schema.
fn normalize_schema(task: &str, step: &mut Step) -> Option<PlanIssue> {
    let schema = step.output_schema.take()?;
    let schema = match schema {
        Value::String(text) if text.trim().is_empty() => return None,
        Value::String(text) => match serde_json::from_str::<Value>(&text) {
            Ok(value) => value,
            Err(error) => {
                return Some(issue(
                    "bad_schema",
                    format!(
                        "step `{}`'s output_schema is a string but not JSON: {error}",
                        step.id
                    ),
                    Some(task),
                    Some(&step.id),
                ));
            }
        },
        Value::Null => return None,
        other => other,
    };
    if let Err(why) = InputSchema::compile(&schema) {
        return Some(issue(
            "bad_schema",
            format!(
                "step `{}`'s output_schema is not a JSON Schema: {why}",
                step.id
            ),
            Some(task),
            Some(&step.id),
        ));
    }
    step.output_schema = Some(schema);
    None
}

/// Checks one task on its own (what `add_task` can check before the rest of
/// the plan exists): its id, its steps' ids (unique in the task and against
/// `taken`), their dependencies inside the task and their cycles, their
/// tools against `tools` (the belt's names; `None` checks none) and their
/// schemas. Answers the task with its steps ordered and schemas parsed.
fn check_task(
    mut task: Task,
    taken: &BTreeSet<String>,
    tools: Option<&BTreeSet<String>>,
    issues: &mut Vec<PlanIssue>,
) -> Task {
    let task_id = task.id.clone();
    issues.extend(id_issue("task", &task_id, Some(&task_id)));
    if task.title.trim().is_empty() {
        issues.push(issue(
            "empty",
            format!("task `{task_id}` has no title"),
            Some(&task_id),
            None,
        ));
    }
    if task.steps.is_empty() {
        issues.push(issue(
            "empty",
            format!("task `{task_id}` has no steps; give it at least one"),
            Some(&task_id),
            None,
        ));
    }
    let mut seen = BTreeSet::new();
    for step in &mut task.steps {
        issues.extend(id_issue("step", &step.id, Some(&task_id)));
        if step.id == task_id || taken.contains(&step.id) || !seen.insert(step.id.clone()) {
            issues.push(issue(
                "duplicate_id",
                format!(
                    "id `{}` is used more than once; step and task ids must be unique across the whole plan",
                    step.id
                ),
                Some(&task_id),
                Some(&step.id),
            ));
        }
        if step.instructions.trim().is_empty() {
            issues.push(issue(
                "empty",
                format!("step `{}` has no instructions", step.id),
                Some(&task_id),
                Some(&step.id),
            ));
        }
        issues.extend(normalize_schema(&task_id, step));
        if let (Some(wanted), Some(tools)) = (&step.tools, tools) {
            for name in wanted.iter().filter(|name| !tools.contains(*name)) {
                issues.push(issue(
                    "unknown_tool",
                    format!(
                        "step `{}` names tool `{name}`, which is not a tool of this job",
                        step.id
                    ),
                    Some(&task_id),
                    Some(&step.id),
                ));
            }
        }
    }
    for step in &task.steps {
        for dep in &step.depends_on {
            if !seen.contains(dep) {
                let message = if taken.contains(dep) {
                    format!(
                        "step `{}` depends on `{dep}`, which is not a step of task `{task_id}`; a step depends only on steps of its own task (make the task depend on the other task instead)",
                        step.id
                    )
                } else {
                    format!(
                        "step `{}` depends on `{dep}`, which is no step of task `{task_id}`",
                        step.id
                    )
                };
                issues.push(issue(
                    "missing_dependency",
                    message,
                    Some(&task_id),
                    Some(&step.id),
                ));
            }
        }
    }
    let ids: Vec<String> = task.steps.iter().map(|step| step.id.clone()).collect();
    let deps: BTreeMap<&str, Vec<&str>> = task
        .steps
        .iter()
        .map(|step| {
            (
                step.id.as_str(),
                step.depends_on.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    let (order, residue) = topological(&ids, &deps);
    for cycle in cycles(&ids, &deps, &residue) {
        issues.push(issue(
            "cycle",
            format!(
                "the steps of task `{task_id}` form a cycle: {}",
                named(&cycle)
            ),
            Some(&task_id),
            cycle.first().map(String::as_str),
        ));
    }
    if residue.is_empty() {
        let mut steps: Vec<Option<Step>> = task.steps.into_iter().map(Some).collect();
        task.steps = order.iter().filter_map(|at| steps[*at].take()).collect();
    }
    task
}

/// A plan being built a task at a time, as the planner's `add_task` calls
/// arrive; [`Builder::finish`] checks what needs the whole plan (the tasks'
/// dependencies and their cycles).
pub(crate) struct Builder {
    tools: Option<BTreeSet<String>>,
    tasks: Vec<Task>,
    taken: BTreeSet<String>,
    /// Tasks refused by `add_task`: a dependency on one is not a second
    /// offence (the refusal already said what is wrong with it).
    refused: BTreeSet<String>,
}

impl Builder {
    /// A builder checking step tools against `tools` (`None`: any name).
    #[must_use]
    pub(crate) fn new(tools: Option<&[String]>) -> Self {
        Self {
            tools: tools.map(|tools| tools.iter().cloned().collect()),
            tasks: Vec::new(),
            taken: BTreeSet::new(),
            refused: BTreeSet::new(),
        }
    }

    /// Adds `task` when it is sound on its own.
    ///
    /// # Errors
    ///
    /// One issue per offender; the task is not added.
    pub(crate) fn add_task(&mut self, task: Task) -> Result<(), Vec<PlanIssue>> {
        // Counted with the tasks before it, and refused by the counts alone
        // when past a limit.
        let new = std::slice::from_ref(&task);
        let mut issues = oversized(
            Size::of(&self.tasks).plus(Size::of(new)),
            new,
            Some(&task.id),
        );
        if !issues.is_empty() {
            self.refused.insert(task.id);
            return Err(issues);
        }
        if self.taken.contains(&task.id) {
            issues.push(issue(
                "duplicate_id",
                format!(
                    "id `{}` is used more than once; step and task ids must be unique across the whole plan",
                    task.id
                ),
                Some(&task.id),
                None,
            ));
        }
        let id = task.id.clone();
        let task = check_task(task, &self.taken, self.tools.as_ref(), &mut issues);
        if !issues.is_empty() {
            self.refused.insert(id);
            return Err(issues);
        }
        self.refused.remove(&id);
        self.taken.insert(task.id.clone());
        self.taken
            .extend(task.steps.iter().map(|step| step.id.clone()));
        self.tasks.push(task);
        Ok(())
    }

    /// The tasks added so far.
    #[must_use]
    pub(crate) fn tasks(&self) -> &[Task] {
        &self.tasks
    }

    /// The plan titled `title`, its tasks ordered so each comes after those
    /// it depends on.
    ///
    /// # Errors
    ///
    /// An empty plan or title, a dependency on a task that does not exist, a
    /// cycle (named by its tasks).
    pub(crate) fn finish(&self, title: &str) -> Result<Plan, Vec<PlanIssue>> {
        let mut issues = Vec::new();
        if title.trim().is_empty() {
            issues.push(issue("empty", "the plan has no title".into(), None, None));
        }
        if self.tasks.is_empty() && self.refused.is_empty() {
            issues.push(issue(
                "empty",
                "the plan has no tasks; add at least one".into(),
                None,
                None,
            ));
        }
        let ids: Vec<String> = self.tasks.iter().map(|task| task.id.clone()).collect();
        let known: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
        for task in &self.tasks {
            for dep in &task.depends_on {
                if !known.contains(dep.as_str()) && !self.refused.contains(dep) {
                    let message = if self.taken.contains(dep) {
                        format!(
                            "task `{}` depends on `{dep}`, which is a step, not a task; depend on the task that holds it",
                            task.id
                        )
                    } else {
                        format!(
                            "task `{}` depends on `{dep}`, which is no task of the plan",
                            task.id
                        )
                    };
                    issues.push(issue("missing_dependency", message, Some(&task.id), None));
                }
            }
        }
        let deps: BTreeMap<&str, Vec<&str>> = self
            .tasks
            .iter()
            .map(|task| {
                (
                    task.id.as_str(),
                    task.depends_on.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        let (order, residue) = topological(&ids, &deps);
        for cycle in cycles(&ids, &deps, &residue) {
            issues.push(issue(
                "cycle",
                format!("the plan's tasks form a cycle: {}", named(&cycle)),
                cycle.first().map(String::as_str),
                None,
            ));
        }
        if !issues.is_empty() {
            return Err(issues);
        }
        Ok(Plan {
            title: title.to_owned(),
            tasks: order.iter().map(|at| self.tasks[*at].clone()).collect(),
        })
    }
}

/// Checks a whole plan (the arguments of `execute_plan`, or a file) and
/// answers it ordered: every task after those it depends on, every step
/// after the steps it depends on.
///
/// # Errors
///
/// A limit passed, by the counts alone; else every issue of every task and
/// of the whole, each naming its offender.
pub(crate) fn build(plan: Plan, tools: Option<&[String]>) -> Result<Plan, Vec<PlanIssue>> {
    let mut issues = oversized(Size::of(&plan.tasks), &plan.tasks, None);
    if !issues.is_empty() {
        return Err(issues);
    }
    let mut builder = Builder::new(tools);
    for task in plan.tasks {
        if let Err(mut more) = builder.add_task(task) {
            issues.append(&mut more);
        }
    }
    match builder.finish(&plan.title) {
        Ok(plan) if issues.is_empty() => Ok(plan),
        Ok(_) => Err(issues),
        Err(mut more) => {
            issues.append(&mut more);
            Err(issues)
        }
    }
}

/// Reads `execute_plan`'s arguments (`{title, tasks}`) as a plan, naming
/// what does not fit.
///
/// # Errors
///
/// The serde error, as an `invalid_plan` issue.
pub(crate) fn from_args(args: &Value) -> Result<Plan, Vec<PlanIssue>> {
    serde_json::from_value::<Plan>(args.clone()).map_err(|error| {
        vec![issue(
            "malformed",
            format!("the plan does not have the plan's shape ({{title, tasks: [{{id, title, depends_on, steps: [{{id, instructions, depends_on, tools?, output_schema?}}]}}]}}): {error}"),
            None,
            None,
        )]
    })
}

#[cfg(test)]
mod tests;

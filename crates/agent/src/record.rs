//! A run's job in the workspace's history, written the same way whichever
//! entrance ran it: one title ([`kiln_store::history::title_of_program`]),
//! one recorded output (the `tool-result/v1` text a model reads), one status
//! rule ([`status_of`]).

use kiln_store::StoreError;
use kiln_store::history::{History, Job, JobStart, title_of_program};
use kiln_types::tool_result::ToolResult;

use crate::ladder::Workspace;
use crate::request::RunRequest;

/// A job's status for a run's result: `cancelled` when it was cancelled,
/// `error` for any other error, else `ok`.
#[must_use]
pub fn status_of(result: &ToolResult) -> &'static str {
    match (result.is_error, result.error_code.as_deref()) {
        (true, Some("cancelled")) => "cancelled",
        (true, _) => "error",
        (false, _) => "ok",
    }
}

/// What a job is, as the history shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOf {
    /// `program` or `agent`.
    pub kind: String,
    pub title: String,
    /// What it was given: the program's text, the person's message.
    pub input: String,
}

impl JobOf {
    /// A program run's job.
    #[must_use]
    pub fn program(request: &RunRequest) -> Self {
        Self {
            kind: "program".into(),
            title: title_of_program(&request.code),
            input: request.code.clone(),
        }
    }
}

/// A run's job, `running` until [`RunRecord::finish`].
pub struct RunRecord {
    history: History,
    job: Job,
}

impl RunRecord {
    /// Records the request's program as a running job.
    ///
    /// # Errors
    ///
    /// The store's, when the job could not be written.
    pub async fn start(workspace: &Workspace, request: &RunRequest) -> Result<Self, StoreError> {
        Self::start_job(workspace, &JobOf::program(request), &request.agent).await
    }

    /// Records `job` of `agent` as running.
    ///
    /// # Errors
    ///
    /// The store's, when the job could not be written.
    pub async fn start_job(
        workspace: &Workspace,
        job: &JobOf,
        agent: &str,
    ) -> Result<Self, StoreError> {
        let history = History::new(workspace.backend.clone());
        let job = history
            .start_job(JobStart {
                kind: job.kind.clone(),
                agent: agent.to_owned(),
                title: job.title.clone(),
                input: job.input.clone(),
                owner: workspace.custody.owner().to_owned(),
            })
            .await?;
        Ok(Self { history, job })
    }

    #[must_use]
    pub fn job_id(&self) -> &str {
        &self.job.id
    }

    /// Settles the job with the run's result.
    ///
    /// # Errors
    ///
    /// The store's; the run's answer stands either way.
    pub async fn finish(&self, result: &ToolResult) -> Result<Job, StoreError> {
        self.settle(status_of(result), &result.text()).await
    }

    /// Settles the job as `status` (`ok`, `error`, `cancelled`) with `output`.
    ///
    /// # Errors
    ///
    /// The store's; the answer stands either way.
    pub async fn settle(&self, status: &str, output: &str) -> Result<Job, StoreError> {
        self.history.finish_job(&self.job.id, status, output).await
    }
}

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
        let history = History::new(workspace.backend.clone());
        let job = history
            .start_job(JobStart {
                kind: "program".into(),
                agent: request.agent.clone(),
                title: title_of_program(&request.code),
                input: request.code.clone(),
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
        self.history
            .finish_job(&self.job.id, status_of(result), &result.text())
            .await
    }
}

//! Schedules: an agent's job that runs on a cron expression, and the record
//! of each firing. A schedule names its agent, a five-field cron expression
//! (minute, hour, day of month, month, day of week), the prompt the job is
//! given and optionally an IANA time zone the expression is read in (UTC
//! when none). Each occurrence is fired at most once, by whichever runner
//! claims it first; an occurrence that passed while nothing ran is recorded
//! as missed and never run late.

use serde::{Deserialize, Serialize};

use crate::profile::check_slug;

/// The longest prompt, in characters.
pub const MAX_PROMPT: usize = 8_000;

/// A schedule, by id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleRecord {
    /// `a-z`, `0-9`, `-`: chosen by whoever makes it (`morning-news`).
    pub id: String,
    /// The agent whose job it is, by slug.
    pub agent: String,
    /// Five fields: minute hour day-of-month month day-of-week (`0 7 * * *`).
    pub cron: String,
    /// What the job is asked.
    pub prompt: String,
    /// An IANA zone (`Europe/Paris`) the expression is read in; UTC when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    #[serde(default = "enabled")]
    pub enabled: bool,
    /// Occurrences at or before this are not due (its making, or the last
    /// occurrence any runner looked at).
    pub since_ms: u64,
    #[serde(default)]
    pub version: u64,
}

fn enabled() -> bool {
    true
}

/// What became of one occurrence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FiringStatus {
    /// A runner claimed it and its job is going.
    Running,
    Ok,
    /// The job failed (its code and message are in the record).
    Failed,
    /// It passed while nothing ran; it is not run late.
    Missed,
}

/// One occurrence of a schedule, as the store records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Firing {
    pub schedule: String,
    /// The occurrence, in ms since the epoch.
    pub due_ms: u64,
    pub status: FiringStatus,
    /// Who claimed it (a tab's runtime worker, a `kiln` process).
    #[serde(default)]
    pub runner: String,
    /// The job in the history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// The answer, or why it failed, first line.
    #[serde(default)]
    pub summary: String,
    #[serde(default)]
    pub version: u64,
}

impl ScheduleRecord {
    /// Holds the record to its rules, but for the cron expression and the
    /// time zone, which the scheduler reads (`kiln_agent::schedule`).
    ///
    /// # Errors
    ///
    /// A sentence naming the schedule and the field.
    pub fn check(&self) -> Result<(), String> {
        check_slug(&self.id).map_err(|why| format!("schedule id {why}"))?;
        let who = &self.id;
        check_slug(&self.agent).map_err(|why| format!("schedule `{who}`: agent {why}"))?;
        let prompt = self.prompt.trim();
        if prompt.is_empty() || prompt.chars().count() > MAX_PROMPT {
            return Err(format!(
                "schedule `{who}`: `prompt` must say what the job does, in 1 to {MAX_PROMPT} characters"
            ));
        }
        if self.cron.split_whitespace().count() != 5 {
            return Err(format!(
                "schedule `{who}`: `cron` has five fields, minute hour day-of-month month day-of-week (`0 7 * * *` is every day at 07:00), not `{}`",
                crate::words::clip(&self.cron, 80)
            ));
        }
        Ok(())
    }
}

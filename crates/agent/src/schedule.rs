//! Schedules (issue: "have one run every morning"): when each schedule's
//! occurrences fall, and the one pass that fires what is due. Kiln ships no
//! daemon: a tab of the workspace calls [`run_due`] every minute while it is
//! open, and natively `kiln schedules run-due` calls it once for cron, a
//! systemd timer or a Kubernetes CronJob to drive.
//!
//! - The expression is five cron fields read by `croner`, in the schedule's
//!   IANA time zone (`chrono-tz`) or UTC.
//! - Of the occurrences since the schedule was last looked at, the latest is
//!   run if it is at most [`GRACE_MS`] old; every other one is recorded
//!   `missed` (the latest [`MAX_MISSED`] of them) and never run late.
//! - Each occurrence is claimed through the store before it runs
//!   (`Config::claim_firing`), so two tabs, or a tab and the CLI, never run
//!   it twice.
//! - The job is the entrance's to run ([`Fire`]): an agent job as the
//!   schedule's agent, in the history like any other, its guards its own.

use std::str::FromStr as _;

use chrono::{DateTime, TimeZone as _, Utc};
use chrono_tz::Tz;
use croner::Cron;
use futures::future::LocalBoxFuture;
use kiln_store::StoreError;
use kiln_store::config::Config;
use kiln_types::schedule::{Firing, FiringStatus, ScheduleRecord};

/// How late an occurrence may still be run: a runner that comes to it
/// within this runs it; later, it is missed.
pub const GRACE_MS: u64 = 10 * 60 * 1000;
/// The most missed occurrences recorded in one pass (the latest ones).
pub const MAX_MISSED: usize = 10;
/// The most occurrences one pass walks through for a schedule.
const MAX_WALK: usize = 10_000;

/// A schedule's expression and zone, read.
pub struct Cadence {
    cron: Cron,
    zone: Option<Tz>,
}

impl Cadence {
    /// Reads `schedule`'s expression and zone.
    ///
    /// # Errors
    ///
    /// A sentence naming the schedule and what does not read.
    pub fn of(schedule: &ScheduleRecord) -> Result<Self, String> {
        schedule.check()?;
        let cron = Cron::from_str(schedule.cron.trim()).map_err(|error| {
            format!(
                "schedule `{}`: `cron` `{}` does not read: {error}",
                schedule.id, schedule.cron
            )
        })?;
        let zone = match &schedule.time_zone {
            None => None,
            Some(name) => Some(name.parse::<Tz>().map_err(|_| {
                format!(
                    "schedule `{}`: `{name}` is not an IANA time zone (`Europe/Paris`, `America/New_York`, `UTC`)",
                    schedule.id
                )
            })?),
        };
        Ok(Self { cron, zone })
    }

    /// The first occurrence after `after_ms`.
    #[must_use]
    pub fn next_after(&self, after_ms: u64) -> Option<u64> {
        self.occurrences(after_ms, u64::MAX, 1).into_iter().next()
    }

    /// Occurrences in `(after_ms, until_ms]`, oldest first, at most `limit`.
    #[must_use]
    pub fn occurrences(&self, after_ms: u64, until_ms: u64, limit: usize) -> Vec<u64> {
        let Some(start) = i64::try_from(after_ms)
            .ok()
            .and_then(|ms| Utc.timestamp_millis_opt(ms).single())
        else {
            return Vec::new();
        };
        match self.zone {
            Some(zone) => walk(&self.cron, start.with_timezone(&zone), until_ms, limit),
            None => walk(&self.cron, start, until_ms, limit),
        }
    }

    /// The expression in words (`At 07:00`).
    #[must_use]
    pub fn describe(&self) -> String {
        self.cron.describe().trim_end_matches('.').to_owned()
    }
}

fn walk<Z: chrono::TimeZone>(
    cron: &Cron,
    start: DateTime<Z>,
    until_ms: u64,
    limit: usize,
) -> Vec<u64>
where
    DateTime<Z>: croner::CronDateTime,
{
    let mut found = Vec::new();
    let mut at = start;
    while found.len() < limit {
        let Ok(next) = cron.find_next_occurrence(&at, false) else {
            break;
        };
        let ms = u64::try_from(next.timestamp_millis()).unwrap_or(0);
        if ms > until_ms {
            break;
        }
        found.push(ms);
        at = next;
    }
    found
}

/// What a fired job came to.
pub struct Fired {
    pub ok: bool,
    /// Its job in the history.
    pub job_id: Option<String>,
    /// The answer, or why it failed.
    pub summary: String,
}

/// How an entrance runs a schedule's job.
pub type Fire<'a> = &'a dyn Fn(ScheduleRecord) -> LocalBoxFuture<'a, Fired>;

/// What one pass did with one occurrence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pass {
    pub schedule: String,
    pub firing: Firing,
}

/// What one look at the schedules found: the occurrences recorded as
/// missed, those claimed to run now (each with its schedule), and the
/// schedules that could not be read.
#[derive(Debug, Default)]
pub struct Due {
    pub missed: Vec<Pass>,
    pub claimed: Vec<(ScheduleRecord, Firing)>,
    pub problems: Vec<String>,
}

/// Looks at every enabled schedule at `now_ms` as `runner`: records what
/// was missed and claims what is due, for the entrance to run and then
/// [`settle`]. A schedule that does not read is a problem in the answer,
/// and the others go on.
///
/// # Errors
///
/// The store's failure to list the schedules.
pub async fn claim_due(config: &Config, runner: &str, now_ms: u64) -> Result<Due, StoreError> {
    let mut due = Due::default();
    for mut schedule in config.schedules().await? {
        if !schedule.enabled {
            continue;
        }
        let cadence = match Cadence::of(&schedule) {
            Ok(cadence) => cadence,
            Err(why) => {
                due.problems.push(why);
                continue;
            }
        };
        let occurrences = cadence.occurrences(schedule.since_ms, now_ms, MAX_WALK);
        let Some((&latest, earlier)) = occurrences.split_last() else {
            continue;
        };
        let mut missed: Vec<u64> = earlier.iter().rev().take(MAX_MISSED).copied().collect();
        let run_latest = now_ms.saturating_sub(latest) <= GRACE_MS;
        if !run_latest {
            missed.insert(0, latest);
            missed.truncate(MAX_MISSED);
        }
        missed.reverse();
        let mut lost = false;
        for at in missed {
            match config
                .claim_firing(&mut schedule, at, runner, FiringStatus::Missed)
                .await
            {
                Ok(Some(firing)) => due.missed.push(Pass {
                    schedule: schedule.id.clone(),
                    firing,
                }),
                Ok(None) => {
                    lost = true;
                    break;
                }
                Err(error) => {
                    due.problems
                        .push(format!("schedule `{}`: {}", schedule.id, error.with_hint()));
                    lost = true;
                    break;
                }
            }
        }
        if lost || !run_latest {
            continue;
        }
        match config
            .claim_firing(&mut schedule, latest, runner, FiringStatus::Running)
            .await
        {
            Ok(Some(firing)) => due.claimed.push((schedule, firing)),
            Ok(None) => {}
            Err(error) => {
                due.problems
                    .push(format!("schedule `{}`: {}", schedule.id, error.with_hint()))
            }
        }
    }
    Ok(due)
}

/// Records how a claimed firing's job ended.
///
/// # Errors
///
/// The store's failure to write it (the job ran either way).
pub async fn settle(config: &Config, claimed: Firing, fired: Fired) -> Result<Firing, StoreError> {
    let firing = Firing {
        status: if fired.ok {
            FiringStatus::Ok
        } else {
            FiringStatus::Failed
        },
        job_id: fired.job_id,
        summary: kiln_types::words::clip(fired.summary.lines().next().unwrap_or(""), 300),
        ..claimed
    };
    config.settle_firing(&firing).await?;
    Ok(firing)
}

/// [`claim_due`], each claimed job run by `fire` one at a time, then
/// [`settle`]d: what a runner that can await its jobs does in one pass.
/// Answers every occurrence looked at (missed and run) and the problems.
///
/// # Errors
///
/// The store's failure to list the schedules.
pub async fn run_due(
    config: &Config,
    runner: &str,
    now_ms: u64,
    fire: Fire<'_>,
) -> Result<(Vec<Pass>, Vec<String>), StoreError> {
    let Due {
        mut missed,
        claimed,
        mut problems,
    } = claim_due(config, runner, now_ms).await?;
    for (schedule, firing) in claimed {
        let id = schedule.id.clone();
        let fired = fire(schedule).await;
        match settle(config, firing.clone(), fired).await {
            Ok(firing) => missed.push(Pass {
                schedule: id,
                firing,
            }),
            Err(error) => problems.push(format!(
                "schedule `{id}`: the firing ran but its end was not recorded: {}",
                error.with_hint()
            )),
        }
    }
    Ok((missed, problems))
}

/// `list_schedules`: the schedules of the agent a job runs as, with when
/// each fires next and how its last firing went (reference/003's
/// always-on tool).
pub(crate) struct ListSchedules {
    pub config: Option<Config>,
    pub agent: String,
}

impl ListSchedules {
    pub(crate) fn spec() -> kiln_capabilities::CapabilitySpec {
        crate::codeact::tools::builtin(
            kiln_types::agent::LIST_SCHEDULES,
            "Lists your own schedules (jobs that run on a cron expression): [{id, cron, when, time_zone, prompt, enabled, next_ms, last: {due_ms, status, summary}}].",
            serde_json::json!({"type": "object", "properties": {}, "additionalProperties": false}),
            kiln_capabilities::Category::Read,
        )
    }
}

impl kiln_capabilities::Implementation for ListSchedules {
    fn call(
        &self,
        _args: serde_json::Value,
        _context: kiln_capabilities::CallContext,
        _permit: kiln_capabilities::Permit,
    ) -> LocalBoxFuture<'static, kiln_types::tool_result::ToolReply> {
        let config = self.config.clone();
        let agent = self.agent.clone();
        Box::pin(async move {
            let Some(config) = config else {
                return Ok(serde_json::json!([]));
            };
            let schedules = config
                .schedules()
                .await
                .map_err(kiln_capabilities::storage::store_failure)?;
            let now = kiln_store::clock::epoch_ms();
            let mut listed = Vec::new();
            for schedule in schedules.into_iter().filter(|s| s.agent == agent) {
                let cadence = Cadence::of(&schedule);
                let last = config
                    .firings(&schedule.id)
                    .await
                    .map_err(kiln_capabilities::storage::store_failure)?
                    .into_iter()
                    .next();
                listed.push(serde_json::json!({
                    "id": schedule.id,
                    "cron": schedule.cron,
                    "when": cadence.as_ref().map_or_else(Clone::clone, Cadence::describe),
                    "time_zone": schedule.time_zone.as_deref().unwrap_or("UTC"),
                    "prompt": schedule.prompt,
                    "enabled": schedule.enabled,
                    "next_ms": cadence.ok().and_then(|c| c.next_after(now.max(schedule.since_ms))),
                    "last": last.map(|firing| serde_json::json!({
                        "due_ms": firing.due_ms,
                        "status": firing.status,
                        "summary": firing.summary,
                    })),
                }));
            }
            Ok(serde_json::Value::Array(listed))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;
    use kiln_store::native::MemoryBackend;
    use std::cell::RefCell;

    const MINUTE: u64 = 60_000;
    const HOUR: u64 = 60 * MINUTE;
    const DAY: u64 = 24 * HOUR;
    /// 2026-12-07 00:00 UTC, a Monday.
    const MONDAY: u64 = 1_796_601_600_000;

    fn morning(zone: Option<&str>) -> ScheduleRecord {
        ScheduleRecord {
            id: "morning".into(),
            agent: "ada".into(),
            cron: "0 7 * * *".into(),
            prompt: "Summarise the news.".into(),
            time_zone: zone.map(str::to_owned),
            enabled: true,
            since_ms: MONDAY,
            version: 0,
        }
    }

    #[test]
    fn occurrences_fall_where_the_expression_and_the_zone_say() {
        let utc = Cadence::of(&morning(None)).unwrap();
        assert_eq!(utc.next_after(MONDAY), Some(MONDAY + 7 * HOUR));
        // 07:00 in Paris in December is 06:00 UTC.
        let paris = Cadence::of(&morning(Some("Europe/Paris"))).unwrap();
        assert_eq!(paris.next_after(MONDAY), Some(MONDAY + 6 * HOUR));
        assert_eq!(
            utc.occurrences(MONDAY, MONDAY + 3 * DAY, 10),
            [
                MONDAY + 7 * HOUR,
                MONDAY + DAY + 7 * HOUR,
                MONDAY + 2 * DAY + 7 * HOUR
            ]
        );
        let bad_zone = Cadence::of(&morning(Some("Mars/Olympus"))).err().unwrap();
        assert!(
            bad_zone.contains("`Mars/Olympus` is not an IANA time zone"),
            "{bad_zone}"
        );
        let bad_cron = Cadence::of(&ScheduleRecord {
            cron: "61 7 * * *".into(),
            ..morning(None)
        })
        .err()
        .unwrap();
        assert!(bad_cron.contains("does not read"), "{bad_cron}");
    }

    /// Runs `run_due` at `now` as `runner`, counting the jobs it fires.
    fn pass(config: &Config, runner: &str, now: u64, fired: &RefCell<Vec<String>>) -> Vec<Pass> {
        let fire = |schedule: ScheduleRecord| -> LocalBoxFuture<'_, Fired> {
            fired.borrow_mut().push(format!("{runner}:{}", schedule.id));
            Box::pin(async {
                Fired {
                    ok: true,
                    job_id: Some("j-1".into()),
                    summary: "Here is the news.\nMore.".into(),
                }
            })
        };
        let (passes, problems) = block_on(run_due(config, runner, now, &fire)).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        passes
    }

    #[test]
    fn a_due_occurrence_runs_once_however_many_runners_look() {
        let config = Config::new(MemoryBackend::new());
        block_on(config.put_schedule(&morning(None))).unwrap();
        let fired = RefCell::new(Vec::new());
        // Before 07:00 nothing is due.
        assert!(pass(&config, "tab-a", MONDAY + 6 * HOUR, &fired).is_empty());
        // At 07:02 one tab runs it; a second tab and the CLI see the claim.
        let ran = pass(&config, "tab-a", MONDAY + 7 * HOUR + 2 * MINUTE, &fired);
        assert!(pass(&config, "tab-b", MONDAY + 7 * HOUR + 3 * MINUTE, &fired).is_empty());
        assert!(pass(&config, "cli", MONDAY + 7 * HOUR + 4 * MINUTE, &fired).is_empty());
        assert_eq!(*fired.borrow(), ["tab-a:morning"]);
        assert_eq!(ran.len(), 1);
        assert_eq!(ran[0].firing.status, FiringStatus::Ok);
        assert_eq!(ran[0].firing.summary, "Here is the news.");
        assert_eq!(ran[0].firing.job_id.as_deref(), Some("j-1"));
    }

    #[test]
    fn what_passed_while_nothing_ran_is_missed_and_never_run_late() {
        let config = Config::new(MemoryBackend::new());
        block_on(config.put_schedule(&morning(None))).unwrap();
        let fired = RefCell::new(Vec::new());
        // Nothing looked for three days; a tab opens on Thursday at 07:05.
        let passes = pass(
            &config,
            "tab-a",
            MONDAY + 3 * DAY + 7 * HOUR + 5 * MINUTE,
            &fired,
        );
        let statuses: Vec<(u64, FiringStatus)> = passes
            .iter()
            .map(|pass| ((pass.firing.due_ms - MONDAY) / DAY, pass.firing.status))
            .collect();
        assert_eq!(
            statuses,
            [
                (0, FiringStatus::Missed),
                (1, FiringStatus::Missed),
                (2, FiringStatus::Missed),
                (3, FiringStatus::Ok)
            ]
        );
        assert_eq!(fired.borrow().len(), 1, "only the one in its grace ran");
        // Opened at noon instead, Friday's 07:00 is past its grace: missed, not run.
        let later = pass(&config, "tab-a", MONDAY + 4 * DAY + 12 * HOUR, &fired);
        assert_eq!(later.len(), 1);
        assert_eq!(later[0].firing.status, FiringStatus::Missed);
        assert_eq!(fired.borrow().len(), 1);
        // Each occurrence is recorded once.
        let firings = block_on(config.firings("morning")).unwrap();
        assert_eq!(firings.len(), 5);
    }

    #[test]
    fn a_disabled_schedule_or_one_that_does_not_read_runs_nothing_and_the_rest_go_on() {
        let config = Config::new(MemoryBackend::new());
        block_on(async {
            config
                .put_schedule(&ScheduleRecord {
                    id: "off".into(),
                    enabled: false,
                    ..morning(None)
                })
                .await
                .unwrap();
            config
                .put_schedule(&ScheduleRecord {
                    id: "broken".into(),
                    time_zone: Some("Nowhere/Land".into()),
                    ..morning(None)
                })
                .await
                .unwrap();
            config.put_schedule(&morning(None)).await.unwrap();
        });
        let fire = |_: ScheduleRecord| -> LocalBoxFuture<'_, Fired> {
            Box::pin(async {
                Fired {
                    ok: false,
                    job_id: None,
                    summary: "max_turns: the job took 50 turns".into(),
                }
            })
        };
        let (passes, problems) =
            block_on(run_due(&config, "cli", MONDAY + 7 * HOUR, &fire)).unwrap();
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("`Nowhere/Land`"), "{problems:?}");
        assert_eq!(passes.len(), 1);
        assert_eq!(passes[0].schedule, "morning");
        assert_eq!(passes[0].firing.status, FiringStatus::Failed);
        assert!(passes[0].firing.summary.starts_with("max_turns"));
    }
}

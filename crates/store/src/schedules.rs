//! Schedules and their firings, in the configuration table: `schedule:<id>`
//! records, and one `firing:<id>:<due ms>` record per occurrence a runner
//! looked at. A firing is claimed by writing its record where none is
//! (compare-and-swap on absence), so of two runners — two tabs, a tab and a
//! `kiln schedules run-due` — exactly one runs each occurrence and the other
//! sees the claim. When to fire is the scheduler's (`kiln_agent::schedule`);
//! this module only keeps the records.

use kiln_types::schedule::{Firing, FiringStatus, ScheduleRecord};

use crate::backend::{Expect, Op, Scan, Table, stored_value};
use crate::config::{Config, read};
use crate::error::StoreError;

/// The firings kept per schedule; older ones are dropped as new ones come.
pub const KEPT_FIRINGS: usize = 50;

const FIRING: &str = "firing:";

/// A firing's key: the occurrence zero-padded, so keys sort by time.
fn firing_key(schedule: &str, due_ms: u64) -> String {
    format!("{FIRING}{schedule}:{due_ms:020}")
}

impl Config {
    /// Every schedule, by id.
    pub async fn schedules(&self) -> Result<Vec<ScheduleRecord>, StoreError> {
        self.list().await
    }

    /// Saves a schedule read at its version (0: a new one).
    pub async fn put_schedule(&self, schedule: &ScheduleRecord) -> Result<u64, StoreError> {
        self.put(schedule).await
    }

    /// Removes a schedule at `version`, and its firings.
    pub async fn remove_schedule(&self, id: &str, version: u64) -> Result<(), StoreError> {
        let mut ops = vec![Op::delete(
            Table::Config,
            format!("schedule:{id}"),
            Expect::Version(version),
        )];
        for firing in self.firings(id).await? {
            ops.push(Op::delete(
                Table::Config,
                firing_key(id, firing.due_ms),
                Expect::Any,
            ));
        }
        self.backend.commit(ops).await?;
        Ok(())
    }

    /// A schedule's firings, newest first.
    pub async fn firings(&self, schedule: &str) -> Result<Vec<Firing>, StoreError> {
        let prefix = format!("{FIRING}{schedule}:");
        let scan = Scan {
            prefix: &prefix,
            ..Scan::default()
        };
        let mut firings: Vec<Firing> = self
            .backend
            .scan(Table::Config, scan)
            .await?
            .into_iter()
            .map(|record| read(record, |firing: &mut Firing, v| firing.version = v))
            .collect::<Result<_, _>>()?;
        firings.sort_by_key(|firing| std::cmp::Reverse(firing.due_ms));
        Ok(firings)
    }

    /// Claims the occurrence `due_ms` of `schedule` for `runner` with
    /// `status` (`running` to run it, `missed` to record that it passed), and
    /// moves the schedule's `since_ms` past it, in one commit. `None` when
    /// another runner claimed it first (or moved the schedule on): then this
    /// one does nothing. On a claim, `schedule` is updated to what was
    /// written (its `since_ms` and version), for the next claim.
    pub async fn claim_firing(
        &self,
        schedule: &mut ScheduleRecord,
        due_ms: u64,
        runner: &str,
        status: FiringStatus,
    ) -> Result<Option<Firing>, StoreError> {
        let firing = Firing {
            schedule: schedule.id.clone(),
            due_ms,
            status,
            runner: runner.to_owned(),
            job_id: None,
            summary: String::new(),
            version: 0,
        };
        let moved = ScheduleRecord {
            since_ms: schedule.since_ms.max(due_ms),
            ..schedule.clone()
        };
        let mut ops = vec![
            Op::put(
                Table::Config,
                firing_key(&schedule.id, due_ms),
                stored_value(&firing),
                Expect::Absent,
            ),
            Op::put(
                Table::Config,
                format!("schedule:{}", schedule.id),
                stored_value(&moved),
                Expect::Version(schedule.version),
            ),
        ];
        // Old firings go as new ones come.
        let kept = self.firings(&schedule.id).await?;
        for old in kept.iter().skip(KEPT_FIRINGS.saturating_sub(1)) {
            ops.push(Op::delete(
                Table::Config,
                firing_key(&schedule.id, old.due_ms),
                Expect::Any,
            ));
        }
        match self.backend.commit(ops).await {
            Ok(changes) => {
                *schedule = ScheduleRecord {
                    version: changes
                        .get(1)
                        .and_then(|c| c.version)
                        .unwrap_or(schedule.version + 1),
                    ..moved
                };
                Ok(Some(Firing {
                    version: changes.first().and_then(|c| c.version).unwrap_or(1),
                    ..firing
                }))
            }
            Err(StoreError::Conflict { .. }) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Writes how a claimed firing ended (at the version it was claimed with).
    pub async fn settle_firing(&self, firing: &Firing) -> Result<(), StoreError> {
        self.backend
            .commit(vec![Op::put(
                Table::Config,
                firing_key(&firing.schedule, firing.due_ms),
                stored_value(firing),
                Expect::Version(firing.version),
            )])
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::native::MemoryBackend;
    use futures::executor::block_on;

    fn schedule() -> ScheduleRecord {
        ScheduleRecord {
            id: "morning".into(),
            agent: "ada".into(),
            cron: "0 7 * * *".into(),
            prompt: "Summarise the news.".into(),
            time_zone: None,
            enabled: true,
            since_ms: 0,
            version: 0,
        }
    }

    #[test]
    fn of_two_runners_one_claims_each_occurrence() {
        let config = Config::new(MemoryBackend::new());
        block_on(async {
            let mut morning = schedule();
            morning.version = config.put_schedule(&morning).await.unwrap();
            // Two runners read the same schedule, then both try to claim.
            let mut other = morning.clone();
            let first = config
                .claim_firing(&mut morning, 1_000, "tab-a", FiringStatus::Running)
                .await
                .unwrap();
            let second = config
                .claim_firing(&mut other, 1_000, "tab-b", FiringStatus::Running)
                .await
                .unwrap();
            let mut first = first.expect("the first claims");
            assert!(second.is_none(), "the second sees the claim");
            let stored = config.schedules().await.unwrap().remove(0);
            assert_eq!(stored.since_ms, 1_000, "the schedule moved past it");
            assert_eq!(stored, morning, "the claimer holds what was written");
            first.status = FiringStatus::Ok;
            first.summary = "Done.".into();
            config.settle_firing(&first).await.unwrap();
            let firings = config.firings("morning").await.unwrap();
            assert_eq!(firings.len(), 1);
            assert_eq!(firings[0].status, FiringStatus::Ok);
            assert_eq!(firings[0].runner, "tab-a");
        });
    }

    #[test]
    fn firings_are_kept_newest_first_up_to_the_bound_and_go_with_their_schedule() {
        let config = Config::new(MemoryBackend::new());
        block_on(async {
            let mut morning = schedule();
            morning.version = config.put_schedule(&morning).await.unwrap();
            for n in 1..=(KEPT_FIRINGS as u64 + 5) {
                config
                    .claim_firing(&mut morning, n * 10, "cli", FiringStatus::Missed)
                    .await
                    .unwrap()
                    .unwrap();
            }
            let firings = config.firings("morning").await.unwrap();
            assert_eq!(firings.len(), KEPT_FIRINGS);
            assert_eq!(firings[0].due_ms, (KEPT_FIRINGS as u64 + 5) * 10);
            let morning = config.schedules().await.unwrap().remove(0);
            config
                .remove_schedule("morning", morning.version)
                .await
                .unwrap();
            assert!(config.firings("morning").await.unwrap().is_empty());
            assert!(config.schedules().await.unwrap().is_empty());
        });
    }
}

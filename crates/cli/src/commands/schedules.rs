//! `kiln schedules`: an agent's jobs on a cron expression, kept in the
//! on-disk store (`--store DIR`): list, create, remove, and `run-due`,
//! which runs what is due once and exits, so cron, a systemd timer or a
//! Kubernetes CronJob drives it — Kiln ships no daemon.
//!
//! `run-due` claims each due occurrence through the store
//! (`kiln_agent::claim_due`), so two of it at once, or it and an open tab,
//! never run one twice; an occurrence that passed while nothing ran is
//! recorded `missed` and not run late. Each claimed job is an agent turn as
//! the schedule's agent (its prompt, model, tools, guards), headless: what
//! would ask a person is refused, as `kiln agent run` with `--approve no`.
//!
//! Exit codes: 0 done (every job that ran answered); 1 a job failed or the
//! store refused; 2 a flag's value was refused before anything was written.

use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;

use kiln_providers::Message;
use kiln_store::config::Config;
use kiln_types::agent::StopReason;
use kiln_types::schedule::{FiringStatus, ScheduleRecord};

use crate::commands::agent::{Interrupt, Session, SessionArgs};
use crate::terminal::escaped;

/// `kiln schedules`' subcommands.
#[derive(clap::Args)]
pub struct SchedulesArgs {
    #[command(subcommand)]
    command: SchedulesCommand,
}

#[derive(clap::Subcommand)]
enum SchedulesCommand {
    /// One line per schedule: its id, agent, expression (and in words),
    /// zone, when it fires next and how its last firing went.
    List {
        /// Print the schedules and their last firings as JSON instead.
        #[arg(long)]
        json: bool,
        /// The store's folder.
        #[arg(long, value_name = "DIR", env = "KILN_STORE")]
        store: PathBuf,
    },
    /// A new schedule: AGENT's job with PROMPT, on CRON (five fields: minute hour
    /// day-of-month month day-of-week; `0 7 * * *` is every day at 07:00).
    Create {
        /// Its id: 1 to 64 of `a-z`, `0-9` and `-`.
        id: String,
        /// The agent whose job it is, by slug (`kiln agents list`).
        #[arg(long, value_name = "SLUG")]
        agent: String,
        #[arg(long, value_name = "EXPR")]
        cron: String,
        /// What the job is asked.
        #[arg(long)]
        prompt: String,
        /// The IANA zone CRON is read in (`Europe/Paris`); UTC when left out.
        #[arg(long, value_name = "ZONE")]
        time_zone: Option<String>,
        /// Keep it, but do not fire it.
        #[arg(long)]
        disabled: bool,
        #[arg(long, value_name = "DIR", env = "KILN_STORE")]
        store: PathBuf,
    },
    /// Remove a schedule and its firings.
    Remove {
        id: String,
        #[arg(long, value_name = "DIR", env = "KILN_STORE")]
        store: PathBuf,
    },
    /// Run what is due now, once, and exit: each due job as its agent, the
    /// missed ones recorded. Give the provider flags for agents that use the
    /// chat's provider; an agent with its own kept provider uses that.
    RunDue {
        /// Who runs them, as the firings record it.
        #[arg(long, default_value = "kiln")]
        runner: String,
        #[command(flatten)]
        session: Box<SessionArgs>,
    },
}

fn open(store: &std::path::Path) -> anyhow::Result<Config> {
    let backend: Rc<dyn kiln_store::Backend> = kiln_store::native::LogBackend::open(store)
        .map_err(|error| anyhow::anyhow!("--store {}: {}", store.display(), error.with_hint()))?;
    Ok(Config::new(backend))
}

fn failed(code: u8, error: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("error: {}", escaped(&error.to_string()));
    ExitCode::from(code)
}

pub fn run(args: &SchedulesArgs) -> ExitCode {
    match &args.command {
        SchedulesCommand::List { json, store } => list(store, *json),
        SchedulesCommand::Create {
            id,
            agent,
            cron,
            prompt,
            time_zone,
            disabled,
            store,
        } => {
            let schedule = ScheduleRecord {
                id: id.clone(),
                agent: agent.clone(),
                cron: cron.clone(),
                prompt: prompt.clone(),
                time_zone: time_zone.clone(),
                enabled: !disabled,
                since_ms: kiln_store::clock::epoch_ms(),
                version: 0,
            };
            if let Err(why) = kiln_agent::Cadence::of(&schedule) {
                return failed(2, &why);
            }
            let config = match open(store) {
                Ok(config) => config,
                Err(error) => return failed(1, &error),
            };
            let agents = match futures::executor::block_on(config.agents()) {
                Ok(agents) => agents,
                Err(error) => return failed(1, &error.with_hint()),
            };
            if !agents.iter().any(|kept| kept.slug == *agent) {
                return failed(
                    2,
                    &format!(
                        "--agent {agent}: there is no such agent; this workspace has {}",
                        agents
                            .iter()
                            .map(|kept| format!("`{}`", kept.slug))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                );
            }
            match futures::executor::block_on(config.put_schedule(&schedule)) {
                Ok(_) => {
                    crate::out::line(format_args!("schedule `{id}` created"));
                    ExitCode::SUCCESS
                }
                Err(kiln_store::StoreError::Conflict { .. }) => failed(
                    1,
                    &format!("schedule `{id}` already exists; remove it first"),
                ),
                Err(error) => failed(1, &error.with_hint()),
            }
        }
        SchedulesCommand::Remove { id, store } => {
            let config = match open(store) {
                Ok(config) => config,
                Err(error) => return failed(1, &error),
            };
            let removed = futures::executor::block_on(async {
                let schedules = config.schedules().await?;
                match schedules.iter().find(|schedule| schedule.id == *id) {
                    Some(schedule) => config
                        .remove_schedule(id, schedule.version)
                        .await
                        .map(|()| true),
                    None => Ok(false),
                }
            });
            match removed {
                Ok(true) => {
                    crate::out::line(format_args!("schedule `{id}` removed"));
                    ExitCode::SUCCESS
                }
                Ok(false) => failed(1, &format!("there is no schedule `{id}`")),
                Err(error) => failed(1, &error.with_hint()),
            }
        }
        SchedulesCommand::RunDue { runner, session } => run_due(runner, session),
    }
}

fn list(store: &std::path::Path, json: bool) -> ExitCode {
    let config = match open(store) {
        Ok(config) => config,
        Err(error) => return failed(1, &error),
    };
    let read = futures::executor::block_on(async {
        let mut rows = Vec::new();
        for schedule in config.schedules().await? {
            let last = config.firings(&schedule.id).await?.into_iter().next();
            rows.push((schedule, last));
        }
        Ok::<_, kiln_store::StoreError>(rows)
    });
    let rows = match read {
        Ok(rows) => rows,
        Err(error) => return failed(1, &error.with_hint()),
    };
    if json {
        let value: Vec<serde_json::Value> = rows
            .iter()
            .map(|(schedule, last)| serde_json::json!({"schedule": schedule, "last": last}))
            .collect();
        crate::out::line(format_args!("{}", serde_json::Value::Array(value)));
        return ExitCode::SUCCESS;
    }
    if rows.is_empty() {
        crate::out::line("no schedules: make one with `kiln schedules create`");
    }
    let now = kiln_store::clock::epoch_ms();
    for (schedule, last) in rows {
        let (when, next) = match kiln_agent::Cadence::of(&schedule) {
            Ok(cadence) => (
                cadence.describe(),
                cadence.next_after(now.max(schedule.since_ms)).map_or_else(
                    || "never".to_owned(),
                    |ms| format!("next in {}", wait(ms - now.min(ms))),
                ),
            ),
            Err(why) => (why, String::new()),
        };
        let last = last.map_or_else(
            || "never fired".to_owned(),
            |firing| {
                format!(
                    "last {} {} ago{}",
                    status_word(firing.status),
                    wait(now.saturating_sub(firing.due_ms)),
                    if firing.summary.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", firing.summary)
                    }
                )
            },
        );
        crate::out::line(escaped(&format!(
            "{}  {}  {} ({}, {}){}  {}  {}",
            schedule.id,
            schedule.agent,
            schedule.cron,
            when,
            schedule.time_zone.as_deref().unwrap_or("UTC"),
            if schedule.enabled { "" } else { "  disabled" },
            next,
            last
        )));
    }
    ExitCode::SUCCESS
}

fn status_word(status: FiringStatus) -> &'static str {
    match status {
        FiringStatus::Running => "started",
        FiringStatus::Ok => "ran",
        FiringStatus::Failed => "failed",
        FiringStatus::Missed => "missed",
    }
}

/// A duration for a person: `3 min`, `2 h 5 min`, `4 d`.
fn wait(ms: u64) -> String {
    let minutes = ms / 60_000;
    match minutes {
        0 => "under a minute".into(),
        1..60 => format!("{minutes} min"),
        60..1440 => format!("{} h {} min", minutes / 60, minutes % 60),
        _ => format!("{} d", minutes / 1440),
    }
}

fn run_due(runner: &str, args: &SessionArgs) -> ExitCode {
    let Some(store) = args.store() else {
        return failed(
            2,
            &"run-due: give --store DIR, where the schedules are kept",
        );
    };
    let config = match open(store) {
        Ok(config) => config,
        Err(error) => return failed(1, &error),
    };
    let now = kiln_store::clock::epoch_ms();
    let due = match futures::executor::block_on(kiln_agent::claim_due(&config, runner, now)) {
        Ok(due) => due,
        Err(error) => return failed(1, &error.with_hint()),
    };
    for problem in &due.problems {
        eprintln!("kiln schedules: {}", escaped(problem));
    }
    for missed in &due.missed {
        eprintln!(
            "kiln schedules: `{}` missed its occurrence {} ago (not run late)",
            missed.schedule,
            wait(now.saturating_sub(missed.firing.due_ms))
        );
    }
    if due.claimed.is_empty() {
        eprintln!("kiln schedules: nothing due");
    }
    let interrupt = Interrupt::install();
    let mut all_ok = due.problems.is_empty();
    for (schedule, firing) in due.claimed {
        eprintln!(
            "kiln schedules: running `{}` as `{}`",
            schedule.id, schedule.agent
        );
        let fired = fire(args, &schedule, &interrupt);
        all_ok &= fired.ok;
        let summary = fired.summary.clone();
        let ok = fired.ok;
        match futures::executor::block_on(kiln_agent::settle(&config, firing, fired)) {
            Ok(_) => {}
            Err(error) => {
                all_ok = false;
                eprintln!(
                    "kiln schedules: `{}` ran but its end was not recorded: {}",
                    schedule.id,
                    escaped(&error.with_hint().to_string())
                );
            }
        }
        crate::out::line(escaped(&format!(
            "{}: {} {}",
            schedule.id,
            if ok { "ok" } else { "failed" },
            summary
        )));
    }
    if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Runs one claimed schedule's job as its agent.
fn fire(args: &SessionArgs, schedule: &ScheduleRecord, interrupt: &Interrupt) -> kiln_agent::Fired {
    let session = match Session::prepare(&args.as_agent(&schedule.agent)) {
        Ok(session) => session,
        Err(error) => {
            return kiln_agent::Fired {
                ok: false,
                job_id: None,
                summary: format!("not started: {error:#}"),
            };
        }
    };
    let mut pool = futures::executor::LocalPool::new();
    let messages = vec![Message::User {
        text: schedule.prompt.clone(),
    }];
    let entrance = format!("kiln schedules ({})", schedule.id);
    match session.turn(&mut pool, interrupt, messages, None, &entrance, None) {
        Ok(outcome) => {
            let result = outcome.result;
            let ok = result.stop.is_success();
            let summary = if ok {
                result.text.clone()
            } else {
                format!(
                    "{}: {}",
                    result
                        .stop
                        .code
                        .clone()
                        .unwrap_or_else(|| match result.stop.reason {
                            StopReason::Provider => "provider".into(),
                            _ => "failed".into(),
                        }),
                    result.stop.message.clone().unwrap_or_default()
                )
            };
            kiln_agent::Fired {
                ok,
                job_id: result.job_id.clone(),
                summary,
            }
        }
        Err(error) => kiln_agent::Fired {
            ok: false,
            job_id: None,
            summary: format!("not started: {}", error.0),
        },
    }
}

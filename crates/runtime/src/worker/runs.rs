//! A page's program runs: plain, keyed (in custody, answering the interim when
//! due), and a keyed run's late result or withdrawal, from custody or the
//! workspace's history.

use super::*;

/// Run `id`; `seen` counts the permission changes the page had sent when it
/// sent the run (its request carries the settings as of then).
pub(super) async fn run(
    runtime: Rc<Runtime>,
    id: u64,
    request: Value,
    approve: bool,
    report: bool,
    seen: u64,
) {
    let request = match RunRequest::from_value(request) {
        Ok(request) => request,
        Err(error) => {
            post(&FromRuntime::Failed {
                id,
                problem: Problem::bad_request(error.0),
            });
            return;
        }
    };
    if request.key.is_some() && !report {
        keyed_run(runtime, id, request, approve, seen).await;
        return;
    }
    let environment = watched_environment(&runtime, id, approve, seen, "kiln.run");
    let cancel = AbortSignal::new();
    runtime.runs.borrow_mut().insert(id, cancel.clone());
    let runner = PoolRunner(runtime.pool.clone());
    let ran = kiln_run::run_program(request, &environment, &runner, cancel).await;
    // Calls of this run still waiting on the page are given up.
    settle(&runtime, id);
    match ran {
        Ok(ran) => {
            let value = if report {
                // A run asked for its report (the app's editor, tools, benches)
                // is never kept in custody, key or none: its text does not warn
                // `keyless`, which tells a caller that a key would make a lost
                // reply recoverable.
                let text = kiln_run::RunId {
                    id: String::new(),
                    keyless: false,
                }
                .result_of(ran.run.clone())
                .text();
                serde_json::to_value(RunAnswer {
                    job_id: ran.job_id,
                    text,
                    record_error: ran.record_error.as_ref().map(store_problem),
                    report: ran.run.report,
                    warnings: ran.run.warnings,
                    catalog_digest: ran.run.catalog_digest,
                })
                .unwrap_or(Value::Null)
            } else {
                serde_json::to_value(&ran.result).unwrap_or(Value::Null)
            };
            post(&FromRuntime::Done { id, value });
        }
        Err(error) => post(&FromRuntime::Failed {
            id,
            problem: Problem::bad_request(error.0),
        }),
    }
}

/// Keyed run `id` (`kiln.run({key})`), in custody: a retry with the same key
/// attaches and gets that run's result; a run not ended when its answer is
/// due answers the interim ([`FromRuntime::Interim`]) and goes on, its page
/// tools and `approve` still this exchange's, until its own `Done`.
pub(super) async fn keyed_run(
    runtime: Rc<Runtime>,
    id: u64,
    request: RunRequest,
    approve: bool,
    seen: u64,
) {
    let run_id = kiln_run::RunId::for_request(&request, &kiln_store::ids::random_bytes).id;
    if !runtime.custody.keeps(&run_id)
        && let Some(recorded) = recorded(&runtime, &run_id).await
    {
        // Another tab's run of this key (going, or ended since this worker
        // started): answered from its record, never run again here.
        if recorded.structured_content["status"] != "running" {
            runtime.custody.adopt(&run_id, recorded.clone(), 0);
        }
        post(&FromRuntime::Done {
            id,
            value: serde_json::to_value(recorded.for_page()).unwrap_or(Value::Null),
        });
        return;
    }
    runtime.keyed.borrow_mut().insert(id, run_id.clone());
    let start = {
        let runtime = runtime.clone();
        move |handle: RunHandle| -> LocalBoxFuture<'static, ToolResult> {
            Box::pin(async move {
                let mut environment = watched_environment(&runtime, id, approve, seen, "kiln.run");
                // A call held on the person's consent is what the interim names.
                if let People::Approver { approver, .. } = &mut environment.people {
                    *approver = kiln_run::holding(approver.clone(), handle.clone());
                }
                let runner = PoolRunner(runtime.pool.clone());
                let ran =
                    kiln_run::run_program(request, &environment, &runner, handle.cancel.clone())
                        .await;
                settle(&runtime, id);
                runtime.keyed.borrow_mut().remove(&id);
                // The exchange that started the run ends with it, whether it
                // answered already (the interim) or not.
                match ran {
                    Ok(ran) => {
                        post(&FromRuntime::Done {
                            id,
                            value: serde_json::to_value(&ran.result).unwrap_or(Value::Null),
                        });
                        ran.result
                    }
                    Err(error) => {
                        post(&FromRuntime::Failed {
                            id,
                            problem: Problem::bad_request(error.0.clone()),
                        });
                        error_result(
                            None,
                            "invalid_request",
                            &error.0,
                            json!({"status": "refused"}),
                        )
                    }
                }
            })
        }
    };
    let (result, attached) = runtime.custody.call(&run_id, start).await;
    let result = result.for_page();
    if attached {
        // A retry: its answer is the kept run's, and it ends here.
        runtime.keyed.borrow_mut().remove(&id);
        post(&FromRuntime::Done {
            id,
            value: serde_json::to_value(&result).unwrap_or(Value::Null),
        });
    } else if result.structured_content["status"] == "running" {
        post(&FromRuntime::Interim {
            id,
            value: serde_json::to_value(&result).unwrap_or(Value::Null),
        });
    }
    // Else the run ended in time and its own `Done` went out.
}

/// `kiln.lateResult(runId)`, or with `withdraw` `kiln.withdraw(runId)`: from
/// custody, else from the history's record.
pub(super) async fn kept_run(runtime: Rc<Runtime>, id: u64, run_id: String, withdraw: bool) {
    let kept = if withdraw {
        runtime.custody.withdraw(&run_id).await
    } else {
        runtime.custody.late_result(&run_id).await
    };
    let answer = match kept {
        Ok(result) => result,
        Err(error) => recorded(&runtime, &run_id)
            .await
            .unwrap_or_else(|| error.to_result()),
    };
    post(&FromRuntime::Done {
        id,
        value: serde_json::to_value(answer.for_page()).unwrap_or(Value::Null),
    });
}

/// A keyed run this worker keeps nothing for, as the workspace's history
/// recorded it: another tab's, ended (its result) or still going there (the
/// interim; a job a closed tab left was marked `interrupted` when this worker
/// opened the workspace).
pub(super) async fn recorded(runtime: &Runtime, run_id: &str) -> Option<ToolResult> {
    let workspace = runtime.workspace.as_ref().as_ref().ok()?;
    let history = kiln_store::history::History::new(workspace.backend.clone());
    let jobs = history.jobs(400).await.ok()?;
    let job = jobs
        .into_iter()
        .find(|job| job.run_id.as_deref() == Some(run_id))?;
    match job.result.map(serde_json::from_value::<ToolResult>) {
        Some(Ok(result)) => Some(result),
        _ if job.status == "interrupted" => Some(kiln_run::interrupted(run_id, &job.output)),
        _ if job.status == "running" => Some(kiln_types::tool_result::interim(run_id, &[])),
        _ => None,
    }
}

//! Turns of a model: a streamed chat turn, an agent turn (the CodeAct loop),
//! and a provider's model list.

use std::cell::Cell;

use futures::future::LocalBoxFuture;
use kiln_types::schedule::ScheduleRecord;

use super::*;

/// The workspace's configuration, when its stores opened.
pub(super) fn stored_config(runtime: &Runtime) -> Option<kiln_store::config::Config> {
    runtime
        .workspace
        .as_ref()
        .as_ref()
        .ok()
        .map(|workspace| kiln_store::config::Config::new(workspace.backend.clone()))
}

pub(super) fn provider_problem(error: &ProviderError) -> Problem {
    Problem {
        bad_request: false,
        message: error.sentence(),
        code: Some(error.code().to_owned()),
        hint: error.hint.clone(),
        status: error.status,
    }
}

/// One streamed chat turn: its events posted as they come, then its final
/// message (with the budget's spend when it had one).
pub(super) async fn chat(runtime: Rc<Runtime>, id: u64, request: Value) {
    let answered = async {
        let turn = TurnRequest::from_value(&request).map_err(Problem::bad_request)?;
        let budget = match turn.budget {
            None => None,
            Some(TurnBudget::Own(limits)) => {
                Some(new_budget(&limits, Rc::new(kiln_http::SystemClock)))
            }
            Some(TurnBudget::Shared(number)) => Some(
                runtime
                    .budgets
                    .borrow()
                    .get(&number)
                    .cloned()
                    .ok_or_else(|| {
                        Problem::bad_request(format!(
                            "`budget` names budget {number}, which this Kiln did not make"
                        ))
                    })?,
            ),
        };
        let config = stored_config(&runtime);
        let provider = provider_config(config.as_ref(), &turn.provider)
            .await
            .map_err(|error| op_problem(&error.into()))?;
        let provider = kiln_providers::connect_with(provider, runtime.http.clone());
        let abort = AbortSignal::new();
        runtime.runs.borrow_mut().insert(id, abort.clone());
        let mut stream =
            kiln_providers::turn(&*provider, turn.request, budget.clone(), Some(abort));
        let mut done = None;
        while let Some(item) = stream.next().await {
            let event = item.map_err(|error| provider_problem(&error))?;
            if let Event::Done { message } = &event {
                done = Some(message.clone());
            }
            post(&FromRuntime::Event {
                id,
                event: ExchangeEvent::Chat(event),
            });
        }
        let mut value = serde_json::to_value(done.unwrap_or_default()).unwrap_or_default();
        if let (Some(budget), Some(object)) = (budget, value.as_object_mut()) {
            object.insert(
                "spend".into(),
                serde_json::to_value(budget.spend()).unwrap_or_default(),
            );
        }
        Ok::<Value, Problem>(value)
    }
    .await;
    runtime.runs.borrow_mut().remove(&id);
    answer(id, answered);
}

/// Who an agent turn can ask: the page's `approve` and `ask` callbacks, and
/// how many permission changes the page had sent when it sent the turn.
pub(super) struct Asks {
    pub(super) approve: bool,
    pub(super) ask: bool,
    pub(super) seen: u64,
}

/// One agent turn: its events posted as they come, then its result and the
/// thread to continue from (`messages`, the thread as the model saw it; and,
/// for a turn kept in a thread, `next`, what the next turn sends).
pub(super) async fn agent(runtime: Rc<Runtime>, id: u64, request: Value, asks: Asks) {
    let answered = agent_turn(&runtime, id, request, asks).await;
    settle(&runtime, id);
    // A question left open has nobody to ask it any more.
    runtime
        .questions
        .borrow_mut()
        .retain(|_, (run, _)| *run != id);
    answer(id, answered);
}

/// The thread a turn is kept in, with its first message kept.
async fn kept_turn(
    runtime: &Runtime,
    spec: &kiln_agent::AgentSpec,
) -> Result<Option<kiln_agent::ThreadTurn>, Problem> {
    let Some(thread) = &spec.thread else {
        return Ok(None);
    };
    let workspace = runtime.workspace.as_ref().as_ref().map_err(store_problem)?;
    let threads = kiln_store::threads::Threads::new(workspace.backend.clone());
    kiln_agent::ThreadTurn::begin(
        threads,
        thread,
        spec.messages(),
        &spec.provider_name(),
        spec.model(),
    )
    .await
    .map(Some)
    .map_err(|error| store_problem(&error))
}

async fn agent_turn(
    runtime: &Rc<Runtime>,
    id: u64,
    request: Value,
    asks: Asks,
) -> Result<Value, Problem> {
    let Asks { approve, ask, seen } = asks;
    let mut spec = kiln_agent::AgentSpec::from_value(request)
        .map_err(|error| Problem::bad_request(error.0))?;
    let config = stored_config(runtime);
    // The agent's own provider and model, when it names them.
    let agent = match &config {
        Some(config) => config
            .agent(spec.agent())
            .await
            .map_err(|error| store_problem(&error))?,
        None => None,
    };
    if let (Some(config), Some(agent)) = (&config, &agent) {
        let (provider, model) = kiln_agent::own_model(config, agent)
            .await
            .map_err(Problem::bad_request)?;
        if provider.is_some() || model.is_some() {
            let model = model.unwrap_or_else(|| spec.model().to_owned());
            spec.use_model(provider.unwrap_or_else(|| spec.provider.clone()), model);
        }
    }
    let kept = kept_turn(runtime, &spec).await?;
    let ran = async {
        let provider = provider_config(config.as_ref(), &spec.provider)
            .await
            .map_err(|error| op_problem(&error.into()))?;
        let provider = kiln_providers::connect_with(provider, runtime.http.clone());
        let mut profile = match (&config, agent) {
            (Some(config), Some(_)) => {
                let http = runtime.http.clone();
                let connect = move |config| kiln_providers::connect_with(config, http.clone());
                kiln_agent::load_profile(config, spec.agent(), &provider, &spec.options(), &connect)
                    .await
                    .map_err(Problem::bad_request)?
            }
            _ => None,
        };
        // The vault's secrets this agent and each of its team may use, each
        // bound to its origins.
        if let (Some(profiled), Ok(vault)) = (&mut profile, &runtime.vault) {
            let problems = kiln_agent::open_vault(profiled, vault, kiln_store::clock::epoch_ms())
                .await
                .map_err(|error| store_problem(&error))?;
            for message in problems {
                post(&FromRuntime::Event {
                    id,
                    event: ExchangeEvent::Agent(kiln_types::agent::AgentEvent::LogUpdate {
                        message,
                    }),
                });
            }
        }
        let mut environment = watched_environment(runtime, id, approve, seen, "kiln.agent");
        if let Some(config) = &config
            && let Some(search) = web_search(runtime, config, spec.agent(), id).await
        {
            let http = runtime.http.clone();
            environment.add_own_tools(move |registry| {
                kiln_capabilities::web_search::add_web_search(
                    registry,
                    &http,
                    &search.0,
                    search.1.clone(),
                );
            });
        }
        let cancel = AbortSignal::new();
        runtime.runs.borrow_mut().insert(id, cancel.clone());
        let sink: kiln_agent::Sink = Rc::new(move |event| {
            post(&FromRuntime::Event {
                id,
                event: ExchangeEvent::Agent(event),
            });
        });
        let setup = kiln_agent::AgentSetup {
            environment: &environment,
            runner: Rc::new(PoolRunner(runtime.pool.clone())),
            person: ask.then(|| {
                Rc::new(PagePerson {
                    runtime: runtime.clone(),
                    run: id,
                }) as Rc<dyn Person>
            }),
            clock: Rc::new(kiln_http::SystemClock),
            sink: match &kept {
                Some(kept) => kept.sink(sink),
                None => sink,
            },
            cancel,
        };
        kiln_agent::run_agent(spec.with_provider(provider, profile), setup)
            .await
            .map_err(|error| Problem::bad_request(error.0))
    }
    .await;
    let outcome = match ran {
        Ok(outcome) => outcome,
        Err(problem) => {
            if let Some(kept) = kept {
                // The failure is the answer either way; a store that fails
                // now only leaves the thread without it.
                let _ = kept
                    .failed(kiln_store::threads::TurnFailure {
                        code: problem.code.clone().unwrap_or_else(|| "failed".into()),
                        message: problem.message.clone(),
                        hint: problem.hint.clone(),
                    })
                    .await;
            }
            return Err(problem);
        }
    };
    let mut value = serde_json::to_value(&outcome.result).unwrap_or(Value::Null);
    if let Some(object) = value.as_object_mut() {
        object.insert(
            "messages".into(),
            serde_json::to_value(&outcome.view).unwrap_or_default(),
        );
        if let Some(kept) = kept {
            match kept.ended(&outcome).await {
                Ok(next) => {
                    object.insert(
                        "next".into(),
                        serde_json::to_value(next).unwrap_or_default(),
                    );
                }
                Err(error) => {
                    object.insert(
                        "thread_problem".into(),
                        Value::String(error.with_hint().to_string()),
                    );
                }
            }
        }
    }
    Ok(value)
}

pub(super) async fn models(runtime: Rc<Runtime>, id: u64, provider: Value) {
    let answered = async {
        let config = stored_config(&runtime);
        let provider = provider_config(config.as_ref(), &provider)
            .await
            .map_err(|error| op_problem(&error.into()))?;
        let provider = kiln_providers::connect_with(provider, runtime.http.clone());
        let models = provider
            .models()
            .await
            .map_err(|error| provider_problem(&error))?;
        Ok::<Value, Problem>(serde_json::to_value(models).unwrap_or_default())
    }
    .await;
    answer(id, answered);
}

/// Exchange ids of scheduled jobs: far above any the page numbers, so their
/// events reach no page exchange and their cancel switches no page's.
const SCHEDULED_IDS: u64 = 1 << 52;

/// How often this worker looks for due schedules while its tab is open.
const SCHEDULE_TICK_MS: u64 = 60_000;

/// Fires the workspace's due schedules while this worker lives: a look
/// every minute, each due occurrence claimed through the store (so of two
/// tabs exactly one runs it) and run as its agent's job, headless: what
/// would ask a person is refused, as in any job nobody watches.
pub(super) async fn schedules(runtime: Rc<Runtime>) {
    let runner = format!(
        "tab-{:016x}",
        u64::from_le_bytes(kiln_store::ids::random_bytes())
    );
    let next = Cell::new(SCHEDULED_IDS);
    loop {
        if let Some(config) = stored_config(&runtime) {
            let fire = |schedule: ScheduleRecord| -> LocalBoxFuture<'_, kiln_agent::Fired> {
                let id = next.get();
                next.set(id + 1);
                Box::pin(fire(runtime.clone(), config.clone(), id, schedule))
            };
            // A schedule that does not read is said where schedules are listed
            // (`schedules.list`); the store failing now is tried again next minute.
            let _ =
                kiln_agent::run_due(&config, &runner, kiln_store::clock::epoch_ms(), &fire).await;
        }
        kiln_http::sleep(SCHEDULE_TICK_MS).await;
    }
}

/// Runs one schedule's job as its agent: its own provider, else the one the
/// workspace's chat has chosen.
async fn fire(
    runtime: Rc<Runtime>,
    config: kiln_store::config::Config,
    id: u64,
    schedule: ScheduleRecord,
) -> kiln_agent::Fired {
    let failed = |summary: String| kiln_agent::Fired {
        ok: false,
        job_id: None,
        summary,
    };
    let agent = match config.agent(&schedule.agent).await {
        Ok(Some(agent)) => agent,
        Ok(None) => {
            return failed(format!(
                "not started: there is no agent `{}` any more",
                schedule.agent
            ));
        }
        Err(error) => return failed(format!("not started: {}", error.with_hint())),
    };
    let (own, _) = match kiln_agent::own_model(&config, &agent).await {
        Ok(chosen) => chosen,
        Err(why) => return failed(format!("not started: {why}")),
    };
    let provider = match own {
        Some(provider) => provider,
        None => match config
            .settings()
            .await
            .ok()
            .and_then(|settings| settings.selected_provider)
        {
            // Kiln's own model, which the app offers without keeping it.
            Some(name) if name == kiln_types::chat::IN_PROCESS_LABEL => json!({
                "kind": kiln_types::chat::ProviderKind::InProcess.as_str(),
                "base_url": kiln_types::chat::IN_PROCESS_MODELS,
            }),
            Some(name) => json!({"stored": name}),
            None => {
                return failed(format!(
                    "not started: agent `{}` has no provider of its own and the chat has none chosen",
                    agent.slug
                ));
            }
        },
    };
    let model = match kiln_run::kept_model(Some(&config), &provider).await {
        Some(model) => model,
        None if provider.get("stored").is_none() => {
            kiln_types::chat::IN_PROCESS_MODEL_ID.to_owned()
        }
        None => String::new(),
    };
    let request = json!({
        "provider": provider,
        "options": {"model": model, "max_tokens": 4096},
        "messages": [{"role": "user", "text": schedule.prompt}],
        "agent": agent.slug,
    });
    let asks = Asks {
        approve: false,
        ask: false,
        seen: 0,
    };
    let answered = agent_turn(&runtime, id, request, asks).await;
    settle(&runtime, id);
    match answered {
        Ok(value) => match serde_json::from_value::<kiln_types::agent::AgentResult>(value) {
            Ok(result) => kiln_agent::Fired {
                ok: result.stop.is_success(),
                summary: if result.stop.is_success() {
                    result.text
                } else {
                    format!(
                        "{}: {}",
                        result.stop.code.unwrap_or_else(|| "failed".into()),
                        result.stop.message.unwrap_or_default()
                    )
                },
                job_id: result.job_id,
            },
            Err(error) => failed(format!("the job's result did not read: {error}")),
        },
        Err(problem) => failed(problem.message),
    }
}

/// The workspace's web search for a job of `agent`, with its key from the
/// vault, when one is configured and can be used; a note to the exchange
/// when it is configured but cannot.
async fn web_search(
    runtime: &Runtime,
    config: &kiln_store::config::Config,
    agent: &str,
    id: u64,
) -> Option<(kiln_types::search::WebSearch, Option<kiln_types::Redacted>)> {
    let note = |message: String| {
        post(&FromRuntime::Event {
            id,
            event: ExchangeEvent::Agent(kiln_types::agent::AgentEvent::LogUpdate { message }),
        });
    };
    let search = config.settings().await.ok()?.web_search?;
    if let Err(why) = search.check() {
        note(format!("web_search is off: {why}"));
        return None;
    }
    let Some(name) = &search.key_secret else {
        return Some((search, None));
    };
    let vault = match &runtime.vault {
        Ok(vault) => vault,
        Err(error) => {
            note(format!(
                "web_search is off: the vault is not open: {}",
                error.with_hint()
            ));
            return None;
        }
    };
    match vault
        .for_agent(
            agent,
            std::slice::from_ref(name),
            kiln_store::clock::epoch_ms(),
        )
        .await
    {
        Ok((mut opened, problems)) => match opened.pop() {
            Some(secret) => Some((search, Some(secret.value))),
            None => {
                note(format!("web_search is off: {}", problems.join("; ")));
                None
            }
        },
        Err(error) => {
            note(format!("web_search is off: {}", error.with_hint()));
            None
        }
    }
}

//! A run's ladder, assembled once for every entrance: the registry fed by
//! every source, the gate and the dispatcher.
//!
//! Sources, in this order (a name claimed twice is unavailable, and both
//! claims reach admission's warnings): the entrance's own tools
//! ([`Environment::own_tools`]), the request's page tools (answered through
//! [`ToolBridge`]), the built-ins the request asked for by name
//! (`http_request` only with `builtins: ["http_request"]` or `allow_net`),
//! the workspace's memory, history and file tools (with the run's job in the
//! history), `model` and `classify` when the request names a model
//! ([`crate::model_tools`]), and the request's MCP servers. Nothing else: a run's tools are
//! exactly its whitelist.
//!
//! The gate takes the one mode rule: a request that names no mode gets
//! `default` when a person can be asked, else `auto`.

use std::rc::Rc;

use kiln_capabilities::gate::SessionAllow;
use kiln_capabilities::mcp::McpServer;
use kiln_capabilities::{
    Approver, CapabilitySpec, Dispatcher, Gate, Mode, Registry, SecretScope, Source,
};
use kiln_store::run::{Describe, RunMemory};
use kiln_types::tool_result::Warning;

use crate::environment::{Environment, People};
use crate::record::{JobOf, RunRecord};
use crate::request::{RequestError, RunRequest};

/// The gate of a run of `request` whose questions `approver` answers under
/// `host`, with the one mode rule: a request that names no mode gets
/// `default` when the approver is a person who can be asked, else `auto`.
///
/// # Errors
///
/// Permission settings the gate refuses.
fn gate_for(
    request: &RunRequest,
    host: &str,
    approver: Rc<dyn Approver>,
    session: &SessionAllow,
) -> Result<Rc<Gate>, RequestError> {
    let mode = if approver.is_person() {
        Mode::Default
    } else {
        Mode::Auto
    };
    let settings = request.settings(mode)?;
    Gate::in_session(host.to_owned(), settings, approver, session.clone()).map_err(RequestError)
}

/// One run's assembled ladder.
pub struct Ladder {
    pub dispatcher: Rc<Dispatcher>,
    /// What the dispatcher serves, for another run over the same tools (an
    /// agent's next action).
    pub registry: Rc<Registry>,
    pub gate: Rc<Gate>,
    pub secrets: SecretScope,
    /// The MCP sessions opened for the run, closed once when it ends.
    pub servers: Vec<McpServer>,
    /// The run's job in the history, when the run has a workspace.
    pub record: Option<RunRecord>,
    /// The run's memory (`step:`, `task:`, `input:`, `shared:`), when the run
    /// has a workspace.
    pub run_memory: Option<RunMemory>,
}

fn kiln_warning(code: &str, message: String, reason: Option<String>) -> Warning {
    Warning {
        code: code.into(),
        message,
        module: Some("kiln".into()),
        tool: None,
        index: None,
        reason,
    }
}

/// Assembles `request`'s ladder in `environment`: the registry from every
/// source, the job in the history with the inputs in its run memory, the MCP
/// sessions, the gate, the dispatcher.
///
/// # Errors
///
/// Permission settings the gate refuses (the parser already refused them;
/// this is the one place a gate is made).
pub async fn assemble(
    request: &RunRequest,
    environment: &Environment,
) -> Result<Ladder, RequestError> {
    assemble_job(request, environment, &JobOf::program(request), &|_| {}).await
}

/// [`assemble`] for a job described by `job`, with `extra`'s tools added
/// after every other source (an agent's own: `ask_user`, `return_result`).
///
/// # Errors
///
/// As [`assemble`].
pub async fn assemble_job(
    request: &RunRequest,
    environment: &Environment,
    job: &JobOf,
    extra: &dyn Fn(&mut Registry),
) -> Result<Ladder, RequestError> {
    let mut registry = Registry::new();
    add_named_sources(request, environment, &mut registry);
    let (record, run_memory) = add_workspace(request, environment, job, &mut registry)
        .await
        .unzip();
    add_model(request, environment, &mut registry).await;
    let secrets = secret_scope(request);
    let servers = add_mcp(request, environment, &secrets, &mut registry).await;
    extra(&mut registry);
    let gate = match &environment.people {
        People::Gate(gate) => gate.clone(),
        People::Approver {
            host,
            approver,
            session,
        } => gate_for(request, host, approver.clone(), session)?,
    };
    if let Some(made) = &environment.on_gate {
        made(gate.clone());
    }
    let registry = Rc::new(registry);
    let dispatcher = Dispatcher::new(
        registry.clone(),
        Some(gate.clone()),
        secrets.clone(),
        request.limits.get(),
        &environment.entrance,
    );
    Ok(Ladder {
        dispatcher: Rc::new(dispatcher),
        registry,
        gate,
        secrets,
        servers,
        record,
        run_memory,
    })
}

/// The tools a run of `request` would have, as far as they are known without
/// running it (nothing is recorded; the storage tools are listed over no
/// run's memory; the MCP servers are connected, listed and closed), and the
/// warnings a run would carry about them. The app's tool list.
pub async fn catalog(
    request: &RunRequest,
    environment: &Environment,
) -> (Vec<CapabilitySpec>, Vec<Warning>) {
    let mut registry = Registry::new();
    add_named_sources(request, environment, &mut registry);
    match environment.workspace.as_deref() {
        Some(Ok(workspace)) => {
            let storage = kiln_capabilities::Storage::new(
                workspace.backend.clone(),
                workspace.files.clone(),
                "catalog",
                &request.agent,
            );
            kiln_capabilities::builtin::add_storage(&mut registry, &storage);
        }
        Some(Err(error)) => registry.warn(kiln_warning(
            "storage_unavailable",
            format!(
                "memory, history and workspace tools are off: {}",
                error.with_hint()
            ),
            Some(error.code().into()),
        )),
        None => {}
    }
    add_model(request, environment, &mut registry).await;
    let servers = add_mcp(request, environment, &secret_scope(request), &mut registry).await;
    for server in servers {
        // Listed only: a run opens its own session.
        let _ = server.client.close().await;
    }
    (
        registry.specs().cloned().collect(),
        registry.warnings().to_vec(),
    )
}

/// The entrance's own tools, the page's tools and `http_request` when asked for.
fn add_named_sources(request: &RunRequest, environment: &Environment, registry: &mut Registry) {
    if let Some(own_tools) = &environment.own_tools {
        own_tools(registry);
    }
    for (name, entry) in &request.tools {
        let spec = CapabilitySpec {
            name: name.clone(),
            description: entry.description.clone(),
            input_schema: entry.input_schema.clone(),
            category: entry.category,
            result: serde_json::json!({}),
            source: Source::Host {
                host: environment.tools_host.clone(),
            },
        };
        match environment
            .bridge
            .as_ref()
            .and_then(|bridge| bridge.implementation(name))
        {
            // A name or schema the registry refuses becomes its warning.
            Some(implementation) => {
                let _ = registry.add(spec, implementation);
            }
            None => registry.warn(kiln_warning(
                "tools_unavailable",
                format!(
                    "the page tool `{name}` has no call here ({} cannot reach page tools)",
                    environment.entrance
                ),
                None,
            )),
        }
    }
    add_http(request, environment, registry);
}

/// `http_request`, when `request` asks for it.
fn add_http(request: &RunRequest, environment: &Environment, registry: &mut Registry) {
    if let Some(policy) = request.net() {
        // Never the run's MCP servers directly: their tools go through the ladder.
        let endpoints: Vec<String> = request.mcp.iter().map(|mount| mount.url.clone()).collect();
        kiln_capabilities::builtin::add_http_request_beside_mcp(
            registry,
            &environment.http,
            policy,
            &endpoints,
        );
    }
}

/// Mounts on `registry` what `request` asks for beyond `entrance`, the
/// request it was shaped from: `http_request` when only `request` asks for
/// it, and the MCP servers `entrance` does not mount, their headers filled
/// from `secrets`. A team member's belt: the tools its own profile brings,
/// beside the entrance's. Answers the sessions it opened, for the caller to
/// close; a server that does not answer is `registry`'s warning.
pub async fn mount_beyond(
    request: &RunRequest,
    entrance: &RunRequest,
    environment: &Environment,
    secrets: &SecretScope,
    registry: &mut Registry,
) -> Vec<McpServer> {
    if entrance.net().is_none() {
        add_http(request, environment, registry);
    }
    let mounts: Vec<&crate::request::McpMount> = request
        .mcp
        .iter()
        .filter(|mount| !entrance.mcp.iter().any(|own| own.name == mount.name))
        .collect();
    connect_mounts(&mounts, environment, secrets, registry).await
}

/// Mounts `model` and `classify` over the provider the request names; one
/// that cannot be resolved (a kept provider that is not there, no model) is
/// the run's `model_unavailable` warning, and the run goes on without them.
async fn add_model(request: &RunRequest, environment: &Environment, registry: &mut Registry) {
    let Some(setup) = &request.model else {
        return;
    };
    match resolve_model(setup, environment).await {
        Ok((config, model)) => {
            let provider = kiln_providers::connect_with(config, environment.http.clone());
            crate::model_tools::ModelTools::new(provider, model, setup.budget).add_to(registry);
        }
        Err(why) => registry.warn(kiln_warning(
            "model_unavailable",
            format!("`tools.model` and `tools.classify` are off: {why}"),
            None,
        )),
    }
}

/// The provider and model of `setup`, a kept provider looked up in the
/// workspace's configuration.
async fn resolve_model(
    setup: &crate::request::ModelSetup,
    environment: &Environment,
) -> Result<(kiln_providers::ProviderConfig, String), String> {
    let config = match environment.workspace.as_deref() {
        Some(Ok(workspace)) => Some(kiln_store::config::Config::new(workspace.backend.clone())),
        _ => None,
    };
    let provider = crate::provider::provider_config(config.as_ref(), &setup.provider)
        .await
        .map_err(|error| error.to_string())?;
    let model = match &setup.model {
        Some(model) => model.clone(),
        None => crate::provider::kept_model(config.as_ref(), &setup.provider)
            .await
            .ok_or("the kept provider has no model saved; name one in `model.model`")?,
    };
    Ok((provider, model))
}

/// The request's secrets, as the run's scope.
#[must_use]
pub fn secret_scope(request: &RunRequest) -> SecretScope {
    let mut secrets = SecretScope::new();
    for (name, secret) in &request.secrets {
        secrets.insert(name.clone(), secret.clone());
    }
    secrets
}

/// Connects the request's MCP servers, their headers filled from `secrets`,
/// and mounts their tools; a server whose headers name a secret the scope
/// does not hold, or one that may not go to it, or a server that does not
/// answer, is the run's `tools_unavailable` warning.
async fn add_mcp(
    request: &RunRequest,
    environment: &Environment,
    secrets: &SecretScope,
    registry: &mut Registry,
) -> Vec<McpServer> {
    let mounts: Vec<&crate::request::McpMount> = request.mcp.iter().collect();
    connect_mounts(&mounts, environment, secrets, registry).await
}

/// Connects `mounts` and mounts their tools, as [`add_mcp`] says.
async fn connect_mounts(
    mounts: &[&crate::request::McpMount],
    environment: &Environment,
    secrets: &SecretScope,
    registry: &mut Registry,
) -> Vec<McpServer> {
    let mut servers = Vec::new();
    for mount in mounts {
        let connected = kiln_capabilities::mcp::connect(
            &mount.name,
            &mount.url,
            mount.category,
            &mount.headers,
            secrets,
            environment.http.clone(),
        )
        .await;
        match connected {
            Ok(server) => {
                kiln_capabilities::mcp::add_server(registry, &server);
                servers.push(server);
            }
            Err(warning) => registry.warn(*warning),
        }
    }
    servers
}

/// Records the run in the workspace's history, puts the request's inputs in
/// its run memory and mounts the storage tools; without a workspace the run
/// goes on without them and says why in a warning.
async fn add_workspace(
    request: &RunRequest,
    environment: &Environment,
    job: &JobOf,
    registry: &mut Registry,
) -> Option<(RunRecord, RunMemory)> {
    let workspace = match environment.workspace.as_deref() {
        None => {
            if !request.inputs.is_empty() {
                registry.warn(kiln_warning(
                    "input_not_stored",
                    format!(
                        "the inputs were not put in a run memory: {} has no workspace for this run",
                        environment.entrance
                    ),
                    None,
                ));
            }
            return None;
        }
        Some(Err(error)) => {
            registry.warn(kiln_warning(
                "storage_unavailable",
                format!(
                    "memory, history and workspace tools are off: {}",
                    error.with_hint()
                ),
                Some(error.code().into()),
            ));
            return None;
        }
        Some(Ok(workspace)) => workspace,
    };
    let record = match RunRecord::start_job(workspace, job, &request.agent).await {
        Ok(record) => record,
        Err(error) => {
            registry.warn(kiln_warning(
                "storage_unavailable",
                format!(
                    "the run could not be recorded, so memory, history and workspace tools are off: {}",
                    error.with_hint()
                ),
                Some(error.code().into()),
            ));
            return None;
        }
    };
    let storage = kiln_capabilities::Storage::new(
        workspace.backend.clone(),
        workspace.files.clone(),
        record.job_id(),
        &request.agent,
    );
    for (name, value) in &request.inputs {
        let key = format!("input:{name}");
        if let Err(error) = storage
            .run
            .set(&key, value.clone(), Describe::default())
            .await
        {
            registry.warn(kiln_warning(
                "input_not_stored",
                format!(
                    "input `{name}` was not put in the run memory: {}",
                    error.with_hint()
                ),
                Some(error.code().into()),
            ));
        }
    }
    kiln_capabilities::builtin::add_storage(registry, &storage);
    Some((record, storage.run))
}

/// Checks a workspace's name: it names a database (`kiln-<name>`) and a
/// folder, so it is 1 to 64 of `A-Z`, `a-z`, `0-9`, `-` and `_`.
///
/// # Errors
///
/// The sentence saying so.
pub fn check_workspace_name(workspace: &str) -> Result<(), String> {
    let good = !workspace.is_empty()
        && workspace.len() <= 64
        && workspace
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if good {
        Ok(())
    } else {
        Err(format!(
            "workspace `{workspace}` must be 1 to 64 of `A-Z`, `a-z`, `0-9`, `-` and `_`"
        ))
    }
}

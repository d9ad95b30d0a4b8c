//! The Settings view ([`Settings`]): the providers the chat can use, and the
//! settings a person gives every run: the permission mode, the auto-run brake
//! and each tool's autonomy; the MCP servers added by URL, kept as the
//! `default` agent's (so they come back after a reload); what programs may
//! reach with `http_request`; the secrets vault and web search
//! (`secrets_panel`); whether agents may change their team.

use leptos::prelude::*;
use leptos::task::spawn_local;

use serde_json::{Value, json};

use crate::agents_panel::WorkspaceAgents;
use crate::storage::Stores;
use crate::storage_model::ErrorText;
use crate::{McpMount, RuntimeStart, Sources, ToolRow, permissions, storage};
use kiln_types::permission::{Autonomy, Mode, RETURN_RESULT};
use kiln_types::profile::{AgentRecord, AgentServer, check_server_name};
use kiln_types::records::{DEFAULT_AGENT, TurnLimits};
use kiln_types::runtime::Problem;

fn mode_from(value: &str) -> Mode {
    value.parse().unwrap_or(Mode::Default)
}

/// The permission mode, the auto-run brake, and the tools with their
/// category and per-tool setting.
#[component]
pub(crate) fn Permissions(
    gate: permissions::PageSettings,
    tools: ReadSignal<Vec<ToolRow>>,
    catalog: RwSignal<Result<bool, String>>,
    runtime: RuntimeStart,
    storage: storage::StorageSignals,
) -> impl IntoView {
    let gate = StoredValue::new_local(gate);
    let runtime = StoredValue::new_local(runtime);
    // Runs going on take the new settings at their next call.
    let publish = move || {
        let settings = gate.with_value(permissions::PageSettings::settings);
        let runtime = runtime.get_value();
        spawn_local(async move {
            if let Ok(runtime) = runtime.await {
                runtime.permission(settings);
            }
        });
    };
    let mode = RwSignal::new(gate.with_value(|gate| gate.settings().mode));
    let brake = RwSignal::new(gate.with_value(|gate| gate.settings().brake));
    // Bumped when stored settings were applied, so the rows show them.
    let applied = RwSignal::new(0_u64);
    let settings_error = RwSignal::new(None::<String>);
    // The mode, the brake and each tool's setting are the workspace's: read when
    // storage opens and again when another tab changes them.
    Effect::new(move |_| {
        storage.revisions.config.track();
        let Some(stores) = storage.stores.get() else {
            return;
        };
        spawn_local(async move {
            let Ok((stored, _)) = permissions::load(&stores).await else {
                return;
            };
            gate.with_value(|gate| gate.apply(&stored));
            publish();
            mode.set(stored.mode);
            brake.set(stored.brake);
            applied.update(|n| *n += 1);
        });
    });
    // `autonomy`: the tools' settings changed, else the mode or the brake.
    let save = move |autonomy: bool| {
        publish();
        let Some(stores) = storage.stores.get_untracked() else {
            return;
        };
        let settings = gate.with_value(|gate| gate.settings());
        spawn_local(async move {
            let saved = if autonomy {
                permissions::save_autonomy(&stores, &settings).await
            } else {
                permissions::save_settings(&stores, &settings).await
            };
            settings_error.set(saved.err());
        });
    };
    let on_mode = move |event: leptos::ev::Event| {
        let chosen = mode_from(&event_target_value(&event));
        gate.with_value(|gate| gate.set_mode(chosen));
        mode.set(chosen);
        save(false);
    };
    let on_brake = move |event: leptos::ev::Event| {
        let engaged = event_target_checked(&event);
        gate.with_value(|gate| gate.set_brake(engaged));
        brake.set(engaged);
        save(false);
    };
    let rows = move || {
        applied.track();
        tools
            .get()
            .into_iter()
            .map(|row| {
                let name = row.name.clone();
                let on_setting = move |event: leptos::ev::Event| {
                    let value = event_target_value(&event);
                    let setting = value.parse::<Autonomy>().ok();
                    gate.with_value(|gate| {
                        gate.set_autonomy(&name, setting);
                    });
                    save(true);
                };
                let current = gate.with_value(|gate| gate.settings().autonomy.get(&row.name).copied());
                let selected = |value: Option<Autonomy>| current == value;
                let blockable = row.name != RETURN_RESULT;
                view! {
                    <tr data-testid=format!("tool-{}", row.name)>
                        <td><code>{format!("tools.{}", row.name)}</code><div class="description">{row.description.clone()}</div></td>
                        <td><span class=format!("category category-{}", row.category)>{row.category.as_str()}</span></td>
                        <td class="module">{row.module.clone()}</td>
                        <td>
                            <select aria-label=format!("Setting for {}", row.name) data-testid=format!("setting-{}", row.name) on:change=on_setting>
                                <option value="" selected=selected(None)>"Follow the mode"</option>
                                <option value="auto" selected=selected(Some(Autonomy::Auto))>"Run without asking"</option>
                                <option value="ask" selected=selected(Some(Autonomy::Ask))>"Ask"</option>
                                {blockable.then(|| view! { <option value="block" selected=selected(Some(Autonomy::Block))>"Block"</option> })}
                            </select>
                        </td>
                    </tr>
                }
            })
            .collect_view()
    };
    view! {
        <details class="tools" data-testid="tool-list">
            <summary>{move || match catalog.get() {
                Ok(true) => format!("Tools and permissions ({} tools)", tools.with(Vec::len)),
                Ok(false) => "Tools and permissions (loading…)".to_owned(),
                Err(_) => "Tools and permissions (unavailable)".to_owned(),
            }}</summary>
            {move || catalog.get().err().map(|text| view! { <p class="failure" role="alert" data-testid="tools-error">{crate::said::said(text)}</p> })}
            <div class="permission-settings">
                <label>
                    "Mode "
                    <select data-testid="permission-mode" on:change=on_mode>
                        <option value="plan" prop:selected=move || mode.get() == Mode::Plan>"Plan — only read calls run"</option>
                        <option value="default" prop:selected=move || mode.get() == Mode::Default>"Default — ask before anything else"</option>
                        <option value="auto" prop:selected=move || mode.get() == Mode::Auto>"Auto — run without asking"</option>
                    </select>
                </label>
                <label class="brake">
                    <input type="checkbox" data-testid="brake" on:change=on_brake prop:checked=move || brake.get() />
                    " Auto-run brake (code-execution tools always ask)"
                </label>
            </div>
            {move || settings_error.get().map(|text| view! { <p class="failure" role="alert" data-testid="settings-error">{crate::said::said(text)}</p> })}
            <div class="tool-scroll">
                <table class="tool-table">
                    <thead><tr><th>"Tool"</th><th>"Category"</th><th>"From"</th><th>"Setting"</th></tr></thead>
                    <tbody>{rows}</tbody>
                </table>
            </div>
        </details>
    }
}

/// The MCP servers every run of this page mounts: the `default` agent's.
pub(crate) fn mounts(agent: &AgentRecord) -> Vec<McpMount> {
    agent
        .mcp
        .iter()
        .map(|server| McpMount {
            name: server.name.clone(),
            url: server.url.clone(),
            auth_secret: server.auth_secret.clone(),
        })
        .collect()
}

/// `agent` with the server `name` at `url` added, everything else as it
/// is, held to `AgentRecord::check`.
///
/// # Errors
///
/// A server of that name is there already, or the check's sentence.
pub(crate) fn with_server(
    agent: &AgentRecord,
    name: &str,
    url: &str,
) -> Result<AgentRecord, String> {
    if agent.mcp.iter().any(|server| server.name == name) {
        return Err(format!("A server named `{name}` is already added."));
    }
    let mut changed = agent.clone();
    changed.mcp.push(AgentServer {
        name: name.to_owned(),
        url: url.to_owned(),
        auth_secret: None,
    });
    changed.check()?;
    Ok(changed)
}

/// `agent` without the server `name`, everything else as it is.
pub(crate) fn without_server(agent: &AgentRecord, name: &str) -> AgentRecord {
    let mut changed = agent.clone();
    changed.mcp.retain(|server| server.name != name);
    changed
}

/// Changes the `default` agent with `change` and saves it at the version
/// read; if another tab saved it meanwhile (`conflict`), reads it again and
/// tries once more. Answers the agent as kept.
async fn change_default_agent(
    stores: &Stores,
    change: impl Fn(&AgentRecord) -> Result<AgentRecord, String>,
) -> Result<AgentRecord, ErrorText> {
    let mut tries = 0;
    loop {
        tries += 1;
        let agent: AgentRecord = stores
            .op("agents.get", json!({"slug": DEFAULT_AGENT}))
            .await
            .map_err(|problem| {
                ErrorText::with_prefix("the default agent could not be read: ", &problem)
            })?;
        let mut changed = change(&agent).map_err(ErrorText::plain)?;
        match stores.op::<Value>("agents.put", json!(changed)).await {
            Ok(answer) => {
                changed.version = answer["version"].as_u64().unwrap_or(changed.version);
                return Ok(changed);
            }
            Err(problem) if problem.code.as_deref() == Some("conflict") && tries < 2 => {}
            Err(problem) => return Err(ErrorText::new(&problem)),
        }
    }
}

/// MCP servers the person added by URL, kept as the `default` agent's MCP
/// servers (the Agents view shows them there too); their tools join the list.
#[component]
pub(crate) fn McpServers(
    sources: Sources,
    tools: ReadSignal<Vec<ToolRow>>,
    storage: storage::StorageSignals,
) -> impl IntoView {
    let (name, set_name) = signal(String::from("everything"));
    let (url, set_url) = signal(String::new());
    let (status, set_status) = signal(None::<(bool, String)>);
    let listed = RwSignal::new(Vec::<McpMount>::new());
    // One change at a time: a second submit while connecting would add it twice.
    let (connecting, set_connecting) = signal(false);
    let sources = StoredValue::new_local(sources);
    // Runs mount what is listed: the page's list follows the kept one.
    let adopt = move |servers: Vec<McpMount>| {
        listed.set(servers.clone());
        sources.with_value(|sources| {
            if *sources.servers.borrow() != servers {
                *sources.servers.borrow_mut() = servers;
                sources.refresh_tools();
            }
        });
    };
    // Read when storage opens and again when the configuration changes (the
    // Agents view, another tab).
    Effect::new(move |_| {
        storage.revisions.config.track();
        let Some(stores) = storage.stores.get() else {
            return;
        };
        spawn_local(async move {
            if let Ok(agent) = stores
                .op::<AgentRecord>("agents.get", json!({"slug": DEFAULT_AGENT}))
                .await
            {
                adopt(mounts(&agent));
            }
        });
    });
    let add = move || {
        let name = name.get_untracked().trim().to_owned();
        let url = url.get_untracked().trim().to_owned();
        if let Err(why) = check_server_name(&name) {
            set_status.set(Some((false, format!("The {why}."))));
            return;
        }
        if listed.with_untracked(|listed| listed.iter().any(|server| server.name == name)) {
            set_status.set(Some((
                false,
                format!("A server named `{name}` is already added."),
            )));
            return;
        }
        if connecting.get_untracked() {
            return;
        }
        set_connecting.set(true);
        set_status.set(Some((true, format!("Connecting to {url}…"))));
        let sources = sources.get_value();
        spawn_local(async move {
            // The runtime worker connects, lists the tools and closes: each
            // run then opens its own session.
            let connected = match sources.runtime.clone().await {
                Ok(runtime) => {
                    let (server, address) = (name.clone(), url.clone());
                    runtime
                        .call(move |id| kiln_types::runtime::ToRuntime::McpConnect {
                            id,
                            name: server,
                            url: address,
                        })
                        .await
                        .unwrap_or_else(|_| {
                            Err(Problem::bad_request("the runtime worker went away"))
                        })
                }
                Err(problem) => Err(Problem::bad_request(problem)),
            };
            match connected.map_err(|problem| problem.message) {
                Ok(answer) => {
                    let count = answer["tools"].as_array().map_or(0, Vec::len);
                    let found = format!(
                        "{name}: {} {} — {count} tools",
                        answer["server"]["name"].as_str().unwrap_or_default(),
                        answer["server"]["version"].as_str().unwrap_or_default()
                    );
                    match storage.stores.get_untracked() {
                        Some(stores) => {
                            let kept = change_default_agent(&stores, |agent| {
                                with_server(agent, &name, &url)
                            })
                            .await;
                            match kept {
                                Ok(agent) => {
                                    set_status.set(Some((
                                        true,
                                        format!("{found}; kept in this workspace."),
                                    )));
                                    adopt(mounts(&agent));
                                }
                                Err(why) => set_status.set(Some((
                                    false,
                                    format!("{found}, but it was not kept: {}", why.sentence()),
                                ))),
                            }
                        }
                        // Without storage the page keeps it until it is reloaded.
                        None => {
                            let mut servers = listed.get_untracked();
                            servers.push(McpMount {
                                name,
                                url,
                                auth_secret: None,
                            });
                            set_status.set(Some((true, format!("{found}; until the page is reloaded (storage is not available)."))));
                            adopt(servers);
                        }
                    }
                }
                Err(error) => set_status.set(Some((
                    false,
                    format!(
                        "Could not add `{name}`: {error}. Check the URL, that the server is \
                         running, and that it allows this page's origin (CORS)."
                    ),
                ))),
            }
            set_connecting.set(false);
        });
    };
    let remove = move |name: String| {
        if connecting.get_untracked() {
            return;
        }
        match storage.stores.get_untracked() {
            Some(stores) => {
                set_connecting.set(true);
                spawn_local(async move {
                    let kept =
                        change_default_agent(&stores, |agent| Ok(without_server(agent, &name)))
                            .await;
                    match kept {
                        Ok(agent) => {
                            set_status.set(Some((true, format!("Removed `{name}`."))));
                            adopt(mounts(&agent));
                        }
                        Err(why) => set_status.set(Some((
                            false,
                            format!("`{name}` was not removed: {}", why.sentence()),
                        ))),
                    }
                    set_connecting.set(false);
                });
            }
            None => {
                let mut servers = listed.get_untracked();
                servers.retain(|server| server.name != name);
                adopt(servers);
            }
        }
    };
    let count = move |server: &str| {
        let module = format!("mcp:{server}");
        tools.with(|tools| tools.iter().filter(|tool| tool.module == module).count())
    };
    view! {
        <details class="mcp" data-testid="mcp-servers">
            <summary>{move || match listed.with(Vec::len) {
                0 => "MCP servers".to_owned(),
                n => format!("MCP servers ({n})"),
            }}</summary>
            <p class="hint">"Every run and every turn of the default agent mounts these (Streamable HTTP); they are kept in this workspace as the default agent’s MCP servers (Agents → Kiln)."</p>
            <form class="mcp-form" on:submit=move |event| { event.prevent_default(); add(); }>
                <label>"Name "<input data-testid="mcp-name" prop:value=name on:input=move |e| set_name.set(event_target_value(&e)) /></label>
                <label>"URL "<input data-testid="mcp-url" type="url" placeholder="http://127.0.0.1:3001/mcp" prop:value=url on:input=move |e| set_url.set(event_target_value(&e)) /></label>
                <button type="submit" data-testid="mcp-add" disabled=connecting>"Add server"</button>
            </form>
            <p class="mcp-status" data-testid="mcp-status" role="status">
                {move || status.get().map(|(ok, text)| view! { <span class=if ok { "ok" } else { "failure" }>{crate::said::said(text)}</span> })}
            </p>
            <ul>
                <For each=move || listed.get() key=|server| (server.name.clone(), server.url.clone(), server.auth_secret.clone()) let:server>
                    {
                        let label = format!("Remove {}", server.name);
                        let target = server.name.clone();
                        let counted = server.name.clone();
                        let tools_line = move || match count(&counted) {
                            0 => " — no tools listed now (is it running?) ".to_owned(),
                            1 => " — 1 tool ".to_owned(),
                            n => format!(" — {n} tools "),
                        };
                        view! {
                            <li data-testid=format!("mcp-server-{}", server.name)>
                                <code>{server.name.clone()}</code>" at "{server.url.clone()}
                                {server.auth_secret.clone().map(|secret| format!(" (sends the secret {secret})"))}
                                <span data-testid="mcp-server-tools">{tools_line}</span>
                                <button type="button" class="secondary small" aria-label=label disabled=connecting
                                    on:click=move |_| remove(target.clone())>"Remove"</button>
                            </li>
                        }
                    }
                </For>
            </ul>
        </details>
    }
}

/// Whether agents whose profile says "may change its team" may add agents
/// to the workspace (`create_agent`): off until the person turns it on.
#[component]
pub(crate) fn TeamChanges(storage: storage::StorageSignals) -> impl IntoView {
    let allow = RwSignal::new(false);
    let problem = RwSignal::new(None::<ErrorText>);
    storage::follow_config(storage, move |config| {
        allow.set(config.settings.allow_team_changes);
    });
    let on_change = move |event: leptos::ev::Event| {
        let wanted = event_target_checked(&event);
        allow.set(wanted);
        problem.set(None);
        let Some(stores) = storage.stores.get_untracked() else {
            allow.set(!wanted);
            problem.set(Some(ErrorText::plain(
                "Storage is not available: this setting cannot be kept.",
            )));
            return;
        };
        spawn_local(async move {
            if let Err(why) = stores
                .act("config.team_changes", json!({"allow": wanted}))
                .await
            {
                allow.set(!wanted);
                problem.set(Some(ErrorText::with_prefix("Not saved: ", &why)));
            }
        });
    };
    view! {
        <div class="team-changes" data-testid="team-changes">
            <label class="inline">
                <input type="checkbox" data-testid="team-changes-allow" aria-describedby="team-changes-hint"
                    prop:checked=allow on:change=on_change disabled=move || storage.stores.with(Option::is_none) />
                "Agents marked ‘may change its team’ may add agents"
            </label>
            <p id="team-changes-hint" class="hint">"Off: no agent is offered create_agent, whatever its profile says. Each agent’s own setting is under Agents."</p>
            {move || problem.get().map(|error| storage::error_alert("team-changes-error", error))}
        </div>
    }
}

/// What programs may reach with `http_request`: off (a new workspace's
/// setting), any public address, or exactly the named origins. Kept in the
/// workspace's settings and followed from other tabs.
#[component]
pub(crate) fn NetworkSetting(sources: Sources, storage: storage::StorageSignals) -> impl IntoView {
    let sources = StoredValue::new_local(sources);
    let reach = RwSignal::new("off".to_owned());
    let origins = RwSignal::new(String::new());
    let problem = RwSignal::new(None::<String>);
    let show = move |network: &permissions::Network| {
        let (kind, list) = match network {
            permissions::Network::Off => ("off", String::new()),
            permissions::Network::Public => ("public", String::new()),
            permissions::Network::Only(list) => ("only", list.join(", ")),
        };
        reach.set(kind.to_owned());
        if kind == "only" {
            origins.set(list);
        }
    };
    let adopt = move |network: permissions::Network| {
        sources.with_value(|sources| {
            *sources.network.borrow_mut() = network;
            sources.refresh_tools();
        });
    };
    Effect::new(move |_| {
        storage.revisions.config.track();
        let Some(stores) = storage.stores.get() else {
            return;
        };
        spawn_local(async move {
            if let Ok((_, config)) = permissions::load(&stores).await {
                show(&config.settings.network);
                adopt(config.settings.network);
            }
        });
    });
    let apply = move || {
        let network = match reach.get_untracked().as_str() {
            "public" => permissions::Network::Public,
            "only" => match permissions::parse_origins(&origins.get_untracked()) {
                Ok(list) => permissions::Network::Only(list),
                Err(why) => {
                    problem.set(Some(why));
                    return;
                }
            },
            _ => permissions::Network::Off,
        };
        problem.set(None);
        // Adopted once it is kept (the worker checks the origins first); with
        // no storage, for this page only.
        match storage.stores.get_untracked() {
            Some(stores) => spawn_local(async move {
                match permissions::save_network(&stores, &network).await {
                    Ok(()) => adopt(network),
                    Err(why) => problem.set(Some(why)),
                }
            }),
            None => adopt(network),
        }
    };
    view! {
        <div class="network" data-testid="network">
            <div class="mcp-form">
                <label for="network-reach">"Network for programs"</label>
                <select
                    id="network-reach"
                    data-testid="network-reach"
                    prop:value=move || reach.get()
                    on:change=move |event| {
                        reach.set(event_target_value(&event));
                        if reach.get_untracked() != "only" {
                            apply();
                        }
                    }
                >
                    <option value="off">"Off: programs have no http_request"</option>
                    <option value="public">"Public addresses (never this machine or the local network)"</option>
                    <option value="only">"Only these origins…"</option>
                </select>
                <Show when=move || reach.get() == "only">
                    <input
                        type="text"
                        aria-label="Origins http_request may reach"
                        data-testid="network-origins"
                        placeholder="https://api.example.com, http://127.0.0.1:8080"
                        prop:value=move || origins.get()
                        on:input=move |event| origins.set(event_target_value(&event))
                    />
                    <button class="secondary small" data-testid="network-save" on:click=move |_| apply()>"Allow these"</button>
                </Show>
            </div>
            {move || problem.get().map(|why| view! {
                <p class="mcp-status" role="alert"><span class="failure" data-testid="network-error">{crate::said::said(why)}</span></p>
            })}
        </div>
    }
}

/// A reply's limits as the workspace keeps them (`None`: Kiln's defaults),
/// the context the chat reads when it sends a message.
#[derive(Clone, Copy)]
pub(crate) struct Limits(pub RwSignal<Option<TurnLimits>>);

/// Follows the stored limits: read when storage opens and again when any tab
/// changes the configuration. The signal changes only when the limits do, so
/// a change to another setting leaves what a person is typing in the form.
pub(crate) fn follow_limits(storage: storage::StorageSignals) -> Limits {
    let limits = RwSignal::new(None);
    storage::follow_config(storage, move |config| {
        if limits.get_untracked() != config.settings.turn_limits {
            limits.set(config.settings.turn_limits);
        }
    });
    Limits(limits)
}

/// A count a person typed (`20,000`, `20 000` and `20_000` alike).
fn count<T: std::str::FromStr>(text: &str, what: &str) -> Result<T, String> {
    let digits: String = text
        .chars()
        .filter(|c| !matches!(c, ',' | '_' | ' ' | '\u{a0}'))
        .collect();
    digits
        .parse()
        .map_err(|_| format!("{what}: `{}` is not a whole number", text.trim()))
}

/// The three fields of the form as limits, or what is wrong with one.
pub(crate) fn parse_limits(turns: &str, tokens: &str, usd: &str) -> Result<TurnLimits, String> {
    let max_turns = count(turns, "Model calls")?;
    let max_tokens = count(tokens, "Tokens")?;
    let dollars = usd.trim().trim_start_matches('$').trim();
    let max_cost_cents = match dollars.parse::<f64>() {
        Ok(value) if value.is_finite() && value >= 0.0 => (value * 100.0).round() as u64,
        _ => {
            return Err(format!(
                "Spend: `{}` is not an amount of USD (2.00, say)",
                usd.trim()
            ));
        }
    };
    let limits = TurnLimits {
        max_turns,
        max_tokens,
        max_cost_cents,
    };
    limits.check().map(|()| limits).map_err(|why| {
        let mut why = why;
        if let Some(first) = why.get_mut(0..1) {
            first.make_ascii_uppercase();
        }
        why
    })
}

/// What the limits allow, as a sentence.
pub(crate) fn limits_sentence(limits: TurnLimits) -> String {
    format!(
        "each reply may make {} model calls, use {} tokens and spend ${:.2}",
        limits.max_turns,
        kiln_types::permission::group_digits(limits.max_tokens),
        limits.max_cost_cents as f64 / 100.0
    )
}

/// Settings' models and a reply's limits: the chat's provider and model (the
/// same pick as the chat's), the model code nodes are written with, and how
/// many model calls, tokens and USD one reply of the chat may use.
#[component]
pub(crate) fn ModelsAndLimits(
    storage: storage::StorageSignals,
    providers: crate::provider_store::ProviderStore,
    limits: Limits,
) -> impl IntoView {
    let turns = RwSignal::new(String::new());
    let tokens = RwSignal::new(String::new());
    let usd = RwSignal::new(String::new());
    let code_model = RwSignal::new(String::new());
    let status = RwSignal::new(None::<Result<String, String>>);
    Effect::new(move |_| {
        let shown = limits.0.get().unwrap_or_else(TurnLimits::defaults);
        turns.set(shown.max_turns.to_string());
        tokens.set(kiln_types::permission::group_digits(shown.max_tokens));
        usd.set(format!("{:.2}", shown.max_cost_cents as f64 / 100.0));
    });
    // The field follows the stored model when that changes, not on every
    // change to the configuration (which would undo what is being typed).
    let stored_code_model = StoredValue::new(None::<Option<String>>);
    storage::follow_config(storage, move |config| {
        let stored = config.settings.code_model;
        if stored_code_model.get_value().as_ref() != Some(&stored) {
            code_model.set(stored.clone().unwrap_or_default());
            stored_code_model.set_value(Some(stored));
        }
    });
    let act = move |verb: &'static str, args: Value, done: String| {
        let Some(stores) = storage.stores.get_untracked() else {
            status.set(Some(Err(
                "Storage is not available: this setting cannot be kept.".to_owned(),
            )));
            return;
        };
        spawn_local(async move {
            status.set(Some(match stores.act(verb, args).await {
                Ok(()) => Ok(done),
                Err(why) => Err(ErrorText::with_prefix("Not saved: ", &why).sentence()),
            }));
        });
    };
    let save_limits = move || match parse_limits(
        &turns.get_untracked(),
        &tokens.get_untracked(),
        &usd.get_untracked(),
    ) {
        Ok(chosen) => act(
            "config.turn_limits",
            json!({"limits": chosen}),
            format!("Saved: {}.", limits_sentence(chosen)),
        ),
        Err(why) => status.set(Some(Err(why))),
    };
    let reset_limits = move || {
        act(
            "config.turn_limits",
            json!({"limits": null}),
            format!(
                "Kiln's limits again: {}.",
                limits_sentence(TurnLimits::defaults())
            ),
        );
    };
    let save_code_model = move || {
        let model = code_model.get_untracked().trim().to_owned();
        let done = if model.is_empty() {
            "Code nodes are written with the chat's model.".to_owned()
        } else {
            format!("Code nodes are written with {model}.")
        };
        act(
            "config.code_model",
            json!({"model": (!model.is_empty()).then_some(model)}),
            done,
        );
    };
    let provider_options = move || providers.options();
    let no_storage = move || storage.stores.with(Option::is_none);
    view! {
        <section class="models-limits" data-testid="models-limits" aria-labelledby="models-limits-title">
            <h3 id="models-limits-title">"Models and a reply's limits"</h3>
            <div class="field-row">
                <label for="settings-chat-model">"Chat model"</label>
                <select id="settings-chat-model" data-testid="settings-chat-model"
                    disabled=move || providers.entries().is_empty()
                    on:change=move |event| providers.pick(event_target_value(&event))>
                    {provider_options}
                </select>
            </div>
            <p class="hint">"What a new message goes to, unless its agent has a model of its own; the chat's own picker is the same setting."</p>
            <form class="field-row" on:submit=move |event| { event.prevent_default(); save_code_model(); }>
                <label for="settings-code-model">"Code model"</label>
                <input id="settings-code-model" type="text" data-testid="settings-code-model" autocomplete="off"
                    placeholder="The chat's model" prop:value=code_model
                    on:input=move |event| code_model.set(event_target_value(&event)) />
                <button type="submit" class="secondary small" data-testid="settings-code-model-save"
                    disabled=no_storage>"Save"</button>
            </form>
            <p class="hint">"The model Code nodes' Write code with AI asks, at the chat's provider; empty: the chat's model."</p>
            <form class="limits" data-testid="turn-limits" on:submit=move |event| { event.prevent_default(); save_limits(); }>
                <fieldset>
                    <legend>"A reply's limits"</legend>
                    <label>"Model calls"
                        <input type="text" inputmode="numeric" data-testid="limit-turns" prop:value=turns
                            on:input=move |event| turns.set(event_target_value(&event)) /></label>
                    <label>"Tokens"
                        <input type="text" inputmode="numeric" data-testid="limit-tokens" prop:value=tokens
                            on:input=move |event| tokens.set(event_target_value(&event)) /></label>
                    <label>"Spend (USD)"
                        <input type="text" inputmode="decimal" data-testid="limit-usd" prop:value=usd
                            on:input=move |event| usd.set(event_target_value(&event)) /></label>
                </fieldset>
                <div class="actions">
                    <button type="submit" data-testid="limits-save" disabled=no_storage>"Save limits"</button>
                    <button type="button" class="secondary" data-testid="limits-reset" disabled=no_storage
                        hidden=move || limits.0.with(Option::is_none)
                        on:click=move |_| reset_limits()>"Use Kiln's limits"</button>
                </div>
                <p class="hint">"Each message's reply stops, and says which limit it reached, when it has made this many model calls, used this many tokens (in and out) or spent this much. The caps line under a reply counts against them."</p>
            </form>
            {move || status.get().map(|said| match said {
                Ok(text) => view! { <p class="status success" data-testid="models-limits-status" role="status">{crate::said::said(text)}</p> }.into_any(),
                Err(text) => view! { <p class="status failure" data-testid="models-limits-status" role="alert">{crate::said::said(text)}</p> }.into_any(),
            })}
        </section>
    }
}

/// The Settings view: the providers the chat can use, the permissions every run
/// carries (with the tools a run gets), the network, the MCP servers, the
/// secrets, web search, team changes, and the workspace's data.
#[component]
pub(crate) fn Settings(
    sources: Sources,
    gate: permissions::PageSettings,
    tools: ReadSignal<Vec<ToolRow>>,
    storage: storage::StorageSignals,
    providers: crate::provider_store::ProviderStore,
    agents: WorkspaceAgents,
) -> impl IntoView {
    let vault = crate::secrets_panel::vault_listing(storage);
    view! {
        <section class="settings" data-testid="settings" aria-labelledby="settings-title">
            <h2 id="settings-title">"Settings"</h2>
            <crate::providers_panel::ProvidersPanel store=providers />
            {use_context::<Limits>().map(|limits| view! { <ModelsAndLimits storage=storage providers=providers limits=limits /> })}
            <Permissions gate=gate tools=tools catalog=sources.catalog
                runtime=sources.runtime.clone() storage=storage />
            <NetworkSetting sources=sources.clone() storage=storage />
            <McpServers sources=sources tools=tools storage=storage />
            <crate::secrets_panel::SecretsSettings storage=storage agents=agents vault=vault />
            <crate::secrets_panel::WebSearchSetting storage=storage vault=vault />
            <TeamChanges storage=storage />
            <crate::data_panel::DataSettings storage=storage />
        </section>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replys_limits_are_read_as_a_person_types_them_and_refused_by_name() {
        assert_eq!(
            parse_limits(" 8 ", "20,000", "$0.25"),
            Ok(TurnLimits {
                max_turns: 8,
                max_tokens: 20_000,
                max_cost_cents: 25
            })
        );
        assert_eq!(
            parse_limits("50", "1 500 000", "2").map(limits_sentence),
            Ok(
                "each reply may make 50 model calls, use 1,500,000 tokens and spend $2.00"
                    .to_owned()
            )
        );
        for (turns, tokens, usd, said) in [
            (
                "eight",
                "20000",
                "1",
                "Model calls: `eight` is not a whole number",
            ),
            (
                "0",
                "20000",
                "1",
                "A reply's model calls are 1 to 1000, not 0",
            ),
            ("5", "2.5", "1", "Tokens: `2.5` is not a whole number"),
            (
                "5",
                "999",
                "1",
                "A reply's tokens are 1,000 to 100,000,000, not 999",
            ),
            ("5", "20000", "-1", "Spend: `-1` is not an amount of USD"),
            (
                "5",
                "20000",
                "5000",
                "A reply's spend is $0.00 to $1,000.00",
            ),
        ] {
            let refused = parse_limits(turns, tokens, usd).unwrap_err();
            assert!(
                refused.starts_with(said),
                "{turns} {tokens} {usd}: {refused}"
            );
        }
    }

    fn agent_with_everything() -> AgentRecord {
        let mut agent = AgentRecord::default_agent();
        agent.system_prompt = "Answer briefly.".into();
        agent.provider = "mock".into();
        agent.model = "gpt-4o-mini".into();
        agent.skills = vec!["tidy-data".into()];
        agent.secrets = vec!["DOCS_TOKEN".into()];
        agent.autonomy.insert("echo".into(), Autonomy::Block);
        agent.mcp.push(AgentServer {
            name: "docs".into(),
            url: "https://docs.example/mcp".into(),
            auth_secret: Some("DOCS_TOKEN".into()),
        });
        agent.may_change_team = true;
        agent.version = 7;
        agent
    }

    #[test]
    fn adding_a_server_keeps_every_other_field_of_the_agent() {
        let agent = agent_with_everything();
        let changed =
            with_server(&agent, "everything", "http://127.0.0.1:3001/mcp").expect("added");
        let mut expected = agent.clone();
        expected.mcp.push(AgentServer {
            name: "everything".into(),
            url: "http://127.0.0.1:3001/mcp".into(),
            auth_secret: None,
        });
        assert_eq!(
            changed, expected,
            "the version read is what the write expects"
        );
        let removed = without_server(&changed, "everything");
        assert_eq!(removed, agent);
        assert_eq!(without_server(&agent, "nowhere"), agent);
    }

    #[test]
    fn a_server_is_refused_by_name_before_anything_is_written() {
        let agent = agent_with_everything();
        let twice = with_server(&agent, "docs", "https://other.example/mcp").unwrap_err();
        assert_eq!(twice, "A server named `docs` is already added.");
        let bad = with_server(&agent, "Everything", "http://127.0.0.1:3001/mcp").unwrap_err();
        assert!(
            bad.contains("server name `Everything` must be 1 to 32"),
            "{bad}"
        );
    }

    #[test]
    fn runs_mount_the_default_agents_servers_with_their_secrets() {
        let agent = agent_with_everything();
        assert_eq!(
            mounts(&agent),
            [McpMount {
                name: "docs".into(),
                url: "https://docs.example/mcp".into(),
                auth_secret: Some("DOCS_TOKEN".into()),
            }]
        );
        assert!(mounts(&AgentRecord::default_agent()).is_empty());
    }
}

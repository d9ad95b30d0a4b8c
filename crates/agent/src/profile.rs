//! An agent profile applied to a job (reference/003, "How a job runs"): the
//! entrance reads the agent's record and connects its provider; here the
//! record shapes the job.
//!
//! - Who the job is for: its memories are the agent's (`run.agent`).
//! - The system prompt: the agent's, then the caller's own text, both a
//!   preamble to Kiln's contract, never a replacement.
//! - Per-tool autonomy: for each tool the stricter of the agent's setting
//!   and the request's (block over ask over run without asking), so a page
//!   cannot loosen what the agent's owner tightened.
//! - MCP servers: the agent's are mounted beside the request's (a name the
//!   request already mounts stays the request's).
//! - The vault's secrets the agent may use join the job's scope.
//! - The team: an orchestrator may hand parts of the job to the other
//!   agents by slug ([`Member`]), each with its own prompt, model, autonomy,
//!   secrets and belt (made as it starts from the entrance's request,
//!   [`Bench`]: its own skills' unlocks and MCP servers, not its caller's),
//!   under the job's one budget and depth gate. An agent that is not an
//!   orchestrator has no team: the delegation tools take no `agent`.

use std::rc::Rc;

use kiln_capabilities::{Category, Registry, Secret, SecretScope, Source};
use kiln_providers::{ChatOptions, Provider, ProviderConfig};
use kiln_run::{Environment, McpMount, RunRequest, provider_config};
use kiln_store::config::Config;
use kiln_types::permission::Autonomy;
use kiln_types::profile::{AgentRecord, AgentRole};
use kiln_types::skill::Skill;
use serde_json::{Value, json};

/// Another agent of the workspace, ready to run as a sub-agent: its record,
/// its connected provider, the options of its model calls and the vault's
/// secrets it may use ([`open_vault`]).
pub struct Member {
    pub profile: AgentRecord,
    pub provider: Rc<dyn Provider>,
    pub options: ChatOptions,
    pub secrets: Vec<(String, Secret)>,
}

/// The agent a job runs as, the vault's secrets it may use, and the team it
/// may delegate to.
pub struct Profiled {
    pub agent: AgentRecord,
    pub secrets: Vec<(String, Secret)>,
    /// The workspace's other agents; only an orchestrator's are used.
    pub team: Vec<Member>,
}

/// What a team member's belt is made from (reference/003, "How a job
/// runs": each job's whitelist is computed from its own agent): the
/// entrance's request before any profile shaped it, the entrance's
/// environment and the skills catalog the job read.
pub struct Bench {
    pub(crate) entrance: RunRequest,
    pub(crate) environment: Environment,
    pub(crate) listed: Vec<Skill>,
}

/// A team member's belt: its registry, the MCP sessions opened for it (closed
/// when it ends), its secrets, the names its own profile brought, and a
/// sentence for each thing it asked for and did not get.
pub(crate) struct Belt {
    pub registry: Registry,
    pub servers: Vec<kiln_capabilities::mcp::McpServer>,
    pub secrets: SecretScope,
    pub own: Vec<String>,
    pub problems: Vec<String>,
}

/// Adds `secrets` to `run`'s scope (the vault's, for its agent); a name the
/// request itself gives keeps the request's.
pub(crate) fn add_secrets(
    run: &mut RunRequest,
    secrets: impl IntoIterator<Item = (String, Secret)>,
) {
    for (name, secret) in secrets {
        if !run.secrets.iter().any(|(given, _)| *given == name) {
            run.secrets.push((name, secret));
        }
    }
}

/// The names on `registry` that `run`'s profile brought beyond `entrance`,
/// the request it was shaped from: its MCP servers' tools, and
/// `http_request` when only a skill of the agent unlocked it. A member's belt
/// leaves them off and mounts its own.
pub(crate) fn brought(registry: &Registry, entrance: &RunRequest, run: &RunRequest) -> Vec<String> {
    let own_server = |server: &str| {
        run.mcp.iter().any(|mount| mount.name == server)
            && !entrance.mcp.iter().any(|mount| mount.name == server)
    };
    registry
        .specs()
        .filter(|spec| match &spec.source {
            Source::Mcp { server, .. } => own_server(server),
            Source::Builtin => {
                spec.name == kiln_capabilities::http_request::NAME && entrance.net().is_none()
            }
            Source::Host { .. } => false,
        })
        .map(|spec| spec.name.clone())
        .collect()
}

/// `member`'s belt over `base` (the caller's belt without the tools its own
/// profile brought): the always-on tools and the entrance's stay; the tools
/// `member`'s skills unlock and its MCP servers are mounted; its secrets are
/// the entrance's and its own from the vault.
pub(crate) async fn belt(bench: &Bench, member: &Member, mut base: Registry) -> Belt {
    let mut run = bench.entrance.clone();
    apply(&member.profile, &mut run, &mut None);
    add_secrets(&mut run, member.secrets.iter().cloned());
    let mut problems: Vec<String> =
        crate::skills::unlock(&mut run, &bench.listed, &member.profile.skills)
            .into_iter()
            .map(|problem| format!("agent `{}`: {problem}", member.profile.slug))
            .collect();
    let secrets = kiln_run::secret_scope(&run);
    let warned = base.warnings().len();
    let servers = kiln_run::mount_beyond(
        &run,
        &bench.entrance,
        &bench.environment,
        &secrets,
        &mut base,
    )
    .await;
    problems.extend(
        base.warnings()[warned..]
            .iter()
            .map(|warning| format!("agent `{}`: {}", member.profile.slug, warning.message)),
    );
    let own = brought(&base, &bench.entrance, &run);
    Belt {
        registry: base,
        servers,
        secrets,
        own,
        problems,
    }
}

/// The team a loop may hand work to: the workspace's agents other than the
/// one the loop runs as, when that one is an orchestrator; else none.
#[derive(Default)]
pub struct Team {
    /// Every agent a job of this workspace may reach, whoever runs.
    all: Rc<Vec<Rc<Member>>>,
    /// Those this loop may hand work to.
    members: Vec<Rc<Member>>,
}

impl Team {
    /// The team of a loop running as `slug` with `role`, out of `all`.
    fn for_agent(all: Rc<Vec<Rc<Member>>>, slug: &str, role: AgentRole) -> Self {
        let members = if role == AgentRole::Orchestrator {
            all.iter()
                .filter(|member| member.profile.slug != slug)
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        Self { all, members }
    }

    /// The team of a job run as `profiled`'s agent.
    pub(crate) fn of(profiled: Option<Profiled>) -> Self {
        match profiled {
            Some(Profiled { agent, team, .. }) => Self::for_agent(
                Rc::new(team.into_iter().map(Rc::new).collect()),
                &agent.slug,
                agent.role,
            ),
            None => Self::default(),
        }
    }

    /// The team of a loop running as `member`: the same workspace's agents
    /// other than itself, when it is an orchestrator too; else none.
    pub(crate) fn for_member(&self, member: &Member) -> Self {
        Self::for_agent(self.all.clone(), &member.profile.slug, member.profile.role)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub(crate) fn members(&self) -> &[Rc<Member>] {
        &self.members
    }

    /// The member `slug`, or a sentence naming the team.
    pub(crate) fn find(&self, slug: &str) -> Result<Rc<Member>, String> {
        if self.members.is_empty() {
            return Err(format!(
                "this agent has no team, so it cannot hand work to `{slug}`: only an orchestrator delegates to other agents; do this part yourself"
            ));
        }
        self.members
            .iter()
            .find(|member| member.profile.slug == slug)
            .cloned()
            .ok_or_else(|| {
                format!(
                    "there is no agent `{slug}` on this team; it has {}",
                    self.slugs()
                )
            })
    }

    /// The members' slugs, as a message lists them: "`ada`, `bob`".
    pub(crate) fn slugs(&self) -> String {
        self.members
            .iter()
            .map(|member| format!("`{}`", member.profile.slug))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The stricter of two settings: block over ask over run without asking.
#[must_use]
pub fn stricter(one: Autonomy, other: Autonomy) -> Autonomy {
    let rank = |autonomy: Autonomy| match autonomy {
        Autonomy::Auto => 0,
        Autonomy::Ask => 1,
        Autonomy::Block => 2,
    };
    if rank(other) > rank(one) { other } else { one }
}

/// Layers `agent`'s autonomy onto `autonomy`, each tool the stricter.
pub(crate) fn tighten(
    autonomy: &mut std::collections::BTreeMap<String, Autonomy>,
    agent: &AgentRecord,
) {
    for (tool, setting) in &agent.autonomy {
        autonomy
            .entry(tool.clone())
            .and_modify(|current| *current = stricter(*current, *setting))
            .or_insert(*setting);
    }
}

/// Shapes a job's belt and system text by `agent`: its memories, its
/// prompt before the caller's, its autonomy, its MCP servers.
pub(crate) fn apply(agent: &AgentRecord, run: &mut RunRequest, system: &mut Option<String>) {
    run.agent.clone_from(&agent.slug);
    let own = agent.system_prompt.trim();
    if !own.is_empty() {
        *system = Some(match system.take() {
            Some(caller) if !caller.trim().is_empty() => format!("{own}\n\n{}", caller.trim()),
            _ => own.to_owned(),
        });
    }
    tighten(&mut run.autonomy, agent);
    for server in &agent.mcp {
        if !run.mcp.iter().any(|mount| mount.name == server.name) {
            run.mcp.push(McpMount {
                name: server.name.clone(),
                url: server.url.clone(),
                category: Category::External,
                // The token goes by reference: the ladder fills it from the
                // job's secrets when it mounts the server.
                headers: server
                    .auth_secret
                    .iter()
                    .map(|secret| ("Authorization".to_owned(), format!("Bearer ${{{secret}}}")))
                    .collect(),
            });
        }
    }
}

/// How an entrance connects a provider (over its own HTTP client).
pub type Connect<'a> = &'a dyn Fn(ProviderConfig) -> Rc<dyn Provider>;

/// What an agent asks of the model: the provider (as a request gives it,
/// `{stored: NAME}`) when it names its own, and the model when it names one
/// or its provider has a saved one.
///
/// # Errors
///
/// A sentence when the agent names a provider the workspace does not keep.
pub async fn own_model(
    config: &Config,
    agent: &AgentRecord,
) -> Result<(Option<Value>, Option<String>), String> {
    let model = Some(agent.model.clone()).filter(|model| !model.is_empty());
    if agent.provider.is_empty() {
        return Ok((None, model));
    }
    let kept = config
        .providers()
        .await
        .map_err(|error| error.with_hint().to_string())?;
    let Some(provider) = kept.iter().find(|kept| kept.name == agent.provider) else {
        return Err(format!(
            "agent `{}` asks the provider `{}`, which this workspace does not keep; edit the agent or add the provider",
            agent.slug, agent.provider
        ));
    };
    let model = model.or_else(|| Some(provider.model.clone()).filter(|model| !model.is_empty()));
    Ok((Some(json!({"stored": agent.provider})), model))
}

/// The job's agent `slug` as the workspace keeps it, with its team when it
/// is an orchestrator: every other agent with its provider connected by
/// `connect` (its own, else the job's `provider`) and its model (its own,
/// its provider's saved one, else the job's). `None` when the workspace
/// has no such agent: the slug then names only whose memories the job
/// keeps.
///
/// # Errors
///
/// The store's failure, or an agent whose provider is not kept, by name.
pub async fn load(
    config: &Config,
    slug: &str,
    provider: &Rc<dyn Provider>,
    options: &ChatOptions,
    connect: Connect<'_>,
) -> Result<Option<Profiled>, String> {
    let agents = config
        .agents()
        .await
        .map_err(|error| error.with_hint().to_string())?;
    let Some(agent) = agents.iter().find(|agent| agent.slug == slug).cloned() else {
        return Ok(None);
    };
    let mut team = Vec::new();
    if agent.role == AgentRole::Orchestrator {
        for profile in agents {
            if profile.slug == agent.slug {
                continue;
            }
            let (own, model) = own_model(config, &profile).await?;
            let provider = match own {
                Some(value) => connect(
                    provider_config(Some(config), &value)
                        .await
                        .map_err(|error| format!("agent `{}`: {}", profile.slug, error))?,
                ),
                None => provider.clone(),
            };
            let options = ChatOptions {
                model: model.unwrap_or_else(|| options.model.clone()),
                ..options.clone()
            };
            team.push(Member {
                profile,
                provider,
                options,
                secrets: Vec::new(),
            });
        }
    }
    Ok(Some(Profiled {
        agent,
        secrets: Vec::new(),
        team,
    }))
}

/// The vault's secrets `agent` may use (those its profile names that the
/// vault gives it), each bound to its origins, for the job's scope; and a
/// sentence for each it names that it does not get.
///
/// # Errors
///
/// The store's or the sealer's failure.
pub async fn vault_secrets(
    vault: &kiln_store::vault::Vault,
    agent: &AgentRecord,
    now_ms: u64,
) -> Result<(Vec<(String, kiln_capabilities::Secret)>, Vec<String>), kiln_store::StoreError> {
    let (opened, problems) = vault.for_agent(&agent.slug, &agent.secrets, now_ms).await?;
    Ok((
        opened
            .into_iter()
            .map(|secret| {
                (
                    secret.name,
                    kiln_capabilities::Secret::for_origins(secret.value.expose(), secret.origins),
                )
            })
            .collect(),
        problems,
    ))
}

/// Opens the vault for `profiled`'s agent and each member of its team: the
/// secrets each may use go into its `secrets`; answers a sentence for each
/// secret one names and does not get.
///
/// # Errors
///
/// The store's or the sealer's failure.
pub async fn open_vault(
    profiled: &mut Profiled,
    vault: &kiln_store::vault::Vault,
    now_ms: u64,
) -> Result<Vec<String>, kiln_store::StoreError> {
    let (secrets, mut problems) = vault_secrets(vault, &profiled.agent, now_ms).await?;
    profiled.secrets = secrets;
    for member in &mut profiled.team {
        let (secrets, more) = vault_secrets(vault, &member.profile, now_ms).await?;
        member.secrets = secrets;
        let slug = &member.profile.slug;
        problems.extend(
            more.into_iter()
                .map(|problem| format!("agent `{slug}`: {problem}")),
        );
    }
    Ok(problems)
}

/// `create_agent`: an agent adds another to the workspace (and so to its
/// team). Mounted only when both gates are open (reference/003, "An agent
/// does not recompose its own team"): the workspace allows team changes and
/// this agent's profile has `may_change_team`. The new agent is a worker
/// that may not change its own team, so the grant does not spread.
pub(crate) struct CreateAgent {
    pub config: kiln_store::config::Config,
    /// Who made it, said in its record's name line.
    pub by: String,
}

impl CreateAgent {
    pub(crate) fn spec() -> kiln_capabilities::CapabilitySpec {
        crate::codeact::tools::builtin(
            CREATE_AGENT,
            "Adds an agent to the workspace, and so to your team: {slug, name, system_prompt, avatar?}. It is a worker (not an orchestrator) and cannot change its own team. Answers {slug, version}.",
            json!({
                "type": "object",
                "properties": {
                    "slug": {"type": "string", "description": "`a-z`, `0-9`, `-`: the handle you delegate to."},
                    "name": {"type": "string"},
                    "system_prompt": {"type": "string", "description": "Its instructions, layered before Kiln's contract."},
                    "avatar": {"type": "string"}
                },
                "required": ["slug", "name", "system_prompt"],
                "additionalProperties": false
            }),
            kiln_capabilities::Category::Write,
        )
    }
}

/// The team-changing tool's name.
pub(crate) const CREATE_AGENT: &str = "create_agent";

impl kiln_capabilities::Implementation for CreateAgent {
    fn call(
        &self,
        args: Value,
        _: kiln_capabilities::CallContext,
        _: kiln_capabilities::Permit,
    ) -> futures::future::LocalBoxFuture<'static, kiln_types::tool_result::ToolReply> {
        let config = self.config.clone();
        let by = self.by.clone();
        Box::pin(async move {
            let text = |name: &str| {
                args.get(name)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            let agent = AgentRecord {
                avatar: text("avatar"),
                system_prompt: text("system_prompt"),
                ..AgentRecord::new(text("slug"), text("name"))
            };
            agent
                .check()
                .map_err(|why| crate::codeact::tools::failure("invalid_arguments", why))?;
            let version = config.put_agent(&agent).await.map_err(|error| {
                if error.code() == "conflict" {
                    crate::codeact::tools::failure(
                        "agent_exists",
                        format!("there is already an agent `{}`; delegate to it, or choose another slug", agent.slug),
                    )
                } else {
                    kiln_capabilities::storage::store_failure(error)
                }
            })?;
            Ok(json!({"slug": agent.slug, "version": version, "created_by": by}))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_types::profile::AgentServer;

    #[test]
    fn the_agent_shapes_the_belt_and_cannot_be_loosened_by_the_request() {
        let mut agent = AgentRecord {
            system_prompt: "You are Ada. Answer in French.".into(),
            mcp: vec![AgentServer {
                name: "docs".into(),
                url: "https://docs.example/mcp".into(),
                auth_secret: None,
            }],
            autonomy: [
                ("publish".to_owned(), Autonomy::Block),
                ("echo".to_owned(), Autonomy::Ask),
            ]
            .into(),
            ..AgentRecord::new("ada", "Ada")
        };
        let mut run = RunRequest::new("");
        run.autonomy = [
            ("publish".to_owned(), Autonomy::Auto),
            ("echo".to_owned(), Autonomy::Block),
            ("other".to_owned(), Autonomy::Auto),
        ]
        .into();
        let mut system = Some("The page's own words.".to_owned());
        apply(&agent, &mut run, &mut system);
        assert_eq!(run.agent, "ada");
        assert_eq!(
            system.as_deref(),
            Some("You are Ada. Answer in French.\n\nThe page's own words.")
        );
        assert_eq!(
            run.autonomy["publish"],
            Autonomy::Block,
            "the agent's block holds"
        );
        assert_eq!(
            run.autonomy["echo"],
            Autonomy::Block,
            "the request's block holds"
        );
        assert_eq!(run.autonomy["other"], Autonomy::Auto);
        assert_eq!(run.mcp.len(), 1);
        assert_eq!(run.mcp[0].name, "docs");
        assert!(run.mcp[0].headers.is_empty());
        // A server with a token: its header names the secret, never a value.
        agent.mcp[0].auth_secret = Some("DOCS_TOKEN".into());
        let mut run = RunRequest::new("");
        apply(&agent, &mut run, &mut None);
        assert_eq!(
            run.mcp[0].headers,
            [(
                "Authorization".to_owned(),
                "Bearer ${DOCS_TOKEN}".to_owned()
            )]
        );
    }

    #[test]
    fn a_request_mount_of_the_same_name_stays_and_an_empty_prompt_adds_nothing() {
        let agent = AgentRecord {
            mcp: vec![AgentServer {
                name: "docs".into(),
                url: "https://docs.example/mcp".into(),
                auth_secret: None,
            }],
            ..AgentRecord::new("bob", "Bob")
        };
        let mut run = RunRequest::new("");
        run.mcp.push(McpMount {
            name: "docs".into(),
            url: "http://127.0.0.1:9/mcp".into(),
            category: Category::External,
            headers: Vec::new(),
        });
        let mut system = None;
        apply(&agent, &mut run, &mut system);
        assert_eq!(system, None);
        assert_eq!(run.mcp.len(), 1);
        assert_eq!(run.mcp[0].url, "http://127.0.0.1:9/mcp");
    }
}

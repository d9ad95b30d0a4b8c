//! MCP servers as a source of capabilities: each server's tools are mounted
//! under the server's name and walk the same ladder as every other tool.
//!
//! **Naming rule.** An MCP tool `T` of the server `S` is the capability
//! `S_T'`, where `T'` is `T` with every character that cannot stand in a
//! JavaScript identifier (anything but ASCII letters, digits, `_` and `$`)
//! replaced by `_`: `get-sum` of `everything` is `everything_get_sum`. Two
//! tools that map to one name are both made unavailable (the registry's
//! duplicate rule) rather than one silently winning.
//!
//! **Headers from secrets.** A run may give a server headers whose values name
//! the run's secrets (`{"Authorization": "Bearer ${DOCS_TOKEN}"}`, a
//! [`SecretTemplate`]). They are filled when the server is mounted
//! ([`connect`]) and sent on every exchange with it. A secret the run's scope
//! does not hold, or one bound to origins that do not include the server's,
//! refuses the server before anything is sent to it: a `tools_unavailable`
//! warning naming the server, the header and the secret (never a value), and
//! the run goes on without it. A secret bound to no origins may go: the run
//! named the server and the header itself, not its program. The client keeps
//! those secrets out of everything it answers ([`kiln_mcp::headers`]), and each
//! call of the server's tools counts as sending them, so the dispatcher scrubs
//! them from its answer whatever the program passed.
//!
//! A server that cannot be reached, or whose tool list cannot be read, is a
//! `tools_unavailable` warning and the run goes on with its other tools; a
//! tool whose input schema does not compile is `tool_entry_invalid`. MCP tools
//! are category `external` unless the host configures the server otherwise.
//! A `CallToolResult` answers the guest with its `structuredContent` when
//! present, else its text parts joined (else its content blocks); `isError`
//! rejects the call with code `tool_error` and the text as the message.

use std::rc::Rc;

use futures::future::LocalBoxFuture;
use kiln_http::HttpClient;
use kiln_mcp::{CallToolResult, Header, McpClient, McpError, McpTool, ServerInfo};
use kiln_types::Redacted;
use kiln_types::tool_result::{CallOutcome, ToolFailure, ToolReply, Warning};
use serde_json::{Value, json};

use crate::dispatch::{CallContext, Permit};
use crate::registry::{Implementation, Registry};
use crate::secrets::{SecretScope, SecretTemplate};
use crate::spec::{CapabilitySpec, Category, Source};

pub use kiln_mcp::headers::{check_header_name, fits_header_value};

/// The capability name of MCP tool `tool` on server `server`.
#[must_use]
pub fn tool_identifier(server: &str, tool: &str) -> String {
    let mapped: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '$' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{server}_{mapped}")
}

/// One connected server and the tools it listed.
pub struct McpServer {
    pub client: Rc<McpClient>,
    pub info: ServerInfo,
    pub tools: Vec<McpTool>,
    pub category: Category,
    /// The names of the run's secrets its headers carry: each call of its
    /// tools counts as sending them.
    pub secrets: Vec<String>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.client.name())
            .field("url", &kiln_mcp::shown_url(self.client.url()))
            .field("tools", &self.tools.len())
            .finish_non_exhaustive()
    }
}

/// Connects to `url` (initialize, then the whole tool list), with no headers
/// but the protocol's.
pub async fn try_connect(
    name: &str,
    url: &str,
    category: Category,
    http: Rc<dyn HttpClient>,
) -> Result<McpServer, McpError> {
    open(McpClient::new(name, url, http), category, Vec::new()).await
}

/// Connects `client` (initialize, then the whole tool list); `secrets` names
/// the run's secrets its headers carry.
async fn open(
    client: McpClient,
    category: Category,
    secrets: Vec<String>,
) -> Result<McpServer, McpError> {
    let client = Rc::new(client);
    let info = client.connect().await?;
    let tools = client.list_tools().await?;
    Ok(McpServer {
        client,
        info,
        tools,
        category,
        secrets,
    })
}

/// [`try_connect`] for a run, with `headers` (name → [`SecretTemplate`])
/// filled from the run's `secrets` and sent on every exchange. A header that
/// cannot be filled refuses the server before anything is sent (see the
/// module's doc); a server that does not answer is refused after. Either way
/// the `tools_unavailable` warning is what the run carries instead, and it
/// goes on with its other tools.
pub async fn connect(
    name: &str,
    url: &str,
    category: Category,
    headers: &[(String, String)],
    secrets: &SecretScope,
    http: Rc<dyn HttpClient>,
) -> Result<McpServer, Box<Warning>> {
    let filled = fill_headers(url, headers, secrets).map_err(|refusal| {
        unavailable(
            name,
            &format!(": {}; nothing was sent to it", refusal.message),
            refusal.reason,
        )
    })?;
    let names = filled
        .secrets
        .iter()
        .map(|(name, _)| name.clone())
        .collect();
    let client = McpClient::new(name, url, http)
        .with_headers(filled.headers)
        .with_secrets(filled.secrets);
    open(client, category, names).await.map_err(|error| {
        unavailable(
            name,
            &format!(" (a retry may succeed): {error}"),
            "unreachable",
        )
    })
}

/// The warning a run carries for server `name`, its message ending with `why`.
fn unavailable(name: &str, why: &str, reason: &str) -> Box<Warning> {
    Box::new(Warning {
        code: "tools_unavailable".into(),
        message: format!("the tools of MCP server `{name}` are unavailable for this run{why}"),
        module: Some(format!("mcp:{name}")),
        tool: None,
        index: None,
        reason: Some(reason.into()),
    })
}

/// A server's headers, filled, and the secrets they were filled from.
struct Filled {
    headers: Vec<Header>,
    secrets: Vec<(String, Redacted)>,
}

/// Why a server's headers could not be filled, and the warning's reason.
struct HeaderRefusal {
    message: String,
    reason: &'static str,
}

/// `headers` filled from `scope` for the server at `url`: each secret must be
/// in scope and may be sent to `url`.
fn fill_headers(
    url: &str,
    headers: &[(String, String)],
    scope: &SecretScope,
) -> Result<Filled, HeaderRefusal> {
    let mut filled = Filled {
        headers: Vec::new(),
        secrets: Vec::new(),
    };
    for (header, template) in headers {
        let refuse = |why: String, reason| HeaderRefusal {
            message: format!("its header `{header}` {why}"),
            reason,
        };
        let template = SecretTemplate::parse(template)
            .map_err(|why| refuse(format!("has {why}"), "invalid_header"))?;
        let value = template.fill(|name| {
            let secret = scope
                .get(name)
                .map_err(|why| refuse(format!("was not filled: {why}"), "secret_unavailable"))?;
            secret.allows(url).map_err(|why| {
                refuse(
                    format!("was not filled with the secret `{name}`: {why}"),
                    "secret_not_allowed",
                )
            })?;
            if !filled.secrets.iter().any(|(known, _)| known == name) {
                filled
                    .secrets
                    .push((name.to_owned(), Redacted::new(secret.expose())));
            }
            Ok(secret)
        })?;
        let header = Header::new(header.clone(), Redacted::new(value))
            .map_err(|error| refuse(format!("cannot be sent: {error}"), "invalid_header"))?;
        filled.headers.push(header);
    }
    Ok(filled)
}

/// Adds the server's tools to `registry`.
pub fn add_server(registry: &mut Registry, server: &McpServer) {
    let name = server.client.name().to_owned();
    for tool in &server.tools {
        let spec = CapabilitySpec {
            name: tool_identifier(&name, &tool.name),
            description: tool
                .description
                .clone()
                .or_else(|| tool.title.clone())
                .unwrap_or_default(),
            input_schema: tool.input_schema.clone(),
            category: server.category,
            result: tool.output_schema.clone().unwrap_or_else(|| json!({})),
            source: Source::Mcp {
                server: name.clone(),
                tool: tool.name.clone(),
                url: server.client.url().to_owned(),
            },
        };
        let implementation = McpCall {
            client: server.client.clone(),
            tool: tool.name.clone(),
            secrets: server.secrets.clone(),
        };
        // A schema that does not compile is already a warning in the registry.
        let _ = registry.add(spec, Rc::new(implementation));
    }
}

struct McpCall {
    client: Rc<McpClient>,
    tool: String,
    /// The run's secrets the server's headers carry.
    secrets: Vec<String>,
}

impl Implementation for McpCall {
    fn call(
        &self,
        args: Value,
        context: CallContext,
        _permit: Permit,
    ) -> LocalBoxFuture<'static, ToolReply> {
        let client = self.client.clone();
        let tool = self.tool.clone();
        // Every exchange with the server sends them: what the call answers is
        // scrubbed of them whatever the program passed (`SecretScope::for_reply`).
        for name in &self.secrets {
            let _in_scope = context.secret(name);
        }
        Box::pin(async move {
            let named = format!("{} (call {})", context.tool, context.call_number);
            match client.call_tool(&tool, args).await {
                Ok(result) => answer(&named, result),
                Err(error) => Err(ToolFailure {
                    code: match error {
                        McpError::Rpc { .. } => "mcp_error",
                        McpError::Timeout { .. } => "timeout",
                        _ => "mcp_unavailable",
                    }
                    .into(),
                    message: error.to_string(),
                    detail: None,
                    outcome: CallOutcome::Error,
                }),
            }
        })
    }
}

/// A `CallToolResult` as the guest sees it.
fn answer(named: &str, result: CallToolResult) -> ToolReply {
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|block| block.get("text").and_then(Value::as_str))
        .collect();
    if result.is_error {
        let text = texts.join("\n");
        return Err(ToolFailure {
            code: "tool_error".into(),
            message: if text.is_empty() {
                format!("{named} reported an error with no text")
            } else {
                format!("{named} reported an error: {text}")
            },
            detail: Some(json!({
                "content": result.content,
                "structuredContent": result.structured_content,
            })),
            outcome: CallOutcome::Error,
        });
    }
    if let Some(structured) = result.structured_content {
        return Ok(structured);
    }
    if !texts.is_empty() && texts.len() == result.content.len() {
        return Ok(Value::String(texts.join("\n")));
    }
    Ok(Value::Array(result.content))
}

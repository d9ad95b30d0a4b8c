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
use kiln_mcp::{CallToolResult, McpClient, McpError, McpTool, ServerInfo};
use kiln_types::tool_result::{CallOutcome, ToolFailure, ToolReply, Warning};
use serde_json::{Value, json};

use crate::dispatch::{CallContext, Permit};
use crate::registry::{Implementation, Registry};
use crate::spec::{CapabilitySpec, Category, Source};

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

/// Connects to `url` (initialize, then the whole tool list).
pub async fn try_connect(
    name: &str,
    url: &str,
    category: Category,
    http: Rc<dyn HttpClient>,
) -> Result<McpServer, McpError> {
    let client = Rc::new(McpClient::new(name, url, http));
    let info = client.connect().await?;
    let tools = client.list_tools().await?;
    Ok(McpServer {
        client,
        info,
        tools,
        category,
    })
}

/// [`try_connect`] for a run: a failure is the `tools_unavailable` warning
/// the run carries instead, and the run goes on with its other tools.
pub async fn connect(
    name: &str,
    url: &str,
    category: Category,
    http: Rc<dyn HttpClient>,
) -> Result<McpServer, Box<Warning>> {
    try_connect(name, url, category, http).await.map_err(|error| {
        Box::new(Warning {
            code: "tools_unavailable".into(),
            message: format!(
                "the tools of MCP server `{name}` are unavailable for this run (a retry may succeed): {error}"
            ),
            module: Some(format!("mcp:{name}")),
            tool: None,
            index: None,
            reason: Some("unreachable".into()),
        })
    })
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
        };
        // A schema that does not compile is already a warning in the registry.
        let _ = registry.add(spec, Rc::new(implementation));
    }
}

struct McpCall {
    client: Rc<McpClient>,
    tool: String,
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

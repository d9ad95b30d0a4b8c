//! An MCP client over Streamable HTTP, protocol revision 2025-06-18, and the
//! transport-free half of a server ([`server`]: reading JSON-RPC messages and writing the
//! answers, for `kiln mcp serve`).
//!
//! [`McpClient`] speaks to one server at one URL through the [`kiln_http::HttpClient`] seam,
//! so it runs natively and in the browser alike, under any executor (futures only, no
//! runtime). It covers what a tool-using agent needs: the initialization handshake, the
//! session, listing tools (all pages) and calling them, and closing.
//!
//! - `client`: [`McpClient`], one server and one session, requests over Streamable HTTP.
//! - [`headers`]: the headers a client sends beyond the protocol's own ([`Header`]: an
//!   `Authorization` filled from a secret), and how their secrets are kept out of what it
//!   answers.
//! - `reply`: finding the JSON-RPC response to one request in its reply: pure parsing.
//! - [`server`]: the transport-free half of an MCP server.
//!
//! Spec: <https://modelcontextprotocol.io/specification/2025-06-18>; each function cites
//! the section it implements. Replies are read as they arrive, up to the response (a
//! server may keep a stream open after it); a reply stream that ends before its response
//! is resumed with `Last-Event-ID`. A session opens its own stream (a GET) after the
//! handshake, read while a tool call waits. The client declares no capabilities (sampling,
//! elicitation, roots), so a request a server sends anyway, on a call's stream or the
//! session's, is answered at once with a JSON-RPC error naming it (`ping` with its empty
//! result): it costs the call nothing, where ignoring it would cost its whole timeout.
//!
//! **Invariant:** nothing a server sends can panic the client: every malformed reply is an
//! [`McpError`] naming the server, the method and what was wrong.
//!
//! **Invariant:** a secret a client was given ([`McpClient::with_secrets`]) leaves it in no
//! result and no error, whatever the server echoes; a header's value never prints.

mod client;
pub mod headers;
mod reply;
pub mod server;

pub use client::McpClient;
pub use headers::{Header, HeaderError};
pub use kiln_http::shown_url;

use serde::{Deserialize, Serialize};

/// The protocol revision this client asks for in `initialize`.
pub const PROTOCOL_VERSION: &str = "2025-06-18";

/// Revisions a server may answer with that this client can talk: ours, and 2025-03-26, the
/// first with Streamable HTTP (Lifecycle §Version Negotiation: any other, we disconnect).
pub const SUPPORTED_PROTOCOL_VERSIONS: [&str; 2] = [PROTOCOL_VERSION, "2025-03-26"];

/// Each HTTP exchange must bring its status and headers within this, and a reply's body
/// must not go silent for longer.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;

/// A reply larger than this is refused ([`McpError::Protocol`] names the cap).
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// `tools/list` follows at most this many pages (Utilities › Pagination leaves it open).
pub const MAX_TOOL_PAGES: usize = 100;

/// What `initialize` told about the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerInfo {
    pub name: String,
    pub version: String,
    /// The revision both sides now speak: one of [`SUPPORTED_PROTOCOL_VERSIONS`].
    pub protocol_version: String,
    /// Hints for the model on using this server, if it gave any.
    pub instructions: Option<String>,
}

/// One tool as `tools/list` describes it (Server Features › Tools §Tool).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpTool {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A JSON Schema object for the arguments.
    pub input_schema: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<serde_json::Value>,
}

/// What `tools/call` returned (Server Features › Tools §Tool Result). A tool that failed is
/// still a result, with `is_error` set and the failure in `content`, for the model to read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallToolResult {
    /// Content blocks (`text`, `image`, `audio`, `resource_link`, `resource`) as sent.
    #[serde(default)]
    pub content: Vec<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<serde_json::Value>,
    #[serde(default)]
    pub is_error: bool,
}

/// Why a call to an MCP server failed. Every message names the server; the variants say
/// whose fault it is: the network, the server's HTTP layer, its MCP layer, or the tool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    #[error("MCP server `{server}`: invalid URL `{url}`: {reason}")]
    InvalidUrl {
        server: String,
        url: String,
        reason: String,
    },
    /// Refused, DNS, reset, or (in the browser) a CORS refusal.
    #[error("MCP server `{server}` at `{url}` is unreachable: {message}")]
    Unreachable {
        server: String,
        url: String,
        message: String,
    },
    #[error("MCP server `{server}` at `{url}` did not answer `{method}` within {timeout_ms} ms")]
    Timeout {
        server: String,
        url: String,
        method: String,
        timeout_ms: u64,
    },
    /// An HTTP status that is not the protocol's; `body` holds its first 300 characters.
    #[error("MCP server `{server}` at `{url}` answered `{method}` with HTTP {status}: {body}")]
    Http {
        server: String,
        url: String,
        method: String,
        status: u16,
        body: String,
    },
    /// A reply that does not follow the protocol: not JSON, bad SSE, no result, too large...
    #[error("MCP server `{server}` sent a malformed reply to `{method}`: {message}")]
    Protocol {
        server: String,
        method: String,
        message: String,
    },
    /// A JSON-RPC error object, as the server sent it.
    #[error("MCP server `{server}` refused `{method}`: {message} (JSON-RPC error {code})")]
    Rpc {
        server: String,
        method: String,
        code: i64,
        message: String,
    },
    #[error(
        "MCP server `{server}` lost the session again right after a new one was opened\n\
         hint: the server may be restarting or refusing sessions; try again later"
    )]
    SessionLost { server: String },
}

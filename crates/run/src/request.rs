//! The run request: what the page API, the app, the runtime worker and the
//! CLI ask a program run for, read once by one parser.
//!
//! On the wire it is one JSON object (snake_case):
//!
//! ```json
//! {"code": "return 1", "limits": {"js_cpu_ms": 2000}, "agent": "default",
//!  "inputs": {"rows": [1, 2]}, "permission": {"mode": "default", "autonomy": {"add": "ask"}, "brake": false},
//!  "mcp": {"everything": "http://127.0.0.1:3001/mcp",
//!          "docs": {"url": "https://docs.example.com/mcp", "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}}},
//!  "secrets": {"API_KEY": {"value": "…", "origins": ["https://api.example.com"]}, "DOCS_TOKEN": "…"},
//!  "tools": {"echo": {"description": "…", "input_schema": {"type": "object"}, "category": "read"}},
//!  "builtins": ["http_request"], "allow_net": ["http://127.0.0.1:8080"], "key": "report-2026-12-01",
//!  "model": {"provider": {"kind": "openai", "base_url": "https://api.openai.com/v1", "key": "…"},
//!            "model": "gpt-4o-mini", "budget": {"calls": 10, "tokens": 20000, "usd": 0.05}}}
//! ```
//!
//! Every field but `code` may be left out. An unknown field, a value of the
//! wrong type or a setting the ladder would not honour is refused naming the
//! field (`permission.autonomy.add: …`), before anything runs. Limits are
//! clamped here, once ([`Limits`]).

use std::fmt;

use indexmap::IndexMap;
use kiln_capabilities::{Autonomy, Category, GateSettings, Mode, NetPolicy, Secret};
use kiln_types::RunLimits;
use serde_json::{Map, Value};

/// A run's limits, clamped into their documented ranges when made: whoever
/// holds a `Limits` need not clamp again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits(RunLimits);

impl Limits {
    #[must_use]
    pub fn new(limits: RunLimits) -> Self {
        Self(limits.clamped())
    }

    /// The clamped limits.
    #[must_use]
    pub fn get(self) -> RunLimits {
        self.0
    }
}

/// A built-in capability a run asks for by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    /// `http_request`: the network, under the run's [`NetPolicy`].
    HttpRequest,
}

impl Builtin {
    pub const ALL: [Self; 1] = [Self::HttpRequest];

    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::HttpRequest => kiln_capabilities::http_request::NAME,
        }
    }
}

/// A page tool as the request declares it; its `call` stays with the page,
/// which answers through the entrance's [`crate::ToolBridge`].
#[derive(Debug, Clone, PartialEq)]
pub struct ToolEntry {
    pub description: String,
    pub input_schema: Value,
    pub category: Category,
}

/// An MCP server to mount for the run, its tools named `<name>_<tool>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpMount {
    pub name: String,
    pub url: String,
    pub category: Category,
    /// Sent on every exchange with the server: a header's name and its value
    /// as a template whose `${NAME}` placeholders name the run's secrets
    /// (`("Authorization", "Bearer ${DOCS_TOKEN}")`), filled when the server
    /// is mounted ([`kiln_capabilities::mcp::connect`]). The templates hold no
    /// secret, so they print. At most 8.
    pub headers: Vec<(String, String)>,
}

/// The most headers one MCP server is given.
const MAX_MCP_HEADERS: usize = 8;

/// What one `mcp` entry may be, for the messages that name it.
const MCP_SHAPE: &str = "a URL string or {url, category?, headers?}";

/// The model a run's programs may ask (`tools.model`, `tools.classify`):
/// the provider given whole (`{kind, base_url, key?}`) or kept by the
/// workspace (`{stored: NAME}`), the model (a kept provider's saved one when
/// left out) and the run's model budget.
#[derive(Clone)]
pub struct ModelSetup {
    /// As given; checked when read, resolved when the ladder is assembled
    /// ([`crate::provider_config`]).
    pub provider: Value,
    pub model: Option<String>,
    pub budget: crate::ModelBudget,
}

/// What `model` may be, for the messages that name it.
const MODEL_SHAPE: &str =
    "{provider: {kind, base_url, key?} | {stored: NAME}, model?, budget?: {calls?, tokens?, usd?}}";

/// A checked run request.
#[derive(Clone)]
pub struct RunRequest {
    pub code: String,
    pub limits: Limits,
    /// Who the run's memories are saved for (`default` when not given).
    pub agent: String,
    /// Written to the run memory as `input:<name>` before the program starts.
    pub inputs: Map<String, Value>,
    /// The mode asked for; `None` is the entrance's rule ([`crate::People`]).
    pub mode: Option<Mode>,
    pub autonomy: std::collections::BTreeMap<String, Autonomy>,
    pub brake: bool,
    pub mcp: Vec<McpMount>,
    pub secrets: Vec<(String, Secret)>,
    /// The page's own tools, in the order given.
    pub tools: IndexMap<String, ToolEntry>,
    pub builtins: Vec<Builtin>,
    /// `allow_net`: the only origins `http_request` may reach (each allowed
    /// whatever its address, since the run named it). Naming origins asks
    /// for `http_request`.
    pub allow_net: Option<Vec<String>>,
    /// The caller's call key: a retry with the same key is the same run.
    pub key: Option<String>,
    /// The model the program's `tools.model` and `tools.classify` ask; no
    /// such tools without it.
    pub model: Option<ModelSetup>,
    /// What the history calls the run, when the entrance knows better than
    /// the program's first line (a code node's run: `node · Title`). Set by
    /// an entrance, never read from a request's JSON.
    pub title: Option<String>,
}

impl fmt::Debug for RunRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunRequest")
            .field("code", &self.code)
            .field("limits", &self.limits)
            .field("agent", &self.agent)
            .field("mode", &self.mode)
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .field("builtins", &self.builtins)
            .field("allow_net", &self.allow_net)
            .field("secrets", &self.secrets.len())
            .field(
                "model",
                &self
                    .model
                    .as_ref()
                    .map(|setup| (&setup.model, setup.budget)),
            )
            .finish_non_exhaustive()
    }
}

/// Why a request was refused: the field and what was wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RequestError(pub String);

impl AsRef<str> for RequestError {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

fn refuse<T>(message: impl Into<String>) -> Result<T, RequestError> {
    Err(RequestError(message.into()))
}

/// The fields a request may have, in the order the docs list them.
const FIELDS: [&str; 12] = [
    "code",
    "limits",
    "agent",
    "inputs",
    "permission",
    "mcp",
    "secrets",
    "tools",
    "builtins",
    "allow_net",
    "key",
    "model",
];

impl RunRequest {
    /// A request to run `code` with every other field at its default.
    #[must_use]
    pub fn new(code: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            limits: Limits::default(),
            agent: kiln_store::durable::DEFAULT_AGENT.to_owned(),
            inputs: Map::new(),
            mode: None,
            autonomy: std::collections::BTreeMap::new(),
            brake: false,
            mcp: Vec::new(),
            secrets: Vec::new(),
            tools: IndexMap::new(),
            builtins: Vec::new(),
            allow_net: None,
            key: None,
            model: None,
            title: None,
        }
    }

    /// Reads a request from its JSON text.
    ///
    /// # Errors
    ///
    /// The first thing wrong with it, naming the field.
    pub fn parse(text: &str) -> Result<Self, RequestError> {
        let value: Value = serde_json::from_str(text)
            .map_err(|error| RequestError(format!("the request is not JSON: {error}")))?;
        Self::from_value(value)
    }

    /// Reads a request from a JSON value.
    ///
    /// # Errors
    ///
    /// The first thing wrong with it, naming the field.
    pub fn from_value(value: Value) -> Result<Self, RequestError> {
        let Value::Object(fields) = value else {
            return refuse(format!(
                "takes one object {{{}}}, not {}",
                FIELDS.join(", "),
                kiln_types::words::json_type(&value)
            ));
        };
        for name in fields.keys() {
            if !FIELDS.contains(&name.as_str()) {
                return refuse(format!(
                    "`{name}` is not a field of a run request; expected one of {}",
                    FIELDS.join(", ")
                ));
            }
        }
        let mut request = match fields.get("code") {
            Some(Value::String(code)) => Self::new(code.clone()),
            Some(other) => {
                return refuse(format!(
                    "`code` must be a string (the program), not {}",
                    kiln_types::words::json_type(other)
                ));
            }
            None => return refuse("`code` is missing: give the program's text"),
        };
        for (name, value) in fields {
            if value.is_null() {
                continue;
            }
            match name.as_str() {
                "limits" => {
                    let limits = serde_json::from_value::<RunLimits>(value).map_err(|error| {
                        RequestError(format!("`limits` are not valid: {error}"))
                    })?;
                    request.limits = Limits::new(limits);
                }
                "agent" => request.agent = agent(&value)?,
                "inputs" => match value {
                    Value::Object(inputs) => request.inputs = inputs,
                    other => {
                        return refuse(format!(
                            "`inputs` must be an object {{name: value}}, not {}",
                            kiln_types::words::json_type(&other)
                        ));
                    }
                },
                "permission" => request.read_permission(value)?,
                "mcp" => request.mcp = mcp(value)?,
                "secrets" => request.secrets = secrets(value)?,
                "tools" => request.tools = tools(value)?,
                "builtins" => request.builtins = builtins(&value)?,
                "allow_net" => {
                    let origins = strings(&value, "allow_net", "origins")?;
                    NetPolicy::parse_origins(&origins)
                        .map_err(|why| RequestError(format!("`allow_net`: {why}")))?;
                    request.allow_net = Some(origins);
                }
                "key" => match value {
                    Value::String(key) if !key.trim().is_empty() => request.key = Some(key),
                    _ => return refuse("`key` must be a non-empty string"),
                },
                "model" => request.model = Some(model_setup(&value)?),
                _ => {}
            }
        }
        Ok(request)
    }

    /// The gate's settings this request asks for, with `mode` for a request
    /// that named none.
    ///
    /// # Errors
    ///
    /// A setting the ladder would not honour (blocking `return_result`).
    pub fn settings(&self, mode: Mode) -> Result<GateSettings, RequestError> {
        let settings = GateSettings {
            mode: self.mode.unwrap_or(mode),
            autonomy: self.autonomy.clone(),
            brake: self.brake,
        };
        settings
            .check()
            .map_err(|why| RequestError(format!("`permission.autonomy`: {why}")))?;
        Ok(settings)
    }

    /// What `http_request` may reach, or `None` when the run did not ask for
    /// the network: `allow_net` names exactly the origins; `builtins:
    /// ["http_request"]` alone is every public address.
    #[must_use]
    pub fn net(&self) -> Option<NetPolicy> {
        match &self.allow_net {
            // Checked when the request was read.
            Some(origins) => NetPolicy::parse_origins(origins).ok(),
            None => self
                .builtins
                .contains(&Builtin::HttpRequest)
                .then_some(NetPolicy::Public),
        }
    }

    fn read_permission(&mut self, value: Value) -> Result<(), RequestError> {
        let Value::Object(fields) = value else {
            return refuse("`permission` must be an object {mode?, autonomy?, brake?}");
        };
        for (name, value) in fields {
            match name.as_str() {
                "mode" => {
                    let mode = value
                        .as_str()
                        .ok_or_else(|| RequestError("`permission.mode` must be a string".into()))?;
                    self.mode = Some(
                        mode.parse()
                            .map_err(|why| RequestError(format!("`permission.mode`: {why}")))?,
                    );
                }
                "brake" => {
                    self.brake = value.as_bool().ok_or_else(|| {
                        RequestError("`permission.brake` must be true or false".into())
                    })?;
                }
                "autonomy" => {
                    let Value::Object(rules) = value else {
                        return refuse(
                            "`permission.autonomy` must be an object {tool: \"auto\" | \"ask\" | \"block\"}",
                        );
                    };
                    for (tool, rule) in rules {
                        let rule = rule.as_str().ok_or_else(|| {
                            RequestError(format!("`permission.autonomy.{tool}` must be a string"))
                        })?;
                        let rule = rule.parse().map_err(|why| {
                            RequestError(format!("`permission.autonomy.{tool}`: {why}"))
                        })?;
                        self.autonomy.insert(tool, rule);
                    }
                }
                other => {
                    return refuse(format!(
                        "`permission.{other}` is not a setting; expected mode, autonomy or brake"
                    ));
                }
            }
        }
        // Refuse a setting the ladder would not honour now, not at the first call.
        self.settings(Mode::Default).map(|_| ())
    }
}

/// Reads `model`: the provider checked now (a kept one is looked up when the
/// run starts), the model named unless the provider is a kept one.
fn model_setup(value: &Value) -> Result<ModelSetup, RequestError> {
    let Value::Object(fields) = value else {
        return refuse(format!("`model` must be an object {MODEL_SHAPE}"));
    };
    if let Some(unknown) = fields
        .keys()
        .find(|key| !["provider", "model", "budget"].contains(&key.as_str()))
    {
        return refuse(format!(
            "`model.{unknown}` is not a field of `model`: {MODEL_SHAPE}"
        ));
    }
    let provider = fields
        .get("provider")
        .cloned()
        .ok_or_else(|| RequestError(format!("`model.provider` is missing: {MODEL_SHAPE}")))?;
    let stored = provider.get("stored").is_some();
    if !stored {
        serde_json::from_value::<kiln_providers::ProviderConfig>(provider.clone()).map_err(
            |error| {
                RequestError(format!(
                    "`model.provider` is not valid ({error}): {}",
                    crate::PROVIDER_SHAPE
                ))
            },
        )?;
    }
    let model = match fields.get("model") {
        None | Some(Value::Null) => None,
        Some(Value::String(model)) if !model.trim().is_empty() => Some(model.clone()),
        Some(_) => return refuse("`model.model` must be a non-empty string (the model id)"),
    };
    if model.is_none() && !stored {
        return refuse(format!(
            "`model.model` is missing: name the model (only a kept provider has one saved): {MODEL_SHAPE}"
        ));
    }
    let budget = match fields.get("budget") {
        None | Some(Value::Null) => crate::ModelBudget::DEFAULT,
        Some(budget) => crate::ModelBudget::from_value(budget)
            .map_err(|why| RequestError(format!("`model.budget`: {why}")))?,
    };
    Ok(ModelSetup {
        provider,
        model,
        budget,
    })
}

fn agent(value: &Value) -> Result<String, RequestError> {
    match value.as_str() {
        Some(agent) if !agent.trim().is_empty() && agent.len() <= 128 => Ok(agent.to_owned()),
        _ => refuse("`agent` must be a non-empty string of at most 128 bytes"),
    }
}

fn strings(value: &Value, field: &str, what: &str) -> Result<Vec<String>, RequestError> {
    value
        .as_array()
        .and_then(|items| {
            items
                .iter()
                .map(|item| item.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
        })
        .ok_or_else(|| RequestError(format!("`{field}` must be an array of {what} (strings)")))
}

fn builtins(value: &Value) -> Result<Vec<Builtin>, RequestError> {
    let names = strings(value, "builtins", "built-in tool names")?;
    names
        .iter()
        .map(|name| {
            Builtin::ALL
                .into_iter()
                .find(|builtin| builtin.name() == name)
                .ok_or_else(|| {
                    let known: Vec<_> = Builtin::ALL.iter().map(|b| b.name()).collect();
                    RequestError(format!(
                        "`builtins`: `{name}` is not a built-in that is asked for by name; expected {}",
                        known.join(", ")
                    ))
                })
        })
        .collect()
}

fn category(value: Option<&Value>, field: &str) -> Result<Category, RequestError> {
    match value {
        None | Some(Value::Null) => Ok(Category::External),
        Some(Value::String(text)) => text
            .parse()
            .map_err(|why| RequestError(format!("`{field}`: {why}"))),
        Some(_) => refuse(format!("`{field}` must be a string")),
    }
}

/// `mcp: {name: url | {url, category?, headers?}}`.
fn mcp(value: Value) -> Result<Vec<McpMount>, RequestError> {
    let Value::Object(servers) = value else {
        return refuse("`mcp` must be an object {name: url | {url, category?, headers?}}");
    };
    let mut mounts = Vec::new();
    for (name, server) in servers {
        if !kiln_types::words::is_identifier(&name) {
            return refuse(format!(
                "`mcp.{name}`: a server name must be a JavaScript identifier, since it prefixes its tools' names"
            ));
        }
        let (url, category, headers) = match &server {
            Value::String(url) => (url.clone(), Category::External, Vec::new()),
            Value::Object(fields) => {
                if let Some(extra) = fields
                    .keys()
                    .find(|key| !["url", "category", "headers"].contains(&key.as_str()))
                {
                    return refuse(format!(
                        "`mcp.{name}.{extra}` is not a field; expected url, category or headers"
                    ));
                }
                let url = fields
                    .get("url")
                    .and_then(Value::as_str)
                    .ok_or_else(|| RequestError(format!("`mcp.{name}.url` must be a string")))?;
                let category = category(fields.get("category"), &format!("mcp.{name}.category"))?;
                let headers = match fields.get("headers") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(headers) => mcp_headers(headers, &format!("mcp.{name}.headers"))?,
                };
                (url.to_owned(), category, headers)
            }
            _ => return refuse(format!("`mcp.{name}` must be {MCP_SHAPE}")),
        };
        kiln_http::check_scheme(&url)
            .map_err(|error| RequestError(format!("`mcp.{name}`: {error}")))?;
        mounts.push(McpMount {
            name,
            url,
            category,
            headers,
        });
    }
    Ok(mounts)
}

/// `headers: {Name: "… ${SECRET} …"}` of one MCP server (named `field`):
/// names an MCP client may send, each once whatever its case, at most
/// [`MAX_MCP_HEADERS`], values that are templates whose written text may
/// stand in a header. Whether the secrets are in scope and may go to the
/// server is for the mount to say.
fn mcp_headers(value: &Value, field: &str) -> Result<Vec<(String, String)>, RequestError> {
    let Value::Object(entries) = value else {
        return refuse(format!(
            "`{field}` must be an object {{Name: value}}, a value's `${{NAME}}` naming a secret: \
             {{\"Authorization\": \"Bearer ${{DOCS_TOKEN}}\"}}"
        ));
    };
    if entries.len() > MAX_MCP_HEADERS {
        return refuse(format!(
            "`{field}` has {} headers; a server is given at most {MAX_MCP_HEADERS}",
            entries.len()
        ));
    }
    let mut headers: Vec<(String, String)> = Vec::new();
    for (name, template) in entries {
        kiln_capabilities::mcp::check_header_name(name)
            .map_err(|why| RequestError(format!("`{field}.{name}`: {why}")))?;
        if let Some((first, _)) = headers
            .iter()
            .find(|(known, _)| known.eq_ignore_ascii_case(name))
        {
            return refuse(format!(
                "`{field}.{name}`: the header is given twice (`{first}` and `{name}`)"
            ));
        }
        let Value::String(template) = template else {
            return refuse(format!(
                "`{field}.{name}` must be a string, its `${{NAME}}` naming a secret"
            ));
        };
        let parsed = kiln_capabilities::secrets::SecretTemplate::parse(template)
            .map_err(|why| RequestError(format!("`{field}.{name}` has {why}")))?;
        if !parsed
            .literal_parts()
            .all(kiln_capabilities::mcp::fits_header_value)
        {
            return refuse(format!(
                "`{field}.{name}` holds a line break or another control character"
            ));
        }
        headers.push((name.clone(), template.clone()));
    }
    Ok(headers)
}

/// `secrets: {NAME: value | {value, origins}}`.
fn secrets(value: Value) -> Result<Vec<(String, Secret)>, RequestError> {
    let Value::Object(entries) = value else {
        return refuse("`secrets` must be an object {NAME: value | {value, origins}}");
    };
    let mut secrets = Vec::new();
    for (name, entry) in entries {
        let secret = match entry {
            Value::String(value) => Secret::new(value),
            Value::Object(fields) => {
                if let Some(extra) = fields
                    .keys()
                    .find(|key| !["value", "origins"].contains(&key.as_str()))
                {
                    return refuse(format!(
                        "`secrets.{name}.{extra}` is not a field; expected value or origins"
                    ));
                }
                let value = fields.get("value").and_then(Value::as_str).ok_or_else(|| {
                    RequestError(format!(
                        "`secrets.{name}` must be a string or {{value, origins}}"
                    ))
                })?;
                let origins = match fields.get("origins") {
                    None => Vec::new(),
                    Some(origins) => {
                        strings(origins, &format!("secrets.{name}.origins"), "origins")?
                    }
                };
                for origin in &origins {
                    if kiln_capabilities::secrets::origin_of(origin).is_none() {
                        return refuse(format!(
                            "`secrets.{name}.origins`: `{origin}` is not an http(s) origin"
                        ));
                    }
                }
                Secret::for_origins(value, origins)
            }
            _ => {
                return refuse(format!(
                    "`secrets.{name}` must be a string or {{value, origins}}"
                ));
            }
        };
        secrets.push((name, secret));
    }
    Ok(secrets)
}

/// `tools: {name: {description?, input_schema?, category?, call?}}`; `call`
/// is the page's, and JSON leaves it out.
fn tools(value: Value) -> Result<IndexMap<String, ToolEntry>, RequestError> {
    let Value::Object(entries) = value else {
        return refuse(
            "`tools` must be an object of {name: {description, input_schema, category?, call}}",
        );
    };
    let mut tools = IndexMap::new();
    for (name, entry) in entries {
        let Value::Object(fields) = entry else {
            return refuse(format!(
                "`tools.{name}` must be an object {{description, input_schema, category?, call}}"
            ));
        };
        if let Some(extra) = fields.keys().find(|key| {
            !["description", "input_schema", "category", "call"].contains(&key.as_str())
        }) {
            return refuse(format!(
                "`tools.{name}.{extra}` is not a field; expected description, input_schema, category or call"
            ));
        }
        let description = match fields.get("description") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(text)) => text.clone(),
            Some(_) => return refuse(format!("`tools.{name}.description` must be a string")),
        };
        let input_schema = match fields.get("input_schema") {
            None | Some(Value::Null) => serde_json::json!({"type": "object"}),
            Some(schema @ (Value::Object(_) | Value::Bool(_))) => schema.clone(),
            Some(_) => {
                return refuse(format!(
                    "`tools.{name}.input_schema` must be a JSON Schema (an object)"
                ));
            }
        };
        let category = category(fields.get("category"), &format!("tools.{name}.category"))?;
        tools.insert(
            name,
            ToolEntry {
                description,
                input_schema,
                category,
            },
        );
    }
    Ok(tools)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> String {
        match RunRequest::parse(text) {
            Ok(request) => panic!("{text} was accepted: {request:?}"),
            Err(error) => error.0,
        }
    }

    #[test]
    fn bad_requests_are_refused_naming_the_field() {
        let cases = [
            ("[]", "takes one object"),
            ("{}", "`code` is missing"),
            (r#"{"code": 1}"#, "`code` must be a string"),
            (
                r#"{"code": "", "cod": 1}"#,
                "`cod` is not a field of a run request",
            ),
            (
                r#"{"code": "", "limits": {"cpu": 1}}"#,
                "`limits` are not valid: unknown field `cpu`",
            ),
            (
                r#"{"code": "", "limits": {"js_cpu_ms": "x"}}"#,
                "`limits` are not valid: invalid type",
            ),
            (
                r#"{"code": "", "agent": ""}"#,
                "`agent` must be a non-empty string",
            ),
            (
                r#"{"code": "", "inputs": []}"#,
                "`inputs` must be an object",
            ),
            (
                r#"{"code": "", "permission": {"mode": "yolo"}}"#,
                "`permission.mode`:",
            ),
            (
                r#"{"code": "", "permission": {"brake": "on"}}"#,
                "`permission.brake` must be true or false",
            ),
            (
                r#"{"code": "", "permission": {"autonomy": {"add": "run"}}}"#,
                "`permission.autonomy.add`:",
            ),
            (
                r#"{"code": "", "permission": {"autonomy": {"return_result": "block"}}}"#,
                "return_result cannot be blocked",
            ),
            (
                r#"{"code": "", "permission": {"color": 1}}"#,
                "`permission.color` is not a setting",
            ),
            (
                r#"{"code": "", "mcp": {"a-b": "http://x"}}"#,
                "`mcp.a-b`: a server name must be a JavaScript identifier",
            ),
            (
                r#"{"code": "", "mcp": {"a": "file:///etc"}}"#,
                "`mcp.a`: invalid URL",
            ),
            (
                r#"{"code": "", "mcp": {"a": {"url": "http://x", "kind": 1}}}"#,
                "`mcp.a.kind` is not a field",
            ),
            (
                r#"{"code": "", "mcp": {"a": {"url": "http://x", "category": "scary"}}}"#,
                "`mcp.a.category`:",
            ),
            (
                r#"{"code": "", "mcp": {"a": {"url": "http://x", "headers": ["Authorization"]}}}"#,
                "`mcp.a.headers` must be an object {Name: value}",
            ),
            (
                r#"{"code": "", "mcp": {"a": {"url": "http://x", "headers": {"X Key": "v"}}}}"#,
                "`mcp.a.headers.X Key`: `X Key` is not a header name",
            ),
            (
                r#"{"code": "", "mcp": {"a": {"url": "http://x", "headers": {"Mcp-Session-Id": "v"}}}}"#,
                "`mcp.a.headers.Mcp-Session-Id`: the MCP client sets the header `Mcp-Session-Id` itself",
            ),
            (
                r#"{"code": "", "mcp": {"a": {"url": "http://x", "headers": {"Cookie": "v"}}}}"#,
                "`mcp.a.headers.Cookie`: a browser does not let a page set the header `Cookie`",
            ),
            (
                r#"{"code": "", "mcp": {"a": {"url": "http://x", "headers": {"X-A": "v", "x-a": "w"}}}}"#,
                "`mcp.a.headers.x-a`: the header is given twice (`X-A` and `x-a`)",
            ),
            (
                r#"{"code": "", "mcp": {"a": {"url": "http://x", "headers": {"X-A": 1}}}}"#,
                "`mcp.a.headers.X-A` must be a string",
            ),
            (
                r#"{"code": "", "mcp": {"a": {"url": "http://x", "headers": {"X-A": "Bearer ${T"}}}}"#,
                "`mcp.a.headers.X-A` has `${` without a closing `}`",
            ),
            (
                r#"{"code": "", "mcp": {"a": {"url": "http://x", "headers": {"X-A": "${}"}}}}"#,
                "`mcp.a.headers.X-A` has `${}`, which names no secret",
            ),
            (
                r#"{"code": "", "mcp": {"a": {"url": "http://x", "headers": {"X-A": "a\r\nX-B: b"}}}}"#,
                "`mcp.a.headers.X-A` holds a line break",
            ),
            (
                r#"{"code": "", "mcp": {"a": {"url": "http://x", "headers": {"A": "", "B": "", "C": "", "D": "", "E": "", "F": "", "G": "", "H": "", "I": ""}}}}"#,
                "`mcp.a.headers` has 9 headers; a server is given at most 8",
            ),
            (
                r#"{"code": "", "secrets": {"K": 1}}"#,
                "`secrets.K` must be a string or {value, origins}",
            ),
            (
                r#"{"code": "", "secrets": {"K": {"value": "v", "origins": ["ftp://x"]}}}"#,
                "`secrets.K.origins`: `ftp://x` is not an http(s) origin",
            ),
            (
                r#"{"code": "", "tools": {"t": 1}}"#,
                "`tools.t` must be an object",
            ),
            (
                r#"{"code": "", "tools": {"t": {"schema": {}}}}"#,
                "`tools.t.schema` is not a field",
            ),
            (
                r#"{"code": "", "tools": {"t": {"input_schema": "x"}}}"#,
                "`tools.t.input_schema` must be a JSON Schema",
            ),
            (
                r#"{"code": "", "builtins": ["eval"]}"#,
                "`builtins`: `eval` is not a built-in",
            ),
            (
                r#"{"code": "", "builtins": "http_request"}"#,
                "`builtins` must be an array",
            ),
            (
                r#"{"code": "", "allow_net": [1]}"#,
                "`allow_net` must be an array of origins",
            ),
            (
                r#"{"code": "", "key": ""}"#,
                "`key` must be a non-empty string",
            ),
        ];
        for (text, expected) in cases {
            let message = refused(text);
            assert!(message.contains(expected), "{text}: {message}");
        }
    }

    #[test]
    fn a_full_request_is_read_with_its_limits_clamped_and_tools_in_order() {
        let request = RunRequest::parse(
            r#"{"code": "return 1", "limits": {"js_cpu_ms": 99999999, "tool_calls": 3},
                "agent": "ada", "inputs": {"rows": [1]},
                "permission": {"mode": "plan", "autonomy": {"zeta": "ask"}, "brake": true},
                "mcp": {"everything": "http://127.0.0.1:3001/mcp", "other": {"url": "http://127.0.0.1:1/mcp", "category": "read",
                        "headers": {"Authorization": "Bearer ${K}", "X-Team": "kiln"}}},
                "secrets": {"K": "v", "L": {"value": "w", "origins": ["https://api.example.com"]}},
                "tools": {"zeta": {"description": "z", "category": "read"}, "alpha": {}},
                "builtins": ["http_request"], "key": "k1"}"#,
        )
        .expect("a good request");
        assert_eq!(request.limits.get().js_cpu_ms, RunLimits::MAX_JS_CPU_MS);
        assert_eq!(request.limits.get().tool_calls, 3);
        assert_eq!(request.agent, "ada");
        assert_eq!(request.mode, Some(Mode::Plan));
        assert!(request.brake);
        assert_eq!(request.mcp[1].category, Category::Read);
        assert_eq!(request.mcp[0].headers, []);
        assert_eq!(
            request.mcp[1].headers,
            [
                ("Authorization".to_owned(), "Bearer ${K}".to_owned()),
                ("X-Team".to_owned(), "kiln".to_owned())
            ]
        );
        assert_eq!(request.secrets.len(), 2);
        assert_eq!(request.tools.keys().collect::<Vec<_>>(), ["zeta", "alpha"]);
        assert_eq!(request.tools["alpha"].category, Category::External);
        assert_eq!(request.net(), Some(NetPolicy::Public));
        assert_eq!(request.key.as_deref(), Some("k1"));
    }

    #[test]
    fn the_network_is_asked_for_by_name() {
        let net = |text: &str| RunRequest::parse(text).expect("good").net();
        assert_eq!(net(r#"{"code": ""}"#), None);
        assert_eq!(net(r#"{"code": "", "builtins": []}"#), None);
        assert_eq!(
            net(r#"{"code": "", "builtins": ["http_request"]}"#),
            Some(NetPolicy::Public)
        );
        assert!(matches!(
            net(r#"{"code": "", "allow_net": ["http://127.0.0.1:8080"]}"#),
            Some(NetPolicy::Only(_))
        ));
    }
}

//! The versioned messages between a host page that embeds Kiln's widget and
//! the widget itself (DESIGN: "the widget runs in its own origin"), and the
//! deployment's own settings (`widget.json`).
//!
//! The host page loads `widget.js` from Kiln's origin; it makes a launcher and,
//! when first opened, an iframe of `widget.html` from that origin. The two
//! talk only through `postMessage`, as JSON text in an
//! [`Envelope`](crate::protocol::Envelope) whose `v` is
//! [`WIDGET_PROTOCOL_VERSION`]: a message of another version, or one that does
//! not read, is refused by name ([`ToHost::Rejected`]) and changes nothing.
//!
//! The first message is the host's [`FromHost::Hello`]: the widget answers it
//! only when the message comes from its parent window and its origin is one
//! the deployment admits ([`Deployment::admits`]), and it pins that origin:
//! every later message must come from the same window and origin, and every
//! message the widget sends goes to that origin only. A host that is not
//! admitted gets [`ToHost::Refused`] and a widget that does nothing else.
//!
//! What the host page passes ([`WidgetOptions`]) never widens what the
//! deployment allows ([`Deployment::settle`]): the provider modes, the agents
//! and whether host tools may run without asking are the deployment's.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::protocol::DecodeError;

/// Bumped whenever a widget message changes shape; past the other protocols'
/// numbers, so a message of one sent down another's channel is refused by its
/// version.
/// Shape: 0xe7507fe8b2bd5039 at version 3001 (the hash of this file's message types; the
/// tidy test `protocol_shapes` fails when they change and this version does not).
pub const WIDGET_PROTOCOL_VERSION: u32 = 3001;

/// The longest a host tool's name may be (it becomes `host_<name>`).
pub const MAX_TOOL_NAME: usize = 48;

/// The most host tools one widget takes.
pub const MAX_HOST_TOOLS: usize = 32;

/// The longest text the host may send as a message, or a title or greeting.
pub const MAX_TEXT: usize = 16_000;

/// What the host page's tools are called in the agent's belt: `host_<name>`, a
/// prefix no other tool source uses.
pub const HOST_TOOL_PREFIX: &str = "host_";

/// From the host page to the widget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
/// (Variants without fields are written `{}` so that an unknown field is refused there
/// too.)
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum FromHost {
    /// The handshake, sent once the iframe has loaded: the host's options. The
    /// widget answers [`ToHost::Ready`] or [`ToHost::Refused`].
    Hello {
        #[serde(default)]
        options: WidgetOptions,
    },
    /// The panel was opened: the widget moves the focus into it.
    Open {},
    /// The panel was closed.
    Close {},
    /// A message from the person, as if typed (`widget.send(text)`).
    Send { text: String },
    /// Start a new conversation (`widget.newConversation()`).
    NewConversation {},
    /// A tool that runs in the host page (`widget.registerTool(...)`).
    RegisterTool { tool: HostTool },
    /// `widget.unregisterTool(name)`.
    UnregisterTool { name: String },
    /// The host tool call `call`'s answer: its value, or why it failed.
    ToolResult {
        call: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The answer to [`ToHost::TokenWanted`]: a short-lived token for the
    /// site's model endpoint, or why there is none.
    Token {
        request: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
}

/// What the host page asks of the widget (`KilnWidget.mount(options)`); what
/// `widget.js` itself uses (position, container, open) stays on the host's
/// side. Each is a wish: [`Deployment::settle`] decides.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WidgetOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub greeting: Option<String>,
    /// One of the deployment's agents, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Which model answers, among the modes the deployment allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<ProviderMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub theme: Option<Theme>,
    /// Tools registered before the iframe was there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<HostTool>,
    /// Whether the host page answers [`ToHost::TokenWanted`] (it passed `getToken`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub token: bool,
}

/// Who pays for the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderMode {
    /// Kiln's own small model in the visitor's browser: no key, nothing leaves
    /// the machine.
    Browser,
    /// The visitor's own provider and key, entered in the widget and kept only
    /// in the widget's storage.
    Visitor,
    /// The site owner's OpenAI-compatible endpoint (`widget.json`'s `site`).
    Site,
}

impl ProviderMode {
    pub const ALL: [Self; 3] = [Self::Browser, Self::Visitor, Self::Site];

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Browser => "browser",
            Self::Visitor => "visitor",
            Self::Site => "site",
        }
    }
}

/// The widget's look, as theme variables.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Theme {
    /// A CSS colour: `#rgb`, `#rrggbb`, or a named colour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accent: Option<String>,
    /// A CSS length in `px` or `rem`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub radius: Option<String>,
    /// A `font-family` list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub font: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<Scheme>,
}

/// Light, dark, or the visitor's system setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scheme {
    Light,
    Dark,
    Auto,
}

/// A tool that runs in the host page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostTool {
    pub name: String,
    pub description: String,
    /// A JSON Schema object for its arguments.
    #[serde(default = "empty_object_schema")]
    pub input_schema: Value,
    /// The host says it only reads (`annotations.readOnlyHint`); it may run
    /// without asking only when the deployment says so too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
}

fn empty_object_schema() -> Value {
    serde_json::json!({"type": "object"})
}

impl HostTool {
    /// The tool's name in the agent's belt.
    #[must_use]
    pub fn belt_name(&self) -> String {
        format!("{HOST_TOOL_PREFIX}{}", self.name)
    }

    /// Checks what the host page declared. `Err` names what is wrong.
    pub fn check(&self) -> Result<(), String> {
        let name = &self.name;
        if name.is_empty() || name.len() > MAX_TOOL_NAME {
            return Err(format!(
                "a host tool's name must have 1 to {MAX_TOOL_NAME} characters; `{}` has {}",
                crate::words::clip(name, 60),
                name.chars().count()
            ));
        }
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            || name.starts_with(|c: char| c.is_ascii_digit())
        {
            return Err(format!(
                "the host tool name `{}` may use only ASCII letters, digits and `_`, and may not \
                 start with a digit",
                crate::words::clip(name, 60)
            ));
        }
        if self.description.chars().count() > MAX_TEXT {
            return Err(format!(
                "the host tool `{name}`'s description is longer than {MAX_TEXT} characters"
            ));
        }
        if self.input_schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(format!(
                "the host tool `{name}`'s inputSchema must be a JSON Schema with `type: \"object\"`"
            ));
        }
        Ok(())
    }
}

/// The run request's `tools` and `permission.autonomy` for the host's tools: each a page
/// tool named `host_<name>`, a read-only one in the read category, and each asking the
/// person unless it is read-only and the deployment lets such tools run without asking.
#[must_use]
pub fn run_request_tools(tools: &[HostTool], read_only_run: bool) -> (Value, Value) {
    let mut catalog = serde_json::Map::new();
    let mut autonomy = serde_json::Map::new();
    for tool in tools {
        let category = if tool.read_only { "read" } else { "write" };
        catalog.insert(
            tool.belt_name(),
            serde_json::json!({
                "description": tool.description,
                "input_schema": tool.input_schema,
                "category": category,
            }),
        );
        let run = tool.read_only && read_only_run;
        autonomy.insert(tool.belt_name(), (if run { "auto" } else { "ask" }).into());
    }
    (Value::Object(catalog), Value::Object(autonomy))
}

/// From the widget to its host page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToHost {
    /// The handshake's answer: the widget serves this host, with these settings.
    Ready { provider: ProviderMode },
    /// The widget will not serve this host page (its origin is not admitted):
    /// it says so in its panel and does nothing else.
    Refused { reason: String },
    /// One message was refused, named; nothing changed.
    Rejected { reason: String },
    /// The person closed the panel from inside it (Esc, the close button).
    CloseRequested {},
    /// A finished reply: its text and, when the agent called `finish`, the value.
    Message {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<Value>,
    },
    /// A turn failed, or the widget could not start.
    Error { message: String },
    /// Run host tool `name` (without its `host_` prefix) with checked `args`;
    /// answer with [`FromHost::ToolResult`] naming `call`.
    ToolCall {
        call: u64,
        name: String,
        args: Value,
    },
    /// A short-lived token for the site's endpoint, for the next model request.
    TokenWanted { request: u64 },
}

/// Encodes a widget message for `postMessage`.
#[must_use]
pub fn encode<M: Serialize>(msg: M) -> String {
    crate::protocol::encode_versioned(msg, WIDGET_PROTOCOL_VERSION)
}

/// Decodes a widget message, refusing other versions and malformed ones by name.
pub fn decode<M: for<'de> Deserialize<'de>>(text: &str) -> Result<M, DecodeError> {
    crate::protocol::decode_versioned(text, WIDGET_PROTOCOL_VERSION)
}

/// The deployment's settings, `widget.json` beside `widget.html`; every field
/// may be left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Deployment {
    /// The host origins allowed to embed the widget (`https://shop.example`);
    /// `["*"]`, the default, admits any.
    #[serde(default = "any_origin")]
    pub origins: Vec<String>,
    /// The provider modes a host may pick, in order of preference: the first
    /// is the default.
    #[serde(default = "browser_only")]
    pub providers: Vec<ProviderMode>,
    /// The site's OpenAI-compatible endpoint, for [`ProviderMode::Site`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<SiteEndpoint>,
    /// The agents a host may pick by name; the first is the default. None: Kiln's
    /// own contract with no preamble.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<WidgetAgent>,
    /// Whether a host tool the host marks read-only runs without asking.
    #[serde(default)]
    pub read_only_tools_run_without_asking: bool,
    /// How long a host tool call waits for the host page's answer.
    #[serde(default = "default_tool_timeout")]
    pub tool_timeout_ms: u64,
}

/// The site owner's model endpoint: an OpenAI-compatible proxy the site runs,
/// so no site key is ever in the host page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiteEndpoint {
    /// Its base URL (`https://shop.example/api/kiln/v1`).
    pub base_url: String,
    pub model: String,
    /// A name for the provider list.
    #[serde(default = "site_name")]
    pub name: String,
}

/// An agent the deployment offers: its name and its preamble (a system text
/// before Kiln's contract; it cannot override it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WidgetAgent {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preamble: Option<String>,
}

fn any_origin() -> Vec<String> {
    vec!["*".to_owned()]
}

fn browser_only() -> Vec<ProviderMode> {
    vec![ProviderMode::Browser, ProviderMode::Visitor]
}

fn default_tool_timeout() -> u64 {
    30_000
}

fn site_name() -> String {
    "This site's model".to_owned()
}

impl Default for Deployment {
    fn default() -> Self {
        Self {
            origins: any_origin(),
            providers: browser_only(),
            site: None,
            agents: Vec::new(),
            read_only_tools_run_without_asking: false,
            tool_timeout_ms: default_tool_timeout(),
        }
    }
}

/// What the widget does for one host: the deployment's settings with the host's
/// wishes applied where the deployment allows them.
#[derive(Debug, Clone, PartialEq)]
pub struct Settled {
    pub provider: ProviderMode,
    /// The modes the visitor may switch between in the widget.
    pub providers: Vec<ProviderMode>,
    pub agent: Option<WidgetAgent>,
    pub title: String,
    pub greeting: Option<String>,
    pub theme: Theme,
    pub tools: Vec<HostTool>,
    /// The host page answers token requests for the site's endpoint.
    pub token: bool,
}

impl Deployment {
    /// Reads `widget.json`. `Err` names what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, String> {
        let deployment: Self =
            serde_json::from_str(text).map_err(|error| format!("widget.json: {error}"))?;
        deployment.check()?;
        Ok(deployment)
    }

    fn check(&self) -> Result<(), String> {
        for origin in &self.origins {
            if origin != "*" && !is_origin(origin) {
                return Err(format!(
                    "widget.json: `{origin}` in `origins` is not an origin (scheme://host[:port], \
                     nothing after it) or `*`"
                ));
            }
        }
        if self.providers.is_empty() {
            return Err("widget.json: `providers` names no provider mode".to_owned());
        }
        if self.providers.contains(&ProviderMode::Site) && self.site.is_none() {
            return Err(
                "widget.json: `providers` names `site` but there is no `site` endpoint".to_owned(),
            );
        }
        if let Some(site) = &self.site
            && !(site.base_url.starts_with("https://") || site.base_url.starts_with("http://"))
        {
            return Err(format!(
                "widget.json: the site endpoint `{}` is not an http(s) URL",
                site.base_url
            ));
        }
        Ok(())
    }

    /// Whether a host page of `origin` may embed the widget.
    #[must_use]
    pub fn admits(&self, origin: &str) -> bool {
        // An opaque origin (a sandboxed host frame, a `file:` page) is never admitted by
        // name, only by `*`.
        self.origins
            .iter()
            .any(|allowed| allowed == "*" || (allowed == origin && origin != "null"))
    }

    /// The host's options applied within what the deployment allows. `Err`
    /// names an option the deployment does not allow.
    pub fn settle(&self, options: &WidgetOptions) -> Result<Settled, String> {
        let provider = match options.provider {
            Some(mode) if self.providers.contains(&mode) => mode,
            Some(mode) => {
                return Err(format!(
                    "this Kiln's widget.json does not offer the `{}` provider (it offers {})",
                    mode.as_str(),
                    self.providers
                        .iter()
                        .map(|mode| format!("`{}`", mode.as_str()))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            None => self.providers[0],
        };
        let agent = match &options.agent {
            Some(name) => Some(
                self.agents
                    .iter()
                    .find(|agent| &agent.name == name)
                    .cloned()
                    .ok_or_else(|| {
                        format!("this Kiln's widget.json has no agent named `{name}`")
                    })?,
            ),
            None => self.agents.first().cloned(),
        };
        let text = |field: &str, value: &Option<String>| -> Result<Option<String>, String> {
            match value {
                Some(text) if text.chars().count() > MAX_TEXT => Err(format!(
                    "the `{field}` option is longer than {MAX_TEXT} characters"
                )),
                other => Ok(other.clone()),
            }
        };
        let theme = options.theme.clone().unwrap_or_default();
        check_theme(&theme)?;
        if options.tools.len() > MAX_HOST_TOOLS {
            return Err(format!(
                "a host may register at most {MAX_HOST_TOOLS} tools; it gave {}",
                options.tools.len()
            ));
        }
        for tool in &options.tools {
            tool.check()?;
        }
        Ok(Settled {
            provider,
            providers: self.providers.clone(),
            agent,
            title: text("title", &options.title)?.unwrap_or_else(|| "Kiln".to_owned()),
            greeting: text("greeting", &options.greeting)?,
            theme,
            tools: options.tools.clone(),
            token: options.token,
        })
    }
}

/// Whether `text` is a serialized origin: `scheme://host[:port]` with nothing after.
fn is_origin(text: &str) -> bool {
    let Some((scheme, rest)) = text.split_once("://") else {
        return false;
    };
    !scheme.is_empty()
        && scheme.chars().all(|c| c.is_ascii_lowercase())
        && !rest.is_empty()
        && !rest.contains(['/', '?', '#', '@', ' '])
}

/// Theme values go into CSS custom properties: each is held to its own small
/// grammar, so nothing but a colour, a length or a font list gets there.
fn check_theme(theme: &Theme) -> Result<(), String> {
    let bad = |field: &str, value: &str, what: &str| {
        Err(format!(
            "the theme's `{field}` `{}` is not {what}",
            crate::words::clip(value, 60)
        ))
    };
    if let Some(accent) = &theme.accent {
        let hex = accent.strip_prefix('#').is_some_and(|digits| {
            matches!(digits.len(), 3 | 4 | 6 | 8) && digits.chars().all(|c| c.is_ascii_hexdigit())
        });
        let named = !accent.is_empty()
            && accent.len() <= 20
            && accent.chars().all(|c| c.is_ascii_alphabetic());
        if !(hex || named) {
            return bad(
                "accent",
                accent,
                "a colour (#rgb, #rrggbb or a colour name)",
            );
        }
    }
    if let Some(radius) = &theme.radius {
        let number = radius
            .strip_suffix("px")
            .or_else(|| radius.strip_suffix("rem"))
            .filter(|number| number.len() <= 6);
        if !number.is_some_and(|number| {
            number
                .parse::<f32>()
                .is_ok_and(|n| (0.0..=64.0).contains(&n))
        }) {
            return bad("radius", radius, "a length in px or rem from 0 to 64");
        }
    }
    if let Some(font) = &theme.font
        && (font.len() > 200
            || !font
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || " ,-_'\"".contains(c)))
    {
        return bad(
            "font",
            font,
            "a font-family list (letters, digits, spaces, commas, quotes)",
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_and_refuses_other_versions_and_shapes_by_name() {
        let hello = FromHost::Hello {
            options: WidgetOptions {
                title: Some("Shop helper".into()),
                provider: Some(ProviderMode::Site),
                tools: vec![HostTool {
                    name: "read_cart".into(),
                    description: "The cart".into(),
                    input_schema: json!({"type": "object"}),
                    read_only: true,
                }],
                ..WidgetOptions::default()
            },
        };
        assert_eq!(decode::<FromHost>(&encode(&hello)), Ok(hello));
        let call = ToHost::ToolCall {
            call: 7,
            name: "read_cart".into(),
            args: json!({}),
        };
        assert_eq!(decode::<ToHost>(&encode(&call)), Ok(call));
        assert_eq!(
            decode::<FromHost>(r#"{"v":1003,"msg":{"type":"open"}}"#),
            Err(DecodeError::Version {
                found: 1003,
                expected: WIDGET_PROTOCOL_VERSION
            })
        );
        let unknown = decode::<FromHost>(r#"{"v":3001,"msg":{"type":"open","x":1}}"#)
            .expect_err("an unknown field");
        assert!(
            unknown.to_string().contains("unknown field `x`"),
            "{unknown}"
        );
        let kind = decode::<FromHost>(r#"{"v":3001,"msg":{"type":"launch"}}"#)
            .expect_err("an unknown message");
        assert!(
            kind.to_string().contains("unknown variant `launch`"),
            "{kind}"
        );
        assert!(decode::<FromHost>("hello").is_err());
    }

    #[test]
    fn the_deployment_admits_only_its_origins() {
        let any = Deployment::default();
        assert!(any.admits("https://shop.example"));
        let listed = Deployment::parse(r#"{"origins": ["https://shop.example"]}"#).unwrap();
        assert!(listed.admits("https://shop.example"));
        assert!(!listed.admits("https://evil.example"));
        assert!(!listed.admits("https://shop.example.evil.example"));
        assert!(!listed.admits("null"));
        let bad = Deployment::parse(r#"{"origins": ["https://shop.example/"]}"#).unwrap_err();
        assert!(bad.contains("`https://shop.example/`"), "{bad}");
        let unknown = Deployment::parse(r#"{"origin": []}"#).unwrap_err();
        assert!(unknown.contains("unknown field `origin`"), "{unknown}");
        let site = Deployment::parse(r#"{"providers": ["site"]}"#).unwrap_err();
        assert!(site.contains("no `site` endpoint"), "{site}");
    }

    #[test]
    fn host_options_never_widen_the_deployment() {
        let deployment = Deployment::parse(
            r#"{"providers": ["site", "browser"],
                "site": {"base_url": "https://shop.example/v1", "model": "m"},
                "agents": [{"name": "support", "preamble": "Be brief."}]}"#,
        )
        .unwrap();
        let settled = deployment.settle(&WidgetOptions::default()).unwrap();
        assert_eq!(settled.provider, ProviderMode::Site);
        assert_eq!(
            settled.agent.as_ref().map(|a| a.name.as_str()),
            Some("support")
        );
        assert_eq!(settled.title, "Kiln");
        let visitor = deployment
            .settle(&WidgetOptions {
                provider: Some(ProviderMode::Visitor),
                ..WidgetOptions::default()
            })
            .unwrap_err();
        assert!(
            visitor.contains("does not offer the `visitor` provider"),
            "{visitor}"
        );
        let agent = deployment
            .settle(&WidgetOptions {
                agent: Some("admin".into()),
                ..WidgetOptions::default()
            })
            .unwrap_err();
        assert!(agent.contains("no agent named `admin`"), "{agent}");
    }

    #[test]
    fn host_tools_ask_unless_read_only_and_allowed() {
        let tools = [
            HostTool {
                name: "read_product".into(),
                description: "The product".into(),
                input_schema: json!({"type": "object"}),
                read_only: true,
            },
            HostTool {
                name: "add_to_cart".into(),
                description: "Add".into(),
                input_schema: json!({"type": "object"}),
                read_only: false,
            },
        ];
        let (catalog, autonomy) = run_request_tools(&tools, true);
        assert_eq!(catalog["host_read_product"]["category"], "read");
        assert_eq!(catalog["host_add_to_cart"]["category"], "write");
        assert_eq!(
            autonomy,
            json!({"host_read_product": "auto", "host_add_to_cart": "ask"})
        );
        let (_, asked) = run_request_tools(&tools, false);
        assert_eq!(
            asked,
            json!({"host_read_product": "ask", "host_add_to_cart": "ask"})
        );
    }

    #[test]
    fn theme_values_and_tool_names_are_held_to_their_grammar() {
        let settle = |theme: Theme| {
            Deployment::default().settle(&WidgetOptions {
                theme: Some(theme),
                ..WidgetOptions::default()
            })
        };
        assert!(
            settle(Theme {
                accent: Some("#0a7".into()),
                radius: Some("12px".into()),
                font: Some("\"Inter\", sans-serif".into()),
                scheme: Some(Scheme::Dark),
            })
            .is_ok()
        );
        let accent = settle(Theme {
            accent: Some("red; background: url(x)".into()),
            ..Theme::default()
        })
        .unwrap_err();
        assert!(accent.contains("`accent`"), "{accent}");
        let radius = settle(Theme {
            radius: Some("calc(1px)".into()),
            ..Theme::default()
        })
        .unwrap_err();
        assert!(radius.contains("`radius`"), "{radius}");
        let tool = |name: &str| HostTool {
            name: name.into(),
            description: String::new(),
            input_schema: json!({"type": "object"}),
            read_only: false,
        };
        assert!(tool("add_to_cart").check().is_ok());
        assert!(
            tool("add-to-cart")
                .check()
                .unwrap_err()
                .contains("`add-to-cart`")
        );
        assert!(tool("").check().is_err());
        assert!(tool("1st").check().is_err());
        let mut schema = tool("x");
        schema.input_schema = json!({"type": "string"});
        assert!(schema.check().unwrap_err().contains("inputSchema"));
    }
}

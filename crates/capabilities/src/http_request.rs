//! `http_request`, the built-in fetch capability (category `external`):
//! http(s) only, under the run's fetch budgets (`RunLimits::fetch_calls`,
//! `fetch_body_bytes`, `fetch_timeout_ms`; the reference's 20 requests, 1 MB
//! and 15 s by default). `secret_headers` put secrets from the run's scope into
//! headers by name: `{"Authorization": "Bearer ${API_KEY}"}`. The guest never
//! sees the value, and the dispatcher scrubs it from whatever comes back. A
//! secret bound to origins is refused (`secret_not_allowed`) for any other.
//!
//! Where it may go is the run's [`NetPolicy`], checked before any byte is sent
//! (`address_refused`): every public address, or exactly the origins the run
//! named. The tool follows redirects itself, so each hop is checked the same
//! way: up to [`MAX_REDIRECTS`] (then `too_many_redirects`), each hop a request
//! of the run's budget (a redirect loop cannot send more than the budget
//! allows), each with the whole `fetch_timeout_ms`. As `fetch` does, a 303
//! (and a 301 or 302 answering a POST) becomes a GET without a body; when a hop
//! changes origin, the headers filled from secrets and `Authorization`,
//! `Cookie` and `Proxy-Authorization` are dropped. The answer's `url` is the
//! last one. In the browser `fetch` cannot show where a redirect leads without
//! following it, so a redirect is refused there (`redirect_refused`).

use std::net::IpAddr;
use std::rc::Rc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use futures::future::LocalBoxFuture;
use kiln_http::address::{AddressClass, Host, Origin, Scheme, Target, refusal_reason};
use kiln_http::{HttpClient, HttpError, Redirect, Request, Response};
use kiln_types::BYTES_KEY;
use kiln_types::tool_result::{CallOutcome, ToolFailure, ToolReply};
use serde_json::{Map, Value, json};

use crate::dispatch::{CallContext, Permit};
use crate::registry::Implementation;
use crate::secrets::{SecretScope, SecretTemplate};
use crate::spec::{CapabilitySpec, Category, Source};

pub const NAME: &str = "http_request";

/// The spec, as data.
#[must_use]
pub fn spec() -> CapabilitySpec {
    CapabilitySpec {
        name: NAME.into(),
        description: "Sends one HTTP(S) request and answers its status, headers and body, \
                      following redirects (`url` is the last one). Loopback, private, \
                      link-local and other non-public addresses are refused unless the run \
                      allows them by name. Each request and redirect counts against the run's \
                      request budget; the body is cut at the run's body budget \
                      (`truncated: true`)."
            .into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "An absolute http:// or https:// URL."},
                "method": {"type": "string", "enum": ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"], "default": "GET"},
                "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                "secret_headers": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                    "description": "Header values with ${NAME} replaced by the run's secret NAME."
                },
                "body": {
                    "description": "Text, or bytes as a Uint8Array.",
                    "anyOf": [
                        {"type": "string"},
                        {"type": "object", "properties": {"$bytes": {"type": "string"}}, "required": ["$bytes"], "additionalProperties": false}
                    ]
                },
                "response_type": {"type": "string", "enum": ["text", "bytes"], "default": "text"}
            },
            "required": ["url"],
            "additionalProperties": false
        }),
        category: Category::External,
        result: json!({
            "type": "object",
            "properties": {
                "url": {"type": "string"},
                "status": {"type": "integer"},
                "headers": {"type": "object"},
                "body": {"description": "Text (invalid UTF-8 replaced), or a Uint8Array for response_type bytes."},
                "truncated": {"type": "boolean"}
            }
        }),
        source: Source::Builtin,
    }
}

/// Redirects followed for one call; the next is `too_many_redirects`.
pub const MAX_REDIRECTS: u32 = 10;

/// Where `http_request` may go: a run's network reach, which it asks for by
/// name (the CLI's `--allow-net[=ORIGIN,...]`, the page's
/// `builtins: ["http_request"]`). There is no default: whoever mounts the tool
/// says which.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetPolicy {
    /// Any public address ([`AddressClass::Public`]), nothing loopback,
    /// private, link-local or otherwise not globally reachable. Natively every
    /// address a host name resolves to is checked as it is connected to; in the
    /// browser only addresses and `localhost` names written in URLs can be (see
    /// [`kiln_http::address`]).
    Public,
    /// Exactly these origins (`scheme://host[:port]`), each reached whatever
    /// its address, since the run named it; every other URL, public or not, is
    /// refused. Compared as origins: scheme and host case-insensitively, default
    /// ports filled in, a numeric host as the address it denotes. An entry that
    /// is not an origin matches nothing ([`NetPolicy::parse_origins`] names it).
    Only(Vec<String>),
}

/// How a URL the policy let through is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// Through [`HttpClient::send_public`]: what a name resolves to is checked too.
    PublicOnly,
    /// Named by the run: sent whatever its address.
    Named,
}

/// Why a URL is not sent, as the tool reports it.
struct Refusal {
    message: String,
    detail: Value,
}

impl NetPolicy {
    /// [`NetPolicy::Only`] these origins, written canonically. An entry is
    /// `scheme://host[:port]` (a trailing `/` allowed), or a bare
    /// `host[:port]`, which stands for both `http://` and `https://` (each on
    /// its default port when none is given). The error names the first entry
    /// that is neither and why. An empty list reaches nothing.
    pub fn parse_origins(list: &[String]) -> Result<Self, String> {
        let mut origins: Vec<String> = Vec::new();
        for entry in list {
            let entry = entry.trim();
            let parsed = if entry.contains("://") {
                vec![Origin::parse(entry)?]
            } else {
                let both = [Scheme::Http, Scheme::Https]
                    .map(|scheme| Origin::parse(&format!("{}://{entry}", scheme.as_str())));
                let [Ok(http), Ok(https)] = both else {
                    return Err(format!(
                        "`{entry}` is not an origin: write scheme://host[:port] \
                         (`http://127.0.0.1:8080`), or a bare host[:port] for both http and https"
                    ));
                };
                vec![http, https]
            };
            for origin in parsed {
                let origin = origin.to_string();
                if !origins.contains(&origin) {
                    origins.push(origin);
                }
            }
        }
        Ok(Self::Only(origins))
    }

    /// Whether `url` may be requested under this policy; the error says why
    /// not and how to allow it. (What a host name resolves to is checked as
    /// the request connects, not here.)
    pub fn check(&self, url: &str) -> Result<(), String> {
        let target = Target::parse(url).map_err(|error| error.to_string())?;
        self.decide(&target)
            .map(|_| ())
            .map_err(|refusal| refusal.message)
    }

    fn decide(&self, target: &Target) -> Result<Reach, Refusal> {
        let origin = target.origin();
        match self {
            Self::Public => match target.check_public() {
                Ok(()) => Ok(Reach::PublicOnly),
                Err(HttpError::AddressRefused {
                    host,
                    address,
                    class,
                    ..
                }) => Err(address_refusal(target, &host, address, class)),
                Err(other) => Err(Refusal {
                    message: other.to_string(),
                    detail: json!({"url": kiln_http::shown_url(target.url())}),
                }),
            },
            Self::Only(named) => {
                if named
                    .iter()
                    .any(|entry| Origin::parse(entry).is_ok_and(|entry| entry == *origin))
                {
                    return Ok(Reach::Named);
                }
                let class = origin.host.class();
                let names = if named.is_empty() {
                    "it names none".to_owned()
                } else {
                    format!("it names {}", named.join(", "))
                };
                let address = class
                    .map(|class| {
                        let host = origin.host.to_string();
                        format!("; {}", refusal_reason(&host, literal(&origin.host), class))
                    })
                    .unwrap_or_default();
                Err(Refusal {
                    message: format!(
                        "http_request to `{}` was refused before sending: the origin `{origin}` \
                         is not one this run allows ({names}){address}. {}",
                        kiln_http::shown_url(target.url()),
                        how_to_allow(origin)
                    ),
                    detail: refusal_detail(target, class, None),
                })
            }
        }
    }
}

fn how_to_allow(origin: &Origin) -> String {
    format!("To allow it, name it: `--allow-net={origin}`, or the run's allow list")
}

/// The address written as `host`, if it is one.
fn literal(host: &Host) -> Option<IpAddr> {
    match host {
        Host::Ip(ip) => Some(*ip),
        Host::Name(_) => None,
    }
}

fn refusal_detail(target: &Target, class: Option<AddressClass>, address: Option<IpAddr>) -> Value {
    let origin = target.origin();
    json!({
        "url": kiln_http::shown_url(target.url()),
        "origin": origin.to_string(),
        "host": origin.host.to_string(),
        "address": address.or(literal(&origin.host)).map(|ip| ip.to_string()),
        "class": class.map(AddressClass::as_str),
    })
}

/// A host that is not public, reached without being named.
fn address_refusal(
    target: &Target,
    host: &str,
    address: Option<IpAddr>,
    class: AddressClass,
) -> Refusal {
    Refusal {
        message: format!(
            "http_request to `{}` was refused before sending: {}, and only public addresses \
             are reached unless the run names them. {}",
            kiln_http::shown_url(target.url()),
            refusal_reason(host, address, class),
            how_to_allow(target.origin())
        ),
        detail: refusal_detail(target, Some(class), address),
    }
}

/// The implementation, over the platform's HTTP client, under the run's
/// [`NetPolicy`].
pub struct HttpRequest {
    http: Rc<dyn HttpClient>,
    policy: Rc<NetPolicy>,
    /// The origins of the run's MCP servers, which it never reaches directly.
    mcp: Rc<Vec<Origin>>,
}

impl HttpRequest {
    #[must_use]
    pub fn new(http: Rc<dyn HttpClient>, policy: NetPolicy) -> Self {
        Self::beside_mcp(http, policy, &[])
    }

    /// One that also refuses the origins of `mcp_endpoints`, the MCP servers
    /// the run mounts: their tools go through the ladder one by one (a blocked
    /// or ask-only tool among them included), and JSON-RPC sent to them
    /// straight from `http_request` would step around it.
    #[must_use]
    pub fn beside_mcp(
        http: Rc<dyn HttpClient>,
        policy: NetPolicy,
        mcp_endpoints: &[String],
    ) -> Self {
        let mcp = mcp_endpoints
            .iter()
            .filter_map(|url| {
                Target::parse(url)
                    .ok()
                    .map(|target| target.origin().clone())
            })
            .collect();
        Self {
            http,
            policy: Rc::new(policy),
            mcp: Rc::new(mcp),
        }
    }
}

/// Refuses `target` when it is on an MCP server's origin the run mounts.
fn refuse_mcp(target: &Target, mcp: &[Origin]) -> Result<(), ToolFailure> {
    let origin = target.origin();
    if !mcp.contains(origin) {
        return Ok(());
    }
    Err(ToolFailure {
        code: "address_refused".into(),
        message: format!(
            "http_request to `{}` was refused before sending: `{origin}` is an MCP server this \
             run mounts, whose tools it calls as tools (each through the permission ladder), \
             never by sending it requests directly",
            kiln_http::shown_url(target.url())
        ),
        detail: Some(
            json!({"url": kiln_http::shown_url(target.url()), "origin": origin.to_string(), "class": "mcp"}),
        ),
        outcome: CallOutcome::Refused,
    })
}

fn failure(code: &str, message: String) -> ToolFailure {
    ToolFailure {
        code: code.into(),
        message,
        detail: None,
        outcome: CallOutcome::Error,
    }
}

fn refused(refusal: Refusal) -> ToolFailure {
    ToolFailure {
        code: "address_refused".into(),
        message: refusal.message,
        detail: Some(refusal.detail),
        outcome: CallOutcome::Refused,
    }
}

/// `${NAME}` in `template` replaced by the scoped secret NAME
/// ([`SecretTemplate`]). A secret that names its origins goes only there; one
/// that names none goes only where the run names its origins too
/// ([`NetPolicy::Only`]): under [`NetPolicy::Public`] it is not sent at all,
/// since "any public address" would be anywhere the program asks.
fn fill(
    template: &str,
    url: &str,
    policy: &NetPolicy,
    context: &CallContext,
) -> Result<String, ToolFailure> {
    let template = SecretTemplate::parse(template)
        .map_err(|why| failure("invalid_arguments", format!("a secret header has {why}")))?;
    template.fill(|name| {
        let secret = context
            .secret(name)
            .map_err(|why| failure("secret_unavailable", why))?;
        secret.allows(url).map_err(|why| {
            failure(
                "secret_not_allowed",
                format!("the secret `{name}` was not sent: {why}"),
            )
        })?;
        if !secret.names_origins() && *policy == NetPolicy::Public {
            return Err(failure(
                "secret_not_allowed",
                format!(
                    "the secret `{name}` was not sent: it names no origins, and this run may \
                     reach any public address, so it would go wherever the program asks; give \
                     it the origins it is for ({{value, origins}} in the page API, \
                     `--secret {name}@https://…` in the CLI) or name the run's origins"
                ),
            ));
        }
        Ok(secret)
    })
}

/// A response body as the program gets it: `scrubbed` (the run's secrets
/// already scrubbed out of the bytes, before anything encodes them) cut at
/// `limit`. The body was read past `limit` by more than the longest secret,
/// so a secret that begins before the cut was there whole and scrubbed whole,
/// never left as a prefix; a cut that would split a `[redacted:NAME]` keeps
/// it whole. Answers the bytes and whether they were cut.
fn cut_body(
    secrets: &SecretScope,
    mut scrubbed: Vec<u8>,
    cut: bool,
    limit: usize,
) -> (Vec<u8>, bool) {
    if scrubbed.len() <= limit {
        return (scrubbed, cut);
    }
    let mut end = limit;
    let marker = b"[redacted:";
    let from = limit.saturating_sub(secrets.longest() + marker.len() + 64);
    let mut search = from;
    while let Some(at) = memchr::memmem::find(&scrubbed[search..], marker) {
        let start = search + at;
        if start >= end {
            break;
        }
        if let Some(close) = memchr::memchr(b']', &scrubbed[start..]) {
            end = end.max(start + close + 1);
        }
        search = start + 1;
    }
    scrubbed.truncate(end);
    (scrubbed, true)
}

/// Refuses a response that carries a secret this request sent in a form the
/// exact scrub does not replace ([`kiln_http::reflection`]): percent-encoded,
/// escaped, in another case, as base64 or hex. A server that reflects what it
/// was sent would hand the program the secret, so the program gets none of
/// the response (the request was sent; its status is named). A secret the
/// program put into the call's arguments itself (`passed`, in any form) is not
/// looked for: its echo tells the program only what it wrote, and refusing it
/// would confirm a guess.
fn refuse_reflection(
    context: &CallContext,
    scrub: &SecretScope,
    passed: &str,
    status: u16,
    url: &str,
    headers: &Map<String, Value>,
    body: &[u8],
) -> Result<(), ToolFailure> {
    let url = scrub.redact_text(url);
    let headers: Vec<(&String, String)> = headers
        .iter()
        .map(|(name, value)| (name, scrub.redact_text(value.as_str().unwrap_or_default())))
        .collect();
    for name in context.used_secrets.borrow().iter() {
        let Ok(secret) = context.secrets.get(name) else {
            continue;
        };
        let value = secret.expose().as_bytes();
        if memchr::memmem::find(passed.as_bytes(), value).is_some()
            || kiln_http::reflection::encoded_form(passed.as_bytes(), value).is_some()
        {
            continue;
        }
        let places = std::iter::once(("the body".to_owned(), body))
            .chain(
                headers
                    .iter()
                    .map(|(header, text)| (format!("the header `{header}`"), text.as_bytes())),
            )
            .chain(std::iter::once((
                "the final URL".to_owned(),
                url.as_bytes(),
            )));
        for (place, bytes) in places {
            if let Some(form) = kiln_http::reflection::encoded_form(bytes, value) {
                return Err(ToolFailure {
                    code: "secret_reflected".into(),
                    message: format!(
                        "http_request was sent and answered with status {status}, but {place} \
                         carries the secret `{name}` this request sent, {}; none of the \
                         response is given to the program. Send the secret only to a service \
                         that does not echo it",
                        form.describe()
                    ),
                    detail: Some(json!({"status": status, "secret": name, "where": place})),
                    outcome: CallOutcome::Error,
                });
            }
        }
    }
    Ok(())
}

/// How many bytes one byte of a secret can take in the encodings
/// [`kiln_http::reflection`] recognises (`\u0041` is 6; `&#x41;` is 6 too).
const MAX_EXPANSION: usize = 8;

/// One header to send, and whether it may follow a redirect to another origin.
struct Header {
    name: String,
    value: String,
    /// Filled from a secret, or credentials by name: dropped when the origin
    /// changes.
    credential: bool,
}

/// Headers that carry credentials whoever filled them.
const CREDENTIAL_HEADERS: [&str; 3] = ["authorization", "cookie", "proxy-authorization"];

/// Headers that describe a body, dropped with it (fetch's "request-body-header
/// names").
const BODY_HEADERS: [&str; 4] = [
    "content-encoding",
    "content-language",
    "content-location",
    "content-type",
];

/// What the next hop sends, after `status` answered `method`: 303 (but to a
/// HEAD), and 301 or 302 to a POST, become a GET without a body.
fn method_after(status: u16, method: &str) -> Option<&'static str> {
    let to_get = (status == 303 && !method.eq_ignore_ascii_case("HEAD"))
        || (matches!(status, 301 | 302) && method.eq_ignore_ascii_case("POST"));
    to_get.then_some("GET")
}

/// The `Location` of a response that is a redirect fetch follows.
fn redirect_location(response: &Response) -> Option<&str> {
    if matches!(response.status, 301 | 302 | 303 | 307 | 308) {
        response.header("location")
    } else {
        None
    }
}

fn http_failure(error: &HttpError, target: &Target) -> ToolFailure {
    let code = match error {
        HttpError::InvalidUrl { .. } | HttpError::InvalidRequest { .. } => "invalid_arguments",
        HttpError::Timeout { .. } | HttpError::Stalled { .. } => "timeout",
        HttpError::Unreachable { .. } | HttpError::Body { .. } | HttpError::TooLarge { .. } => {
            "network_error"
        }
        HttpError::AddressRefused {
            host,
            address,
            class,
            ..
        } => return refused(address_refusal(target, host, *address, *class)),
        // `http_request` follows redirects itself (`Redirect::Stop`), checking each; a
        // same-origin request is not one it makes, but say so plainly should that change.
        HttpError::CrossOriginRedirect { .. } => "redirect_refused",
        HttpError::Redirected { .. } => {
            return ToolFailure {
                code: "redirect_refused".into(),
                message: format!(
                    "http_request to `{}` answered with a redirect, which was not followed: \
                     the browser does not show where a redirect leads without following it, \
                     so its address cannot be checked first. Request the final URL directly.",
                    kiln_http::shown_url(target.url())
                ),
                detail: Some(json!({"url": kiln_http::shown_url(target.url())})),
                outcome: CallOutcome::Refused,
            };
        }
    };
    failure(code, error.to_string())
}

impl Implementation for HttpRequest {
    fn call(
        &self,
        args: Value,
        context: CallContext,
        _permit: Permit,
    ) -> LocalBoxFuture<'static, ToolReply> {
        let http = self.http.clone();
        let policy = self.policy.clone();
        let mcp = self.mcp.clone();
        Box::pin(async move {
            let text = |key: &str| args.get(key).and_then(Value::as_str);
            // A URL that could not be sent does not spend the run's budget.
            let mut target = Target::parse(text("url").unwrap_or_default())
                .map_err(|error| failure("invalid_arguments", error.to_string()))?;
            let mut method = text("method").unwrap_or("GET").to_owned();
            let mut headers = Vec::new();
            for (key, from_secrets) in [("headers", false), ("secret_headers", true)] {
                for (name, value) in args
                    .get(key)
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                {
                    let value = value.as_str().unwrap_or_default();
                    let value = if from_secrets {
                        fill(value, target.url(), &policy, &context)?
                    } else {
                        value.to_owned()
                    };
                    let credential = from_secrets
                        || CREDENTIAL_HEADERS
                            .iter()
                            .any(|known| name.eq_ignore_ascii_case(known));
                    headers.push(Header {
                        name: name.clone(),
                        value,
                        credential,
                    });
                }
            }
            let mut body = match args.get("body") {
                None | Some(Value::Null) => None,
                Some(Value::String(text)) => Some(text.clone().into_bytes()),
                Some(bytes) => {
                    let encoded = bytes
                        .get(BYTES_KEY)
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    Some(STANDARD.decode(encoded).map_err(|error| {
                        failure(
                            "invalid_arguments",
                            format!("`body` bytes are not base64: {error}"),
                        )
                    })?)
                }
            };
            let as_bytes = text("response_type") == Some("bytes");
            // The secrets this call sent, and the others unless the program
            // passed their value itself (`SecretScope::for_reply`).
            let passed = serde_json::to_string(&args).unwrap_or_default();
            let scrub = context
                .secrets
                .for_reply(&context.used_secrets.borrow(), &passed);
            let limits = context.run.limits;
            let mut redirects = 0;
            let response = loop {
                refuse_mcp(&target, &mcp)?;
                let reach = policy.decide(&target).map_err(refused)?;
                context.run.take_fetch(&context.tool, context.call_number)?;
                let request = Request {
                    method: method.clone(),
                    url: target.url().to_owned(),
                    headers: headers
                        .iter()
                        .map(|header| (header.name.clone(), header.value.clone()))
                        .collect(),
                    body: body.clone(),
                    timeout_ms: limits.fetch_timeout_ms,
                    // A secret that begins before the cut is read whole, in
                    // any of its encodings, so that it is scrubbed or found
                    // whole (see `cut_body` and `refuse_reflection`).
                    max_body_bytes: limits
                        .fetch_body_bytes
                        .saturating_add(scrub.longest().saturating_mul(MAX_EXPANSION)),
                    redirect: Redirect::Stop,
                };
                let sent = match reach {
                    Reach::PublicOnly => http.send_public(request),
                    Reach::Named => http.send(request),
                };
                let response = sent.await.map_err(|error| http_failure(&error, &target))?;
                let Some(location) = redirect_location(&response) else {
                    break response;
                };
                if redirects == MAX_REDIRECTS {
                    return Err(failure(
                        "too_many_redirects",
                        format!(
                            "http_request stopped after {MAX_REDIRECTS} redirects: `{}` \
                             redirects again, to `{}`",
                            kiln_http::shown_url(target.url()),
                            kiln_http::shown_url(location)
                        ),
                    ));
                }
                redirects += 1;
                let next = target.join(location).map_err(|error| ToolFailure {
                    code: "redirect_refused".into(),
                    message: format!(
                        "http_request to `{}` answered with a redirect that was not followed: \
                         {error}",
                        kiln_http::shown_url(target.url())
                    ),
                    detail: None,
                    outcome: CallOutcome::Error,
                })?;
                if let Some(get) = method_after(response.status, &method) {
                    method = get.to_owned();
                    body = None;
                    headers.retain(|header| {
                        !BODY_HEADERS
                            .iter()
                            .any(|known| header.name.eq_ignore_ascii_case(known))
                    });
                }
                if next.origin() != target.origin() {
                    headers.retain(|header| !header.credential);
                }
                target = next;
            };
            let mut header_map = Map::new();
            for (name, value) in response.headers {
                match header_map.get_mut(&name) {
                    Some(Value::String(existing)) => {
                        existing.push_str(", ");
                        existing.push_str(&value);
                    }
                    _ => {
                        header_map.insert(name, Value::String(value));
                    }
                }
            }
            // Everything read is looked at, so an encoded secret that begins
            // before the cut is found whole (the read went past the budget by
            // the longest encoding of the longest secret).
            let scrubbed = scrub.redact_bytes(&response.body);
            refuse_reflection(
                &context,
                &scrub,
                &passed,
                response.status,
                target.url(),
                &header_map,
                &scrubbed,
            )?;
            let (scrubbed, truncated) = cut_body(
                &scrub,
                scrubbed,
                response.truncated,
                limits.fetch_body_bytes,
            );
            let body = if as_bytes {
                json!({ BYTES_KEY: STANDARD.encode(&scrubbed) })
            } else {
                Value::String(String::from_utf8_lossy(&scrubbed).into_owned())
            };
            Ok(json!({
                "url": target.url(),
                "status": response.status,
                "headers": header_map,
                "body": body,
                "truncated": truncated,
            }))
        })
    }
}

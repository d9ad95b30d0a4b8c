//! An agent turn's request as a page sends it (`kiln.agent`): read once
//! here, each field that does not fit named with what was expected. The
//! belt's fields are the run request's own, read by [`RunRequest`]'s parser.

use std::rc::Rc;

use kiln_providers::budget::BudgetLimits as Limits;
use kiln_providers::{ChatOptions, Message, Provider};
use kiln_types::agent::Guards;
use kiln_types::runtime::BudgetLimits;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::AgentRequest;
use super::history::Compaction;
use kiln_run::{RequestError, RunRequest};

/// The agent's own fields; the rest are the belt's (a run request's).
const FIELDS: [&str; 10] = [
    "provider",
    "options",
    "messages",
    "system",
    "outputSchema",
    "guards",
    "budget",
    "direct",
    "compaction",
    "thread",
];

/// The belt's fields, as a run request reads them.
const BELT: [&str; 8] = [
    "tools",
    "mcp",
    "builtins",
    "permission",
    "limits",
    "agent",
    "secrets",
    "allow_net",
];

/// A read agent request, its provider still as given (a provider whole, or
/// one the workspace keeps by name), for the entrance to connect.
pub struct AgentSpec {
    pub provider: Value,
    run: RunRequest,
    options: ChatOptions,
    messages: Vec<Message>,
    system: Option<String>,
    output_schema: Option<Value>,
    guards: Guards,
    budget: Limits,
    direct: Vec<String>,
    compaction: Compaction,
    /// The thread the turn is kept in (`kiln_store::threads`), if any.
    pub thread: Option<String>,
}

fn field<T: DeserializeOwned>(
    fields: &Map<String, Value>,
    name: &str,
    what: &str,
) -> Result<Option<T>, RequestError> {
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => serde_json::from_value(value.clone())
            .map(Some)
            .map_err(|error| RequestError(format!("`{name}` is not valid ({error}): {what}"))),
    }
}

impl AgentSpec {
    /// Reads `{provider, options, messages, system?, outputSchema?, guards?,
    /// budget?, direct?, compaction?}` plus the belt's run-request fields
    /// (`tools`, `mcp`, `builtins`, `permission`, `limits`, `agent`,
    /// `secrets`, `allow_net`).
    ///
    /// # Errors
    ///
    /// The first field that is missing or does not fit, by name.
    pub fn from_value(value: Value) -> Result<Self, RequestError> {
        let Value::Object(fields) = value else {
            return Err(RequestError(
                "takes one object, {provider, options, messages, tools?, mcp?, builtins?, permission?, outputSchema?, guards?, budget?, system?, onEvent?, signal?}".into(),
            ));
        };
        if let Some(unknown) = fields
            .keys()
            .find(|key| !FIELDS.contains(&key.as_str()) && !BELT.contains(&key.as_str()))
        {
            return Err(RequestError(format!(
                "`{unknown}` is not a field of an agent request; expected one of {}, {}",
                FIELDS.join(", "),
                BELT.join(", ")
            )));
        }
        let provider = fields
            .get("provider")
            .filter(|value| !value.is_null())
            .cloned()
            .ok_or_else(|| {
                RequestError(format!(
                    "`provider` is missing: {}",
                    kiln_run::PROVIDER_SHAPE
                ))
            })?;
        if provider.get("stored").is_none() {
            serde_json::from_value::<kiln_providers::ProviderConfig>(provider.clone()).map_err(
                |error| {
                    RequestError(format!(
                        "`provider` is not valid ({error}): {}",
                        kiln_run::PROVIDER_SHAPE
                    ))
                },
            )?;
        }
        let options: ChatOptions = field(&fields, "options", "{model, max_tokens, temperature?}")?
            .ok_or_else(|| {
                RequestError("`options` is missing: {model, max_tokens, temperature?}".into())
            })?;
        let messages: Vec<Message> = field(
            &fields,
            "messages",
            "an array of {role: \"system\" | \"user\" | \"assistant\" | \"tool\", text, …}",
        )?
        .ok_or_else(|| {
            RequestError(
                "`messages` is missing: the thread, ending with the person's message".into(),
            )
        })?;
        if !messages
            .iter()
            .any(|message| matches!(message, Message::User { .. }))
        {
            return Err(RequestError(
                "`messages` has no user message: say what the agent should do".into(),
            ));
        }
        let guards: Guards = field(
            &fields,
            "guards",
            "{max_turns?, max_tool_calls_per_turn?, max_tokens?, max_cost?, delivery_only?, no_progress?}",
        )?
        .unwrap_or_default();
        guards
            .check()
            .map_err(|why| RequestError(format!("`guards`: {why}")))?;
        let budget: BudgetLimits = field(
            &fields,
            "budget",
            "{max_usd?, deadline_ms?, max_turns?, unpriced_token_ceiling?, max_concurrency?}",
        )?
        .unwrap_or_default();
        let defaults = Limits::default();
        let compaction = match fields.get("compaction").filter(|value| !value.is_null()) {
            None => Compaction::default(),
            Some(value) => {
                let threshold = value.get("threshold_tokens").and_then(Value::as_u64);
                let keep = value.get("keep_turns").and_then(Value::as_u64);
                if !value.is_object() || (threshold.is_none() && keep.is_none()) {
                    return Err(RequestError(
                        "`compaction` is not valid: {threshold_tokens?, keep_turns?}".into(),
                    ));
                }
                Compaction {
                    threshold_tokens: threshold.unwrap_or(Compaction::default().threshold_tokens),
                    keep_turns: keep
                        .and_then(|keep| usize::try_from(keep).ok())
                        .unwrap_or(Compaction::default().keep_turns),
                }
            }
        };
        let mut belt: Map<String, Value> = fields
            .iter()
            .filter(|(key, _)| BELT.contains(&key.as_str()))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        belt.insert("code".into(), Value::String(String::new()));
        let run = RunRequest::from_value(Value::Object(belt))?;
        Ok(Self {
            provider,
            run,
            options,
            messages,
            system: field(&fields, "system", "a string")?,
            output_schema: fields
                .get("outputSchema")
                .filter(|value| !value.is_null())
                .cloned(),
            guards,
            budget: Limits {
                max_usd: budget.max_usd,
                deadline_ms: budget.deadline_ms,
                max_turns: budget.max_turns,
                unpriced_token_ceiling: budget
                    .unpriced_token_ceiling
                    .unwrap_or(defaults.unpriced_token_ceiling),
                max_concurrency: budget.max_concurrency,
                // The page names no token cap; an agent job takes its guard's.
                max_tokens: None,
            },
            direct: field(&fields, "direct", "an array of tool names")?.unwrap_or_default(),
            compaction,
            thread: field(&fields, "thread", "a thread's id")?,
        })
    }

    /// The conversation the turn is sent, ending with the person's message.
    #[must_use]
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The model the turn asks for.
    #[must_use]
    pub fn model(&self) -> &str {
        &self.options.model
    }

    /// Model, max tokens and temperature of every model turn.
    #[must_use]
    pub fn options(&self) -> ChatOptions {
        self.options.clone()
    }

    /// The provider as a person knows it: the name the workspace keeps it
    /// under, or its own name or kind.
    #[must_use]
    pub fn provider_name(&self) -> String {
        ["stored", "name", "kind"]
            .iter()
            .find_map(|key| self.provider.get(*key).and_then(Value::as_str))
            .unwrap_or_default()
            .to_owned()
    }

    /// The agent the turn runs as, by slug (`agent`; `default` when not given).
    #[must_use]
    pub fn agent(&self) -> &str {
        &self.run.agent
    }

    /// Asks `provider` (as a request gives it: `{stored: NAME}`) and `model`
    /// instead of what the request named: the agent's own choice.
    pub fn use_model(&mut self, provider: Value, model: String) {
        self.provider = provider;
        self.options.model = model;
    }

    /// The request, over the entrance's connected `provider`, run as the
    /// agent `profile` names (with its team) when there is one.
    #[must_use]
    pub fn with_provider(
        self,
        provider: Rc<dyn Provider>,
        profile: Option<crate::profile::Profiled>,
    ) -> AgentRequest {
        AgentRequest {
            run: self.run,
            provider,
            options: self.options,
            messages: self.messages,
            system: self.system,
            output_schema: self.output_schema,
            guards: self.guards,
            budget: self.budget,
            direct: self.direct,
            compaction: self.compaction,
            profile,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base() -> Value {
        json!({
            "provider": {"kind": "openai", "base_url": "http://127.0.0.1:1/v1"},
            "options": {"model": "m", "max_tokens": 100},
            "messages": [{"role": "user", "text": "hi"}],
        })
    }

    #[test]
    fn a_bad_agent_request_names_its_field() {
        let with = |name: &str, value: Value| {
            let mut request = base();
            request[name] = value;
            request
        };
        let cases = [
            (json!(3), "takes one object"),
            (
                with("stream", json!(true)),
                "`stream` is not a field of an agent request",
            ),
            (
                with("guards", json!({"max_turns": 0})),
                "`guards`: guard `max_turns` must be at least 1",
            ),
            (
                with("guards", json!({"max_loops": 1})),
                "`guards` is not valid (unknown field `max_loops`",
            ),
            (
                with("messages", json!([{"role": "assistant", "text": "x"}])),
                "`messages` has no user message",
            ),
            (with("permission", json!({"mode": "yolo"})), "`permission"),
            (with("compaction", json!(5)), "`compaction` is not valid"),
        ];
        for (request, said) in cases {
            let Err(error) = AgentSpec::from_value(request.clone()) else {
                panic!("{request} was read");
            };
            assert!(error.0.starts_with(said), "{request}: {}", error.0);
        }
    }

    #[test]
    fn the_belt_fields_are_the_run_requests() {
        let mut request = base();
        request["tools"] = json!({"add": {"description": "Adds.", "input_schema": {"type": "object"}, "category": "read"}});
        request["outputSchema"] = json!({"type": "object"});
        request["guards"] = json!({"max_turns": 5});
        let spec = AgentSpec::from_value(request).unwrap_or_else(|error| panic!("{error}"));
        let request = spec.with_provider(kiln_providers::scripted::Scripted::new([]), None);
        assert_eq!(request.run.tools.keys().collect::<Vec<_>>(), ["add"]);
        assert_eq!(request.guards.max_turns, 5);
        assert!(request.output_schema.is_some());
    }
}

//! One streamed chat turn as a page asks for it (`kiln.chat`, the app's
//! chat box): the request read once, by the same rules wherever it comes
//! from, a field that does not fit named with what was expected; and the
//! run budget it is held to (its own limits, or one shared by every turn
//! that names it).

use std::rc::Rc;

use kiln_http::Clock;
use kiln_providers::budget::{BudgetLimits as Limits, RunBudget};
use kiln_providers::cost::PriceCatalog;
use kiln_providers::{ChatOptions, ChatRequest, Message, ToolDef};
use kiln_types::runtime::BudgetLimits;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Which budget a turn is held to.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnBudget {
    /// Limits for this turn alone.
    Own(BudgetLimits),
    /// A shared budget, by the number the page gave it.
    Shared(u32),
}

/// A chat turn's request: the provider to ask, what to send, the budget.
#[derive(Debug, Clone)]
pub struct TurnRequest {
    /// As given: a provider whole, or one the workspace keeps by name
    /// (read with [`kiln_run::provider_config`]).
    pub provider: Value,
    pub request: ChatRequest,
    pub budget: Option<TurnBudget>,
}

/// What each field of a request is, for the messages that name it.
const PROVIDER: &str = kiln_run::PROVIDER_SHAPE;
const MESSAGES: &str =
    "an array of {role: \"system\" | \"user\" | \"assistant\" | \"tool\", text, …}";
const TOOLS: &str = "an array of {name, description, input_schema}";
const OPTIONS: &str = "{model, max_tokens, temperature?, tool_choice?, response_format?}";
const BUDGET: &str =
    "{max_usd?, deadline_ms?, max_turns?, unpriced_token_ceiling?}, or a handle from kiln.budget()";

/// Reads `request[name]` as `T`, naming the field when it does not fit.
fn field<T: DeserializeOwned>(
    request: &Value,
    name: &str,
    what: &str,
) -> Result<Option<T>, String> {
    match request.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => serde_json::from_value(value.clone())
            .map(Some)
            .map_err(|error| format!("`{name}` is not valid ({error}): {what}")),
    }
}

fn required<T: DeserializeOwned>(request: &Value, name: &str, what: &str) -> Result<T, String> {
    field(request, name, what)?.ok_or_else(|| format!("`{name}` is missing: {what}"))
}

impl TurnRequest {
    /// Reads a turn's request: `{provider, messages, tools?, options,
    /// budget?}`, where `budget` is this turn's limits or `{"shared": n}`.
    ///
    /// # Errors
    ///
    /// A sentence naming the field that is missing or does not fit.
    pub fn from_value(request: &Value) -> Result<Self, String> {
        if !request.is_object() {
            return Err(
                "takes one object, {provider, messages, options, tools?, budget?, onEvent?, signal?}"
                    .into(),
            );
        }
        let provider: Value = required(request, "provider", PROVIDER)?;
        if provider.get("stored").is_none() {
            // Given whole: checked now, like every other field.
            serde_json::from_value::<kiln_providers::ProviderConfig>(provider.clone())
                .map_err(|error| format!("`provider` is not valid ({error}): {PROVIDER}"))?;
        }
        let messages: Vec<Message> = required(request, "messages", MESSAGES)?;
        let tools: Vec<ToolDef> = field(request, "tools", TOOLS)?.unwrap_or_default();
        let options: ChatOptions = required(request, "options", OPTIONS)?;
        let budget = match request
            .get("budget")
            .and_then(|budget| budget.get("shared"))
        {
            Some(shared) => Some(TurnBudget::Shared(
                shared
                    .as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| format!("`budget.shared` is not a budget's number: {BUDGET}"))?,
            )),
            None => field(request, "budget", BUDGET)?.map(TurnBudget::Own),
        };
        if let Some(unknown) = request.as_object().and_then(|object| {
            object.keys().find(|key| {
                !["provider", "messages", "tools", "options", "budget"].contains(&key.as_str())
            })
        }) {
            return Err(format!(
                "`{unknown}` is not a field of a chat request: {{provider, messages, options, tools?, budget?, onEvent?, signal?}}"
            ));
        }
        Ok(Self {
            provider,
            request: ChatRequest {
                messages,
                tools,
                options,
            },
            budget,
        })
    }
}

/// A run budget with `limits`, priced by the built-in catalog, its deadline
/// running from now on `clock`.
#[must_use]
pub fn new_budget(limits: &BudgetLimits, clock: Rc<dyn Clock>) -> RunBudget {
    let defaults = Limits::default();
    RunBudget::new(
        Limits {
            max_usd: limits.max_usd,
            deadline_ms: limits.deadline_ms,
            max_turns: limits.max_turns,
            unpriced_token_ceiling: limits
                .unpriced_token_ceiling
                .unwrap_or(defaults.unpriced_token_ceiling),
            max_concurrency: limits.max_concurrency,
            // The page names no token cap; an agent job takes its guard's.
            max_tokens: None,
        },
        Rc::new(PriceCatalog::builtin()),
        clock,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn provider() -> Value {
        json!({"kind": "openai", "base_url": "http://127.0.0.1:1/v1"})
    }

    #[test]
    fn a_bad_request_names_its_field() {
        let options = json!({"model": "m", "max_tokens": 1});
        let user = json!([{"role": "user", "text": "hi"}]);
        let cases = [
            (json!(5), "takes one object"),
            (json!({}), "`provider` is missing"),
            (
                json!({"provider": {"kind": "gemini", "base_url": "http://x"}, "messages": [], "options": options}),
                "`provider` is not valid (unknown variant `gemini`",
            ),
            (
                json!({"provider": provider(), "messages": [{"role": "robot", "text": "hi"}], "options": options}),
                "`messages` is not valid (unknown variant `robot`",
            ),
            (
                json!({"provider": provider(), "messages": user}),
                "`options` is missing",
            ),
            (
                json!({"provider": provider(), "messages": user, "options": options, "budget": {"max_dollars": 1}}),
                "`budget` is not valid (unknown field `max_dollars`",
            ),
            (
                json!({"provider": provider(), "messages": user, "options": options, "budget": {"shared": -1}}),
                "`budget.shared` is not a budget's number",
            ),
            (
                json!({"provider": provider(), "messages": user, "options": options, "stream": true}),
                "`stream` is not a field of a chat request",
            ),
        ];
        for (request, named) in cases {
            let error = TurnRequest::from_value(&request).expect_err(&request.to_string());
            assert!(error.starts_with(named), "{request}: {error}");
        }
    }

    #[test]
    fn a_turn_names_its_own_limits_or_a_shared_budget() {
        let base = json!({"provider": provider(), "messages": [], "options": {"model": "m", "max_tokens": 1}});
        let mut own = base.clone();
        own["budget"] = json!({"max_turns": 1});
        let mut shared = base.clone();
        shared["budget"] = json!({"shared": 7});
        let read = |request: &Value| TurnRequest::from_value(request).map(|turn| turn.budget);
        assert_eq!(read(&base), Ok(None));
        assert_eq!(
            read(&own),
            Ok(Some(TurnBudget::Own(BudgetLimits {
                max_turns: Some(1),
                ..BudgetLimits::default()
            })))
        );
        assert_eq!(read(&shared), Ok(Some(TurnBudget::Shared(7))));
    }
}

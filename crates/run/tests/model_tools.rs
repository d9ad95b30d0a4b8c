//! `tools.model` and `tools.classify` from a program, through
//! `kiln_run::run_program` with the real sandbox and ladder, against
//! aimock over the OpenAI and Anthropic wire formats (`servers/aimock`,
//! "Model calls from programs"): text, a schema'd answer (parsed, checked,
//! repaired once, else `model_output_invalid`), a label; the per-run model
//! budget (calls, tokens, USD) refusing before anything is sent; the gate
//! deciding like for every tool; a request's `model` field read by name.

#![expect(clippy::unwrap_used, reason = "tests")]

use std::rc::Rc;

use futures::executor::block_on;
use kiln_capabilities::gate::{Fixed, SessionAllow};
use kiln_capabilities::{Answer, Approver};
use kiln_run::Environment;
use kiln_run::{People, RunRequest, run_program};
use kiln_testkit::Aimock;
use kiln_types::cancel::AbortSignal;
use kiln_types::tool_result::ToolResult;
use serde_json::{Value, json};

mod common;
use common::InProcess;

fn environment(approver: Rc<dyn Approver>) -> Environment {
    Environment {
        entrance: "test".into(),
        tools_host: "page".into(),
        http: kiln_http::default_client(),
        people: People::Approver {
            host: "test".into(),
            approver,
            session: SessionAllow::default(),
        },
        own_tools: None,
        bridge: None,
        workspace: None,
        random: Rc::new(|| [7; 8]),
        on_gate: None,
        on_progress: None,
    }
}

/// `{provider, model}` for aimock in `kind`'s wire format.
fn model(aimock: &Aimock, kind: &str) -> Value {
    match kind {
        "openai" => json!({
            "provider": {"kind": "openai", "base_url": format!("{}/v1", aimock.url()), "key": "sk-kiln-test"},
            "model": "gpt-4o-mini"
        }),
        _ => json!({
            "provider": {"kind": "anthropic", "base_url": aimock.url(), "key": "sk-kiln-test"},
            "model": "claude-sonnet-4-5"
        }),
    }
}

fn run_with(request: Value, approver: Rc<dyn Approver>) -> ToolResult {
    let request = RunRequest::from_value(request).unwrap();
    block_on(run_program(
        request,
        &environment(approver),
        &InProcess,
        AbortSignal::new(),
    ))
    .unwrap()
    .result
}

fn run(code: &str, model: Value) -> ToolResult {
    run_with(
        json!({"code": code, "model": model}),
        Rc::new(Fixed(Answer::Approve)),
    )
}

fn value(result: &ToolResult) -> Value {
    let structured = serde_json::to_value(result).unwrap()["structuredContent"].clone();
    assert_eq!(structured["status"], "completed", "{}", result.text());
    structured["value"].clone()
}

/// The requests aimock saw, as it normalised them (OpenAI's chat shape).
fn requests(aimock: &Aimock) -> Vec<Value> {
    aimock
        .journal()
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["body"].clone())
        .collect()
}

const PERSON: &str = "{type: 'object', properties: {name: {type: 'string'}, year: {type: 'integer'}}, required: ['name', 'year']}";

#[test]
fn a_program_gets_text_a_checked_answer_and_a_label() {
    for kind in ["openai", "anthropic"] {
        let aimock = Aimock::start();
        let code = format!(
            "const text = await tools.model({{prompt: 'kiln-hello'}});
             const person = await tools.model({{prompt: 'kiln-model-extract: who wrote the first program?', schema: {PERSON}}});
             const list = await tools.model({{prompt: 'kiln-model-list: what goes into bread?', schema: {{type: 'array', items: {{type: 'string'}}}}}});
             const label = await tools.classify({{text: 'kiln-classify: the app crashes when I press save', labels: ['bug', 'feature', 'question']}});
             return {{text, person, list, label}};"
        );
        let result = run(&code, model(&aimock, kind));
        assert_eq!(
            value(&result),
            json!({
                "text": "Hello from the mock.",
                "person": {"name": "Ada Lovelace", "year": 1843},
                "list": ["flour", "water", "salt"],
                "label": "bug",
            }),
            "{kind}"
        );
        let sent = requests(&aimock);
        assert_eq!(sent.len(), 4, "{kind}: one request a call");
        // Plain text offers no tool; the others force theirs.
        assert!(
            sent[0]["tools"].as_array().is_none_or(Vec::is_empty),
            "{kind}"
        );
        for (request, tool) in [
            (&sent[1], "respond"),
            (&sent[2], "respond"),
            (&sent[3], "choose"),
        ] {
            let tools = request["tools"].as_array().unwrap();
            assert_eq!(tools.len(), 1, "{kind}");
            assert_eq!(tools[0]["function"]["name"], tool, "{kind}");
        }
        // A non-object answer is wrapped as `value`; the labels are an enum.
        assert_eq!(
            sent[2]["tools"][0]["function"]["parameters"]["properties"]["value"]["type"],
            "array"
        );
        assert_eq!(
            sent[3]["tools"][0]["function"]["parameters"]["properties"]["label"]["enum"],
            json!(["bug", "feature", "question"])
        );
        // Every call is in the run's summary, through the ladder.
        let text = result.text();
        assert!(text.contains("model"), "{text}");
        assert!(text.contains("classify"), "{text}");
    }
}

#[test]
fn an_answer_that_does_not_match_is_repaired_once_then_refused() {
    let aimock = Aimock::start();
    let code = format!(
        "const fixed = await tools.model({{prompt: 'kiln-model-repair: who?', schema: {PERSON}}});
         let never;
         try {{ await tools.model({{prompt: 'kiln-model-never: who?', schema: {PERSON}}}); }}
         catch (error) {{ never = {{code: error.code, message: error.message}}; }}
         let prose;
         try {{ await tools.model({{prompt: 'kiln-model-prose: who?', schema: {PERSON}}}); }}
         catch (error) {{ prose = error.message; }}
         return {{fixed, never, prose}};"
    );
    let result = run(&code, model(&aimock, "openai"));
    let value = value(&result);
    assert_eq!(
        value["fixed"],
        json!({"name": "Ada Lovelace", "year": 1843})
    );
    assert_eq!(value["never"]["code"], "model_output_invalid");
    let message = value["never"]["message"].as_str().unwrap();
    assert!(message.contains("in 2 requests"), "{message}");
    assert!(message.contains("/year"), "{message}");
    // Text that happens to be JSON is not read.
    let prose = value["prose"].as_str().unwrap();
    assert!(prose.contains("answered in text"), "{prose}");
    let sent = requests(&aimock);
    assert_eq!(sent.len(), 6, "two requests for each call");
    // The repair carries why the first answer was refused.
    let repair = sent[1]["messages"].as_array().unwrap();
    let last = repair.last().unwrap();
    assert_eq!(last["role"], "tool");
    let said = last["content"].as_str().unwrap();
    assert!(
        said.contains("\"accepted\":false") && said.contains("/year"),
        "{said}"
    );
}

#[test]
fn the_model_budget_refuses_before_anything_is_sent() {
    let aimock = Aimock::start();
    let attempt = |budget: Value| {
        let mut setup = model(&aimock, "openai");
        setup["budget"] = budget;
        let code = "const said = [];
            for (let i = 0; i < 2; i++) {
              try { said.push(await tools.model({prompt: 'kiln-hello'})); }
              catch (error) { said.push({code: error.code, message: error.message, detail: error.detail}); }
            }
            return said;";
        value(&run(code, setup))
    };

    let calls = attempt(json!({"calls": 1}));
    assert_eq!(calls[0], "Hello from the mock.");
    assert_eq!(calls[1]["code"], "model_budget_exhausted");
    assert_eq!(calls[1]["detail"]["budget"], "calls");
    let message = calls[1]["message"].as_str().unwrap();
    assert!(
        message.contains("1 call, 20,000 tokens, $0.05"),
        "{message}"
    );
    assert!(message.contains("its only request was made"), "{message}");
    assert_eq!(requests(&aimock).len(), 1);

    // aimock reports 12 + 5 tokens for kiln-hello: 30 leave no room for a second.
    let tokens = attempt(json!({"tokens": 30}));
    assert_eq!(tokens[0], "Hello from the mock.");
    assert_eq!(tokens[1]["detail"]["budget"], "tokens");
    assert_eq!(tokens[1]["detail"]["used"]["tokens"], 17);
    assert_eq!(requests(&aimock).len(), 2);

    // gpt-4o-mini is priced: a 1,024-token reply may cost more than $0.0001.
    let usd = attempt(json!({"usd": 0.0001}));
    assert_eq!(usd[0]["code"], "model_budget_exhausted");
    assert_eq!(usd[0]["detail"]["budget"], "usd");
    let message = usd[0]["message"].as_str().unwrap();
    assert!(message.contains("gpt-4o-mini"), "{message}");
    assert_eq!(requests(&aimock).len(), 2, "nothing more was sent");
}

#[test]
fn calls_side_by_side_share_the_token_budget() {
    let aimock = Aimock::start();
    let mut setup = model(&aimock, "openai");
    // Each request holds its prompt and reply room (~1,031 tokens here) until it settles.
    setup["budget"] = json!({"tokens": 2000});
    let code = "const asks = [1, 2, 3].map(() => tools.model({prompt: 'kiln-hello'})
            .catch((error) => ({code: error.code, budget: error.detail.budget, message: error.message})));
        return await Promise.all(asks);";
    let said = value(&run(code, setup));
    assert_eq!(said[0], "Hello from the mock.");
    assert_eq!(said[1], "Hello from the mock.");
    assert_eq!(said[2]["code"], "model_budget_exhausted");
    assert_eq!(said[2]["budget"], "tokens");
    let message = said[2]["message"].as_str().unwrap();
    assert!(message.contains("held by requests in flight"), "{message}");
    assert_eq!(requests(&aimock).len(), 2);
}

#[test]
fn the_gate_decides_a_model_call_like_any_tool() {
    let aimock = Aimock::start();
    // Plan mode runs read calls only: a model call is external.
    let result = run_with(
        json!({
            "code": "return await tools.model({prompt: 'kiln-hello'})",
            "model": model(&aimock, "openai"),
            "permission": {"mode": "plan"},
        }),
        Rc::new(Fixed(Answer::Approve)),
    );
    let structured = serde_json::to_value(&result).unwrap()["structuredContent"].clone();
    assert_eq!(structured["status"], "failed", "{}", result.text());
    assert_eq!(structured["error"]["code"], "refused", "{}", result.text());
    // The person who denies is asked, and nothing is sent.
    let result = run_with(
        json!({
            "code": "return await tools.model({prompt: 'kiln-hello'})",
            "model": model(&aimock, "openai"),
            "permission": {"mode": "default"},
        }),
        Rc::new(Fixed(Answer::Deny)),
    );
    let structured = serde_json::to_value(&result).unwrap()["structuredContent"].clone();
    assert_eq!(structured["error"]["code"], "denied", "{}", result.text());
    assert!(requests(&aimock).is_empty());
}

#[test]
fn a_run_without_a_model_has_no_model_tools_and_one_that_cannot_resolve_says_why() {
    let result = run_with(
        json!({"code": "return await tools.model({prompt: 'hi'})"}),
        Rc::new(Fixed(Answer::Approve)),
    );
    assert!(
        result.text().contains("tools.model is not available"),
        "{}",
        result.text()
    );
    // A kept provider with no workspace to keep it in.
    let result = run_with(
        json!({"code": "return await tools.classify({text: 'hi', labels: ['a', 'b']})",
               "model": {"provider": {"stored": "work"}}}),
        Rc::new(Fixed(Answer::Approve)),
    );
    assert!(
        result.text().contains("tools.classify is not available"),
        "{}",
        result.text()
    );
    let structured = serde_json::to_value(&result).unwrap()["structuredContent"].clone();
    let warning = structured["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|warning| warning["code"] == "model_unavailable")
        .unwrap_or_else(|| panic!("no model_unavailable warning: {}", result.text()));
    let message = warning["message"].as_str().unwrap();
    assert!(message.contains("`work`"), "{message}");
}

#[test]
fn a_bad_model_field_is_refused_naming_it() {
    let provider = json!({"kind": "openai", "base_url": "http://127.0.0.1:1/v1"});
    for (model, named) in [
        (json!("gpt-4o-mini"), "`model` must be an object"),
        (json!({"model": "m"}), "`model.provider` is missing"),
        (json!({"provider": provider}), "`model.model` is missing"),
        (
            json!({"provider": {"kind": "gemini", "base_url": "http://x"}, "model": "m"}),
            "`model.provider` is not valid",
        ),
        (
            json!({"provider": provider, "model": "m", "budget": {"calls": -1}}),
            "`model.budget`: `calls`",
        ),
        (
            json!({"provider": provider, "model": "m", "temperature": 1}),
            "`model.temperature` is not a field",
        ),
    ] {
        let error = RunRequest::from_value(json!({"code": "return 1", "model": model}))
            .err()
            .unwrap_or_else(|| panic!("{model} was taken"));
        assert!(error.0.contains(named), "{model}: {error}");
    }
}

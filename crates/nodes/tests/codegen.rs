//! The CodePlanner against aimock (`servers/aimock/README.md`, "Code
//! nodes") over the real OpenAI and Anthropic wire formats: a refused first
//! submission, its reasons as the tool's result, an accepted second; three
//! refusals are `no_valid_submission`; prose is never read. And the prompt:
//! written from the manifest, naming nothing a run does not have.

#![expect(clippy::unwrap_used, reason = "tests")]

use futures::executor::block_on;
use kiln_http::SystemClock;
use kiln_nodes::{
    AuthorSpec, Authored, CodeFailure, CodeRequest, MAX_AUTHOR_ROUNDS, author_system_prompt,
    author_user_prompt, check_submission, pick_model, resolve_model, unknown_apis,
};
use kiln_providers::{ApiKey, HttpProvider, ProviderConfig, ProviderKind};
use kiln_testkit::Aimock;
use kiln_types::cancel::AbortSignal;
use serde_json::{Value, json};

fn provider(aimock: &Aimock, kind: ProviderKind) -> HttpProvider {
    let base_url = match kind {
        ProviderKind::OpenAi => format!("{}/v1", aimock.url()),
        _ => aimock.url(),
    };
    HttpProvider::new(
        ProviderConfig {
            kind,
            base_url,
            key: Some(ApiKey::new("sk-kiln-test")),
        },
        kiln_http::default_client(),
    )
}

fn model(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::OpenAi => "gpt-4o-mini",
        ProviderKind::Anthropic => "claude-sonnet-4-5",
        ProviderKind::Ollama | ProviderKind::InProcess => "llama3.2",
    }
}

fn request(instruction: &str) -> CodeRequest {
    serde_json::from_value(json!({
        "instruction": instruction,
        "inputs": [{"name": "n", "type": "number", "description": "the number to classify"}]
    }))
    .unwrap()
}

fn author(aimock: &Aimock, kind: ProviderKind, request: &CodeRequest) -> Authored {
    block_on(kiln_nodes::author(
        &provider(aimock, kind),
        model(kind),
        request,
        None,
        &SystemClock,
        &AbortSignal::new(),
    ))
}

/// The tool results of the requests aimock saw, in order.
fn tool_results(aimock: &Aimock) -> Vec<String> {
    let journal = aimock.journal();
    let mut found = Vec::new();
    for entry in journal.as_array().unwrap() {
        let body = &entry["body"];
        for message in body["messages"].as_array().into_iter().flatten() {
            if message["role"] == "tool" {
                found.push(message["content"].as_str().unwrap_or_default().to_owned());
            }
        }
    }
    found
}

#[test]
fn a_refused_submission_is_the_tools_result_and_the_second_is_accepted() {
    for kind in [ProviderKind::OpenAi, ProviderKind::Anthropic] {
        let aimock = Aimock::start();
        let authored = author(
            &aimock,
            kind,
            &request("kiln-code-repair: classify n by sign"),
        );
        let submission = authored
            .result
            .unwrap_or_else(|failure| panic!("{kind:?}: {failure:?}"));
        assert_eq!(submission.title, "Classify the number");
        assert!(submission.code.contains("Math.abs(n)"));
        assert_eq!(authored.telemetry.rounds, 2, "{kind:?}");
        assert_eq!(authored.telemetry.refused, 1);
        assert_eq!(authored.telemetry.failure, None);
        assert_eq!(authored.telemetry.model, model(kind));
        if kind == ProviderKind::OpenAi {
            // The refusal went back as the call's result, naming the output.
            let results = tool_results(&aimock);
            assert_eq!(results.len(), 1, "{results:?}");
            let result: Value = serde_json::from_str(&results[0]).unwrap();
            assert_eq!(result["accepted"], false);
            let errors = result["errors"].as_array().unwrap();
            assert!(
                errors[0]
                    .as_str()
                    .unwrap()
                    .starts_with("the `return` at line 4 gives no `size`"),
                "{errors:?}"
            );
            // The model was made to call submit_code, and offered only it.
            let first = &aimock.journal()[0]["body"];
            assert_eq!(
                first["tool_choice"]["function"]["name"], "submit_code",
                "{first}"
            );
            assert_eq!(first["tools"].as_array().unwrap().len(), 1);
        }
    }
}

#[test]
fn three_refusals_are_no_valid_submission_with_the_last_reasons() {
    let aimock = Aimock::start();
    let authored = author(&aimock, ProviderKind::OpenAi, &request("kiln-code-never"));
    let failure = authored.result.unwrap_err();
    assert_eq!(failure.code(), "no_valid_submission");
    let CodeFailure::NoValidSubmission { errors, .. } = &failure else {
        panic!("{failure:?}");
    };
    assert!(
        errors
            .iter()
            .any(|error| error.starts_with("the code does not parse")),
        "{errors:?}"
    );
    assert_eq!(authored.telemetry.rounds, MAX_AUTHOR_ROUNDS);
    assert_eq!(authored.telemetry.failure, Some("no_valid_submission"));
    assert_eq!(
        aimock.journal().as_array().unwrap().len(),
        3,
        "three turns, no more"
    );
}

#[test]
fn prose_and_code_fences_are_never_read() {
    let aimock = Aimock::start();
    let authored = author(&aimock, ProviderKind::OpenAi, &request("kiln-code-prose"));
    let failure = authored.result.unwrap_err();
    assert_eq!(failure.code(), "no_valid_submission");
    assert!(
        failure
            .message()
            .contains("instead of calling `submit_code`"),
        "{}",
        failure.message()
    );
}

#[test]
fn an_unreachable_provider_and_a_stop_are_typed_failures() {
    let aimock = Aimock::start();
    let gone = HttpProvider::new(
        ProviderConfig {
            kind: ProviderKind::OpenAi,
            base_url: format!("http://127.0.0.1:{}/v1", kiln_testkit::free_port()),
            key: None,
        },
        kiln_http::default_client(),
    )
    .with_retry(kiln_providers::RetryPolicy {
        max_retries: 0,
        ..kiln_providers::RetryPolicy::default()
    });
    let authored = block_on(kiln_nodes::author(
        &gone,
        "gpt-4o-mini",
        &request("kiln-code-total"),
        None,
        &SystemClock,
        &AbortSignal::new(),
    ));
    assert_eq!(authored.result.unwrap_err().code(), "provider_unavailable");
    let stopped = AbortSignal::new();
    stopped.abort();
    let authored = block_on(kiln_nodes::author(
        &provider(&aimock, ProviderKind::OpenAi),
        "gpt-4o-mini",
        &request("kiln-code-total"),
        None,
        &SystemClock,
        &stopped,
    ));
    assert_eq!(authored.result.unwrap_err(), CodeFailure::Aborted);
    assert!(
        aimock.journal().as_array().unwrap().is_empty(),
        "nothing was sent"
    );
}

#[test]
fn telemetry_keeps_no_instruction_sample_or_code() {
    let aimock = Aimock::start();
    let mut asked = request("kiln-code-repair: the secret instruction words");
    asked.samples = Some(json!({"n": 424_242}).as_object().unwrap().clone());
    let authored = author(&aimock, ProviderKind::OpenAi, &asked);
    let text = serde_json::to_string(&authored.telemetry).unwrap();
    for secret in ["secret instruction", "424242", "Math.abs", "return"] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    // Samples went nowhere: they were not chosen for the prompt.
    let sent = aimock.journal().to_string();
    assert!(!sent.contains("424242"), "a sample value reached the model");
}

#[test]
fn samples_reach_the_prompt_only_when_chosen_and_the_payload_is_what_is_sent() {
    let mut asked = request("kiln-code-total");
    asked.samples = Some(json!({"n": 424_242}).as_object().unwrap().clone());
    let shown = |request: &CodeRequest| serde_json::to_string(&request.payload()).unwrap();
    assert!(!shown(&asked).contains("424242"));
    asked.include_samples = true;
    assert!(shown(&asked).contains("424242"));
    let aimock = Aimock::start();
    let authored = author(&aimock, ProviderKind::OpenAi, &asked);
    // `kiln-code-total` does not keep `n`: refused each round, but what was
    // sent first is exactly the payload shown.
    assert!(authored.result.is_err());
    let first = &aimock.journal()[0]["body"]["messages"];
    let payload = asked.payload();
    let kiln_providers::Message::User { text } = &payload[1] else {
        panic!()
    };
    assert_eq!(first[1]["content"].as_str().unwrap(), text);
}

#[test]
fn the_prompt_is_written_from_the_manifest_and_names_nothing_else() {
    let manifest = kiln_types::manifest::manifest();
    let system = author_system_prompt(&manifest);
    for global in &manifest.globals {
        assert!(system.contains(global.usage), "{}", global.name);
    }
    for module in manifest.modules {
        for export in module.exports {
            assert!(system.contains(export.usage), "{}", export.name);
        }
    }
    // The "Not here" list is the manifest's own; the rest may name only
    // what a run has.
    let start = system.find("Not here:").unwrap();
    let end = system.find("# Guidance").unwrap();
    let mut told = system[..start].to_owned();
    told.push_str(&system[end..]);
    told.push_str(&author_user_prompt(&request("anything")));
    assert_eq!(unknown_apis(&told, &manifest), Vec::<String>::new());
    // The check is not blind: what another product advertises is caught.
    for (bad, root) in [
        ("use `_.map(rows)`", "_"),
        ("`dayjs()` formats dates", "dayjs"),
        ("call `fetch(url)`", "fetch"),
        ("`eval(text)`", "eval"),
    ] {
        assert_eq!(unknown_apis(bad, &manifest), vec![root.to_owned()], "{bad}");
    }
}

#[test]
fn the_model_is_the_code_model_then_the_chat_model_then_the_default_skipping_tool_less_ones() {
    let none: Vec<String> = Vec::new();
    assert_eq!(
        resolve_model(&[Some("coder"), Some("chat"), Some("default")], &none),
        Ok("coder".to_owned())
    );
    assert_eq!(
        resolve_model(&[None, Some("chat"), Some("default")], &none),
        Ok("chat".to_owned())
    );
    assert_eq!(
        resolve_model(&[None, Some(" "), Some("default")], &none),
        Ok("default".to_owned())
    );
    let toolless = vec!["chat".to_owned()];
    assert_eq!(
        resolve_model(&[None, Some("chat"), Some("default")], &toolless),
        Ok("default".to_owned())
    );
    let error = resolve_model(&[None, Some("chat")], &toolless).unwrap_err();
    assert!(error.contains("skipped `chat`"), "{error}");
    assert!(
        resolve_model(&[None, None, None], &none)
            .unwrap_err()
            .contains("no model is set")
    );
}

#[test]
fn the_provider_is_asked_which_models_call_tools_until_one_may() {
    let (port, asked) = kiln_testkit::ollama_show_server(vec![
        ("gemma:2b", Some(vec!["completion"])),
        ("llama3.2", Some(vec!["completion", "tools"])),
    ]);
    let ollama = HttpProvider::new(
        ProviderConfig {
            kind: ProviderKind::Ollama,
            base_url: format!("http://127.0.0.1:{port}"),
            key: None,
        },
        kiln_http::default_client(),
    );
    // The code model cannot call tools: the chat model, which can, is used, and the
    // workspace default is never asked about.
    assert_eq!(
        block_on(pick_model(
            &ollama,
            &[Some("gemma:2b"), Some("llama3.2"), Some("default")]
        )),
        Ok("llama3.2".to_owned())
    );
    assert_eq!(*asked.lock().unwrap(), ["gemma:2b", "llama3.2"]);
    // A model the provider does not know is not said to be unable: it is used.
    assert_eq!(
        block_on(pick_model(&ollama, &[None, Some("mystery")])),
        Ok("mystery".to_owned())
    );
    let error = block_on(pick_model(&ollama, &[Some("gemma:2b")])).unwrap_err();
    assert_eq!(
        error,
        "no model that can call tools is set for writing code (skipped `gemma:2b`, which cannot): choose another"
    );
}

/// `kiln-ts`, as the CLI's runner reads a program with it.
struct Types;

impl kiln_run::Stripper for Types {
    fn strip(
        &self,
        source: String,
    ) -> futures::future::LocalBoxFuture<'static, Result<Option<String>, String>> {
        let answer = kiln_ts::javascript_of(&source);
        Box::pin(async move { answer })
    }
}

#[test]
fn a_body_in_typescript_is_checked_as_the_javascript_that_runs() {
    let asked = request("anything");
    let node = |code: &str| {
        json!({
            "title": "Total", "summary": "Adds the prices.",
            "code": code,
            "inputs": [{"name": "n", "type": "number"}],
            "outputs": [{"name": "total", "type": "number"}]
        })
    };
    let typed = node(
        "interface Line { price: number }\nconst lines: Line[] = [{ price: 2 }, { price: 3 }];\nlet total: number = 0;\nfor (const line of lines) total += line.price;\nreturn { total } as { total: number };",
    );
    let stripper = || Some(std::rc::Rc::new(Types) as std::rc::Rc<dyn kiln_run::Stripper>);
    let accepted = block_on(check_submission(&typed, &asked, stripper())).unwrap();
    assert!(
        accepted.node().code.starts_with("interface Line"),
        "kept as written"
    );
    // Its return paths are read from the stripped body: a path without the
    // output is still found.
    let partial = node("const k: number = n;\nif (k > 0) return { total: k };\nreturn {};");
    let reasons = block_on(check_submission(&partial, &asked, stripper())).unwrap_err();
    assert!(reasons[0].contains("gives no `total`"), "{reasons:?}");
    // TypeScript that makes code of its own is refused in its own words.
    let made = node("enum Kind { A }\nreturn { total: Kind.A };");
    let reasons = block_on(check_submission(&made, &asked, stripper())).unwrap_err();
    assert!(
        reasons[0].starts_with("the code does not parse: TypeScript's `enum` at line 1, column 1"),
        "{reasons:?}"
    );
    // A runner that reads no TypeScript refuses the typed body as before.
    let reasons = block_on(check_submission(&typed, &asked, None)).unwrap_err();
    assert!(
        reasons[0].starts_with("the code does not parse: "),
        "{reasons:?}"
    );
}

#[test]
fn a_submission_must_keep_the_connected_inputs_and_the_expected_output() {
    let mut asked = request("anything");
    asked.expected =
        Some(serde_json::from_value(json!({"name": "label", "type": "string"})).unwrap());
    let args = json!({
        "title": "Label", "summary": "Labels n.",
        "code": "return { label: String(x) };",
        "inputs": [{"name": "x", "type": "string"}],
        "outputs": [{"name": "labels", "type": "string"}]
    });
    let reasons = block_on(check_submission(&args, &asked, None)).unwrap_err();
    assert_eq!(
        reasons,
        vec![
            "the `return` at line 1 gives no `labels`: give every declared output on every path (a value that only sometimes exists can be `null`), or split the node in two",
            "input `n` (number) is connected and must stay an input of the node",
            "the node must give the expected output `label` (string)",
        ]
    );
    let prose = block_on(check_submission(
        &json!({"code": "return {}"}),
        &asked,
        None,
    ))
    .unwrap_err();
    assert!(
        prose[0].starts_with("the arguments are not {title, summary, code"),
        "{prose:?}"
    );
}

#[test]
fn an_authoring_request_is_read_by_name_and_an_edits_code_keeps_its_slots() {
    let read = AuthorSpec::from_value(json!({
        "instruction": "Round it",
        "inputs": [{"name": "n", "type": "number"}],
        "expectedOutput": {"name": "out", "type": "integer"},
        "code": "return { out: n };",
        "provider": {"stored": "work"},
        "chatModel": "gpt-4o-mini",
    }))
    .unwrap();
    let current = read.request.current.as_ref().unwrap();
    assert_eq!(current.code, "return { out: n };");
    assert_eq!(current.inputs[0].name, "n");
    assert_eq!(current.outputs[0].name, "out");
    assert_eq!(
        read.candidates(Some("kept")),
        [None, Some("gpt-4o-mini"), Some("kept")]
    );
    assert_eq!(
        resolve_model(&read.candidates(Some("kept")), &[]).unwrap(),
        "gpt-4o-mini"
    );
    let refused = |value: Value| AuthorSpec::from_value(value).unwrap_err().0;
    assert!(refused(json!({"instruction": "x"})).contains("`provider` is missing"));
    assert!(
        refused(json!({"instruction": "x", "provider": {}, "model": 4}))
            .contains("`model` must be a string")
    );
    assert!(
        refused(json!({"instruction": "", "provider": {}})).contains("the instruction is empty")
    );
    assert!(
        refused(json!({"instruction": "x", "provider": {}, "temperature": 1}))
            .contains("temperature")
    );
}

//! `kiln chat` as a person runs it, against aimock (its fixtures in
//! `servers/aimock/README.md`) and the local model: the reply on standard output, usage
//! and errors on standard error, tool calls walking the permission ladder, exit codes.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a panic here is a failed test with its line"
)]

use std::process::Command;

use kiln_testkit::{Aimock, LocalModel};
use serde_json::{Value, json};

struct Output {
    code: i32,
    stdout: String,
    stderr: String,
}

fn kiln_with_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    Output {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// `kiln chat --provider P --base-url B --model M` with `extra` arguments, then `prompt`.
fn chat(provider: Provider, root: &str, extra: &[&str], prompt: &str) -> Output {
    let base_url = provider.base_url(root);
    let mut args = vec![
        "chat",
        "--provider",
        provider.name,
        "--base-url",
        &base_url,
        "--model",
        provider.model,
    ];
    args.extend_from_slice(extra);
    args.push(prompt);
    kiln_with_env(&args, &[])
}

/// What each `--provider` is called with against aimock.
#[derive(Clone, Copy)]
struct Provider {
    name: &'static str,
    model: &'static str,
    /// The path turns are posted to.
    path: &'static str,
}

impl Provider {
    fn base_url(self, root: &str) -> String {
        if self.name == "openai" {
            format!("{root}/v1")
        } else {
            root.to_owned()
        }
    }
}

const PROVIDERS: [Provider; 3] = [
    Provider {
        name: "openai",
        model: "gpt-4o-mini",
        path: "/v1/chat/completions",
    },
    Provider {
        name: "anthropic",
        model: "claude-sonnet-4-5",
        path: "/v1/messages",
    },
    Provider {
        name: "ollama",
        model: "llama3.2",
        path: "/api/chat",
    },
];

fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("kiln-chat-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// A scripted `get_weather` that always answers `{"temp": 18}`.
fn weather_catalog() -> std::path::PathBuf {
    temp_file(
        "weather.json",
        &json!([{
            "name": "get_weather",
            "description": "The weather in a city.",
            "input_schema": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "units": {"type": "string"}},
                "required": ["city"]
            },
            "returns": {"temp": 18}
        }])
        .to_string(),
    )
}

#[test]
fn the_reply_streams_to_stdout_and_usage_to_stderr() {
    let aimock = Aimock::start();
    // kiln-hello reports 12 in, 5 out (aimock's Ollama says 0); Ollama's model is unpriced.
    let usage = [
        "kiln chat: 1 turn, 12 input + 5 output tokens, $0.000005",
        "kiln chat: 1 turn, 12 input + 5 output tokens, $0.000111",
        "kiln chat: 1 turn, 7 input + 5 output tokens (estimated: the provider reported no usage), at least $0.000000",
    ];
    for (provider, usage) in PROVIDERS.into_iter().zip(usage) {
        let out = chat(provider, &aimock.url(), &[], "kiln-hello");
        assert_eq!(
            (out.code, out.stdout.as_str()),
            (0, "Hello from the mock.\n"),
            "{}: {}",
            provider.name,
            out.stderr
        );
        assert_eq!(out.stderr.trim_end(), usage, "{}", provider.name);
    }
}

#[test]
fn a_tool_call_walks_the_ladder_and_its_result_goes_back() {
    let aimock = Aimock::start();
    let catalog = weather_catalog();
    let catalog = catalog.to_str().unwrap();
    // (permission arguments, the line the call's outcome prints, what goes back to the model)
    let cases = [
        (
            &["--approve", "yes"][..],
            r#"[tool result] get_weather {"temp":18}"#,
            r#"{"temp":18}"#,
        ),
        (
            &["--approve", "no", "--permission-mode", "default"][..],
            r#"[tool error] get_weather {"error":{"code":"denied","message":"#,
            r#"{"error":{"code":"denied","message":"get_weather (call 1) was denied"#,
        ),
    ];
    for (permissions, outcome, sent_back) in cases {
        for provider in PROVIDERS {
            let mut extra = vec!["--tools", catalog];
            extra.extend_from_slice(permissions);
            let out = chat(provider, &aimock.url(), &extra, "kiln-weather");
            let what = format!(
                "{} {permissions:?}: {}{}",
                provider.name, out.stdout, out.stderr
            );
            assert_eq!(out.code, 0, "{what}");
            let lines: Vec<&str> = out.stdout.lines().filter(|line| !line.is_empty()).collect();
            assert_eq!(lines.len(), 3, "{what}");
            assert_eq!(
                lines[0], r#"[tool call] get_weather {"city":"Paris","units":"celsius"}"#,
                "{what}"
            );
            assert!(lines[1].starts_with(outcome), "{what}");
            // Denied or not, the model has its answer (the fixture only asks that a tool
            // result came back).
            assert_eq!(lines[2], "It is 18 degrees in Paris.", "{what}");
            assert!(out.stderr.contains("kiln chat: 2 turns"), "{what}");
            // The second request carried the call's outcome as the tool's answer.
            let journal = aimock.journal();
            let second = journal.as_array().unwrap().last().unwrap();
            assert_eq!(second["path"], provider.path, "{what}");
            let tool_message = second["body"]["messages"]
                .as_array()
                .unwrap()
                .iter()
                .find(|message| message["role"] == "tool")
                .unwrap_or_else(|| panic!("no tool message: {second}"));
            let content = tool_message["content"].as_str().unwrap_or_default();
            assert!(content.starts_with(sent_back), "{what}: {content}");
        }
    }
}

#[test]
fn events_are_json_lines_ending_in_stop_and_done() {
    let aimock = Aimock::start();
    for provider in PROVIDERS {
        let out = chat(provider, &aimock.url(), &["--events"], "kiln-hello");
        assert_eq!(out.code, 0, "{}: {}", provider.name, out.stderr);
        let events: Vec<Value> = out
            .stdout
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        let types: Vec<&str> = events
            .iter()
            .map(|event| event["type"].as_str().unwrap())
            .collect();
        assert!(types.contains(&"text_delta"), "{types:?}");
        assert!(types.contains(&"usage"), "{types:?}");
        assert_eq!(
            types[types.len() - 2..],
            ["stop", "done"],
            "{}",
            provider.name
        );
        let stop = &events[events.len() - 2]["stop"];
        assert_eq!(stop["reason"], "end_turn");
        let done = &events[events.len() - 1]["message"];
        assert_eq!(done["text"], "Hello from the mock.");
        assert_eq!(done["model"], provider.model);
    }
}

#[test]
fn a_rejected_key_is_exit_1_with_the_code_and_a_hint() {
    let aimock = Aimock::start();
    for provider in PROVIDERS {
        let base_url = provider.base_url(&aimock.url());
        let out = kiln_with_env(
            &[
                "chat",
                "--provider",
                provider.name,
                "--base-url",
                &base_url,
                "--model",
                provider.model,
                "--key-env",
                "KILN_TEST_KEY",
                "kiln-401",
            ],
            &[("KILN_TEST_KEY", "sk-wrong")],
        );
        let what = format!("{}: {}", provider.name, out.stderr);
        assert_eq!(out.code, 1, "{what}");
        assert!(out.stderr.contains("error [key_rejected]: "), "{what}");
        assert!(out.stderr.contains(&base_url), "{what}");
        assert!(
            out.stderr
                .contains(&format!("(model `{}`)", provider.model)),
            "{what}"
        );
        assert!(out.stderr.contains("\nhint: check the API key"), "{what}");
        assert!(
            !out.stderr.contains("sk-wrong"),
            "the key was printed: {what}"
        );
    }
    let journal = aimock.journal();
    for (entry, provider) in journal.as_array().unwrap().iter().zip(PROVIDERS) {
        assert_eq!(entry["path"], provider.path);
        let key_header = if provider.name == "anthropic" {
            "x-api-key"
        } else {
            "authorization"
        };
        assert_eq!(
            entry["headers"][key_header], "[REDACTED]",
            "{}",
            provider.name
        );
    }
}

#[test]
fn bad_options_are_exit_2_before_anything_is_sent() {
    let aimock = Aimock::start();
    let root = aimock.url();
    let openai = format!("{root}/v1");
    // (arguments after `chat`, phrases on stderr)
    let cases: [(&[&str], &[&str]); 3] = [
        (
            &[
                "--provider",
                "gemini",
                "--base-url",
                &root,
                "--model",
                "m",
                "hi",
            ],
            &[
                "--provider gemini",
                "expected one of openai, anthropic, ollama",
            ],
        ),
        (
            &[
                "--provider",
                "openai",
                "--base-url",
                &openai,
                "--model",
                "gpt-4o-mini",
                "--key-env",
                "KILN_TEST_UNSET_VAR",
                "kiln-hello",
            ],
            &["--key-env KILN_TEST_UNSET_VAR", "is not set"],
        ),
        (
            &[
                "--provider",
                "openai",
                "--base-url",
                "file:///etc",
                "--model",
                "m",
                "hi",
            ],
            &["--base-url", "file"],
        ),
    ];
    for (args, says) in cases {
        let mut all = vec!["chat"];
        all.extend_from_slice(args);
        let out = kiln_with_env(&all, &[]);
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        for phrase in says {
            assert!(out.stderr.contains(phrase), "{phrase}: {}", out.stderr);
        }
        assert!(out.stdout.is_empty(), "{}", out.stdout);
    }
    assert_eq!(aimock.journal(), json!([]));
}

#[test]
fn a_cap_the_turn_cannot_fit_stops_it_before_it_is_sent() {
    let aimock = Aimock::start();
    for provider in PROVIDERS {
        // gpt-4o-mini: priced, so its worst case is more than nothing.
        let priced = Provider {
            model: "gpt-4o-mini",
            ..provider
        };
        let out = chat(priced, &aimock.url(), &["--max-usd", "0"], "kiln-hello");
        let what = format!("{}: {}", provider.name, out.stderr);
        assert_eq!(out.code, 1, "{what}");
        assert!(
            out.stderr
                .contains("kiln chat: stopped (budget): the run's budget of $0.00 cannot cover"),
            "{what}"
        );
        assert!(out.stderr.contains("kiln chat: 0 turns"), "{what}");
    }
    assert_eq!(aimock.journal(), json!([]));
}

#[test]
fn the_local_model_answers_a_chat() {
    let model = LocalModel::shared();
    let base_url = format!("{}/v1", model.base_url());
    let out = kiln_with_env(
        &[
            "chat",
            "--provider",
            "openai",
            "--base-url",
            &base_url,
            "--model",
            LocalModel::MODEL,
            "--max-tokens",
            "16",
            "Say hi",
        ],
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stdout.trim().is_empty(), "{}", out.stderr);
    assert!(out.stderr.contains("kiln chat: 1 turn, "), "{}", out.stderr);
}

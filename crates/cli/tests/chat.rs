//! `kiln chat` as a person runs it, against aimock (its fixtures in
//! `servers/aimock/README.md`) and the local model: a prompt (an argument or piped in) is
//! one agent turn, its answer on standard output, progress, usage and errors on standard
//! error; a session (`--interactive`, lines on stdin) continues the conversation from turn
//! to turn and takes its commands; exit codes.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a panic here is a failed test with its line"
)]

mod common;

use common::{Output, kiln_with};

use kiln_testkit::{Aimock, LocalModel};
use serde_json::{Value, json};

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
    kiln_with(&args, &[], "")
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

/// A scripted `add` that answers 50, as the page's does for 20 and 30.
fn add_catalog() -> std::path::PathBuf {
    temp_file(
        "add.json",
        &json!([{
            "name": "add",
            "description": "Adds two numbers: {a, b} → a + b.",
            "input_schema": {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"]
            },
            "returns": 50
        }])
        .to_string(),
    )
}

/// The arguments that point `kiln chat` at aimock's OpenAI wire.
fn openai(root: &str) -> Vec<String> {
    [
        "chat",
        "--provider",
        "openai",
        "--base-url",
        &format!("{root}/v1"),
        "--model",
        "gpt-4o-mini",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// The roles of a request's messages after Kiln's system prompt.
fn roles(request: &Value) -> Vec<String> {
    let messages = request["body"]["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system", "{request}");
    messages[1..]
        .iter()
        .map(|message| message["role"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_prompt_is_one_turn_its_answer_on_stdout_and_its_usage_on_stderr() {
    let aimock = Aimock::start();
    // kiln-hello reports 12 in, 5 out; Ollama's model is unpriced.
    let usage = [
        "kiln chat: 1 turn(s), 0 action(s), 12 input + 5 output tokens, $0.000005",
        "kiln chat: 1 turn(s), 0 action(s), 12 input + 5 output tokens, $0.000111",
        "kiln chat: 1 turn(s), 0 action(s), ",
    ];
    for (provider, usage) in PROVIDERS.into_iter().zip(usage) {
        let out = chat(provider, &aimock.url(), &[], "kiln-hello");
        let what = format!("{}: {}", provider.name, out.stderr);
        assert_eq!(
            (out.code, out.stdout.as_str()),
            (0, "Hello from the mock.\n"),
            "{what}"
        );
        assert!(
            out.stderr.lines().last().unwrap().starts_with(usage),
            "{what}"
        );
        // The turn is an agent turn: Kiln's contract, execute_code among the tools.
        let journal = aimock.journal();
        let request = journal.as_array().unwrap().last().unwrap();
        assert_eq!(request["path"], provider.path, "{what}");
        assert_eq!(roles(request), ["user"], "{what}");
        assert!(
            request["body"].to_string().contains("execute_code"),
            "{what}"
        );
    }
    // A prompt piped in is one turn too.
    let out = kiln_with(
        &openai(&aimock.url())
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        &[],
        "kiln-hello\n",
    );
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (0, "Hello from the mock.\n"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_session_continues_the_conversation_from_turn_to_turn_and_takes_its_commands() {
    let aimock = Aimock::start();
    let catalog = add_catalog();
    let mut args = openai(&aimock.url());
    args.extend(
        [
            "--interactive",
            "--approve",
            "yes",
            "--tools",
            catalog.to_str().unwrap(),
        ]
        .map(str::to_owned),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let input = "/help\nkiln-app-sum: add 20 and 30, then double it\n/tools\n/model\nkiln-hello\n/compact\nkiln-hello\n/frobnicate\n/new\nkiln-hello\n/provider\n/provider gemini http://x\n/exit\nkiln-never-sent\n";
    let out = kiln_with(&args, &[], input);
    let what = format!("{}\n--- stderr\n{}", out.stdout, out.stderr);
    assert_eq!(out.code, 0, "{what}");
    assert_eq!(
        out.stdout,
        "Twice the sum is 100.\nHello from the mock.\nHello from the mock.\nHello from the mock.\n",
        "{what}"
    );
    // The program ran through the ladder, in a sandbox process, and its result went back.
    assert!(
        out.stderr
            .contains("── execute_code\n│ const sum = await tools.add({a: 20, b: 30});"),
        "{what}"
    );
    assert!(out.stderr.contains("└ result: completed"), "{what}");
    // The commands answered on stderr.
    for said in [
        "/compact                      summarize",
        "  add (external) Adds two numbers",
        "and the agent's own: ask_user, return_result, list_models",
        "kiln chat: the model is gpt-4o-mini",
        "* gpt-4o-mini",
        "kiln chat: there is no command /frobnicate; /help lists them",
        "kiln chat: earlier conversation summarized (4 messages):\nThe person asked to add 20 and 30",
        "kiln chat: a new conversation",
        "kiln chat: the provider is openai at http://127.0.0.1:",
        "kiln chat: the provider was not changed: --provider gemini: expected one of openai, anthropic, ollama",
    ] {
        assert!(out.stderr.contains(said), "{said}: {what}");
    }
    let journal = aimock.journal();
    let requests: Vec<&Value> = journal
        .as_array()
        .unwrap()
        .iter()
        .filter(|entry| entry["path"] == "/v1/chat/completions")
        .collect();
    assert_eq!(requests.len(), 6, "{journal}");
    // The second message carried the whole first turn: the call and its observation.
    assert_eq!(
        roles(requests[2]),
        ["user", "assistant", "tool", "assistant", "user"]
    );
    // /compact put the summary in place of everything before the last turn.
    let summarizer = requests[3]["body"]["messages"][1]["content"]
        .as_str()
        .unwrap();
    assert!(
        summarizer.starts_with("Summarize this conversation:"),
        "{summarizer}"
    );
    assert_eq!(roles(requests[4]), ["user", "user", "assistant", "user"]);
    let row = requests[4]["body"]["messages"][1]["content"]
        .as_str()
        .unwrap();
    assert!(
        row.contains("[Earlier conversation summarized]") && row.contains("was 100"),
        "{row}"
    );
    // After /new, only the new message; nothing after /exit was sent.
    assert_eq!(roles(requests[5]), ["user"]);
    assert!(!journal.to_string().contains("kiln-never-sent"));
}

#[test]
fn json_is_every_event_a_line_ending_in_done() {
    let aimock = Aimock::start();
    for provider in PROVIDERS {
        let out = chat(provider, &aimock.url(), &["--json"], "kiln-hello");
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
        assert!(types.contains(&"llm_call"), "{types:?}");
        let done = events.last().unwrap();
        assert_eq!(done["type"], "done", "{}", provider.name);
        assert_eq!(done["text"], "Hello from the mock.");
        assert_eq!(done["stop"]["reason"], "answered");
    }
}

#[test]
fn a_rejected_key_is_exit_1_with_the_code_and_a_hint() {
    let aimock = Aimock::start();
    for provider in PROVIDERS {
        let base_url = provider.base_url(&aimock.url());
        let out = kiln_with(
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
            "",
        );
        let what = format!("{}: {}", provider.name, out.stderr);
        assert_eq!(out.code, 1, "{what}");
        assert!(
            out.stderr.contains("kiln chat: stopped (key_rejected): "),
            "{what}"
        );
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
        let out = kiln_with(&all, &[], "");
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
            out.stderr.contains(
                "kiln chat: stopped (max_cost): the run's budget of $0.00 cannot cover this turn"
            ),
            "{what}"
        );
        assert!(
            out.stderr.contains("kiln chat: 0 turn(s), 0 action(s)"),
            "{what}"
        );
    }
    assert_eq!(aimock.journal(), json!([]));
}

#[test]
fn the_local_model_answers_a_chat() {
    let model = LocalModel::shared();
    let base_url = format!("{}/v1", model.base_url());
    let out = kiln_with(
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
        "",
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stdout.trim().is_empty(), "{}", out.stderr);
    assert!(
        out.stderr.contains("kiln chat: 1 turn(s), "),
        "{}",
        out.stderr
    );
}

/// The folder `cargo xtask test` prepared Kiln's own model in.
fn model_dir() -> String {
    std::env::var("KILN_MODEL_DIR").unwrap_or_else(|_| {
        panic!("KILN_MODEL_DIR is not set: `cargo xtask test` prepares the model and sets it")
    })
}

#[test]
fn kilns_own_model_answers_a_chat_with_no_server() {
    let dir = model_dir();
    let out = kiln_with(
        &[
            "chat",
            "--provider",
            "local",
            "--base-url",
            &dir,
            "--max-tokens",
            "32",
            "What is 2 + 2?",
        ],
        &[],
        "",
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stdout.trim().is_empty(), "{}", out.stderr);
    assert!(
        out.stderr.contains("kiln chat: 1 turn(s), "),
        "{}",
        out.stderr
    );
}

#[test]
fn kilns_own_model_is_refused_by_name_when_it_cannot_be_had() {
    let out = kiln_with(
        &["chat", "--provider", "local", "--key-env", "HOME", "Hi"],
        &[],
        "",
    );
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("--key-env HOME: Kiln's own model (--provider local) takes no key"),
        "{}",
        out.stderr
    );
    let missing = std::env::temp_dir().join("kiln-no-model-here");
    let out = kiln_with(
        &[
            "chat",
            "--provider",
            "local",
            "--base-url",
            &missing.display().to_string(),
            "Hi",
        ],
        &[],
        "",
    );
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert!(
        out.stderr.contains("model_unavailable") || out.stderr.contains("manifest.json"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("kiln-no-model-here"), "{}", out.stderr);
}

#[test]
fn tools_says_what_a_session_without_a_store_or_tools_has() {
    let aimock = Aimock::start();
    let mut args = openai(&aimock.url());
    args.push("--interactive".to_owned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = kiln_with(&args, &[], "/tools\n/exit\n");
    let what = format!("{}\n--- stderr\n{}", out.stdout, out.stderr);
    assert_eq!(out.code, 0, "{what}");
    assert!(
        out.stderr
            .contains("kiln chat: there are no tools on `tools`: execute_code runs programs that can only compute"),
        "{what}"
    );
    // No heading over an empty list, and no memory tools it does not have.
    assert!(!out.stderr.contains("over these tools"), "{what}");
    assert!(!out.stderr.contains("memory, history, file"), "{what}");
}

/// An empty folder for a store of its own, named `name` under this run's.
fn fresh_store(name: &str) -> String {
    let dir = std::env::temp_dir()
        .join(format!("kiln-chat-{}", std::process::id()))
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.display().to_string()
}

/// `kiln chat` on aimock's OpenAI wire with `extra` arguments, `input` on stdin.
fn openai_chat(root: &str, extra: &[&str], input: &str) -> Output {
    let mut args = openai(root);
    args.extend(extra.iter().map(|arg| (*arg).to_owned()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    kiln_with(&args, &[], input)
}

/// The store's threads as `kiln chat --list-threads --json` lists them.
fn threads_of(store: &str) -> Vec<Value> {
    let out = kiln_with(
        &["chat", "--list-threads", "--json", "--store", store],
        &[],
        "",
    );
    out.json_ok().as_array().unwrap().clone()
}

/// The messages of a request after Kiln's system prompt, as (role, text).
fn said(request: &Value) -> Vec<(String, String)> {
    request["body"]["messages"].as_array().unwrap()[1..]
        .iter()
        .map(|message| {
            (
                message["role"].as_str().unwrap().to_owned(),
                message["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// The person's two-message conversation of the thread tests, with the model's answers.
const TWO_MESSAGES: [(&str, &str); 4] = [
    ("user", "kiln-hello: first"),
    ("assistant", "Hello from the mock."),
    ("user", "kiln-which-model now"),
    ("assistant", "You asked for gpt-4o-mini."),
];

/// A session of two messages in `store`: the one thread it made.
fn two_message_thread(root: &str, store: &str) -> (Output, Value) {
    let out = openai_chat(
        root,
        &["--interactive", "--store", store],
        "kiln-hello: first\nkiln-which-model now\n/threads\n/exit\n",
    );
    let threads = threads_of(store);
    assert_eq!(threads.len(), 1, "{threads:?}\n{}", out.stderr);
    (out, threads[0].clone())
}

/// Issue 36: with a store, a conversation of `kiln chat` is a thread of it —
/// titled by its first message, holding both exchanges, listed by `/threads`
/// and `--list-threads`.
#[test]
fn a_conversation_with_a_store_is_kept_as_one_thread() {
    let aimock = Aimock::start();
    let store = fresh_store("kept");
    let (out, thread) = two_message_thread(&aimock.url(), &store);
    let what = format!("{}\n--- stderr\n{}", out.stdout, out.stderr);
    assert_eq!(out.code, 0, "{what}");
    assert_eq!(
        out.stdout, "Hello from the mock.\nYou asked for gpt-4o-mini.\n",
        "{what}"
    );
    assert_eq!(thread["n_messages"], 4, "{thread}");
    assert_eq!(thread["title"], "kiln-hello: first", "{thread}");
    assert_eq!(
        (&thread["provider"], &thread["model"]),
        (&json!("openai"), &json!("gpt-4o-mini")),
        "{thread}"
    );
    let id = thread["id"].as_str().unwrap();
    // Said once, after the first turn: how to come back to it.
    assert_eq!(
        out.stderr
            .matches(&format!(
                "kiln chat: kept as thread {id} (--thread {id} continues it)"
            ))
            .count(),
        1,
        "{what}"
    );
    // `/threads` lists it, this conversation marked.
    let line = out
        .stderr
        .lines()
        .find(|line| line.starts_with(&format!("  {id}")))
        .unwrap_or_else(|| panic!("no /threads line for {id}: {what}"));
    assert!(
        line.contains("just now")
            && line.contains("4 messages  kiln-hello: first  [this conversation]"),
        "{line}"
    );
    // And so does `--list-threads`, one line a thread on stdout.
    let listed = kiln_with(&["chat", "--list-threads", "--store", &store], &[], "");
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(
        listed.stdout.starts_with(id) && listed.stdout.contains("4 messages  kiln-hello: first"),
        "{}",
        listed.stdout
    );
    // Without a store, nothing is kept, and the session says so.
    let out = openai_chat(
        &aimock.url(),
        &["--interactive"],
        "kiln-hello\n/threads\n/exit\n",
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("kiln chat: this session's conversations are not kept (--store DIR keeps"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("kiln chat: this session keeps no threads: start kiln chat with --store DIR"),
        "{}",
        out.stderr
    );
}

/// Issue 36: `kiln chat --thread ID` continues a kept conversation — a recap
/// of it first, then the model reads the earlier exchanges before the new
/// message, and the thread keeps the new one — and so does `/thread ID` in
/// a session.
#[test]
fn kiln_chat_thread_continues_a_kept_conversation() {
    let aimock = Aimock::start();
    let store = fresh_store("resumed");
    let (_, thread) = two_message_thread(&aimock.url(), &store);
    let id = thread["id"].as_str().unwrap();

    let out = openai_chat(
        &aimock.url(),
        &["--store", &store, "--thread", id, "kiln-hello again"],
        "",
    );
    let what = format!("{}\n--- stderr\n{}", out.stdout, out.stderr);
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (0, "Hello from the mock.\n"),
        "{what}"
    );
    assert!(
        out.stderr.starts_with(&format!(
            "kiln chat: continuing thread {id} “kiln-hello: first” (4 messages, updated "
        )),
        "{what}"
    );
    assert!(
        out.stderr
            .contains("\n  you:  kiln-which-model now\n  kiln: You asked for gpt-4o-mini.\n"),
        "{what}"
    );
    // Not a new thread: no "kept as" line.
    assert!(!out.stderr.contains("kept as thread"), "{what}");
    let journal = aimock.journal();
    let request = journal.as_array().unwrap().last().unwrap();
    let mut expected: Vec<(String, String)> = TWO_MESSAGES
        .iter()
        .map(|(role, text)| ((*role).to_owned(), (*text).to_owned()))
        .collect();
    expected.push(("user".into(), "kiln-hello again".into()));
    assert_eq!(said(request), expected, "{request}");
    let threads = threads_of(&store);
    assert_eq!(threads.len(), 1, "{threads:?}");
    assert_eq!(threads[0]["n_messages"], 6, "{threads:?}");

    // In a session: an unknown id is said and changes nothing; a known one
    // is continued.
    let out = openai_chat(
        &aimock.url(),
        &["--interactive", "--store", &store],
        &format!("/thread t-nope\n/thread {id}\nkiln-hello once more\n/exit\n"),
    );
    let what = format!("{}\n--- stderr\n{}", out.stdout, out.stderr);
    assert_eq!(out.code, 0, "{what}");
    assert!(
        out.stderr
            .contains("kiln chat: there is no thread `t-nope` in the store"),
        "{what}"
    );
    assert!(
        out.stderr.contains(&format!(
            "kiln chat: continuing thread {id} “kiln-hello: first” (6 messages, updated "
        )),
        "{what}"
    );
    let journal = aimock.journal();
    let request = journal.as_array().unwrap().last().unwrap();
    assert_eq!(said(request).len(), 7, "{request}");
    let threads = threads_of(&store);
    assert_eq!(threads.len(), 1, "{threads:?}");
    assert_eq!(threads[0]["n_messages"], 8, "{threads:?}");
}

/// Issue 36: a `--thread` the store does not have is exit 2, naming it and
/// how to list the ones it has, before anything is sent; without a store,
/// `--thread` and `--list-threads` ask for one.
#[test]
fn an_unknown_thread_is_refused_by_its_id() {
    let aimock = Aimock::start();
    let store = fresh_store("unknown");
    let cases: [(&[&str], &[&str]); 3] = [
        (
            &["--store", &store, "--thread", "t-nope", "kiln-hello"],
            &[
                "error: there is no thread `t-nope` in the store ",
                "\nhint: `kiln chat --list-threads --store ",
            ],
        ),
        (
            &["--thread", "t-nope", "kiln-hello"],
            &[
                "error: thread `t-nope` cannot be continued: threads are kept in a store",
                "\nhint: give --store DIR",
            ],
        ),
        (
            &["--list-threads"],
            &["error: --list-threads: threads are kept in a store, and none was given"],
        ),
    ];
    for (extra, says) in cases {
        let out = openai_chat(&aimock.url(), extra, "");
        assert_eq!(out.code, 2, "{extra:?}: {}", out.stderr);
        for phrase in says {
            assert!(out.stderr.contains(phrase), "{phrase}: {}", out.stderr);
        }
        assert!(out.stdout.is_empty(), "{}", out.stdout);
    }
    assert_eq!(aimock.journal(), json!([]));
}

/// What a hostile model says: a window title (OSC), an erased line (CSI), a
/// C1 command introducer and a right-to-left override, each of which a
/// terminal acts on rather than shows.
const HOSTILE: [&str; 4] = ["\u{1b}]0;pwned\u{7}", "\u{1b}[2K", "\u{9b}31m", "\u{202e}"];

/// No character a terminal acts on is left in `text` (newlines and tabs
/// aside), and what was hostile is there to see, escaped.
fn assert_shown_not_acted(text: &str, what: &str) {
    let raw: Vec<char> = text
        .chars()
        .filter(|c| {
            (c.is_control() && !matches!(c, '\n' | '\t'))
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{61c}')
        })
        .collect();
    assert!(raw.is_empty(), "{what}: raw {raw:?} in {text:?}");
}

/// A loopback OpenAI provider for [`the_models_own_text_reaches_the_terminal_escaped`]:
/// `status` 200 answers the first request of a turn with a call to a tool
/// named with control characters, and the next (which carries the tool's
/// answer) with hostile text cut into deltas — the escape character alone in
/// one, the rest of its sequence in the next; any other `status` is an error
/// whose message is hostile. Answers its port.
fn hostile_provider(status: u16) -> u16 {
    use std::io::Write as _;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let request = kiln_testkit::read_http_request(&mut stream);
            let chunk = |delta: Value, finish: Option<&str>| {
                format!(
                    "data: {}\n\n",
                    json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
                )
            };
            let answer = if status != 200 {
                let body =
                    json!({"error": {"message": format!("overloaded {}", HOSTILE.concat())}})
                        .to_string();
                format!(
                    "HTTP/1.1 {status} Nope\r\ncontent-type: application/json\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
            } else {
                let body = if request.contains("\"role\":\"tool\"") {
                    let mut body = String::new();
                    for piece in [
                        "Done. \u{1b}",
                        "]0;pwned\u{7}",
                        HOSTILE[1],
                        HOSTILE[2],
                        HOSTILE[3],
                        "end",
                    ] {
                        body.push_str(&chunk(json!({"content": piece}), None));
                    }
                    body.push_str(&chunk(json!({}), Some("stop")));
                    body
                } else {
                    let call = json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                        "function": {"name": format!("look{}", HOSTILE.concat()), "arguments": "{}"}}]});
                    chunk(call, None) + &chunk(json!({}), Some("tool_calls"))
                };
                let body = format!("{body}data: [DONE]\n\n");
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
            };
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    port
}

/// Issue 35 #5: what the model says — streamed text, a tool's name, a stop
/// message — reaches the terminal with every control sequence and
/// bidirectional override written visibly instead of acting: piped (the
/// answer on stdout, its deltas on stderr) and on a terminal (a pty from
/// `script`, where the answer streams).
#[test]
fn the_models_own_text_reaches_the_terminal_escaped() {
    for status in [200, 400] {
        let base_url = format!("http://127.0.0.1:{}/v1", hostile_provider(status));
        let args = [
            "chat",
            "--provider",
            "openai",
            "--base-url",
            &base_url,
            "--model",
            "gpt-4o-mini",
            "--max-turns",
            "3",
            "Say something",
        ];
        let out = kiln_with(&args, &[], "");
        let what = format!("{status}: {}\n--- stderr\n{}", out.stdout, out.stderr);
        assert_eq!(out.code, if status == 200 { 0 } else { 1 }, "{what}");
        assert_shown_not_acted(&out.stdout, &what);
        assert_shown_not_acted(&out.stderr, &what);
        assert!(out.stderr.contains("\\u{001B}]0;pwned\\u{0007}"), "{what}");
        assert!(out.stderr.contains("\\u{009B}31m\\u{202E}"), "{what}");
        if status == 200 {
            assert!(
                out.stdout
                    .contains("Done. \\u{001B}]0;pwned\\u{0007}\\u{001B}[2K"),
                "{what}"
            );
        }

        let command = args
            .iter()
            .fold(env!("CARGO_BIN_EXE_kiln").to_owned(), |command, arg| {
                format!("{command} '{arg}'")
            });
        let output = std::process::Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let screen = String::from_utf8_lossy(&output.stdout);
        let what = format!("{status} on a terminal: {screen}");
        assert!(screen.contains("pwned"), "{what}");
        assert_shown_not_acted(&screen.replace('\r', ""), &what);
    }
}

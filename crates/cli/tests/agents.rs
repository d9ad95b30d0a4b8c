//! `kiln agents` as a person runs it on an on-disk store: create, list,
//! show, edit and remove agent profiles; the default agent a fresh store
//! has; every refusal with its exit code and its sentence, nothing written
//! by a refused command; text from the store escaped for the terminal.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a panic here is a failed test with its line"
)]

mod common;

use common::{Output, kiln, kiln_with};
use serde_json::Value;

use kiln_store::config::{Config, ProviderRecord};
use kiln_store::native::LogBackend;
use kiln_testkit::TempDir;

/// A fresh folder under Cargo's temp dir, removed when dropped.
fn temp_dir(name: &str) -> TempDir {
    TempDir::new(env!("CARGO_TARGET_TMPDIR"), &format!("agents-{name}"))
}

/// `kiln agents ARGS... --store STORE`.
fn agents(store: &str, args: &[&str]) -> Output {
    let mut all = vec!["agents"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--store", store]);
    kiln(&all)
}

/// Its stdout, after checking `kiln` exited 0.
fn ok(output: &Output) -> &str {
    assert_eq!(output.code, 0, "stderr: {}", output.stderr);
    &output.stdout
}

/// Checks `kiln` exited `code` saying `sentence` on stderr, and nothing on stdout.
fn refused(output: &Output, code: i32, sentence: &str) {
    assert_eq!(
        (output.code, output.stderr.contains(sentence)),
        (code, true),
        "expected exit {code} saying {sentence:?}; stderr: {}",
        output.stderr
    );
    assert_eq!(output.stdout, "", "a refusal prints nothing on stdout");
}

/// `kiln agents show SLUG --json`.
fn record(store: &str, slug: &str) -> Value {
    agents(store, &["show", slug, "--json"]).json_ok()
}

/// The slugs `kiln agents list --json` answers, in order.
fn slugs(store: &str) -> Vec<String> {
    agents(store, &["list", "--json"])
        .json_ok()
        .as_array()
        .unwrap()
        .iter()
        .map(|agent| agent["slug"].as_str().unwrap().to_owned())
        .collect()
}

/// Whether a line of `text` ends with `words` (columns are aligned with
/// spaces).
fn has_row(text: &str, words: &[&str]) -> bool {
    text.lines()
        .any(|line| line.split_whitespace().collect::<Vec<_>>().ends_with(words))
}

/// The line of `list` that shows `slug`.
fn line_of<'a>(listing: &'a str, slug: &str) -> &'a str {
    listing
        .lines()
        .find(|line| line.split_whitespace().nth(1) == Some(slug))
        .unwrap_or_else(|| panic!("no line for `{slug}` in:\n{listing}"))
}

#[test]
fn create_list_show_edit_and_remove_an_agent() {
    let dir = temp_dir("flow");
    let store = dir.join("store");
    let prompt_file = dir.join("prompt.md");
    std::fs::write(
        &prompt_file,
        "You are Ada.\nAnswer in verse, and check your sums twice.\n",
    )
    .unwrap();

    let created = agents(
        &store,
        &[
            "create",
            "ada",
            "--name",
            "Ada Lovelace",
            "--avatar",
            "🧮",
            "--system-file",
            &prompt_file,
            "--model",
            "gpt-4o-mini",
            "--role",
            "orchestrator",
            "--mcp",
            "docs=https://docs.example/mcp",
            "--tool",
            "shell=ask",
            "--tool",
            "http_request=block",
            "--skill",
            "web-research",
            "--secret",
            "GITHUB_TOKEN",
            "--secret",
            "NOTION_KEY",
        ],
    );
    assert!(
        ok(&created).contains("created agent `ada`"),
        "{}",
        created.stdout
    );

    let listing = agents(&store, &["list"]);
    let listing = ok(&listing);
    assert_eq!(listing.lines().count(), 2, "{listing}");
    let ada = line_of(listing, "ada");
    for part in [
        "🧮",
        "Ada Lovelace",
        "orchestrator",
        "gpt-4o-mini on the chat's provider",
        "1 MCP server",
        "1 skill",
        "2 secrets",
    ] {
        assert!(ada.contains(part), "{part:?} not in {ada:?}");
    }
    let default = line_of(listing, "default");
    for part in [
        "K",
        "Kiln",
        "agent",
        "the chat's provider",
        "0 MCP servers",
        "0 skills",
        "0 secrets",
    ] {
        assert!(default.contains(part), "{part:?} not in {default:?}");
    }
    assert_eq!(slugs(&store), ["default", "ada"]);

    let shown = agents(&store, &["show", "ada"]);
    let shown = ok(&shown);
    for part in [
        "🧮 ada: Ada Lovelace",
        "orchestrator",
        "may not change its team",
        "gpt-4o-mini on the chat's provider",
        "web-research",
        "GITHUB_TOKEN, NOTION_KEY",
        "  You are Ada.\n  Answer in verse, and check your sums twice.\n",
    ] {
        assert!(shown.contains(part), "{part:?} not in:\n{shown}");
    }
    for row in [
        ["docs", "https://docs.example/mcp"],
        ["http_request", "block"],
        ["shell", "ask"],
    ] {
        assert!(has_row(shown, &row), "{row:?} not in:\n{shown}");
    }

    let json = record(&store, "ada");
    assert_eq!(json["slug"], "ada");
    assert_eq!(json["name"], "Ada Lovelace");
    assert_eq!(json["role"], "orchestrator");
    assert_eq!(json["provider"], "");
    assert_eq!(json["model"], "gpt-4o-mini");
    assert_eq!(
        json["system_prompt"],
        "You are Ada.\nAnswer in verse, and check your sums twice.\n"
    );
    assert_eq!(
        json["mcp"],
        serde_json::json!([{"name": "docs", "url": "https://docs.example/mcp"}])
    );
    assert_eq!(
        json["autonomy"],
        serde_json::json!({"http_request": "block", "shell": "ask"})
    );
    assert_eq!(json["version"], 1);

    // Each flag of an edit changes its own field; the rest stay.
    let edited = agents(
        &store,
        &[
            "edit",
            "ada",
            "--system",
            "You are Ada. Be brief.",
            "--tool",
            "shell=auto",
            "--clear-tool",
            "http_request",
            "--mcp",
            "tracker=http://127.0.0.1:9000/mcp",
            "--may-change-team",
        ],
    );
    assert!(
        ok(&edited).contains("saved agent `ada`"),
        "{}",
        edited.stdout
    );
    let json = record(&store, "ada");
    assert_eq!(json["system_prompt"], "You are Ada. Be brief.");
    assert_eq!(json["autonomy"], serde_json::json!({"shell": "auto"}));
    assert_eq!(json["mcp"].as_array().unwrap().len(), 2);
    assert_eq!(json["may_change_team"], true);
    assert_eq!(json["name"], "Ada Lovelace");
    assert_eq!(
        json["secrets"],
        serde_json::json!(["GITHUB_TOKEN", "NOTION_KEY"])
    );
    assert_eq!(json["version"], 2);

    ok(&agents(
        &store,
        &[
            "edit",
            "ada",
            "--remove-mcp",
            "tracker",
            "--remove-secret",
            "NOTION_KEY",
            "--may-change-team=false",
            "--clear-system",
        ],
    ));
    let shown = agents(&store, &["show", "ada"]);
    let shown = ok(&shown);
    assert!(!shown.contains("tracker"), "{shown}");
    assert!(
        has_row(
            shown,
            &["MCP", "servers", "docs", "https://docs.example/mcp"]
        ),
        "{shown}"
    );
    assert!(has_row(shown, &["tools", "shell", "auto"]), "{shown}");
    assert!(!shown.contains("http_request"), "{shown}");
    assert!(shown.contains("may not change its team"), "{shown}");
    assert!(!shown.contains("You are Ada"), "{shown}");
    let json = record(&store, "ada");
    assert_eq!(json["secrets"], serde_json::json!(["GITHUB_TOKEN"]));
    assert_eq!(json["system_prompt"], "");
    assert_eq!(json["version"], 3);

    let removed = agents(&store, &["remove", "ada"]);
    assert!(
        ok(&removed).contains("removed agent `ada`"),
        "{}",
        removed.stdout
    );
    assert_eq!(slugs(&store), ["default"]);
    refused(
        &agents(&store, &["show", "ada"]),
        1,
        "there is no agent `ada`; this workspace has `default`",
    );
}

#[test]
fn a_fresh_store_has_the_default_agent_and_keeps_it() {
    let dir = temp_dir("default");
    let store = dir.join("store");
    let list = agents(&store, &["list", "--json"]).json_ok();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list[0]["slug"], "default");
    assert_eq!(list[0]["name"], "Kiln");
    assert_eq!(list[0]["version"], 0);

    refused(
        &agents(&store, &["remove", "default"]),
        1,
        "the `default` agent cannot be removed: every workspace has it; edit it instead",
    );
    refused(
        &agents(&store, &["create", "default", "--name", "Mine"]),
        1,
        "agent `default` already exists; use `kiln agents edit`",
    );

    // It is edited like any other, and saved from then on.
    ok(&agents(
        &store,
        &["edit", "default", "--system", "Answer in French."],
    ));
    let json = record(&store, "default");
    assert_eq!(
        (json["system_prompt"].as_str(), json["version"].as_u64()),
        (Some("Answer in French."), Some(1))
    );
    refused(
        &agents(&store, &["remove", "default"]),
        1,
        "the `default` agent cannot be removed",
    );
    assert_eq!(slugs(&store), ["default"]);
}

#[test]
fn an_existing_slug_is_not_created_again_and_an_unknown_one_names_the_agents() {
    let dir = temp_dir("exists");
    let store = dir.join("store");
    ok(&agents(&store, &["create", "ada", "--name", "Ada"]));
    refused(
        &agents(&store, &["create", "ada", "--name", "Another Ada"]),
        1,
        "agent `ada` already exists; use `kiln agents edit`",
    );
    assert_eq!(record(&store, "ada")["name"], "Ada");

    for command in ["show", "edit", "remove"] {
        let mut args = vec![command, "bob"];
        if command == "edit" {
            args.extend(["--name", "Bob"]);
        }
        refused(
            &agents(&store, &args),
            1,
            "there is no agent `bob`; this workspace has `default`, `ada`",
        );
    }
    assert_eq!(slugs(&store), ["default", "ada"]);
}

#[test]
fn every_bad_flag_value_exits_2_with_its_sentence_before_anything_is_written() {
    let dir = temp_dir("bad");
    let store = dir.join("store");
    let missing = dir.join("no-such-prompt.md");
    let create = |extra: &[&'static str]| {
        let mut args = vec!["create", "ada", "--name", "Ada"];
        args.extend_from_slice(extra);
        args
    };
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["create", "Ada", "--name", "Ada"],
            "`Ada` must be 1 to 64 of `a-z`, `0-9` and `-`, not starting with `-`",
        ),
        (
            vec!["create", "-x", "--name", "Ada"],
            "unexpected argument '-x'",
        ),
        (
            create(&["--tool", "return_result=block"]),
            "agent `ada`: return_result cannot be blocked: it is how a job reports",
        ),
        (
            create(&["--mcp", "docs=file:///etc/passwd"]),
            "agent `ada`: MCP server `docs` needs an http:// or https:// URL",
        ),
        (
            create(&["--mcp", "Docs=https://docs.example/mcp"]),
            "agent `ada`: `mcp`: server name `Docs` must be 1 to 32",
        ),
        (create(&["--mcp", "docs"]), "expected NAME=URL"),
        (
            create(&["--role", "boss"]),
            "invalid value 'boss' for '--role <ROLE>'",
        ),
        (
            create(&["--tool", "shell=never"]),
            "unknown tool setting `never`; expected auto, ask or block",
        ),
        (create(&["--tool", "shell"]), "expected TOOL=auto|ask|block"),
        (
            create(&["--avatar", "A B"]),
            "agent `ada`: `avatar` must be",
        ),
        (
            create(&["--secret", "1KEY"]),
            "agent `ada`: `secrets`: secret name `1KEY`",
        ),
        (
            create(&["--skill", "web", "--skill", "web"]),
            "agent `ada`: `skills` names `web` twice",
        ),
        (
            vec!["create", "ada", "--name", " "],
            "agent `ada`: `name` must be 1 to 100 characters",
        ),
        (
            vec!["create", "ada", "--name", "Ada", "--system-file", &missing],
            "could not read the system prompt from",
        ),
        (
            vec!["create", "ada", "--system", "x", "--system-file", &missing],
            "cannot be used with",
        ),
        (vec!["create", "ada"], "--name <NAME>"),
    ];
    for (args, sentence) in &cases {
        let output = agents(&store, args);
        assert_eq!(
            (output.code, output.stderr.contains(sentence)),
            (2, true),
            "{args:?}: expected exit 2 saying {sentence:?}; stderr: {}",
            output.stderr
        );
    }
    assert_eq!(slugs(&store), ["default"], "a refused create wrote nothing");

    // An edit refused is refused whole: the fields it would also have changed stay.
    ok(&agents(&store, &["create", "ada", "--name", "Ada"]));
    let edits: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--name", "Ada II", "--tool", "return_result=block"],
            "return_result cannot be blocked",
        ),
        (
            vec!["--name", "Ada II", "--remove-mcp", "docs"],
            "agent `ada` has no MCP server `docs`",
        ),
        (
            vec!["--name", "Ada II", "--clear-tool", "shell"],
            "agent `ada` has no setting for tool `shell`",
        ),
        (
            vec!["--system", "x", "--clear-system"],
            "cannot be used with",
        ),
        (vec![], "nothing to change"),
    ];
    for (flags, sentence) in &edits {
        let mut args = vec!["edit", "ada"];
        args.extend_from_slice(flags);
        let output = agents(&store, &args);
        assert_eq!(
            (output.code, output.stderr.contains(sentence)),
            (2, true),
            "{args:?}: expected exit 2 saying {sentence:?}; stderr: {}",
            output.stderr
        );
    }
    let json = record(&store, "ada");
    assert_eq!(
        (json["name"].as_str(), json["version"].as_u64()),
        (Some("Ada"), Some(1))
    );
}

#[test]
fn a_provider_the_workspace_does_not_keep_is_refused() {
    let dir = temp_dir("provider");
    let store = dir.join("store");
    refused(
        &agents(
            &store,
            &["create", "ada", "--name", "Ada", "--provider", "openai"],
        ),
        2,
        "agent `ada`: there is no kept provider `openai`",
    );
    assert_eq!(slugs(&store), ["default"]);

    // Once the workspace keeps it (the app's Settings → Providers), it may be named.
    let config = Config::new(LogBackend::open(dir.path().join("store").as_path()).unwrap());
    futures::executor::block_on(config.put_provider(&ProviderRecord {
        name: "openai".into(),
        kind: "openai".into(),
        base_url: "https://api.openai.com/v1".into(),
        model: "gpt-4o".into(),
        key: None,
        version: 0,
    }))
    .unwrap();
    drop(config);
    ok(&agents(
        &store,
        &[
            "create",
            "ada",
            "--name",
            "Ada",
            "--provider",
            "openai",
            "--model",
            "gpt-4o",
        ],
    ));
    let listing = agents(&store, &["list"]);
    assert!(line_of(ok(&listing), "ada").contains("openai/gpt-4o"));
    refused(
        &agents(&store, &["edit", "ada", "--provider", "anthropic"]),
        2,
        "agent `ada`: there is no kept provider `anthropic`; the workspace keeps `openai`",
    );
    // Empty: back to the chat's provider.
    ok(&agents(
        &store,
        &["edit", "ada", "--provider", "", "--model", ""],
    ));
    let listing = agents(&store, &["list"]);
    assert!(line_of(ok(&listing), "ada").contains("the chat's provider"));
}

#[test]
fn text_from_the_store_is_escaped_and_a_prompt_can_come_from_stdin() {
    let dir = temp_dir("escaped");
    let store = dir.join("store");
    let hostile = "Be kind.\u{1b}]0;pwned\u{7}\n\u{1b}[2KAnd brief.";
    let created = kiln_with(
        &[
            "agents",
            "create",
            "ada",
            "--name",
            "Ada",
            "--system-file",
            "-",
            "--store",
            &store,
        ],
        &[],
        hostile,
    );
    ok(&created);
    assert_eq!(record(&store, "ada")["system_prompt"], hostile);
    let shown = agents(&store, &["show", "ada"]);
    let shown = ok(&shown);
    assert!(
        !shown.contains('\u{1b}') && !shown.contains('\u{7}'),
        "{shown:?}"
    );
    assert!(
        shown.contains("  Be kind.\\u{001B}]0;pwned\\u{0007}\n  \\u{001B}[2KAnd brief."),
        "{shown}"
    );

    // A prompt longer than an agent may have is refused without reading it all.
    let long = "x".repeat(200_000);
    let output = kiln_with(
        &[
            "agents",
            "create",
            "bob",
            "--name",
            "Bob",
            "--system-file",
            "-",
            "--store",
            &store,
        ],
        &[],
        &long,
    );
    refused(&output, 2, "at most 32000");
    assert_eq!(slugs(&store), ["default", "ada"]);
}

#[test]
fn an_mcp_server_takes_its_token_from_a_secret_the_agent_names() {
    let dir = temp_dir("mcp-auth");
    let store = dir.join("store");
    refused(
        &agents(
            &store,
            &[
                "create",
                "ada",
                "--name",
                "Ada",
                "--mcp",
                "docs=https://docs.example/mcp",
                "--mcp-auth",
                "docs=DOCS_TOKEN",
            ],
        ),
        2,
        "sends the secret `DOCS_TOKEN`, which the agent's `secrets` does not name",
    );
    refused(
        &agents(
            &store,
            &[
                "create",
                "ada",
                "--name",
                "Ada",
                "--mcp-auth",
                "wiki=DOCS_TOKEN",
            ],
        ),
        2,
        "the agent has no MCP server `wiki`",
    );
    ok(&agents(
        &store,
        &[
            "create",
            "ada",
            "--name",
            "Ada",
            "--mcp",
            "docs=https://docs.example/mcp",
            "--secret",
            "DOCS_TOKEN",
            "--mcp-auth",
            "docs=DOCS_TOKEN",
        ],
    ));
    let ada = record(&store, "ada");
    assert_eq!(ada["mcp"][0]["auth_secret"], "DOCS_TOKEN", "{ada}");
    let shown = agents(&store, &["show", "ada"]);
    assert!(
        ok(&shown).contains("(Authorization from the secret DOCS_TOKEN)"),
        "{}",
        shown.stdout
    );
    ok(&agents(&store, &["edit", "ada", "--mcp-auth", "docs="]));
    assert!(record(&store, "ada")["mcp"][0].get("auth_secret").is_none());
}

//! `kiln secrets` and the vault in a terminal, against a real OS keyring
//! (GNOME Keyring's Secret Service on a private D-Bus bus, `Keyring`): a
//! value typed once is sealed under the workspace's key in the keyring and
//! is in no file of the store; an agent's job opens the secrets its profile
//! names and sends one as its MCP server's `Authorization` (a real
//! `kiln mcp serve --http` that answers only its token); without a keyring,
//! or with a keyring that lacks the workspace's key, the job goes on
//! without them and says why; every refusal names what was wrong.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a panic here is a failed test with its line"
)]

mod common;

use common::{HttpServer, Output, kiln_with};
use serde_json::{Value, json};

use kiln_testkit::{Aimock, Keyring};

const TOKEN: &str = "kiln-vault-test-token-0123456789";

/// Every byte of every file under `dir`, for a grep.
fn all_bytes(dir: &std::path::Path) -> Vec<u8> {
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            bytes.extend(all_bytes(&path));
        } else {
            bytes.extend(std::fs::read(&path).unwrap());
        }
    }
    bytes
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

/// `kiln secrets ARGS... --store STORE` with `env` and `input`.
fn secrets(store: &str, env: &[(&str, &str)], args: &[&str], input: &str) -> Output {
    let mut all = vec!["secrets"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--store", store]);
    kiln_with(&all, env, input)
}

/// One agent turn of `ada` (the aimock fixture `kiln-agent-sum`) with `env`;
/// answers how it ran and the first model request's body as text.
fn ada_turn(store: &str, aimock: &Aimock, env: &[(&str, &str)]) -> (Output, String) {
    let asked = aimock.journal().as_array().unwrap().len();
    let out = kiln_with(
        &[
            "agent",
            "run",
            "kiln-agent-sum: add 20 and 30, then double it",
            "--agent",
            "ada",
            "--store",
            store,
            "--tools",
            &common::add_catalog("secrets"),
            "--approve",
            "yes",
        ],
        env,
        "",
    );
    let journal = aimock.journal();
    let first = journal
        .as_array()
        .unwrap()
        .get(asked)
        .map(|entry| entry["body"].to_string())
        .unwrap_or_default();
    (out, first)
}

#[test]
fn a_secret_is_sealed_by_the_os_keyring_and_sent_only_as_its_agents_mcp_auth() {
    let keyring = Keyring::start(env!("CARGO_TARGET_TMPDIR"));
    let env = keyring.env();
    let aimock = Aimock::start();
    let (store, config) = common::store_with_ada(
        "secrets-ada",
        &format!("{}/v1", aimock.url()),
        "You are Ada.",
    );
    drop(config);
    let server = HttpServer::start(&["--token", TOKEN]);
    let origin = server.url.trim_end_matches("/mcp").to_owned();

    // Refusals name what was wrong and write nothing.
    for (args, input, code, said) in [
        (
            &["set", "MCP_TOKEN"][..],
            TOKEN,
            2,
            "name 1 to 16 origins it may be sent to",
        ),
        (
            &["set", "MCP_TOKEN", "--origin", "docs.example"],
            TOKEN,
            2,
            "`docs.example` is not an origin",
        ),
        (
            &["set", "MCP_TOKEN", "--origin", &origin],
            "two\nlines",
            2,
            "has a line break",
        ),
        (
            &["set", "MCP_TOKEN", "--origin", &origin, "--keep-value"],
            "",
            2,
            "there is no secret `MCP_TOKEN` to keep a value of",
        ),
        (&["remove", "MCP_TOKEN"], "", 1, "the vault is empty"),
    ] {
        let out = secrets(&store, &env, args, input);
        assert_eq!(
            (out.code, out.stderr.contains(said)),
            (code, true),
            "{args:?}: {}",
            out.stderr
        );
    }
    let empty = secrets(&store, &env, &["list", "--json"], "").json_ok();
    assert_eq!(empty, json!([]));

    // Set once (standard input, one trailing line break dropped); listed without its value.
    let set = secrets(
        &store,
        &env,
        &["set", "MCP_TOKEN", "--origin", &origin, "--agent", "ada"],
        &format!("{TOKEN}\n"),
    );
    assert_eq!(set.code, 0, "{}", set.stderr);
    assert!(
        set.stderr
            .contains(&format!("set `MCP_TOKEN`, sent only to {origin}")),
        "{}",
        set.stderr
    );
    let listed = secrets(&store, &env, &["list"], "");
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(
        listed.stdout.starts_with(&format!(
            "MCP_TOKEN  to {origin} · for ada · set just now · never used"
        )),
        "{}",
        listed.stdout
    );
    assert!(!contains(&all_bytes(std::path::Path::new(&store)), TOKEN));

    // Ada's MCP server takes its Authorization from the secret.
    let edit = kiln_with(
        &[
            "agents",
            "edit",
            "ada",
            "--mcp",
            &format!("served={}", server.url),
            "--secret",
            "MCP_TOKEN",
            "--mcp-auth",
            "served=MCP_TOKEN",
            "--store",
            &store,
        ],
        &[],
        "",
    );
    assert_eq!(edit.code, 0, "{}", edit.stderr);
    let (out, first) = ada_turn(&store, &aimock, &env);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "Twice the sum is 100.\n", "{}", out.stderr);
    // The server answered only its token: its tool reached Ada's contract.
    assert!(first.contains("served_codemode"), "{first}\n{}", out.stderr);
    assert!(!out.stderr.contains("not opened"), "{}", out.stderr);
    for text in [&out.stdout, &out.stderr, &first] {
        assert!(!text.contains(TOKEN), "{text}");
    }
    assert!(!contains(&all_bytes(std::path::Path::new(&store)), TOKEN));
    let used: Value = secrets(&store, &env, &["list", "--json"], "").json_ok();
    assert!(used[0]["used_ms"].is_u64(), "{used}");

    // A new value and new settings replace the old; --keep-value changes only the settings.
    let kept = secrets(
        &store,
        &env,
        &["set", "MCP_TOKEN", "--any-agent", "--keep-value"],
        "",
    );
    assert_eq!(kept.code, 0, "{}", kept.stderr);
    let listed = secrets(&store, &env, &["list", "--json"], "").json_ok();
    assert_eq!(listed[0]["agents"], json!([]), "{listed}");
    assert_eq!(listed[0]["origins"], json!([origin]), "{listed}");

    // No keyring: the job goes on without its secrets and says why (and the server refuses it).
    let nowhere = [(
        "DBUS_SESSION_BUS_ADDRESS",
        "unix:path=/nonexistent/kiln-test-bus",
    )];
    let (out, first) = ada_turn(&store, &aimock, &nowhere);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "kiln: --agent ada: its secrets were not opened: the vault's key cannot be had here: no OS keyring answered"
        ) && out
            .stderr
            .contains("hint: without one, give a run its secrets from the environment: --secret NAME=ENV"),
        "{}",
        out.stderr
    );
    assert!(!first.contains("served_codemode"), "{first}");
    let refused = secrets(
        &store,
        &nowhere,
        &["set", "OTHER", "--origin", &origin],
        "x",
    );
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("no OS keyring answered"),
        "{}",
        refused.stderr
    );

    // Another machine's keyring (a fresh one) lacks this workspace's key: said, with what to do.
    drop(keyring);
    let elsewhere = Keyring::start(env!("CARGO_TARGET_TMPDIR"));
    let (out, _) = ada_turn(&store, &aimock, &elsewhere.env());
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("the OS keyring has no key kiln/workspace-")
            && out
                .stderr
                .contains("hint: set the workspace's secrets again: kiln secrets set NAME"),
        "{}",
        out.stderr
    );
    // Removing it is allowed (no key needed); the list is empty after.
    let removed = secrets(&store, &elsewhere.env(), &["remove", "MCP_TOKEN"], "");
    assert_eq!(removed.code, 0, "{}", removed.stderr);
    assert_eq!(
        secrets(&store, &elsewhere.env(), &["list", "--json"], "").json_ok(),
        json!([])
    );
}

//! `kiln eval code-gen` as a person runs it: `--list` names the cases, a
//! glob that matches none exits 2, and against aimock (the code-gen
//! fixtures of `servers/aimock/README.md`) over the OpenAI wire format one
//! case passes first time and one is repaired into a node that is wrong on
//! every held-out input, each node run in a sandbox process.

mod common;

use common::kiln;

use kiln_testkit::Aimock;

#[test]
fn list_names_every_case_with_its_instruction() {
    let out = kiln(&["eval", "code-gen", "--list"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let rows: Vec<(&str, &str)> = out
        .stdout
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .collect();
    assert!(rows.len() >= 16, "{}", out.stdout);
    assert!(
        rows.iter()
            .any(|(name, instruction)| *name == "reshape-rename"
                && instruction.starts_with("Rename the fields")),
        "{}",
        out.stdout
    );
    let out = kiln(&["eval", "code-gen", "--list", "--cases", "seed-*"]);
    assert_eq!(out.stdout.lines().count(), 2, "{}", out.stdout);
    let out = kiln(&["eval", "code-gen", "--cases", "nothing-*"]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("no case matches"), "{}", out.stderr);
    let out = kiln(&["eval", "code-gen"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .contains("needs --provider, --base-url and --model"),
        "{}",
        out.stderr
    );
}

#[test]
fn against_aimock_first_pass_and_repair_are_counted_apart_from_held_out_correctness() {
    let aimock = Aimock::start();
    let base_url = format!("{}/v1", aimock.url());
    let out = kiln(&[
        "eval",
        "code-gen",
        "--provider",
        "openai",
        "--base-url",
        &base_url,
        "--model",
        "gpt-4o-mini",
        "--cases",
        "format-*",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("kiln eval code-gen: against openai `gpt-4o-mini`"),
        "{}",
        out.stderr
    );
    let row = |name: &str| {
        out.stdout
            .lines()
            .find(|line| line.starts_with(&format!("| {name} |")))
            .unwrap_or_else(|| panic!("no row for {name}:\n{}", out.stdout))
            .split(" | ")
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    // | case | shape | result | first pass | after repair | held-out | rounds | …
    let money = row("format-money");
    assert_eq!(money[2..7], ["pass", "yes", "yes", "3/3", "1"], "{money:?}");
    let markdown = row("format-markdown");
    assert!(
        markdown[2].starts_with("FAIL (held-out #1 "),
        "{markdown:?}"
    );
    assert_eq!(markdown[3..7], ["no", "yes", "0/2", "2"], "{markdown:?}");
    assert!(
        out.stdout.contains(
            "first-pass acceptance 1/2 (50%) · post-repair acceptance 2/2 (100%) · held-out correctness 3/5 (60%) · passed 1/2 (50%)"
        ),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("passed by shape: format 1/2"),
        "{}",
        out.stdout
    );
}

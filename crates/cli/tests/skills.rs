//! `kiln skills` as a person runs it: the system skills listed and shown
//! without a store, the store's own created, edited, renamed and removed,
//! and the shipped names refused.

mod common;

use common::{kiln, kiln_with};
use kiln_testkit::TempDir;

#[test]
fn the_catalog_is_read_and_the_stores_own_skills_are_written_and_shipped_names_refused() {
    // Without a store: the system skills only.
    let listed = kiln(&["skills", "list"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    for name in ["big-jobs", "tidy-data", "web-research", "workspace-notes"] {
        assert!(
            listed
                .stdout
                .lines()
                .any(|line| line.starts_with(name) && line.contains("system")),
            "{name}: {}",
            listed.stdout
        );
    }
    let web = kiln(&["skills", "show", "web-research"]);
    assert!(
        web.stdout.contains("(ships with Kiln, read-only)")
            && web.stdout.contains("tools: http_request"),
        "{}",
        web.stdout
    );
    let dir = TempDir::new(env!("CARGO_TARGET_TMPDIR"), "skills-cli");
    let store = dir.join("store");
    let made = kiln_with(
        &[
            "skills",
            "create",
            "packing",
            "--description",
            "Pack for a trip.",
            "--body-file",
            "-",
            "--store",
            &store,
        ],
        &[],
        "Roll, do not fold.",
    );
    assert_eq!(made.code, 0, "{}", made.stderr);
    let shipped = kiln(&[
        "skills",
        "create",
        "tidy-data",
        "--description",
        "Mine.",
        "--store",
        &store,
    ]);
    assert_eq!(shipped.code, 2, "{}", shipped.stderr);
    assert!(
        shipped
            .stderr
            .contains("is a system skill that ships with Kiln"),
        "{}",
        shipped.stderr
    );
    let bad = kiln(&[
        "skills",
        "create",
        "Bad Name",
        "--description",
        "x",
        "--store",
        &store,
    ]);
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr.contains("skill name `Bad Name`"),
        "{}",
        bad.stderr
    );
    let renamed = kiln(&[
        "skills",
        "edit",
        "packing",
        "--rename",
        "packing-list",
        "--tool",
        "http_request",
        "--store",
        &store,
    ]);
    assert_eq!(renamed.code, 0, "{}", renamed.stderr);
    let onto = kiln(&[
        "skills",
        "edit",
        "packing-list",
        "--rename",
        "big-jobs",
        "--store",
        &store,
    ]);
    assert_eq!(onto.code, 1);
    assert!(
        onto.stderr.contains("`big-jobs` is a system skill"),
        "{}",
        onto.stderr
    );
    let shown = kiln(&[
        "skills",
        "show",
        "packing-list",
        "--json",
        "--store",
        &store,
    ])
    .json_ok();
    assert_eq!(shown["body"], "Roll, do not fold.");
    assert_eq!(shown["system"], false);
    assert_eq!(shown["required_tools"], serde_json::json!(["http_request"]));
    let readonly = kiln(&["skills", "remove", "web-research", "--store", &store]);
    assert_eq!(readonly.code, 1);
    assert!(
        readonly.stderr.contains("is a system skill"),
        "{}",
        readonly.stderr
    );
    assert_eq!(
        kiln(&["skills", "remove", "packing-list", "--store", &store]).code,
        0
    );
    let gone = kiln(&["skills", "show", "packing-list", "--store", &store]);
    assert_eq!(gone.code, 1);
    assert!(
        gone.stderr.contains("there is no skill `packing-list`"),
        "{}",
        gone.stderr
    );
}

//! Rendering and size-bound cases of `tool-result/v1`.

use serde_json::json;

use super::*;

fn summary() -> RunSummary {
    RunSummary {
        run_id: "codemode:test".into(),
        status: RunStatus::Completed,
        termination_reason: "completed".into(),
        duration_ms: 10,
        person_wait_ms: 0,
        call_count: 0,
        calls: Vec::new(),
        value: Value::Null,
        output: String::new(),
        warnings: Vec::new(),
        keyless: true,
        catalog_digest: "sha256:0".into(),
        error: None,
        budget: None,
    }
}

fn echo_call() -> CallSummary {
    CallSummary {
        tool: "echo".into(),
        outcome: CallOutcome::Ok,
        waited_on_person: false,
        duration_ms: 8,
    }
}

#[test]
fn model_text_follows_the_fixed_rules() {
    let cases: Vec<(RunSummary, &str)> = vec![
        (
            RunSummary {
                output: "got it\n".into(),
                call_count: 1,
                calls: vec![echo_call()],
                ..summary()
            },
            "completed · 10 ms · 1 calls · person wait 0 ms\n\nReturn value: none\n\nOutput:\ngot it\n\n\
             Tool | Outcome | Waited on person | Duration (ms)\n--- | --- | --- | ---\necho | ok | false | 8\n",
        ),
        (
            RunSummary {
                value: json!({"answer": 42}),
                call_count: 1,
                calls: vec![echo_call()],
                ..summary()
            },
            "completed · 10 ms · 1 calls · person wait 0 ms\n\nReturn value:\n{\n  \"answer\": 42\n}\n\n\
             Tool | Outcome | Waited on person | Duration (ms)\n--- | --- | --- | ---\necho | ok | false | 8\n",
        ),
        (
            summary(),
            "completed · 10 ms · 0 calls · person wait 0 ms\n\nReturn value: none",
        ),
        (
            RunSummary {
                value: json!("two\nlines \"quoted\""),
                ..summary()
            },
            "completed · 10 ms · 0 calls · person wait 0 ms\n\nReturn value:\ntwo\nlines \"quoted\"",
        ),
        (
            RunSummary {
                value: json!(1.5),
                output: "hi\nthere\n".into(),
                ..summary()
            },
            "completed · 10 ms · 0 calls · person wait 0 ms\n\nReturn value:\n1.5\n\nOutput:\nhi\nthere\n",
        ),
        (
            RunSummary {
                status: RunStatus::Failed,
                termination_reason: "failed".into(),
                error: Some(RunFailure {
                    code: "no_session".into(),
                    message: "browser_use (call 1) failed: No session.".into(),
                    detail: Some(json!({"reason": "closed"})),
                }),
                ..summary()
            },
            "failed · 10 ms · 0 calls · person wait 0 ms\n\nError (no_session): browser_use (call 1) failed: No session.\n\
             Error detail: {\"reason\":\"closed\"}",
        ),
        (
            RunSummary {
                warnings: vec![Warning {
                    code: "tool_entry_invalid".into(),
                    message: "entry 2 has no name".into(),
                    module: Some("demo".into()),
                    tool: None,
                    index: Some(2),
                    reason: Some("malformed".into()),
                }],
                ..summary()
            },
            "completed · 10 ms · 0 calls · person wait 0 ms\n\nReturn value: none\n\nWarnings:\n\
             - tool_entry_invalid: entry 2 has no name",
        ),
    ];
    for (summary, expected) in cases {
        assert_eq!(summary.render_text(), expected);
    }
}

#[test]
fn failures_carry_is_error_and_a_stable_code() {
    let stopped = RunSummary {
        status: RunStatus::Failed,
        termination_reason: Budget::Wall.error_code(),
        error: Some(RunFailure {
            code: Budget::Wall.error_code(),
            message: "the run passed its wall budget of 1000 ms".into(),
            detail: None,
        }),
        budget: Some(Budget::Wall),
        ..summary()
    };
    let result = serde_json::to_value(stopped.into_result()).unwrap();
    assert_eq!(result["isError"], true);
    assert_eq!(result["errorCode"], "budget_exhausted");
    assert_eq!(
        result["structuredContent"]["error"]["code"],
        "budget_exhausted:wall"
    );
    assert_eq!(result["structuredContent"]["budget"], "wall");

    let success = serde_json::to_value(summary().into_result()).unwrap();
    assert!(
        success.get("isError").is_none() && success.get("errorCode").is_none(),
        "{success}"
    );
}

#[test]
fn an_oversized_result_is_cut_under_3_mib_and_keeps_its_identity() {
    let huge = "é\"x".repeat(700_000); // ~2.8 MB raw, more once JSON-escaped, twice (text and output)
    let result = RunSummary {
        output: huge.clone(),
        value: json!("ok"),
        ..summary()
    }
    .into_result();
    let bytes = serde_json::to_string(&result).unwrap().len();
    assert!(bytes < MAX_RESULT_BYTES, "{bytes}");
    let ContentPart::Text { text } = &result.content[0];
    assert!(text.starts_with("completed · 10 ms"));
    assert!(text.contains("[Model text truncated for the 3 MiB result limit.]"));
    assert!(text.ends_with("Structured fields were omitted for size."));
    let structured = &result.structured_content;
    assert_eq!(structured["output"]["omitted"], true);
    assert_eq!(
        structured["output"]["original_bytes"],
        serde_json::to_string(&huge).unwrap().len()
    );
    assert_eq!(structured["status"], "completed");
    assert_eq!(structured["run_id"], "codemode:test");
    assert_eq!(structured["value"], "ok");
    assert!(
        !result.is_error,
        "shrinking never turns a success into an error"
    );
}

#[test]
fn truncation_cuts_on_character_boundaries() {
    assert_eq!(truncate_text("aé\"b", 2 + 1 + 2), "aé");
    assert_eq!(truncate_text("aé\"b", 2 + 1 + 2 + 2), "aé\"");
    assert_eq!(truncate_text("\u{1}x", 2 + 5), "");
}

#[test]
fn an_interim_reply_names_the_first_held_reason_or_running() {
    let running = interim("codemode:00000000000000aa", &[]);
    assert!(!running.is_error);
    assert_eq!(
        running.structured_content,
        json!({"status": "running", "run_id": "codemode:00000000000000aa", "held": {"reason": "running"}})
    );
    assert!(running.text().starts_with(
        "Still running: the program had not finished when this reply was due. When the program finishes, Kiln keeps its final result"
    ));
    let held = interim(
        "codemode:00000000000000aa",
        &[
            Held {
                tool: "login".into(),
                call: 3,
                reason: "login_handoff".into(),
            },
            Held {
                tool: "browser_use".into(),
                call: 2,
                reason: "consent".into(),
            },
        ],
    );
    assert_eq!(held.structured_content["held"]["reason"], "consent");
    assert_eq!(
        held.text(),
        format!(
            "Waiting on the person: browser_use (call 2) needs their consent; login (call 3) needs them to log in. The program resumes when they answer. {KEPT_SENTENCE}"
        )
    );
}

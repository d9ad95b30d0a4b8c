//! Argument coercion and validation, as data: each case is a schema, what a
//! call passed, and what reaches the implementation or how it is refused.

use kiln_capabilities::args::{InputSchema, snake_case};
use serde_json::{Value, json};

struct Case {
    name: &'static str,
    schema: Value,
    passed: Value,
    /// `Ok(args)` reaching the implementation, or `Err((code, words))` where
    /// every word must be in the message.
    expect: Result<Value, (&'static str, &'static [&'static str])>,
}

fn workflow() -> Value {
    json!({"type": "object", "properties": {"workflow_id": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["workflow_id"]})
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "camelCase folds onto snake_case",
            schema: workflow(),
            passed: json!({"workflowId": "w1", "limit": 3}),
            expect: Ok(json!({"workflow_id": "w1", "limit": 3})),
        },
        Case {
            name: "a bare id fills the one required *_id key",
            schema: workflow(),
            passed: json!({"id": "w1"}),
            expect: Ok(json!({"workflow_id": "w1"})),
        },
        Case {
            name: "a lone string fills the only required string field",
            schema: json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
            passed: json!("hello"),
            expect: Ok(json!({"text": "hello"})),
        },
        Case {
            name: "a lone number fills the one required *_id key",
            schema: json!({"type": "object", "properties": {"job_id": {"type": "integer"}}, "required": ["job_id"]}),
            passed: json!(42),
            expect: Ok(json!({"job_id": 42})),
        },
        Case {
            name: "nothing is guessed with two required strings",
            schema: json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "required": ["a", "b"]}),
            passed: json!("hello"),
            expect: Err((
                "invalid_arguments",
                &[
                    "demo (call 1) was passed a lone string, and `a`, `b` could each take it, so it was not guessed; pass an object naming the field",
                ],
            )),
        },
        Case {
            name: "a nested missing key names where it is missing",
            schema: json!({"type": "object", "properties": {"options": {"type": "object", "required": ["mode"]}}}),
            passed: json!({"options": {}}),
            expect: Err((
                "invalid_arguments",
                &["demo (call 1): argument `/options` is missing `mode`"],
            )),
        },
        Case {
            name: "unknown keys are named, with the keys the tool takes",
            schema: json!({"type": "object", "properties": {"url": {"type": "string"}}, "additionalProperties": false}),
            passed: json!({"url": "x", "verb": "GET"}),
            expect: Err((
                "invalid_arguments",
                &["demo (call 1): the arguments have unknown keys `verb`; it takes `url`"],
            )),
        },
        Case {
            name: "a string that fits no field is not an object",
            schema: json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
            passed: json!("hello"),
            expect: Err((
                "invalid_arguments",
                &["demo (call 1): the arguments must be an object; got a string"],
            )),
        },
        Case {
            name: "nothing is guessed with two required *_id keys",
            schema: json!({"type": "object", "properties": {"user_id": {"type": "string"}, "team_id": {"type": "string"}}, "required": ["user_id", "team_id"]}),
            passed: json!({"id": "x"}),
            expect: Err((
                "missing_arguments",
                &[
                    "demo (call 1)",
                    "`user_id`, `team_id`",
                    "passed `id` instead",
                ],
            )),
        },
        Case {
            name: "an id the schema knows stays an id",
            schema: json!({"type": "object", "properties": {"id": {"type": "string"}, "workflow_id": {"type": "string"}}, "required": ["workflow_id"]}),
            passed: json!({"id": "x"}),
            expect: Err((
                "missing_arguments",
                &[
                    "missing required argument `workflow_id`",
                    "passed `id` instead",
                ],
            )),
        },
        Case {
            name: "a misspelled argument is refused naming call, missing keys and what was passed",
            schema: workflow(),
            passed: json!({"workflow": "w1"}),
            expect: Err((
                "missing_arguments",
                &[
                    "demo (call 1) is missing required argument `workflow_id`",
                    "passed `workflow` instead",
                ],
            )),
        },
        Case {
            name: "no arguments pass to validation, which names the field",
            schema: workflow(),
            passed: json!({}),
            expect: Err((
                "invalid_arguments",
                &["demo (call 1): `workflow_id` is required"],
            )),
        },
        Case {
            name: "null is no arguments",
            schema: json!({"type": "object", "properties": {}}),
            passed: Value::Null,
            expect: Ok(json!({})),
        },
        Case {
            name: "a type violation names the path, the expected type and the value's type",
            schema: workflow(),
            passed: json!({"workflow_id": "w1", "limit": "ten"}),
            expect: Err((
                "invalid_arguments",
                &["argument `/limit` must be an integer", "got a string"],
            )),
        },
        Case {
            name: "a nested violation names the nested path",
            schema: json!({"type": "object", "properties": {"items": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "number"}}}}}}),
            passed: json!({"items": [{"n": 1}, {"n": true}]}),
            expect: Err((
                "invalid_arguments",
                &["argument `/items/1/n` must be a number", "got a boolean"],
            )),
        },
        Case {
            name: "several allowed types are all named",
            schema: json!({"type": "object", "properties": {"v": {"type": ["string", "null"]}}}),
            passed: json!({"v": 3}),
            expect: Err((
                "invalid_arguments",
                &["`/v` must be null or a string", "got an integer"],
            )),
        },
        Case {
            name: "other keywords name the path and the value's type",
            schema: json!({"type": "object", "properties": {"mode": {"enum": ["a", "b"]}}}),
            passed: json!({"mode": "c"}),
            expect: Err((
                "invalid_arguments",
                &["argument `/mode` is invalid", "got a string"],
            )),
        },
        Case {
            name: "camelCase does not overwrite the snake_case key passed too",
            schema: workflow(),
            passed: json!({"workflow_id": "w1", "workflowId": "w2"}),
            expect: Ok(json!({"workflow_id": "w1", "workflowId": "w2"})),
        },
        Case {
            name: "whichever order the two spellings come in",
            schema: workflow(),
            passed: json!({"workflowId": "w2", "workflow_id": "w1"}),
            expect: Ok(json!({"workflowId": "w2", "workflow_id": "w1"})),
        },
    ]
}

#[test]
fn coercion_and_validation_cases() {
    for case in cases() {
        let schema = InputSchema::compile(&case.schema).unwrap();
        let got = schema.check("demo (call 1)", case.passed.clone());
        match (&case.expect, got) {
            (Ok(want), Ok(got)) => assert_eq!(&got, want, "{}", case.name),
            (Err((code, words)), Err(error)) => {
                assert_eq!(&error.code, code, "{}: {}", case.name, error.message);
                for word in *words {
                    assert!(
                        error.message.contains(word),
                        "{}: `{word}` not in: {}",
                        case.name,
                        error.message
                    );
                }
            }
            (want, got) => panic!("{}: wanted {want:?}, got {got:?}", case.name),
        }
    }
}

#[test]
fn snake_case_folds_the_usual_spellings() {
    for (from, to) in [
        ("workflowId", "workflow_id"),
        ("HTTPMethod", "http_method"),
        ("maxTokens2", "max_tokens2"),
        ("already_snake", "already_snake"),
    ] {
        assert_eq!(snake_case(from), to, "{from}");
    }
}

#[test]
fn a_schema_that_does_not_compile_says_why() {
    let problem =
        InputSchema::compile(&json!({"type": "object", "properties": {"a": {"type": "strang"}}}))
            .unwrap_err();
    assert!(problem.contains("strang"), "{problem}");
    // A `$ref` elsewhere is never followed: not a file, not the network.
    let problem = InputSchema::compile(&json!({"$ref": "file:///etc/hostname"})).unwrap_err();
    assert!(problem.contains("file:///etc/hostname"), "{problem}");
    let problem = InputSchema::compile(&json!({"$ref": "http://127.0.0.1:9/s.json"})).unwrap_err();
    assert!(problem.contains("127.0.0.1:9"), "{problem}");
    let problem = InputSchema::compile(&json!([1])).unwrap_err();
    assert!(problem.contains("an array"), "{problem}");
}

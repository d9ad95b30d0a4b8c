//! The ladder end to end: lookup, arguments, decision, approval, the
//! implementation, and what leaves it (outcomes, redaction).

// Helpers outside `#[test]` functions unwrap too: a panic is a failed test.
#![allow(
    clippy::unwrap_used,
    clippy::result_large_err,
    reason = "a test: a panic is a failed test with a line number, and its tools answer the contract's error"
)]

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use futures::executor::block_on;
use futures::future::LocalBoxFuture;
use kiln_capabilities::gate::{Fixed, Headless};
use kiln_capabilities::{
    Answer, ApprovalRequest, Approver, Autonomy, CallContext, CapabilitySpec, Category, Dispatcher,
    Gate, GateSettings, HeldSignal, Implementation, Mode, Permit, Registry, Secret, SecretScope,
    Source,
};
use kiln_types::protocol::CallRequest;
use kiln_types::run::RunLimits;
use kiln_types::tool_result::{CallOutcome, ToolReply};
use serde_json::{Value, json};

/// Answers with its arguments plus the secret `TOKEN` when asked, and counts calls.
struct Probe {
    calls: Rc<Cell<u32>>,
}

impl Implementation for Probe {
    fn call(
        &self,
        args: Value,
        context: CallContext,
        _permit: Permit,
    ) -> LocalBoxFuture<'static, ToolReply> {
        self.calls.set(self.calls.get() + 1);
        Box::pin(async move {
            let token = context
                .secret("TOKEN")
                .map(|s| s.expose().to_owned())
                .unwrap_or_default();
            if args.get("fail").is_some() {
                return Err(kiln_types::tool_result::ToolFailure {
                    code: "upstream".into(),
                    message: format!("upstream refused key {token}"),
                    detail: Some(json!({"sent": token})),
                    outcome: CallOutcome::Error,
                });
            }
            Ok(json!({"args": args, "echo": format!("Bearer {token}")}))
        })
    }
}

/// Answers with its arguments and touches no secret; given `refuse`, fails
/// with them as its refusal's detail.
struct Mirror;

impl Implementation for Mirror {
    fn call(
        &self,
        args: Value,
        _context: CallContext,
        _permit: Permit,
    ) -> LocalBoxFuture<'static, ToolReply> {
        Box::pin(async move {
            if args.get("refuse").is_some() {
                return Err(kiln_types::tool_result::ToolFailure {
                    code: "mirror_refused".into(),
                    message: "refused as asked".into(),
                    detail: Some(json!({"mirrored": args})),
                    outcome: CallOutcome::Error,
                });
            }
            Ok(json!({"mirrored": args}))
        })
    }
}

/// Records the requests and answers from a queue.
#[derive(Default)]
struct PersonState {
    asked: RefCell<Vec<ApprovalRequest>>,
    answers: RefCell<Vec<Answer>>,
}

#[derive(Clone)]
struct Person(Rc<PersonState>);

impl std::ops::Deref for Person {
    type Target = PersonState;
    fn deref(&self) -> &PersonState {
        &self.0
    }
}

impl Approver for Person {
    fn ask(&self, request: ApprovalRequest) -> LocalBoxFuture<'static, Answer> {
        self.asked.borrow_mut().push(request);
        let answer = self.answers.borrow_mut().remove(0);
        Box::pin(async move { answer })
    }
}

struct Setup {
    dispatcher: Dispatcher,
    calls: Rc<Cell<u32>>,
    held: Rc<RefCell<Vec<bool>>>,
}

fn setup(gate: Option<Rc<Gate>>) -> Setup {
    let calls = Rc::new(Cell::new(0));
    let mut registry = Registry::new();
    for (name, category) in [
        ("look", Category::Read),
        ("save", Category::Write),
        ("run_code", Category::Execute),
    ] {
        let spec = CapabilitySpec {
            name: name.into(),
            description: format!("{name} things"),
            input_schema: json!({"type": "object", "properties": {"note_id": {"type": "string"}, "password": {"type": "string"}, "fail": {}}}),
            category,
            result: json!({}),
            source: Source::Builtin,
        };
        registry
            .add(
                spec,
                Rc::new(Probe {
                    calls: calls.clone(),
                }),
            )
            .unwrap();
    }
    let mirror = CapabilitySpec {
        name: "mirror".into(),
        description: "mirrors its arguments".into(),
        input_schema: json!({"type": "object", "properties": {"pin": {"type": "string"}}, "required": ["pin"]}),
        category: Category::Read,
        result: json!({}),
        source: Source::Builtin,
    };
    registry.add(mirror, Rc::new(Mirror)).unwrap();
    let mut secrets = SecretScope::new();
    secrets.insert("TOKEN", Secret::new("sk-live-123456"));
    let dispatcher = Dispatcher::new(
        Rc::new(registry),
        gate,
        secrets,
        RunLimits::default(),
        "ladder test",
    );
    Setup {
        dispatcher,
        calls,
        held: Rc::new(RefCell::new(Vec::new())),
    }
}

impl Setup {
    fn call(&self, number: u32, tool: &str, args: Value) -> ToolReply {
        let held = self.held.clone();
        let signal: HeldSignal = Rc::new(move |on| held.borrow_mut().push(on));
        block_on(self.dispatcher.call(
            CallRequest {
                call_number: number,
                tool: tool.into(),
                args,
            },
            signal,
        ))
    }
}

fn person(answers: Vec<Answer>) -> Person {
    Person(Rc::new(PersonState {
        asked: RefCell::default(),
        answers: RefCell::new(answers),
    }))
}

fn gate_with(mode: Mode, approver: Rc<dyn Approver>) -> Rc<Gate> {
    Gate::new(
        "ladder test",
        GateSettings {
            mode,
            ..GateSettings::default()
        },
        approver,
    )
    .unwrap()
}

#[test]
fn approve_runs_the_call_and_the_wait_is_held_on_a_person() {
    let person = person(vec![Answer::Approve]);
    let setup = setup(Some(gate_with(Mode::Default, Rc::new(person.clone()))));
    let reply = setup
        .call(1, "save", json!({"noteId": "n1", "password": "hunter2"}))
        .unwrap();
    assert_eq!(
        reply["args"],
        json!({"note_id": "n1", "password": "hunter2"})
    );
    assert_eq!(*setup.held.borrow(), vec![true, false]);
    let asked = person.asked.borrow();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].tool, "save");
    assert_eq!(asked[0].category, Category::Write);
    // A password the program wrote itself is not a secret of the run: the
    // person sees what the call sends.
    assert_eq!(
        asked[0].args,
        json!({"note_id": "n1", "password": "hunter2"})
    );
    assert_eq!(asked[0].host, "ladder test");
}

/// What an approval card shows of a call's arguments: the run's secrets are
/// scrubbed wherever they are, nothing else hides behind a key's name, and a
/// long value is cut with a note.
#[test]
fn a_card_hides_the_runs_secrets_and_nothing_else() {
    let long = "A".repeat(10_000);
    let cases = [
        (
            json!({"X-Session-Token": "exfiltrated data"}),
            json!({"X-Session-Token": "exfiltrated data"}),
        ),
        (
            json!({"note": "sk-live-123456"}),
            json!({"note": "[redacted:TOKEN]"}),
        ),
        (
            json!({"body": "key=sk-live-123456&x=1"}),
            json!({"body": "key=[redacted:TOKEN]&x=1"}),
        ),
        (
            json!({"body": long}),
            json!({"body": format!("{}… [cut: 9,700 more characters]", "A".repeat(300))}),
        ),
    ];
    for (args, shown) in cases {
        let person = person(vec![Answer::Approve]);
        let setup = setup(Some(gate_with(Mode::Default, Rc::new(person.clone()))));
        setup.call(1, "save", args.clone()).unwrap();
        assert_eq!(person.asked.borrow()[0].args, shown, "{args}");
    }
}

#[test]
fn reads_take_the_fast_path_and_are_never_asked() {
    let person = person(vec![]);
    let setup = setup(Some(gate_with(Mode::Default, Rc::new(person.clone()))));
    setup.call(1, "look", json!({})).unwrap();
    assert!(person.asked.borrow().is_empty());
    assert!(setup.held.borrow().is_empty());
}

#[test]
fn deny_refuses_without_running_the_implementation() {
    let setup = setup(Some(gate_with(
        Mode::Default,
        Rc::new(person(vec![Answer::Deny])),
    )));
    let failure = setup.call(2, "save", json!({})).unwrap_err();
    assert_eq!(
        (failure.code.as_str(), failure.outcome),
        ("denied", CallOutcome::Denied)
    );
    assert!(
        failure.message.contains("save (call 2) was denied"),
        "{}",
        failure.message
    );
    assert_eq!(setup.calls.get(), 0);
}

#[test]
fn allow_for_session_answers_once_for_every_later_call_and_every_run_of_the_gate() {
    let person = person(vec![Answer::AllowForSession]);
    let gate = gate_with(Mode::Default, Rc::new(person.clone()));
    let first = setup(Some(gate.clone()));
    first.call(1, "save", json!({})).unwrap();
    first.call(2, "save", json!({})).unwrap();
    // Another run (another loop) under the same gate.
    let second = setup(Some(gate.clone()));
    second.call(1, "save", json!({})).unwrap();
    assert_eq!(person.asked.borrow().len(), 1);
    assert!(gate.session_allowed("builtin/save"));
}

#[test]
fn a_headless_gate_denies_naming_its_host_and_holds_nobody() {
    let gate = Gate::headless(
        "kiln run (stdin is not a terminal)",
        GateSettings::default(),
    )
    .unwrap();
    let setup = setup(Some(gate));
    let failure = setup.call(1, "save", json!({})).unwrap_err();
    assert_eq!(failure.code, "consent_unavailable");
    assert_eq!(failure.outcome, CallOutcome::ConsentUnavailable);
    assert!(
        failure
            .message
            .contains("kiln run (stdin is not a terminal) has nobody to ask"),
        "{}",
        failure.message
    );
    assert!(setup.held.borrow().is_empty());
    assert_eq!(setup.calls.get(), 0);
}

#[test]
fn a_missing_gate_is_a_warned_bug_that_fails_closed() {
    let setup = setup(None);
    assert!(
        setup
            .dispatcher
            .warnings()
            .iter()
            .any(|w| w.code == "gate_missing")
    );
    setup.call(1, "look", json!({})).unwrap();
    let failure = setup.call(2, "save", json!({})).unwrap_err();
    assert_eq!(failure.code, "consent_unavailable");
    assert!(
        failure.message.contains("no gate was set"),
        "{}",
        failure.message
    );
}

#[test]
fn plan_mode_and_a_blocked_tool_refuse_with_deliberate_wording() {
    let plan = setup(Some(gate_with(Mode::Plan, Rc::new(Fixed(Answer::Approve)))));
    let failure = plan.call(1, "save", json!({})).unwrap_err();
    assert_eq!(
        (failure.code.as_str(), failure.outcome),
        ("refused", CallOutcome::Refused)
    );
    assert!(
        failure.message.contains("plan mode runs only read calls"),
        "{}",
        failure.message
    );
    plan.call(2, "look", json!({})).unwrap();

    let gate = gate_with(Mode::Auto, Rc::new(Fixed(Answer::Approve)));
    gate.set_autonomy("look", Some(Autonomy::Block)).unwrap();
    let blocked = setup(Some(gate));
    let failure = blocked.call(1, "look", json!({})).unwrap_err();
    assert_eq!(failure.outcome, CallOutcome::Refused);
    for words in [
        "blocked look",
        "deliberate",
        "do not try to work around it",
        "report it",
    ] {
        assert!(
            failure.message.contains(words),
            "`{words}` in {}",
            failure.message
        );
    }
    assert_eq!(blocked.calls.get(), 0);
}

#[test]
fn the_brake_asks_before_code_execution_even_in_auto() {
    let person = person(vec![Answer::Deny]);
    let gate = gate_with(Mode::Auto, Rc::new(person.clone()));
    gate.set_brake(true);
    let setup = setup(Some(gate.clone()));
    setup.call(1, "save", json!({})).unwrap();
    let failure = setup.call(2, "run_code", json!({})).unwrap_err();
    assert_eq!(failure.code, "denied");
    assert_eq!(
        person.asked.borrow()[0].reason,
        kiln_capabilities::gate::AskReason::Brake
    );
    gate.set_brake(false);
    setup.call(3, "run_code", json!({})).unwrap();
}

#[test]
fn secrets_never_leave_in_results_or_errors() {
    let setup = setup(Some(gate_with(Mode::Auto, Rc::new(Headless::new("t")))));
    let reply = setup.call(1, "look", json!({})).unwrap();
    assert_eq!(reply["echo"], "Bearer [redacted:TOKEN]");
    let failure = setup.call(2, "look", json!({"fail": true})).unwrap_err();
    assert!(!failure.message.contains("sk-live"), "{}", failure.message);
    assert_eq!(failure.detail, Some(json!({"sent": "[redacted:TOKEN]"})));
    let scope = {
        let mut scope = SecretScope::new();
        scope.insert("TOKEN", Secret::new("sk-live-123456"));
        scope
    };
    assert_eq!(format!("{scope:?}"), "{\"TOKEN\"}");
    assert_eq!(
        format!("{:?} {}", Secret::new("x"), Secret::new("x")),
        "Secret(<redacted>) <redacted>"
    );
    assert!(
        scope
            .get("OTHER")
            .unwrap_err()
            .contains("no secret named `OTHER`")
    );
    // One secret inside another is replaced whole; a number that prints as a
    // secret is replaced too.
    let mut scope = SecretScope::new();
    scope.insert("A", Secret::new("abc123"));
    scope.insert("B", Secret::new("abc123xyz"));
    scope.insert("PIN", Secret::new("4242"));
    assert_eq!(
        scope.redact(json!({"t": "k=abc123xyz;abc123", "pin": 4242, "n": 7})),
        json!({"t": "k=[redacted:B];[redacted:A]", "pin": "[redacted:PIN]", "n": 7})
    );
}

#[test]
fn bad_arguments_are_refused_before_anyone_is_asked() {
    let person = person(vec![]);
    let setup = setup(Some(gate_with(Mode::Default, Rc::new(person.clone()))));
    let failure = setup.call(4, "save", json!({"note_id": 7})).unwrap_err();
    assert_eq!(failure.code, "invalid_arguments");
    assert!(
        failure
            .message
            .contains("save (call 4): argument `/note_id` must be a string; got an integer"),
        "{}",
        failure.message
    );
    assert!(person.asked.borrow().is_empty());
}

#[test]
fn unknown_and_doubly_claimed_names_are_unavailable() {
    let setup = setup(Some(gate_with(Mode::Auto, Rc::new(Headless::new("t")))));
    let failure = setup.call(1, "nope", json!({})).unwrap_err();
    assert_eq!(failure.outcome, CallOutcome::ToolUnavailable);

    let mut registry = Registry::new();
    for host in ["page", "cli"] {
        let spec = CapabilitySpec {
            name: "twin".into(),
            description: String::new(),
            input_schema: json!({"type": "object"}),
            category: Category::Read,
            result: json!({}),
            source: Source::Host { host: host.into() },
        };
        registry
            .add(
                spec,
                Rc::new(Probe {
                    calls: Rc::default(),
                }),
            )
            .unwrap();
    }
    let why = registry.lookup("twin").err().unwrap();
    assert!(why.contains("claimed by 2 sources (page, cli)"), "{why}");
    assert_eq!(registry.catalog().as_array().map(Vec::len), Some(2));
}

/// Answers after the gate's settings changed under it.
struct ChangesSettings {
    gate: Rc<RefCell<Option<Rc<Gate>>>>,
    answer: Answer,
}

impl Approver for ChangesSettings {
    fn ask(&self, _request: ApprovalRequest) -> LocalBoxFuture<'static, Answer> {
        if let Some(gate) = self.gate.borrow().as_ref() {
            gate.set_autonomy("save", Some(Autonomy::Block)).unwrap();
        }
        let answer = self.answer.clone();
        Box::pin(async move { answer })
    }
}

#[test]
fn a_setting_changed_while_the_person_decided_still_refuses() {
    let slot: Rc<RefCell<Option<Rc<Gate>>>> = Rc::default();
    let approver = ChangesSettings {
        gate: slot.clone(),
        answer: Answer::Approve,
    };
    let gate = gate_with(Mode::Default, Rc::new(approver));
    *slot.borrow_mut() = Some(gate.clone());
    let setup = setup(Some(gate));
    let failure = setup.call(1, "save", json!({})).unwrap_err();
    assert_eq!(failure.outcome, CallOutcome::Refused);
    assert!(
        failure.message.contains("has blocked save"),
        "{}",
        failure.message
    );
    assert_eq!(setup.calls.get(), 0);
}

#[test]
fn allow_for_session_under_the_brake_approves_that_call_only() {
    let person = person(vec![Answer::AllowForSession, Answer::Deny]);
    let gate = gate_with(Mode::Auto, Rc::new(person.clone()));
    gate.set_brake(true);
    let setup = setup(Some(gate.clone()));
    setup.call(1, "run_code", json!({})).unwrap();
    assert!(
        !gate.session_allowed("builtin/run_code"),
        "the brake's answers are not kept"
    );
    assert_eq!(
        setup.call(2, "run_code", json!({})).unwrap_err().code,
        "denied"
    );
}

/// Never answers.
struct Silent;

impl Approver for Silent {
    fn ask(&self, _request: ApprovalRequest) -> LocalBoxFuture<'static, Answer> {
        Box::pin(futures::future::pending())
    }
}

#[test]
fn a_call_given_up_while_held_is_no_longer_held() {
    let setup = setup(Some(gate_with(Mode::Default, Rc::new(Silent))));
    let held = setup.held.clone();
    let signal: HeldSignal = Rc::new(move |on| held.borrow_mut().push(on));
    let mut call = setup.dispatcher.call(
        CallRequest {
            call_number: 1,
            tool: "save".into(),
            args: json!({}),
        },
        signal,
    );
    assert!(futures::FutureExt::now_or_never(&mut call).is_none());
    assert_eq!(*setup.held.borrow(), vec![true]);
    drop(call);
    assert_eq!(*setup.held.borrow(), vec![true, false]);
    assert_eq!(setup.calls.get(), 0);
}

#[test]
fn allow_for_session_holds_for_that_source_only() {
    let person = person(vec![Answer::AllowForSession, Answer::Deny]);
    let gate = gate_with(Mode::Default, Rc::new(person.clone()));
    let run_against = |url: &str| {
        let mut registry = Registry::new();
        let spec = CapabilitySpec {
            name: "fs_write".into(),
            description: String::new(),
            input_schema: json!({"type": "object"}),
            category: Category::Write,
            result: json!({}),
            source: Source::Mcp {
                server: "fs".into(),
                tool: "write".into(),
                url: url.into(),
            },
        };
        registry
            .add(
                spec,
                Rc::new(Probe {
                    calls: Rc::default(),
                }),
            )
            .unwrap();
        let dispatcher = Dispatcher::new(
            Rc::new(registry),
            Some(gate.clone()),
            SecretScope::new(),
            RunLimits::default(),
            "ladder test",
        );
        let held: HeldSignal = Rc::new(|_| {});
        block_on(dispatcher.call(
            CallRequest {
                call_number: 1,
                tool: "fs_write".into(),
                args: json!({}),
            },
            held,
        ))
    };
    run_against("http://a.example/mcp").unwrap();
    run_against("http://a.example/mcp").unwrap();
    // Another server under the same name is asked again (and denied here).
    assert_eq!(
        run_against("http://b.example/mcp").unwrap_err().code,
        "denied"
    );
    assert_eq!(person.asked.borrow().len(), 2);
}

/// Redaction is not an oracle (issue 15 #17): an echo of what the program
/// passed reads the same whether its guess was the secret or not, in a result
/// and in an argument error; what a call that sent the secret answers is
/// still scrubbed of it.
#[test]
fn an_echo_of_the_programs_own_guess_does_not_confirm_it() {
    let setup = setup(Some(gate_with(Mode::Auto, Rc::new(Headless::new("t")))));
    for (number, guess) in [(1, "sk-live-123455"), (2, "sk-live-123456")] {
        let reply = setup.call(number, "mirror", json!({"pin": guess})).unwrap();
        assert_eq!(reply, json!({"mirrored": {"pin": guess}}), "{guess}");
    }
    let mut keys = serde_json::Map::new();
    for guess in ["sk-live-123455", "sk-live-123456", "sk-live-123457"] {
        keys.insert(guess.into(), json!(1));
    }
    let failure = setup.call(3, "mirror", Value::Object(keys)).unwrap_err();
    assert_eq!(failure.code, "missing_arguments");
    assert!(
        failure
            .message
            .contains("`sk-live-123455`, `sk-live-123456`, `sk-live-123457`"),
        "{}",
        failure.message
    );
    assert!(!failure.message.contains("redacted"), "{}", failure.message);
    // The probe sends TOKEN: what it answers is scrubbed even of the program's own copy.
    let reply = setup
        .call(4, "look", json!({"note_id": "sk-live-123456"}))
        .unwrap();
    assert_eq!(reply["echo"], "Bearer [redacted:TOKEN]");
    assert_eq!(reply["args"]["note_id"], "[redacted:TOKEN]");
}

/// An answer deeper than Kiln carries fails its call, catchably, instead of
/// breaking whoever reads it next (issue 15 #9).
#[test]
fn an_answer_too_deep_to_carry_fails_its_call() {
    let setup = setup(Some(gate_with(Mode::Auto, Rc::new(Headless::new("t")))));
    let mut deep = json!("pin");
    for _ in 0..63 {
        deep = json!([deep]);
    }
    // `{pin, deep: …}` is 64 levels, its mirror 65.
    let failure = setup
        .call(1, "mirror", json!({"pin": "x", "deep": deep}))
        .unwrap_err();
    assert_eq!(failure.code, "invalid_result");
    assert!(
        failure
            .message
            .contains("mirror (call 1) answered a value that is nested 65 levels deep; Kiln carries values up to 64"),
        "{}",
        failure.message
    );
    let fine = setup.call(2, "mirror", json!({"pin": "x"})).unwrap();
    assert_eq!(fine, json!({"mirrored": {"pin": "x"}}));

    // A refusal's detail is held to the same depth: the call fails `invalid_result`,
    // naming the tool's own code and words.
    let failure = setup
        .call(
            3,
            "mirror",
            json!({"pin": "x", "refuse": true, "deep": deep}),
        )
        .unwrap_err();
    assert_eq!(failure.code, "invalid_result");
    assert!(
        failure.message.contains(
            "mirror (call 3) failed (mirror_refused: refused as asked) with a detail that is nested 65 levels deep"
        ),
        "{}",
        failure.message
    );
    assert!(failure.detail.is_none());
    let shallow = setup
        .call(4, "mirror", json!({"pin": "x", "refuse": true}))
        .unwrap_err();
    assert_eq!(shallow.code, "mirror_refused");
}

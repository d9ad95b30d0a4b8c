//! The app's components in headless Chromium (`wasm-bindgen-test`, run by
//! `cargo xtask test`): mounted into the document, clicked, given a tick,
//! and compared — what the native model tests cannot show: that approval
//! cards come one at a time with the count behind them and answer the call
//! they show, that Escape denies, that what a program sent is shown with its
//! controls and bidi overrides escaped, and that a program's question is
//! answered by its buttons.
#![expect(
    clippy::unwrap_used,
    reason = "clippy does not see `wasm_bindgen_test` functions as tests; a panic is a failed test"
)]

use std::cell::RefCell;
use std::rc::Rc;

use futures::FutureExt as _;
use leptos::prelude::*;
use serde_json::json;
use wasm_bindgen::JsCast as _;
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

use crate::approval::PageApprover;
use crate::demo_tools::{self, Asker};
use crate::{ApprovalCard, QuestionCard};
use kiln_types::permission::{Answer, ApprovalRequest, AskReason, Category};

wasm_bindgen_test_configure!(run_in_browser);

/// A fresh element of the document's body to mount into.
fn container() -> web_sys::HtmlElement {
    let document = web_sys::window().unwrap().document().unwrap();
    let element: web_sys::HtmlElement = document.create_element("div").unwrap().unchecked_into();
    document.body().unwrap().append_child(&element).unwrap();
    element
}

/// Lets the page's effects and timers run.
async fn tick() {
    crate::sleep_ms(20).await;
}

fn text(root: &web_sys::HtmlElement, testid: &str) -> Option<String> {
    root.query_selector(&format!("[data-testid=\"{testid}\"]"))
        .unwrap()
        .map(|element| element.text_content().unwrap_or_default())
}

fn click(root: &web_sys::HtmlElement, testid: &str) {
    let element: web_sys::HtmlElement = root
        .query_selector(&format!("[data-testid=\"{testid}\"]"))
        .unwrap()
        .unwrap()
        .unchecked_into();
    element.click();
}

/// An `ApprovalCard` mounted into a fresh element, and the approver behind it.
fn mount_approval_card() -> (
    web_sys::HtmlElement,
    PageApprover,
    leptos::mount::UnmountHandle<impl leptos::tachys::view::Mountable>,
) {
    let _ = any_spawner::Executor::init_wasm_bindgen();
    let root = container();
    let (shown, set_shown) = signal(None::<ApprovalRequest>);
    let (waiting, set_waiting) = signal(0_usize);
    let approver = PageApprover::new(set_shown, set_waiting);
    let mounted = approver.clone();
    let handle = leptos::mount::mount_to(root.clone(), move || {
        view! { <ApprovalCard request=shown waiting=waiting approver=mounted.clone() /> }
    });
    (root, approver, handle)
}

fn request(call_number: u32, tool: &str) -> ApprovalRequest {
    ApprovalRequest {
        call_number,
        tool: tool.into(),
        category: Category::Write,
        module: "page".into(),
        description: String::new(),
        args: json!({"n": call_number}),
        reason: AskReason::Mode,
        host: "page".into(),
    }
}

/// A card shows what a program sent with every control character and bidi
/// override escaped, so neither rewrites what the person reads.
#[wasm_bindgen_test]
async fn an_approval_card_shows_bidi_overrides_and_controls_escaped() {
    let (root, approver, _handle) = mount_approval_card();
    let mut hostile = request(1, "save_note");
    hostile.args = json!({"name": "report\u{202e}fdp.exe", "note": "C1 \u{9b}31m"});
    hostile.module = "mcp:\u{2066}trusted".into();
    let _asked = approver.ask(hostile);
    tick().await;
    let args = text(&root, "approval-args").unwrap();
    assert!(args.contains("report\\u{202E}fdp.exe"), "{args}");
    assert!(args.contains("C1 \\u{009B}31m"), "{args}");
    let card = text(&root, "approval").unwrap();
    assert!(card.contains("mcp:\\u{2066}trusted"), "{card}");
    assert!(
        !card.chars().any(
            |c| matches!(c, '\u{80}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        ),
        "{card:?}"
    );
}

#[wasm_bindgen_test]
async fn approval_cards_come_one_at_a_time_and_answer_the_call_they_show() {
    let (root, approver, _handle) = mount_approval_card();
    tick().await;
    assert_eq!(
        text(&root, "approval"),
        None,
        "no card before anything asks"
    );

    let answers: Rc<RefCell<Vec<(u32, Answer)>>> = Rc::default();
    for (number, tool) in [(1, "save_note"), (2, "send_mail")] {
        let asked = approver.ask(request(number, tool));
        let answers = answers.clone();
        leptos::task::spawn_local(async move {
            let answer = asked.await;
            answers.borrow_mut().push((number, answer));
        });
    }
    tick().await;
    assert_eq!(
        text(&root, "approval-title").as_deref(),
        Some("Allow save_note (call 1)?")
    );
    assert_eq!(
        text(&root, "approval-waiting").as_deref(),
        Some("1 more call waiting for an answer after this one.")
    );

    click(&root, "deny");
    tick().await;
    assert_eq!(*answers.borrow(), [(1, Answer::Deny)]);
    assert_eq!(
        text(&root, "approval-title").as_deref(),
        Some("Allow send_mail (call 2)?")
    );
    assert_eq!(
        text(&root, "approval-waiting"),
        None,
        "nobody waits behind the last card"
    );

    // Escape denies the card on show, and the last card closes.
    let init = web_sys::KeyboardEventInit::new();
    init.set_key("Escape");
    init.set_bubbles(true);
    let escape =
        web_sys::KeyboardEvent::new_with_keyboard_event_init_dict("keydown", &init).unwrap();
    root.query_selector("[data-testid=\"approval-title\"]")
        .unwrap()
        .unwrap()
        .dispatch_event(&escape)
        .unwrap();
    tick().await;
    assert_eq!(*answers.borrow(), [(1, Answer::Deny), (2, Answer::Deny)]);
    assert_eq!(text(&root, "approval"), None);
}

#[wasm_bindgen_test]
async fn a_programs_question_is_answered_by_its_buttons() {
    let _ = any_spawner::Executor::init_wasm_bindgen();
    let root = container();
    let (question, set_question) = signal(None::<String>);
    let asker = Asker::new(set_question);
    let mounted = asker.clone();
    let _handle = leptos::mount::mount_to(root.clone(), move || {
        view! { <QuestionCard question=question asker=mounted.clone() /> }
    });
    let held: Rc<RefCell<Vec<bool>>> = Rc::default();
    let held_log = held.clone();
    let mut reply = demo_tools::call(
        "ask",
        json!({"question": "Deploy to production?"}),
        &asker,
        Rc::new(move |on| held_log.borrow_mut().push(on)),
    )
    .boxed_local();
    // Polled once: the call puts its question and waits.
    assert!((&mut reply).now_or_never().is_none(), "unanswered yet");
    tick().await;
    assert_eq!(
        text(&root, "question-text").as_deref(),
        Some("Deploy to production?")
    );
    assert_eq!(*held.borrow(), [true], "the call waits on the person");

    click(&root, "answer-no");
    tick().await;
    assert_eq!(reply.now_or_never(), Some(Ok(json!({"answer": false}))));
    assert_eq!(*held.borrow(), [true, false]);
    assert_eq!(
        text(&root, "question"),
        None,
        "the card goes with the answer"
    );
}

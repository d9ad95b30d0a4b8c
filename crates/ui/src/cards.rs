//! The cards a run puts to the person: an approval card for a call the ladder
//! asks about (Approve, Deny, Allow for this session), and a program's yes/no
//! question (`tools.ask`). The chat shows the same cards for an agent turn.

use leptos::ev::KeyboardEvent;
use leptos::prelude::*;

use crate::approval::PageApprover;
use crate::demo_tools::Asker;
use crate::{agent_view, plan_tree};
use kiln_types::permission::{Answer, ApprovalRequest, card_json, card_text};
use wasm_bindgen::JsCast as _;

/// A program's question to the person (`tools.ask`), while it waits for them;
/// `id` prefixes its element ids (the editor's and the chat's can show at once).
#[component]
pub(crate) fn QuestionCard(
    question: ReadSignal<Option<String>>,
    asker: Asker,
    #[prop(default = "question")] id: &'static str,
) -> impl IntoView {
    // The asker holds the run's answer channel, which is not `Send`.
    let asker = StoredValue::new_local(asker);
    // The question takes the keyboard focus on its heading, as an approval
    // card does: Tab reaches Yes and No.
    let heading = NodeRef::<leptos::html::H2>::new();
    Effect::new(move || {
        if let Some(heading) = heading.get() {
            let _ = heading.focus();
            heading.scroll_into_view();
        }
    });
    move || {
        question.get().map(|text| {
            let yes = move || asker.with_value(|asker| asker.answer(true));
            let no = move || asker.with_value(|asker| asker.answer(false));
            view! {
                <section class="question" data-testid="question" role="alertdialog" aria-labelledby=format!("{id}-title") aria-describedby=format!("{id}-text")>
                    <h2 id=format!("{id}-title") tabindex="-1" node_ref=heading>"The program asks you"</h2>
                    <p id=format!("{id}-text") data-testid="question-text">{text}</p>
                    <div class="actions">
                        <button data-testid="answer-yes" on:click=move |_| yes()>"Yes"</button>
                        <button class="secondary" data-testid="answer-no" on:click=move |_| no()>"No"</button>
                    </div>
                </section>
            }
        })
    }
}

/// The program an `execute_code` call would run, and its other arguments as JSON
/// (none when it has only the program).
fn program_of(request: &ApprovalRequest) -> Option<(String, Option<String>)> {
    let code = request.args.get("code")?.as_str()?.to_owned();
    let mut rest = request.args.as_object()?.clone();
    rest.remove("code");
    let rest = (!rest.is_empty()).then(|| card_json(&serde_json::Value::Object(rest)));
    Some((code, rest))
}

/// A call waiting for the person's approval; `id` prefixes its element ids.
#[component]
pub(crate) fn ApprovalCard(
    request: ReadSignal<Option<ApprovalRequest>>,
    waiting: ReadSignal<usize>,
    approver: PageApprover,
    #[prop(default = "approval")] id: &'static str,
) -> impl IntoView {
    let approver = StoredValue::new_local(approver);
    // Each new card takes the keyboard focus on Approve, its primary action:
    // Enter approves, Escape denies, Tab reaches Deny and Allow for this
    // session. When the last card closes, the focus goes back where it was.
    let primary = NodeRef::<leptos::html::Button>::new();
    let before = StoredValue::new_local(None::<web_sys::HtmlElement>);
    Effect::new(move || {
        if let Some(primary) = primary.get() {
            if before.with_value(Option::is_none) {
                let active = web_sys::window()
                    .and_then(|window| window.document())
                    .and_then(|document| document.active_element())
                    .and_then(|element| element.dyn_into::<web_sys::HtmlElement>().ok());
                before.set_value(active);
            }
            let _ = primary.focus();
            primary.scroll_into_view();
        }
    });
    Effect::new(move || {
        if request.with(Option::is_none)
            && let Some(element) = before.try_update_value(Option::take).flatten()
        {
            let _ = element.focus();
        }
    });
    move || {
        request.get().map(|request| {
            let call_number = request.call_number;
            // An answer is for the card it was given on: a click that lands
            // after that card was replaced answers nothing.
            let answer = move |answer: Answer| {
                approver.with_value(|approver| approver.answer(call_number, answer));
            };
            // What came from the program or a server is shown with its control
            // characters and bidi overrides escaped, never acting on the page.
            let args = card_json(&request.args);
            let tool = card_text(&request.tool);
            let title = format!("Allow {tool} (call {})?", request.call_number);
            let on_keydown = move |event: KeyboardEvent| {
                if event.key() == "Escape" {
                    event.prevent_default();
                    answer(Answer::Deny);
                }
            };
            let session_label = format!("Allow {tool} for this session");
            view! {
                <section
                    class="approval"
                    data-testid="approval"
                    role="alertdialog"
                    aria-modal="false"
                    aria-labelledby=format!("{id}-title")
                    aria-describedby=format!("{id}-why")
                    on:keydown=on_keydown
                >
                    <h2 id=format!("{id}-title") data-testid="approval-title" tabindex="-1">{title}</h2>
                    <p id=format!("{id}-why")>
                        <span class=format!("category category-{}", request.category) data-testid="approval-category">{request.category.as_str()}</span>
                        " tool from "<code>{card_text(&request.module)}</code>" — "{request.reason.sentence()}"."
                    </p>
                    <p class="description">{card_text(&request.description)}</p>
                    {match serde_json::from_value::<kiln_types::plan::Plan>(request.args.clone()).ok().filter(|_| request.tool == "execute_plan") {
                        // Approving a plan approves every step of it: the card
                        // shows what will run, then the arguments as sent.
                        Some(plan) => {
                            let shown = agent_view::PlanView::of(&plan);
                            let summary = format!("{} tasks, {} steps; each step is a sub-agent", plan.tasks.len(), plan.step_count());
                            view! {
                                {plan_tree::plan_card(shown, summary)}
                                <details class="args-sent">
                                    <summary>"The arguments as sent"</summary>
                                    <pre class="args" tabindex="0" data-testid="approval-args" aria-label="Arguments">{args}</pre>
                                </details>
                            }.into_any()
                        }
                        None => match program_of(&request) {
                            // A program is shown as code: what it does is what the person approves.
                            Some((code, rest)) => view! {
                                {crate::highlight::code_view(&code, crate::chat::card_lines, "The program", "approval-program")}
                                {rest.map(|rest| view! {
                                    <pre class="args" tabindex="0" data-testid="approval-args" aria-label="The other arguments">{rest}</pre>
                                })}
                            }.into_any(),
                            None => view! { <pre class="args" tabindex="0" data-testid="approval-args" aria-label="Arguments">{args}</pre> }.into_any(),
                        },
                    }}
                    <div class="actions">
                        <button data-testid="approve" node_ref=primary on:click=move |_| answer(Answer::Approve)>"Approve"</button>
                        <button class="secondary" data-testid="deny" on:click=move |_| answer(Answer::Deny)>"Deny"</button>
                        <button class="secondary" data-testid="allow-session" on:click=move |_| answer(Answer::AllowForSession)>{session_label}</button>
                    </div>
                    {move || (waiting.get() > 0).then(|| {
                        let count = waiting.get();
                        let text = format!(
                            "{count} more call{} waiting for an answer after this one.",
                            if count == 1 { "" } else { "s" }
                        );
                        view! { <p class="waiting" data-testid="approval-waiting">{text}</p> }
                    })}
                    <p class="hint">"Enter approves, Esc denies. While you decide, the program's CPU clock is stopped; the wait counts as person wait (10 min at most)."</p>
                </section>
            }
        })
    }
}

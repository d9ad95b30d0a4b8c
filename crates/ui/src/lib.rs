//! Kiln's page: a program editor, a Run button and a result panel.
//!
//! The page only talks the sandbox protocol (through `kiln-host`'s pool); it
//! never evaluates guest code on the main thread.

pub mod demo_tools;
mod view_model;

use leptos::ev::KeyboardEvent;
use leptos::prelude::*;
use leptos::task::spawn_local;

use std::rc::Rc;

use crate::demo_tools::{Asker, DemoTools};
use crate::view_model::{ResultView, Tone};
use kiln_host::{RunResult, SandboxPool};
use kiln_types::RunLimits;
use kiln_types::tool_result::ContentPart;

/// Where the sandbox worker's bootstrap is served, relative to the page.
const SANDBOX_WORKER_URL: &str = "./workers/sandbox.js";
/// Started workers kept between runs.
const POOL_SIZE: usize = 2;

/// The program shown on first load.
pub const SAMPLE_PROGRAM: &str = r#"// A program is the body of an async function: await, return, console.log.
// It calls the page's tools through `tools` (listed below the editor).
const squares = [1, 2, 3, 4].map((n) => n * n);
console.log("squares:", squares);
const answer = await tools.add({ a: 20, b: 22 });
await sleep(100);
return { squares, answer, at: (await tools.clock()).iso };
"#;

#[derive(Clone, Debug, PartialEq)]
enum RunState {
    Idle,
    Running,
    /// The run and its `tool-result/v1` model text, made once when it ended.
    Done(Box<RunResult>, String),
}

/// The whole page.
#[component]
pub fn App() -> impl IntoView {
    let client = SandboxPool::new(SANDBOX_WORKER_URL, POOL_SIZE);
    client.warm_up();
    let (code, set_code) = signal(SAMPLE_PROGRAM.to_owned());
    let (state, set_state) = signal(RunState::Idle);
    let running = move || state.with(|state| *state == RunState::Running);
    let (question, set_question) = signal(None::<String>);
    let asker = Asker::new(set_question);
    let card_asker = asker.clone();

    let run = move || {
        if running() {
            return;
        }
        set_state.set(RunState::Running);
        let client = client.clone();
        let program = code.get_untracked();
        let asker = asker.clone();
        spawn_local(async move {
            let tools = Rc::new(DemoTools {
                asker: asker.clone(),
            });
            let result = client.run(program, RunLimits::default(), tools).await;
            asker.withdraw();
            let text = result
                .clone()
                .into_tool_result()
                .content
                .into_iter()
                .map(|ContentPart::Text { text }| text)
                .collect::<Vec<_>>()
                .join("\n");
            set_state.set(RunState::Done(Box::new(result), text));
            performance_mark("kiln:result");
        });
    };
    let run_on_click = run.clone();
    let on_keydown = move |event: KeyboardEvent| {
        if event.key() == "Enter" && (event.ctrl_key() || event.meta_key()) {
            event.prevent_default();
            run();
        }
    };

    Effect::new(|| performance_mark("kiln:interactive"));

    view! {
        <main class="app" data-testid="app">
            <header class="app-header">
                <h1>"Kiln"</h1>
                <p class="tagline">
                    "Write a JavaScript program and run it in a Boa sandbox inside a Web Worker."
                </p>
            </header>
            <section class="editor">
                <label for="program">"Program"</label>
                <textarea
                    id="program"
                    data-testid="code-editor"
                    spellcheck="false"
                    autocomplete="off"
                    prop:value=code
                    on:input=move |event| set_code.set(event_target_value(&event))
                    on:keydown=on_keydown
                ></textarea>
                <div class="actions">
                    <button
                        data-testid="run-button"
                        on:click=move |_| run_on_click()
                        disabled=running
                    >
                        {move || if running() { "Running…" } else { "Run" }}
                    </button>
                    <span class="hint">"Ctrl+Enter runs · a program gets 10 s of JavaScript CPU and 30 min in all"</span>
                </div>
                <ToolList />
            </section>
            <QuestionCard question=question asker=card_asker />
            <ResultPanel state=state />
        </main>
    }
}

/// A program's question to the person (`tools.ask`), while it waits for them.
#[component]
fn QuestionCard(question: ReadSignal<Option<String>>, asker: Asker) -> impl IntoView {
    // The asker holds the run's answer channel, which is not `Send`.
    let asker = StoredValue::new_local(asker);
    move || {
        question.get().map(|text| {
            let yes = move || asker.with_value(|asker| asker.answer(true));
            let no = move || asker.with_value(|asker| asker.answer(false));
            view! {
                <section class="question" data-testid="question" role="alertdialog" aria-label="The program asks you">
                    <h2>"The program asks you"</h2>
                    <p data-testid="question-text">{text}</p>
                    <div class="actions">
                        <button data-testid="answer-yes" on:click=move |_| yes()>"Yes"</button>
                        <button class="secondary" data-testid="answer-no" on:click=move |_| no()>"No"</button>
                    </div>
                </section>
            }
        })
    }
}

/// The tools a program can call, from the demo catalog.
#[component]
fn ToolList() -> impl IntoView {
    let catalog = demo_tools::catalog();
    let entries: Vec<(String, String)> = catalog
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|entry| {
            let name = entry.get("name")?.as_str()?.to_owned();
            let description = entry
                .get("description")
                .and_then(|d| d.as_str())
                .unwrap_or("")
                .to_owned();
            Some((name, description))
        })
        .collect();
    let count = entries.len();
    let items = entries
        .into_iter()
        .map(|(name, description)| {
            view! { <li><code>{format!("tools.{name}")}</code>" — "{description}</li> }
        })
        .collect_view();
    view! {
        <details class="tools" data-testid="tool-list">
            <summary>{format!("Tools available to programs ({count})")}</summary>
            <ul>{items}</ul>
        </details>
    }
}

/// Marks a moment on the page's performance timeline, for `cargo xtask bench`.
fn performance_mark(name: &str) {
    if let Some(performance) = web_sys::window().and_then(|window| window.performance()) {
        let _ = performance.mark(name);
    }
}

#[component]
fn ResultPanel(state: ReadSignal<RunState>) -> impl IntoView {
    view! {
        <section class="result" data-testid="result-panel" aria-live="polite">
            <h2>"Result"</h2>
            {move || match state.get() {
                RunState::Idle => view! {
                    <p class="status idle" data-testid="run-status">"Press Run to start."</p>
                }.into_any(),
                RunState::Running => view! {
                    <p class="status running" data-testid="run-status">"Running…"</p>
                }.into_any(),
                RunState::Done(result, text) => {
                    report_view(&ResultView::from_report(&result.report), text).into_any()
                }
            }}
        </section>
    }
}

fn report_view(result: &ResultView, model_text: String) -> impl IntoView + use<> {
    let tone = match result.tone {
        Tone::Success => "status success",
        Tone::Failure => "status failure",
    };
    let value = result.value.clone().map(|value| {
        view! {
            <h3>"Return value"</h3>
            <pre class="value" data-testid="result-value">{value}</pre>
        }
    });
    let detail = result.detail.clone().map(|detail| {
        view! { <pre class="error" data-testid="run-error">{detail}</pre> }
    });
    let calls = (!result.calls.is_empty()).then(|| {
        let rows = result
            .calls
            .iter()
            .enumerate()
            .map(|(index, (tool, outcome, duration))| {
                view! {
                    <tr class=format!("outcome-{outcome}")>
                        <td>{index + 1}</td>
                        <td><code>{tool.clone()}</code></td>
                        <td>{*outcome}</td>
                        <td>{duration.clone()}</td>
                    </tr>
                }
            })
            .collect_view();
        view! {
            <h3>"Tool calls"</h3>
            <table class="calls" data-testid="tool-calls">
                <thead><tr><th>"#"</th><th>"Tool"</th><th>"Outcome"</th><th>"Duration"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
        }
    });
    let console = (!result.console.is_empty()).then(|| {
        let lines = result
            .console
            .iter()
            .map(|(level, text)| view! { <li class=format!("console-{level}")>{text.clone()}</li> })
            .collect_view();
        view! {
            <h3>"Console"</h3>
            <ol class="console" data-testid="console-output">{lines}</ol>
        }
    });
    view! {
        <p class=tone data-testid="run-status">{result.status.clone()}</p>
        {detail}
        {value}
        {console}
        {calls}
        <details class="model-text">
            <summary>"What the model reads (tool-result/v1 text)"</summary>
            <pre data-testid="model-text">{model_text}</pre>
        </details>
    }
}

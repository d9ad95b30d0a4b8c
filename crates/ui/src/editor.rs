//! The program editor and its result: the editor with Run and Stop (a run
//! sent to the runtime worker with the app's tools and the person's cards),
//! and the result panel that shows the run's report and the text a model
//! would read.

use leptos::ev::KeyboardEvent;
use leptos::prelude::*;
use leptos::task::spawn_local;

use std::rc::Rc;

use crate::approval::PageApprover;
use crate::demo_tools::Asker;
use crate::storage_model::ErrorText;
use crate::view_model::{ResultView, Tone};
use kiln_types::RunResult;
use kiln_types::runtime::{Problem, RunAnswer};
use serde_json::Value;

use crate::runtime::{PageSide, Runtime};
use crate::{AppPage, Sources, permissions, run_request};

/// The program shown on first load.
pub const SAMPLE_PROGRAM: &str = r#"// A program is the body of an async function: await, return, console.log.
// It calls the page's tools through `tools` (Settings lists them).
const squares = [1, 2, 3, 4].map((n) => n * n);
console.log("squares:", squares);
const answer = await tools.add({ a: 20, b: 22 });
await sleep(100);
return { squares, answer, at: (await tools.clock()).iso };
"#;

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum RunState {
    Idle,
    Running,
    /// The run and its `tool-result/v1` model text, made once when it ended.
    Done(Box<RunResult>, String),
}

/// Tool calls the result panel lays out row by row.
const MAX_CALL_ROWS: usize = 50;

/// The worker's answer to a run: the sandbox's report and the model's text,
/// and why the run is not (fully) in the history, if it is not.
fn ran(answer: Result<Value, Problem>) -> (RunResult, String, Option<ErrorText>) {
    let stopped = |message: String| RunResult {
        report: kiln_types::RunReport::stopped(
            kiln_types::RunError::new(kiln_types::RunErrorKind::Engine, message),
            0.0,
        ),
        warnings: Vec::new(),
        catalog_digest: String::new(),
    };
    let value = match answer {
        Ok(value) => value,
        Err(problem) => return (stopped(problem.message), String::new(), None),
    };
    let answer = match serde_json::from_value::<RunAnswer>(value) {
        Ok(answer) => answer,
        Err(error) => {
            return (
                stopped(format!(
                    "the runtime worker's answer is not readable: {error}"
                )),
                String::new(),
                None,
            );
        }
    };
    let run = RunResult {
        report: answer.report,
        warnings: answer.warnings,
        catalog_digest: answer.catalog_digest,
    };
    let notice = match answer.record_error {
        Some(problem) => Some(ErrorText::with_prefix(
            &format!(
                "The run's record `{}` was not finished: ",
                answer.job_id.unwrap_or_default()
            ),
            &problem,
        )),
        None => run
            .warnings
            .iter()
            .find(|warning| warning.code == "storage_unavailable")
            .map(|warning| ErrorText {
                message: format!(
                    "This run is not recorded in the history and has no storage tools: {}",
                    warning.message
                ),
                hint: None,
                code: "storage_unavailable".into(),
            }),
    };
    let text = answer.text;
    (run, text, notice)
}

/// The program editor with Run and Stop, and the settings a run carries:
/// permissions, the network, MCP servers.
#[allow(
    clippy::too_many_arguments,
    reason = "a Leptos component's props are its arguments: each is one setting the editor shows"
)]
#[component]
pub(crate) fn ProgramEditor(
    sources: Sources,
    gate: permissions::PageSettings,
    asker: Asker,
    approver: PageApprover,
    state: ReadSignal<RunState>,
    set_state: WriteSignal<RunState>,
    set_run_notice: WriteSignal<Option<ErrorText>>,
) -> impl IntoView {
    let (code, set_code) = signal(SAMPLE_PROGRAM.to_owned());
    let running = move || state.with(|state| *state == RunState::Running);
    let runtime = sources.runtime.clone();
    // The running program's id in the runtime worker, for Stop; and whether
    // Stop was pressed before the worker had the run (it was still starting).
    let stop_switch = StoredValue::new_local(None::<(Rc<Runtime>, u64)>);
    let stop_early = StoredValue::new(false);
    let run = move || {
        if running() {
            return;
        }
        set_state.set(RunState::Running);
        stop_early.set_value(false);
        let program = code.get_untracked();
        let page: Rc<dyn PageSide> = Rc::new(AppPage {
            tools: None,
            asker: asker.clone(),
            approver: approver.clone(),
            person: None,
        });
        let asker = asker.clone();
        let approver = approver.clone();
        let request = run_request(program, &sources, &gate.settings());
        let runtime = runtime.clone();
        set_run_notice.set(None);
        spawn_local(async move {
            let answer = match runtime.await {
                Ok(runtime) => {
                    let (id, answered) = runtime.run(request, page);
                    if stop_early.get_value() {
                        runtime.cancel(id);
                    }
                    stop_switch.set_value(Some((runtime, id)));
                    answered.await.unwrap_or_else(|_| {
                        Err(Problem::bad_request(
                            "the runtime worker went away during the run",
                        ))
                    })
                }
                Err(problem) => Err(Problem::bad_request(problem)),
            };
            stop_switch.set_value(None);
            asker.withdraw();
            approver.withdraw();
            let (run, text, notice) = ran(answer);
            if notice.is_some() {
                set_run_notice.set(notice);
            }
            set_state.set(RunState::Done(Box::new(run), text));
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
    let stop = move |_| {
        stop_switch.with_value(|running| match running {
            Some((runtime, id)) => runtime.cancel(*id),
            None => stop_early.set_value(true),
        })
    };

    view! {
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
                <button data-testid="run-button" on:click=move |_| run_on_click() disabled=running>
                    {move || if running() { "Running…" } else { "Run" }}
                </button>
                <Show when=running>
                    <button class="secondary" data-testid="stop-run" on:click=stop>"Stop"</button>
                </Show>
                <span class="hint">"Ctrl+Enter runs · a program gets 10 s of JavaScript CPU and 30 min in all"</span>
            </div>
            <p class="hint">"The tools a program can call, their permissions, the network and your MCP servers are under "<a href="#/settings">"Settings"</a>"."</p>
        </section>
    }
}

/// Marks a moment on the page's performance timeline, for `cargo xtask bench`.
pub(crate) fn performance_mark(name: &str) {
    if let Some(performance) = web_sys::window().and_then(|window| window.performance()) {
        let _ = performance.mark(name);
    }
}

#[component]
pub(crate) fn ResultPanel(state: ReadSignal<RunState>) -> impl IntoView {
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
        // A program of hundreds of calls would take the main thread for a
        // long task to lay them all out; the model text below has them all.
        let more = result.calls.len().saturating_sub(MAX_CALL_ROWS);
        let rows = result
            .calls
            .iter()
            .take(MAX_CALL_ROWS)
            .enumerate()
            .map(|(index, (tool, outcome, waited, duration))| {
                view! {
                    <tr class=format!("outcome-{outcome}")>
                        <td>{index + 1}</td>
                        <td><code>{tool.clone()}</code></td>
                        <td>{*outcome}</td>
                        <td>{if *waited { "yes" } else { "no" }}</td>
                        <td>{duration.clone()}</td>
                    </tr>
                }
            })
            .collect_view();
        let more = (more > 0).then(|| {
            let text = format!(
                "{more} more call{} — every call is in the model text below.",
                if more == 1 { "" } else { "s" }
            );
            view! { <p class="hint" data-testid="more-calls">{text}</p> }
        });
        view! {
            <h3>{format!("Tool calls ({})", result.calls.len())}</h3>
            <table class="calls" data-testid="tool-calls">
                <thead><tr><th>"#"</th><th>"Tool"</th><th>"Outcome"</th><th>"Waited on a person"</th><th>"Duration"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
            {more}
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

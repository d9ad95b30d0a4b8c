//! The authoring dialog of the Code nodes view ("Write code with AI", a
//! node's "Ask AI"): the instruction, the detected inputs, the expected
//! output, the effective model and exactly what it will be sent (asked of
//! the runtime worker with `author_code`'s `preview`, so nothing is sent
//! for it), sample values that reach the model only when the person ticks
//! "include sample values"; Generate (the CodePlanner's `submit_code`
//! rounds in the runtime worker); the review with the code collapsed; a
//! preview run on the samples with each output and any type warning; and
//! Apply, one undoable change. Cancel, Escape or a failure leave no node and
//! no edge behind. It is a modal `<dialog>`: the keyboard stays in it, and
//! the focus goes back to the button that opened it.

use crate::said::said;
use leptos::html;
use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::{Map, Value, json};

use kiln_types::node::{CodeNode, InputSlot, OutputSlot, SlotType};
use kiln_types::runtime::{Problem, ToRuntime};

use crate::nodes_model::{example, parse_inputs, sample_from_text, sample_text, slots_text};
use crate::nodes_panel::{Nodes, latest_values};
use crate::storage_model::value_text;

/// What the dialog writes: a new node, or node `id` in place.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Target {
    New,
    Edit(String),
}

/// Where generation stands.
#[derive(Clone, Debug, PartialEq)]
enum Generation {
    Idle,
    /// Asked; the exchange's id, for Cancel (0 until the worker has it).
    Asking(u64),
    Accepted {
        node: CodeNode,
        summary: String,
        telemetry: Value,
    },
    Failed {
        code: String,
        message: String,
        errors: Vec<String>,
    },
}

#[component]
pub(crate) fn AuthorDialog<C>(nodes: Nodes, target: Target, closed: C) -> impl IntoView
where
    C: Fn() + Copy + Send + Sync + 'static,
{
    let editing = match &target {
        Target::Edit(id) => nodes
            .sheet
            .with_untracked(|sheet| sheet.node(id).map(|node| node.node.clone())),
        Target::New => None,
    };
    let target = StoredValue::new(target);
    let dialog = NodeRef::<html::Dialog>::new();
    // Closes the modal before the view lets it go, so that the focus can go
    // back to the opener (nothing outside a modal dialog takes the focus).
    let closed = move || {
        if let Some(dialog) = dialog.get_untracked() {
            dialog.close();
        }
        closed();
    };
    let current = StoredValue::new(editing.clone());
    let instruction = RwSignal::new(String::new());
    // The inputs: an edit's own slots; for a new node, what the person writes.
    let inputs_text = RwSignal::new(
        editing
            .as_ref()
            .map(|node| {
                slots_text(
                    node.inputs
                        .iter()
                        .map(|slot| (slot.name.as_str(), &slot.ty)),
                )
            })
            .unwrap_or_default(),
    );
    let expected_name = RwSignal::new(String::new());
    let expected_type = RwSignal::new(String::new());
    let include_samples = RwSignal::new(false);
    let samples = RwSignal::new(match target.get_value() {
        Target::Edit(id) => latest_values(nodes, &id),
        Target::New => Map::new(),
    });
    let generation = RwSignal::new(Generation::Idle);
    let preview = RwSignal::new(None::<Result<Value, String>>);
    let previewing = RwSignal::new(false);
    // What the payload was asked for with: bumped when the person leaves a field.
    let asked = RwSignal::new(0_u32);

    let slots = move || -> Result<Vec<InputSlot>, String> {
        match current.get_value() {
            Some(node) => Ok(node.inputs),
            None => parse_inputs(&inputs_text.get()),
        }
    };
    let expected = move || -> Result<Option<OutputSlot>, String> {
        let name = expected_name.get().trim().to_owned();
        let ty = expected_type.get().trim().to_owned();
        if name.is_empty() && ty.is_empty() {
            return Ok(None);
        }
        if !kiln_types::words::is_identifier(&name) {
            return Err(format!(
                "the expected output's name `{name}` is not a JavaScript identifier"
            ));
        }
        let ty = SlotType::parse(if ty.is_empty() { "any" } else { &ty })
            .map_err(|error| error.to_string())?;
        Ok(Some(OutputSlot {
            name,
            ty,
            description: None,
        }))
    };
    // The authoring request, as `kiln.authorCode` takes it.
    let request = move || -> Result<Value, String> {
        let entry = nodes.providers.current().ok_or_else(|| {
            "Add a provider in Providers first: the model is asked through it.".to_owned()
        })?;
        let inputs = slots().map_err(|error| format!("Inputs: {error}"))?;
        let expected = expected().map_err(|error| format!("Expected output: {error}"))?;
        let mut request = json!({
            "instruction": instruction.get(),
            "inputs": inputs,
            "samples": samples.get(),
            "includeSamples": include_samples.get(),
            "provider": entry.provider.wire(),
            "chatModel": entry.provider.model,
        });
        if let Some(expected) = expected {
            request["expectedOutput"] = json!(expected);
        }
        if let Some(node) = current.get_value() {
            request["current"] = json!(node);
        }
        Ok(request)
    };
    // What would be sent, and to which model: asked again when the person
    // leaves a field or ticks the box.
    let payload = LocalResource::new(move || {
        asked.track();
        include_samples.track();
        let request = request();
        let runtime = nodes.runtime.get_value();
        async move {
            let mut request = request?;
            if request["instruction"]
                .as_str()
                .is_some_and(|text| text.trim().is_empty())
            {
                // The worker refuses an empty instruction; the payload is shown with a placeholder.
                request["instruction"] = json!("(your instruction)");
            }
            let runtime = runtime.await?;
            let answer = runtime
                .call(move |id| ToRuntime::AuthorCode {
                    id,
                    request,
                    preview: true,
                })
                .await
                .map_err(|_| "the runtime worker went away".to_owned())?;
            answer.map_err(|problem: Problem| problem.message)
        }
    });
    let model_line = move || {
        payload.get().map(|answer| match &answer {
            Ok(answer) => {
                let provider = nodes
                    .providers
                    .current()
                    .map(|entry| entry.provider.name)
                    .unwrap_or_default();
                (
                    true,
                    format!(
                        "Model: {} (through {provider})",
                        answer["model"].as_str().unwrap_or("?")
                    ),
                )
            }
            Err(problem) => (false, problem.clone()),
        })
    };
    let payload_text = move || {
        payload.get().and_then(|answer| {
            answer
                .as_ref()
                .ok()
                .map(|answer| value_text(&answer["messages"]))
        })
    };

    let generating = move || matches!(generation.get(), Generation::Asking(_));
    let generate = move || {
        if generating() {
            return;
        }
        let request = match request() {
            Ok(request) if instruction.get_untracked().trim().is_empty() => {
                let _ = request;
                generation.set(Generation::Failed {
                    code: "bad_request".into(),
                    message: "Say what the node should do first.".into(),
                    errors: Vec::new(),
                });
                return;
            }
            Ok(request) => request,
            Err(problem) => {
                generation.set(Generation::Failed {
                    code: "bad_request".into(),
                    message: problem,
                    errors: Vec::new(),
                });
                return;
            }
        };
        generation.set(Generation::Asking(0));
        preview.set(None);
        let runtime = nodes.runtime.get_value();
        spawn_local(async move {
            let answer = match runtime.await {
                Ok(runtime) => {
                    let (id, answered) = runtime.exchange(
                        |id| ToRuntime::AuthorCode {
                            id,
                            request,
                            preview: false,
                        },
                        None,
                        nodes.page.get_value(),
                    );
                    if generation.get_untracked() != Generation::Asking(0) {
                        // Cancelled before the worker had it.
                        runtime.cancel(id);
                        return;
                    }
                    generation.set(Generation::Asking(id));
                    answered.await.unwrap_or_else(|_| {
                        Err(Problem::bad_request("the runtime worker went away"))
                    })
                }
                Err(problem) => Err(Problem::bad_request(problem)),
            };
            if !matches!(generation.get_untracked(), Generation::Asking(_)) {
                return;
            }
            generation.set(match answer {
                Ok(answer) if answer["node"].is_object() => {
                    match serde_json::from_value::<CodeNode>(answer["node"].clone()) {
                        Ok(node) => Generation::Accepted {
                            node,
                            summary: answer["summary"].as_str().unwrap_or_default().to_owned(),
                            telemetry: answer["telemetry"].clone(),
                        },
                        Err(error) => Generation::Failed {
                            code: "internal".into(),
                            message: format!("the accepted node could not be read: {error}"),
                            errors: Vec::new(),
                        },
                    }
                }
                Ok(answer) => Generation::Failed {
                    code: answer["error"]["code"]
                        .as_str()
                        .unwrap_or("internal")
                        .to_owned(),
                    message: answer["error"]["message"]
                        .as_str()
                        .unwrap_or("the model gave no node")
                        .to_owned(),
                    errors: answer["error"]["errors"]
                        .as_array()
                        .map(|errors| {
                            errors
                                .iter()
                                .filter_map(|e| e.as_str().map(str::to_owned))
                                .collect()
                        })
                        .unwrap_or_default(),
                },
                Err(problem) => Generation::Failed {
                    code: problem.code.clone().unwrap_or_else(|| "internal".into()),
                    message: problem.message,
                    errors: Vec::new(),
                },
            });
        });
    };
    let cancel_generation = move || {
        if let Generation::Asking(id) = generation.get_untracked() {
            generation.set(Generation::Idle);
            if id != 0 {
                let runtime = nodes.runtime.get_value();
                spawn_local(async move {
                    if let Ok(runtime) = runtime.await {
                        runtime.cancel(id);
                    }
                });
            }
        }
    };
    let accepted = move || match generation.get() {
        Generation::Accepted { node, .. } => Some(node),
        _ => None,
    };
    let run_preview = move || {
        let Some(node) = accepted() else {
            return;
        };
        previewing.set(true);
        let values: Map<String, Value> = samples
            .get_untracked()
            .into_iter()
            .filter(|(name, _)| node.inputs.iter().any(|slot| slot.name == *name))
            .collect();
        let mut request = nodes.session.with_value(|session| session());
        request["node"] = json!(node);
        request["values"] = Value::Object(values);
        let runtime = nodes.runtime.get_value();
        spawn_local(async move {
            let answer = match runtime.await {
                Ok(runtime) => {
                    let (_, answered) = runtime.exchange(
                        |id| ToRuntime::Node {
                            id,
                            request,
                            approve: true,
                        },
                        None,
                        nodes.page.get_value(),
                    );
                    answered.await.unwrap_or_else(|_| {
                        Err(Problem::bad_request("the runtime worker went away"))
                    })
                }
                Err(problem) => Err(Problem::bad_request(problem)),
            };
            previewing.set(false);
            preview.set(Some(answer.map_err(|problem| problem.message)));
        });
    };
    let apply = move || {
        let Some(node) = accepted() else {
            return;
        };
        let values = samples.get_untracked();
        let title = node.title.clone();
        let text = match target.get_value() {
            Target::New => {
                let id = nodes.change(|sheet| {
                    let inputs = node.inputs.clone();
                    let id = sheet.add(node);
                    for slot in inputs {
                        if let Some(value) = values.get(&slot.name) {
                            sheet.set_sample(&id, &slot.name, Some(value.clone()));
                        }
                    }
                    id
                });
                format!("Added `{title}` as `{id}`. Undo takes it away.")
            }
            Target::Edit(id) if current.get_value().as_ref() == Some(&node) => {
                format!("`{id}` is unchanged: the model wrote the same node.")
            }
            Target::Edit(id) => {
                let (id, dropped) = nodes.change(|sheet| {
                    let dropped = sheet.replace(&id, node);
                    (sheet.follow_title(&id), dropped)
                });
                let mut text = format!("Replaced `{id}` with `{title}`. Undo puts it back.");
                for line in dropped {
                    text.push(' ');
                    text.push_str(&line);
                    text.push('.');
                }
                text
            }
        };
        nodes.status.set(Some((true, text)));
        closed();
    };
    let close = move || {
        cancel_generation();
        closed();
    };

    Effect::new(move || {
        if let Some(dialog) = dialog.get()
            && !dialog.open()
        {
            let _ = dialog.show_modal();
        }
    });
    let heading = match &editing {
        Some(node) => format!("Ask AI about “{}”", node.title),
        None => "Write code with AI".to_owned(),
    };
    // The accepted node's inputs once there is one (the model may have
    // chosen them), else the inputs as written.
    let slot_fields = move || {
        let inputs = accepted().map_or_else(|| slots().unwrap_or_default(), |node| node.inputs);
        if inputs.is_empty() {
            return view! { <li class="hint" data-testid="author-no-inputs">"No inputs yet."</li> }
                .into_any();
        }
        inputs.into_iter().map(|slot| {
            let name = slot.name.clone();
            let ty = slot.ty.clone();
            let shown = samples.with_untracked(|samples| samples.get(&name).map(|value| sample_text(&ty, value))).unwrap_or_default();
            let problem = RwSignal::new(None::<String>);
            let set = {
                let name = name.clone();
                let ty = ty.clone();
                move |event: leptos::ev::Event| {
                    let text = event_target_value(&event);
                    if text.trim().is_empty() {
                        problem.set(None);
                        samples.update(|samples| { samples.remove(&name); });
                        return;
                    }
                    match sample_from_text(&name, &ty, &text) {
                        Ok(value) => {
                            problem.set(None);
                            samples.update(|samples| { samples.insert(name.clone(), value); });
                        }
                        Err(error) => problem.set(Some(error)),
                    }
                    asked.update(|asked| *asked += 1);
                }
            };
            view! {
                <li>
                    <label><span><code>{name.clone()}</code>" "<span class="slot-type">{ty.to_string()}</span></span>
                        <input type="text" class="sample" data-testid="author-sample" data-slot=name.clone() placeholder=example(&ty) value=shown on:change=set />
                    </label>
                    {move || problem.get().map(|problem| view! { <p class="failure" role="alert">{said(problem)}</p> })}
                </li>
            }
        }).collect_view().into_any()
    };
    let status = move || match generation.get() {
        Generation::Idle => None,
        Generation::Asking(_) => Some((true, "Generating…".to_owned())),
        Generation::Accepted { telemetry, .. } => Some((
            true,
            format!(
                "Generated in {} round{} ({} tokens). Review it, preview it, then Apply.",
                telemetry["rounds"].as_u64().unwrap_or(1),
                if telemetry["rounds"].as_u64().unwrap_or(1) == 1 {
                    ""
                } else {
                    "s"
                },
                telemetry["input_tokens"].as_u64().unwrap_or_default()
                    + telemetry["output_tokens"].as_u64().unwrap_or_default(),
            ),
        )),
        Generation::Failed { code, message, .. } => {
            // What to do next, by what went wrong.
            let next = match code.as_str() {
                "key_rejected" | "model_not_found" | "network" | "timeout" | "rate_limited"
                | "server_error" => {
                    "Check the provider (Settings, Providers), then Generate again."
                }
                "cancelled" => "Generate again when you are ready.",
                _ => {
                    "Generate again, say more exactly what the node takes and returns (or fill in the \
                     inputs and an expected output below), or pick a stronger model for the chat (Settings, \
                     Providers): it writes the code."
                }
            };
            Some((false, format!("No node ({code}): {message} {next}")))
        }
    };
    let errors = move || match generation.get() {
        Generation::Failed { errors, .. } if !errors.is_empty() => Some(errors),
        _ => None,
    };

    view! {
        <dialog class="author-dialog" data-testid="author-dialog" node_ref=dialog aria-labelledby="author-title"
            on:cancel=move |event: leptos::ev::Event| { event.prevent_default(); close(); }>
            <h2 id="author-title">{heading}</h2>
            <label>"What should the node do?"
                <textarea data-testid="author-instruction" autofocus=true prop:value=move || instruction.get()
                    on:input=move |e| instruction.set(event_target_value(&e))
                    on:change=move |_| asked.update(|asked| *asked += 1)></textarea>
            </label>
            {move || match current.get_value() {
                Some(node) => view! {
                    <div class="author-slots" data-testid="author-inputs">
                        <h3>"Inputs"</h3>
                        {node.inputs.is_empty().then(|| view! { <p class="hint">"None."</p> })}
                        <ul>{node.inputs.iter().map(|slot| view! { <li><code>{slot.name.clone()}</code>" "{slot.ty.to_string()}</li> }).collect_view()}</ul>
                    </div>
                }.into_any(),
                None => view! {
                    <label><span>"Inputs, one " <code>"name: type"</code> " per line (leave empty and the model chooses them)"</span>
                        <textarea data-testid="author-inputs" prop:value=move || inputs_text.get()
                            on:input=move |e| inputs_text.set(event_target_value(&e))
                            on:change=move |_| asked.update(|asked| *asked += 1)></textarea>
                    </label>
                }.into_any(),
            }}
            <fieldset class="author-expected">
                <legend>"Expected output (optional)"</legend>
                <input type="text" data-testid="author-expected-name" aria-label="Expected output's name" placeholder="name"
                    prop:value=move || expected_name.get() on:input=move |e| expected_name.set(event_target_value(&e))
                    on:change=move |_| asked.update(|asked| *asked += 1) />
                <input type="text" data-testid="author-expected-type" aria-label="Expected output's type" placeholder="type, e.g. number"
                    prop:value=move || expected_type.get() on:input=move |e| expected_type.set(event_target_value(&e))
                    on:change=move |_| asked.update(|asked| *asked += 1) />
            </fieldset>
            <p class="author-model" data-testid="author-model">
                {move || model_line().map(|(ok, text)| view! { <span class=if ok { "ok" } else { "failure" }>{text}</span> })}
            </p>
            <div class="author-samples">
                <h3>"Sample values"</h3>
                <p class="hint">"Used for the preview run. The model sees names and types only, unless you tick the box."</p>
                <ul>{slot_fields}</ul>
                <label class="check"><input type="checkbox" data-testid="author-include-samples" prop:checked=move || include_samples.get()
                    on:change=move |e| include_samples.set(event_target_checked(&e)) />" Include sample values in what the model sees"</label>
            </div>
            <details class="author-payload" data-testid="author-payload">
                <summary>"What the model will be sent"</summary>
                <pre data-testid="author-payload-text">{payload_text}</pre>
            </details>
            <p class="author-status" role="status" aria-live="polite" data-testid="author-status">
                {move || status().map(|(ok, text)| view! { <span class=if ok { "ok" } else { "failure" }>{said(text)}</span> })}
            </p>
            {move || errors().map(|errors| view! {
                <ul class="failure" data-testid="author-errors">{errors.into_iter().map(|e| view! { <li>{said(e)}</li> }).collect_view()}</ul>
            })}
            {move || match generation.get() {
                Generation::Accepted { node, summary, .. } => Some(view! {
                    <div class="author-review" data-testid="author-review">
                        <h3 data-testid="review-title">{node.title.clone()}</h3>
                        <p data-testid="review-summary">{summary}</p>
                        <p>"Inputs: "{slot_list(node.inputs.iter().map(|slot| (slot.name.as_str(), &slot.ty)))}</p>
                        <p>"Outputs: "{slot_list(node.outputs.iter().map(|slot| (slot.name.as_str(), &slot.ty)))}</p>
                        <details><summary>{format!("Code ({} lines)", node.code.lines().count())}</summary><pre data-testid="review-code">{node.code.clone()}</pre></details>
                        <button type="button" class="secondary" data-testid="author-preview" disabled=move || previewing.get() on:click=move |_| run_preview()>
                            {move || if previewing.get() { "Running on the samples…" } else { "Run on the samples" }}
                        </button>
                        {move || preview.get().map(preview_view)}
                    </div>
                }),
                _ => None,
            }}
            <div class="actions">
                <Show when=generating fallback=move || view! {
                    <button type="button" data-testid="author-generate" on:click=move |_| generate()>
                        {move || if accepted().is_some() { "Generate again" } else { "Generate" }}
                    </button>
                }>
                    <button type="button" class="stop" data-testid="author-cancel-generation" on:click=move |_| cancel_generation()>"Stop generating"</button>
                </Show>
                <button type="button" data-testid="author-apply" disabled=move || accepted().is_none() on:click=move |_| apply()>"Apply"</button>
                <button type="button" class="secondary" data-testid="author-close" on:click=move |_| close()>"Cancel"</button>
            </div>
        </dialog>
    }
}

fn slot_list<'a>(slots: impl IntoIterator<Item = (&'a str, &'a SlotType)>) -> String {
    let listed: Vec<String> = slots
        .into_iter()
        .map(|(name, ty)| format!("{name} ({ty})"))
        .collect();
    if listed.is_empty() {
        "none".into()
    } else {
        listed.join(", ")
    }
}

/// The preview run: each output, the warnings (a value of the wrong type
/// among them), the console and the error.
fn preview_view(ran: Result<Value, String>) -> impl IntoView {
    match ran {
        Err(problem) => view! { <p class="failure" data-testid="preview-error">{said(format!("The preview did not run: {problem}"))}</p> }.into_any(),
        Ok(ran) => {
            let outputs: Vec<(String, String)> = ran["outputs"]
                .as_object()
                .map(|outputs| outputs.iter().map(|(name, value)| (name.clone(), value_text(value))).collect())
                .unwrap_or_default();
            let warnings: Vec<String> = ran["warnings"]
                .as_array()
                .map(|warnings| warnings.iter().filter_map(|w| w.as_str().map(str::to_owned)).collect())
                .unwrap_or_default();
            let error = ran["error"]["message"].as_str().map(str::to_owned);
            let console: Vec<String> = ran["console"]
                .as_array()
                .map(|lines| lines.iter().filter_map(|line| line["text"].as_str().map(str::to_owned)).collect())
                .unwrap_or_default();
            view! {
                <div class="author-preview-result" data-testid="preview-result">
                    <dl>{outputs.into_iter().map(|(name, value)| view! {
                        <dt><code>{name.clone()}</code></dt><dd><pre data-testid="preview-output" data-slot=name>{value}</pre></dd>
                    }).collect_view()}</dl>
                    {(!warnings.is_empty()).then(|| view! {
                        <ul class="warnings" data-testid="preview-warnings">{warnings.into_iter().map(|w| view! { <li>{said(w)}</li> }).collect_view()}</ul>
                    })}
                    {error.map(|error| view! { <p class="failure" data-testid="preview-error">{said(error)}</p> })}
                    {(!console.is_empty()).then(|| view! {
                        <ol class="console">{console.into_iter().map(|line| view! { <li>{line}</li> }).collect_view()}</ol>
                    })}
                </div>
            }
            .into_any()
        }
    }
}

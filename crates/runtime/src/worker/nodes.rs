//! Code nodes: one node's run, a graph's run with each node's report as it
//! settles, a node's check without a run, and a node written by a model (the
//! CodePlanner).

use super::*;

/// One code node's run (`kiln.codeNode(spec).run(values)`).
pub(super) async fn node(runtime: Rc<Runtime>, id: u64, request: Value, approve: bool, seen: u64) {
    let answered = async {
        let request = kiln_nodes::NodeRequest::from_value(request)
            .map_err(|error| Problem::bad_request(error.0))?;
        let environment = watched_environment(&runtime, id, approve, seen, "kiln.codeNode");
        let cancel = AbortSignal::new();
        runtime.runs.borrow_mut().insert(id, cancel.clone());
        let runner = PoolRunner(runtime.pool.clone());
        let ran = kiln_nodes::run_node(
            &request.node,
            &request.values,
            request.run,
            &environment,
            &runner,
            cancel,
        )
        .await
        .map_err(|error| Problem::bad_request(error.0))?;
        Ok::<Value, Problem>(serde_json::to_value(&ran).unwrap_or(Value::Null))
    }
    .await;
    settle(&runtime, id);
    answer(id, answered);
}

/// One graph's run (`kiln.graph(spec).run(inputs)`): each node's report
/// posted as it settles.
pub(super) async fn graph(runtime: Rc<Runtime>, id: u64, request: Value, approve: bool, seen: u64) {
    let refused = |issues: Vec<String>| Problem {
        bad_request: false,
        message: issues.join("; "),
        code: Some("invalid_graph".into()),
        hint: None,
        status: None,
    };
    let answered = async {
        let request = kiln_nodes::GraphRequest::from_value(request)
            .map_err(|error| Problem::bad_request(error.0))?;
        let built = kiln_nodes::build_graph(request.spec).map_err(refused)?;
        let environment = watched_environment(&runtime, id, approve, seen, "kiln.graph");
        let cancel = AbortSignal::new();
        runtime.runs.borrow_mut().insert(id, cancel.clone());
        let runner = PoolRunner(runtime.pool.clone());
        let ran = kiln_nodes::run_graph(
            &built,
            &request.inputs,
            &request.run,
            kiln_nodes::GraphSetup {
                environment: &environment,
                runner: &runner,
                cancel: &cancel,
                on_progress: Some(Rc::new(move |node: &str, progress: &Progress| {
                    post(&FromRuntime::Event {
                        id,
                        event: ExchangeEvent::Progress {
                            node: Some(node.to_owned()),
                            progress: progress.clone(),
                        },
                    });
                })),
            },
            request.max_concurrent,
            |report| {
                post(&FromRuntime::Event {
                    id,
                    event: ExchangeEvent::Node(report.clone()),
                });
            },
        )
        .await
        .map_err(refused)?;
        Ok::<Value, Problem>(serde_json::to_value(&ran).unwrap_or(Value::Null))
    }
    .await;
    settle(&runtime, id);
    answer(id, answered);
}

/// A node checked as it would run (the node editor's Save): `{problems}`,
/// each a sentence, none when it would run. A TypeScript body is checked as
/// the JavaScript that runs, with the stripper this worker's runs use.
pub(super) async fn check_node(runtime: Rc<Runtime>, id: u64, node: Value) {
    let answered = async {
        let node: kiln_types::node::CodeNode = serde_json::from_value(node)
            .map_err(|error| Problem::bad_request(format!("the node to check: {error}")))?;
        let runner = PoolRunner(runtime.pool.clone());
        let problems = kiln_nodes::check_node_typed(&node, runner.stripper()).await;
        Ok::<Value, Problem>(json!({ "problems": problems }))
    }
    .await;
    answer(id, answered);
}

/// One authoring (`kiln.authorCode`): the model resolved from the request,
/// the code-model setting, the chat's model and the kept provider's
/// default; with `preview`, what would be sent, and nothing sent.
pub(super) async fn author_code(runtime: Rc<Runtime>, id: u64, request: Value, preview: bool) {
    let answered = async {
        let spec = kiln_nodes::AuthorSpec::from_value(request)
            .map_err(|error| Problem::bad_request(error.0))?;
        let config = stored_config(&runtime);
        let setting = match &config {
            Some(config) => config
                .settings()
                .await
                .ok()
                .and_then(|settings| settings.code_model),
            None => None,
        };
        let kept = kiln_run::kept_model(config.as_ref(), &spec.provider).await;
        let candidates = [
            spec.model.as_deref().or(setting.as_deref()),
            spec.chat_model.as_deref(),
            kept.as_deref(),
        ];
        let provider = provider_config(config.as_ref(), &spec.provider)
            .await
            .map(|provider| kiln_providers::connect_with(provider, runtime.http.clone()));
        // A model the provider says cannot call tools is skipped; a provider
        // that cannot be set up (a preview may come before its key) is not asked.
        let model = match &provider {
            Ok(provider) => kiln_nodes::pick_model(&**provider, &candidates).await,
            Err(_) => kiln_nodes::resolve_model(&candidates, &[]),
        }
        .map_err(|why| Problem {
            bad_request: false,
            message: why,
            code: Some("no_model".into()),
            hint: None,
            status: None,
        })?;
        if preview {
            return Ok(json!({"messages": spec.request.payload(), "model": model}));
        }
        let provider = provider.map_err(|error| op_problem(&error.into()))?;
        let cancel = AbortSignal::new();
        runtime.runs.borrow_mut().insert(id, cancel.clone());
        let authored = kiln_nodes::author(
            &*provider,
            &model,
            &spec.request,
            PoolRunner(runtime.pool.clone()).stripper(),
            &kiln_http::SystemClock,
            &cancel,
        )
        .await;
        Ok::<Value, Problem>(kiln_nodes::authored_answer(&authored))
    }
    .await;
    settle(&runtime, id);
    answer(id, answered);
}

//! `kiln eval codeact`: deterministic tasks over in-process tools in several
//! domains, each needing several calls, a loop or arithmetic over what the
//! tools answer, scored by exact match on the final answer. Every case runs
//! twice: as a CodeAct turn ([`kiln_agent::run_agent`]) and as a plain
//! tool-calling loop ([`kiln_agent::converse`], the same tools offered
//! directly), so what acting in code buys is measured per model, side by
//! side.
//!
//! The cases are data, in `cases/codeact.json` ([`crate::cases`]): each
//! with its objective, its expected answer and its tools in full (name,
//! description, key argument, table). What stays code is the harness: the
//! tools' implementation over their tables, the answer-only suffix, the two
//! modes and the scoring.

use std::rc::Rc;

use futures::future::LocalBoxFuture;
use kiln_capabilities::{
    CallContext, CapabilitySpec, Category, Implementation, Permit, Registry, Source,
};
use kiln_providers::budget::{BudgetLimits, RunBudget};
use kiln_providers::cost::PriceCatalog;
use kiln_providers::{ChatOptions, Message, Provider};
use kiln_types::agent::Guards;
use kiln_types::cancel::AbortSignal;
use kiln_types::tool_result::{CallOutcome, ToolFailure, ToolReply};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::cases::CasesError;

use kiln_agent::{AgentRequest, AgentSetup, Compaction, run_agent};
use kiln_run::{Environment, People};
use kiln_run::{RunRequest, SandboxRunner};

/// One in-process tool of a case: answers `table[args[key]]` (or the whole
/// table when it takes no key).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalTool {
    pub name: String,
    pub description: String,
    /// The one argument naming the row, if any.
    pub key: Option<String>,
    pub table: Value,
}

/// One task and its one right answer.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub name: String,
    pub domain: String,
    pub objective: String,
    /// Its tools in full, tables and all.
    pub tools: Vec<EvalTool>,
    /// The exact answer, as text.
    pub expected: String,
}

const ANSWER_ONLY: &str = " Answer with the answer alone: no words, no units.";

/// The file the cases live in, relative to this crate.
const CASES_FILE: &str = "cases/codeact.json";

const CASES: &str = include_str!("../cases/codeact.json");

/// The cases, in three domains: `cases/codeact.json`, parsed.
///
/// # Errors
///
/// The file does not parse.
pub fn cases() -> Result<Vec<Case>, CasesError> {
    crate::cases::parse(CASES_FILE, CASES)
}

impl crate::cases::Named for Case {
    fn name(&self) -> &str {
        &self.name
    }
}

pub(crate) struct Table(pub(crate) EvalTool);

impl Implementation for Table {
    fn call(&self, args: Value, _: CallContext, _: Permit) -> LocalBoxFuture<'static, ToolReply> {
        let tool = &self.0;
        let reply = match &tool.key {
            None => Ok(tool.table.clone()),
            Some(key) => {
                let wanted = match args.get(key) {
                    Some(Value::String(text)) => text.clone(),
                    Some(other) => other.to_string(),
                    None => String::new(),
                };
                tool.table.get(&wanted).cloned().ok_or_else(|| ToolFailure {
                    code: "not_found".into(),
                    message: format!("{}: there is no `{wanted}`", tool.name),
                    detail: None,
                    outcome: CallOutcome::Error,
                })
            }
        };
        Box::pin(async move { reply })
    }
}

pub(crate) fn spec(tool: &EvalTool) -> CapabilitySpec {
    let (properties, required) = match &tool.key {
        Some(key) => (json!({key: {"type": "string"}}), json!([key])),
        None => (json!({}), json!([])),
    };
    CapabilitySpec {
        name: tool.name.clone(),
        description: tool.description.clone(),
        input_schema: json!({"type": "object", "properties": properties, "required": required}),
        category: Category::Read,
        result: json!({}),
        source: Source::Host {
            host: "eval".into(),
        },
    }
}

/// How a case went in one mode.
#[derive(Debug, Clone, PartialEq)]
pub struct Score {
    pub passed: bool,
    pub answer: String,
    pub turns: u32,
    pub tokens: u64,
    pub cost_usd: f64,
    /// How the turn ended, when it did not answer.
    pub stop: Option<String>,
}

/// One case in both modes.
#[derive(Debug, Clone)]
pub struct CaseResult {
    pub name: String,
    pub domain: String,
    pub codeact: Score,
    pub direct: Score,
}

/// The answer as scored: trimmed, without a trailing period, a number
/// written the shortest way (`92.0` is `92`).
#[must_use]
pub fn normalize(answer: &str) -> String {
    let text = answer.trim().trim_end_matches('.').trim().trim_matches('"');
    match text.parse::<f64>() {
        Ok(number) if number.is_finite() => {
            let shown = format!("{number}");
            shown
                .strip_suffix(".0")
                .map_or(shown.clone(), str::to_owned)
        }
        _ => text.to_owned(),
    }
}

/// A run's environment for a suite's cases: the case's table tools, every
/// call approved, no workspace; `seed` fills the run ids' random bytes.
pub(crate) fn table_environment(tools: Vec<EvalTool>, seed: u8) -> Environment {
    Environment {
        entrance: "kiln eval".into(),
        tools_host: "eval".into(),
        http: kiln_http::default_client(),
        people: People::Approver {
            host: "kiln eval".into(),
            approver: Rc::new(kiln_capabilities::gate::Fixed(
                kiln_capabilities::Answer::Approve,
            )),
            session: kiln_capabilities::gate::SessionAllow::default(),
        },
        own_tools: Some(Rc::new(move |registry: &mut Registry| {
            for tool in &tools {
                let _ = registry.add(spec(tool), Rc::new(Table(tool.clone())));
            }
        })),
        bridge: None,
        workspace: None,
        random: Rc::new(move || [seed; 8]),
        on_gate: None,
        on_progress: None,
    }
}

fn objective(case: &Case) -> String {
    format!("{}{ANSWER_ONLY}", case.objective)
}

async fn codeact(
    case: &Case,
    provider: Rc<dyn Provider>,
    model: &str,
    runner: Rc<dyn SandboxRunner>,
    max_turns: u32,
) -> Score {
    let environment = table_environment(case.tools.clone(), 0);
    let mut run = RunRequest::new("");
    run.mode = Some(kiln_capabilities::Mode::Auto);
    let request = AgentRequest {
        run,
        provider,
        options: ChatOptions {
            max_tokens: 2048,
            ..ChatOptions::new(model)
        },
        messages: vec![Message::User {
            text: objective(case),
        }],
        system: None,
        output_schema: None,
        guards: Guards {
            max_turns,
            ..Guards::default()
        },
        budget: BudgetLimits::default(),
        direct: Vec::new(),
        compaction: Compaction::default(),
        profile: None,
    };
    let setup = AgentSetup {
        environment: &environment,
        runner,
        person: None,
        clock: Rc::new(kiln_http::SystemClock),
        sink: Rc::new(|_| {}),
        cancel: AbortSignal::new(),
    };
    match run_agent(request, setup).await {
        Ok(outcome) => {
            let result = outcome.result;
            let answer = normalize(&result.text);
            Score {
                passed: result.stop.is_success() && answer == case.expected,
                answer,
                turns: result.turns,
                tokens: result.usage.input_tokens + result.usage.output_tokens,
                cost_usd: result.spend,
                stop: (!result.stop.is_success()).then(|| {
                    result
                        .stop
                        .code
                        .or(result.stop.message)
                        .unwrap_or_else(|| format!("{:?}", result.stop.reason))
                }),
            }
        }
        Err(error) => failed_score(error.0),
    }
}

fn failed_score(why: String) -> Score {
    Score {
        passed: false,
        answer: String::new(),
        turns: 0,
        tokens: 0,
        cost_usd: 0.0,
        stop: Some(why),
    }
}

async fn direct(case: &Case, provider: &dyn Provider, model: &str, max_turns: u32) -> Score {
    let environment = table_environment(case.tools.clone(), 0);
    let mut request = RunRequest::new("");
    request.mode = Some(kiln_capabilities::Mode::Auto);
    let ladder = match kiln_run::assemble(&request, &environment).await {
        Ok(ladder) => ladder,
        Err(error) => return failed_score(error.0),
    };
    let names: Vec<String> = case.tools.iter().map(|tool| tool.name.clone()).collect();
    let budget = RunBudget::new(
        BudgetLimits {
            max_turns: Some(max_turns),
            ..BudgetLimits::default()
        },
        Rc::new(PriceCatalog::builtin()),
        Rc::new(kiln_http::SystemClock),
    );
    let conversation = kiln_agent::Conversation {
        messages: vec![Message::User {
            text: objective(case),
        }],
        tools: kiln_agent::tool_defs(&ladder.dispatcher.catalog(), &names),
        options: ChatOptions {
            max_tokens: 2048,
            ..ChatOptions::new(model)
        },
    };
    let outcome = kiln_agent::converse(
        provider,
        conversation,
        budget.clone(),
        &ladder.dispatcher,
        None,
        &mut |_| {},
    )
    .await;
    let spend = budget.spend();
    let tokens = spend
        .calls
        .iter()
        .map(|call| call.usage.input_tokens + call.usage.output_tokens)
        .sum();
    let (answer, stop) = match outcome.end {
        kiln_agent::ChatEnd::Answered(message) => (normalize(&message.text), None),
        kiln_agent::ChatEnd::Stopped(stop) => {
            (String::new(), Some(stop.reason.as_str().to_owned()))
        }
        kiln_agent::ChatEnd::Failed(error) => (String::new(), Some(error.code().to_owned())),
        kiln_agent::ChatEnd::Incomplete => (String::new(), Some("incomplete".into())),
    };
    Score {
        passed: stop.is_none() && answer == case.expected,
        answer,
        turns: spend.turns,
        tokens,
        cost_usd: spend.spent_usd,
        stop,
    }
}

/// Runs every case in both modes, one after another.
pub async fn run_cases(
    cases: &[Case],
    provider: Rc<dyn Provider>,
    model: &str,
    runner: Rc<dyn SandboxRunner>,
    max_turns: u32,
) -> Vec<CaseResult> {
    let mut results = Vec::new();
    for case in cases {
        let code = codeact(case, provider.clone(), model, runner.clone(), max_turns).await;
        let plain = direct(case, &*provider, model, max_turns).await;
        results.push(CaseResult {
            name: case.name.clone(),
            domain: case.domain.clone(),
            codeact: code,
            direct: plain,
        });
    }
    results
}

fn cell(score: &Score) -> String {
    let mark = if score.passed { "pass" } else { "FAIL" };
    let why = score
        .stop
        .as_ref()
        .map(|stop| format!(" ({stop})"))
        .unwrap_or_else(|| {
            if score.passed {
                String::new()
            } else {
                format!(" (answered {:?})", score.answer)
            }
        });
    format!(
        "{mark}{why} · {} turns · {} tokens · ${:.4}",
        score.turns, score.tokens, score.cost_usd
    )
}

/// The table: one row per case, then the totals of each mode.
#[must_use]
pub fn table(results: &[CaseResult]) -> String {
    let mut text = String::from("| case | domain | CodeAct | direct tools |\n|---|---|---|---|\n");
    for result in results {
        text.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            result.name,
            result.domain,
            cell(&result.codeact),
            cell(&result.direct)
        ));
    }
    let total = |pick: fn(&CaseResult) -> &Score| {
        let scores: Vec<&Score> = results.iter().map(pick).collect();
        let passed = scores.iter().filter(|score| score.passed).count();
        format!(
            "{passed}/{} ({:.0}%) · {} turns · {} tokens · ${:.4}",
            scores.len(),
            if scores.is_empty() {
                0.0
            } else {
                100.0 * passed as f64 / scores.len() as f64
            },
            scores.iter().map(|score| score.turns).sum::<u32>(),
            scores.iter().map(|score| score.tokens).sum::<u64>(),
            scores.iter().map(|score| score.cost_usd).sum::<f64>()
        )
    };
    text.push_str(&format!(
        "| **total** | | {} | {} |\n",
        total(|result| &result.codeact),
        total(|result| &result.direct)
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_compared_as_written_numbers_and_words() {
        assert_eq!(normalize(" 92.0. "), "92");
        assert_eq!(normalize("267.75"), "267.75");
        assert_eq!(normalize("\"Cairo\""), "Cairo");
        assert_eq!(normalize("C3."), "C3");
    }

    #[test]
    fn a_pattern_picks_cases_by_name() {
        use crate::cases::{select, wildcard};
        assert!(wildcard("shop-*", "shop-order-total"));
        assert!(wildcard("*total", "shop-order-total"));
        assert!(wildcard("*", "x"));
        assert!(wildcard("team-payroll", "team-payroll"));
        assert!(!wildcard("team-*", "shop-order-total"));
        assert!(!wildcard("a*b*c", "ab"));
        assert_eq!(select(cases().unwrap(), "weather-*").len(), 2);
    }

    /// The expected answers are the tables' own arithmetic.
    #[test]
    fn every_expected_answer_follows_from_its_tables() {
        let cases = cases().unwrap();
        let price = |sku: &str| {
            cases[0].tools[0].table[sku]["price"]
                .as_f64()
                .unwrap_or(f64::NAN)
        };
        assert_eq!(
            normalize(&(3.0 * price("A1") + 2.0 * price("C3") + 4.0 * price("E5")).to_string()),
            cases[0].expected
        );
        let stock = |sku: &str| {
            cases[1].tools[1].table[sku]["units"]
                .as_f64()
                .unwrap_or(f64::NAN)
        };
        let skus = ["A1", "B2", "C3", "D4", "E5"];
        let value: f64 = skus.iter().map(|sku| stock(sku) * price(sku)).sum();
        assert_eq!(normalize(&value.to_string()), cases[2].expected);
        let temps = &cases[4].tools[0].table;
        let all: Vec<f64> = temps
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(_, t)| t["celsius"].as_f64())
            .collect();
        let average = (all.iter().sum::<f64>() / all.len() as f64 * 10.0).round() / 10.0;
        assert_eq!(normalize(&average.to_string()), cases[4].expected);
    }
}

//! `greedy DIR PROMPT N [--json]`: the model's greedy reply to PROMPT (`chat:TEXT`
//! renders TEXT as a user's message with the model's own template; anything
//! else is a raw prompt), natively, with its timings (first token, tokens per
//! second); `--json` prints `{prompt, tokens, text, steps}` instead, the steps
//! teacher-forced scores of the reply: what `browser-model.spec` holds the
//! model worker's build to.

#![expect(clippy::disallowed_methods, reason = "a benchmark measures real time")]

use std::time::Instant;

use kiln_llm::{Manifest, Model, Step, Turn};
use kiln_types::chat::{ChatOptions, ChatRequest, Message};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = std::path::Path::new(args.first().ok_or("usage: greedy DIR PROMPT N [--json]")?);
    let prompt = args
        .get(1)
        .map_or("The capital of France is", String::as_str);
    let n: usize = args.get(2).map_or(Ok(32), |n| n.parse())?;
    let json = args.iter().any(|arg| arg == "--json");
    let manifest = Manifest::parse(&std::fs::read(dir.join(kiln_llm::MANIFEST_FILE))?)?;
    let loading = Instant::now();
    let mut model = Model::load(
        &std::fs::read(dir.join(&manifest.weights.file))?,
        &std::fs::read(dir.join(&manifest.tokenizer.file))?,
    )?;
    let load_ms = loading.elapsed().as_secs_f64() * 1e3;
    let tokens = match prompt.strip_prefix("chat:") {
        Some(text) => {
            let mut options = ChatOptions::new(kiln_llm::MODEL_ID);
            options.max_tokens = 1;
            let request = ChatRequest {
                messages: vec![Message::User {
                    text: text.to_owned(),
                }],
                tools: Vec::new(),
                options,
            };
            Turn::start(&model, &request)?.prompt_tokens().to_vec()
        }
        None => model.encode(prompt)?,
    };
    for round in 0..if json { 1 } else { 2 } {
        let mut turn = Turn::from_prompt_tokens(&model, tokens.clone(), n)?;
        let started = Instant::now();
        let mut first = None;
        loop {
            let step = turn.step(&mut model)?;
            first.get_or_insert_with(|| started.elapsed().as_secs_f64() * 1e3);
            if matches!(step, Step::Finished(_)) {
                break;
            }
        }
        let reply = turn.tokens().to_vec();
        if json {
            let steps = model.score(&tokens, &reply)?;
            let text = model.decode(&reply)?;
            println!(
                "{}",
                serde_json::json!({"prompt": tokens, "tokens": reply, "text": text, "steps": steps})
            );
            return Ok(());
        }
        let total = started.elapsed().as_secs_f64() * 1e3;
        let first = first.unwrap_or(total);
        let rate = (reply.len().saturating_sub(1)) as f64 / ((total - first) / 1e3);
        println!(
            "round {round}: load {load_ms:.0} ms, prompt {} tokens, first token {first:.1} ms, {rate:.1} tokens/s over {} tokens",
            tokens.len(),
            reply.len()
        );
        if round == 1 {
            println!("{reply:?}");
            println!("{:?}", model.decode(&reply)?);
        }
    }
    Ok(())
}

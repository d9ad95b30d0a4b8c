//! `greedy DIR PROMPT N`: the model's greedy continuation of a raw prompt, with its
//! timings (prompt, first token, tokens per second), for comparing with llama.cpp.

use std::time::Instant;

use kiln_llm::{Manifest, Model, Step, Turn};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = std::path::Path::new(args.first().ok_or("usage: greedy DIR PROMPT N")?);
    let prompt = args
        .get(1)
        .map_or("The capital of France is", String::as_str);
    let n: usize = args.get(2).map_or(Ok(32), |n| n.parse())?;
    let manifest: Manifest =
        serde_json::from_slice(&std::fs::read(dir.join(kiln_llm::MANIFEST_FILE))?)?;
    let loading = Instant::now();
    let mut model = Model::load(
        &std::fs::read(dir.join(&manifest.weights.file))?,
        &std::fs::read(dir.join(&manifest.tokenizer.file))?,
    )?;
    let load_ms = loading.elapsed().as_secs_f64() * 1e3;
    let tokens = model.encode(prompt)?;
    for round in 0..2 {
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
        let total = started.elapsed().as_secs_f64() * 1e3;
        let first = first.unwrap_or(total);
        let rate = (turn.tokens().len() - 1) as f64 / ((total - first) / 1e3);
        println!(
            "round {round}: load {load_ms:.0} ms, prompt {} tokens, first token {first:.1} ms, {rate:.1} tokens/s over {} tokens",
            tokens.len(),
            turn.tokens().len()
        );
        if round == 1 {
            println!("{:?}", turn.tokens());
            println!("{:?}", model.decode(turn.tokens())?);
        }
    }
    Ok(())
}

//! Figures for `cargo xtask bench`, measured the same way natively and in the page's wasm:
//! SSE parsing throughput (framing + the OpenAI chunk decoder + tool-call assembly, fed in
//! network-sized pieces) and the cost accounting's overhead per turn.

use futures::stream;
use futures::{FutureExt as _, StreamExt as _};
use serde::Serialize;

use crate::budget::{BudgetLimits, RunBudget};
use crate::chat::{ChatOptions, ChatRequest, Message};
use crate::cost::{PriceCatalog, estimate_prompt_tokens};
use crate::drive::{self, Decoder, Framing};
use crate::error::ProviderKind;
use crate::event::Usage;
use crate::failure::Peer;
use crate::openai::ChunkDecoder;

#[derive(Debug, Clone, Serialize)]
pub struct SseFigures {
    pub bytes: usize,
    pub events: usize,
    pub median_ms: f64,
    pub mb_per_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CostFigures {
    pub turns: u32,
    /// Estimating the prompt, reserving and committing, per turn.
    pub median_ns_per_turn: f64,
}

/// An OpenAI-style stream of about `bytes` bytes as llama.cpp and OpenAI send it: text
/// deltas of a few characters, a tool call in fragments, the finish, usage and `[DONE]`.
pub fn recorded_stream(bytes: usize) -> Vec<u8> {
    let mut body = String::with_capacity(bytes + 1024);
    let words = [
        "Kiln ",
        "runs ",
        "agents ",
        "in ",
        "the ",
        "browser, ",
        "fast ",
        "and ",
        "safe. ",
    ];
    let mut n = 0_usize;
    while body.len() < bytes {
        let text = words[n % words.len()];
        body.push_str(&format!(
            "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1796035329,\"model\":\"smollm2-135m-instruct\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}},\"finish_reason\":null}}]}}\n\n"
        ));
        n += 1;
    }
    body.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]}}]}\n\n");
    for fragment in ["{\\\"city\\\":", "\\\"Paris\\\"}"] {
        body.push_str(&format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":0,\"function\":{{\"arguments\":\"{fragment}\"}}}}]}}}}]}}\n\n"
        ));
    }
    body.push_str(
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
    );
    body.push_str(
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":900}}\n\n",
    );
    body.push_str("data: [DONE]\n\n");
    body.into_bytes()
}

/// Parses one recorded stream, fed in 1,460-byte pieces (one TCP segment), to the end.
/// Returns how many events came out.
pub fn parse_once(body: &[u8]) -> usize {
    let pieces: Vec<Result<Vec<u8>, kiln_http::HttpError>> =
        body.chunks(1460).map(|piece| Ok(piece.to_vec())).collect();
    let peer = Peer::new(
        ProviderKind::OpenAi,
        "http://127.0.0.1/v1/chat/completions",
        None,
    );
    let mut items = drive::frame(stream::iter(pieces).boxed_local(), Framing::Sse);
    let mut decoder = ChunkDecoder::default();
    let mut out = Vec::new();
    let mut events = 0;
    // Every piece is ready at once: the stream never returns Pending.
    while let Some(Some(item)) = items.next().now_or_never() {
        let Ok((name, data)) = item else { break };
        out.clear();
        if decoder.item(&peer, &name, &data, &mut out).is_err() {
            break;
        }
        events += out.len();
    }
    events
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples.get(samples.len() / 2).copied().unwrap_or(0.0)
}

/// SSE throughput over `rounds` passes of a stream of about `bytes` bytes.
pub fn sse_throughput(bytes: usize, rounds: u32, now_ms: &dyn Fn() -> f64) -> SseFigures {
    let body = recorded_stream(bytes);
    let mut events = 0;
    let samples: Vec<f64> = (0..rounds.max(1))
        .map(|_| {
            let start = now_ms();
            events = parse_once(&body);
            now_ms() - start
        })
        .collect();
    let median_ms = median(samples);
    SseFigures {
        bytes: body.len(),
        events,
        median_ms,
        mb_per_s: if median_ms > 0.0 {
            body.len() as f64 / 1e6 / (median_ms / 1000.0)
        } else {
            0.0
        },
    }
}

/// The budget's work per turn (estimate the prompt, reserve, commit) over `turns` turns of
/// a ten-message conversation, in batches of 1,000.
pub fn cost_overhead(turns: u32, now_ms: &dyn Fn() -> f64) -> CostFigures {
    let request = ChatRequest {
        messages: (0..10)
            .map(|n| Message::User {
                text: format!("message {n}: {}", "words of a conversation ".repeat(20)),
            })
            .collect(),
        tools: Vec::new(),
        options: ChatOptions::new("gpt-4o-mini"),
    };
    let budget = RunBudget::new(
        BudgetLimits {
            max_usd: Some(1e9),
            ..BudgetLimits::default()
        },
        std::rc::Rc::new(PriceCatalog::builtin()),
        // No deadline: the clock is never read for one.
        std::rc::Rc::new(kiln_http::SystemClock),
    );
    let batches = (turns / 1000).max(1);
    let samples: Vec<f64> = (0..batches)
        .map(|_| {
            let start = now_ms();
            for _ in 0..1000 {
                let tokens = estimate_prompt_tokens(&request);
                if let Ok(reservation) =
                    budget.reserve(&request.options.model, tokens, request.options.max_tokens)
                {
                    reservation.commit(Usage {
                        input_tokens: tokens,
                        output_tokens: 100,
                    });
                }
            }
            (now_ms() - start) * 1e6 / 1000.0
        })
        .collect();
    CostFigures {
        turns: batches * 1000,
        median_ns_per_turn: median(samples),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorded_stream_parses_whole() {
        let body = recorded_stream(50_000);
        assert!(body.len() >= 50_000);
        // One event per text chunk; the call's start and two fragments; at the finish its
        // end and the stop; usage. `[DONE]` gives none, the call's end makes up for it.
        let chunks = String::from_utf8_lossy(&body).matches("data: ").count();
        assert_eq!(parse_once(&body), chunks);
    }
}

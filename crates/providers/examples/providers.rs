//! `cargo xtask bench` runs this natively in release (through `playwright/bench/providers.mjs`,
//! which sets the peers beside it). Prints one JSON object a line:
//!
//! - `sse`: Kiln's SSE parsing throughput on a recorded stream of about 1 MB (median of 20
//!   rounds); `--write-stream PATH` also writes those bytes, so that the peer
//!   (`eventsource-parser` + `JSON.parse` in Node and in Chromium) parses the same ones;
//! - `cost`: the cost accounting's overhead per turn;
//! - `ttft`: time to first token through [`HttpProvider`] beside a direct HTTP/1.1 request of
//!   the same body over a plain `TcpStream`, both to a local model (SmolLM2-135M on llama.cpp)
//!   this starts, in rounds that rotate which goes first; `kiln-http`'s client alone is timed
//!   as a third, to show whether extra time is the HTTP seam's or the provider's. `--no-ttft`
//!   leaves it out.
//!
//! Not a test: it asserts nothing about time.

#![expect(clippy::disallowed_methods, reason = "a benchmark measures real time")]

// The local model is a native process; in wasm this example is nothing.
#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
fn main() -> anyhow::Result<()> {
    native::main()
}

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use std::io::{BufRead as _, BufReader, Read as _, Write as _};
    use std::net::{TcpListener, TcpStream};
    use std::path::PathBuf;
    use std::time::{Duration, Instant};

    use anyhow::{Context as _, Result, bail};
    use futures::StreamExt as _;
    use futures::executor::block_on;
    use kiln_http::{HttpClient, Request as HttpRequest};
    use kiln_providers::bench;
    use kiln_providers::{
        ChatOptions, ChatRequest, Event, HttpProvider, Message, Provider, ProviderConfig,
        ProviderKind, RetryPolicy,
    };
    use kiln_testkit::LocalModel;
    use serde_json::{Value, json};

    /// About 1 MB of SSE, as the runtime worker's `sse` bench hook parses it.
    const STREAM_BYTES: usize = 1_000_000;
    const SSE_ROUNDS: u32 = 20;
    const COST_TURNS: u32 = 100_000;
    const WARM_UP_ROUNDS: usize = 2;
    const ROUNDS: usize = 15;
    const MAX_TOKENS: u32 = 8;
    /// The same prompt every time, on both sides: llama.cpp keeps the slot's prompt cache, so
    /// both sides see the same (cached) prompt evaluation.
    const PROMPT: &str = "Say hello in one short sentence.";

    struct Args {
        write_stream: Option<PathBuf>,
        ttft: bool,
    }

    fn args() -> Result<Args> {
        let mut args = Args {
            write_stream: None,
            ttft: true,
        };
        let mut given = std::env::args().skip(1);
        while let Some(arg) = given.next() {
            match arg.as_str() {
                "--write-stream" => {
                    let path = given
                        .next()
                        .context("`--write-stream` takes a path to write the recorded stream to")?;
                    args.write_stream = Some(PathBuf::from(path));
                }
                "--no-ttft" => args.ttft = false,
                other => bail!(
                    "unknown argument `{other}`\nhint: providers [--write-stream PATH] [--no-ttft]"
                ),
            }
        }
        Ok(args)
    }

    pub fn main() -> Result<()> {
        let args = args()?;
        let origin = Instant::now();
        let now_ms = move || origin.elapsed().as_secs_f64() * 1e3;

        if let Some(path) = &args.write_stream {
            std::fs::write(path, bench::recorded_stream(STREAM_BYTES))
                .with_context(|| format!("writing the recorded stream to `{}`", path.display()))?;
        }
        let sse = bench::sse_throughput(STREAM_BYTES, SSE_ROUNDS, &now_ms);
        println!("{}", json!({ "sse": sse }));
        let cost = bench::cost_overhead(COST_TURNS, &now_ms);
        println!("{}", json!({ "cost": cost }));
        if args.ttft {
            println!("{}", json!({ "ttft": ttft()? }));
        }
        Ok(())
    }

    fn median(samples: &[f64]) -> f64 {
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        sorted.get(sorted.len() / 2).copied().unwrap_or(0.0)
    }

    fn round(value: f64, digits: i32) -> f64 {
        let scale = 10_f64.powi(digits);
        (value * scale).round() / scale
    }

    fn request() -> ChatRequest {
        ChatRequest {
            messages: vec![Message::User {
                text: PROMPT.to_owned(),
            }],
            tools: Vec::new(),
            options: ChatOptions {
                max_tokens: MAX_TOKENS,
                temperature: Some(0.0),
                ..ChatOptions::new(LocalModel::MODEL)
            },
        }
    }

    /// The body the direct side posts: what Kiln's OpenAI adapter sends for [`request`]
    /// (checked against a captured copy before timing).
    fn direct_body() -> Value {
        json!({
            "model": LocalModel::MODEL,
            "messages": [{"role": "user", "content": PROMPT}],
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_tokens": MAX_TOKENS,
            "temperature": 0.0,
        })
    }

    fn provider(base_url: &str) -> HttpProvider {
        HttpProvider::new(
            ProviderConfig {
                kind: ProviderKind::OpenAi,
                base_url: format!("{base_url}/v1"),
                key: None,
            },
            kiln_http::default_client(),
        )
    }

    pub fn ttft() -> Result<Value> {
        let kiln_body = capture_kiln_body()?;
        let direct = direct_body();
        let kiln_value: Value =
            serde_json::from_slice(&kiln_body).context("Kiln's request body is not JSON")?;
        let direct_text = direct.to_string();

        let model = LocalModel::start();
        let provider = provider(&model.base_url());
        let seam = kiln_http::default_client();
        // [Kiln, direct, the HTTP seam alone] in ms, one triple per round.
        let mut samples: [Vec<f64>; 3] = Default::default();
        for round_index in 0..WARM_UP_ROUNDS + ROUNDS {
            // Which side goes first rotates, so that none always follows another.
            let mut times = [0.0; 3];
            for step in 0..3 {
                let side = (round_index + step) % 3;
                times[side] = match side {
                    0 => kiln_ttft(&provider)?,
                    1 => direct_ttft(model.port, &direct_text)?,
                    _ => seam_ttft(&*seam, &model.base_url(), &direct_text)?,
                };
            }
            if round_index >= WARM_UP_ROUNDS {
                for (side, time) in times.into_iter().enumerate() {
                    samples[side].push(time);
                }
            }
        }
        let [kiln_ms, direct_ms, seam_ms] = samples;
        let minimum = |samples: &[f64]| samples.iter().copied().fold(f64::INFINITY, f64::min);
        let kiln_median = median(&kiln_ms);
        let direct_median = median(&direct_ms);
        Ok(json!({
            "rounds": ROUNDS,
            "max_tokens": MAX_TOKENS,
            "kiln_body_bytes": kiln_body.len(),
            "direct_body_bytes": direct_text.len(),
            "bodies_equal": kiln_value == direct,
            "kiln_median_ms": round(kiln_median, 3),
            "direct_median_ms": round(direct_median, 3),
            "kiln_http_median_ms": round(median(&seam_ms), 3),
            "kiln_min_ms": round(minimum(&kiln_ms), 3),
            "direct_min_ms": round(minimum(&direct_ms), 3),
            "kiln_http_min_ms": round(minimum(&seam_ms), 3),
            "kiln_vs_direct": round(kiln_median / direct_median, 3),
            // For the page's direct request: the very bytes Kiln sends.
            "kiln_body_text": String::from_utf8_lossy(&kiln_body),
        }))
    }

    /// Milliseconds to the first text through `kiln-http`'s client alone (ureq on its thread,
    /// the chunks through a channel), without the provider's framing and decoding: where
    /// Kiln's extra time goes, the seam or the provider.
    fn seam_ttft(http: &dyn HttpClient, base_url: &str, body: &str) -> Result<f64> {
        block_on(async {
            let started = Instant::now();
            let response = http
                .open(
                    HttpRequest {
                        method: "POST".to_owned(),
                        url: format!("{base_url}/v1/chat/completions"),
                        headers: vec![
                            ("content-type".to_owned(), "application/json".to_owned()),
                            ("accept".to_owned(), "text/event-stream".to_owned()),
                        ],
                        body: Some(body.as_bytes().to_vec()),
                        timeout_ms: 60_000,
                        max_body_bytes: 1 << 20,
                        redirect: kiln_http::Redirect::Follow,
                    },
                    60_000,
                )
                .await
                .context("the local model did not answer kiln-http's request")?;
            let mut body = response.body;
            let mut events = SseLines::default();
            let mut first = None;
            while let Some(piece) = body.next().await {
                let piece = piece.context("reading the local model's stream through kiln-http")?;
                if events.feed(&piece) && first.is_none() {
                    first = Some(started.elapsed().as_secs_f64() * 1e3);
                }
            }
            first.context("the local model wrote no text to kiln-http's request")
        })
    }

    /// Milliseconds from asking for the turn to its first text delta; the rest of the stream is
    /// read too (the model has one slot: the next request must not queue behind this one).
    fn kiln_ttft(provider: &HttpProvider) -> Result<f64> {
        block_on(async {
            let started = Instant::now();
            let mut stream = provider.stream(request());
            let mut first = None;
            while let Some(item) = stream.next().await {
                let event = item.context("Kiln's turn to the local model failed")?;
                if first.is_none() && matches!(event, Event::TextDelta { .. }) {
                    first = Some(started.elapsed().as_secs_f64() * 1e3);
                }
            }
            first.context("the local model wrote no text through Kiln")
        })
    }

    /// Milliseconds from connecting to the first SSE data line whose `delta.content` is not
    /// empty, over one HTTP/1.1 request on a plain `TcpStream`; read to the end as well.
    fn direct_ttft(port: u16, body: &str) -> Result<f64> {
        let started = Instant::now();
        let mut socket = TcpStream::connect(("127.0.0.1", port))
            .with_context(|| format!("connecting to the local model on port {port}"))?;
        socket.set_read_timeout(Some(Duration::from_secs(60)))?;
        let request = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n\
             content-type: application/json\r\naccept: text/event-stream\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        socket.write_all(request.as_bytes())?;
        let mut reader = BufReader::new(socket);
        let mut line = String::new();
        reader.read_line(&mut line)?;
        if !line.starts_with("HTTP/1.1 200") {
            bail!("the local model answered `{}`", line.trim_end());
        }
        let mut chunked = false;
        loop {
            line.clear();
            if reader.read_line(&mut line)? == 0 || line == "\r\n" {
                break;
            }
            let lower = line.to_ascii_lowercase();
            if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
                chunked = true;
            }
        }
        let mut events = SseLines::default();
        let mut first = None;
        let mut piece = Vec::new();
        loop {
            piece.clear();
            if chunked {
                line.clear();
                reader.read_line(&mut line)?;
                let size_text = line.trim_end().split(';').next().unwrap_or_default();
                let size = usize::from_str_radix(size_text, 16)
                    .with_context(|| format!("a chunk size `{}`", line.trim_end()))?;
                if size == 0 {
                    break;
                }
                piece.resize(size + 2, 0);
                reader.read_exact(&mut piece)?;
                piece.truncate(size);
            } else {
                piece.resize(16 * 1024, 0);
                let read = reader.read(&mut piece)?;
                if read == 0 {
                    break;
                }
                piece.truncate(read);
            }
            if events.feed(&piece) && first.is_none() {
                first = Some(started.elapsed().as_secs_f64() * 1e3);
            }
        }
        first.context("the local model wrote no text to the direct request")
    }

    /// SSE `data:` lines of an OpenAI stream, read as they come.
    #[derive(Default)]
    struct SseLines {
        pending: Vec<u8>,
    }

    impl SseLines {
        /// Takes the next bytes; true when a complete data line among them carries text.
        fn feed(&mut self, bytes: &[u8]) -> bool {
            self.pending.extend_from_slice(bytes);
            let mut text = false;
            while let Some(end) = self.pending.iter().position(|&byte| byte == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=end).collect();
                let Some(data) = line.strip_prefix(b"data: ") else {
                    continue;
                };
                let Ok(chunk) = serde_json::from_slice::<Value>(data) else {
                    continue;
                };
                text |= chunk
                    .pointer("/choices/0/delta/content")
                    .and_then(Value::as_str)
                    .is_some_and(|content| !content.is_empty());
            }
            text
        }
    }

    /// The body Kiln's OpenAI adapter sends for [`request`], caught by a listener that answers
    /// with an empty stream.
    fn capture_kiln_body() -> Result<Vec<u8>> {
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        let port = listener.local_addr()?.port();
        let catcher = std::thread::spawn(move || -> Result<Vec<u8>> {
            let (socket, _) = listener.accept()?;
            let mut reader = BufReader::new(socket);
            let mut length = None;
            let mut line = String::new();
            loop {
                line.clear();
                if reader.read_line(&mut line)? == 0 || line == "\r\n" {
                    break;
                }
                if let Some((name, value)) = line.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = Some(value.trim().parse::<usize>()?);
                }
            }
            let length = length.context("Kiln's request has no content-length")?;
            let mut body = vec![0; length];
            reader.read_exact(&mut body)?;
            reader.get_mut().write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                  connection: close\r\n\r\ndata: [DONE]\n\n",
            )?;
            Ok(body)
        });
        let provider = provider(&format!("http://127.0.0.1:{port}")).with_retry(RetryPolicy {
            max_retries: 0,
            base_delay_ms: 0,
            max_delay_ms: 0,
        });
        // The empty stream's outcome does not matter: only what was sent.
        block_on(provider.stream(request()).count());
        catcher
            .join()
            .map_err(|_| anyhow::anyhow!("the thread catching Kiln's request panicked"))?
    }
}

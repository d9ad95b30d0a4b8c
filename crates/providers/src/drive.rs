//! The part every adapter shares: send the request (retrying what is worth retrying), frame
//! the body (SSE or NDJSON), feed each item to the adapter's [`Decoder`], and close the turn
//! with exactly one [`Event::Stop`] and the assembled [`Event::Done`].

use std::collections::VecDeque;
use std::rc::Rc;

use eventsource_stream::EventStream as SseFrames;
use futures::StreamExt as _;
use futures::stream::{self, LocalBoxStream};
use kiln_http::{BodyStream, Clock, HttpClient, HttpError, Request};

use crate::EventStream;
use crate::error::{ErrorKind, ProviderError};
use crate::event::{Event, FinalMessage, Stop};
use crate::failure::{Peer, from_http, from_status, retry_after_ms};

/// How a response body is cut into items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// Server-sent events (OpenAI, Anthropic): each item is an event's name and data.
    Sse,
    /// One JSON document per line (Ollama): each item is a line, with an empty name.
    Ndjson,
}

/// What an adapter says after an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    More,
    /// The provider's end marker: nothing after it matters.
    Finished,
}

/// One adapter's reading of its wire format. It pushes events into `out`; an `Event::Stop`
/// it pushes is held back by the driver and sent once, after everything else.
pub(crate) trait Decoder {
    fn item(
        &mut self,
        peer: &Peer,
        name: &str,
        data: &str,
        out: &mut Vec<Event>,
    ) -> Result<Flow, ProviderError>;

    /// The body ended after a stop reason but before the end marker: anything to close?
    fn end(&mut self, _peer: &Peer, _out: &mut Vec<Event>) -> Result<(), ProviderError> {
        Ok(())
    }

    /// The model the provider says answered, once an item named it (for
    /// [`FinalMessage::model`]).
    fn model(&self) -> Option<&str>;
}

/// The first non-empty model id `value` names at `pointer`, kept in `slot`.
pub(crate) fn remember_model(slot: &mut Option<String>, value: &serde_json::Value, pointer: &str) {
    if slot.is_none()
        && let Some(model) = value.pointer(pointer).and_then(serde_json::Value::as_str)
        && !model.is_empty()
    {
        *slot = Some(model.to_owned());
    }
}

/// Bounded retries for rate limits and server errors, before any event was yielded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// The first backoff; doubled each retry.
    pub base_delay_ms: u64,
    /// No wait is longer: a provider asking for more gets its error back at once.
    pub max_delay_ms: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 3,
            base_delay_ms: 500,
            max_delay_ms: 30_000,
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `attempt` (0-based): what the provider asked for, else
    /// exponential backoff.
    pub fn delay_ms(&self, attempt: u32, asked_ms: Option<u64>) -> u64 {
        asked_ms.unwrap_or_else(|| {
            self.base_delay_ms
                .saturating_mul(1_u64.checked_shl(attempt).unwrap_or(u64::MAX))
                .min(self.max_delay_ms)
        })
    }
}

/// Time limits of one streamed request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Until the status and headers arrive (a local model may read a long prompt first).
    pub response_ms: u64,
    /// Between two chunks of the stream.
    pub idle_ms: u64,
    /// The whole body.
    pub max_body_bytes: usize,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            response_ms: 300_000,
            idle_ms: 120_000,
            max_body_bytes: 64 << 20,
        }
    }
}

/// How much of an error body is read.
const ERROR_BODY_BYTES: usize = 64 << 10;

/// Everything the driver needs for one turn.
pub(crate) struct Turn {
    pub peer: Peer,
    pub http: Rc<dyn HttpClient>,
    pub request: Request,
    pub retry: RetryPolicy,
    /// What the retries wait on.
    pub clock: Rc<dyn Clock>,
    pub idle_ms: u64,
    pub framing: Framing,
    pub decoder: Box<dyn Decoder>,
}

/// Sends the request, retrying rate limits and server errors within the policy (each wait
/// a sleep on `clock`), and answers the body of the first 2xx response.
pub(crate) async fn open(
    peer: &Peer,
    http: &dyn HttpClient,
    request: &Request,
    idle_ms: u64,
    retry: RetryPolicy,
    clock: &dyn Clock,
) -> Result<kiln_http::StreamingResponse, ProviderError> {
    let mut attempt = 0_u32;
    loop {
        let error = match http.open(request.clone(), idle_ms).await {
            Err(error) => from_http(peer, &error),
            Ok(response) if (200..300).contains(&response.status) => return Ok(response),
            Ok(response) => {
                let asked = retry_after_ms(|name| response.header(name).map(str::to_owned));
                let status = response.status;
                let body = read_to_end(response.body, ERROR_BODY_BYTES).await;
                from_status(peer, status, &body, asked)
            }
        };
        let asked = match error.kind {
            ErrorKind::RateLimited { retry_after_ms } => retry_after_ms,
            _ => None,
        };
        let delay = retry.delay_ms(attempt, asked);
        if !error.kind.is_retryable() || attempt >= retry.max_retries || delay > retry.max_delay_ms
        {
            return Err(with_attempts(error, attempt));
        }
        clock.sleep(delay).await;
        attempt += 1;
    }
}

fn with_attempts(mut error: ProviderError, retries: u32) -> ProviderError {
    if retries > 0 {
        error.message = format!(
            "{} (still failing after {retries} {})",
            error.message,
            if retries == 1 { "retry" } else { "retries" }
        );
    }
    error
}

/// The body of an error response, up to `limit` bytes; a body that breaks is what we got.
pub(crate) async fn read_to_end(mut body: BodyStream, limit: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    while let Some(Ok(chunk)) = body.next().await {
        bytes.extend_from_slice(&chunk);
        if bytes.len() >= limit {
            bytes.truncate(limit);
            break;
        }
    }
    bytes
}

/// Items of a body: `(event name, data)` for SSE, `("", line)` for NDJSON.
type Items = LocalBoxStream<'static, Result<(String, String), HttpError>>;

/// The longest single SSE event or NDJSON line read (a streamed delta is a few bytes; a
/// whole reply in one event is still far below it). A peer sending one endless item
/// would otherwise have every new chunk re-parsed with all that came before.
pub(crate) const MAX_ITEM_BYTES: usize = 1 << 20;

fn item_too_long() -> HttpError {
    HttpError::Body {
        url: String::new(),
        message: format!(
            "a single event is longer than {} MiB without ending",
            MAX_ITEM_BYTES >> 20
        ),
    }
}

pub(crate) fn frame(body: BodyStream, framing: Framing) -> Items {
    match framing {
        Framing::Sse => SseFrames::new(bounded_events(body))
            .map(|event| match event {
                Ok(event) => Ok((event.event, event.data)),
                Err(eventsource_stream::EventStreamError::Transport(error)) => Err(error),
                Err(other) => Err(HttpError::Body {
                    url: String::new(),
                    message: format!("the event stream is malformed: {other}"),
                }),
            })
            .boxed_local(),
        Framing::Ndjson => ndjson_lines(body),
    }
}

/// Passes the body through, failing it once more than [`MAX_ITEM_BYTES`] arrive without a
/// blank line (the end of an SSE event; `\r` is ignored, so `\r\n\r\n` counts).
fn bounded_events(body: BodyStream) -> BodyStream {
    let mut since_blank_line = 0_usize;
    let mut after_newline = false;
    let mut failed = false;
    body.map(move |chunk| {
        let chunk = chunk?;
        // Back from the end to the last blank line: an event is short, so this reads a
        // few hundred bytes of a chunk, not all of it.
        let mut later_newline = None;
        let mut blank_line_end = None;
        for (at, &byte) in chunk.iter().enumerate().rev() {
            match byte {
                b'\r' => {}
                b'\n' if later_newline.is_some() => {
                    blank_line_end = later_newline;
                    break;
                }
                b'\n' => later_newline = Some(at),
                _ => later_newline = None,
            }
        }
        // A blank line across two chunks: the last ended on a newline, this one starts
        // with one.
        if blank_line_end.is_none() && after_newline {
            blank_line_end = later_newline;
        }
        since_blank_line = match blank_line_end {
            Some(end) => chunk.len() - end - 1,
            None => since_blank_line.saturating_add(chunk.len()),
        };
        if let Some(&last) = chunk.iter().rev().find(|&&byte| byte != b'\r') {
            after_newline = last == b'\n';
        }
        if since_blank_line > MAX_ITEM_BYTES || failed {
            failed = true;
            return Err(item_too_long());
        }
        Ok(chunk)
    })
    .boxed_local()
}

/// Splits a byte stream into lines (`\n`, with an optional `\r` before it); blank lines are
/// skipped; a last line without a newline still counts. Each byte is scanned once.
pub(crate) fn ndjson_lines(body: BodyStream) -> Items {
    struct Lines {
        body: BodyStream,
        buffer: Vec<u8>,
        /// `buffer[..scanned]` holds no newline.
        scanned: usize,
        ended: bool,
    }
    stream::unfold(
        Lines {
            body,
            buffer: Vec::new(),
            scanned: 0,
            ended: false,
        },
        |mut lines| async move {
            loop {
                let found = lines.buffer[lines.scanned..]
                    .iter()
                    .position(|&byte| byte == b'\n')
                    .map(|offset| lines.scanned + offset);
                if let Some(newline) = found {
                    let mut line: Vec<u8> = lines.buffer.drain(..=newline).collect();
                    lines.scanned = 0;
                    line.pop();
                    if line.last() == Some(&b'\r') {
                        line.pop();
                    }
                    if line.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    let item = String::from_utf8(line)
                        .map(|text| (String::new(), text))
                        .map_err(|error| HttpError::Body {
                            url: String::new(),
                            message: format!("a line is not UTF-8: {error}"),
                        });
                    return Some((item, lines));
                }
                lines.scanned = lines.buffer.len();
                if lines.buffer.len() > MAX_ITEM_BYTES {
                    lines.ended = true;
                    lines.buffer.clear();
                    lines.scanned = 0;
                    return Some((Err(item_too_long()), lines));
                }
                if lines.ended {
                    if lines.buffer.iter().all(u8::is_ascii_whitespace) {
                        return None;
                    }
                    lines.buffer.push(b'\n');
                    continue;
                }
                match lines.body.next().await {
                    Some(Ok(chunk)) => lines.buffer.extend_from_slice(&chunk),
                    Some(Err(error)) => {
                        lines.ended = true;
                        lines.buffer.clear();
                        lines.scanned = 0;
                        return Some((Err(error), lines));
                    }
                    None => lines.ended = true,
                }
            }
        },
    )
    .boxed_local()
}

enum Phase {
    Opening,
    Reading(Items),
    Closed,
}

struct State {
    turn: Turn,
    phase: Phase,
    pending: VecDeque<Result<Event, ProviderError>>,
    message: FinalMessage,
    stop: Option<Stop>,
    items: usize,
    last_item: String,
}

impl State {
    fn fail(&mut self, error: ProviderError) {
        self.pending.push_back(Err(error));
        self.phase = Phase::Closed;
    }

    fn queue(&mut self, events: Vec<Event>) {
        for event in events {
            match event {
                Event::Stop { stop } => self.stop = Some(stop),
                event => {
                    self.message.absorb(&event);
                    self.pending.push_back(Ok(event));
                }
            }
        }
    }

    /// The turn is over: the held stop, then the whole message.
    fn close(&mut self) {
        self.phase = Phase::Closed;
        let mut tail = Vec::new();
        if let Err(error) = self.turn.decoder.end(&self.turn.peer, &mut tail) {
            self.fail(error);
            return;
        }
        self.queue(tail);
        match self.stop.take() {
            Some(stop) => {
                let event = Event::Stop { stop };
                self.message.absorb(&event);
                self.pending.push_back(Ok(event));
                let mut message = std::mem::take(&mut self.message);
                message.model = self.turn.decoder.model().map(str::to_owned);
                self.pending.push_back(Ok(Event::Done { message }));
            }
            None => {
                let error = self.cut_off();
                self.fail(error);
            }
        }
    }

    fn cut_off(&self) -> ProviderError {
        let message = if self.items == 0 {
            "the stream ended before its first event".to_owned()
        } else {
            format!(
                "the stream was cut off after {} {} (the last was `{}`), before the reply was \
                 complete",
                self.items,
                if self.items == 1 { "event" } else { "events" },
                self.last_item
            )
        };
        self.turn.peer.error(ErrorKind::Stream, message)
    }

    async fn step(&mut self) {
        match std::mem::replace(&mut self.phase, Phase::Closed) {
            Phase::Closed => {}
            Phase::Opening => {
                let turn = &self.turn;
                match open(
                    &turn.peer,
                    turn.http.as_ref(),
                    &turn.request,
                    turn.idle_ms,
                    turn.retry,
                    turn.clock.as_ref(),
                )
                .await
                {
                    Ok(response) => {
                        let content_type = response
                            .header("content-type")
                            .unwrap_or("")
                            .to_ascii_lowercase();
                        if self.turn.framing == Framing::Sse
                            && content_type.starts_with("application/json")
                        {
                            let body = read_to_end(response.body, ERROR_BODY_BYTES).await;
                            let error = self.turn.peer.error(
                                ErrorKind::Stream,
                                format!(
                                    "expected an event stream, got a JSON reply: {}",
                                    crate::assemble::preview(&String::from_utf8_lossy(&body))
                                ),
                            );
                            self.fail(error);
                        } else {
                            self.phase = Phase::Reading(frame(response.body, self.turn.framing));
                        }
                    }
                    Err(error) => self.fail(error),
                }
            }
            Phase::Reading(mut items) => match items.next().await {
                None => self.close(),
                Some(Err(HttpError::Body { message, .. })) if self.items > 0 => {
                    // The connection broke mid-reply (`fetch` says only "network error").
                    let mut error = self.cut_off();
                    error.message = format!("{}: {message}", error.message);
                    self.fail(error);
                }
                Some(Err(error)) => {
                    let mut error = from_http(&self.turn.peer, &error);
                    if self.items > 0 {
                        error.message = format!(
                            "{} (after {} events; the last was `{}`)",
                            error.message, self.items, self.last_item
                        );
                    }
                    self.fail(error);
                }
                Some(Ok((name, data))) => {
                    self.items += 1;
                    self.last_item = if name.is_empty() {
                        format!("line {}", self.items)
                    } else {
                        name.clone()
                    };
                    let mut out = Vec::new();
                    let flow = self
                        .turn
                        .decoder
                        .item(&self.turn.peer, &name, &data, &mut out);
                    self.queue(out);
                    match flow {
                        Ok(Flow::More) => self.phase = Phase::Reading(items),
                        Ok(Flow::Finished) => {
                            drop(items);
                            self.close();
                        }
                        Err(error) => self.fail(error),
                    }
                }
            },
        }
    }
}

/// Runs one turn as a stream of events.
pub(crate) fn run(turn: Turn) -> EventStream {
    let state = State {
        turn,
        phase: Phase::Opening,
        pending: VecDeque::new(),
        message: FinalMessage::default(),
        stop: None,
        items: 0,
        last_item: String::new(),
    };
    stream::unfold(state, |mut state| async move {
        loop {
            if let Some(item) = state.pending.pop_front() {
                return Some((item, state));
            }
            if matches!(state.phase, Phase::Closed) {
                return None;
            }
            state.step().await;
        }
    })
    .boxed_local()
}

#[cfg(test)]
mod tests {
    use futures::executor::block_on;

    use super::*;

    fn body(pieces: Vec<Vec<u8>>) -> BodyStream {
        stream::iter(pieces.into_iter().map(Ok)).boxed_local()
    }

    fn items(framing: Framing, pieces: Vec<Vec<u8>>) -> Vec<Result<(String, String), String>> {
        block_on(
            frame(body(pieces), framing)
                .map(|item| item.map_err(|error| error.to_string()))
                .collect(),
        )
    }

    #[test]
    fn ndjson_lines_split_across_pieces() {
        let got = items(
            Framing::Ndjson,
            vec![
                b"{\"a\":".to_vec(),
                b"1}\r\n\n{\"b\"".to_vec(),
                b":2}".to_vec(),
            ],
        );
        assert_eq!(
            got,
            vec![
                Ok((String::new(), "{\"a\":1}".to_owned())),
                Ok((String::new(), "{\"b\":2}".to_owned()))
            ]
        );
    }

    #[test]
    fn an_endless_item_is_refused_in_either_framing() {
        for framing in [Framing::Sse, Framing::Ndjson] {
            let piece = vec![b'x'; 1 << 20];
            let mut pieces = vec![b"data: ".to_vec()];
            pieces.extend(std::iter::repeat_n(piece, 2));
            let got = items(framing, pieces);
            assert!(
                matches!(got.last(), Some(Err(message)) if message.contains("longer than 1 MiB")),
                "{framing:?}: {:?}",
                got.last().map(|item| item.as_ref().map(|_| "an item"))
            );
        }
    }

    #[test]
    fn a_blank_line_split_across_pieces_ends_an_event() {
        // 700 KiB events whose blank line is cut between two pieces: without seeing it, two
        // of them would add up past the cap.
        let event = format!("data: {}\r\n", "z".repeat(700 << 10));
        let pieces = vec![
            event.clone().into_bytes(),
            b"\r\n".to_vec(),
            event.into_bytes(),
            b"\n".to_vec(),
        ];
        let got = items(Framing::Sse, pieces);
        assert_eq!(
            got.len(),
            2,
            "{:?}",
            got.iter().map(Result::is_ok).collect::<Vec<_>>()
        );
        assert!(got.iter().all(Result::is_ok));
    }

    #[test]
    fn sse_events_of_any_size_below_the_cap_pass() {
        let event = format!("data: {}\r\n\r\n", "y".repeat(900 << 10));
        let pieces: Vec<Vec<u8>> = std::iter::repeat_n(event.into_bytes(), 4).collect();
        let got = items(Framing::Sse, pieces);
        assert_eq!(got.len(), 4);
        assert!(got.iter().all(Result::is_ok));
    }
}

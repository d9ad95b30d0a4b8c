//! One turn under the run's bounds: admitted by the [`RunBudget`] (reserve before, commit
//! after), cut by the caller's [`AbortSignal`] or the run's deadline — each of those ends the
//! turn with one visible [`Event::Stop`] naming the reason, never silently.

use std::future::Future;
use std::pin::Pin;

use std::task::Poll;

use futures::future::{LocalBoxFuture, poll_fn};
use futures::stream::{self, StreamExt as _};

use crate::budget::{Reservation, RunBudget};
use crate::cost::estimate_prompt_tokens;
use crate::event::{Event, FinalMessage, Stop, StopReason, Usage};
use crate::{ChatRequest, EventStream, Provider};
pub use kiln_types::cancel::AbortSignal;

enum Wake {
    Item(Option<Result<Event, crate::ProviderError>>),
    Aborted,
    Deadline,
}

struct Running {
    inner: EventStream,
    abort: Option<AbortSignal>,
    deadline: Option<LocalBoxFuture<'static, ()>>,
    budget: Option<RunBudget>,
    reservation: Option<Reservation>,
    message: FinalMessage,
    prompt_tokens: u64,
    /// Bytes of tool-call arguments streamed so far.
    arguments_bytes: usize,
    /// Some event came back: the provider read the prompt.
    anything_came: bool,
    /// The provider's stop came.
    stopped: bool,
    finished: bool,
}

impl Running {
    /// Books what the turn used as far as Kiln can tell: the provider's count when it gave
    /// one, else an estimate (the prompt's, and a token per 4 bytes of text and tool
    /// arguments that came) — a provider charges for what it produced, said or not.
    ///
    /// Each side is taken on its own: a prompt is never zero tokens, nor is a reply that
    /// came with text, so a side the provider left at zero is estimated and the call
    /// marked so. (llama.cpp sends the Anthropic `message_start`, the one event with
    /// the input count, only with the first decoded token's result; a stream without
    /// it reports the output alone.)
    fn book(&self, reservation: Reservation, message: &FinalMessage) {
        let reported = message.usage;
        let produced = message.text.len() + self.arguments_bytes;
        let input_missing = reported.input_tokens == 0;
        let output_missing = reported.output_tokens == 0 && produced > 0;
        if !input_missing && !output_missing {
            reservation.commit(reported);
            return;
        }
        reservation.commit_estimated(Usage {
            input_tokens: if input_missing {
                self.prompt_tokens
            } else {
                reported.input_tokens
            },
            output_tokens: if output_missing {
                u64::try_from(produced.div_ceil(4)).unwrap_or(u64::MAX)
            } else {
                reported.output_tokens
            },
        });
    }

    /// Kiln ends the turn: what came so far is the message, with this stop.
    fn stop_here(&mut self, stop: Stop) -> Vec<Result<Event, crate::ProviderError>> {
        self.finished = true;
        // The request is dropped with the stream, which cancels it.
        self.inner = stream::empty().boxed_local();
        let event = Event::Stop { stop };
        self.message.absorb(&event);
        if let Some(reservation) = self.reservation.take() {
            // The request was sent: even with nothing back yet, the prompt was read.
            self.book(reservation, &self.message);
        }
        vec![
            Ok(event),
            Ok(Event::Done {
                message: std::mem::take(&mut self.message),
            }),
        ]
    }

    async fn next_batch(&mut self) -> Vec<Result<Event, crate::ProviderError>> {
        let wake = {
            let abort = self.abort.clone();
            let deadline = &mut self.deadline;
            let inner = &mut self.inner;
            // Once the provider's stop came, the turn is over: only its `Done` is left,
            // and an abort or a deadline now must not add a second stop.
            let stopped = self.stopped;
            poll_fn(|cx| {
                if !stopped
                    && let Some(abort) = &abort
                    && abort.poll_aborted(cx).is_ready()
                {
                    return Poll::Ready(Wake::Aborted);
                }
                if !stopped
                    && let Some(timer) = deadline
                    && Pin::new(timer).poll(cx).is_ready()
                {
                    return Poll::Ready(Wake::Deadline);
                }
                inner.poll_next_unpin(cx).map(Wake::Item)
            })
            .await
        };
        match wake {
            Wake::Aborted => self.stop_here(Stop {
                reason: StopReason::Aborted,
                message: Some(format!(
                    "stopped by the person after {} characters of the reply",
                    self.message.text.chars().count()
                )),
            }),
            Wake::Deadline => {
                let stop = self
                    .budget
                    .as_ref()
                    .and_then(|budget| budget.check_deadline().err())
                    .unwrap_or(Stop {
                        reason: StopReason::Deadline,
                        message: Some("the run's deadline has passed".to_owned()),
                    });
                self.stop_here(stop)
            }
            Wake::Item(None) => {
                self.finished = true;
                Vec::new()
            }
            Wake::Item(Some(Err(error))) => {
                self.finished = true;
                // A call that failed before anything came back (refused, unreachable) cost
                // nothing and its hold is released; one that broke mid-reply is booked at
                // what came.
                if let Some(reservation) = self.reservation.take()
                    && self.anything_came
                {
                    self.book(reservation, &self.message);
                }
                vec![Err(error)]
            }
            Wake::Item(Some(Ok(event))) => {
                self.anything_came = true;
                match &event {
                    Event::Done { message } => {
                        self.finished = true;
                        if let Some(reservation) = self.reservation.take() {
                            self.book(reservation, message);
                        }
                    }
                    Event::Stop { .. } => {
                        self.stopped = true;
                        self.message.absorb(&event);
                    }
                    Event::ToolCallDelta { fragment, .. } => {
                        self.arguments_bytes = self.arguments_bytes.saturating_add(fragment.len());
                    }
                    _ => self.message.absorb(&event),
                }
                vec![Ok(event)]
            }
        }
    }
}

/// Streams one turn of `provider` under `budget` (none: unbudgeted) and `abort`.
///
/// A turn the budget refuses yields its `Stop` (`budget`, `deadline` or `turns`, with the
/// budget's sentence) and an empty `Done`, and sends nothing.
pub fn turn(
    provider: &dyn Provider,
    request: ChatRequest,
    budget: Option<RunBudget>,
    abort: Option<AbortSignal>,
) -> EventStream {
    let refused = |stop: Stop| {
        let mut message = FinalMessage::default();
        let event = Event::Stop { stop };
        message.absorb(&event);
        stream::iter([Ok(event), Ok(Event::Done { message })]).boxed_local()
    };
    if abort.as_ref().is_some_and(AbortSignal::is_aborted) {
        return refused(Stop {
            reason: StopReason::Aborted,
            message: Some("stopped by the person before the request was sent".to_owned()),
        });
    }
    let prompt_tokens = estimate_prompt_tokens(&request);
    let reservation = match &budget {
        None => None,
        Some(budget) => match budget.reserve(
            &request.options.model,
            prompt_tokens,
            request.options.max_tokens,
        ) {
            Ok(reservation) => Some(reservation),
            Err(stop) => return refused(stop),
        },
    };
    let deadline = budget.as_ref().and_then(RunBudget::deadline_timer);
    let running = Running {
        inner: provider.stream(request),
        abort,
        deadline,
        budget,
        reservation,
        message: FinalMessage::default(),
        prompt_tokens,
        arguments_bytes: 0,
        anything_came: false,
        stopped: false,
        finished: false,
    };
    stream::unfold(
        (running, Vec::<Result<Event, crate::ProviderError>>::new()),
        |(mut running, mut queued)| async move {
            loop {
                if !queued.is_empty() {
                    let item = queued.remove(0);
                    return Some((item, (running, queued)));
                }
                if running.finished {
                    return None;
                }
                queued = running.next_batch().await;
            }
        },
    )
    .boxed_local()
}

/// Reads a turn's stream to its end: the final message (`Done`'s; `None` when
/// the stream ended without one), or its first error.
///
/// # Errors
///
/// The stream's first error; the rest of the stream is dropped with it.
pub async fn final_message(
    mut stream: EventStream,
) -> Result<Option<FinalMessage>, crate::ProviderError> {
    let mut done = None;
    while let Some(item) = stream.next().await {
        if let Event::Done { message } = item? {
            done = Some(message);
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use futures::executor::block_on;
    use futures::future::LocalBoxFuture;

    use super::*;
    use crate::budget::BudgetLimits;
    use crate::cost::PriceCatalog;
    use crate::error::{ErrorKind, ProviderKind};
    use crate::{ChatOptions, Message, ModelInfo, ProviderError};

    /// A provider whose turn is a fixed list of items: what `turn` does around a stream,
    /// whatever produced it.
    struct Scripted(Vec<Result<Event, ProviderError>>);

    impl Provider for Scripted {
        fn kind(&self) -> ProviderKind {
            ProviderKind::OpenAi
        }
        fn base_url(&self) -> &str {
            "http://127.0.0.1:1/v1"
        }
        fn stream(&self, _request: ChatRequest) -> EventStream {
            stream::iter(self.0.clone()).boxed_local()
        }
        fn models(&self) -> LocalBoxFuture<'static, Result<Vec<ModelInfo>, ProviderError>> {
            Box::pin(async { Ok(Vec::new()) })
        }
    }

    fn request() -> ChatRequest {
        ChatRequest {
            messages: vec![Message::User {
                text: "hello ".repeat(100),
            }],
            tools: Vec::new(),
            options: ChatOptions::new("gpt-4o"),
        }
    }

    fn budget() -> RunBudget {
        RunBudget::new(
            BudgetLimits {
                max_usd: Some(10.0),
                ..BudgetLimits::default()
            },
            Rc::new(PriceCatalog::builtin()),
            Rc::new(kiln_http::FakeClock::new()),
        )
    }

    type Item = Result<Event, ProviderError>;

    fn text(text: &str) -> Item {
        Ok(Event::TextDelta { text: text.into() })
    }

    fn stop(reason: StopReason) -> Result<Event, ProviderError> {
        Ok(Event::Stop {
            stop: Stop {
                reason,
                message: None,
            },
        })
    }

    fn done(usage: Usage) -> Result<Event, ProviderError> {
        Ok(Event::Done {
            message: FinalMessage {
                text: "x".repeat(400),
                usage,
                ..FinalMessage::default()
            },
        })
    }

    fn broken() -> Result<Event, ProviderError> {
        Err(ProviderError {
            kind: ErrorKind::Stream,
            provider: ProviderKind::OpenAi,
            url: String::new(),
            model: None,
            status: None,
            message: "cut".into(),
            hint: None,
        })
    }

    fn run(items: Vec<Result<Event, ProviderError>>, budget: &RunBudget) -> Vec<String> {
        let provider = Scripted(items);
        block_on(
            turn(&provider, request(), Some(budget.clone()), None)
                .map(|item| match item {
                    Ok(event) => serde_json::to_value(&event)
                        .ok()
                        .and_then(|value| value["type"].as_str().map(str::to_owned))
                        .unwrap_or_default(),
                    Err(error) => format!("error: {}", error.message),
                })
                .collect(),
        )
    }

    #[test]
    fn what_a_turn_books() {
        let reported = Usage {
            input_tokens: 1000,
            output_tokens: 100,
        };
        let cases: Vec<(&str, Vec<Item>, bool)> = vec![
            (
                "usage reported",
                vec![text("hi"), stop(StopReason::EndTurn), done(reported)],
                true,
            ),
            // A server that ignores include_usage: the turn is booked at an estimate, not $0.
            (
                "usage missing",
                vec![
                    text("hi"),
                    stop(StopReason::EndTurn),
                    done(Usage::default()),
                ],
                true,
            ),
            ("broken mid-reply", vec![text("hi"), broken()], true),
            ("refused before anything came", vec![broken()], false),
        ];
        for (name, items, charged) in cases {
            let budget = budget();
            run(items, &budget);
            let spend = budget.spend();
            assert_eq!(spend.spent_usd > 0.0, charged, "{name}: {spend:?}");
            assert_eq!(spend.held_usd, 0.0, "{name}: nothing stays held");
        }
        // Only the output reported: the input is the prompt's estimate, the output the
        // provider's, and the call says it was estimated.
        let shared = budget();
        let output_only = Usage {
            input_tokens: 0,
            output_tokens: 7,
        };
        run(vec![stop(StopReason::EndTurn), done(output_only)], &shared);
        let calls = shared.spend().calls;
        assert_eq!(calls.len(), 1);
        assert!(calls[0].estimated, "{calls:?}");
        assert!(calls[0].usage.input_tokens > 0, "{calls:?}");
        assert_eq!(calls[0].usage.output_tokens, 7);

        let budget = budget();
        run(vec![stop(StopReason::EndTurn), done(reported)], &budget);
        assert!(!budget.spend().calls[0].estimated);
        let exact = PriceCatalog::builtin()
            .price("gpt-4o")
            .map(|price| price.cost_usd(reported));
        assert_eq!(Some(budget.spend().spent_usd), exact);
    }

    #[test]
    fn an_abort_after_the_providers_stop_adds_no_second_stop() {
        let abort = AbortSignal::new();
        let provider = Scripted(vec![
            text("hi"),
            stop(StopReason::EndTurn),
            done(Usage::default()),
        ]);
        let mut stream = turn(&provider, request(), None, Some(abort.clone()));
        let mut types = Vec::new();
        block_on(async {
            while let Some(Ok(event)) = stream.next().await {
                if matches!(event, Event::Stop { .. }) {
                    // A listener that aborts on seeing the stop, as a page might.
                    abort.abort();
                }
                types.push(event);
            }
        });
        let stops: Vec<_> = types
            .iter()
            .filter_map(|event| match event {
                Event::Stop { stop } => Some(stop.reason.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(stops, vec![StopReason::EndTurn]);
        assert!(matches!(types.last(), Some(Event::Done { .. })));
    }

    #[test]
    fn an_abort_before_the_request_sends_nothing_and_is_not_a_turn() {
        let abort = AbortSignal::new();
        abort.abort();
        let budget = budget();
        let provider = Scripted(vec![
            text("hi"),
            stop(StopReason::EndTurn),
            done(Usage::default()),
        ]);
        let events = block_on(
            turn(&provider, request(), Some(budget.clone()), Some(abort)).collect::<Vec<_>>(),
        );
        assert_eq!(events.len(), 2, "{events:?}");
        assert_eq!(
            budget.spend().turns,
            0,
            "aborted before it was sent: not a turn"
        );
    }
}

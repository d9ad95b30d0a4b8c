//! The platform-independent half of a streamed body: the idle timeout, the size cap, and
//! ending after the first error, applied alike to the chunks either platform reads.

use futures::StreamExt as _;
use futures::future::{Either, select};
use futures::stream;

use crate::{BodyStream, HttpError, sleep};

/// What [`guard`] enforces over one body.
pub(crate) struct BodyLimits {
    pub(crate) url: String,
    pub(crate) idle_timeout_ms: u64,
    pub(crate) max_body_bytes: usize,
}

/// `chunks` as the caller sees them: each next chunk raced against `idle_timeout_ms` (counted
/// from when the caller asks for it), the running total against `max_body_bytes`, and nothing
/// after the first error. Ending drops `chunks`, which is how each platform learns to stop
/// reading.
pub(crate) fn guard(chunks: BodyStream, limits: BodyLimits) -> BodyStream {
    let state = Guarded {
        chunks,
        limits,
        received: 0,
    };
    stream::unfold(Some(state), |state| async move {
        let mut state = state?;
        let next = match select(state.chunks.next(), sleep(state.limits.idle_timeout_ms)).await {
            Either::Left((next, _)) => Some(next),
            Either::Right(((), _)) => None,
        };
        match next {
            None => {
                let stalled = HttpError::Stalled {
                    url: state.limits.url,
                    idle_ms: state.limits.idle_timeout_ms,
                };
                Some((Err(stalled), None))
            }
            Some(None) => None,
            Some(Some(Err(error))) => Some((Err(error), None)),
            Some(Some(Ok(chunk))) => {
                state.received = state.received.saturating_add(chunk.len());
                if state.received > state.limits.max_body_bytes {
                    let too_large = HttpError::TooLarge {
                        url: state.limits.url,
                        limit: state.limits.max_body_bytes,
                    };
                    Some((Err(too_large), None))
                } else {
                    Some((Ok(chunk), Some(state)))
                }
            }
        }
    })
    .boxed_local()
}

struct Guarded {
    chunks: BodyStream,
    limits: BodyLimits,
    received: usize,
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use futures::executor::block_on;

    use super::*;

    const URL: &str = "http://127.0.0.1:1/stream";

    fn limits(idle_timeout_ms: u64, max_body_bytes: usize) -> BodyLimits {
        BodyLimits {
            url: URL.to_owned(),
            idle_timeout_ms,
            max_body_bytes,
        }
    }

    /// What the caller sees, one line per item: `ok <chunk>` or `err <message>`.
    fn seen(chunks: BodyStream, limits: BodyLimits) -> Vec<String> {
        block_on(guard(chunks, limits).collect::<Vec<_>>())
            .into_iter()
            .map(|item| match item {
                Ok(chunk) => format!("ok {}", String::from_utf8_lossy(&chunk)),
                Err(error) => format!("err {error}"),
            })
            .collect()
    }

    fn chunks(items: &[Result<&str, &str>]) -> BodyStream {
        let items: Vec<Result<Vec<u8>, HttpError>> = items
            .iter()
            .map(|item| match item {
                Ok(chunk) => Ok(chunk.as_bytes().to_vec()),
                Err(message) => Err(HttpError::Body {
                    url: URL.to_owned(),
                    message: (*message).to_owned(),
                }),
            })
            .collect();
        stream::iter(items).boxed_local()
    }

    #[test]
    fn the_cap_counts_the_running_total() {
        let cases: [(usize, &[&str]); 4] = [
            (6, &["ok abc", "ok def"]),
            (100, &["ok abc", "ok def"]),
            (
                5,
                &[
                    "ok abc",
                    "err the response body from `http://127.0.0.1:1/stream` is longer than 5 bytes",
                ],
            ),
            (
                2,
                &["err the response body from `http://127.0.0.1:1/stream` is longer than 2 bytes"],
            ),
        ];
        for (max_body_bytes, expected) in cases {
            let got = seen(
                chunks(&[Ok("abc"), Ok("def")]),
                limits(5_000, max_body_bytes),
            );
            assert_eq!(got, expected, "cap {max_body_bytes}");
        }
    }

    #[test]
    fn nothing_comes_after_the_first_error() {
        let got = seen(
            chunks(&[Ok("abc"), Err("connection reset"), Ok("def")]),
            limits(5_000, 100),
        );
        assert_eq!(
            got,
            [
                "ok abc",
                "err reading the response body from `http://127.0.0.1:1/stream` failed: connection reset",
            ]
        );
    }

    #[test]
    fn a_chunk_that_does_not_come_is_a_stall() {
        let silent_after_one = chunks(&[Ok("abc")]).chain(stream::pending()).boxed_local();
        let got = seen(silent_after_one, limits(50, 100));
        assert_eq!(
            got,
            [
                "ok abc",
                "err the response from `http://127.0.0.1:1/stream` stalled: no data for 50 ms",
            ]
        );
    }
}

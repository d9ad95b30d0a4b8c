//! Wall-clock time in milliseconds since the epoch, for `created` fields.

/// Milliseconds since 1970-01-01 UTC: the one clock's ([`kiln_clock::epoch_ms`]).
#[must_use]
pub fn epoch_ms() -> u64 {
    kiln_clock::epoch_ms()
}

/// Milliseconds since the epoch, strictly increasing within this thread:
/// ids made from it sort in the order they were made, even within one
/// millisecond.
#[must_use]
pub fn unique_ms() -> u64 {
    thread_local! {
        static LAST: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }
    LAST.with(|last| {
        let now = epoch_ms().max(last.get() + 1);
        last.set(now);
        now
    })
}

//! Wall-clock time in milliseconds since the epoch, for `created` fields.

/// Milliseconds since 1970-01-01 UTC.
#[must_use]
pub fn epoch_ms() -> u64 {
    #[cfg(target_arch = "wasm32")]
    {
        js_sys::Date::now() as u64
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_millis() as u64)
    }
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

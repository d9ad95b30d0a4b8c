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

/// A short random suffix for ids made in the same millisecond.
#[must_use]
pub fn random_suffix() -> String {
    #[cfg(target_arch = "wasm32")]
    {
        format!(
            "{:08x}",
            (js_sys::Math::random() * f64::from(u32::MAX)) as u32
        )
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        use std::hash::{BuildHasher, Hasher};
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(epoch_ms());
        hasher.write_u32(std::process::id());
        format!("{:08x}", hasher.finish() as u32)
    }
}

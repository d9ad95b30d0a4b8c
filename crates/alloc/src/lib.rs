//! A global allocator with a byte budget.
//!
//! Boa allocates without asking anyone, so a guest that builds values without
//! bound would take the worker (or the CLI process) down with the platform's
//! own out-of-memory failure. [`Budgeted`] wraps the system allocator and
//! counts the bytes in use; once an allocation would pass the limit set with
//! [`set_limit`], it calls the hook set with [`set_exhausted_hook`] (once, with
//! the limit lifted so that the hook may allocate) and then refuses the
//! allocation, which aborts the program: the hook is the last thing that runs.
//! The sandbox worker's hook posts the `budget_exhausted:memory` stop to its
//! host, which replaces the worker; the CLI's hook prints the result and exits.
//!
//! This is the only crate of the workspace with `unsafe` code: `GlobalAlloc` is
//! an unsafe trait. Every call delegates to [`System`] with the caller's own
//! pointer and layout.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

static IN_USE: AtomicUsize = AtomicUsize::new(0);
static LIMIT: AtomicUsize = AtomicUsize::new(usize::MAX);
static EXHAUSTED: AtomicBool = AtomicBool::new(false);
static HOOK: OnceLock<fn(usize)> = OnceLock::new();

/// The system allocator, counting bytes in use against a limit.
pub struct Budgeted;

/// Sets the most bytes that may be in use from now on (`usize::MAX`: no limit).
pub fn set_limit(bytes: usize) {
    LIMIT.store(bytes, Ordering::SeqCst);
}

/// The limit in force now.
#[must_use]
pub fn limit() -> usize {
    LIMIT.load(Ordering::SeqCst)
}

/// Bytes in use now.
#[must_use]
pub fn in_use() -> usize {
    IN_USE.load(Ordering::SeqCst)
}

/// Sets what runs when an allocation would pass the limit, with the limit that
/// was passed. It runs at most once per process, on the allocating thread,
/// with no limit in force; when it returns the limit is in force again and the
/// allocation is refused (which aborts the program, unless the allocation was
/// fallible). Only the first hook set counts.
pub fn set_exhausted_hook(hook: fn(usize)) {
    let _ = HOOK.set(hook);
}

/// Counts `size` more bytes in use, unless that passes the limit.
fn reserve(size: usize) -> bool {
    let before = IN_USE.fetch_add(size, Ordering::SeqCst);
    let limit = LIMIT.load(Ordering::SeqCst);
    if before.saturating_add(size) <= limit {
        return true;
    }
    IN_USE.fetch_sub(size, Ordering::SeqCst);
    if !EXHAUSTED.swap(true, Ordering::SeqCst) {
        // The hook may allocate: lift the limit while it runs, then put it
        // back. A refusal the program survives (Boa grows some arrays with
        // `try_reserve`, and answers a RangeError) must not leave it without
        // a budget for good.
        LIMIT.store(usize::MAX, Ordering::SeqCst);
        if let Some(hook) = HOOK.get() {
            hook(limit);
        }
        let _ = LIMIT.compare_exchange(usize::MAX, limit, Ordering::SeqCst, Ordering::SeqCst);
    }
    false
}

fn release(size: usize) {
    IN_USE.fetch_sub(size, Ordering::SeqCst);
}

// SAFETY: every method delegates to `System` with the pointer and layout it was
// given, and only adds bookkeeping: a refused allocation returns null, which
// `GlobalAlloc` allows.
unsafe impl GlobalAlloc for Budgeted {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !reserve(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller upholds `alloc`'s contract for `layout`.
        let pointer = unsafe { System.alloc(layout) };
        if pointer.is_null() {
            release(layout.size());
        }
        pointer
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !reserve(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller upholds `alloc_zeroed`'s contract for `layout`.
        let pointer = unsafe { System.alloc_zeroed(layout) };
        if pointer.is_null() {
            release(layout.size());
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // SAFETY: `pointer` came from this allocator (so from `System`) with `layout`.
        unsafe { System.dealloc(pointer, layout) };
        release(layout.size());
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old_size = layout.size();
        if new_size > old_size && !reserve(new_size - old_size) {
            return std::ptr::null_mut();
        }
        // SAFETY: `pointer` came from this allocator with `layout`, and the
        // caller upholds `realloc`'s contract for `new_size`.
        let moved = unsafe { System.realloc(pointer, layout, new_size) };
        if moved.is_null() {
            if new_size > old_size {
                release(new_size - old_size);
            }
        } else if new_size < old_size {
            release(old_size - new_size);
        }
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_refuses_past_the_limit() {
        let allocator = Budgeted;
        let layout = Layout::from_size_align(1024, 8).unwrap_or(Layout::new::<u8>());
        let before = in_use();
        // SAFETY: a valid non-zero layout; the pointer is freed with it below.
        let pointer = unsafe { allocator.alloc(layout) };
        assert!(!pointer.is_null());
        assert_eq!(in_use(), before + 1024);
        let limit = in_use() + 512;
        set_limit(limit);
        // SAFETY: as above; a refused allocation is null and needs no free.
        let refused = unsafe { allocator.alloc(layout) };
        assert!(refused.is_null());
        // The limit is in force again after the hook: a second try is refused too.
        let kept = LIMIT.load(Ordering::SeqCst);
        // SAFETY: as above.
        let again = unsafe { allocator.alloc(layout) };
        set_limit(usize::MAX);
        assert_eq!(kept, limit);
        assert!(
            again.is_null(),
            "the budget was lifted for good after the first refusal"
        );
        // SAFETY: `pointer` came from `alloc` with `layout`.
        unsafe { allocator.dealloc(pointer, layout) };
        assert_eq!(in_use(), before);
    }
}

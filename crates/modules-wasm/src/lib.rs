//! `kiln-modules` for the browser: the sandbox worker instantiates this wasm
//! (`pkg/kiln_modules.js`) before the first run whose program imports
//! `kiln:html`, `kiln:markdown`, `kiln:diff` or `kiln:zip`, and the sandbox's
//! exports of those modules call [`call`] with a byte frame. Its own wasm so
//! that the sandbox worker, which every program needs, does not carry their
//! code (about 0.47 MB gzipped).

use std::sync::atomic::{AtomicBool, Ordering};

use wasm_bindgen::prelude::wasm_bindgen;

/// The library's heap is held to what the run may still allocate.
#[global_allocator]
static ALLOCATOR: kiln_alloc::Budgeted = kiln_alloc::Budgeted;

/// Set when an allocation passed the budget, just before the instance aborts.
static EXHAUSTED: AtomicBool = AtomicBool::new(false);

fn exhausted_hook(_limit: usize) {
    EXHAUSTED.store(true, Ordering::SeqCst);
}

/// Runs the call in `frame` (`kiln_types::library::LibraryCall`'s frame)
/// with at most `room` more bytes of heap, and answers its reply's frame.
/// Passing `room` aborts the instance (a trap the caller sees as an
/// exception); [`exhausted`] then says why.
#[wasm_bindgen]
pub fn call(frame: &[u8], room: usize) -> Vec<u8> {
    kiln_alloc::set_exhausted_hook(exhausted_hook);
    kiln_alloc::set_limit(kiln_alloc::in_use().saturating_add(room));
    let reply = kiln_modules::call_frame(frame);
    kiln_alloc::set_limit(usize::MAX);
    reply
}

/// Whether the last call ran out of the run's memory budget.
#[wasm_bindgen]
pub fn exhausted() -> bool {
    EXHAUSTED.load(Ordering::SeqCst)
}

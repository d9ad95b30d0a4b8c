//! The contract suite on the native twins.

use std::rc::Rc;

use futures::executor::block_on;
use kiln_store::contract;
use kiln_store::native::{MemoryBackend, MemoryTree};

#[test]
fn memory_backend_keeps_the_contract() {
    block_on(contract::backend_suite(
        MemoryBackend::new(),
        MemoryBackend::new(),
    ));
}

#[test]
fn memory_tree_keeps_the_contract() {
    block_on(contract::tree_suite(MemoryTree::new() as Rc<_>));
}

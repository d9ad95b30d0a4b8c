//! Links the sandbox worker's wasm with an 8 MiB stack instead of the
//! default 1 MiB: the engine recurses on it, the parser once per level of a
//! program's nesting (about 17 KiB a level here), and the sandbox bounds that
//! depth (`kiln_sandbox::source_depth::MAX_SOURCE_DEPTH`,
//! `kiln_sandbox::MAX_NATIVE_DEPTH`) to fit inside this stack with room over.
//! The stack sits below the heap, so overflowing it traps instead of writing
//! over memory; the memory budget counts the heap only.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32") {
        println!("cargo:rustc-link-arg-cdylib=-zstack-size={}", 8 << 20);
    }
    println!("cargo:rerun-if-changed=build.rs");
}

//! Links the runtime worker's wasm with an 8 MiB stack instead of the
//! default 1 MiB: the agent layer parses a code node's body with Boa's
//! parser (`kiln_jscheck`) before it runs, and the parser recurses once per
//! level of nesting (about 17 KiB a level), which `kiln_jscheck::source_depth`
//! bounds at 128 levels: more than 1 MiB, well inside 8. The same figure as
//! the sandbox worker's (`crates/sandbox-worker/build.rs`).

fn main() {
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32") {
        println!("cargo:rustc-link-arg-cdylib=-zstack-size={}", 8 << 20);
    }
    println!("cargo:rerun-if-changed=build.rs");
}

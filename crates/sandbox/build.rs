//! Gives the sandbox's wasm tests the stack the sandbox worker links with
//! (8 MiB, see `crates/sandbox-worker/build.rs`), so the depth bounds are
//! tested against the stack they are chosen for.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32") {
        println!("cargo:rustc-link-arg-tests=-zstack-size={}", 8 << 20);
    }
    println!("cargo:rerun-if-changed=build.rs");
}

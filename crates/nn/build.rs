//! Link libtorch the way crates/cli/build.rs does (see the comment there and
//! docs/architecture.md, "libtorch"): the test binaries of this crate (and of train, engine and
//! pipeline, whose manifests point here) link tch and must start under `cargo test` without
//! LD_LIBRARY_PATH and with the CUDA backend kept.

use std::env;

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    let lib = env::var("DEP_TCH_LIBTORCH_LIB")
        .expect("DEP_TCH_LIBTORCH_LIB not set: torch-sys must be a direct dependency of this crate");
    println!("cargo:rustc-link-arg=-Wl,-rpath={lib}");
    println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
    println!("cargo:rustc-link-arg=-ltorch");
}

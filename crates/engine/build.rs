//! Link arguments for this crate's test binaries, which link libtorch through koma-nn: the same
//! treatment as crates/nn/build.rs (see crates/cli/build.rs for why), so `cargo test -p
//! koma-engine` starts without LD_LIBRARY_PATH and keeps CUDA.

use std::env;

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    let lib = env::var("DEP_TCH_LIBTORCH_LIB")
        .expect("DEP_TCH_LIBTORCH_LIB not set: torch-sys must be a direct dependency of this crate");
    println!("cargo:rustc-link-arg=-Wl,-rpath={lib}");
    println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
    println!("cargo:rustc-link-arg=-ltorch");
}

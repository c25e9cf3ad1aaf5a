//! Link libtorch so that CUDA survives linking and the binary finds libtorch at run time.
//!
//! torch-sys (which has `links = "tch"`) tells its dependents where the libtorch it compiled
//! against lives, as DEP_TCH_LIBTORCH_LIB. Without the flags below, the linker's --as-needed
//! drops libtorch_cuda.so (nothing references its symbols directly: it registers the CUDA backend
//! from static initialisers), so CUDA is silently unavailable, and the binary would need
//! LD_LIBRARY_PATH to start at all. This is what tch-rs documents for that problem, minus
//! `--copy-dt-needed-entries`, which rust-lld (rust's default linker here) rejects; libtorch.so's
//! own DT_NEEDED entries pull in libtorch_cuda.so anyway.
//!
//! `rustc-link-arg` (not `-bins`) so that this crate's test binaries get the same treatment: they
//! link libtorch too and must start under `cargo test` without LD_LIBRARY_PATH. Any other crate
//! whose tests or binaries link tch needs this build script as well.
//!
//! Default build: RUNPATH = the build machine's libtorch dir, so `koma` runs here as is.
//! `portable` feature (scripts/build-portable): RUNPATH = $ORIGIN/lib only; libtorch then comes
//! from LD_LIBRARY_PATH (searched before RUNPATH) or from a `lib/` next to the binary.

use std::env;

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    let lib = env::var("DEP_TCH_LIBTORCH_LIB")
        .expect("DEP_TCH_LIBTORCH_LIB not set: torch-sys must be a direct dependency of this crate");
    let portable = env::var_os("CARGO_FEATURE_PORTABLE").is_some();

    let rpath = if portable { "$ORIGIN/lib".to_owned() } else { lib.clone() };
    println!("cargo:rustc-link-arg=-Wl,-rpath={rpath}");
    println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
    println!("cargo:rustc-link-arg=-ltorch");
    // Shown by `koma info`.
    println!("cargo:rustc-env=KOMA_LIBTORCH_LIB={lib}");
}

//! Malloc tuning for training: the activations of every step are freed and allocated again.

/// Keeps glibc's malloc from handing the activations' memory back to the kernel after every step.
///
/// A training step allocates and frees hundreds of MB of activations. glibc's default adapts its
/// mmap threshold to the largest block freed and trims the top of the heap once more than twice
/// that is free, so in koma's process much of that memory went back to the kernel every step and
/// the next step faulted it back in (docs/training.md, "Benchmark", has the measured cost). So,
/// once per process, the first trainer sets `M_MMAP_THRESHOLD` to 32 MiB (glibc's maximum for the
/// dynamic threshold; larger blocks are still mapped and unmapped) and `M_TRIM_THRESHOLD` to
/// 1 GiB: freed memory stays in the heap for the next step. Process-wide, glibc only;
/// `KOMA_MALLOC_DEFAULTS=1` in the environment leaves malloc alone (to measure it).
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            if std::env::var_os("KOMA_MALLOC_DEFAULTS").is_some_and(|v| v == "1") {
                return;
            }
            extern "C" {
                fn mallopt(param: std::os::raw::c_int, value: std::os::raw::c_int) -> std::os::raw::c_int;
            }
            const M_TRIM_THRESHOLD: std::os::raw::c_int = -1;
            const M_MMAP_THRESHOLD: std::os::raw::c_int = -3;
            // SAFETY: mallopt only changes glibc's allocation policy; it is thread-safe.
            unsafe {
                mallopt(M_MMAP_THRESHOLD, 32 << 20);
                mallopt(M_TRIM_THRESHOLD, 1 << 30);
            }
        });
    }
}

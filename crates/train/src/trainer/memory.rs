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

/// A planted leak, for the soak's own test (docs/reliability.md, "Soak"):
/// `KOMA_LEAK_MIB_PER_STEP=N` keeps N MiB, written to, for every step trained, so that a test can
/// show the soak failing on a real leak of the trainer. Unset (always, outside that test): nothing
/// but one check of a cached value per step.
pub(crate) fn planted_leak() {
    static MIB: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    static KEPT: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());
    let mib = *MIB.get_or_init(|| {
        let mib = std::env::var("KOMA_LEAK_MIB_PER_STEP").ok().and_then(|v| v.trim().parse().ok()).unwrap_or(0);
        if mib > 0 {
            tracing::warn!("KOMA_LEAK_MIB_PER_STEP={mib}: the trainer keeps {mib} MiB for every step (a planted leak)");
        }
        mib
    });
    if mib > 0 {
        // Filled, so the pages are resident and not just reserved.
        KEPT.lock().unwrap_or_else(|e| e.into_inner()).push(vec![1u8; mib << 20]);
    }
}

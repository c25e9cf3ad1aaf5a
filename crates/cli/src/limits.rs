//! Process limits set at start-up.

/// Raises the soft limit on open files to the hard limit. The trainer keeps every shard of its
/// replay window open (a GPU config's window spans about a thousand shards), and many systems
/// start processes with a soft limit of 1024. Failing to raise it is not an error: the limit
/// stays as it was, and a shard that cannot be opened is skipped with a warning naming it.
pub fn raise_open_file_limit() {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed by pointer.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                tracing::debug!("could not raise the open-file limit to {}", limit.rlim_max);
            }
        }
    }
}

//! This machine's name, for file names that must be unique across the hosts sharing a run
//! directory (shards, the trainer's lease). `KOMA_HOST` overrides it, so that tests (and
//! containers that all share one hostname) can pose as different hosts.

/// The host name: `KOMA_HOST`, else the kernel's host name, else `localhost`; reduced to ASCII
/// letters, digits, `-` and `.` so that it can go into a file name.
pub fn host_name() -> String {
    let raw = std::env::var("KOMA_HOST")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .unwrap_or_default();
    let name: String =
        raw.trim().chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '-' }).collect();
    if name.is_empty() {
        "localhost".to_string()
    } else {
        name
    }
}

/// `KIND-HOST-UNIXSECONDS-PID`: a shard-name prefix no other process writes, on this host or
/// another sharing the directory, now or after a restart.
pub fn unique_prefix(kind: &str) -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    format!("{kind}-{}-{secs}-{}", host_name(), std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefix_names_kind_host_time_and_process() {
        let p = unique_prefix("selfplay");
        let host = host_name();
        assert!(p.starts_with(&format!("selfplay-{host}-")), "{p}");
        assert!(p.ends_with(&format!("-{}", std::process::id())), "{p}");
        assert!(host.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.'), "{host}");
    }
}

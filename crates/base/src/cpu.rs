//! The cores this process may use, and how many of them other work is using right now: an engine
//! that shares a machine with its opponent (a tournament running several games at once) sizes its
//! libtorch thread pool from this, because threads beyond the free cores make every forward pass
//! wait for descheduled workers (a 5 ms batch took 800 ms with two engines of two threads each on
//! two cores).

use std::time::Duration;

/// Cores this process may run on (its CPU affinity and cgroup quota), at least 1.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Threads ready to run on the machine right now besides the calling one (the kernel's run queue:
/// the fourth field of `/proc/loadavg`, `running/total`), the median of three looks 0.3 ms apart
/// so that a thread waking for a moment is not counted. `None` off Linux. The count is the
/// machine's (a container sees its host's), so it can only overstate what competes with us.
pub fn running_elsewhere() -> Option<usize> {
    let mut looks = Vec::with_capacity(3);
    for i in 0..3 {
        if i > 0 {
            std::thread::sleep(Duration::from_micros(300));
        }
        looks.push(runnable(&std::fs::read_to_string("/proc/loadavg").ok()?)?.saturating_sub(1));
    }
    looks.sort_unstable();
    Some(looks[1])
}

/// Cores not taken by other work: [`cores`] less our part of [`running_elsewhere`], at least 1.
/// A process confined to some of the machine's CPUs (an affinity mask, a container's quota)
/// counts the others' threads in proportion: they spread over every online CPU.
pub fn free_cores() -> usize {
    let cores = cores();
    let elsewhere = running_elsewhere().unwrap_or(0);
    let online = online_cpus().unwrap_or(cores).max(cores);
    let ours = (elsewhere * cores).div_ceil(online);
    cores.saturating_sub(ours).clamp(1, cores)
}

/// CPUs online on the machine (`/sys/devices/system/cpu/online`, e.g. `0-7,16-23`).
fn online_cpus() -> Option<usize> {
    cpu_list_len(std::fs::read_to_string("/sys/devices/system/cpu/online").ok()?.trim())
}

/// The number of CPUs in a kernel CPU list (`0-3,8,10-11` → 7).
fn cpu_list_len(list: &str) -> Option<usize> {
    list.split(',')
        .map(|part| match part.split_once('-') {
            Some((a, b)) => Some(b.parse::<usize>().ok()?.checked_sub(a.parse().ok()?)? + 1),
            None => part.parse::<usize>().ok().map(|_| 1),
        })
        .sum()
}

/// The runnable count of a `/proc/loadavg` line (`0.52 0.58 0.59 3/1123 12345` → 3).
fn runnable(loadavg: &str) -> Option<usize> {
    loadavg.split_whitespace().nth(3)?.split_once('/')?.0.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_queue_is_read_from_loadavg() {
        assert_eq!(runnable("0.52 0.58 0.59 3/1123 12345\n"), Some(3));
        assert_eq!(runnable("0.00 0.01 0.05 1/92 7"), Some(1));
        assert_eq!(runnable("0.52 0.58 0.59"), None);
        assert_eq!(runnable("0.52 0.58 0.59 x/12 1"), None);
    }

    #[test]
    fn cpu_lists_are_counted() {
        assert_eq!(cpu_list_len("0-1"), Some(2));
        assert_eq!(cpu_list_len("0-3,8,10-11"), Some(7));
        assert_eq!(cpu_list_len("0"), Some(1));
        assert_eq!(cpu_list_len("3-1"), None);
        assert_eq!(cpu_list_len(""), None);
    }

    #[test]
    fn free_cores_stay_within_what_the_process_may_use() {
        let free = free_cores();
        assert!((1..=cores()).contains(&free), "{free} of {}", cores());
        if cfg!(target_os = "linux") {
            assert!(running_elsewhere().is_some());
        }
    }
}

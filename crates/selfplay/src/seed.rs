//! Where self-play's randomness starts. Every self-play process of a run (another host, each task
//! of a Slurm array, a resumed run) must draw its own openings, coin flips and Gumbel noise: with
//! the same model, processes that share a seed replay each other's games. Unless a seed is given,
//! a process's seed mixes its host, process id, Slurm job and task, start time and the operating
//! system's randomness. The seed used goes into every shard (`selfplay_seed`) and the log, so a
//! process can be replayed by giving it explicitly (`[selfplay] seed`, `koma selfplay --seed`).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

/// The shard attribute that records the seed a self-play process used.
pub const SEED_ATTRIBUTE: &str = "selfplay_seed";

/// The Slurm variables that tell the tasks of one job (and of one array) apart.
const SLURM_TASK_VARIABLES: [&str; 5] =
    ["SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_PROCID", "SLURM_LOCALID"];

/// A seed no other self-play process draws: a different one on every call, in every process.
pub fn fresh_seed() -> u64 {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    // std's RandomState is keyed from the operating system's randomness.
    let mut hasher = RandomState::new().build_hasher();
    koma_base::host::host_name().hash(&mut hasher);
    std::process::id().hash(&mut hasher);
    for variable in SLURM_TASK_VARIABLES {
        std::env::var(variable).ok().hash(&mut hasher);
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
        .hash(&mut hasher);
    CALLS.fetch_add(1, Ordering::Relaxed).hash(&mut hasher);
    hasher.finish()
}

/// The seed of worker `worker` of a process seeded with `seed`: far apart for neighbouring seeds
/// and workers (seed·K + w made seed 1's worker 1 a neighbour of seed 1's worker 0's stream).
pub fn worker_seed(seed: u64, worker: usize) -> u64 {
    splitmix64(seed ^ splitmix64(worker as u64 + 1))
}

/// SplitMix64's output function: a bijection of u64 that scatters neighbouring inputs.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_seeds_differ_and_workers_get_distinct_streams() {
        let seeds: std::collections::HashSet<u64> = (0..1000).map(|_| fresh_seed()).collect();
        assert_eq!(seeds.len(), 1000);
        let workers: std::collections::HashSet<u64> =
            (0..64u64).flat_map(|s| (0..16).map(move |w| worker_seed(s, w))).collect();
        assert_eq!(workers.len(), 64 * 16);
        assert_eq!(worker_seed(7, 3), worker_seed(7, 3));
    }
}

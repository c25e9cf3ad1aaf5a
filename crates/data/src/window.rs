//! The replay window: the newest samples across the shards of a directory, sampled uniformly.
//! Only the shards that hold samples of the window are loaded or kept open. It notices new
//! shards on [`ReplayWindow::refresh`]. A shard that fails to open is tried again at later
//! refreshes, after 1, 2, 4, 8 and 16 seconds (a shared filesystem's transient error must not
//! drop a shard for the whole run), and skipped with a warning after the sixth failure. Only a window that is refreshed retries: the trainer
//! following self-play (`--follow`, the pipeline, a cluster run) refreshes; training on a fixed
//! directory opens each shard once.
//!
//! The window keeps its shards on disk (HDF5 point reads through each shard's chunk cache) or
//! decoded in memory ([`WindowStorage`], [`ResidentShard`]); both draw the same samples for the
//! same random numbers from healthy shards. A shard with a chunk that cannot be read is refused
//! when it joins the window in memory (it is read whole), where the window on disk drops it at
//! the first draw that touches the chunk.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use koma_shogi::Move;

use crate::error::{DataError, Result};
use crate::resident::ResidentShard;
use crate::sample::Sample;
use crate::shard::ShardReader;

/// Where the window's shards are read from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WindowStorage {
    /// Each shard read whole when it joins and held decoded in memory (about 66 bytes a sample
    /// plus 4 a policy entry), its file closed: draws are copies from memory.
    #[default]
    Memory,
    /// Shards kept open, samples read on demand through HDF5's chunk caches: about 1.2 MiB and a
    /// file descriptor per shard, and a few thousand samples/s at millions of samples (HDF5 reads
    /// under a global lock, so more cores do not help).
    Disk,
}

/// How many of the samples produced so far the window holds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WindowSize {
    /// KataGo's growing window: c · (1 + β·((N/c)^α − 1)/α) once N > c, all N before.
    pub c: f64,
    pub alpha: f64,
    pub beta: f64,
    /// Upper bound on the window.
    pub max: usize,
}

impl WindowSize {
    /// A fixed window of the newest `n` samples.
    pub fn fixed(n: usize) -> WindowSize {
        WindowSize { c: n as f64, alpha: 1.0, beta: 0.0, max: n }
    }

    pub fn of(&self, total: usize) -> usize {
        let n = total as f64;
        let size = if n <= self.c {
            n
        } else {
            self.c * (1.0 + self.beta * ((n / self.c).powf(self.alpha) - 1.0) / self.alpha)
        };
        (size as usize).min(self.max).min(total)
    }
}

/// Optional down-weighting of samples (accepted with the given probability).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SampleWeights {
    /// Samples with a ply below this are accepted with `early_probability`.
    pub early_plies: u16,
    pub early_probability: f64,
}

impl Default for SampleWeights {
    fn default() -> SampleWeights {
        SampleWeights { early_plies: 0, early_probability: 1.0 }
    }
}

/// A shard of the window, as its storage holds it.
enum Source {
    Disk(ShardReader),
    Memory(ResidentShard),
}

impl Source {
    fn open(path: &Path, storage: WindowStorage) -> Result<Source> {
        Ok(match storage {
            WindowStorage::Disk => Source::Disk(ShardReader::open(path)?),
            WindowStorage::Memory => Source::Memory(ResidentShard::load(path)?),
        })
    }

    fn len(&self) -> usize {
        match self {
            Source::Disk(r) => r.len(),
            Source::Memory(r) => r.len(),
        }
    }

    fn path(&self) -> &Path {
        match self {
            Source::Disk(r) => r.path(),
            Source::Memory(r) => r.path(),
        }
    }

    fn read(&self, indices: &[usize], continuation_plies: Option<usize>) -> Result<Vec<(Sample, Option<Vec<Move>>)>> {
        let without = |samples: Vec<Sample>| samples.into_iter().map(|s| (s, None)).collect();
        match (self, continuation_plies) {
            (Source::Disk(r), Some(plies)) => r.read_with_continuations(indices, plies),
            (Source::Disk(r), None) => r.read(indices).map(without),
            (Source::Memory(r), Some(plies)) => r.read_with_continuations(indices, plies),
            (Source::Memory(r), None) => r.read(indices).map(without),
        }
    }

    /// Heap bytes of decoded samples held (0 on disk).
    fn bytes(&self) -> usize {
        match self {
            Source::Disk(_) => 0,
            Source::Memory(r) => r.bytes(),
        }
    }
}

struct Shard {
    source: Source,
    /// Global index of the shard's first sample.
    start: usize,
}

/// Tries to open a shard before it is given up (the first and five retries).
pub const OPEN_TRIES: u32 = 6;
/// The wait before the first retry; each further one waits twice as long.
const FIRST_RETRY: Duration = Duration::from_secs(1);

/// A shard that failed to open and is tried again.
struct FailedOpen {
    path: PathBuf,
    tries: u32,
    next_try: Instant,
}

/// Shards that did not open: still being retried, and given up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenFailures {
    pub retrying: usize,
    pub given_up: usize,
}

pub struct ReplayWindow {
    dir: PathBuf,
    size: WindowSize,
    storage: WindowStorage,
    weights: SampleWeights,
    shards: Vec<Shard>,
    known: HashSet<PathBuf>,
    total: usize,
    retrying: Vec<FailedOpen>,
    given_up: usize,
    first_retry: Duration,
}

impl ReplayWindow {
    pub fn open(dir: &Path, size: WindowSize, weights: SampleWeights, storage: WindowStorage) -> Result<ReplayWindow> {
        let mut window = ReplayWindow {
            dir: dir.to_path_buf(),
            size,
            storage,
            weights,
            shards: Vec::new(),
            known: HashSet::new(),
            total: 0,
            retrying: Vec::new(),
            given_up: 0,
            first_retry: FIRST_RETRY,
        };
        window.refresh()?;
        Ok(window)
    }

    /// Picks up shards that appeared since the last call (oldest first, by modification time
    /// then name), and retries those that failed to open and are due. Returns how many joined
    /// (their samples counted as produced), including any that are already behind the window and
    /// so never loaded. A retried shard that opens joins as the newest, whatever its age.
    pub fn refresh(&mut self) -> Result<usize> {
        let entries =
            std::fs::read_dir(&self.dir).map_err(|source| DataError::Io { path: self.dir.clone(), source })?;
        let mut new: Vec<(std::time::SystemTime, PathBuf)> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "h5") && !self.known.contains(p))
            .map(|p| (std::fs::metadata(&p).and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH), p))
            .collect();
        new.sort();
        let now = Instant::now();
        let (due, waiting): (Vec<FailedOpen>, Vec<FailedOpen>) =
            std::mem::take(&mut self.retrying).into_iter().partition(|f| f.next_try <= now);
        self.retrying = waiting;
        let tries = due.into_iter().map(|f| (f.path, f.tries));
        // First pass: each new shard's length (opening reads only its policy offsets; the file
        // is closed again), so that the window's start is known before any shard is loaded: a
        // trainer started on a directory of a long run's shards loads the window, not the history.
        let mut opened: Vec<(PathBuf, usize, u32)> = Vec::new();
        for (path, tried) in new.into_iter().map(|(_, p)| (p, 0)).chain(tries) {
            self.known.insert(path.clone());
            match ShardReader::open(&path) {
                Ok(reader) if reader.is_empty() => {}
                Ok(reader) => opened.push((path, reader.len(), tried)),
                Err(e) => self.failed_to_open(path, tried + 1, e),
            }
        }
        // Second pass: a shard that ends before the window's start is counted and never loaded
        // or kept open; the others join. (One that fails now, after its length was read, goes
        // back to the retries; the window's start was reckoned with it, so up to its length of
        // older samples may be missing from the window until later shards move the start past
        // them.)
        let total_after = self.total + opened.iter().map(|(_, len, _)| len).sum::<usize>();
        let first = total_after - self.size.of(total_after);
        let mut added = 0;
        for (path, len, tried) in opened {
            if self.total + len <= first {
                self.total += len;
                added += 1;
                continue;
            }
            match Source::open(&path, self.storage) {
                Ok(source) => {
                    if tried > 0 {
                        tracing::info!("replay window: {} opened at try {}", path.display(), tried + 1);
                    }
                    let len = source.len();
                    self.shards.push(Shard { source, start: self.total });
                    self.total += len;
                    added += 1;
                }
                Err(e) => self.failed_to_open(path, tried + 1, e),
            }
        }
        self.close_shards_behind_the_window();
        Ok(added)
    }

    /// Schedules the next try of a shard that failed its `tries`-th open, or gives it up.
    fn failed_to_open(&mut self, path: PathBuf, tries: u32, error: DataError) {
        if tries >= OPEN_TRIES {
            tracing::warn!(
                "replay window: skipping {}: it failed to open {tries} times; last: {error}",
                path.display()
            );
            self.given_up += 1;
            return;
        }
        let wait = self.first_retry * 2u32.pow(tries - 1);
        tracing::warn!(
            "replay window: cannot open {} (try {tries} of {OPEN_TRIES}; a refresh after {} s tries again): {error}",
            path.display(),
            wait.as_secs_f64()
        );
        self.retrying.push(FailedOpen { path, tries, next_try: Instant::now() + wait });
    }

    /// Sets the wait before the first retry of a failed open (1 s by default), for tests.
    #[doc(hidden)]
    pub fn set_first_retry(&mut self, wait: Duration) {
        self.first_retry = wait;
    }

    /// Shards that failed to open: waiting for a retry, and given up.
    pub fn open_failures(&self) -> OpenFailures {
        OpenFailures { retrying: self.retrying.len(), given_up: self.given_up }
    }

    /// Drops the shards whose samples have all left the window: they are never drawn again, and
    /// a shard held costs its decoded samples (in memory) or a file descriptor and chunk caches
    /// (on disk); a run of days would otherwise run out of memory or descriptors. Global sample
    /// indices stay as they are.
    fn close_shards_behind_the_window(&mut self) {
        let first = self.total - self.len();
        let behind = self.shards.iter().take_while(|s| s.start + s.source.len() <= first).count();
        self.shards.drain(..behind);
    }

    /// Samples produced so far (all shards).
    pub fn total_samples(&self) -> usize {
        self.total
    }

    /// Samples currently in the window.
    pub fn len(&self) -> usize {
        self.size.of(self.total)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Shards open: those that hold samples of the window.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    pub fn storage(&self) -> WindowStorage {
        self.storage
    }

    /// Heap bytes of the decoded samples the window holds in memory (0 for a window on disk).
    pub fn resident_bytes(&self) -> usize {
        self.shards.iter().map(|s| s.source.bytes()).sum()
    }

    /// Draws `count` samples uniformly (with replacement) from the window. `below(n)` must return
    /// a uniform integer in [0, n). A shard that fails to read is dropped with a warning.
    pub fn sample(&mut self, count: usize, below: &mut dyn FnMut(usize) -> usize) -> Result<Vec<Sample>> {
        Ok(self.draw(count, below, None)?.into_iter().map(|(s, _)| s).collect())
    }

    /// [`ReplayWindow::sample`] with each sample's continuation: the game's next `plies` moves
    /// after the sample's move ([`ShardReader::continuations`]). Draws exactly the samples
    /// `sample` draws with the same `below`.
    pub fn sample_with_continuations(
        &mut self,
        count: usize,
        plies: usize,
        below: &mut dyn FnMut(usize) -> usize,
    ) -> Result<Vec<(Sample, Option<Vec<Move>>)>> {
        self.draw(count, below, Some(plies))
    }

    fn draw(
        &mut self,
        count: usize,
        below: &mut dyn FnMut(usize) -> usize,
        continuation_plies: Option<usize>,
    ) -> Result<Vec<(Sample, Option<Vec<Move>>)>> {
        let mut out: Vec<(Sample, Option<Vec<Move>>)> = Vec::with_capacity(count);
        let mut attempts = 0;
        while out.len() < count && !self.is_empty() && !self.shards.is_empty() {
            attempts += 1;
            if attempts > 64 {
                break;
            }
            // The window's first sample, never before the first open shard: dropping a bad shard
            // shifts the indices after it back, over shards already closed.
            let first = (self.total - self.len()).max(self.shards[0].start);
            let span = self.total - first;
            let wanted = count - out.len();
            // Global indices, grouped per shard (the newest shards hold the window).
            let mut picks: Vec<usize> = (0..wanted).map(|_| first + below(span)).collect();
            picks.sort_unstable();
            let mut failed = None;
            let mut k = 0;
            for (s, shard) in self.shards.iter().enumerate() {
                let end = shard.start + shard.source.len();
                let begin = k;
                while k < picks.len() && picks[k] < end {
                    k += 1;
                }
                if begin == k {
                    continue;
                }
                let local: Vec<usize> = picks[begin..k].iter().map(|g| g - shard.start).collect();
                match shard.source.read(&local, continuation_plies) {
                    Ok(samples) => out.extend(samples.into_iter().filter(|(s, _)| self.accept(s, below))),
                    Err(e) => {
                        failed = Some((s, e));
                        break;
                    }
                }
            }
            if let Some((s, e)) = failed {
                tracing::warn!("replay window: dropping {}: {e}", self.shards[s].source.path().display());
                self.drop_shard(s);
            }
        }
        // Shuffle so samples of one shard are not adjacent in the batch.
        for i in (1..out.len()).rev() {
            out.swap(i, below(i + 1));
        }
        out.truncate(count);
        Ok(out)
    }

    fn accept(&self, sample: &Sample, below: &mut dyn FnMut(usize) -> usize) -> bool {
        if sample.ply < self.weights.early_plies {
            (below(1 << 20) as f64) < self.weights.early_probability * (1 << 20) as f64
        } else {
            true
        }
    }

    fn drop_shard(&mut self, index: usize) {
        let removed = self.shards.remove(index).source.len();
        for shard in &mut self.shards[index..] {
            shard.start -= removed;
        }
        self.total -= removed;
    }
}

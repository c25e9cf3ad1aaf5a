//! The durable write: how koma publishes every file that a crash or a full disk must not leave
//! half written (checkpoints, training states, shards, game records, leases, arena and experiment
//! files, imports).
//!
//! The bytes go to a hidden temporary file beside the final one (the same directory, so that the
//! rename is atomic); the temporary is fsynced, renamed over the final name, and the directory is
//! fsynced so that the rename survives a power loss. A reader finds the old file or the new one,
//! never part of one: a failure before the rename leaves the old file as it was and removes the
//! temporary, whichever step failed.
//!
//! [`write`] does it for bytes in memory; [`StagedFile`] for writers that need a path or a file of
//! their own (HDF5, streaming importers).

use std::fmt;
use std::fs::File;
use std::hash::BuildHasher;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// The steps of a durable write, in order; a [`DurableError`] names the one that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Creating the temporary file.
    Create,
    /// Writing the bytes into the temporary file.
    Write,
    /// Fsyncing the temporary file (where a full disk may show first, on file systems that
    /// allocate late).
    SyncFile,
    /// Renaming the temporary over the final name.
    Rename,
    /// Fsyncing the directory, so that the rename survives a power loss (the file is published
    /// by then: a failure here is logged, not returned).
    SyncDir,
}

impl Step {
    /// Every step, in the order a write takes them.
    pub const ALL: [Step; 5] = [Step::Create, Step::Write, Step::SyncFile, Step::Rename, Step::SyncDir];
}

/// A durable write that failed: which file, at which step, and why.
#[derive(Debug)]
pub struct DurableError {
    pub path: PathBuf,
    pub step: Step,
    pub source: std::io::Error,
}

impl fmt::Display for DurableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        match self.step {
            Step::Create => write!(f, "writing {path}: cannot create a temporary file beside it: {}", self.source),
            Step::Write => write!(f, "writing {path}: {}", self.source),
            Step::SyncFile => write!(f, "writing {path}: flushing it to disk failed: {}", self.source),
            Step::Rename => write!(f, "writing {path}: renaming the finished file into place failed: {}", self.source),
            Step::SyncDir => write!(
                f,
                "{path} is written, but flushing its directory failed, so a power loss may undo it: {}",
                self.source
            ),
        }
    }
}

impl std::error::Error for DurableError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

impl From<DurableError> for std::io::Error {
    /// Keeps the kind (a full disk stays `StorageFull`) and the message that names the file.
    fn from(e: DurableError) -> Self {
        std::io::Error::new(e.source.kind(), e)
    }
}

/// Writes `bytes` to `path` durably: the old file or the new one, never part of one.
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), DurableError> {
    stage(path, bytes)?.publish()
}

/// `bytes` written under a temporary name beside `path` and fsynced, ready to be published: for
/// files that must all be on disk before any of them is renamed (a checkpoint's weights and
/// sidecar).
pub fn stage(path: &Path, bytes: &[u8]) -> Result<StagedFile, DurableError> {
    let mut staged = StagedFile::new(path);
    let mut file = staged.create()?;
    staged.check(Step::Write)?;
    file.write_all(bytes).map_err(|e| staged.error(Step::Write, e))?;
    staged.sync_written(&file)?;
    Ok(staged)
}

/// A file being written under a temporary name beside its final path. Write it through
/// [`StagedFile::create`] or at [`StagedFile::temporary`], then [`StagedFile::publish`] it;
/// dropped unpublished (an error, a panic), it removes the temporary and the final path is
/// untouched.
#[derive(Debug)]
pub struct StagedFile {
    target: PathBuf,
    temporary: PathBuf,
    synced: bool,
    published: bool,
}

impl StagedFile {
    /// Stages a write of `target`. The temporary's name is hidden (a leading dot) and ends in
    /// `.tmp-HOST-PID-TOKEN-N`: no reader globbing for the final file's extension picks it up, two
    /// writers of one path never share a temporary, also on two hosts of a shared file system
    /// whose processes have the same PID (TOKEN is random per process), and a temporary left by a
    /// killed writer can be told from a live one's ([`sweep_leftovers`]).
    pub fn new(target: &Path) -> StagedFile {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        static TOKEN: OnceLock<u32> = OnceLock::new();
        // RandomState is seeded from the OS's randomness, once per process.
        let token = *TOKEN.get_or_init(|| std::collections::hash_map::RandomState::new().hash_one(0u8) as u32);
        let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let unique = NEXT.fetch_add(1, Ordering::Relaxed);
        let host = crate::host::host_name();
        let temporary =
            directory_of(target).join(format!(".{name}.tmp-{host}-{}-{token:08x}-{unique}", std::process::id()));
        StagedFile { target: target.to_path_buf(), temporary, synced: false, published: false }
    }

    /// The final path.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Where to write (for writers that open the path themselves, such as HDF5).
    pub fn temporary(&self) -> &Path {
        &self.temporary
    }

    /// Creates the temporary file for writing.
    pub fn create(&self) -> Result<File, DurableError> {
        self.check(Step::Create)?;
        if self.target.file_name().is_none() {
            return Err(self.error(Step::Create, std::io::Error::other("not a file path")));
        }
        File::create(&self.temporary).map_err(|e| self.error(Step::Create, e))
    }

    /// A failure of `step` for this file, in the caller's own writing (for writers that write at
    /// [`StagedFile::temporary`] themselves and map their errors).
    pub fn error(&self, step: Step, source: std::io::Error) -> DurableError {
        DurableError { path: self.target.clone(), step, source }
    }

    /// Fsyncs the temporary through `file`, the handle it was written with: an error the system
    /// reports only at the flush (a full quota on NFS) is seen here, not lost at the close.
    /// Writers that hold the file call it before [`StagedFile::publish`].
    pub fn sync_written(&mut self, file: &File) -> Result<(), DurableError> {
        self.check(Step::SyncFile)?;
        file.sync_all().map_err(|e| self.error(Step::SyncFile, e))?;
        self.synced = true;
        Ok(())
    }

    /// Fsyncs a temporary written by someone who closed it (HDF5) through a new handle; a no-op
    /// after [`StagedFile::sync_written`].
    fn sync(&mut self) -> Result<(), DurableError> {
        if !self.synced {
            self.check(Step::SyncFile)?;
            File::open(&self.temporary).and_then(|f| f.sync_all()).map_err(|e| self.error(Step::SyncFile, e))?;
            self.synced = true;
        }
        Ok(())
    }

    /// Fsyncs the temporary (unless done), renames it over the final path and fsyncs the
    /// directory. A failure before the rename leaves the final path as it was (and no temporary).
    /// Once renamed, the file is published: a directory that cannot be fsynced is a warning (the
    /// rename may not survive a power loss), not an error the caller could take for "not written".
    pub fn publish(mut self) -> Result<(), DurableError> {
        self.sync()?;
        pause_before_rename();
        self.check(Step::Rename)?;
        std::fs::rename(&self.temporary, &self.target).map_err(|e| self.error(Step::Rename, e))?;
        self.published = true;
        if let Err(e) = sync_directory(&self.target) {
            tracing::warn!("{e}");
        }
        Ok(())
    }

    /// Flushes a buffered writer of the temporary, fsyncs through its handle and publishes: the
    /// end of every writer that streams records into a [`StagedFile::create`]d file.
    pub fn publish_buffered(mut self, out: std::io::BufWriter<File>) -> Result<(), DurableError> {
        let file = out.into_inner().map_err(|e| self.error(Step::Write, e.into_error()))?;
        self.sync_written(&file)?;
        self.publish()
    }

    /// An injected failure of `step`, where a test asked for one (feature `fault-injection`;
    /// nothing otherwise). Writers that write at [`StagedFile::temporary`] themselves call it with
    /// [`Step::Write`] before they write.
    pub fn check(&self, step: Step) -> Result<(), DurableError> {
        match faults::take(&self.target, step) {
            Some(e) => Err(self.error(step, e)),
            None => Ok(()),
        }
    }
}

impl Drop for StagedFile {
    fn drop(&mut self) {
        if !self.published {
            // Not found when nothing was created yet: nothing to remove.
            let _ = std::fs::remove_file(&self.temporary);
        }
    }
}

/// `KOMA_SLOW_PUBLISH_MS=N` (for the chaos test, docs/reliability.md): every publish waits N ms
/// with its temporary written and not yet renamed, so that kills land inside writes. Unset: no
/// pause.
/// The writer of a temporary this module named (`.NAME.tmp-HOST-PID-TOKEN-N`): its host and
/// process id; None for any other file name.
fn temporary_writer(file_name: &str) -> Option<(&str, u32)> {
    let rest = file_name.strip_prefix('.')?;
    let (_, writer) = rest.rsplit_once(".tmp-")?;
    let mut fields = writer.rsplitn(4, '-');
    let (n, token, pid, host) = (fields.next()?, fields.next()?, fields.next()?, fields.next()?);
    let valid = !host.is_empty()
        && n.chars().all(|c| c.is_ascii_digit())
        && token.len() == 8
        && token.chars().all(|c| c.is_ascii_hexdigit());
    valid.then_some(())?;
    Some((host, pid.parse().ok()?))
}

/// Removes the temporaries in `dir` left by writers of this host that are no longer running (a
/// SIGKILL between the create and the rename leaves one): nothing ever reads them, but a training
/// state's is hundreds of MB. Each removal is logged; returns the paths removed. Temporaries of
/// live processes, of other hosts sharing the directory, and every other file are left alone.
/// A process id reused since by another process keeps its temporary until a later sweep.
pub fn sweep_leftovers(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let host = crate::host::host_name();
    let mut removed = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(removed),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((writer_host, pid)) = temporary_writer(&name) else { continue };
        let alive = Path::new(&format!("/proc/{pid}")).exists();
        if writer_host != host || alive || !entry.file_type()?.is_file() {
            continue;
        }
        let path = entry.path();
        match std::fs::remove_file(&path) {
            Ok(()) => {
                tracing::info!("removed {}, left by a writer that is gone (process {pid})", path.display());
                removed.push(path);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(removed)
}

fn pause_before_rename() {
    static PAUSE: OnceLock<Option<Duration>> = OnceLock::new();
    let pause = PAUSE.get_or_init(|| {
        let ms: u64 = std::env::var("KOMA_SLOW_PUBLISH_MS").ok()?.trim().parse().ok()?;
        Some(Duration::from_millis(ms))
    });
    if let Some(pause) = pause {
        std::thread::sleep(*pause);
    }
}

/// The directory `path` lies in (`.` for a bare file name).
fn directory_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Fsyncs the directory of `path`. File systems that cannot sync a directory (they answer
/// EINVAL or "unsupported") are no error: there is nothing more to be had there.
fn sync_directory(path: &Path) -> Result<(), DurableError> {
    let error = |source| DurableError { path: path.to_path_buf(), step: Step::SyncDir, source };
    if let Some(e) = faults::take(path, Step::SyncDir) {
        return Err(error(e));
    }
    match File::open(directory_of(path)).and_then(|d| d.sync_all()) {
        Ok(()) => Ok(()),
        Err(e) if matches!(e.kind(), std::io::ErrorKind::InvalidInput | std::io::ErrorKind::Unsupported) => Ok(()),
        Err(e) => Err(error(e)),
    }
}

#[cfg(feature = "fault-injection")]
pub use faults::fail_next;

#[cfg(feature = "fault-injection")]
mod faults {
    use super::Step;
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;

    static PLANNED: Mutex<Vec<(PathBuf, Step)>> = Mutex::new(Vec::new());

    /// Makes the next durable write of `path` (any thread) fail at `step` with an injected error,
    /// as a full disk or a failing device would; `path` may also be a directory, for the next
    /// write of any file in it. For tests: each uses its own temporary directory, so tests
    /// running at once do not see each other's faults.
    pub fn fail_next(path: &Path, step: Step) {
        PLANNED.lock().unwrap_or_else(|e| e.into_inner()).push((path.to_path_buf(), step));
    }

    pub(super) fn take(target: &Path, step: Step) -> Option<std::io::Error> {
        let dir = super::directory_of(target);
        let mut planned = PLANNED.lock().unwrap_or_else(|e| e.into_inner());
        let i = planned.iter().position(|(p, s)| *s == step && (p == target || *p == dir))?;
        planned.remove(i);
        Some(std::io::Error::other(format!("injected failure at {step:?}")))
    }
}

#[cfg(not(feature = "fault-injection"))]
mod faults {
    use super::Step;
    use std::path::Path;

    #[inline(always)]
    pub(super) fn take(_target: &Path, _step: Step) -> Option<std::io::Error> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leftovers_of_dead_writers_of_this_host_are_swept_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let host = crate::host::host_name();
        // A staged file of this live process: its temporary names it.
        let live = StagedFile::new(&dir.path().join("state.safetensors"));
        std::fs::write(live.temporary(), b"live").unwrap();
        assert_eq!(
            temporary_writer(&live.temporary().file_name().unwrap().to_string_lossy()),
            Some((host.as_str(), std::process::id()))
        );
        // A process id that no process has (beyond the kernel's pid_max).
        let dead = u32::MAX - 7;
        let leftover = dir.path().join(format!(".model-00000100.safetensors.tmp-{host}-{dead}-0badcafe-3"));
        let other_host = dir.path().join(format!(".x.h5.tmp-elsewhere-{dead}-0badcafe-0"));
        let not_ours = dir.path().join(format!(".x.tmp-{host}-{dead}"));
        let published = dir.path().join("model-00000100.safetensors");
        for path in [&leftover, &other_host, &not_ours, &published] {
            std::fs::write(path, b"x").unwrap();
        }
        assert_eq!(sweep_leftovers(dir.path()).unwrap(), vec![leftover.clone()]);
        assert!(!leftover.exists());
        for kept in [live.temporary(), other_host.as_path(), not_ours.as_path(), published.as_path()] {
            assert!(kept.exists(), "{} was swept", kept.display());
        }
        // Host names with dashes parse; a missing directory is nothing to sweep.
        assert_eq!(temporary_writer(".a.b.tmp-node-1.cluster-42-00ff00ff-7"), Some(("node-1.cluster", 42)));
        assert_eq!(temporary_writer("a.tmp-h-1-00ff00ff-7"), None);
        assert!(sweep_leftovers(&dir.path().join("missing")).unwrap().is_empty());
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    #[test]
    fn a_write_replaces_the_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        write(&path, b"old").unwrap();
        write(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(entries(dir.path()), ["a.json"]);
    }

    #[test]
    fn a_missing_directory_is_an_error_that_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no-such-dir").join("a.json");
        let e = write(&path, b"x").unwrap_err();
        assert_eq!(e.step, Step::Create);
        assert!(e.to_string().contains("no-such-dir/a.json"), "{e}");
        assert_eq!(std::io::Error::from(e).kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn dropping_an_unpublished_file_removes_its_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shard.h5");
        std::fs::write(&path, b"old").unwrap();
        {
            let staged = StagedFile::new(&path);
            std::fs::write(staged.temporary(), b"half").unwrap();
            assert!(!staged.temporary().to_string_lossy().ends_with(".h5"), "a glob for *.h5 must not see it");
        }
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(entries(dir.path()), ["shard.h5"]);
    }

    #[test]
    fn two_staged_writes_of_one_path_use_two_temporaries() {
        let path = Path::new("/somewhere/model.safetensors");
        assert_ne!(StagedFile::new(path).temporary(), StagedFile::new(path).temporary());
    }

    #[test]
    fn a_bare_file_name_is_staged_in_the_current_directory() {
        assert_eq!(StagedFile::new(Path::new("x.kif")).temporary().parent(), Some(Path::new(".")));
    }

    /// Runs only with the fault hooks (`cargo test -p koma-base --features fault-injection`,
    /// which the workspace's tests turn on through the crates that use them).
    #[cfg(feature = "fault-injection")]
    #[test]
    fn a_failure_at_any_step_before_the_rename_keeps_the_old_file_and_no_temporary() {
        for step in Step::ALL {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("state.json");
            write(&path, b"old").unwrap();
            fail_next(dir.path(), step);
            if step == Step::SyncDir {
                // Renamed by then: published, with a warning.
                write(&path, b"new").unwrap();
                assert_eq!(std::fs::read(&path).unwrap(), b"new");
            } else {
                let e = write(&path, b"new").unwrap_err();
                assert_eq!(e.step, step);
                assert!(e.to_string().contains("state.json"), "{e}");
                assert_eq!(std::fs::read(&path).unwrap(), b"old", "{step:?}");
            }
            assert_eq!(entries(dir.path()), ["state.json"], "{step:?}");
        }
    }
}

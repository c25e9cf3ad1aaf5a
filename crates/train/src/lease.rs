//! One trainer per run directory, also across machines sharing it: the trainer holds a lease, the
//! file `trainer.lease` in the run directory (its host, process, a token and a heartbeat time),
//! created exclusively and refreshed every 10 seconds by a thread. A second trainer finds it
//! fresh and stops with an error naming the holder. A lease is stale, and taken over, when its
//! heartbeat is a minute old (a trainer that died without releasing it, on any host), or at once
//! when its holder is a process of this host that no longer runs. The holder that finds its
//! lease taken stops without saving.
//!
//! What it relies on (docs/cluster.md): `O_EXCL` creation and `rename` replacing a file
//! atomically, which NFSv3+, Lustre and cloud filestores provide; clocks within a few seconds of
//! each other (NTP), since hosts compare the heartbeat time in the file with their own clock.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::{Result, TrainError};

/// The lease file in a run directory.
pub const LEASE_FILE: &str = "trainer.lease";
/// How often the holder refreshes its heartbeat.
pub const HEARTBEAT: Duration = Duration::from_secs(10);
/// A heartbeat this old means the holder is gone.
pub const STALE_AFTER: Duration = Duration::from_secs(60);

/// Who holds a lease (the file's contents).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Holder {
    pub host: String,
    pub pid: u32,
    /// Unique to one acquisition: tells the holder's own file from a successor's.
    pub token: String,
    /// Unix seconds of the last heartbeat.
    pub heartbeat: f64,
    /// The kernel boot and the PID namespace the holder ran in: only a holder of this very boot
    /// and namespace can be found dead by its pid (containers sharing a host name have their own
    /// PID spaces).
    #[serde(default)]
    pub machine: String,
}

/// This process's boot id and PID namespace (empty where /proc does not tell).
fn machine_identity() -> String {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let namespace = std::fs::read_link("/proc/self/ns/pid").map(|p| p.display().to_string()).unwrap_or_default();
    format!("{} {namespace}", boot.trim())
}

/// A held lease: released (the file removed) when dropped.
pub struct Lease {
    path: PathBuf,
    token: String,
    stop: Arc<AtomicBool>,
    lost: Arc<AtomicBool>,
    heartbeat: Option<JoinHandle<()>>,
}

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

fn read_holder(path: &Path) -> Option<Holder> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// Writes `holder` to `path` durably (never a half-written lease).
fn write_holder(path: &Path, holder: &Holder) -> std::result::Result<(), koma_base::durable::DurableError> {
    koma_base::durable::write(path, &serde_json::to_vec(holder).expect("a holder serialises"))
}

/// Whether process `pid` runs on this host (Linux: /proc, a zombie counting as gone; elsewhere
/// assumed running).
fn process_runs(pid: u32) -> bool {
    if !Path::new("/proc/self").exists() {
        return true;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses and may contain spaces.
        Ok(stat) => {
            !matches!(stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next()), Some('Z' | 'X'))
        }
        Err(_) => false,
    }
}

impl Lease {
    /// Takes the lease of `run_dir` for this process (host from `koma_base::host::host_name`).
    pub fn acquire(run_dir: &Path) -> Result<Lease> {
        Lease::acquire_as(run_dir, &koma_base::host::host_name(), std::process::id(), HEARTBEAT, STALE_AFTER)
    }

    /// [`Lease::acquire`] as a given host and process, with given timings (for tests).
    pub fn acquire_as(
        run_dir: &Path,
        host: &str,
        pid: u32,
        heartbeat: Duration,
        stale_after: Duration,
    ) -> Result<Lease> {
        std::fs::create_dir_all(run_dir).map_err(crate::error::io(run_dir))?;
        let path = run_dir.join(LEASE_FILE);
        let token =
            format!("{host}-{pid}-{}", SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0));
        let machine = machine_identity();
        let me =
            Holder { host: host.to_string(), pid, token: token.clone(), heartbeat: now(), machine: machine.clone() };
        let created = std::fs::OpenOptions::new().write(true).create_new(true).open(&path);
        match created {
            Ok(file) => {
                drop(file);
                write_holder(&path, &me)?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let current = read_holder(&path);
                let age = |h: &Holder| (now() - h.heartbeat).max(0.0);
                let stale = match &current {
                    Some(h) => {
                        age(h) > stale_after.as_secs_f64()
                            || (h.host == host
                                && h.machine == machine
                                && !machine.trim().is_empty()
                                && h.pid != pid
                                && !process_runs(h.pid))
                    }
                    // Unreadable: being written, or garbage; stale once it is old.
                    None => std::fs::metadata(&path)
                        .and_then(|m| m.modified())
                        .map(|t| t.elapsed().unwrap_or_default() > stale_after)
                        .unwrap_or(true),
                };
                if !stale {
                    return Err(held(&path, current.as_ref(), age));
                }
                if let Some(h) = &current {
                    tracing::warn!(
                        "{}: taking over the lease of {} (pid {}), whose heartbeat is {:.0} s old",
                        path.display(),
                        h.host,
                        h.pid,
                        age(h)
                    );
                }
                write_holder(&path, &me)?;
                // Another trainer may have taken it over at the same moment: the last rename won.
                std::thread::sleep(Duration::from_millis(200));
                let now_held = read_holder(&path);
                if now_held.as_ref().map(|h| &h.token) != Some(&token) {
                    return Err(held(&path, now_held.as_ref(), age));
                }
            }
            Err(e) => return Err(TrainError::Io { path, source: e }),
        }
        let stop = Arc::new(AtomicBool::new(false));
        let lost = Arc::new(AtomicBool::new(false));
        let thread = {
            let (file, stop, lost, mut me) = (path.clone(), stop.clone(), lost.clone(), me);
            std::thread::Builder::new()
                .name("koma-train-lease".into())
                .spawn(move || {
                    let mut since = std::time::Instant::now();
                    let mut refreshed = now();
                    while !stop.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(50).min(heartbeat));
                        if since.elapsed() < heartbeat {
                            continue;
                        }
                        since = std::time::Instant::now();
                        // Frozen (suspended, stopped) past the limit: a successor may hold it now.
                        if now() - refreshed > stale_after.as_secs_f64() {
                            lost.store(true, Ordering::SeqCst);
                            return;
                        }
                        match std::fs::read_to_string(&file).map(|t| serde_json::from_str::<Holder>(&t)) {
                            Ok(Ok(h)) if h.token == me.token => {
                                me.heartbeat = now();
                                match write_holder(&file, &me) {
                                    Ok(()) => refreshed = me.heartbeat,
                                    Err(e) => {
                                        tracing::warn!("{}: cannot refresh the trainer's lease: {e}", file.display())
                                    }
                                }
                            }
                            Ok(Ok(_)) => {
                                lost.store(true, Ordering::SeqCst);
                                return;
                            }
                            // A read error (a stale NFS handle, EIO): try again at the next beat.
                            Ok(Err(_)) | Err(_) => {
                                tracing::warn!("{}: cannot read the trainer's lease", file.display())
                            }
                        }
                    }
                })
                .map_err(|e| TrainError::Io { path: path.clone(), source: e })?
        };
        Ok(Lease { path, token, stop, lost, heartbeat: Some(thread) })
    }

    /// Whether another trainer has taken the lease over (this one must stop without saving).
    pub fn lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Reads the lease file now: false (and the lease counts as lost) when another trainer holds
    /// it. Called before every save, so that a trainer that just woke from a freeze never writes
    /// over its successor's run.
    pub fn still_held(&self) -> bool {
        if self.lost() {
            return false;
        }
        if read_holder(&self.path).is_some_and(|h| h.token != self.token) {
            self.lost.store(true, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// The lease file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn held(path: &Path, holder: Option<&Holder>, age: impl Fn(&Holder) -> f64) -> TrainError {
    let who = match holder {
        Some(h) => format!("{} (pid {}, heartbeat {:.0} s ago)", h.host, h.pid, age(h)),
        None => "another trainer (its lease file is being written)".to_string(),
    };
    TrainError::Leased { path: path.to_path_buf(), holder: who, stale_after: STALE_AFTER.as_secs() }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.heartbeat.take() {
            let _ = h.join();
        }
        if read_holder(&self.path).is_some_and(|h| h.token == self.token) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAST: Duration = Duration::from_millis(100);

    #[test]
    fn a_second_trainer_is_refused_and_the_lease_is_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let a = Lease::acquire_as(dir.path(), "host-a", 11, FAST, Duration::from_secs(60)).unwrap();
        let err = Lease::acquire_as(dir.path(), "host-b", 22, FAST, Duration::from_secs(60)).err().unwrap();
        let text = err.to_string();
        assert!(text.contains("host-a") && text.contains("pid 11") && text.contains(LEASE_FILE), "{text}");
        // The same host with a running process (this test's) holds it too.
        let me = std::process::id();
        drop(a);
        assert!(!dir.path().join(LEASE_FILE).exists());
        let mine = Lease::acquire_as(dir.path(), "host-a", me, FAST, Duration::from_secs(60)).unwrap();
        assert!(Lease::acquire_as(dir.path(), "host-a", me + 1, FAST, Duration::from_secs(60)).is_err());
        drop(mine);
    }

    #[test]
    fn a_stale_lease_is_taken_over_and_its_holder_learns_it() {
        let dir = tempfile::tempdir().unwrap();
        let a =
            Lease::acquire_as(dir.path(), "host-a", 11, Duration::from_secs(3600), Duration::from_secs(60)).unwrap();
        // host-a's heartbeat stops: its file ages past the limit.
        let path = dir.path().join(LEASE_FILE);
        let mut h = read_holder(&path).unwrap();
        h.heartbeat -= 120.0;
        write_holder(&path, &h).unwrap();
        let b = Lease::acquire_as(dir.path(), "host-b", 22, FAST, Duration::from_secs(60)).unwrap();
        assert_eq!(read_holder(&path).unwrap().host, "host-b");
        assert!(!a.lost(), "a's heartbeat has not looked yet");
        // a leaves without removing b's lease.
        drop(a);
        assert!(path.exists());
        // b's heartbeat keeps the file fresh.
        // (Waited for, not timed: a loaded machine may run the heartbeat late.)
        let before = read_holder(&path).unwrap().heartbeat;
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while read_holder(&path).unwrap().heartbeat <= before {
            assert!(std::time::Instant::now() < deadline, "b's heartbeat never refreshed its lease in 30 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!b.lost());
    }

    #[test]
    fn a_holder_whose_lease_was_taken_over_finds_out() {
        let dir = tempfile::tempdir().unwrap();
        let a = Lease::acquire_as(dir.path(), "host-a", 11, FAST, Duration::from_secs(60)).unwrap();
        let path = dir.path().join(LEASE_FILE);
        let mut h = read_holder(&path).unwrap();
        h.host = "host-c".into();
        h.token = "someone-else".into();
        write_holder(&path, &h).unwrap();
        let t = std::time::Instant::now();
        while !a.lost() && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(a.lost());
        drop(a);
        assert_eq!(read_holder(&path).unwrap().host, "host-c", "a does not remove a lease it lost");
    }

    #[test]
    fn a_dead_process_of_this_host_frees_the_lease_at_once() {
        let dir = tempfile::tempdir().unwrap();
        // A pid that does not run (far above any kernel's pid_max).
        let dead = u32::MAX - 7;
        let stale =
            Lease::acquire_as(dir.path(), "host-a", dead, Duration::from_secs(3600), Duration::from_secs(60)).unwrap();
        std::mem::forget(stale); // as if killed: the file stays
        let me = Lease::acquire_as(dir.path(), "host-a", std::process::id(), FAST, Duration::from_secs(60)).unwrap();
        assert_eq!(read_holder(&dir.path().join(LEASE_FILE)).unwrap().pid, std::process::id());
        drop(me);
    }
}

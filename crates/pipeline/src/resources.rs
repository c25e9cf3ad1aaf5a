//! What a run costs the machine: process CPU time (the `[run] cpu_minutes` budget, and a child
//! process's time for `koma experiment`) and the load average it ran under.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

fn rusage_seconds(who: libc::c_int) -> f64 {
    // SAFETY: getrusage only writes the struct it is given; a zeroed rusage is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(who, &mut usage) } != 0 {
        return 0.0;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// CPU time (user + system, every thread) this process has used so far, in seconds.
pub fn process_cpu_seconds() -> f64 {
    rusage_seconds(libc::RUSAGE_SELF)
}

/// CPU time of this process's children that have ended and been waited for, in seconds.
pub fn children_cpu_seconds() -> f64 {
    rusage_seconds(libc::RUSAGE_CHILDREN)
}

/// CPU time (user + system) of a running process from `/proc/PID/stat`; None when it is gone
/// (or on a system without /proc).
pub fn pid_cpu_seconds(pid: u32) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_cpu_ticks(&text).map(|ticks| ticks as f64 / clock_ticks_per_second())
}

/// utime + stime (fields 14 and 15) of a `/proc/PID/stat` line. The command name (field 2) is in
/// parentheses and may hold spaces, so fields are counted after its closing parenthesis.
fn parse_stat_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): utime is field 14, i.e. index 11 here.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

/// Whether a process with this id exists now (a zombie counts until it is reaped).
pub fn pid_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Whether the child `pid` has exited, without reaping it: its `/proc/PID/stat` then still
/// holds its final CPU time (read it, then wait for it).
pub fn child_exited(pid: u32) -> bool {
    // SAFETY: waitid writes only the siginfo it is given; WNOWAIT leaves the child waitable.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let r = libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT);
        r == 0 && info.si_pid() != 0
    }
}

/// The 1-, 5- and 15-minute load averages from `/proc/loadavg` (None where there is none).
pub fn load_average() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = text.split_whitespace().map(|f| f.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// A limit on this process's CPU time, counted from when it was made.
#[derive(Clone, Copy, Debug)]
pub struct CpuBudget {
    start: f64,
    limit: f64,
}

impl CpuBudget {
    pub fn new(limit: Duration) -> CpuBudget {
        CpuBudget { start: process_cpu_seconds(), limit: limit.as_secs_f64() }
    }

    /// CPU seconds used since the budget was made.
    pub fn used(&self) -> f64 {
        process_cpu_seconds() - self.start
    }

    /// The share of the limit used (1 and more once exhausted).
    pub fn spent(&self) -> f64 {
        self.used() / self.limit.max(1e-9)
    }

    pub fn exhausted(&self) -> bool {
        self.used() >= self.limit
    }
}

/// A run's limits from the moment it starts: wall clock (`--minutes`), process CPU time
/// (`--cpu-minutes`) and self-play's evaluations (`--evals`), any of them. The pipeline stops on
/// the first one spent, and the trainer anneals a learning rate over them
/// ([`koma_train::BudgetClock`]).
#[derive(Debug)]
pub struct RunBudget {
    started: Instant,
    wall: Option<Duration>,
    cpu: Option<CpuBudget>,
    evals: Option<u64>,
    /// The run's evaluations before this process (the `evals` budget is the whole run's, as
    /// `steps` is).
    evals_before: u64,
    /// Evaluations this process's self-play reports so far (its running total).
    evals_here: AtomicU64,
}

impl RunBudget {
    /// Limits in minutes of this process (0 or less: none) and in evaluations of the whole run
    /// (0: none), `evals_before` of which earlier processes did.
    pub fn new(minutes: f64, cpu_minutes: f64, evals: u64, evals_before: u64) -> RunBudget {
        RunBudget {
            started: Instant::now(),
            wall: (minutes > 0.0).then(|| Duration::from_secs_f64(minutes * 60.0)),
            cpu: (cpu_minutes > 0.0).then(|| CpuBudget::new(Duration::from_secs_f64(cpu_minutes * 60.0))),
            evals: (evals > 0).then_some(evals),
            evals_before,
            evals_here: AtomicU64::new(0),
        }
    }

    pub fn is_limited(&self) -> bool {
        self.wall.is_some() || self.cpu.is_some() || self.evals.is_some()
    }

    pub fn wall_exhausted(&self) -> bool {
        self.wall.is_some_and(|w| self.started.elapsed() >= w)
    }

    pub fn cpu_exhausted(&self) -> bool {
        self.cpu.is_some_and(|c| c.exhausted())
    }

    /// This process's self-play's running total of evaluations, as its progress reports give it.
    pub fn count_evals(&self, total: u64) {
        self.evals_here.fetch_max(total, Ordering::Relaxed);
    }

    /// Evaluations of this process.
    pub fn evals_here(&self) -> u64 {
        self.evals_here.load(Ordering::Relaxed)
    }

    /// Evaluations of the whole run.
    pub fn evals_done(&self) -> u64 {
        self.evals_before + self.evals_here()
    }

    pub fn evals_exhausted(&self) -> bool {
        self.evals.is_some_and(|limit| self.evals_done() >= limit)
    }
}

impl koma_train::BudgetClock for RunBudget {
    /// This process's time limits.
    fn spent(&self) -> f64 {
        let wall = self.wall.map_or(0.0, |w| self.started.elapsed().as_secs_f64() / w.as_secs_f64().max(1e-9));
        let cpu = self.cpu.map_or(0.0, |c| c.spent());
        wall.max(cpu).min(1.0)
    }

    /// The evaluations, which count over the whole run.
    fn run_spent(&self) -> Option<f64> {
        self.evals.map(|limit| (self.evals_done() as f64 / limit as f64).min(1.0))
    }
}

/// The machine a run ran on: its minutes mean nothing without it (machines here differ about
/// 3.5× in speed from one session to the next).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Machine {
    /// The CPU's model name (`/proc/cpuinfo`), or `unknown`.
    pub cpu: String,
    /// Cores this process may use.
    pub cores: usize,
    /// The 1-, 5- and 15-minute load averages when the run ended.
    pub load_average: Option<[f64; 3]>,
}

impl Machine {
    pub fn this() -> Machine {
        Machine { cpu: cpu_model(), cores: koma_base::cpu::cores(), load_average: load_average() }
    }
}

/// The CPU's model name from `/proc/cpuinfo` (`unknown` where there is none).
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| parse_cpu_model(&text))
        .unwrap_or_else(|| "unknown".to_string())
}

/// The first `model name` line's value (x86), else `Model` (ARM boards), else `CPU part`.
fn parse_cpu_model(cpuinfo: &str) -> Option<String> {
    ["model name", "Model", "CPU part"].iter().find_map(|key| {
        cpuinfo.lines().find_map(|line| {
            let (name, value) = line.split_once(':')?;
            (name.trim() == *key && !value.trim().is_empty()).then(|| value.trim().to_string())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_is_spent_by_its_nearest_limit() {
        use koma_train::BudgetClock;
        let none = RunBudget::new(0.0, 0.0, 0, 0);
        assert!(!none.is_limited() && !none.wall_exhausted() && !none.cpu_exhausted());
        assert_eq!(none.spent(), 0.0);
        // 3 s of wall clock, an hour of CPU: the wall clock ends it.
        let budget = RunBudget::new(0.05, 60.0, 0, 0);
        assert!(budget.is_limited() && !budget.wall_exhausted());
        let early = budget.spent();
        assert!((0.0..1.0).contains(&early), "{early}");
        std::thread::sleep(Duration::from_millis(3100));
        assert!(budget.wall_exhausted() && !budget.cpu_exhausted());
        assert_eq!(budget.spent(), 1.0);
        // CPU time alone: spinning spends it.
        let cpu = RunBudget::new(0.0, 0.0005, 0, 0);
        let spin = Instant::now();
        while !cpu.cpu_exhausted() && spin.elapsed() < Duration::from_secs(10) {
            std::hint::black_box((0..1000u64).sum::<u64>());
        }
        assert!(cpu.cpu_exhausted() && !cpu.wall_exhausted());
        assert_eq!(cpu.spent(), 1.0);
        // Evaluations: the whole run's, earlier processes' included; self-play's running totals
        // are never counted backwards by a late report.
        let evals = RunBudget::new(0.0, 0.0, 1000, 100);
        assert!(evals.is_limited() && !evals.evals_exhausted());
        evals.count_evals(150);
        evals.count_evals(100);
        assert_eq!((evals.evals_here(), evals.evals_done()), (150, 250));
        // A share of the whole run, apart from this process's time (none here).
        assert_eq!((evals.spent(), evals.run_spent()), (0.0, Some(0.25)));
        evals.count_evals(900);
        assert!(evals.evals_exhausted() && !evals.wall_exhausted() && !evals.cpu_exhausted());
        assert_eq!(evals.run_spent(), Some(1.0));
        assert_eq!(budget.run_spent(), None);
    }

    #[test]
    fn cpu_models_are_read_from_cpuinfo() {
        let x86 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel\t\t: 1\nmodel name\t: AMD EPYC 7B13\n";
        assert_eq!(parse_cpu_model(x86).as_deref(), Some("AMD EPYC 7B13"));
        assert_eq!(parse_cpu_model("processor : 0\nModel : Raspberry Pi 4\n").as_deref(), Some("Raspberry Pi 4"));
        assert_eq!(parse_cpu_model("garbage"), None);
        assert!(!cpu_model().is_empty());
    }

    #[test]
    fn stat_lines_parse_even_with_odd_command_names() {
        let line = "1234 (koma (x) y) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 9 0 100 0 0";
        assert_eq!(parse_stat_cpu_ticks(line), Some(325));
        assert_eq!(parse_stat_cpu_ticks("garbage"), None);
    }

    #[test]
    fn own_cpu_time_grows_and_is_visible_in_proc() {
        let budget = CpuBudget::new(Duration::from_secs(3600));
        let mut x = 0u64;
        let t = std::time::Instant::now();
        while t.elapsed() < Duration::from_millis(200) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        assert!(budget.used() > 0.05, "{}", budget.used());
        assert!(!budget.exhausted());
        assert!(pid_cpu_seconds(std::process::id()).is_some_and(|s| s > 0.05));
        assert!(pid_alive(std::process::id()));
        if std::path::Path::new("/proc/loadavg").exists() {
            assert!(load_average().is_some());
        }
    }
}

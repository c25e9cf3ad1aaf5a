//! One variant's training: `koma pipeline` as a child process on `EXPDIR/runs/NAME`, given what is
//! left of the budget, timed from outside (wall clock and the process's CPU time from /proc), with
//! every checkpoint's time noted as it appears. A process that was killed is continued with
//! `koma pipeline --resume` and the budget still left.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::error::{io, PipelineError, Result};
use crate::experiment::spec::{BudgetKind, Variant};
use crate::experiment::state::{Segment, VariantState};
use crate::experiment::{Context, ExperimentEvent, Flow};
use crate::resources::{child_exited, load_average, pid_alive, pid_cpu_seconds};
use crate::run_dir::RunDir;

/// Stop reasons of a pipeline that trained for its whole budget.
const FINISHED: [&str; 4] = ["time_limit", "cpu_limit", "eval_limit", "steps_reached"];

/// How long a pipeline left running by a killed experiment may take to stop.
const LEFTOVER_WAIT: Duration = Duration::from_secs(300);

/// The `koma pipeline` command for the next segment of a variant with `remaining` seconds of
/// budget, or `remaining` evaluations of `budget`: a new run from the variant's config, or
/// `--resume` of its run. A pipeline counts evaluations over its whole run, so it is given the
/// whole budget.
pub fn pipeline_command(
    exe: &Path,
    variant_config: &Path,
    run: &Path,
    model_zero: &Path,
    resume: bool,
    (kind, budget): (BudgetKind, f64),
    remaining: f64,
) -> Vec<String> {
    let mut cmd = vec![exe.display().to_string(), "pipeline".into()];
    if resume {
        cmd.push("--resume".into());
    } else {
        cmd.extend(["--config".into(), variant_config.display().to_string()]);
    }
    cmd.extend(["--run".into(), run.display().to_string(), "--model-zero".into(), model_zero.display().to_string()]);
    // Round up to the next hundredth of a second so that a small remainder never becomes 0
    // (no limit); the other limit is switched off, whatever the variant's config says.
    let minutes = format!("{:.6}", (remaining / 60.0 * 1e6).ceil() / 1e6);
    let (wall, cpu, evals) = match kind {
        BudgetKind::Wall => (minutes, "0".to_string(), "0".to_string()),
        BudgetKind::Cpu => ("0".to_string(), minutes, "0".to_string()),
        BudgetKind::Evals => ("0".to_string(), "0".to_string(), format!("{}", budget.ceil() as u64)),
    };
    cmd.extend(["--minutes".into(), wall, "--cpu-minutes".into(), cpu, "--evals".into(), evals]);
    cmd.extend(["--no-report".into(), "--json".into()]);
    cmd
}

/// The last JSON line of a pipeline's stdout: its summary.
fn read_summary(stdout: &Path) -> Option<serde_json::Value> {
    let text = std::fs::read_to_string(stdout).ok()?;
    text.lines().rev().find_map(|l| serde_json::from_str::<serde_json::Value>(l.trim()).ok().filter(|v| v.is_object()))
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// Reads the run's evaluations, then notes its checkpoints not seen before (at the variant's
/// time and evaluations so far); true if any.
fn note_checkpoints(run: &RunDir, state: &mut VariantState) -> Result<bool> {
    state.evals = state.evals.max(run.evals()?);
    let mut new = false;
    for m in run.models()? {
        new |= state.note_checkpoint(m.step);
    }
    // The pipeline's own note of each checkpoint's evaluations is exact; the count read when it
    // was seen lags by up to the 5 s between saves.
    let exact = run.checkpoint_evals()?;
    for c in &mut state.checkpoints {
        if let Some(&evals) = exact.get(&c.step) {
            c.evals = evals;
        }
    }
    Ok(new)
}

/// Settles a segment left marked as running by a killed experiment: waits for its process if it
/// is still stopping (it got SIGTERM when the experiment died), then takes its stop reason from
/// the summary it printed, if it got that far.
fn settle_dangling(ctx: &Context, run: &RunDir, state: &mut VariantState) -> Result<Flow> {
    let Some(seg) = state.dangling().cloned() else { return Ok(Flow::Continue) };
    // A `koma pipeline` on this variant's run (the directory may be spelt differently now).
    let run_name =
        format!("runs/{}", run.root.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default());
    let is_ours = |pid: u32| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|c| {
                let c = String::from_utf8_lossy(&c);
                c.contains("pipeline") && c.contains(&run_name)
            })
            .unwrap_or(false)
    };
    let started = Instant::now();
    if pid_alive(seg.pid) && is_ours(seg.pid) {
        ctx.note(format!("waiting for the pipeline left running on {} (pid {}) to stop", run.root.display(), seg.pid));
        while pid_alive(seg.pid) && is_ours(seg.pid) {
            if ctx.stop.load(Ordering::SeqCst) {
                return Ok(Flow::Interrupted);
            }
            if started.elapsed() > LEFTOVER_WAIT {
                return Err(PipelineError::Run {
                    path: run.root.clone(),
                    message: format!("a pipeline (pid {}) still runs on it; stop it first", seg.pid),
                });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    let last = state.segments.last_mut().expect("a dangling segment");
    last.ended = true;
    if let Some(summary) = read_summary(&ctx.dir.root.join(&last.stdout)) {
        last.stop_reason = summary["stop_reason"].as_str().map(str::to_string);
        // It ran to the end: its own count of the stages' time is at least what was last saved.
        last.wall_seconds = last.wall_seconds.max(summary["seconds"].as_f64().unwrap_or(0.0));
        last.cpu_seconds = last.cpu_seconds.max(summary["cpu_seconds"].as_f64().unwrap_or(0.0));
    }
    if last.stop_reason.as_deref().is_some_and(|r| FINISHED.contains(&r)) {
        state.finished = true;
    }
    Ok(Flow::Continue)
}

/// Trains `variant` until its budget is used (or the experiment is stopped), one pipeline
/// process at a time, saving the state as it goes.
pub fn train(ctx: &mut Context, index: usize, variant: &Variant, model_zero: &Path) -> Result<Flow> {
    let run = RunDir::new(&ctx.dir.run(&variant.name));
    let (kind, budget) = ctx.spec.budget();
    {
        let mut state = ctx.state.variant(&variant.name).clone();
        let flow = settle_dangling(ctx, &run, &mut state)?;
        note_checkpoints(&run, &mut state)?;
        *ctx.state.variant(&variant.name) = state;
        ctx.save()?;
        if flow == Flow::Interrupted {
            return Ok(flow);
        }
    }
    while ctx.state.variant(&variant.name).needs_training(kind, budget) {
        if ctx.stop.load(Ordering::SeqCst) {
            return Ok(Flow::Interrupted);
        }
        let remaining = ctx.state.variant(&variant.name).remaining(kind, budget);
        let command = pipeline_command(
            &ctx.exe,
            &ctx.dir.config_copy(&variant.name),
            &run.root,
            model_zero,
            run.exists(),
            (kind, budget),
            remaining,
        );
        let flow = run_segment(ctx, index, variant, &run, command, remaining)?;
        if flow == Flow::Interrupted {
            return Ok(flow);
        }
    }
    let state = ctx.state.variant(&variant.name);
    state.finished = true;
    let newest = run
        .newest_model()?
        .ok_or_else(|| PipelineError::Run { path: run.root.clone(), message: "no model after training".into() })?;
    if state.final_step != Some(newest.step) || !ctx.dir.player(&variant.name).is_file() {
        crate::run_dir::copy_checkpoint(&newest.path, &ctx.dir.player(&variant.name))?;
        ctx.state.variant(&variant.name).final_step = Some(newest.step);
    }
    ctx.save()?;
    Ok(Flow::Continue)
}

/// Runs one pipeline process to its end, polling its CPU time and the run's checkpoints.
fn run_segment(
    ctx: &mut Context,
    index: usize,
    variant: &Variant,
    run: &RunDir,
    command: Vec<String>,
    remaining: f64,
) -> Result<Flow> {
    let name = &variant.name;
    let k = ctx.state.variant(name).segments.len() + 1;
    let (stdout, stderr) =
        (ctx.dir.logs().join(format!("{name}-{k}.json")), ctx.dir.logs().join(format!("{name}-{k}.log")));
    std::fs::create_dir_all(ctx.dir.logs()).map_err(io(ctx.dir.logs()))?;
    let out = std::fs::File::create(&stdout).map_err(io(&stdout))?;
    let err = std::fs::File::create(&stderr).map_err(io(&stderr))?;
    let parent = std::process::id();
    let mut child_command = Command::new(&command[0]);
    child_command.args(&command[1..]).stdin(Stdio::null()).stdout(out).stderr(err);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        child_command.pre_exec(move || {
            // Its own process group: a Ctrl-C at the terminal reaches the experiment only, which
            // passes on one SIGTERM (two would make the pipeline exit at once).
            libc::setpgid(0, 0);
            // If the experiment dies (even by SIGKILL), the pipeline stops cleanly.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            if libc::getppid() as u32 != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    let load_start = load_average();
    let mut child = child_command
        .spawn()
        .map_err(|e| PipelineError::Stage { stage: "experiment", message: format!("starting {}: {e}", command[0]) })?;
    let pid = child.id();
    let text = command.join(" ");
    ctx.send(ExperimentEvent::VariantStarted { name: name.clone(), index, segment: k, command: text });
    ctx.state.variant(name).segments.push(Segment {
        command,
        pid,
        started_unix: unix_now(),
        load_start,
        // Relative to the experiment directory, which may be reached by another path later.
        stdout: Path::new("logs").join(format!("{name}-{k}.json")),
        stderr: Path::new("logs").join(format!("{name}-{k}.log")),
        ..Segment::default()
    });
    ctx.save()?;
    let (kind, budget) = ctx.spec.budget();
    let started = Instant::now();
    let mut cpu = 0.0;
    let mut last_scan = Instant::now();
    let mut last_save = Instant::now();
    let mut signalled = false;
    loop {
        let exited = child_exited(pid);
        cpu = pid_cpu_seconds(pid).unwrap_or(cpu);
        {
            let seg = ctx.state.variant(name).segments.last_mut().expect("this segment");
            seg.wall_seconds = started.elapsed().as_secs_f64();
            seg.cpu_seconds = cpu;
        }
        if exited || last_scan.elapsed() >= Duration::from_secs(1) {
            last_scan = Instant::now();
            let mut state = ctx.state.variant(name).clone();
            let new = note_checkpoints(run, &mut state)?;
            *ctx.state.variant(name) = state;
            if new || last_save.elapsed() >= Duration::from_secs(5) {
                last_save = Instant::now();
                ctx.save()?;
            }
            let state = ctx.state.variant(name).clone();
            ctx.send(ExperimentEvent::VariantProgress {
                name: name.clone(),
                used: state.used(kind),
                budget: kind.units(budget),
                wall: state.wall_seconds(),
                cpu: state.cpu_seconds(),
                step: state.checkpoints.last().map(|c| c.step),
            });
        }
        if exited {
            break;
        }
        if ctx.stop.load(Ordering::SeqCst) && !signalled {
            signalled = true;
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let status = child.wait().map_err(|e| PipelineError::Stage {
        stage: "experiment",
        message: format!("waiting for the pipeline of {name}: {e}"),
    })?;
    let summary = read_summary(&stdout);
    let state = ctx.state.variant(name);
    let seg = state.segments.last_mut().expect("this segment");
    seg.ended = true;
    seg.exit_code = status.code();
    seg.load_end = load_average();
    seg.stop_reason = summary.as_ref().and_then(|s| s["stop_reason"].as_str().map(str::to_string));
    let reason = seg.stop_reason.clone();
    if reason.as_deref().is_some_and(|r| FINISHED.contains(&r)) {
        state.finished = true;
    }
    let mut state = ctx.state.variant(name).clone();
    note_checkpoints(run, &mut state)?;
    *ctx.state.variant(name) = state;
    ctx.save()?;
    let used = ctx.state.variant(name).used(kind);
    ctx.send(ExperimentEvent::VariantEnded {
        name: name.clone(),
        reason: reason.clone().unwrap_or_else(|| "no summary".into()),
        used,
        budget: kind.units(budget),
    });
    if signalled || ctx.stop.load(Ordering::SeqCst) {
        return Ok(Flow::Interrupted);
    }
    if !status.success() || summary.is_none() {
        return Err(PipelineError::Stage {
            stage: "experiment",
            message: format!(
                "the pipeline of variant {name:?} failed ({status}); its log: {}\n{}",
                stderr.display(),
                tail(&stderr, 15)
            ),
        });
    }
    if reason.as_deref() == Some("interrupted") {
        return Err(PipelineError::Stage {
            stage: "experiment",
            message: format!(
                "the pipeline of variant {name:?} was stopped from outside after {} of the {} it had left; continue \
                 with --resume",
                kind.units_text(used - (kind.units(budget) - remaining)),
                kind.units_text(remaining)
            ),
        });
    }
    Ok(Flow::Continue)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_start_or_resume_with_the_budget_left() {
        let command = |resume, budget, remaining| {
            let (config, zero) = (Path::new("E/configs/a.toml"), Path::new("E/model0/m.safetensors"));
            pipeline_command(Path::new("/bin/koma"), config, Path::new("E/runs/a"), zero, resume, budget, remaining)
                .join(" ")
        };
        assert_eq!(
            command(false, (BudgetKind::Cpu, 10.0), 90.0),
            "/bin/koma pipeline --config E/configs/a.toml --run E/runs/a --model-zero E/model0/m.safetensors --minutes 0 --cpu-minutes 1.500000 --evals 0 --no-report --json"
        );
        let text = command(true, (BudgetKind::Wall, 10.0), 0.0001);
        assert!(text.contains("pipeline --resume --run E/runs/a") && !text.contains("--config"), "{text}");
        assert!(text.contains("--minutes 0.000002 --cpu-minutes 0 --evals 0"), "{text}");
        // Evaluations: the whole budget, which the pipeline counts over its whole run.
        let text = command(true, (BudgetKind::Evals, 5e6), 1.2e6);
        assert!(text.contains("--minutes 0 --cpu-minutes 0 --evals 5000000"), "{text}");
    }
}

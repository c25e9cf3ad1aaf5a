"""deploy/slurm on a real single-node Slurm cluster started here: a trainer job and a 2-task
self-play array on CPU with a tiny net. Both tasks' shards reach the trainer, models are published
and picked up; scancel stops every job cleanly; a resubmitted trainer resumes from the state, and
given an end ([run] steps) the trainer, self-play and evaluator jobs end by themselves.

The cluster is Debian's slurm-wlm and munge, installed (apt-get) and started by the test as root:
slurmctld and slurmd with a private config (SLURM_CONF) in a temporary directory, on free ports.
Where that is impossible (not root, no apt, daemons that will not start) the test is skipped with
the reason."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time

import pytest

from test_pipeline import CONFIG, read_shard, shards

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUBMIT = os.path.join(ROOT, "deploy", "slurm", "submit")


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=kw.pop("timeout", 600), **kw)


def install_slurm():
    """slurmctld, slurmd and munged on PATH, installed with apt-get if missing; else a skip."""
    if all(shutil.which(t) for t in ("slurmctld", "slurmd", "sbatch", "munged")):
        return
    if not shutil.which("apt-get"):
        pytest.skip("Slurm is not installed and there is no apt-get to install slurm-wlm and munge")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    r = run(["apt-get", "install", "-y", "-q", "slurm-wlm", "munge"], env=env)
    if r.returncode != 0:
        run(["apt-get", "update", "-q"], env=env)
        r = run(["apt-get", "install", "-y", "-q", "slurm-wlm", "munge"], env=env)
    if r.returncode != 0:
        pytest.skip(f"could not install slurm-wlm and munge with apt-get: {r.stderr[-500:]}")


def munge_works():
    if not shutil.which("munge"):
        return False
    cred = run(["munge", "-n"], timeout=10)
    return cred.returncode == 0 and run(["unmunge"], input=cred.stdout, timeout=10).returncode == 0


def start_munge():
    """The munge daemon (Slurm's authentication); returns its pid if this test started it."""
    if munge_works():
        return None
    for d in ("/run/munge", "/var/log/munge", "/var/lib/munge", "/etc/munge"):
        os.makedirs(d, exist_ok=True)
        shutil.chown(d, "munge", "munge")
    key = "/etc/munge/munge.key"
    if not os.path.exists(key):
        r = run(["mungekey", "--create", "--keyfile", key])
        if r.returncode != 0:
            pytest.skip(f"cannot create a munge key: {r.stderr[-300:]}")
    shutil.chown(key, "munge", "munge")
    os.chmod(key, 0o600)
    r = run(["runuser", "-u", "munge", "--", "munged"], timeout=30)
    if r.returncode != 0 or not munge_works():
        pytest.skip(f"munged does not start here: {r.stderr[-300:]}")
    with open("/run/munge/munged.pid") as f:
        return int(f.read().strip())


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout, what, logs):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(1)
    pytest.fail(f"timed out waiting for {what}:\n{logs()}")


@pytest.fixture()
def slurm(tmp_path):
    """A one-node cluster (8 CPUs configured, so that three CPU jobs run at once); yields the
    environment (SLURM_CONF) its commands need."""
    if os.name != "posix" or os.geteuid() != 0:
        pytest.skip("the Slurm test starts slurmctld and slurmd, which needs root")
    install_slurm()
    munged = start_munge()
    d = tmp_path / "slurm"
    for sub in ("state", "spool", "log", "run"):
        (d / sub).mkdir(parents=True)
    node = socket.gethostname().split(".")[0]
    conf = d / "slurm.conf"
    conf.write_text(f"""ClusterName=komatest
SlurmctldHost={node}
SlurmUser=root
SlurmdUser=root
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
AuthType=auth/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/run/slurmctld.pid
SlurmdPidFile={d}/run/slurmd.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=30
NodeName={node} CPUs=8 RealMemory=2000 State=UNKNOWN
PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP
""")
    env = dict(os.environ, SLURM_CONF=str(conf))
    daemons = []
    try:
        for daemon in ("slurmctld", "slurmd"):
            r = run([daemon] + (["-i"] if daemon == "slurmctld" else []), env=env, timeout=60)
            if r.returncode != 0:
                pytest.skip(f"{daemon} does not start here: {r.stderr[-500:]}")
            daemons.append(d / "run" / f"{daemon}.pid")
        up = lambda: run(["sinfo", "-h", "-o", "%t"], env=env, timeout=30).stdout.strip() in ("idle", "mix", "alloc")
        deadline = time.time() + 60
        while not up():
            if time.time() > deadline:
                log = (d / "log" / "slurmctld.log").read_text()[-1500:] if (d / "log" / "slurmctld.log").exists() else ""
                pytest.skip(f"the Slurm node never came up: {log}")
            time.sleep(1)
        yield env
    finally:
        run(["scancel", "--user", "root"], env=env, timeout=30)
        for pid_file in reversed(daemons):
            try:
                os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
            except (OSError, ValueError):
                pass
        if munged is not None:
            try:
                os.kill(munged, signal.SIGTERM)
            except OSError:
                pass


def jobs(env):
    return run(["squeue", "-h", "-o", "%i %T"], env=env, timeout=30).stdout.split("\n")


def test_trainer_job_and_selfplay_array_on_a_real_slurm_cluster(koma_bin, tmp_path, slurm):
    env = slurm
    config = tmp_path / "tiny.toml"
    config.write_text(CONFIG)
    rundir = str(tmp_path / "run")
    made = run([koma_bin, "pipeline", "--run", rundir, "--config", str(config), "--prepare", "--json"])
    assert made.returncode == 0, made.stderr[-2000:]
    assert json.loads(made.stdout)["model_zero"].endswith("model-00000000.safetensors")
    logs_dir = os.path.join(rundir, "logs")

    def logs():
        out = []
        for f in sorted(os.listdir(logs_dir)) if os.path.isdir(logs_dir) else []:
            if f.startswith("slurm-"):
                with open(os.path.join(logs_dir, f)) as fh:
                    out.append(f"== {f}\n{fh.read()[-1500:]}")
        return "\n".join(out) + "\n" + "\n".join(jobs(env))

    submit = [SUBMIT, "--run", rundir, "--trainer-gpus", "0", "--selfplay-gpus", "0", "--cpus", "2", "--koma", koma_bin]
    r = run([*submit, "--selfplay-tasks", "2"], env=env)
    assert r.returncode == 0, r.stderr
    ids = dict(line.split() for line in r.stdout.split("\n") if line.strip())
    trainer, array = ids["trainer"], ids["selfplay"]

    by_task = lambda t: [s for s in shards(rundir) if re.match(rf"selfplay-.+-a{array}-t{t}-\d+-\d+-\d+\.h5$", os.path.basename(s))]
    models = lambda: sorted(f for f in os.listdir(os.path.join(rundir, "models")) if f.endswith(".safetensors"))
    played_new = lambda t: any(m != "model-00000000" for s in by_task(t) for m in read_shard(s)[1])
    wait_for(lambda: len(models()) >= 3 and played_new(0) and played_new(1), 400,
             "published models, and self-play of both tasks with a trained one", logs)

    def total_samples():
        path = os.path.join(rundir, "train", "metrics.jsonl")
        if not os.path.exists(path):
            return 0
        with open(path) as f:
            return max([json.loads(l)["total_samples"] for l in f if l.strip()] or [0])

    # Task 0 stops: afterwards the trainer must count samples beyond everything task 0 wrote and
    # beyond what it had counted when task 0 ended; only task 1's new shards can give them.
    assert run(["scancel", f"{array}_0"], env=env).returncode == 0
    wait_for(lambda: not any(l.startswith(f"{array}_0 ") for l in jobs(env)), 120, "task 0 to end", logs)
    fixed = max(sum(read_shard(s)[0] for s in by_task(0)), total_samples())
    task1_shards = len(by_task(1))
    wait_for(lambda: len(by_task(1)) > task1_shards and total_samples() > fixed, 300,
             "new shards of task 1 counted by the trainer", logs)

    # Everything stops cleanly on scancel (SIGTERM): the trainer writes its state and lets go of
    # the lease, self-play writes its finished games.
    assert run(["scancel", trainer, array], env=env).returncode == 0
    wait_for(lambda: not [l for l in jobs(env) if l.strip()], 180, "every job to end", logs)
    with open(os.path.join(rundir, "train", "state", "state.json")) as f:
        step = json.load(f)["step"]
    assert step > 0
    assert not os.path.exists(os.path.join(rundir, "trainer.lease"))
    with open(os.path.join(logs_dir, f"slurm-trainer-{trainer}.out")) as f:
        assert ", stopped" in f.read(), logs()
    assert not [f for f in os.listdir(os.path.join(rundir, "selfplay")) if ".tmp-" in f], "a stopped run left a temporary"

    # The run gets an end ([run] steps, 20 past the state); a trainer is submitted again, then,
    # once it has resumed at the state's step over every shard of both tasks, one self-play task.
    # When the trainer reaches the end it marks the run finished, and both jobs end by themselves,
    # no scancel: a cluster run that ends.
    end = step + 20
    config_toml = os.path.join(rundir, "config.toml")
    with open(config_toml, encoding="utf-8") as f:
        text = f.read()
    assert "[run]\n" in text and not re.search(r"^steps\s*=", text, re.M), text
    with open(config_toml, "w", encoding="utf-8") as f:
        f.write(text.replace("[run]\n", f"[run]\nsteps = {end}\n", 1))
    all_shards = shards(rundir)
    samples = sum(read_shard(s)[0] for s in all_shards)
    r = run([*submit, "--no-selfplay"], env=env)
    assert r.returncode == 0, r.stderr
    again = r.stdout.split()[1]
    resumed = os.path.join(logs_dir, f"slurm-trainer-{again}.out")
    line = re.compile(rf"resuming at step {step} → {end} .*window \d+ of {samples} samples in {len(all_shards)} shards")
    read = lambda path: open(path, encoding="utf-8").read() if os.path.exists(path) else ""
    wait_for(lambda: line.search(read(resumed)), 180,
             f"the trainer to resume at step {step} over {len(all_shards)} shards", logs)
    r = run([*submit, "--no-trainer", "--selfplay-tasks", "1", "--evaluator", "--evaluator-gpus", "0"], env=env)
    assert r.returncode == 0, r.stderr
    ids = dict(line.split() for line in r.stdout.split("\n") if line.strip())
    selfplay_job, evaluator_job = ids["selfplay"], ids["evaluator"]
    wait_for(lambda: not [l for l in jobs(env) if l.strip()], 400,
             "the trainer, self-play and the evaluator to end by themselves", logs)
    with open(os.path.join(rundir, "finished.json"), encoding="utf-8") as f:
        assert json.load(f)["step"] == end
    trainer_log = read(resumed)
    assert f"..{end} " in trainer_log and ", stopped" not in trainer_log, logs()
    selfplay_logs = [f for f in os.listdir(logs_dir) if f.startswith(f"slurm-selfplay-{selfplay_job}_")]
    assert selfplay_logs, logs()
    for name in selfplay_logs:
        assert f"the run is finished at step {end}" in read(os.path.join(logs_dir, name)), logs()
    # The evaluator rated the last model against model 0 and played the end-of-run report: its
    # games are in the run's arena results, its ratings in its log.
    evaluator_log = read(os.path.join(logs_dir, f"slurm-evaluator-{evaluator_job}.out"))
    last = f"model-{end:08d}"
    assert f"{last} vs model 0:" in evaluator_log and "ratings (Bradley" in evaluator_log, logs()
    with open(os.path.join(rundir, "arena", "results.jsonl"), encoding="utf-8") as f:
        assert any(last in line for line in f), logs()

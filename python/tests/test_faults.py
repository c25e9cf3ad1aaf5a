"""Injected faults reach the top: a failing or NaN network stops `koma pipeline` within seconds
with an error naming the stage and the cause, every shard written before stays valid, and the run
resumes; a published model truncated afterwards leaves self-play on its last good model, and a
self-play process started on it falls back to the newest older model.
docs/reliability.md lists every fault and the test that covers it."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest

from test_pipeline import CONFIG, models, read_shard, shards, wait_for

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from koma.model import load_checkpoint  # noqa: E402


@pytest.fixture()
def config(tmp_path):
    path = tmp_path / "tiny-test.toml"
    path.write_text(CONFIG)
    return str(path)


def verify_clean(koma_bin, run):
    if not shards(run):
        return
    check = subprocess.run([koma_bin, "data", "verify", os.path.join(run, "selfplay")], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]


@pytest.mark.parametrize("fault, cause", [("forward-error@400", "injected fault"), ("nan@400", "non-finite")])
def test_a_failing_network_stops_the_pipeline_and_the_run_resumes(koma_bin, tmp_path, config, fault, cause):
    run = str(tmp_path / "run")
    env = dict(os.environ, KOMA_FAULT=fault)
    started = time.time()
    # minutes = 0 would wait forever for data if the failure did not reach the top.
    failed = subprocess.run([koma_bin, "pipeline", "--config", config, "--run", run, "--minutes", "0", "--no-report"],
                            capture_output=True, text=True, timeout=300, env=env)
    assert failed.returncode != 0, failed.stderr[-3000:]
    assert "self-play" in failed.stderr and cause in failed.stderr, failed.stderr[-3000:]
    assert time.time() - started < 240
    # The log file has the cause too.
    logs = [os.path.join(run, "logs", f) for f in os.listdir(os.path.join(run, "logs")) if f.endswith(".log")]
    assert any(cause in open(p).read() for p in logs)
    verify_clean(koma_bin, run)
    before = {s: read_shard(s) for s in shards(run)}

    resumed = subprocess.run([koma_bin, "pipeline", "--run", run, "--resume", "--minutes", "0.5", "--no-report", "--json"],
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert summary["stop_reason"] == "time_limit"
    for s, content in before.items():
        assert read_shard(s) == content
    verify_clean(koma_bin, run)


def test_a_truncated_published_model_leaves_self_play_on_its_last_good_one(koma_bin, tmp_path, config):
    run = str(tmp_path / "run")
    made = subprocess.run([koma_bin, "pipeline", "--config", config, "--run", run, "--steps", "10", "--no-report", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr[-3000:]
    good = models(run)[-1]
    env = dict(os.environ, RUST_LOG="info")
    log = tmp_path / "selfplay.log"
    with open(log, "w") as err_file:
        selfplay = subprocess.Popen([koma_bin, "selfplay", "--run", run, "--follow", "--json"],
                                    stdout=subprocess.PIPE, stderr=err_file, text=True, env=env)
    n_shards = len(shards(run))
    wait_for(lambda: len(shards(run)) > n_shards, 240, selfplay, "a shard from the self-play process", log=log)
    # A newer model whose weights lost their second half after it was published.
    stem = os.path.join(run, "models", "model-00009999")
    shutil.copy(os.path.join(run, "models", good), stem + ".safetensors")
    shutil.copy(os.path.join(run, "models", good[: -len(".safetensors")] + ".json"), stem + ".json")
    size = os.path.getsize(stem + ".safetensors")
    with open(stem + ".safetensors", "r+b") as f:
        f.truncate(size // 2)
    # Self-play tries a model a few times before it gives up on it: wait for it to say so (how long
    # that takes depends on the machine's load), then for a shard played after that.
    wait_for(lambda: "keeps playing with" in log.read_text(), 240, selfplay, "self-play giving up on the bad model", log=log)
    n_shards = len(shards(run))
    wait_for(lambda: len(shards(run)) > n_shards, 240, selfplay, "more shards after the bad model appeared", log=log)
    selfplay.send_signal(signal.SIGINT)
    out, _ = selfplay.communicate(timeout=120)
    err = log.read_text()
    assert selfplay.returncode == 0, err[-3000:]
    assert "model-00009999" in err and "keeps playing with" in err, err[-3000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert "model-00009999" not in summary["selfplay"]["models"]
    assert all("model-00009999" not in m for s in shards(run) for m in read_shard(s)[1])
    verify_clean(koma_bin, run)

    # A self-play process started now finds the bad model current: it falls back to the newest
    # older model that loads instead of failing on every start.
    log = tmp_path / "restarted.log"
    with open(log, "w") as err_file:
        restarted = subprocess.Popen([koma_bin, "selfplay", "--run", run, "--follow", "--json"],
                                     stdout=subprocess.PIPE, stderr=err_file, text=True, env=env)
    n_shards = len(shards(run))
    wait_for(lambda: len(shards(run)) > n_shards, 240, restarted, "a shard from a self-play process started on the bad model",
             log=log)
    restarted.send_signal(signal.SIGINT)
    out, _ = restarted.communicate(timeout=120)
    err = log.read_text()
    assert restarted.returncode == 0, err[-3000:]
    assert "cannot use the current model" in err and "model-00009999" in err, err[-3000:]
    assert json.loads(out.strip().splitlines()[-1])["selfplay"]["models"][0] == good[: -len(".safetensors")]
    verify_clean(koma_bin, run)


def test_ctrl_c_stops_standalone_self_play_and_keeps_its_games(koma, koma_bin, tmp_path):
    model = tmp_path / "m.safetensors"
    koma("init", "--config", "tiny", "--out", str(model))
    config = tmp_path / "selfplay.toml"
    config.write_text("[selfplay]\ngames_per_worker = 8\nleaves_per_game = 2\nsimulations = 8\ncheap_simulations = 2\nmax_plies = 64\n")
    out = tmp_path / "shards"
    proc = subprocess.Popen([koma_bin, "selfplay", "--model", str(model), "--config", str(config), "--games", "100000",
                             "--games-per-shard", "2", "--out", str(out), "--json", "--device", "cpu", "--threads", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    shard_files = lambda: sorted(out.glob("*.h5")) if out.exists() else []
    wait_for(lambda: len(shard_files()) >= 1, 240, proc, "a first shard")
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr[-3000:]
    summary = json.loads(stdout.strip().splitlines()[-1])
    written = sum(read_shard(str(s))[0] for s in shard_files())
    assert summary["samples_written"] == written > 0
    check = subprocess.run([koma_bin, "data", "verify", str(out)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout[-2000:]


def test_a_hung_forward_pass_does_not_hold_a_stop_forever(koma_bin, tmp_path, config):
    """A call that never returns (a hung GPU) cannot see the stop flag: the first Ctrl-C still ends
    the process after the grace period, with a message saying why, and every shard stays whole."""
    run = str(tmp_path / "run")
    env = dict(os.environ, KOMA_FAULT="hang@200", KOMA_STOP_GRACE_SECONDS="3")
    log = str(tmp_path / "stderr.txt")
    with open(log, "w") as err:
        proc = subprocess.Popen([koma_bin, "pipeline", "--config", config, "--run", run, "--minutes", "0", "--no-report"],
                                stdout=subprocess.DEVNULL, stderr=err, env=env)
    wait_for(lambda: "this forward pass hangs" in open(log).read(), 240, proc, "the injected hang", log=log)
    signalled = time.time()
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=120) == 130, open(log).read()[-3000:]
    # A lower bound, which load cannot break: the clean stop was given its grace.
    assert time.time() - signalled >= 3
    text = open(log).read()
    assert "still not stopped 3 s after the stop signal" in text and "hung" in text, text[-3000:]
    verify_clean(koma_bin, run)


def run_state(run):
    """(trainer step, samples in shards, shard contents): what must never go backwards."""
    path = os.path.join(run, "train", "state", "state.json")
    step = json.load(open(path))["step"] if os.path.exists(path) else 0
    contents = {s: read_shard(s) for s in shards(run)}
    return step, sum(n for n, _, _ in contents.values()), contents


def check_run(koma_bin, run, before):
    """Nothing partial or corrupt, nothing lost since `before`; returns the state now."""
    verify_clean(koma_bin, run)
    for m in models(run):
        load_checkpoint(os.path.join(run, "models", m))  # weights match their sidecar's SHA-256
    after = run_state(run)
    assert after[0] >= before[0], f"trainer step went back from {before[0]} to {after[0]}"
    assert after[1] >= before[1], f"samples went back from {before[1]} to {after[1]}"
    for shard, content in before[2].items():
        assert after[2].get(shard) == content, f"{shard} changed or vanished"
    return after


def cpu_seconds(pid):
    """User + system CPU time a process has used (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def temporaries(directory):
    """The temporaries of durable writes in `directory` (`.NAME.tmp-HOST-PID-TOKEN-N`)."""
    return {f for f in os.listdir(directory) if ".tmp-" in f} if os.path.isdir(directory) else set()


def writing(run, sub, start, prefix="."):
    """Whether a durable write of a file named PREFIX… is under way in RUN/SUB: a temporary that
    was not there at the process's start (a killed writer leaves its temporary behind)."""
    new = temporaries(os.path.join(run, sub)) - start["temporaries"].get(sub, set())
    return any(f.startswith(prefix) for f in new)


def state_step(run):
    path = os.path.join(run, "train", "state", "state.json")
    return json.load(open(path))["step"] if os.path.exists(path) else 0


def new_model(run, start):
    """A model trained by this process: newer than the training state it resumed from (the
    resume may first publish the state's own checkpoint, which is not new training)."""
    return any(int(m[len("model-"):-len(".safetensors")]) > start["state_step"] for m in models(run))


WRITE_DIRS = ("selfplay", "models", os.path.join("train", "state"))


def metrics_lines(run):
    path = os.path.join(run, "train", "metrics.jsonl")
    return sum(1 for _ in open(path)) if os.path.exists(path) else 0


# Where a kill lands, and how to tell that the pipeline is there: each a predicate over the run
# directory and what it held when the process started. The durable writes pause 200 ms before
# their rename (KOMA_SLOW_PUBLISH_MS), so a kill can land inside one.
PHASES = {
    "start-up": lambda run, start: True,
    "self-play": lambda run, start: len(shards(run)) > start["shards"] and not writing(run, "selfplay", start),
    "training": lambda run, start: metrics_lines(run) > start["metrics"],
    "writing a shard": lambda run, start: writing(run, "selfplay", start),
    "checkpointing": lambda run, start: writing(run, "models", start, prefix=".model-"),
    "saving the training state": lambda run, start: writing(run, WRITE_DIRS[2], start),
    "loading a new model": new_model,
}


def kill_in_phase(proc, log, run, phase, start, rng, timeout=30.0):
    """Waits until `proc` (its stderr in file `log`) is in `phase`, checks that it is alive and has
    done work, and SIGKILLs it. Returns whether the kill landed there (False: the phase never came
    within `timeout`)."""
    started = time.time()
    if phase == "start-up":
        time.sleep(rng.uniform(0.3, 1.0))
        while cpu_seconds(proc.pid) <= 0.05 and time.time() - started < timeout:
            time.sleep(0.01)
    while not PHASES[phase](run, start):
        if proc.poll() is not None:
            pytest.fail(f"koma exited ({proc.returncode}) while waiting for {phase}:\n{log.read_text()[-3000:]}")
        if time.time() - started > timeout:
            break
        time.sleep(0.005)
    landed = PHASES[phase](run, start)
    assert proc.poll() is None, f"the process died before the kill ({phase}):\n{log.read_text()[-3000:]}"
    assert cpu_seconds(proc.pid) > 0.05, f"the process did no work before the kill ({phase})"
    proc.kill()
    proc.wait()
    return landed


def test_chaos_sigkill_at_random_moments_loses_nothing(koma_bin, tmp_path, config):
    """SIGKILLs of a pipeline in each phase of its work (start-up, self-play, training, writing a
    shard, checkpointing, saving the training state, loading a new model), each followed by a
    resume, at least 20 landing where they were aimed; then 10 of separate self-play and trainer
    processes, each checked to be alive and working before its kill. Nothing written is lost."""
    run = str(tmp_path / "run")
    rng = random.Random(16)
    env = dict(os.environ, KOMA_SLOW_PUBLISH_MS="200")
    state = (0, 0, {})
    landed = {phase: 0 for phase in PHASES}
    missed = []
    order = list(PHASES)
    chaos_started = time.time()
    for kill in range(40):
        if sum(landed.values()) >= 20 and min(landed.values()) >= 1:
            break
        if time.time() - chaos_started > 600:
            break
        phase = order[kill % len(order)]
        args = ["--config", config] if kill == 0 else ["--resume"]
        start = {"shards": len(shards(run)), "state_step": state_step(run), "metrics": metrics_lines(run),
                 "temporaries": {sub: temporaries(os.path.join(run, sub)) for sub in WRITE_DIRS}}
        log = tmp_path / f"pipeline-{kill + 1}.log"
        with open(log, "w") as err:
            proc = subprocess.Popen([koma_bin, "pipeline", "--run", run, "--minutes", "0", "--no-report", *args],
                                    stdout=subprocess.DEVNULL, stderr=err, env=env)
        if kill == 0:  # the first run lives long enough to create the run and its model 0
            deadline = time.time() + 60
            while not models(run):
                assert proc.poll() is None and time.time() < deadline, log.read_text()[-3000:]
                time.sleep(0.05)
        if kill_in_phase(proc, log, run, phase, start, rng):
            landed[phase] += 1
            print(f"kill {kill + 1}: {phase}")
        else:
            missed.append(phase)
            print(f"kill {kill + 1}: aimed at {phase}, which did not come within the timeout")
        state = check_run(koma_bin, run, state)
    assert sum(landed.values()) >= 20 and min(landed.values()) >= 1, f"kills by phase: {landed}, missed: {missed}"
    for kill in range(10):
        logs = {name: tmp_path / f"{name}-{kill + 1}.log" for name in ("selfplay", "train")}
        procs = []
        for name, log in logs.items():
            with open(log, "w") as err:
                procs.append(subprocess.Popen([koma_bin, name, "--run", run, "--follow"],
                                              stdout=subprocess.DEVNULL, stderr=err, env=env))
        time.sleep(rng.uniform(1.0, 6.0))
        for p in rng.sample(procs, 2):
            name = p.args[1]
            assert p.poll() is None, f"{name} died before its kill:\n{logs[name].read_text()[-3000:]}"
            assert cpu_seconds(p.pid) > 0.05, f"{name} did no work before its kill"
            p.kill()
            p.wait()
            time.sleep(rng.uniform(0.0, 1.0))
        state = check_run(koma_bin, run, state)
    # And the run still goes on normally.
    resumed = subprocess.run([koma_bin, "pipeline", "--run", run, "--resume", "--minutes", "0.3", "--no-report", "--json"],
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    state = check_run(koma_bin, run, state)
    assert state[0] > 0 and state[1] > 0, "no progress at all"


def file_size_limit(limit):
    """For `preexec_fn`: a file-size limit in the child, our stand-in for a full disk (koma ignores
    SIGXFSZ, so a write past the limit fails with EFBIG, as one fails with ENOSPC on a full disk)."""
    def apply():
        import resource
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def four_games_played(koma, koma_bin, tmp_path):
    """A fresh tiny model's 4 self-play games: 2 shards in `out`, 4 records in `records`; returns
    (model, out, records, the self-play command line to run again)."""
    model = tmp_path / "m.safetensors"
    koma("init", "--config", "tiny", "--out", str(model))
    config = tmp_path / "selfplay.toml"
    config.write_text("[selfplay]\ngames_per_worker = 4\nleaves_per_game = 2\nsimulations = 8\ncheap_simulations = 2\nmax_plies = 64\n")
    out, records = tmp_path / "shards", tmp_path / "records"
    selfplay = [koma_bin, "selfplay", "--model", str(model), "--config", str(config), "--games", "4", "--games-per-shard", "2",
                "--out", str(out), "--records", str(records), "--device", "cpu", "--threads", "1"]
    first = subprocess.run(selfplay, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    return model, out, records, selfplay


def test_a_full_disk_is_a_clear_error_and_nothing_earlier_is_lost(koma, koma_bin, tmp_path):
    model, out, records, selfplay = four_games_played(koma, koma_bin, tmp_path)
    shards_before = {p: p.read_bytes() for p in out.glob("*.h5")}
    records_before = {p: p.read_bytes() for p in records.iterdir()}
    assert len(shards_before) == 2 and len(records_before) == 4

    # Shards (and records): no new shard fits under the limit.
    limit = min(len(b) for b in shards_before.values()) // 2
    full = subprocess.run(selfplay, capture_output=True, text=True, timeout=300, preexec_fn=file_size_limit(limit))
    assert full.returncode != 0, full.stderr[-3000:]
    assert str(out) in full.stderr and ".h5" in full.stderr, full.stderr[-3000:]
    assert not [p for p in out.iterdir() if not p.name.endswith(".h5")], "a temporary file was left behind"
    assert not [p for p in records.iterdir() if ".tmp" in p.name], "a half record was left behind"
    for p, content in shards_before.items():
        assert p.read_bytes() == content
    for p, content in records_before.items():
        assert p.read_bytes() == content
    verify = subprocess.run([koma_bin, "data", "verify", str(out)], capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout[-2000:]

    # A checkpoint (the trainer's and `koma init`'s writes are the same): the old one stays whole.
    good = model.read_bytes()
    full = subprocess.run([koma_bin, "init", "--config", "tiny", "--out", str(model), "--seed", "5"],
                          capture_output=True, text=True, timeout=120, preexec_fn=file_size_limit(len(good) // 2))
    assert full.returncode != 0 and str(model) in full.stderr, full.stderr[-3000:]
    assert "File too large" in full.stderr, full.stderr[-3000:]
    assert model.read_bytes() == good
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name], "a temporary checkpoint was left behind"
    load_checkpoint(str(model))


def no_temporaries(*dirs):
    left = [os.path.join(d, f) for d in dirs if os.path.isdir(d) for f in os.listdir(d) if ".tmp" in f]
    assert not left, f"temporaries left behind: {left}"


def test_a_full_disk_while_recording_training_importing_or_rating_loses_nothing(koma, koma_bin, tmp_path):
    """A file-size limit (a full disk) reached while writing a game record, the trainer's training
    state, a hcpe import's shard and an arena results file: each a clear error naming the file,
    nothing written before it lost, no temporary left."""
    model, out, records, selfplay = four_games_played(koma, koma_bin, tmp_path)
    records_before = {p: p.read_bytes() for p in records.iterdir()}

    # A record: smaller than the smallest record, so the first record of the next game fails.
    limit = min(len(b) for b in records_before.values()) // 2
    full = subprocess.run(selfplay, capture_output=True, text=True, timeout=300, preexec_fn=file_size_limit(limit))
    assert str(records) in full.stderr and "game-" in full.stderr and "File too large" in full.stderr, full.stderr[-3000:]
    no_temporaries(records, out)
    assert {p: p.read_bytes() for p in records.iterdir()} == records_before

    # The trainer's training state (saved before the checkpoint of its step, and larger: it holds
    # the optimiser's buffers too), at a limit the checkpoint alone would fit under. Failing at each
    # step of a trainer's checkpoint write is crates/train/src/trainer/tests.rs
    # `a_failed_save_keeps_the_last_checkpoint_and_state`.
    train = [koma_bin, "train", "--data", str(out), "--batch-size", "16", "--checkpoint-every", "5", "--device", "cpu",
             "--threads", "1", "--out", str(tmp_path / "run")]
    ok = subprocess.run([*train, "--model", str(model), "--steps", "5"], capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr[-3000:]
    models_dir, state_dir = tmp_path / "run" / "models", tmp_path / "run" / "train" / "state"
    saved = {p: p.read_bytes() for d in (models_dir, state_dir) for p in d.iterdir()}
    checkpoint = models_dir / "model-00000005.safetensors"
    full = subprocess.run([*train, "--resume", "--steps", "10"], capture_output=True, text=True, timeout=300,
                          preexec_fn=file_size_limit(len(checkpoint.read_bytes()) + 4096))
    assert full.returncode != 0 and str(state_dir) in full.stderr and "File too large" in full.stderr, full.stderr[-3000:]
    no_temporaries(models_dir, state_dir)
    assert {p: p.read_bytes() for d in (models_dir, state_dir) for p in d.iterdir()} == saved, "something changed"
    assert json.load(open(state_dir / "state.json"))["step"] == 5
    load_checkpoint(str(checkpoint))
    resumed = subprocess.run([*train, "--resume", "--steps", "10"], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]

    # A hcpe import: its first shard does not fit.
    hcpe = tmp_path / "games.hcpe"
    koma("data", "export", "--to", "hcpe", str(out), "--out", str(hcpe))
    imported = tmp_path / "imported"
    full = subprocess.run([koma_bin, "data", "import", "--from", "hcpe", str(hcpe), "--out", str(imported)],
                          capture_output=True, text=True, timeout=300, preexec_fn=file_size_limit(len(hcpe.read_bytes()) // 4))
    assert full.returncode != 0 and str(imported) in full.stderr and "File too large" in full.stderr, full.stderr[-3000:]
    no_temporaries(imported)
    assert not list(imported.glob("*.h5")), "a shard under the limit would be a half shard"

    # An arena results file: the appended line does not fit; the lines before it stay, and the
    # next match cuts the torn line off and goes on.
    results = tmp_path / "arena" / "results.jsonl"
    arena = [koma_bin, "arena", "--player", "greedy", "--player", "random", "--games", "2", "--max-plies", "40",
             "--results", str(results), "--records", str(tmp_path / "arena" / "games")]
    ok = subprocess.run(arena, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr[-3000:]
    before = results.read_bytes()
    full = subprocess.run(arena, capture_output=True, text=True, timeout=300, preexec_fn=file_size_limit(len(before) + 20))
    assert full.returncode != 0 and str(results) in full.stderr, full.stderr[-3000:]
    assert results.read_bytes().startswith(before)
    again = subprocess.run(arena, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(lines) == 4 and results.read_bytes().startswith(before)

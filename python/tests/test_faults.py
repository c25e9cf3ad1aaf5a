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
    selfplay = subprocess.Popen([koma_bin, "selfplay", "--run", run, "--follow", "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    n_shards = len(shards(run))
    wait_for(lambda: len(shards(run)) > n_shards, 240, selfplay, "a shard from the self-play process")
    # A newer model whose weights lost their second half after it was published.
    stem = os.path.join(run, "models", "model-00009999")
    shutil.copy(os.path.join(run, "models", good), stem + ".safetensors")
    shutil.copy(os.path.join(run, "models", good[: -len(".safetensors")] + ".json"), stem + ".json")
    size = os.path.getsize(stem + ".safetensors")
    with open(stem + ".safetensors", "r+b") as f:
        f.truncate(size // 2)
    time.sleep(8)  # self-play tries a model a few times, 2 s apart, before it gives up on it
    n_shards = len(shards(run))
    wait_for(lambda: len(shards(run)) > n_shards, 240, selfplay, "more shards after the bad model appeared")
    selfplay.send_signal(signal.SIGINT)
    out, err = selfplay.communicate(timeout=120)
    assert selfplay.returncode == 0, err[-3000:]
    assert "model-00009999" in err and "keeps playing with" in err, err[-3000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert "model-00009999" not in summary["selfplay"]["models"]
    assert all("model-00009999" not in m for s in shards(run) for m in read_shard(s)[1])
    verify_clean(koma_bin, run)

    # A self-play process started now finds the bad model current: it falls back to the newest
    # older model that loads instead of failing on every start.
    restarted = subprocess.Popen([koma_bin, "selfplay", "--run", run, "--follow", "--json"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    n_shards = len(shards(run))
    wait_for(lambda: len(shards(run)) > n_shards, 240, restarted, "a shard from a self-play process started on the bad model")
    restarted.send_signal(signal.SIGINT)
    out, err = restarted.communicate(timeout=120)
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


def test_chaos_sigkill_at_random_moments_loses_nothing(koma_bin, tmp_path, config):
    """20 SIGKILLs of a pipeline, then 10 of separate self-play and trainer processes, each at a
    random moment (start-up, loading, training, writing), each followed by a resume."""
    run = str(tmp_path / "run")
    rng = random.Random(16)
    state = (0, 0, {})
    for kill in range(20):
        args = ["--config", config] if kill == 0 else ["--resume"]
        proc = subprocess.Popen([koma_bin, "pipeline", "--run", run, "--minutes", "0", "--no-report", *args],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        # The first run lives long enough to create the run directory.
        time.sleep(rng.uniform(3.0, 6.0) if kill == 0 else rng.uniform(0.5, 6.0))
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        proc.kill()
        proc.wait()
        state = check_run(koma_bin, run, state)
    for kill in range(10):
        selfplay = subprocess.Popen([koma_bin, "selfplay", "--run", run, "--follow"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        trainer = subprocess.Popen([koma_bin, "train", "--run", run, "--follow"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.5, 6.0))
        for p in rng.sample([selfplay, trainer], 2):
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


def test_a_full_disk_is_a_clear_error_and_nothing_earlier_is_lost(koma, koma_bin, tmp_path):
    model = tmp_path / "m.safetensors"
    koma("init", "--config", "tiny", "--out", str(model))
    config = tmp_path / "selfplay.toml"
    config.write_text("[selfplay]\ngames_per_worker = 4\nleaves_per_game = 2\nsimulations = 8\ncheap_simulations = 2\nmax_plies = 64\n")
    out, records = tmp_path / "shards", tmp_path / "records"
    selfplay = [koma_bin, "selfplay", "--model", str(model), "--config", str(config), "--games", "4", "--games-per-shard", "2",
                "--out", str(out), "--records", str(records), "--device", "cpu", "--threads", "1"]
    first = subprocess.run(selfplay, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    shards_before = {p: p.read_bytes() for p in out.glob("*.h5")}
    records_before = {p: p.read_bytes() for p in records.iterdir()}
    assert len(shards_before) == 2 and len(records_before) == 4

    # Shards (and records): no new shard fits under the limit.
    limit = min(len(b) for b in shards_before.values()) // 2
    full = subprocess.run(selfplay, capture_output=True, text=True, timeout=300, preexec_fn=file_size_limit(limit))
    assert full.returncode != 0, full.stderr[-3000:]
    assert str(out) in full.stderr and ".h5" in full.stderr, full.stderr[-3000:]
    assert not [p for p in out.iterdir() if not p.name.endswith(".h5")], "a temporary file was left behind"
    assert not [p for p in records.iterdir() if p.name.endswith(".tmp")], "a half record was left behind"
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

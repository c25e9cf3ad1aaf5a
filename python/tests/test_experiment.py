"""`koma experiment` end to end on a tiny budget: two variants from one spec file, the experiment
killed with SIGKILL while the first variant trains, resumed, and checked: the report, the results,
the plot, every pairing played the right number of times, the budget honoured across the kill.
Also the errors for bad input, none of which may panic."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter

import pytest

CONFIG = """
[run]
threads = 1
games_per_shard = 2

[model]
blocks = 1
channels = 16

[selfplay]
games_per_worker = 8
leaves_per_game = 2
simulations = {simulations}
cheap_simulations = 2
full_search_fraction = 0.5
max_plies = 96

[train]
batch_size = 32
checkpoint_every = 10
log_every = 5

[train.follow]
min_window_samples = 100
samples_per_new_sample = 4.0
poll_seconds = 0.5
refresh_every_batches = 2
"""

CPU_MINUTES = 0.25
GAMES = 4

SPEC = f"""
cpu_minutes = {CPU_MINUTES}
games = {GAMES}
simulations = 4
curve_points = 2
curve_games = 2
max_plies = 96

[[variant]]
name = "base"
config = "base.toml"

[[variant]]
name = "more-sims"
config = "more.toml"
"""


@pytest.fixture()
def configs(tmp_path):
    (tmp_path / "base.toml").write_text(CONFIG.format(simulations=8))
    (tmp_path / "more.toml").write_text(CONFIG.format(simulations=12))
    (tmp_path / "exp.toml").write_text(SPEC)
    return tmp_path


def checkpoints(run):
    d = os.path.join(run, "models")
    return sorted(f for f in os.listdir(d) if f.endswith(".safetensors")) if os.path.isdir(d) else []


def pipelines_on(run):
    """Pids of processes whose command line names the run directory."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().decode(errors="replace")
        except OSError:
            continue
        if "pipeline" in cmd and run in cmd:
            pids.append(int(pid))
    return pids


def test_experiment_survives_kill_resumes_and_reports(koma_bin, configs):
    exp = str(configs / "E")
    env = dict(os.environ, RUST_LOG="info")
    proc = subprocess.Popen([koma_bin, "experiment", "--spec", str(configs / "exp.toml"), "--dir", exp],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    run_a = os.path.join(exp, "runs", "base")
    deadline = time.time() + 120
    while len(checkpoints(run_a)) < 3:
        if proc.poll() is not None:
            pytest.fail(f"koma experiment exited ({proc.returncode}) early:\n{proc.communicate()[1][-3000:]}")
        if time.time() > deadline:
            proc.kill()
            pytest.fail(f"no checkpoints in {run_a}:\n{proc.communicate()[1][-3000:]}")
        time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()

    # The pipeline it ran is told to stop (SIGTERM on the parent's death) and does so cleanly.
    deadline = time.time() + 60
    while pipelines_on(run_a) and time.time() < deadline:
        time.sleep(0.2)
    assert not pipelines_on(run_a), "the variant's pipeline outlived the killed experiment"
    state = json.load(open(os.path.join(exp, "state.json")))
    seg = state["variants"]["base"]["segments"]
    assert len(seg) == 1 and not seg[0]["ended"] and not state["variants"]["base"]["finished"]
    assert "--config" in seg[0]["command"] and "--cpu-minutes" in seg[0]["command"]

    # A new experiment in the same directory is refused; --resume continues it.
    again = subprocess.run([koma_bin, "experiment", "--spec", str(configs / "exp.toml"), "--dir", exp], capture_output=True, text=True)
    assert again.returncode != 0 and "--resume" in again.stderr and "panicked" not in again.stderr
    resumed = subprocess.run([koma_bin, "experiment", "--dir", exp, "--resume", "--json"], capture_output=True, text=True, timeout=400, env=env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    report = json.loads(resumed.stdout.strip().splitlines()[-1])

    state = json.load(open(os.path.join(exp, "state.json")))
    base = state["variants"]["base"]
    assert base["finished"] and len(base["segments"]) == 2
    assert "--resume" in base["segments"][1]["command"]
    assert state["variants"]["more-sims"]["finished"] and len(state["variants"]["more-sims"]["segments"]) == 1
    rows = {r["variant"]: r for r in report["variants"]}
    assert set(rows) == {"base", "more-sims"}
    for name, r in rows.items():
        # Equal compute: each used its CPU budget (a little more: process start-up, the last poll).
        assert CPU_MINUTES * 0.9 <= r["cpu_minutes"] <= CPU_MINUTES + 0.25, (name, r)
        assert r["trainer_steps"] > 0 and r["selfplay_games"] > 0 and r["samples"] > 0
        assert r["elo"] is not None and r["margin"] > 0 and r["games_vs_anchor"] == GAMES
    for name in rows:
        # The pipeline stopped at its CPU limit the way it stops at a time limit: the trainer wrote
        # a last checkpoint and the state that points at it.
        run = os.path.join(exp, "runs", name)
        step = json.load(open(os.path.join(run, "train", "state", "state.json")))["step"]
        assert checkpoints(run)[-1] == f"model-{step:08d}.safetensors" and step == rows[name]["trainer_steps"]
    assert report["anchor"] == "greedy"
    assert len(report["model_zero"]) == 1  # same [model]: one shared model 0
    assert [d["field"] for d in report["config_differences"]] == ["selfplay.simulations"]
    assert len(report["pipeline_commands"]) == 3

    # Every pairing of the round robin was played exactly GAMES times.
    with open(os.path.join(exp, "results.jsonl")) as f:
        games = [json.loads(line) for line in f if line.strip()]
    pairings = Counter(frozenset((g["black"], g["white"])) for g in games)
    assert pairings == {frozenset(p): GAMES for p in [("base@4", "more-sims@4"), ("base@4", "greedy"), ("more-sims@4", "greedy")]}, pairings
    assert os.path.getsize(os.path.join(exp, "curve.jsonl")) > 0
    for c in report["curves"]:
        assert c["points"][0]["at"] == 0 and c["points"][-1]["step"] == rows[c["variant"]]["trainer_steps"]
    md = open(os.path.join(exp, "report.md")).read()
    for text in ("| variant | Elo | 95% CI", "base", "more-sims", "selfplay.simulations", "koma experiment", "pipeline --resume"):
        assert text in md, text
    assert os.path.getsize(os.path.join(exp, "elo-over-time.png")) > 1000
    assert "elo-over-time.png" in md

    # A finished experiment with --resume only redoes the report: no pipeline started, no game
    # played (judged by what it wrote, not by how long it took).
    lines_before = open(os.path.join(exp, "results.jsonl")).read()
    curve_before = open(os.path.join(exp, "curve.jsonl")).read()
    segments_before = {n: len(v["segments"]) for n, v in state["variants"].items()}
    redo = subprocess.run([koma_bin, "experiment", "--dir", exp, "--resume"], capture_output=True, text=True, timeout=120)
    assert redo.returncode == 0, redo.stderr[-3000:]
    assert "variant" in redo.stdout
    assert open(os.path.join(exp, "results.jsonl")).read() == lines_before
    assert open(os.path.join(exp, "curve.jsonl")).read() == curve_before
    after = json.load(open(os.path.join(exp, "state.json")))
    assert {n: len(v["segments"]) for n, v in after["variants"].items()} == segments_before


def test_bad_input_is_refused_with_clear_errors(koma_bin, configs):
    base = str(configs / "base.toml")

    def refused(*args, expect):
        p = subprocess.run([koma_bin, "experiment", *args], capture_output=True, text=True, timeout=60)
        assert p.returncode != 0, p.stdout
        assert expect in p.stderr, p.stderr
        assert "panicked" not in p.stderr

    d = str(configs / "bad")
    refused("--dir", d, "--cpu-minutes", "1", "--variant", f"a={base}", expect="at least two variants")
    refused("--dir", d, "--cpu-minutes", "1", "--variant", f"a={base}", "--variant", f"a={base}", expect='two variants are named "a"')
    refused("--dir", d, "--cpu-minutes", "1", "--variant", f"a={base}", "--variant", "b=/no/such.toml", expect="/no/such.toml")
    refused("--dir", d, "--variant", f"a={base}", "--variant", f"b={base}", expect="no budget")
    refused("--dir", d, "--minutes", "1", "--variant", f"a={base}", "--variant", f"greedy={base}", expect="greedy")
    refused("--dir", str(configs), "--minutes", "1", "--variant", f"a={base}", "--variant", f"b={base}", expect="not empty")
    refused("--dir", d, "--resume", expect="not an experiment")
    refused("--dir", d, "--spec", str(configs / "nothing.toml"), expect="nothing.toml")
    assert not os.path.exists(d), "a refused experiment leaves nothing behind"

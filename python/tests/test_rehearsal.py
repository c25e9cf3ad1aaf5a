"""A CPU rehearsal of configs/gpu-small.toml's logic (configs/rehearsal/gpu-small-cpu.toml: the same
settings with the network and sizes scaled down), run as a cluster would run it: a trainer and two
self-play processes posing as two hosts on one run directory. Checked: `koma plan` gives the
config's timeline; trained models are published and both self-play processes switch to them;
the two processes draw their own seeds and play different games; every sample keeps the root
value estimates and `koma data stats` sets them against the results, the value target being the
configured estimate."""

from __future__ import annotations

import json
import os
import signal
import subprocess

from test_pipeline import models, shards, shard_games, read_shard, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "configs", "rehearsal", "gpu-small-cpu.toml")


def test_plan_of_the_gpu_configs(koma_bin):
    """`koma plan` on the GPU configs at stated throughputs: first model and cadence as documented."""
    plan = subprocess.run([koma_bin, "plan", os.path.join(ROOT, "configs", "gpu-small.toml"),
                           "--evals-per-s", "100000", "--train-samples-per-s", "20000", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert plan.returncode == 0, plan.stderr[-3000:]
    p = json.loads(plan.stdout)["plan"]
    assert p["first_model_minutes"] < 15, p["first_model_minutes"]
    assert 1 < p["minutes_per_model"] < 10, p["minutes_per_model"]
    assert p["trainer_limited_by"].startswith("the follow ratio")
    assert 12 < p["schedule_end_hours"] < 48, p["schedule_end_hours"]
    assert not p["warnings"], p["warnings"]
    rehearsal = subprocess.run([koma_bin, "plan", CONFIG, "--evals-per-s", "900", "--train-samples-per-s", "250",
                                "--json"], capture_output=True, text=True, timeout=120)
    assert rehearsal.returncode == 0, rehearsal.stderr[-3000:]
    r = json.loads(rehearsal.stdout)["plan"]
    assert r["first_model_minutes"] < 10 and r["minutes_per_model"] < 10, r


def test_gpu_small_rehearsed_on_the_cpu_as_separate_processes(koma_bin, tmp_path):
    run = str(tmp_path / "run")
    made = subprocess.run([koma_bin, "pipeline", "--config", CONFIG, "--run", run, "--prepare"],
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr[-3000:]
    as_host = lambda host: dict(os.environ, KOMA_HOST=host)
    trainer = subprocess.Popen([koma_bin, "train", "--run", run, "--follow", "--json"], env=as_host("host-a"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    selfplay = {h: subprocess.Popen([koma_bin, "selfplay", "--run", run, "--follow", "--json"], env=as_host(h),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for h in ("host-a", "host-b")}
    by_host = lambda h: [s for s in shards(run) if os.path.basename(s).startswith(f"selfplay-{h}-")]
    try:
        # A trained model (beyond model 0), and games played with it by both processes.
        def both_switched():
            played = {h: {m for s in by_host(h) for m in read_shard(s)[1]} for h in ("host-a", "host-b")}
            return len(models(run)) >= 2 and all(any(m != "model-00000000" for m in p) for p in played.values())

        wait_for(both_switched, 600, trainer, "a trained model played by both self-play processes")
    finally:
        for p in (trainer, *selfplay.values()):
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        outs = {id(p): p.communicate(timeout=180) for p in (trainer, *selfplay.values())}
    for p in (trainer, *selfplay.values()):
        assert p.returncode == 0, outs[id(p)][1][-3000:]
    # Models are published every checkpoint_every steps (the step is in the name).
    steps = sorted(int(m.split("-")[1].split(".")[0]) for m in models(run))
    assert steps[0] == 0 and all(s % 100 == 0 for s in steps[1:-1]), steps
    # Two processes, two seeds, no game played twice.
    seeds = {h: {shard_games(s)[0] for s in by_host(h)} for h in ("host-a", "host-b")}
    assert all(len(v) == 1 for v in seeds.values()) and seeds["host-a"] != seeds["host-b"], seeds
    games = {h: [g for s in by_host(h) for g in shard_games(s)[1]] for h in ("host-a", "host-b")}
    assert not set(games["host-a"]) & set(games["host-b"])
    # Every sample keeps the root value estimates; the stored target is the configured one (visits).
    stats = subprocess.run([koma_bin, "data", "stats", os.path.join(run, "selfplay"), "--json"],
                           capture_output=True, text=True, timeout=120)
    assert stats.returncode == 0, stats.stderr[-3000:]
    cal = json.loads(stats.stdout)["calibration"]
    fits = {f["estimate"]: f for f in cal["overall"]}
    assert set(fits) == {"target", "network", "visits", "mixed", "improved"}, fits.keys()
    samples = json.loads(stats.stdout)["samples"]
    assert all(f["samples"] == samples for f in fits.values()), fits
    assert abs(fits["target"]["mean_predicted"] - fits["visits"]["mean_predicted"]) < 1e-3, fits
    assert cal["by_ply"] and cal["by_ply"][0]["from"] == 0

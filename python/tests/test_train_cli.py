"""`koma train` end to end through the binary: self-play shards → training → checkpoints,
metrics, an exact --resume, the plot; clear refusals; and a `koma bench train` smoke run."""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from koma import plot  # noqa: E402

SMALL = {"blocks": 1, "channels": 16, "policy_channels": 8, "value_channels": 2, "value_hidden": 16}


def test_selfplay_then_train_resume_and_plot(koma, koma_bin, tmp_path):
    (tmp_path / "small.json").write_text(json.dumps(SMALL))
    run = tmp_path / "run"
    init = run / "models" / "model-00000000.safetensors"
    koma("init", "--config", str(tmp_path / "small.json"), "--out", str(init))
    sp = tmp_path / "sp.toml"
    sp.write_text("[selfplay]\nworkers = 2\ngames_per_worker = 1\nsimulations = 8\ncheap_simulations = 4\nmax_plies = 40\n")
    # Two devices (two CPU inference services here), a worker on each.
    out = koma("selfplay", "--model", str(init), "--games", "4", "--out", str(run / "selfplay"), "--config", str(sp), "--device", "cpu,cpu", "--json")
    assert json.loads(out.stdout)["stats"]["games"] == 4

    common = ["--data", str(run), "--batch-size", "16", "--device", "cpu", "--threads", "1", "--json"]
    out = koma("train", "--model", str(init), "--steps", "4", "--checkpoint-every", "2", *common)
    s = json.loads(out.stdout)
    assert (s["start_step"], s["final_step"], s["samples_seen"], s["resumed"]) == (0, 4, 64, False)
    assert [p.rsplit("/", 1)[-1] for p in s["checkpoints"]] == ["model-00000002.safetensors", "model-00000004.safetensors"]
    sidecar = json.loads((run / "models" / "model-00000004.json").read_text())
    assert (sidecar["step"], sidecar["samples_seen"], sidecar["parent"]) == (4, 64, "model-00000002.safetensors")
    assert (run / "train" / "state" / "state.json").exists()

    # A fresh start over an existing state is refused; --resume continues to the new target.
    bad = subprocess.run([koma_bin, "train", "--model", str(init), "--steps", "6", *common], capture_output=True, text=True)
    assert bad.returncode == 1 and "--resume" in bad.stderr
    # The state of a one-device run resumes data parallel on two replicas (the state holds only
    # the master weights).
    two = [a if a != "cpu" else "cpu,cpu" for a in common]
    s = json.loads(koma("train", "--steps", "6", "--resume", *two).stdout)
    assert (s["start_step"], s["final_step"], s["resumed"], s["device"]) == (4, 6, True, "cpu,cpu")

    records = plot.read_metrics(str(run / "train" / "metrics.jsonl"))
    assert [r["step"] for r in records] == [4, 6]
    assert all(0 <= r["policy_top1"] <= 1 and r["policy_loss"] > 0 for r in records)
    assert plot.main([str(run)]) == 0
    assert (run / "train-loss.png").stat().st_size > 0 and (run / "train-accuracy.png").stat().st_size > 0


def test_train_errors_are_clear(koma_bin, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    r = subprocess.run([koma_bin, "train", "--data", str(empty), "--model", "tiny", "--steps", "2", "--device", "cpu"],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "no readable samples" in r.stderr
    r = subprocess.run([koma_bin, "train", "--data", str(empty), "--steps", "2", "--device", "cpu", "--resume"],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "no training state" in r.stderr
    r = subprocess.run([koma_bin, "train", "--data", str(empty), "--model", "nonsense", "--steps", "2"], capture_output=True, text=True)
    assert r.returncode == 1 and "preset" in r.stderr


def test_bench_train_smoke(koma, tmp_path):
    (tmp_path / "small.json").write_text(json.dumps(SMALL))
    out = koma("bench", "train", "--json", "--nets", str(tmp_path / "small.json"), "--batch-size", "8", "--seconds", "0",
               "--min-steps", "1", "--rounds", "1", "--threads", "1", "--end-to-end", "--python", sys.executable)
    r = json.loads(out.stdout)
    (net,) = r["nets"]
    assert r["device"] == "cpu" and r["threads"] == 1 and net["batch_size"] == 8
    assert net["koma"]["samples_per_second"] > 0 and net["pytorch"]["samples_per_second"] > 0
    assert net["ratio"] > 0 and net["end_to_end"]["steps"] >= 1

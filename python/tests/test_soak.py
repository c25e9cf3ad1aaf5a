"""The soak tool samples a process's memory, descriptors and threads from /proc, stops it after
its time, writes the CSV, the plot and a summary, and fails past its bounds (scripts/soak runs it
on koma pipeline); a short soak of the embedded pipeline passes the bounds docs/reliability.md
derives."""

import csv
import os
import subprocess
import sys

PYTHON_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def test_soak_samples_a_process_and_stops_it(tmp_path):
    out = tmp_path / "soak"
    # A process that holds more descriptors and memory over time: the samples must show both.
    grower = ("import time, os\nfiles=[]\nblob=[]\nfor i in range(100):\n"
              "    files.append(open(os.devnull))\n    blob.append(bytearray(2 << 20))\n    time.sleep(0.1)\n")
    done = subprocess.run([sys.executable, "-m", "koma.soak", "--out", str(out), "--every", "0.3", "--minutes", "0.05",
                           "--", sys.executable, "-c", grower], cwd=PYTHON_DIR, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "verdict: none" in done.stdout
    rows = list(csv.DictReader(open(out / "soak.csv")))
    assert len(rows) >= 5
    assert float(rows[-1]["rss_mib"]) > float(rows[0]["rss_mib"]) + 4
    assert int(rows[-1]["fds"]) > int(rows[0]["fds"])
    assert os.path.getsize(out / "soak.png") > 1000
    summary = (out / "summary.txt").read_text()
    assert "resident memory" in summary and "MiB/hour" in summary


def test_a_leak_fails_the_verdict(tmp_path):
    """Memory that grows while the descriptors stay put is a leak: the verdict says FAIL and the
    soak exits 1; the same process passes bounds it stays within."""
    leaker = ("import time\nblob=[]\nfor i in range(100):\n    blob.append(bytearray(2 << 20))\n"
              "    blob[-1][::4096] = b'x' * len(blob[-1][::4096])\n    time.sleep(0.1)\n")
    soak = [sys.executable, "-m", "koma.soak", "--every", "0.3", "--minutes", "0.08"]
    failed = subprocess.run([*soak, "--out", str(tmp_path / "a"), "--max-slope", "1000", "--max-fds", "64",
                             "--", sys.executable, "-c", leaker], cwd=PYTHON_DIR, capture_output=True, text=True, timeout=60)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "verdict: FAIL" in failed.stdout and "a leak" in failed.stdout, failed.stdout
    passed = subprocess.run([*soak, "--out", str(tmp_path / "b"), "--max-rss-mib", "4096", "--max-fds", "64",
                             "--", sys.executable, "-c", leaker], cwd=PYTHON_DIR, capture_output=True, text=True, timeout=60)
    assert passed.returncode == 0 and "verdict: PASS" in passed.stdout, passed.stdout + passed.stderr
    over = subprocess.run([*soak, "--out", str(tmp_path / "c"), "--max-rss-mib", "50",
                           "--", sys.executable, "-c", leaker], cwd=PYTHON_DIR, capture_output=True, text=True, timeout=60)
    assert over.returncode == 1 and "over the bound of 50 MiB" in over.stdout, over.stdout


def short_soak(run):
    """scripts/soak's judgement on a short run: growth after the warm-up (the first published
    model: model 0 and model 100 on disk), per 100 trainer steps, in both halves of the samples
    spanning the next 100 steps (however long a loaded machine takes for them)."""
    return ["--every", "3", "--minutes", "14", "--judge-steps", "100",
            "--warm-files", str(run / "models" / "model-*.safetensors"), "--warm-count", "2",
            "--steps-from", str(run / "train" / "metrics.jsonl"),
            "--max-fds", "520", "--max-rss-mib", "3700", "--max-growth", str(SHORT_SOAK_GROWTH)]  # fmt: skip


def test_a_short_soak_of_the_embedded_pipeline_passes(koma_bin, tmp_path):
    """`koma pipeline` on the embedded default under the bounds of scripts/soak: descriptors and
    memory within them, and no sustained growth per trainer step after the warm-up."""
    out = tmp_path / "soak"
    done = subprocess.run(
        [sys.executable, "-m", "koma.soak", "--out", str(out), *short_soak(out / "run"),
         "--", koma_bin, "pipeline", "--run", str(out / "run"), "--minutes", "0", "--no-report"],
        cwd=PYTHON_DIR, capture_output=True, text=True, timeout=1000,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + (out / "command.log").read_text()[-3000:]
    assert "verdict: PASS" in done.stdout
    rows = list(csv.DictReader(open(out / "soak.csv")))
    warm = [r for r in rows if r["warm"] == "True"]
    assert len(warm) >= 8 and int(warm[-1]["step"]) - int(warm[0]["step"]) >= 100, "judged over 100 steps after the warm-up"


def test_a_leak_planted_in_the_trainer_fails_the_short_soak(koma_bin, tmp_path):
    """The same judgement on a run whose trainer keeps 2 MiB a step (KOMA_LEAK_MIB_PER_STEP): FAIL,
    exit 1. A small config, so that its steps come fast; the leak is per step either way."""
    config = tmp_path / "small.toml"
    config.write_text(SMALL_CONFIG)
    out = tmp_path / "soak"
    done = subprocess.run(
        [sys.executable, "-m", "koma.soak", "--out", str(out), *short_soak(out / "run"),
         "--", koma_bin, "pipeline", "--config", str(config), "--run", str(out / "run"), "--minutes", "0", "--no-report"],
        cwd=PYTHON_DIR, capture_output=True, text=True, timeout=600,
        env=dict(os.environ, KOMA_LEAK_MIB_PER_STEP="2"),
    )  # fmt: skip
    assert done.returncode == 1, done.stdout[-3000:] + (out / "command.log").read_text()[-3000:]
    assert "verdict: FAIL" in done.stdout and "a leak" in done.stdout, done.stdout[-2000:]
    assert "planted leak" in (out / "command.log").read_text()


def test_no_verdict_without_samples_after_the_warm_up(tmp_path):
    """A soak stopped before the warm-up ended measured nothing: "not measured", exit 2, never PASS."""
    out = tmp_path / "soak"
    done = subprocess.run([sys.executable, "-m", "koma.soak", "--out", str(out), "--every", "0.2", "--minutes", "0.03",
                           "--warm-files", str(tmp_path / "never-*"), "--max-slope", "50",
                           "--", sys.executable, "-c", "import time; time.sleep(30)"],
                          cwd=PYTHON_DIR, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "verdict: not measured" in done.stdout and "PASS" not in done.stdout, done.stdout


# MiB per 100 trainer steps of growth that open shards do not explain, in both halves after the
# warm-up (docs/reliability.md "Soak" derives it): the window in memory adds under 1 MiB per 100
# steps, a 3-second sample's noise a few MiB; the planted leak adds 200.
SHORT_SOAK_GROWTH = 30

SMALL_CONFIG = """
[run]
threads = 1
games_per_shard = 2
[selfplay]
games_per_worker = 8
leaves_per_game = 2
simulations = 8
cheap_simulations = 2
max_plies = 96
[train]
batch_size = 32
checkpoint_every = 10
log_every = 2
[train.follow]
min_window_samples = 100
samples_per_new_sample = 4.0
poll_seconds = 0.5
refresh_every_batches = 2
"""

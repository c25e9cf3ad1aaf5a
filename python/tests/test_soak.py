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


def test_a_short_soak_of_the_embedded_pipeline_passes(koma_bin, tmp_path):
    """Three minutes of `koma pipeline` on the embedded default under the bounds of scripts/soak:
    descriptors and memory within them, and no growth that open shards do not explain beyond
    SHORT_SOAK_SLOPE (a short run's second half still warms up: the bound catches gross leaks,
    the 2-hour soak of docs/benchmarks.md the slow ones)."""
    out = tmp_path / "soak"
    done = subprocess.run(
        [sys.executable, "-m", "koma.soak", "--out", str(out), "--every", "5", "--minutes", "3",
         "--max-fds", "520", "--max-rss-mib", "3700", "--max-slope", str(SHORT_SOAK_SLOPE),
         "--", koma_bin, "pipeline", "--run", str(out / "run"), "--minutes", "0", "--no-report"],
        cwd=PYTHON_DIR, capture_output=True, text=True, timeout=500,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + (out / "command.log").read_text()[-3000:]
    assert "verdict: PASS" in done.stdout
    rows = list(csv.DictReader(open(out / "soak.csv")))
    assert len(rows) >= 20, "the pipeline ran for the whole soak"


# MiB/hour: the short soak's bound on unexplained growth (docs/reliability.md "Soak" derives it).
# Warm-up still falls into a 3-minute run's judged half on a loaded machine (+2898 and +6754
# MiB/hour measured in full-suite runs beside other work): only gross leaks are caught here.
SHORT_SOAK_SLOPE = 12000

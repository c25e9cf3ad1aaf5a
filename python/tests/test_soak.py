"""The soak tool samples a process's memory, descriptors and threads from /proc, stops it after
its time, and writes the CSV, the plot and a summary (scripts/soak runs it on koma pipeline)."""

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
    rows = list(csv.DictReader(open(out / "soak.csv")))
    assert len(rows) >= 5
    assert float(rows[-1]["rss_mib"]) > float(rows[0]["rss_mib"]) + 4
    assert int(rows[-1]["fds"]) > int(rows[0]["fds"])
    assert os.path.getsize(out / "soak.png") > 1000
    summary = (out / "summary.txt").read_text()
    assert "resident memory" in summary and "MiB/hour" in summary

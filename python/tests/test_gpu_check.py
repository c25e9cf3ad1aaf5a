"""scripts/gpu-check in its dry mode (every step on the CPU with the tiny net and tiny budgets):
each step runs and succeeds, and the report names them with their outputs."""

import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_gpu_check_dry_run_writes_a_complete_report(koma_bin, tmp_path):
    out = tmp_path / "check"
    proc = subprocess.run([os.path.join(ROOT, "scripts", "gpu-check"), "--koma", koma_bin, "--out", str(out), "--dry-run"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["dry_run"] is True
    names = [s["name"] for s in report["steps"]]
    assert names == ["info", "bench-nn-f32", "bench-selfplay-s1", "bench-selfplay-s2", "bench-selfplay-simulated",
                     "bench-train-f32", "pipeline", "onnx-init", "onnx-export", "bench-onnx"], names
    for s in report["steps"]:
        assert s["ok"], (s, (out / f"{s['name']}.log").read_text()[-2000:])
        assert s["output"] is not None, s
    assert report["steps"][1]["output"]["device"] == "cpu" and report["steps"][1]["output"]["nets"]
    steps = {s["name"]: s["output"] for s in report["steps"]}
    assert [steps[f"bench-selfplay-s{n}"]["services"] for n in (1, 2)] == [1, 2]
    simulated = steps["bench-selfplay-simulated"]
    assert [d["services"] for d in simulated["designs"]] == [1, 2]
    assert all(d["evaluations"] > 0 and 0 < d["device_busy_fraction"] <= 1 for d in simulated["designs"]), simulated
    cpu = steps["bench-onnx"]["providers"]["cpu"]
    assert cpu["available"] and all(b["positions_per_second"] > 0 for b in cpu["batches"].values()), cpu
    assert sorted(cpu["batches"]) == ["1", "8"], cpu
    md = (out / "report.md").read_text()
    assert "Dry run" in md and "| bench-train-f32 | ok |" in md and "Self-play: measured and simulated" in md
    assert "ONNX Runtime (positions/s)" in md and "| cpu |" in md

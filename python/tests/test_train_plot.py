"""koma.plot draws the training curves of a run from train/metrics.jsonl."""

import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from koma import plot  # noqa: E402


def write_metrics(run, n=20, garbage=True):
    train = run / "train"
    train.mkdir(parents=True)
    with open(train / "metrics.jsonl", "w", encoding="utf-8") as f:
        for i in range(1, n + 1):
            rec = {
                "step": 10 * i,
                "samples_seen": 2560 * i,
                "lr": 0.1 * 0.5 * (1 + math.cos(math.pi * i / n)),
                "policy_loss": 7.0 / i,
                "value_loss": 1.1 - 0.01 * i,
                "loss": 7.0 / i + 1.1 - 0.01 * i,
                "policy_top1": min(1.0, 0.05 * i),
                "value_accuracy": 0.4 + 0.01 * i,
                "grad_norm": 1.0,
                "samples_per_second": 300.0,
                "steps": 10,
                "skipped_steps": 0,
                "loss_scale": None,
                "window_samples": 1000,
                "total_samples": 1000,
                "time_unix": 0.0,
            }
            f.write(json.dumps(rec) + "\n")
        if garbage:
            f.write('{"step": 99')  # a line cut short by a crash is ignored


def is_png(path):
    with open(path, "rb") as f:
        return f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_plots_loss_and_accuracy_into_the_run_dir(tmp_path, capsys):
    run = tmp_path / "run"
    write_metrics(run)
    assert plot.main([str(run)]) == 0
    out = capsys.readouterr().out.split()
    assert out == [str(run / "train-loss.png"), str(run / "train-accuracy.png")]
    assert all(is_png(p) for p in out)


def test_accepts_the_metrics_file_and_an_out_dir(tmp_path):
    run = tmp_path / "run"
    write_metrics(run, n=1, garbage=False)
    out = tmp_path / "figs"
    assert plot.main([str(run / "train" / "metrics.jsonl"), "--out", str(out)]) == 0
    assert is_png(out / "train-loss.png") and is_png(out / "train-accuracy.png")
    records = plot.read_metrics(str(run / "train" / "metrics.jsonl"))
    assert len(records) == 1 and records[0]["step"] == 10


def test_missing_metrics_is_a_clear_error(tmp_path, capsys):
    assert plot.main([str(tmp_path)]) == 1
    assert "metrics.jsonl" in capsys.readouterr().err

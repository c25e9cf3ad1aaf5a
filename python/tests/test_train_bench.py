"""python/koma/bench_train.py, the PyTorch reference of `koma bench train`, runs and reports."""

import json
import os
import sys

import numpy as np
import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from koma import bench_train  # noqa: E402
from koma.model import MOVE_LABELS  # noqa: E402

SMALL = {"blocks": 1, "channels": 8, "policy_channels": 4, "value_channels": 2, "value_hidden": 8}


def spec(**kw):
    s = {
        "model": SMALL,
        "batch_size": 4,
        "seconds": 0.0,
        "min_steps": 2,
        "threads": 1,
        "device": "cpu",
        "precision": "f32",
        "optimizer": {"kind": "sgd", "lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-4},
        "loss": {"policy_weight": 1.0, "value_weight": 1.0},
    }
    s.update(kw)
    return s


def test_random_batch_runs_sgd_and_adamw():
    out = bench_train.bench(spec(), bench_train.random_batch(4))
    assert out["steps"] >= 2 and out["samples_per_second"] > 0
    adamw = {"kind": "adamw", "lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01,
             "momentum": 0.0, "nesterov": False}
    out = bench_train.bench(spec(optimizer=adamw), bench_train.random_batch(4))
    assert out["samples_per_second"] > 0


def test_channels_last_recipe_runs():
    out = bench_train.bench(spec(channels_last=True), bench_train.random_batch(4))
    assert out["steps"] >= 2 and len(out["times"]) == out["steps"]


@pytest.mark.parametrize("with_weights", [False, True])
def test_reads_the_batch_files_koma_writes(tmp_path, capsys, with_weights):
    n = 3
    rng = np.random.default_rng(0)
    (rng.random((n, 62, 9, 9)) < 0.1).astype(np.uint8).tofile(tmp_path / "input1.u8")
    (rng.random((n, 57, 9, 9)) < 0.1).astype(np.uint8).tofile(tmp_path / "input2.u8")
    policy = np.zeros((n, MOVE_LABELS), "<f4")
    policy[:, 5] = 1.0
    policy.tofile(tmp_path / "policy.f32")
    np.full((n, 3), 1 / 3, "<f4").tofile(tmp_path / "value.f32")
    if with_weights:
        np.array([1.0, 0.0, 1.0], "<f4").tofile(tmp_path / "policy_weight.f32")
        np.ones(n, "<f4").tofile(tmp_path / "value_weight.f32")
        np.array([0, 1, 2], "<i8").tofile(tmp_path / "result_class.i64")
    batch = bench_train.load_batch({"batch_size": n, "data_dir": str(tmp_path)})
    assert batch[4].tolist() == ([1.0, 0.0, 1.0] if with_weights else [1.0] * n)
    assert batch[6].dtype == torch.int64
    s = spec(batch_size=n, data_dir=str(tmp_path))
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(s))
    assert bench_train.main(["--spec", str(path)]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    out = json.loads(line)
    assert out["steps"] >= 2 and out["seconds_per_step"] > 0
    assert os.path.exists(tmp_path / "input1.u8")

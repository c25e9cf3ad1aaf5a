"""Supervised training from imported records (#8): a few hundred games of the `greedy` reference
player (mate in one, else the most material) are saved by `koma arena` as KIF, imported with
`koma data import`, and a tiny net trained on 90% of the games must predict the moves of the
held-out 10% far better than chance and than the untrained net. Predictions are computed
independently in PyTorch (the Python mirror of the network) on cshogi's features."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from koma.data import read_dir  # noqa: E402
from koma.model import load_checkpoint  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def top1(checkpoint: str, shards) -> tuple[float, float]:
    """(top-1 agreement with the played moves, mean 1/legal moves = chance) over the shards."""
    model, _ = load_checkpoint(checkpoint)
    hits = total = 0
    chance = 0.0
    for shard in shards:
        idx = [i for i in range(len(shard)) if shard.move_usi(i) is not None]
        f1, f2 = shard.features(idx)
        labels = shard.move_labels(idx)
        with torch.no_grad():
            policy, _ = model(torch.from_numpy(f1).float(), torch.from_numpy(f2).float())
        logits = policy.reshape(len(idx), -1).numpy()
        for row, i in enumerate(idx):
            board = shard.board(i)
            legal = [shard_label(board, m) for m in board.legal_moves]
            best = max(legal, key=lambda lab: logits[row, lab])
            hits += int(best == labels[row])
            chance += 1.0 / len(legal)
            total += 1
    return hits / total, chance / total


def shard_label(board, move) -> int:
    import cshogi.dlshogi as dl

    return int(dl.make_move_label(move, board.turn))


def test_training_on_imported_records_predicts_held_out_moves(koma, koma_bin, tmp_path):
    games = tmp_path / "games"
    koma("arena", "--player", "greedy", "--player", "greedy", "--games", "300", "--max-plies", "120",
         "--openings", os.path.join(ROOT, "data/openings/balanced-8.txt"),
         "--results", str(tmp_path / "results.jsonl"), "--records", str(games))
    records = sorted(os.listdir(games))
    assert len(records) == 300
    train_dir, held_dir = tmp_path / "train-kif", tmp_path / "held-kif"
    train_dir.mkdir()
    held_dir.mkdir()
    for k, name in enumerate(records):
        shutil.copy(games / name, (held_dir if k % 10 == 0 else train_dir) / name)
    koma("data", "import", "--out", str(tmp_path / "train"), str(train_dir))
    koma("data", "import", "--out", str(tmp_path / "held"), str(held_dir))

    init = tmp_path / "model-00000000.safetensors"
    koma("init", "--config", "tiny", "--out", str(init), "--seed", "3")
    koma("train", "--data", str(tmp_path / "train"), "--model", str(init), "--steps", "200", "--batch-size", "64",
         "--lr", "0.05", "--threads", "1", "--device", "cpu", "--out", str(tmp_path / "run"))
    trained = tmp_path / "run" / "models" / "model-00000200.safetensors"

    held = read_dir([str(tmp_path / "held")])
    before, chance = top1(str(init), held)
    after, _ = top1(str(trained), held)
    print(f"held-out top-1: chance {chance:.3f}, untrained {before:.3f}, trained {after:.3f}")
    assert after > 3 * chance, (after, chance)
    assert after > before + 0.1, (after, before)

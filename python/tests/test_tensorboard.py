"""TensorBoard event files of a run (`RUN/tensorboard/`), read back with TensorBoard's own reader:
a short `koma pipeline`, resumed once, must leave the trainer's metrics exactly as
train/metrics.jsonl has them, self-play's curve stepping by the run's samples up to the samples
in its shards, and the Elo curve of arena/ratings.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import h5py
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_pipeline import CONFIG, shards  # noqa: E402

event_accumulator = pytest.importorskip(
    "tensorboard.backend.event_processing.event_accumulator",
    reason="tensorboard is not installed (scripts/bootstrap installs python/requirements-tools.txt)",
)
from tensorboard.backend.event_processing import event_file_loader  # noqa: E402

TRAIN_TAGS = {
    "train/loss": "loss",
    "train/loss_policy": "policy_loss",
    "train/loss_value": "value_loss",
    "train/accuracy_policy": "policy_top1",
    "train/accuracy_value": "value_accuracy",
    "train/lr": "lr",
    "train/grad_norm": "grad_norm",
    "train/samples_per_s": "samples_per_second",
    "train/skipped_steps": "skipped_steps",
    "train/window_samples": "window_samples",
    "train/total_samples": "total_samples",
}


def scalars(directory: str) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of a TensorBoard run directory, by tag: (step, value) in the reader's order."""
    acc = event_accumulator.EventAccumulator(directory, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def event_files(directory: str) -> list[str]:
    return sorted(os.path.join(directory, f) for f in os.listdir(directory) if "tfevents" in f)


def close(a: float, b: float) -> bool:
    # Scalars are stored as float32.
    return abs(a - b) <= 1e-6 * max(1.0, abs(b))


def pipeline(koma_bin: str, *args: str) -> dict:
    done = subprocess.run([koma_bin, "pipeline", *args, "--json"], capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture()
def config(tmp_path):
    path = tmp_path / "tiny-test.toml"
    path.write_text(CONFIG)
    return str(path)


def test_a_resumed_pipeline_leaves_curves_tensorboard_reads_as_the_run_logged_them(koma_bin, tmp_path, config):
    run = str(tmp_path / "run")
    first = pipeline(koma_bin, "--config", config, "--run", run, "--steps", "12", "--no-report")
    assert first["train"]["final_step"] == 12
    # 60 steps of 32 samples at 4 per new sample need more samples than the first part made, so
    # self-play plays in both parts.
    second = pipeline(koma_bin, "--run", run, "--resume", "--steps", "60")
    assert second["train"]["start_step"] == 12 and second["train"]["final_step"] == 60
    assert first["selfplay"]["stats"]["games"] > 0 and second["selfplay"]["stats"]["games"] > 0
    board = os.path.join(run, "tensorboard")
    assert sorted(os.listdir(board)) == ["ratings", "selfplay", "train"]

    # The trainer: one file per session, each opened with a session start one step past the
    # state it resumed from (so TensorBoard drops steps a crash logged but never saved).
    files = event_files(os.path.join(board, "train"))
    assert len(files) == 2
    starts = []
    for path in files:
        events = list(event_file_loader.EventFileLoader(path).Load())
        assert events[0].file_version == "brain.Event:2"
        starts += [e.step for e in events if e.HasField("session_log") and e.session_log.status == e.session_log.START]
    assert starts == [1, 13]
    # Every metrics line, tag by tag, at its step.
    with open(os.path.join(run, "train", "metrics.jsonl")) as f:
        metrics = [json.loads(line) for line in f if line.strip()]
    assert [m["step"] for m in metrics] == [5, 10, 12, *range(15, 61, 5)]
    train = scalars(os.path.join(board, "train"))
    assert set(TRAIN_TAGS) <= set(train), sorted(train)
    for tag, field in TRAIN_TAGS.items():
        assert [s for s, _ in train[tag]] == [m["step"] for m in metrics], tag
        for (_, value), m in zip(train[tag], metrics):
            assert close(value, m[field]), (tag, value, m[field])

    # Self-play: one file per process; steps are the run's samples, increasing across the
    # restart, and the last one is every sample in the shards.
    assert len(event_files(os.path.join(board, "selfplay"))) == 2
    selfplay = scalars(os.path.join(board, "selfplay"))
    for tag in ("selfplay/games_per_s", "selfplay/game_length_mean", "selfplay/samples_per_s", "selfplay/draw_rate"):
        steps = [s for s, _ in selfplay[tag]]
        assert steps == sorted(set(steps)) and len(steps) >= 2, (tag, steps)
    samples = 0
    plies = []
    for path in shards(run):
        with h5py.File(path, "r") as f:
            samples += len(f["result"])
            plies += [int(n) for n in f["game_length"][()]]
    assert selfplay["selfplay/games_per_s"][-1][0] == samples
    assert all(v > 0 for _, v in selfplay["selfplay/games_per_s"])
    assert all(min(plies) <= v <= max(plies) for _, v in selfplay["selfplay/game_length_mean"])

    # The Elo curve: ratings.json's checkpoints by step, model 0 at 0, in one file (a refit
    # replaces it).
    assert len(event_files(os.path.join(board, "ratings"))) == 1
    with open(os.path.join(run, "arena", "ratings.json")) as f:
        ratings = sorted((r["step"], r["elo"]) for r in json.load(f) if r["step"] is not None)
    elo = scalars(os.path.join(board, "ratings"))["arena/elo"]
    assert [s for s, _ in elo] == [s for s, _ in ratings] and elo[0] == (0, 0.0)
    for (_, value), (_, expected) in zip(elo, ratings):
        assert close(value, expected)


def test_tensorboard_false_writes_no_events(koma_bin, tmp_path):
    path = tmp_path / "off.toml"
    path.write_text(CONFIG.replace("[run]\n", "[run]\ntensorboard = false\n", 1))
    run = str(tmp_path / "run")
    pipeline(koma_bin, "--config", str(path), "--run", run, "--steps", "6", "--no-report")
    assert os.path.exists(os.path.join(run, "train", "metrics.jsonl"))
    assert not os.path.exists(os.path.join(run, "tensorboard"))

"""Plots of a koma run: `python -m koma.plot RUN_DIR`.

Reads RUN_DIR/train/metrics.jsonl (written by `koma train`, one JSON object every `log_every`
steps) and draws, with matplotlib's Agg backend (no display needed):

- RUN_DIR/train-loss.png: policy, value and total loss against the step, learning rate on a
  second axis;
- RUN_DIR/train-accuracy.png: policy top-1 agreement with the target and value accuracy;
- RUN_DIR/elo.png, when RUN_DIR/arena/ratings.json exists (written by `koma pipeline`'s
  report): Elo of each checkpoint by training step (model 0 = 0) with 95% intervals, and the
  reference players as horizontal lines.

RUN_DIR may also be the train/ directory or the metrics file itself; --out chooses another
output directory. Prints the paths written.

The same curves, live while the run goes on: `tensorboard --logdir RUN_DIR/tensorboard` (koma
writes the event files; scripts/bootstrap installs tensorboard in the venv).

`python -m koma.plot --experiment EXPDIR` draws EXPDIR/elo-over-time.png from the
EXPDIR/report.json that `koma experiment` writes: Elo against training time (CPU or wall-clock
minutes, as the experiment's budget), one line per variant with 95% intervals, the reference
players as horizontal lines.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

if __package__ in (None, ""):
    # Run as a plain script (koma runs python/koma/*.py by path): import the sibling directly.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import durable  # type: ignore  # noqa: E402
else:
    from . import durable  # noqa: E402


def find_metrics(path: str) -> tuple[str, str]:
    """(metrics file, run directory) for a run dir, its train/ dir or the file itself."""
    if os.path.isfile(path):
        metrics = path
        parent = os.path.dirname(os.path.abspath(path))
        run = os.path.dirname(parent) if os.path.basename(parent) == "train" else parent
        return metrics, run
    for candidate, run in ((os.path.join(path, "train", "metrics.jsonl"), path), (os.path.join(path, "metrics.jsonl"), None)):
        if os.path.isfile(candidate):
            if run is None:
                absdir = os.path.abspath(path)
                run = os.path.dirname(absdir) if os.path.basename(absdir) == "train" else absdir
            return candidate, run
    raise FileNotFoundError(f"{path}: no train/metrics.jsonl (has `koma train` run there?)")


def read_metrics(path: str) -> list[dict]:
    records = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut short by a crash
    records.sort(key=lambda r: r.get("step", 0))
    return records


def _series(records: list[dict], key: str):
    xs, ys = [], []
    for r in records:
        v = r.get(key)
        if isinstance(v, (int, float)):
            xs.append(r["step"])
            ys.append(v)
    return xs, ys


def plot_training(records: list[dict], out_dir: str, title: str = "") -> list[str]:
    """Draws the loss and accuracy figures; returns the files written."""
    os.makedirs(out_dir, exist_ok=True)
    written = []

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for key, label in (("policy_loss", "policy"), ("value_loss", "value"), ("reply_loss", "opponent reply"),
                       ("loss", "total")):
        xs, ys = _series(records, key)
        if xs:
            ax.plot(xs, ys, label=label)
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy")
    ax.grid(True, alpha=0.3)
    xs, ys = _series(records, "lr")
    if xs:
        ax2 = ax.twinx()
        ax2.plot(xs, ys, color="grey", linestyle=":", label="lr")
        ax2.set_ylabel("learning rate")
        lines = ax.get_lines() + ax2.get_lines()
        ax.legend(lines, [ln.get_label() for ln in lines], loc="upper right")
    else:
        ax.legend(loc="upper right")
    ax.set_title(f"{title} loss".strip())
    fig.tight_layout()
    path = os.path.join(out_dir, "train-loss.png")
    durable.savefig(fig, path, dpi=100)
    plt.close(fig)
    written.append(path)

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for key, label in (("policy_top1", "policy top-1 agreement"), ("value_accuracy", "value accuracy"),
                       ("reply_top1", "opponent reply top-1")):
        xs, ys = _series(records, key)
        if xs:
            ax.plot(xs, ys, label=label)
    ax.set_xlabel("step")
    ax.set_ylabel("fraction")
    ax.set_ylim(0, 1)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right")
    ax.set_title(f"{title} accuracy".strip())
    fig.tight_layout()
    path = os.path.join(out_dir, "train-accuracy.png")
    durable.savefig(fig, path, dpi=100)
    plt.close(fig)
    written.append(path)
    return written


def plot_elo(ratings: list[dict], out_dir: str, title: str = "", path: str | None = None) -> str:
    """Elo against training step for checkpoints; references as labelled horizontal lines.
    Written to `path`, else OUT_DIR/elo.png."""
    models = sorted((r for r in ratings if r.get("step") is not None), key=lambda r: r["step"])
    fig, ax = plt.subplots(figsize=(8, 4.5))
    if models:
        ax.errorbar([r["step"] for r in models], [r["elo"] for r in models], yerr=[r["margin"] for r in models],
                    marker="o", capsize=3, label="checkpoints")
    for r in ratings:
        if r.get("step") is None:
            ax.axhline(r["elo"], linestyle="--", linewidth=1, color="grey")
            ax.annotate(f"{r['player']} ({r['elo']:+.0f})", (0.01, r["elo"]), xycoords=("axes fraction", "data"),
                        textcoords="offset points", xytext=(0, 3), fontsize=8, color="grey")
    ax.set_xlabel("training step")
    ax.set_ylabel("Elo (model 0 = 0)")
    ax.grid(True, alpha=0.3)
    ax.set_title(f"{title} Elo by training step (95% CI)".strip())
    fig.tight_layout()
    path = path or os.path.join(out_dir, "elo.png")
    durable.savefig(fig, path, dpi=100)
    plt.close(fig)
    return path


def plot_experiment(report: dict, out_dir: str) -> str:
    """Elo against training time, one line per variant; references as horizontal lines."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for curve in report.get("curves", []):
        # `at`: the budget's axis (minutes, or million evaluations); reports of before said `minutes`.
        points = sorted(curve.get("points", []), key=lambda p: p.get("at", p.get("minutes", 0)))
        if points:
            ax.errorbar([p.get("at", p.get("minutes", 0)) for p in points], [p["elo"] for p in points], yerr=[p["margin"] for p in points],
                        marker="o", capsize=3, label=curve["variant"])
    for r in report.get("curve_references", []):
        ax.axhline(r["elo"], linestyle="--", linewidth=1, color="grey")
        ax.annotate(f"{r['player']} ({r['elo']:+.0f})", (0.01, r["elo"]), xycoords=("axes fraction", "data"),
                    textcoords="offset points", xytext=(0, 3), fontsize=8, color="grey")
    ax.set_xlabel(f"training ({report.get('x_axis', 'minutes')})")
    ax.set_ylabel(f"Elo ({report.get('anchor', 'greedy')} = 0)")
    ax.grid(True, alpha=0.3)
    if report.get("curves"):
        ax.legend(loc="best")
    ax.set_title(f"{os.path.basename(os.path.normpath(report.get('directory', '')))} Elo over training time (95% CI)".strip())
    fig.tight_layout()
    path = os.path.join(out_dir, "elo-over-time.png")
    durable.savefig(fig, path, dpi=100)
    plt.close(fig)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m koma.plot", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", help="run directory (or its train/ directory, or a metrics.jsonl)")
    ap.add_argument("--out", help="directory for the PNGs (default: the run directory)")
    ap.add_argument("--experiment", action="store_true", help="run_dir is a `koma experiment` directory: draw elo-over-time.png")
    ap.add_argument("--ratings", metavar="PNG",
                    help="run_dir is a ratings JSON (a list of {player, elo, margin, step}, `koma ratings`): draw it to PNG")
    args = ap.parse_args(argv)
    if args.ratings:
        with open(args.run_dir, encoding="utf-8") as f:
            print(plot_elo(json.load(f), "", path=args.ratings))
        return 0
    if args.experiment:
        report_file = os.path.join(args.run_dir, "report.json")
        if not os.path.isfile(report_file):
            print(f"koma.plot: {report_file} does not exist (has the experiment finished?)", file=sys.stderr)
            return 1
        with open(report_file, encoding="utf-8") as f:
            print(plot_experiment(json.load(f), args.out or args.run_dir))
        return 0
    try:
        metrics, run = find_metrics(args.run_dir)
    except FileNotFoundError as e:
        print(f"koma.plot: {e}", file=sys.stderr)
        return 1
    records = read_metrics(metrics)
    if not records:
        print(f"koma.plot: {metrics} holds no metrics yet", file=sys.stderr)
        return 1
    title = os.path.basename(os.path.abspath(run))
    for path in plot_training(records, args.out or run, title=title):
        print(path)
    ratings_file = os.path.join(run, "arena", "ratings.json")
    if os.path.isfile(ratings_file):
        with open(ratings_file, encoding="utf-8") as f:
            ratings = json.load(f)
        if ratings:
            print(plot_elo(ratings, args.out or run, title=title))
    return 0


if __name__ == "__main__":
    sys.exit(main())

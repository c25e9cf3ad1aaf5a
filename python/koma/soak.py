"""A soak test: runs a command (by default the embedded `koma pipeline`) and samples its resident
memory, open file descriptors and threads every `--every` seconds from /proc, then writes
OUT/soak.csv, OUT/soak.png and prints a summary. Resident memory and descriptors must stay flat
once the run is warm: growth is a leak.

Growth is judged only after the warm-up (`--warm-files GLOB --warm-count N`: once N files match,
say the pipeline's second published model), per unit of progress where the command reports one
(`--steps-from FILE`, a JSON-lines file whose last line has a `step`: the trainer's metrics), and
only when it is sustained: both halves of the judged samples must grow past the bound, so a
warm-up step landing in one half is not a leak and a leak shows in both. Too few samples after
the warm-up give no verdict, only "not measured" and exit status 2.

    python -m koma.soak --out soak/ --minutes 60 -- KOMA_BIN pipeline --run soak/run --minutes 60

`scripts/soak` runs it on the release binary with the embedded default. docs/reliability.md
explains what is checked; docs/benchmarks.md has the curve.
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import signal
import subprocess
import sys
import time

if __package__ in (None, ""):
    # Run as a plain script (koma runs python/koma/*.py by path): import the sibling directly.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import durable  # type: ignore  # noqa: E402
else:
    from . import durable  # noqa: E402


def sample(pid: int) -> dict | None:
    """RSS and high-water mark (MiB), threads and open descriptors of `pid`, or None if gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (FileNotFoundError, ProcessLookupError):
        return None
    kib = lambda name: int(fields[name].split()[0]) if name in fields else 0  # noqa: E731
    return {
        "rss_mib": kib("VmRSS") / 1024,
        "hwm_mib": kib("VmHWM") / 1024,
        "threads": int(fields.get("Threads", "0").strip() or 0),
        "fds": fds,
    }


def slope_per_hour(rows: list[dict], key: str) -> float:
    """Least-squares slope of `key` against minutes over the second half of the run, per hour."""
    half = rows[len(rows) // 2 :]
    if len(half) < 2:
        return 0.0
    xs = [r["minutes"] for r in half]
    ys = [r[key] for r in half]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    if var == 0:
        return 0.0
    return 60 * sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var


def fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of ys on xs; slope 0 when xs do not vary."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var if var else 0.0
    return my - slope * mx, slope


# MiB of resident memory one open descriptor may explain at most: the 60-minute soak measured
# 4.81 MiB per open shard (docs/benchmarks.md "Soak"); a fit steeper than this is a leak riding on
# the window's growth, not the window.
MAX_MIB_PER_FD = 5.0


def judged(rows: list[dict]) -> list[dict]:
    """The samples after the warm-up."""
    return [r for r in rows if r.get("warm")]


def growth(rows: list[dict], x: str, scale: float) -> float | None:
    """Growth of resident memory not explained by open descriptors against column `x` (minutes
    or steps), times `scale` (per hour: 60; per 100 steps: 100); None when `x` does not advance."""
    if len(rows) < 3 or rows[-1][x] <= rows[0][x]:
        return None
    _, per_fd = fit([r["fds"] for r in rows], [r["rss_mib"] for r in rows])
    per_fd = min(max(per_fd, 0.0), MAX_MIB_PER_FD)
    residual = [r["rss_mib"] - per_fd * r["fds"] for r in rows]
    return scale * fit([r[x] for r in rows], residual)[1]


def halves(rows: list[dict], x: str = "minutes") -> tuple[list[dict], list[dict]]:
    """The judged samples cut at the middle of `x` (minutes, or steps: a trainer's step advances
    unevenly, so the cut by steps gives each half its share of the work)."""
    middle = (rows[0][x] + rows[-1][x]) / 2
    first = [r for r in rows if r[x] <= middle]
    return first, rows[len(first) :]


def verdict(rows: list[dict], max_rss_mib: float | None, max_fds: int | None, max_slope: float | None,
            max_growth: float | None = None, min_samples: int = 8) -> tuple[str, list[str]]:
    """("PASS" | "FAIL" | "not measured" | "none", what broke the bounds or why nothing was
    measured). Peak memory and descriptors are judged over the whole run; growth only after the
    warm-up, and only when both halves of those samples grow past the bound."""
    if all(b is None for b in (max_rss_mib, max_fds, max_slope, max_growth)):
        return "none", []
    problems = []
    peak = max(r["hwm_mib"] for r in rows)
    if max_rss_mib is not None and peak > max_rss_mib:
        problems.append(f"peak resident memory {peak:.0f} MiB is over the bound of {max_rss_mib:.0f} MiB")
    fds = max(r["fds"] for r in rows)
    if max_fds is not None and fds > max_fds:
        problems.append(f"{fds} open file descriptors is over the bound of {max_fds}")
    if max_slope is None and max_growth is None:
        return ("FAIL" if problems else "PASS"), problems
    warm = judged(rows)
    if len(warm) < min_samples:
        return "not measured", problems + [f"{len(warm)} samples after the warm-up, {min_samples} needed to judge growth"]
    for bound, x, scale, unit in ((max_slope, "minutes", 60.0, "MiB/hour"), (max_growth, "step", 100.0, "MiB per 100 steps")):
        if bound is None:
            continue
        first, second = halves(warm, x)
        g1, g2 = growth(first, x, scale), growth(second, x, scale)
        if g1 is None or g2 is None:
            return "not measured", problems + [f"the {x} did not advance in both halves after the warm-up"]
        if g1 > bound and g2 > bound:
            problems.append(f"resident memory grows by {g1:+.1f} then {g2:+.1f} {unit} after the warm-up, beyond what "
                            f"open shards explain (bound {bound:g} {unit} in both halves): a leak")
    return ("FAIL" if problems else "PASS"), problems


def last_step(path: str | None) -> int | None:
    """The `step` of the last whole line of a JSON-lines file (None before there is one)."""
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 65536))
            lines = f.read().decode(errors="replace").splitlines()
    except FileNotFoundError:
        return None
    for line in reversed(lines):
        try:
            return int(json.loads(line)["step"])
        except (ValueError, KeyError, TypeError):
            continue
    return None


def plot(rows: list[dict], path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = [r["minutes"] for r in rows]
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot(minutes, [r["rss_mib"] for r in rows], label="resident memory (MiB)", color="tab:blue")
    ax.set_xlabel("minutes")
    ax.set_ylabel("MiB")
    ax.set_ylim(bottom=0)
    ax2 = ax.twinx()
    ax2.plot(minutes, [r["fds"] for r in rows], label="open file descriptors", color="tab:orange")
    ax2.plot(minutes, [r["threads"] for r in rows], label="threads", color="tab:green", linestyle="--")
    ax2.set_ylabel("count")
    ax2.set_ylim(bottom=0)
    lines = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
    labels = ax.get_legend_handles_labels()[1] + ax2.get_legend_handles_labels()[1]
    ax.legend(lines, labels, loc="lower right")
    ax.set_title(title)
    fig.tight_layout()
    durable.savefig(fig, path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="directory for soak.csv and soak.png")
    parser.add_argument("--every", type=float, default=60.0, help="seconds between samples (default 60)")
    parser.add_argument("--minutes", type=float, default=0.0, help="stop the command (SIGINT) after this long (0: let it end)")
    parser.add_argument("--max-rss-mib", type=float, help="fail if the peak resident memory passes this (MiB)")
    parser.add_argument("--max-fds", type=int, help="fail if the open file descriptors pass this")
    parser.add_argument("--max-slope", type=float,
                        help="fail if resident memory not explained by open descriptors grows faster than this in both "
                             "halves after the warm-up (MiB/hour)")
    parser.add_argument("--max-growth", type=float,
                        help="the same per 100 steps of --steps-from (MiB per 100 steps)")
    parser.add_argument("--steps-from", help="a JSON-lines file whose last line's `step` measures progress")
    parser.add_argument("--warm-files", help="glob: the warm-up ends once --warm-count files match it")
    parser.add_argument("--warm-count", type=int, default=1, help="files matching --warm-files that end the warm-up")
    parser.add_argument("--min-samples", type=int, default=8, help="samples after the warm-up needed for a verdict")
    parser.add_argument("--judge-samples", type=int, default=0,
                        help="stop the command once this many samples after the warm-up are taken (0: at --minutes)")
    parser.add_argument("--judge-steps", type=int, default=0,
                        help="stop the command once the samples after the warm-up span this many steps of --steps-from "
                             "(and --min-samples are taken; 0: at --minutes)")
    parser.add_argument("command", nargs="+", help="the command to watch (after --)")
    args = parser.parse_args(argv)
    # Started in the background (`scripts/soak … &`), a shell leaves SIGINT ignored: take it and
    # SIGTERM back, so that stopping the soak stops the command and still writes what was sampled.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "command.log"), "w", encoding="utf-8")
    proc = subprocess.Popen(args.command, stdout=log, stderr=subprocess.STDOUT)
    start = time.monotonic()
    rows: list[dict] = []
    warm = not args.warm_files
    try:
        while proc.poll() is None:
            now = time.monotonic()
            warm_rows = judged(rows)
            enough = (args.judge_samples and len(warm_rows) >= args.judge_samples) or (
                args.judge_steps and len(warm_rows) >= args.min_samples
                and warm_rows[-1]["step"] - warm_rows[0]["step"] >= args.judge_steps)
            if enough or (args.minutes and now - start >= args.minutes * 60):
                proc.send_signal(subprocess.signal.SIGINT)
                proc.wait()
                break
            warm = warm or len(glob.glob(args.warm_files)) >= args.warm_count
            step = last_step(args.steps_from)
            s = sample(proc.pid)
            if s is not None:
                rows.append({"minutes": (now - start) / 60, "step": step if step is not None else -1, "warm": warm, **s})
                print(f"{rows[-1]['minutes']:6.1f} min  step {rows[-1]['step']:6d}  RSS {s['rss_mib']:7.1f} MiB  "
                      f"fds {s['fds']:4d}  threads {s['threads']:3d}{'' if warm else '  (warming up)'}", flush=True)
            time.sleep(max(0.0, args.every - (time.monotonic() - now)))
    except KeyboardInterrupt:
        proc.send_signal(subprocess.signal.SIGINT)
        proc.wait()
    if not rows:
        print("the command ended before the first sample", file=sys.stderr)
        return 1
    with durable.staged(os.path.join(args.out, "soak.csv")) as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    load = os.getloadavg()
    summary = (
        f"{len(rows)} samples over {rows[-1]['minutes']:.1f} min (exit status {proc.returncode}, load average "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end)\n"
        f"resident memory: first {rows[0]['rss_mib']:.0f} MiB, last {rows[-1]['rss_mib']:.0f} MiB, "
        f"peak {max(r['hwm_mib'] for r in rows):.0f} MiB, second-half slope {slope_per_hour(rows, 'rss_mib'):+.1f} MiB/hour\n"
        f"open file descriptors: {min(r['fds'] for r in rows)}–{max(r['fds'] for r in rows)}, "
        f"second-half slope {slope_per_hour(rows, 'fds'):+.1f}/hour; threads {min(r['threads'] for r in rows)}–"
        f"{max(r['threads'] for r in rows)}"
    )
    warm_rows = judged(rows)
    if warm_rows:
        def per(x, scale):
            grown = (growth(h, x, scale) for h in halves(warm_rows, x))
            return " / ".join("n/a" if g is None else f"{g:+.1f}" for g in grown)
        summary += (f"\nafter the warm-up ({warm_rows[0]['minutes']:.1f} min on, {len(warm_rows)} samples, steps "
                    f"{warm_rows[0]['step']}–{warm_rows[-1]['step']}): growth by half {per('minutes', 60)} MiB/hour")
        if args.steps_from:
            summary += f", {per('step', 100)} MiB per 100 steps"
    else:
        summary += "\nno sample after the warm-up"
    outcome, problems = verdict(rows, args.max_rss_mib, args.max_fds, args.max_slope, args.max_growth, args.min_samples)
    if outcome == "none":
        summary += "\nverdict: none (no bounds given)"
    elif outcome == "not measured":
        summary += "\nverdict: not measured: " + "; ".join(problems)
    elif problems:
        summary += "\nverdict: FAIL: " + "; ".join(problems)
    else:
        summary += "\nverdict: PASS (within every bound given)"
    print(summary)
    durable.write_bytes(os.path.join(args.out, "summary.txt"), (summary + "\n").encode())
    plot(rows, os.path.join(args.out, "soak.png"), "koma soak: " + " ".join(os.path.basename(a) for a in args.command[:2]))
    print(f"wrote {os.path.join(args.out, 'soak.csv')} and soak.png")
    if proc.returncode not in (0, -2, 130):
        return proc.returncode
    return {"not measured": 2, "FAIL": 1}.get(outcome, 0)


if __name__ == "__main__":
    sys.exit(main())

"""A soak test: runs a command (by default the embedded `koma pipeline`) and samples its resident
memory, open file descriptors and threads every `--every` seconds from /proc, then writes
OUT/soak.csv, OUT/soak.png and prints a summary. Resident memory and descriptors must stay flat
once the run is warm: growth is a leak.

    python -m koma.soak --out soak/ --minutes 60 -- KOMA_BIN pipeline --run soak/run --minutes 60

`scripts/soak` runs it on the release binary with the embedded default. docs/reliability.md
explains what is checked; docs/benchmarks.md has the curve.
"""

from __future__ import annotations

import argparse
import csv
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


def residual_rss_slope_per_hour(rows: list[dict]) -> float:
    """The growth of resident memory that open descriptors do not explain, in MiB per hour over the
    second half of the run. Memory that grows with the replay window's open shards (each one a
    descriptor, with `[train.window] storage = "disk"`) is bounded by the window and counted by
    the descriptor bound; what is left growing is a leak. The window in memory (the default) holds
    no descriptor: its growth (about 330 bytes a sample of self-play, a few MiB an hour at the
    embedded default's window) counts against the slope bound. The fitted cost per descriptor is held to [0, MAX_MIB_PER_FD], so that a leak
    growing beside the window is not explained away by it."""
    half = rows[len(rows) // 2 :]
    if len(half) < 3:
        return 0.0
    _, per_fd = fit([r["fds"] for r in half], [r["rss_mib"] for r in half])
    per_fd = min(max(per_fd, 0.0), MAX_MIB_PER_FD)
    residual = [r["rss_mib"] - per_fd * r["fds"] for r in half]
    return 60 * fit([r["minutes"] for r in half], residual)[1]


def verdict(rows: list[dict], max_rss_mib: float | None, max_fds: int | None, max_slope: float | None) -> list[str]:
    """What broke the bounds; empty when the soak passes."""
    problems = []
    peak = max(r["hwm_mib"] for r in rows)
    if max_rss_mib is not None and peak > max_rss_mib:
        problems.append(f"peak resident memory {peak:.0f} MiB is over the bound of {max_rss_mib:.0f} MiB")
    fds = max(r["fds"] for r in rows)
    if max_fds is not None and fds > max_fds:
        problems.append(f"{fds} open file descriptors is over the bound of {max_fds}")
    slope = residual_rss_slope_per_hour(rows)
    if max_slope is not None and slope > max_slope:
        problems.append(f"resident memory grows by {slope:+.0f} MiB/hour beyond what the open shards explain "
                        f"(bound {max_slope:.0f} MiB/hour): a leak")
    return problems


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
                        help="fail if resident memory not explained by open descriptors grows faster (MiB/hour, second half)")
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
    try:
        while proc.poll() is None:
            now = time.monotonic()
            if args.minutes and now - start >= args.minutes * 60:
                proc.send_signal(subprocess.signal.SIGINT)
                proc.wait()
                break
            s = sample(proc.pid)
            if s is not None:
                rows.append({"minutes": (now - start) / 60, **s})
                print(f"{rows[-1]['minutes']:6.1f} min  RSS {s['rss_mib']:7.1f} MiB  fds {s['fds']:4d}  threads {s['threads']:3d}",
                      flush=True)
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
        f"{max(r['threads'] for r in rows)}\n"
        f"residual memory slope (not explained by open descriptors): {residual_rss_slope_per_hour(rows):+.1f} MiB/hour"
    )
    problems = verdict(rows, args.max_rss_mib, args.max_fds, args.max_slope)
    if not any(v is not None for v in (args.max_rss_mib, args.max_fds, args.max_slope)):
        summary += "\nverdict: none (no bounds given)"
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
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

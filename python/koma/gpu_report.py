"""The report of scripts/gpu-check: reads the step table (steps.tsv), each step's JSON output and
the nvidia-smi samples from a gpu-check directory, and writes report.json and report.md there.
Standard library only (the GPU machine may have no project venv)."""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys

if __package__ in (None, ""):
    # Run as a plain script (koma runs python/koma/*.py by path): import the sibling directly.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import durable  # type: ignore  # noqa: E402
else:
    from . import durable  # noqa: E402


def last_json(path: str):
    """The last line of a step's output that parses as JSON (commands print one object)."""
    try:
        lines = open(path).read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None


def gpu_samples(path: str) -> dict | None:
    if not os.path.exists(path):
        return None
    util, mem = [], []
    with open(path) as f:
        for row in csv.reader(f):
            try:
                util.append(float(row[2]))
                mem.append(float(row[3]))
            except (IndexError, ValueError):
                continue
    if not util:
        return None
    return {"samples": len(util), "utilisation_mean": statistics.mean(util), "utilisation_max": max(util),
            "memory_mib_max": max(mem)}


def selfplay_table(steps: list) -> list:
    """Self-play's evaluations/s by inference services, measured, beside the simulated device's."""
    rows = []
    for s in steps:
        out = s["output"]
        if not (s["name"].startswith("bench-selfplay") and out):
            continue
        if "designs" in out:
            for d in out["designs"]:
                rows.append(f"| simulated {out['simulated_device']['evals_per_s']:.0f}/s | {d['services']} | "
                            f"{d['evaluations_per_second']:.0f} | {100 * d['device_busy_fraction']:.0f}% | "
                            f"{d['mean_batch']:.0f} | {d['cpu_us_per_evaluation']:.1f} |")
        else:
            rows.append(f"| {out['device']} ({out['net']}) | {out['services']} | {out['evaluations_per_second']:.0f} | "
                        f"— | {out['mean_batch']} | {1e6 * out['cpu_seconds_per_evaluation']:.1f} |")
    if not rows:
        return []
    return ["## Self-play: measured and simulated", "",
            "| device | services | evaluations/s | device busy | mean batch | CPU µs an evaluation |",
            "|---|---:|---:|---:|---:|---:|"] + rows + [""]


def onnx_table(steps: list) -> list:
    """Positions/s of the exported net under each ONNX Runtime provider, by batch size."""
    out = next((s["output"] for s in steps if s["name"] == "bench-onnx" and s["output"]), None)
    if not out:
        return []
    if "error" in out:
        return ["## ONNX Runtime", "", out["error"], ""]
    batches = sorted({int(b) for p in out["providers"].values() for b in p["batches"]}) or [0]
    rows = []
    for name, p in out["providers"].items():
        if not p["available"]:
            cells = ["not in this onnxruntime"] + [""] * (len(batches) - 1)
        elif "error" in p:
            cells = [p["error"][:80]] + [""] * (len(batches) - 1)
        else:
            cells = [f"{p['batches'][str(b)]['positions_per_second']:.0f}" if "positions_per_second"
                     in p["batches"].get(str(b), {}) else p["batches"].get(str(b), {}).get("error", "—")[:40]
                     for b in batches]
        rows.append(f"| {name} | " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return ["## ONNX Runtime (positions/s)", "", f"onnxruntime {out['onnxruntime']}", "",
            "| provider | " + " | ".join(f"batch {b}" if b else "result" for b in batches) + " |",
            "|---|" + "---:|" * len(batches)] + rows + [""]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--dry-run", default="0")
    args = ap.parse_args()
    steps = []
    with open(os.path.join(args.dir, "steps.tsv")) as f:
        for line in f:
            name, rc, millis, command = line.rstrip("\n").split("\t", 3)
            steps.append({"name": name, "ok": rc == "0", "exit_status": int(rc), "seconds": int(millis) / 1000,
                          "command": command, "output": last_json(os.path.join(args.dir, f"{name}.json"))})
    report = {"dry_run": args.dry_run == "1", "steps": steps,
              "gpu": gpu_samples(os.path.join(args.dir, "nvidia-smi.csv"))}
    durable.write_bytes(os.path.join(args.dir, "report.json"), json.dumps(report, indent=1).encode())

    md = ["# gpu-check report", ""]
    if report["dry_run"]:
        md += ["Dry run: every step on the CPU with the tiny net and tiny budgets (a check of the script, not figures).", ""]
    info = next((s["output"] for s in steps if s["name"] == "info"), None)
    if info:
        md += [f"koma: `{json.dumps(info)}`", ""]
    md += ["| step | status | seconds |", "|---|---|---:|"]
    for s in steps:
        md.append(f"| {s['name']} | {'ok' if s['ok'] else 'failed (' + str(s['exit_status']) + ')'} | {s['seconds']:.1f} |")
    md.append("")
    for s in steps:
        if s["name"].startswith("bench-nn") and s["output"]:
            md += [f"## {s['name']}", "", "```json", json.dumps(s["output"], indent=1)[:4000], "```", ""]
    md += selfplay_table(steps)
    md += onnx_table(steps)
    for s in steps:
        if (s["name"].startswith("bench-train") or s["name"].startswith("bench-selfplay") or s["name"] == "pipeline") \
                and s["output"]:
            md += [f"## {s['name']}", "", "```json", json.dumps(s["output"], indent=1)[:4000], "```", ""]
    if report["gpu"]:
        g = report["gpu"]
        md += ["## GPU", "", f"{g['samples']} samples: utilisation mean {g['utilisation_mean']:.0f}%, "
               f"max {g['utilisation_max']:.0f}%; memory max {g['memory_mib_max']:.0f} MiB", ""]
    md += ["Commands:", "", "```sh"] + [s["command"] for s in steps] + ["```", ""]
    durable.write_bytes(os.path.join(args.dir, "report.md"), "\n".join(md).encode())
    failed = [s["name"] for s in steps if not s["ok"]]
    print(f"gpu-check: report in {args.dir}/report.md" + (f"; failed: {', '.join(failed)}" if failed else ""))
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()

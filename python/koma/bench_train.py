"""Training throughput of the koma network in plain PyTorch: the reference for `koma bench train`.

`koma bench train` writes a batch (the same one its own trainer measures) and a spec, then runs

    python -m koma.bench_train --spec SPEC.json

which trains the identical network (koma.model.KomaNet, the mirror of crates/nn) on that batch
with the same loss (policy cross-entropy against the dense target + W/D/L cross-entropy against
the value target) and optimiser (torch.optim.SGD with Nesterov momentum and weight decay, or
AdamW), repeated for about `seconds` after one warm-up step, and prints one JSON line:
{"samples_per_second": …, "seconds_per_step": …, "mean_samples_per_second": …,
"mean_seconds_per_step": …, "steps": …} (each step timed; the headline figure is the fastest).

Without --spec it makes a random batch (for a quick stand-alone run):

    python -m koma.bench_train --preset tiny --batch 256 --seconds 5
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from koma.model import FEATURES1_NUM, FEATURES2_NUM, MOVE_LABELS, KomaNet, ModelConfig

PRESETS = {
    "tiny": {"blocks": 5, "channels": 64, "policy_channels": 32, "value_channels": 8, "value_hidden": 128},
    "standard": {"blocks": 10, "channels": 192, "policy_channels": 32, "value_channels": 32, "value_hidden": 256},
}


def load_batch(spec: dict):
    n = spec["batch_size"]
    d = spec["data_dir"]

    def read(name, dtype, shape):
        return torch.from_numpy(np.fromfile(os.path.join(d, name), dtype=dtype).reshape(shape).copy())

    input1 = read("input1.u8", np.uint8, (n, FEATURES1_NUM, 9, 9))
    input2 = read("input2.u8", np.uint8, (n, FEATURES2_NUM, 9, 9))
    policy = read("policy.f32", "<f4", (n, MOVE_LABELS))
    value = read("value.f32", "<f4", (n, 3))
    return input1, input2, policy, value


def random_batch(n: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    input1 = (torch.rand(n, FEATURES1_NUM, 9, 9, generator=g) < 0.1).to(torch.uint8)
    input2 = (torch.rand(n, FEATURES2_NUM, 9, 9, generator=g) < 0.1).to(torch.uint8)
    policy = torch.softmax(torch.randn(n, MOVE_LABELS, generator=g) * 3, dim=1)
    value = torch.softmax(torch.randn(n, 3, generator=g), dim=1)
    return input1, input2, policy, value


def bench(spec: dict, batch) -> dict:
    torch.set_num_threads(int(spec["threads"]))
    device = torch.device(spec.get("device", "cpu"))
    precision = spec.get("precision", "f32")
    torch.manual_seed(0)
    model = KomaNet(ModelConfig.from_dict(spec["model"])).to(device)
    model.train()
    o = spec["optimizer"]
    if o["kind"] == "adamw":
        opt = torch.optim.AdamW(
            model.parameters(), lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"], weight_decay=o["weight_decay"]
        )
    else:
        opt = torch.optim.SGD(
            model.parameters(),
            lr=o["lr"],
            momentum=o["momentum"],
            nesterov=o["nesterov"] and o["momentum"] > 0,
            weight_decay=o["weight_decay"],
        )
    cp = spec["loss"]["policy_weight"]
    cv = spec["loss"]["value_weight"]
    input1, input2, policy_t, value_t = (t.to(device) for t in batch)
    use_amp = device.type == "cuda" and precision in ("f16", "bf16")
    amp_dtype = torch.float16 if precision == "f16" else torch.bfloat16
    scaler = torch.amp.GradScaler("cuda", enabled=device.type == "cuda" and precision == "f16")

    def step():
        x1 = input1.float()
        x2 = input2.float()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device.type, dtype=amp_dtype, enabled=use_amp):
            policy, value = model(x1, x2)
        policy_loss = -(policy_t * F.log_softmax(policy.float(), dim=1)).sum(dim=1).mean()
        value_loss = -(value_t * F.log_softmax(value.float(), dim=1)).sum(dim=1).mean()
        loss = cp * policy_loss + cv * value_loss
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return float(loss.detach())  # read back, as koma reads its step's statistics

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    step()  # warm-up
    sync()
    start = time.perf_counter()
    times = []
    while len(times) < max(1, int(spec.get("min_steps", 1))) or time.perf_counter() - start < float(spec["seconds"]):
        t = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t)
    n = input1.shape[0]
    # The fastest step is the best estimate on a shared machine (others only add time).
    best, mean = min(times), sum(times) / len(times)
    return {
        "samples_per_second": n / best,
        "seconds_per_step": best,
        "mean_samples_per_second": n / mean,
        "mean_seconds_per_step": mean,
        "steps": len(times),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", help="JSON spec written by `koma bench train`")
    ap.add_argument("--preset", default="tiny", choices=sorted(PRESETS))
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = ap.parse_args(argv)
    if args.spec:
        with open(args.spec, encoding="utf-8") as f:
            spec = json.load(f)
        batch = load_batch(spec)
    else:
        spec = {
            "model": PRESETS[args.preset],
            "batch_size": args.batch,
            "seconds": args.seconds,
            "min_steps": 2,
            "threads": args.threads,
            "device": "cpu",
            "optimizer": {"kind": "sgd", "lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-4},
            "loss": {"policy_weight": 1.0, "value_weight": 1.0},
        }
        batch = random_batch(args.batch)
    print(json.dumps(bench(spec, batch)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

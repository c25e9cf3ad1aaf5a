"""Training throughput of the koma network in plain PyTorch: the reference for `koma bench train`.

`koma bench train` writes a batch (the same one its own trainer measures) and a spec, then runs

    python -m koma.bench_train --spec SPEC.json

which trains the identical network (koma.model.KomaNet, the mirror of crates/nn) on that batch,
repeated for about `seconds` after one warm-up step, doing per step the same work as koma's
`Trainer::train_step`, written as a PyTorch user would:

- the u8 features to float32 (`input.float()`);
- `opt.zero_grad(set_to_none=True)`, forward in training mode;
- the same loss: per-sample weighted policy cross-entropy against the dense 2187-label target
  plus W/D/L cross-entropy against the value target, both over the batch (koma_train::batch);
- the same statistics under `no_grad`: policy top-1 agreement and value accuracy;
- `backward()`, the global gradient norm (`torch.nn.utils.get_total_norm`, koma needs it for its
  divergence check and clipping), the optimiser step (`torch.optim.SGD` with Nesterov momentum
  and weight decay, or AdamW: PyTorch's defaults for the CPU);
- the six statistics read back to Python in one `.tolist()`.

`"channels_last": true` in the spec is PyTorch's channels-last recipe (`model.to(memory_format=
torch.channels_last)` and channels-last inputs); otherwise the default contiguous layout. It prints
one JSON line: {"samples_per_second": …, "seconds_per_step": …, "mean_samples_per_second": …,
"mean_seconds_per_step": …, "steps": …, "times": [seconds of each step], "cpu_times": [CPU seconds
of each step, all threads: time.process_time()]} (the headline figure is the fastest step).

Without --spec it makes a random batch (for a quick stand-alone run):

    python -m koma.bench_train --preset tiny --batch 256 --seconds 5 [--channels-last]
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

    def exists(name):
        return os.path.exists(os.path.join(d, name))

    input1 = read("input1.u8", np.uint8, (n, FEATURES1_NUM, 9, 9))
    input2 = read("input2.u8", np.uint8, (n, FEATURES2_NUM, 9, 9))
    policy = read("policy.f32", "<f4", (n, MOVE_LABELS))
    value = read("value.f32", "<f4", (n, 3))
    # Older specs (and hand-made batches) have no weights or results: weight 1, result = argmax.
    policy_weight = read("policy_weight.f32", "<f4", (n,)) if exists("policy_weight.f32") else torch.ones(n)
    value_weight = read("value_weight.f32", "<f4", (n,)) if exists("value_weight.f32") else torch.ones(n)
    result = read("result_class.i64", "<i8", (n,)) if exists("result_class.i64") else value.argmax(1)
    return input1, input2, policy, value, policy_weight, value_weight, result


def random_batch(n: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    input1 = (torch.rand(n, FEATURES1_NUM, 9, 9, generator=g) < 0.1).to(torch.uint8)
    input2 = (torch.rand(n, FEATURES2_NUM, 9, 9, generator=g) < 0.1).to(torch.uint8)
    policy = torch.softmax(torch.randn(n, MOVE_LABELS, generator=g) * 3, dim=1)
    value = torch.softmax(torch.randn(n, 3, generator=g), dim=1)
    return input1, input2, policy, value, torch.ones(n), torch.ones(n), value.argmax(1)


def bench(spec: dict, batch) -> dict:
    torch.set_num_threads(int(spec["threads"]))
    device = torch.device(spec.get("device", "cpu"))
    precision = spec.get("precision", "f32")
    channels_last = bool(spec.get("channels_last", False))
    torch.manual_seed(0)
    model = KomaNet(ModelConfig.from_dict(spec["model"])).to(device)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    model.train()
    params = list(model.parameters())
    o = spec["optimizer"]
    if o["kind"] == "adamw":
        opt = torch.optim.AdamW(
            params, lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"], weight_decay=o["weight_decay"]
        )
    else:
        opt = torch.optim.SGD(
            params,
            lr=o["lr"],
            momentum=o["momentum"],
            nesterov=o["nesterov"] and o["momentum"] > 0,
            weight_decay=o["weight_decay"],
        )
    cp = spec["loss"]["policy_weight"]
    cv = spec["loss"]["value_weight"]
    input1, input2, policy_t, value_t, policy_w, value_w, result = (t.to(device) for t in batch)
    if channels_last:
        input1 = input1.contiguous(memory_format=torch.channels_last)
        input2 = input2.contiguous(memory_format=torch.channels_last)
    n = input1.shape[0]
    use_amp = device.type == "cuda" and precision in ("f16", "bf16")
    amp_dtype = torch.float16 if precision == "f16" else torch.bfloat16
    scaler = torch.amp.GradScaler("cuda", enabled=device.type == "cuda" and precision == "f16")

    def step():
        x1 = input1.float()
        x2 = input2.float()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device.type, dtype=amp_dtype, enabled=use_amp):
            policy, value = model(x1, x2)
        policy, value = policy.float(), value.float()
        policy_each = -(policy_t * F.log_softmax(policy, dim=1)).sum(dim=1)
        policy_loss = (policy_each * policy_w).sum() / n
        value_each = -(value_t * F.log_softmax(value, dim=1)).sum(dim=1)
        value_loss = (value_each * value_w).sum() / n
        loss = cp * policy_loss + cv * value_loss
        with torch.no_grad():
            has = (policy_w > 0).float()
            top1 = ((policy.argmax(1) == policy_t.argmax(1)).float() * has).sum() / has.sum().clamp_min(1.0)
            value_accuracy = (value.argmax(1) == result).float().mean()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        grad_norm = torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])
        scaler.step(opt)
        scaler.update()
        # Read back, as koma reads its step's statistics.
        return torch.stack(
            [policy_loss.detach(), value_loss.detach(), loss.detach(), top1, value_accuracy, grad_norm]
        ).tolist()

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    step()  # warm-up
    sync()
    start = time.perf_counter()
    times, cpu_times = [], []
    while len(times) < max(1, int(spec.get("min_steps", 1))) or time.perf_counter() - start < float(spec["seconds"]):
        c = time.process_time()
        t = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t)
        cpu_times.append(time.process_time() - c)
    # The fastest step is the best estimate on a shared machine (others only add time).
    best, mean = min(times), sum(times) / len(times)
    return {
        "samples_per_second": n / best,
        "seconds_per_step": best,
        "mean_samples_per_second": n / mean,
        "mean_seconds_per_step": mean,
        "steps": len(times),
        "times": times,
        "cpu_times": cpu_times,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", help="JSON spec written by `koma bench train`")
    ap.add_argument("--preset", default="tiny", choices=sorted(PRESETS))
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--channels-last", action="store_true", help="PyTorch's channels-last recipe")
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
            "channels_last": args.channels_last,
        }
        batch = random_batch(args.batch)
    print(json.dumps(bench(spec, batch)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

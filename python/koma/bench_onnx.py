"""Times an exported koma network (``koma export --format onnx``) under ONNX Runtime's execution
providers at several batch sizes, for scripts/gpu-check: whether a second inference backend
behind koma's ``Evaluator`` (TensorRT through ONNX Runtime, as dlshogi uses TensorRT) would be
worth building, measured beside ``koma bench nn``'s libtorch figures on the same GPU.

    python bench_onnx.py --model net.onnx [--providers tensorrt-fp16,cuda,cpu] [--batch-sizes 1,64,1024]
                         [--seconds 2]

Prints one JSON object: for each provider, whether ONNX Runtime has it (the PyPI ``onnxruntime``
wheel has only the CPU; ``onnxruntime-gpu`` adds CUDA and TensorRT), and per batch size the
positions per second (best of the timed runs after a warm-up, inputs of the dlshogi features'
density) or the error that stopped it. A provider that is missing or fails is reported, never
fatal.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

PROVIDERS = {
    "tensorrt-fp16": ("TensorrtExecutionProvider", {"trt_fp16_enable": True, "trt_engine_cache_enable": True}),
    "tensorrt": ("TensorrtExecutionProvider", {"trt_engine_cache_enable": True}),
    "cuda": ("CUDAExecutionProvider", {}),
    "cpu": ("CPUExecutionProvider", {}),
}


def time_batch(session, batch: int, seconds: float, rng) -> float:
    """Positions per second at `batch`: the best of repeated runs for about `seconds`."""
    import numpy as np

    in1 = (rng.random((batch, 62, 9, 9)) < 0.1).astype(np.float32)
    in2 = (rng.random((batch, 57, 9, 9)) < 0.3).astype(np.float32)
    feeds = {"input1": in1, "input2": in2}
    session.run(None, feeds)  # warm-up: the engine build (TensorRT) and the allocations
    best = float("inf")
    start = time.perf_counter()
    runs = 0
    while runs < 3 or time.perf_counter() - start < seconds:
        t = time.perf_counter()
        session.run(None, feeds)
        best = min(best, time.perf_counter() - t)
        runs += 1
    return batch / best


def bench(model: str, providers: list[str], batches: list[int], seconds: float) -> dict:
    try:
        import numpy as np
        import onnxruntime as ort
    except ImportError as e:
        return {"error": f"onnxruntime is not installed: {e}"}
    available = ort.get_available_providers()
    out = {"onnxruntime": ort.__version__, "available": available, "providers": {}}
    rng = np.random.default_rng(0)
    for name in providers:
        provider, options = PROVIDERS[name]
        entry: dict = {"provider": provider, "available": provider in available, "batches": {}}
        out["providers"][name] = entry
        if provider not in available:
            continue
        try:
            # The providers after it take the nodes it cannot run (TensorRT: CUDA, then the CPU).
            fallback = {"TensorrtExecutionProvider": ["CUDAExecutionProvider", "CPUExecutionProvider"],
                        "CUDAExecutionProvider": ["CPUExecutionProvider"]}.get(provider, [])
            chain = [(provider, options)] + [p for p in fallback if p in available]
            session = ort.InferenceSession(model, providers=chain)
            entry["used"] = session.get_providers()
        except Exception as e:  # noqa: BLE001 - every failure is a finding of the report
            entry["error"] = str(e).splitlines()[0] if str(e) else type(e).__name__
            continue
        if entry["used"][0] != provider:
            # onnxruntime-gpu lists TensorRT even without its libraries, then falls back: the
            # speed would be another provider's.
            entry["error"] = f"fell back to {entry['used'][0]}"
            continue
        for b in batches:
            try:
                entry["batches"][str(b)] = {"positions_per_second": time_batch(session, b, seconds, rng)}
            except Exception as e:  # noqa: BLE001
                entry["batches"][str(b)] = {"error": str(e).splitlines()[0] if str(e) else type(e).__name__}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="an ONNX file from koma export --format onnx")
    parser.add_argument("--providers", default="tensorrt-fp16,cuda,cpu",
                        help=f"comma-separated, of {', '.join(PROVIDERS)}")
    parser.add_argument("--batch-sizes", default="1,64,256,1024")
    parser.add_argument("--seconds", type=float, default=2.0, help="timing per batch size")
    args = parser.parse_args(argv)
    providers = [p for p in args.providers.split(",") if p]
    unknown = [p for p in providers if p not in PROVIDERS]
    if unknown:
        parser.error(f"unknown provider(s) {', '.join(unknown)}: expected {', '.join(PROVIDERS)}")
    try:
        batches = [int(b) for b in args.batch_sizes.split(",") if b]
    except ValueError:
        parser.error(f"--batch-sizes {args.batch_sizes!r}: expected comma-separated integers")
    if not batches or min(batches) < 1:
        parser.error("--batch-sizes: at least one size, each at least 1")
    print(json.dumps(bench(args.model, providers, batches, args.seconds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

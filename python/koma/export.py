"""Export a koma checkpoint to ONNX in dlshogi's interface.

    python -m koma.export --model model-00001000.safetensors --out model.onnx [--opset 17]

Inputs ``input1`` (N,62,9,9) and ``input2`` (N,57,9,9) float32; outputs ``output_policy``
(N,2187) logits and ``output_value`` (N,1) = P(win) + P(draw)/2 for the side to move; the batch
axis is dynamic. After writing, the file is checked with onnx.checker and, when onnxruntime is
installed, run on random inputs against the PyTorch model. Prints one JSON line.

`koma export --format onnx` runs this module (embedded in the binary) with the venv's Python.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch

if __package__ in (None, ""):
    # Run as a plain script (e.g. `python export.py` from an unpacked copy): import the sibling
    # model.py directly.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import durable  # type: ignore
    from model import FEATURES1_NUM, FEATURES2_NUM, ExportWrapper, load_checkpoint  # type: ignore
else:
    from . import durable
    from .model import FEATURES1_NUM, FEATURES2_NUM, ExportWrapper, load_checkpoint


def export_onnx(model_path: str, out_path: str, opset: int = 17, verify: bool = True) -> dict:
    model, meta = load_checkpoint(model_path)
    wrapper = ExportWrapper(model).eval()
    example = (torch.zeros(2, FEATURES1_NUM, 9, 9), torch.zeros(2, FEATURES2_NUM, 9, 9))
    # Published durably: a staged file beside out_path, fsynced, renamed, the directory fsynced.
    # The file gets the mode any new file gets here (0666 less the umask), as `cp` would give it:
    # the model is for other users' engines too.
    with durable.staged(out_path) as tmp:
        with torch.no_grad():
            torch.onnx.export(
                wrapper,
                example,
                tmp,
                input_names=["input1", "input2"],
                output_names=["output_policy", "output_value"],
                dynamic_axes={
                    "input1": {0: "batch"},
                    "input2": {0: "batch"},
                    "output_policy": {0: "batch"},
                    "output_value": {0: "batch"},
                },
                opset_version=opset,
                do_constant_folding=True,
                dynamo=False,
            )
        import onnx

        onnx.checker.check_model(onnx.load(tmp))
        summary = {"model": model_path, "out": out_path, "opset": opset, "step": meta.get("step")}
        if verify:
            summary["max_abs_diff"] = verify_onnx(wrapper, tmp)
    return summary


def verify_onnx(wrapper, onnx_path: str, batch: int = 5) -> float | None:
    """Largest |PyTorch − onnxruntime| over both outputs on random 0/1 inputs; None without
    onnxruntime."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    g = torch.Generator().manual_seed(0)
    in1 = (torch.rand(batch, FEATURES1_NUM, 9, 9, generator=g) < 0.1).float()
    in2 = (torch.rand(batch, FEATURES2_NUM, 9, 9, generator=g) < 0.3).float()
    with torch.no_grad():
        ref = [t.numpy() for t in wrapper(in1, in2)]
    sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    got = sess.run(["output_policy", "output_value"], {"input1": in1.numpy(), "input2": in2.numpy()})
    return float(max(abs(a - b).max() for a, b in zip(ref, got)))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="checkpoint .safetensors (with its .json sidecar)")
    parser.add_argument("--out", required=True, help="ONNX file to write")
    parser.add_argument("--opset", type=int, default=17)
    parser.add_argument("--no-verify", action="store_true", help="skip the onnxruntime comparison")
    args = parser.parse_args(argv)
    try:
        summary = export_onnx(args.model, args.out, args.opset, verify=not args.no_verify)
    except Exception as e:  # one clear line for the Rust caller
        print(f"export failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The network across languages, through the CLI: `koma init` (random weights, batch-norm
statistics perturbed) → `koma eval --raw` (Rust forward) vs python/koma/model.py (PyTorch mirror,
features from cshogi) vs `koma export --format onnx` run by onnxruntime; max |difference| < 1e-4.
Also: the mirror matches every safetensors key, and broken checkpoints are refused."""

import json
import os
import random
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from safetensors import safe_open

import cshogi

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from koma.dlshogi_oracle import cshogi_features  # noqa: E402
from koma.model import CheckpointError, KomaNet, ModelConfig, load_checkpoint  # noqa: E402

CONFIG = {
    "blocks": 3,
    "channels": 32,
    "activation": "mish",
    "se": {"ratio": 4},
    "global_pool": {"every": 2, "channels": 8},
    "policy_channels": 16,
    "value_channels": 4,
    "value_hidden": 32,
}


def sample_sfens(n=24):
    rng = random.Random(7)
    out = []
    while len(out) < n:
        board = cshogi.Board()
        for _ in range(rng.randrange(0, 120)):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(rng.choice(moves))
        if list(board.legal_moves):
            out.append(board.sfen())
    return out


@pytest.fixture(scope="module")
def checkpoint(koma, tmp_path_factory):
    d = tmp_path_factory.mktemp("nn")
    cfg = d / "config.json"
    cfg.write_text(json.dumps(CONFIG))
    path = d / "model-00000000.safetensors"
    koma("init", "--config", str(cfg), "--out", str(path), "--seed", "5", "--randomize")
    return path


@pytest.fixture(scope="module")
def rust_outputs(koma, checkpoint):
    sfens = sample_sfens()
    args = ["eval", "--model", str(checkpoint), "--json", "--raw", "--top", "0", "--device", "cpu"]
    for s in sfens:
        args += ["--sfen", s]
    rows = [json.loads(l) for l in koma(*args).stdout.splitlines()]
    assert len(rows) == len(sfens)
    policy = np.array([r["policy_logits"] for r in rows], dtype=np.float32)
    wdl = np.array([r["wdl_logits"] for r in rows], dtype=np.float32)
    return sfens, policy, wdl, rows


def test_mirror_matches_every_key(checkpoint):
    model, meta = load_checkpoint(str(checkpoint))
    assert meta["model"] == CONFIG
    with safe_open(str(checkpoint), framework="pt") as f:
        keys = set(f.keys())
    assert keys == set(model.state_dict().keys())
    assert not any("num_batches_tracked" in k for k in keys)
    assert meta["parameters"] == sum(p.numel() for p in model.parameters())


def test_rust_torch_onnx_parity(koma, checkpoint, rust_outputs, tmp_path):
    sfens, rust_policy, rust_wdl, rows = rust_outputs
    f1, f2 = cshogi_features(sfens)
    in1, in2 = f1.astype(np.float32), f2.astype(np.float32)
    model, _ = load_checkpoint(str(checkpoint))
    with torch.no_grad():
        py_policy, py_wdl = (t.numpy() for t in model(torch.from_numpy(in1), torch.from_numpy(in2)))
    assert np.abs(rust_policy).max() > 0.1  # not a degenerate network
    d_torch = max(np.abs(rust_policy - py_policy).max(), np.abs(rust_wdl - py_wdl).max())

    onnx_path = tmp_path / "model.onnx"
    koma("export", "--model", str(checkpoint), "--format", "onnx", "--out", str(onnx_path))
    # Readable by an engine run by another user (the default umask's 0644, not mkstemp's 0600).
    umask = os.umask(0)
    os.umask(umask)
    assert onnx_path.stat().st_mode & 0o777 == 0o666 & ~umask
    m = onnx.load(str(onnx_path))
    assert [i.name for i in m.graph.input] == ["input1", "input2"]
    assert [o.name for o in m.graph.output] == ["output_policy", "output_value"]
    assert m.graph.input[0].type.tensor_type.shape.dim[0].dim_param  # dynamic batch axis
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    ort_policy, ort_value = sess.run(None, {"input1": in1, "input2": in2})
    assert ort_policy.shape == (len(sfens), 2187) and ort_value.shape == (len(sfens), 1)
    p = torch.softmax(torch.from_numpy(rust_wdl), 1).numpy()
    rust_value = p[:, :1] + 0.5 * p[:, 1:2]
    d_onnx = max(np.abs(rust_policy - ort_policy).max(), np.abs(rust_value - ort_value).max())
    # A batch of one through the same graph.
    one_policy, _ = sess.run(None, {"input1": in1[:1], "input2": in2[:1]})
    assert np.abs(one_policy - rust_policy[:1]).max() < 1e-4
    print(f"max |rust - torch| = {d_torch:.3g}, max |rust - onnxruntime| = {d_onnx:.3g}")
    assert d_torch < 1e-4 and d_onnx < 1e-4

    # The priors koma prints are the softmax of the legal moves' logits.
    board = cshogi.Board(sfens[0])
    assert rows[0]["legal_moves"] == len(list(board.legal_moves))
    labels = [m["label"] for m in rows[0]["moves"]]
    priors = torch.softmax(torch.from_numpy(rust_policy[0, labels]), 0).numpy()
    assert np.abs(priors - np.array([m["prior"] for m in rows[0]["moves"]])).max() < 1e-5
    assert abs(sum(rows[0]["wdl"]) - 1) < 1e-5


def test_safetensors_export_round_trip(koma, checkpoint, rust_outputs, tmp_path):
    sfens, rust_policy, _, _ = rust_outputs
    copy = tmp_path / "copy.safetensors"
    koma("export", "--model", str(checkpoint), "--format", "safetensors", "--out", str(copy))
    rows = [json.loads(l) for l in koma("eval", "--model", str(copy), "--json", "--raw", "--device", "cpu",
                                          "--sfen", sfens[0]).stdout.splitlines()]
    assert np.abs(np.array(rows[0]["policy_logits"], dtype=np.float32) - rust_policy[0]).max() < 1e-5
    load_checkpoint(str(copy))


def test_broken_checkpoints_are_refused(koma_bin, checkpoint, tmp_path):
    data = bytearray(checkpoint.read_bytes())
    bad = tmp_path / "model.safetensors"
    (tmp_path / "model.json").write_text(checkpoint.with_suffix(".json").read_text())
    data[-10] ^= 0xFF
    bad.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="SHA-256"):
        load_checkpoint(str(bad))
    r = subprocess.run([koma_bin, "eval", "--model", str(bad), "--sfen", sample_sfens(1)[0]], capture_output=True, text=True)
    assert r.returncode != 0 and "corrupt" in r.stderr and "SHA-256" in r.stderr, r.stderr

    expected = ModelConfig.from_dict({**CONFIG, "channels": 48})
    with pytest.raises(CheckpointError, match="`channels` is 32"):
        load_checkpoint(str(checkpoint), expected=expected)

    meta = json.loads(checkpoint.with_suffix(".json").read_text())
    meta["encoding"]["version"] = 2
    (tmp_path / "model.json").write_text(json.dumps(meta))
    bad.write_bytes(checkpoint.read_bytes())
    with pytest.raises(CheckpointError, match="encoding.version"):
        load_checkpoint(str(bad))
    r = subprocess.run([koma_bin, "eval", "--model", str(bad), "--sfen", sample_sfens(1)[0]], capture_output=True, text=True)
    assert r.returncode != 0 and "encoding mismatch" in r.stderr and "encoding.version" in r.stderr, r.stderr


def test_python_mirror_builds_every_variant():
    for activation in ("relu", "swish", "mish"):
        cfg = ModelConfig.from_dict({**CONFIG, "activation": activation})
        policy, wdl = KomaNet(cfg).eval()(torch.zeros(2, 62, 9, 9), torch.zeros(2, 57, 9, 9))
        assert policy.shape == (2, 2187) and wdl.shape == (2, 3)


def test_python_mirror_reply_head(tmp_path):
    """The reply head: (N,2187) logits that are the 1x1 map rotated 180 degrees, the flag omitted
    from the JSON when off, and an ONNX export (plain dlshogi interface) without reply weights."""
    cfg = ModelConfig.from_dict({**CONFIG, "aux_reply_head": True})
    assert cfg.to_dict()["aux_reply_head"] is True
    assert "aux_reply_head" not in ModelConfig.from_dict(CONFIG).to_dict()
    assert not ModelConfig.from_dict(CONFIG).aux_reply_head
    net = KomaNet(cfg).eval()
    keys = set(net.state_dict())
    assert {"reply.out.weight", "reply.bias"} <= keys
    assert not any(k.startswith("reply") for k in KomaNet(ModelConfig.from_dict(CONFIG)).state_dict())
    g = torch.Generator().manual_seed(1)
    in1 = (torch.rand(3, 62, 9, 9, generator=g) < 0.2).float()
    in2 = (torch.rand(3, 57, 9, 9, generator=g) < 0.3).float()
    with torch.no_grad():
        torch.nn.init.normal_(net.reply.bias, generator=g)
        policy, wdl, reply = net.forward_with_reply(in1, in2)
        p2, _ = net(in1, in2)
        assert torch.equal(policy, p2) and reply.shape == (3, 2187)
        x = torch.cat([in1, in2], 1)
        x = net.act(net.stem.bn(net.stem.conv(x)))
        for b in net.blocks:
            x = b(x)
        hidden = net.act(net.policy.bn(net.policy.conv(x)))
        m = net.reply.out(hidden).reshape(3, 27, 81)
        for d, sq in [(0, 0), (8, 40), (26, 80), (13, 7)]:
            want = m[1, d, 80 - sq] + net.reply.bias[d * 81 + sq]
            assert abs(float(reply[1, d * 81 + sq] - want)) < 1e-5
    from koma.model import ExportWrapper
    path = tmp_path / "reply.onnx"
    torch.onnx.export(ExportWrapper(net).eval(), (in1, in2), str(path), input_names=["input1", "input2"],
                      output_names=["output_policy", "output_value"], opset_version=17, dynamo=False)
    graph = onnx.load(str(path)).graph
    assert [o.name for o in graph.output] == ["output_policy", "output_value"]
    assert not [t.name for t in graph.initializer if "reply" in t.name]


def test_bench_nn_smoke(koma):
    out = koma("bench", "nn", "--json", "--nets", "tiny", "--batch-sizes", "1,8,256", "--seconds", "0.01",
               "--device", "cpu", "--threads", "1").stdout
    report = json.loads(out)
    (net,) = report["nets"]
    assert net["describe"] == "5x64 relu"
    assert [b["batch"] for b in net["batches"]] == [1, 8, 256]
    for b in net["batches"]:
        for key in ("encode", "forward", "evaluate", "plain_forward"):
            assert b[f"{key}_positions_per_second"] > 0
    assert net["encode_share_at_256"] < 0.05 and report["encode_share_ok"]


def test_published_files_follow_the_umask(tmp_path, koma_bin):
    """Models, shards and records are published as `0666 & ~umask` (issue 32), so an engine or a
    trainer run by another user of the group can read them; no temporary file's 0600 leaks out."""
    def run(*args):
        # 027: group-readable, not world-readable, which is neither the 0600 of a temporary file
        # nor the 0644 of the usual umask.
        out = subprocess.run([koma_bin, *args], capture_output=True, text=True, timeout=300,
                             preexec_fn=lambda: os.umask(0o027))
        assert out.returncode == 0, out.stderr

    model = tmp_path / "model.safetensors"
    run("init", "--config", "tiny", "--out", str(model))
    run("selfplay", "--model", str(model), "--games", "2", "--out", str(tmp_path / "shards"),
        "--records", str(tmp_path / "records"), "--threads", "1")
    published = [p for p in tmp_path.rglob("*") if p.is_file()]
    kinds = {p.suffix for p in published}
    assert {".safetensors", ".json", ".h5"} <= kinds, sorted(str(p) for p in published)
    for path in published:
        assert path.stat().st_mode & 0o777 == 0o640, f"{path}: {oct(path.stat().st_mode & 0o777)}"

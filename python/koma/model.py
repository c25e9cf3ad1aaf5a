"""The koma network in PyTorch: a mirror of crates/nn/src/model.rs with identical parameter names.

Used to export ONNX (python/koma/export.py) and to inspect checkpoints from Python. The Rust
network is the reference; tests (crates/nn/tests/python_parity.rs, python/tests/test_nn_model.py)
keep the two equal to 1e-4.

    model, meta = load_checkpoint("runs/x/models/model-00001000.safetensors")
    policy_logits, wdl_logits = model(input1, input2)   # (N,2187), (N,3): win, draw, loss
    policy, wdl, reply = model.forward_with_reply(input1, input2)  # reply: (N,2187) or None

Inputs are float tensors (N,62,9,9) and (N,57,9,9) of dlshogi features (docs/nn.md).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

FEATURES1_NUM = 62
FEATURES2_NUM = 57
MOVE_DIRECTIONS = 27
MOVE_LABELS = MOVE_DIRECTIONS * 81
VALUE_OUTPUTS = 3

CHECKPOINT_FORMAT = "koma-checkpoint"
CHECKPOINT_FORMAT_VERSION = 1
ENCODING = {"name": "dlshogi", "version": 1}

ACTIVATIONS = {"relu": F.relu, "swish": F.silu, "silu": F.silu, "mish": F.mish}


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded: corrupt, wrong format, encoding or architecture."""


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Mirror of koma_nn::ModelConfig (same JSON)."""

    blocks: int
    channels: int
    activation: str = "relu"
    se: dict | None = None  # {"ratio": r}
    global_pool: dict | None = None  # {"every": k, "channels": g}
    policy_channels: int = 32
    value_channels: int = 32
    value_hidden: int = 256
    # KataGo's auxiliary opponent-reply policy head (training only; not exported to ONNX).
    aux_reply_head: bool = False

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "ModelConfig":
        fields = {f.name for f in dataclasses.fields(ModelConfig)}
        unknown = set(d) - fields
        if unknown:
            raise CheckpointError(f"unknown model config fields: {sorted(unknown)}")
        config = ModelConfig(**d)
        if config.activation not in ACTIVATIONS:
            raise CheckpointError(f"unknown activation {config.activation!r}")
        return config

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        # Rust leaves the flag out of the JSON when it is off; so do we.
        if not d["aux_reply_head"]:
            del d["aux_reply_head"]
        return d

    def is_global_pool_block(self, i: int) -> bool:
        gp = self.global_pool
        return gp is not None and i % gp["every"] == gp["every"] - 1


def _bn(c: int) -> nn.BatchNorm2d:
    bn = nn.BatchNorm2d(c, eps=1e-5, momentum=0.1)
    # tch's batch norm has no `num_batches_tracked`; drop it so the key sets match exactly.
    bn.register_buffer("num_batches_tracked", None)
    return bn


def _conv(cin: int, cout: int, k: int) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, k, padding=k // 2, bias=False)


class SqueezeExcite(nn.Module):
    def __init__(self, c: int, ratio: int, act):
        super().__init__()
        self.fc1 = nn.Linear(c, c // ratio)
        self.fc2 = nn.Linear(c // ratio, c)
        self.act = act

    def forward(self, x):
        s = x.mean(dim=(2, 3))
        s = torch.sigmoid(self.fc2(self.act(self.fc1(s))))
        return x * s[:, :, None, None]


class Block(nn.Module):
    def __init__(self, config: ModelConfig, index: int, act):
        super().__init__()
        c = config.channels
        self.act = act
        self.gpool = config.is_global_pool_block(index)
        regular = c
        if self.gpool:
            g = config.global_pool["channels"]
            regular = c - g
            self.conv1g = _conv(c, g, 3)
            self.bn1g = _bn(g)
            self.gpool_fc = nn.Linear(2 * g, regular, bias=False)
        self.conv1 = _conv(c, regular, 3)
        self.bn1 = _bn(regular)
        self.conv2 = _conv(regular, c, 3)
        self.bn2 = _bn(c)
        self.se = SqueezeExcite(c, config.se["ratio"], act) if config.se else None

    def forward(self, x):
        y = self.conv1(x)
        if self.gpool:
            h = self.act(self.bn1g(self.conv1g(x)))
            pooled = torch.cat([h.mean(dim=(2, 3)), h.amax(dim=(2, 3))], dim=1)
            y = y + self.gpool_fc(pooled)[:, :, None, None]
        y = self.act(self.bn1(y))
        y = self.bn2(self.conv2(y))
        if self.se is not None:
            y = self.se(y)
        return self.act(y + x)


class _Stem(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.conv = _conv(FEATURES1_NUM + FEATURES2_NUM, c, 3)
        self.bn = _bn(c)


class _Policy(nn.Module):
    def __init__(self, c: int, p: int):
        super().__init__()
        self.conv = _conv(c, p, 3)
        self.bn = _bn(p)
        self.out = _conv(p, MOVE_DIRECTIONS, 1)
        self.bias = nn.Parameter(torch.zeros(MOVE_LABELS))


class _Reply(nn.Module):
    """The opponent-reply head: a 1x1 convolution on the policy head's hidden planes, rotated 180
    degrees (labels are in the opponent's frame, docs/nn.md), plus a bias."""

    def __init__(self, p: int):
        super().__init__()
        self.out = _conv(p, MOVE_DIRECTIONS, 1)
        self.bias = nn.Parameter(torch.zeros(MOVE_LABELS))


class _Value(nn.Module):
    def __init__(self, c: int, v: int, h: int):
        super().__init__()
        self.conv = _conv(c, v, 1)
        self.bn = _bn(v)
        self.fc1 = nn.Linear(v * 81, h)
        self.fc2 = nn.Linear(h, VALUE_OUTPUTS)


class KomaNet(nn.Module):
    """Residual tower with policy (2187 logits) and W/D/L value (3 logits) heads."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        act = ACTIVATIONS[config.activation]
        self.act = act
        self.stem = _Stem(config.channels)
        self.blocks = nn.ModuleList(Block(config, i, act) for i in range(config.blocks))
        self.policy = _Policy(config.channels, config.policy_channels)
        self.value = _Value(config.channels, config.value_channels, config.value_hidden)
        self.reply = _Reply(config.policy_channels) if config.aux_reply_head else None

    def forward(self, input1, input2):
        """(policy logits (N,2187), W/D/L logits (N,3)); the reply head is not computed."""
        policy, value, _ = self._heads(input1, input2, with_reply=False)
        return policy, value

    def forward_with_reply(self, input1, input2):
        """(policy, W/D/L, reply logits (N,2187) or None without the head)."""
        return self._heads(input1, input2, with_reply=True)

    def _heads(self, input1, input2, with_reply: bool):
        act = self.act
        x = torch.cat([input1, input2], dim=1)
        x = act(self.stem.bn(self.stem.conv(x)))
        for block in self.blocks:
            x = block(x)
        p = act(self.policy.bn(self.policy.conv(x)))
        policy = self.policy.out(p).flatten(1) + self.policy.bias
        v = act(self.value.bn(self.value.conv(x)))
        v = act(self.value.fc1(v.flatten(1)))
        value = self.value.fc2(v)
        reply = None
        if with_reply and self.reply is not None:
            reply = torch.flip(self.reply.out(p), dims=(2, 3)).flatten(1) + self.reply.bias
        return policy, value, reply


def sidecar_path(weights_path: str) -> str:
    return os.path.splitext(weights_path)[0] + ".json"


def read_meta(weights_path: str) -> dict[str, Any]:
    """The checked sidecar of a checkpoint (format, version, encoding)."""
    path = sidecar_path(weights_path)
    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
    except FileNotFoundError:
        raise CheckpointError(f"{weights_path}: its sidecar {path} is missing") from None
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path}: sidecar is not valid JSON: {e}") from None
    if meta.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path}: `format` is {meta.get('format')!r}, expected {CHECKPOINT_FORMAT!r}")
    if meta.get("format_version") != CHECKPOINT_FORMAT_VERSION:
        raise CheckpointError(f"{path}: unsupported format_version {meta.get('format_version')!r}")
    for key, expected in ENCODING.items():
        found = (meta.get("encoding") or {}).get(key)
        if found != expected:
            raise CheckpointError(
                f"{weights_path}: encoding mismatch: `encoding.{key}` is {found!r} in the checkpoint "
                f"but {expected!r} was expected"
            )
    return meta


def load_checkpoint(weights_path: str, expected: ModelConfig | None = None, device: str = "cpu"):
    """Loads a koma checkpoint (weights + sidecar) into a new KomaNet in eval mode.

    Every tensor in the file must match a parameter or buffer of the network and vice versa.
    Returns (model, sidecar dict).
    """
    from safetensors import safe_open

    meta = read_meta(weights_path)
    config = ModelConfig.from_dict(meta["model"])
    if expected is not None and expected != config:
        a, b = dataclasses.asdict(config), dataclasses.asdict(expected)
        field = next(k for k in a if a[k] != b[k])
        raise CheckpointError(
            f"{weights_path}: architecture mismatch: `{field}` is {a[field]!r} in the checkpoint "
            f"but {b[field]!r} was expected"
        )
    with open(weights_path, "rb") as f:
        data = f.read()
    sha = hashlib.sha256(data).hexdigest()
    if sha != meta.get("weights_sha256"):
        raise CheckpointError(
            f"{weights_path}: corrupt or invalid checkpoint: SHA-256 of the weights is {sha} "
            f"but the sidecar records {meta.get('weights_sha256')}"
        )
    tensors = {}
    with safe_open(weights_path, framework="pt") as f:
        for key in f.keys():
            tensors[key] = f.get_tensor(key)
    model = KomaNet(config)
    own = model.state_dict()
    missing = sorted(set(own) - set(tensors))
    unexpected = sorted(set(tensors) - set(own))
    if missing or unexpected:
        raise CheckpointError(
            f"{weights_path}: tensor names do not match the architecture: "
            f"missing {missing}, unexpected {unexpected}"
        )
    for key, t in tensors.items():
        if tuple(t.shape) != tuple(own[key].shape):
            raise CheckpointError(f"{weights_path}: tensor `{key}` has shape {tuple(t.shape)}, expected {tuple(own[key].shape)}")
    # Copy in place (state_dict tensors share storage with the parameters and buffers).
    # load_state_dict would re-add BatchNorm's `num_batches_tracked` and then reject it.
    with torch.no_grad():
        for key, t in tensors.items():
            own[key].copy_(t)
    model.to(device)
    model.eval()
    return model, meta


class ExportWrapper(nn.Module):
    """The dlshogi-compatible interface: (input1, input2) -> (output_policy logits (N,2187),
    output_value (N,1) = P(win) + P(draw)/2)."""

    def __init__(self, model: KomaNet):
        super().__init__()
        self.model = model

    def forward(self, input1, input2):
        policy, wdl = self.model(input1, input2)
        p = torch.softmax(wdl, dim=1)
        value = p[:, 0:1] + 0.5 * p[:, 1:2]
        return policy, value

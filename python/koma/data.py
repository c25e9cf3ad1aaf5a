"""Reading koma replay shards (docs/data-format.md) with h5py and numpy.

A shard is one HDF5 file of samples (positions, moves, sparse policy targets, results) and the
games they come from. This module decodes it without koma's Rust code:

    from koma.data import Shard, read_dir
    shard = Shard("run/selfplay/selfplay-123-000000.h5")
    len(shard)                      # samples
    shard.sfen(0)                   # the position of sample 0 as SFEN
    shard.move_usi(0)               # the move played from it (None: none)
    moves, weights = shard.policy(0)  # USI moves and weights summing to 1
    shard.games[0]                  # a Game: start SFEN, moves, winner, end, samples range
    shard.board(0)                  # a cshogi.Board (needs cshogi)
    f1, f2 = shard.features([0, 1])  # dlshogi input features (needs cshogi)

`koma-packed-v1` positions and `koma-move16-v1` moves are decoded here in pure Python.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

import h5py
import numpy as np

FORMAT = "koma-replay"
FORMAT_VERSION = 1
PACKED_BYTES = 40

# Sample flags.
FULL_SEARCH = 1
NO_RESIGN = 2
IMPORTED = 4
# `ply` of samples whose ply is unknown (hcpe imports).
PLY_UNKNOWN = 0xFFFF

END_REASONS = [
    "checkmate",
    "resignation",
    "repetition",
    "perpetual_check",
    "declaration",
    "try",
    "max_moves",
    "time_loss",
    "illegal_move",
    "abort",
    "forfeit",
]

# Piece types 1..14 (promoted = unpromoted + 8), as SFEN letters.
_PIECE_LETTERS = {1: "P", 2: "L", 3: "N", 4: "S", 5: "B", 6: "R", 7: "G", 8: "K",
                  9: "+P", 10: "+L", 11: "+N", 12: "+S", 13: "+B", 14: "+R"}
_HAND_TYPES = [1, 2, 3, 4, 5, 6, 7]  # pawn, lance, knight, silver, bishop, rook, gold (stored order)
_SFEN_HAND_ORDER = [6, 5, 7, 4, 3, 2, 1]  # R B G S N L P


def square_usi(index: int) -> str:
    """USI name of a square index `(file - 1) * 9 + (rank - 1)` (0 = 1a, 80 = 9i)."""
    return f"{index // 9 + 1}{chr(ord('a') + index % 9)}"


def move16_to_usi(code: int) -> Optional[str]:
    """USI text of a `koma-move16-v1` code (None for 0)."""
    code = int(code)
    if code == 0:
        return None
    to = code & 0x7F
    frm = (code >> 7) & 0x7F
    if code & 0x8000:
        return f"{_PIECE_LETTERS[frm]}*{square_usi(to)}"
    return square_usi(frm) + square_usi(to) + ("+" if code & 0x4000 else "")


def usi_to_move16(usi: str) -> int:
    """The `koma-move16-v1` code of a USI move."""
    def sq(s: str) -> int:
        return (int(s[0]) - 1) * 9 + (ord(s[1]) - ord("a"))

    if usi[1] == "*":
        pt = {v: k for k, v in _PIECE_LETTERS.items()}[usi[0]]
        return sq(usi[2:4]) | (pt << 7) | 0x8000
    return sq(usi[2:4]) | (sq(usi[0:2]) << 7) | (0x4000 if usi.endswith("+") else 0)


class _Bits:
    def __init__(self, data: bytes):
        self.value = int.from_bytes(bytes(data), "little")
        self.pos = 0

    def read(self, n: int) -> int:
        v = (self.value >> self.pos) & ((1 << n) - 1)
        self.pos += n
        if self.pos > PACKED_BYTES * 8:
            raise ValueError("packed position: bit stream ends early")
        return v


def unpack_position(data, move_number: int = 1) -> str:
    """SFEN of a 40-byte `koma-packed-v1` position."""
    r = _Bits(data)
    side = r.read(1)
    board: dict[int, tuple[int, int]] = {}  # square -> (colour, type)
    kings = [r.read(7), r.read(7)]
    for color, sq in enumerate(kings):
        board[sq] = (color, 8)
    for sq in range(81):
        if sq in kings:
            continue
        if r.read(1):
            code = r.read(5)
            board[sq] = (code & 1, (code >> 1) + 1)
    hands = [[0] * 8 for _ in range(2)]
    for color in range(2):
        for pt in _HAND_TYPES:
            n = 0
            while r.read(1):
                n += 1
            hands[color][pt] = n
    rows = []
    for rank in range(9):
        row, empty = "", 0
        for file in range(9, 0, -1):
            piece = board.get((file - 1) * 9 + rank)
            if piece is None:
                empty += 1
                continue
            if empty:
                row += str(empty)
                empty = 0
            letters = _PIECE_LETTERS[piece[1]]
            row += letters if piece[0] == 0 else letters.lower()
        if empty:
            row += str(empty)
        rows.append(row)
    hand = ""
    for color in range(2):
        for pt in _SFEN_HAND_ORDER:
            n = hands[color][pt]
            if n:
                letter = _PIECE_LETTERS[pt] if color == 0 else _PIECE_LETTERS[pt].lower()
                hand += (str(n) if n > 1 else "") + letter
    return f"{'/'.join(rows)} {'bw'[side]} {hand or '-'} {move_number}"


@dataclass
class Game:
    """One game of a shard (or, with an empty `start`, a set of hcpe positions)."""

    start: str
    model: str
    winner: int  # 1 Black, -1 White, 0 none
    end: str
    length: int
    moves: list  # USI
    samples: range

    @property
    def is_game(self) -> bool:
        return bool(self.start)


def _strings(ds) -> list:
    return [s.decode() if isinstance(s, bytes) else str(s) for s in ds[()]]


class Shard:
    """A replay shard read whole into numpy arrays."""

    def __init__(self, path):
        self.path = Path(path)
        with h5py.File(self.path, "r") as f:
            fmt = f.attrs.get("format")
            fmt = fmt.decode() if isinstance(fmt, bytes) else fmt
            if fmt != FORMAT:
                raise ValueError(f"{self.path}: not a koma replay shard (format {fmt!r})")
            version = int(f.attrs.get("format_version", -1))
            if version != FORMAT_VERSION:
                raise ValueError(f"{self.path}: format version {version}, this reader knows {FORMAT_VERSION}")
            self.position = np.asarray(f["position"][()], dtype=np.uint8).reshape(-1, PACKED_BYTES)
            self.move = f["move"][()].astype(np.uint16)
            self.root_wdl = np.asarray(f["root_wdl"][()], dtype=np.float32).reshape(-1, 3)
            self.result = f["result"][()].astype(np.int8)
            self.ply = f["ply"][()].astype(np.uint16)
            self.flags = f["flags"][()].astype(np.uint8)
            self.game = f["game"][()].astype(np.uint32)
            self.policy_offsets = f["policy_offsets"][()].astype(np.int64)
            self.policy_move = f["policy_move"][()].astype(np.uint16)
            self.policy_weight = f["policy_weight"][()].astype(np.uint16)
            starts = _strings(f["game_start"])
            models = _strings(f["game_model"])
            winners = f["game_winner"][()]
            ends = f["game_end"][()]
            lengths = f["game_length"][()]
            first = f["game_first_sample"][()]
            move_offsets = f["game_move_offsets"][()]
            game_moves = f["game_moves"][()]
        self.games = [
            Game(
                start=starts[g],
                model=models[g],
                winner=int(winners[g]),
                end=END_REASONS[ends[g]] if ends[g] < len(END_REASONS) else f"unknown({ends[g]})",
                length=int(lengths[g]),
                moves=[move16_to_usi(m) for m in game_moves[move_offsets[g]:move_offsets[g + 1]]],
                samples=range(int(first[g]), int(first[g + 1])),
            )
            for g in range(len(starts))
        ]

    def __len__(self) -> int:
        return len(self.move)

    def sfen(self, i: int) -> str:
        """The position of sample i (move number ply + 1 when the ply is known, else 1)."""
        ply = int(self.ply[i])
        return unpack_position(self.position[i], 1 if ply == PLY_UNKNOWN else ply + 1)

    def side_to_move(self, i: int) -> int:
        """0 Black, 1 White."""
        return int(self.position[i][0] & 1)

    def move_usi(self, i: int) -> Optional[str]:
        return move16_to_usi(self.move[i])

    def policy(self, i: int) -> tuple[list, np.ndarray]:
        """The policy target of sample i: USI moves and weights renormalised to sum to 1."""
        a, b = self.policy_offsets[i], self.policy_offsets[i + 1]
        w = self.policy_weight[a:b].astype(np.float64)
        total = w.sum()
        return [move16_to_usi(m) for m in self.policy_move[a:b]], (w / total if total > 0 else w).astype(np.float32)

    def policy_csr(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(offsets, move codes, raw u16 weights) of all samples."""
        return self.policy_offsets, self.policy_move, self.policy_weight

    def board(self, i: int):
        import cshogi

        return cshogi.Board(self.sfen(i))

    def features(self, indices: Iterable[int]) -> tuple[np.ndarray, np.ndarray]:
        """dlshogi input features (N, 62, 9, 9) and (N, 57, 9, 9) of the samples, via cshogi."""
        import cshogi
        import cshogi.dlshogi as dl

        indices = list(indices)
        f1 = np.zeros((len(indices), dl.FEATURES1_NUM, 9, 9), dtype=np.float32)
        f2 = np.zeros((len(indices), dl.FEATURES2_NUM, 9, 9), dtype=np.float32)
        board = cshogi.Board()
        for k, i in enumerate(indices):
            board.set_sfen(self.sfen(i))
            dl.make_input_features(board, f1[k], f2[k])
        return f1, f2

    def move_labels(self, indices: Iterable[int]) -> np.ndarray:
        """dlshogi move labels of the moves played (-1 where none), via cshogi."""
        import cshogi
        import cshogi.dlshogi as dl

        out = []
        board = cshogi.Board()
        for i in indices:
            usi = self.move_usi(i)
            if usi is None:
                out.append(-1)
                continue
            board.set_sfen(self.sfen(i))
            out.append(int(dl.make_move_label(board.move_from_usi(usi), board.turn)))
        return np.array(out, dtype=np.int64)


def shard_paths(inputs) -> list:
    """The .h5 files among the inputs (files, or directories searched recursively), sorted."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    out = []
    for p in map(Path, inputs):
        out.extend(sorted(p.rglob("*.h5")) if p.is_dir() else [p])
    return out


def read_dir(inputs) -> list:
    """Every shard under the inputs."""
    return [Shard(p) for p in shard_paths(inputs)]

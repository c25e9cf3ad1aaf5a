"""`koma encode` against cshogi's dlshogi encoding, bit for bit.

Positions come from cshogi itself (independently of koma's move generator): random playouts from
every handicap start and from "kings only, everything in hand" starts (full hands, many drops and
checks), both sides to move. Each line gets a random legal move (labels compared with
`cshogi.dlshogi.make_move_label`) or none (label −1). Features are compared with
`cshogi.dlshogi.make_input_features`.
"""

import os
import random
import subprocess
import sys

import h5py
import numpy as np
import pytest

import cshogi

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from koma.dlshogi_oracle import cshogi_features, cshogi_label  # noqa: E402

HANDICAPS = [
    "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1",
    "lnsgkgsn1/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "lnsgkgsnl/1r7/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "lnsgkgsnl/7b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "lnsgkgsn1/7b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "lnsgkgsnl/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "1nsgkgsn1/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "2sgkgs2/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "3gkg3/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "4k4/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "4k4/9/9/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w 3p 1",
    "4k4/9/9/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
]

SET = [("R", 2), ("B", 2), ("G", 4), ("S", 4), ("N", 4), ("L", 4), ("P", 18)]


def kings_and_hands(rng: random.Random) -> str:
    """Both kings on the board (not adjacent), all 38 other pieces split between the hands."""
    while True:
        bk, wk = rng.randrange(81), rng.randrange(81)
        if abs(bk // 9 - wk // 9) > 1 or abs(bk % 9 - wk % 9) > 1:
            break
    rows = []
    for rank in range(9):
        row, empty = "", 0
        for file in range(8, -1, -1):
            sq = file * 9 + rank
            piece = "K" if sq == bk else "k" if sq == wk else None
            if piece is None:
                empty += 1
            else:
                row += (str(empty) if empty else "") + piece
                empty = 0
        rows.append(row + (str(empty) if empty else ""))
    black, white = "", ""
    for letter, count in SET:
        nb = sum(rng.random() < 0.5 for _ in range(count))
        for n, side, l in ((nb, "b", letter), (count - nb, "w", letter.lower())):
            if n:
                part = (str(n) if n > 1 else "") + l
                if side == "b":
                    black += part
                else:
                    white += part
    return f"{'/'.join(rows)} {rng.choice('bw')} {black + white or '-'} 1"


def playout(rng: random.Random, start: str, plies: int, keep_every: int, out: list) -> None:
    board = cshogi.Board(start)
    for ply in range(plies):
        moves = list(board.legal_moves)
        if not moves:
            break
        if ply % keep_every == 0 or board.is_check():
            out.append((board.sfen(), moves))
        board.push(rng.choice(moves))


@pytest.fixture(scope="module")
def lines():
    rng = random.Random(20241129)
    rows = []
    for start in HANDICAPS:
        for _ in range(25):
            playout(rng, start, rng.randrange(1, 220), 3, rows)
    for _ in range(250):
        playout(rng, kings_and_hands(rng), rng.randrange(1, 60), 2, rows)
    out = []
    for i, (sfen, moves) in enumerate(rows):
        move = cshogi.move_to_usi(rng.choice(moves)) if i % 5 else None
        out.append((sfen, move))
    return out


def test_encode_matches_cshogi(koma, lines, tmp_path):
    n = len(lines)
    boards = [cshogi.Board(s) for s, _ in lines]
    white = sum(b.turn == cshogi.WHITE for b in boards)
    checks = sum(bool(b.is_check()) for b in boards)
    # Hands in cshogi order: pawn, lance, knight, silver, gold, bishop, rook.
    full = sum(
        any(h[0] >= 8 or max(h[1:5]) >= 4 or max(h[5:7]) >= 2 for h in b.pieces_in_hand) for b in boards
    )
    print(f"{n} positions: {white} White to move, {checks} in check, {full} with a full hand")
    assert n >= 10_000, n
    assert white >= 3_000 and n - white >= 3_000
    assert checks >= 1_000, checks
    assert full >= 1_000, full

    src = tmp_path / "positions.txt"
    src.write_text("".join(f"{s} {m}\n" if m else f"{s}\n" for s, m in lines))
    out = tmp_path / "features.h5"
    koma("encode", "--input", str(src), "--output", str(out))
    with h5py.File(out, "r") as f:
        in1, in2, label = f["input1"][:], f["input2"][:], f["label"][:]
        assert f.attrs["encoding_version"] == 1
    assert in1.shape == (n, 62, 9, 9) and in1.dtype == np.uint8
    assert in2.shape == (n, 57, 9, 9) and in2.dtype == np.uint8
    assert label.shape == (n,) and label.dtype == np.int32

    ref1, ref2 = cshogi_features([s for s, _ in lines])
    bad = np.nonzero((in1 != ref1).reshape(n, -1).any(1) | (in2 != ref2).reshape(n, -1).any(1))[0]
    assert bad.size == 0, f"{bad.size} positions differ, first: {lines[bad[0]][0]}"

    ref_labels = np.array(
        [cshogi_label(b, m) if m else -1 for b, (_, m) in zip(boards, lines)], dtype=np.int32
    )
    bad = np.nonzero(label != ref_labels)[0]
    assert bad.size == 0, f"{bad.size} labels differ, first: {lines[bad[0]]} koma {label[bad[0]]} cshogi {ref_labels[bad[0]]}"
    assert (label == -1).sum() == sum(m is None for _, m in lines)


def test_encode_reports_bad_lines(koma_bin, tmp_path):
    src = tmp_path / "bad.txt"
    src.write_text(
        "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1 7g7f\n"
        "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1 7g7e\n"
    )
    out = tmp_path / "bad.h5"
    r = subprocess.run([koma_bin, "encode", "--input", str(src), "--output", str(out)], capture_output=True, text=True)
    assert r.returncode != 0
    assert "line 2" in r.stderr and "7g7e" in r.stderr, r.stderr
    assert not out.exists()

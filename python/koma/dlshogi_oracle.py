"""cshogi as an oracle for koma's dlshogi encoding (features and move labels).

cshogi is used only through its public Python API (``cshogi.dlshogi.make_input_features`` and
``make_move_label``); nothing of it is copied. Two entry points:

- ``compare_dump(positions_path, features_path)``: checks a dump written by koma-nn's Rust test
  (tests/cshogi_parity.rs). ``positions_path`` has one line per position,
  ``<sfen>\\t<usi,usi,...>\\t<label,label,...>\\t<0|1 in check>``; ``features_path`` holds, per
  position, input1 (62*81 bytes) then input2 (57*81 bytes). Prints one JSON summary line.
- ``cshogi_features(sfens)`` / ``cshogi_label(sfen, usi)``: reference values for pytest.

Run as a script: ``python dlshogi_oracle.py POSITIONS FEATURES`` (exit status 1 on any mismatch).
"""

from __future__ import annotations

import json
import sys

import numpy as np

import cshogi
import cshogi.dlshogi as dl

FEATURES1_NUM = 62
FEATURES2_NUM = 57


def _check_constants() -> None:
    assert dl.FEATURES1_NUM == FEATURES1_NUM, dl.FEATURES1_NUM
    assert dl.FEATURES2_NUM == FEATURES2_NUM, dl.FEATURES2_NUM


def cshogi_features(sfens) -> tuple[np.ndarray, np.ndarray]:
    """(N,62,9,9) and (N,57,9,9) uint8 features of the given SFENs, computed by cshogi."""
    _check_constants()
    dl.use_nyugyoku_features(False)
    n = len(sfens)
    f1 = np.zeros((n, FEATURES1_NUM, 9, 9), dtype=np.float32)
    f2 = np.zeros((n, FEATURES2_NUM, 9, 9), dtype=np.float32)
    board = cshogi.Board()
    for i, sfen in enumerate(sfens):
        board.set_sfen(sfen)
        dl.make_input_features(board, f1[i], f2[i])
    return f1.astype(np.uint8), f2.astype(np.uint8)


def cshogi_label(board: cshogi.Board, usi: str) -> int:
    return int(dl.make_move_label(board.move_from_usi(usi), board.turn))


def _describe_feature_mismatch(sfen: str, ours: np.ndarray, theirs: np.ndarray) -> dict:
    planes = np.nonzero((ours != theirs).reshape(ours.shape[0], -1).any(axis=1))[0].tolist()
    p = planes[0]
    diff = np.nonzero(ours[p].reshape(-1) != theirs[p].reshape(-1))[0].tolist()
    return {
        "sfen": sfen,
        "planes": planes[:20],
        "first_plane": p,
        "squares (file*9+rank)": diff[:20],
        "ours": ours[p].reshape(-1)[diff[:20]].tolist(),
        "cshogi": theirs[p].reshape(-1)[diff[:20]].tolist(),
    }


def compare_dump(positions_path: str, features_path: str, max_reports: int = 5) -> dict:
    with open(positions_path, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    n = len(rows)
    per = (FEATURES1_NUM + FEATURES2_NUM) * 81
    raw = np.fromfile(features_path, dtype=np.uint8)
    if raw.size != n * per:
        raise SystemExit(f"features file has {raw.size} bytes, expected {n} positions x {per}")
    raw = raw.reshape(n, per)
    ours1 = raw[:, : FEATURES1_NUM * 81].reshape(n, FEATURES1_NUM, 9, 9)
    ours2 = raw[:, FEATURES1_NUM * 81 :].reshape(n, FEATURES2_NUM, 9, 9)
    sfens = [r[0] for r in rows]
    ref1, ref2 = cshogi_features(sfens)

    summary = {
        "positions": n,
        "moves": 0,
        "white_to_move": 0,
        "in_check": 0,
        "feature_mismatches": 0,
        "label_mismatches": 0,
        "movelist_mismatches": 0,
        "check_mismatches": 0,
        "reports": [],
    }
    bad1 = (ours1 != ref1).reshape(n, -1).any(axis=1)
    bad2 = (ours2 != ref2).reshape(n, -1).any(axis=1)
    for i in np.nonzero(bad1 | bad2)[0].tolist():
        summary["feature_mismatches"] += 1
        if len(summary["reports"]) < max_reports:
            if bad1[i]:
                report = _describe_feature_mismatch(sfens[i], ours1[i], ref1[i])
                report["input"] = "input1"
            else:
                report = _describe_feature_mismatch(sfens[i], ours2[i], ref2[i])
                report["input"] = "input2"
            summary["reports"].append(report)

    board = cshogi.Board()
    for sfen, usis, labels, check in rows:
        board.set_sfen(sfen)
        summary["white_to_move"] += board.turn == cshogi.WHITE
        summary["in_check"] += bool(board.is_check())
        if bool(board.is_check()) != (check == "1"):
            summary["check_mismatches"] += 1
        usis = usis.split(",") if usis else []
        labels = [int(x) for x in labels.split(",")] if labels else []
        theirs = sorted(cshogi.move_to_usi(m) for m in board.legal_moves)
        if sorted(usis) != theirs:
            summary["movelist_mismatches"] += 1
            if len(summary["reports"]) < max_reports:
                summary["reports"].append(
                    {"sfen": sfen, "movelist": {"koma_only": sorted(set(usis) - set(theirs)),
                                                "cshogi_only": sorted(set(theirs) - set(usis))}}
                )
        for usi, label in zip(usis, labels):
            summary["moves"] += 1
            ref = cshogi_label(board, usi)
            if ref != label:
                summary["label_mismatches"] += 1
                if len(summary["reports"]) < max_reports:
                    summary["reports"].append({"sfen": sfen, "move": usi, "ours": label, "cshogi": ref})
    return summary


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    summary = compare_dump(argv[1], argv[2])
    print(json.dumps(summary))
    bad = sum(summary[k] for k in ("feature_mismatches", "label_mismatches", "movelist_mismatches", "check_mismatches"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""`koma openings` writes distinct, legal, balanced-by-material openings, and the shipped suite
parses; checked through cshogi as an independent reader of the USI lines."""

import pathlib

import cshogi

REPO = pathlib.Path(__file__).resolve().parents[2]


def positions(text: str) -> list[str]:
    """The SFEN reached by each USI line, replayed with cshogi (which rejects illegal moves)."""
    out = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        words = line.split()
        assert words[:2] == ["startpos", "moves"], line
        board = cshogi.Board()
        for usi in words[2:]:
            move = board.move_from_usi(usi)
            assert board.is_legal(move), f"{usi} illegal in {board.sfen()}"
            board.push(move)
        out.append(board.sfen())
    return out


def test_generated_suite_is_distinct_and_legal(koma, tmp_path):
    out = tmp_path / "suite.txt"
    koma("openings", "--count", "12", "--plies", "6", "--seed", "7", "--out", str(out))
    sfens = positions(out.read_text())
    assert len(sfens) == 12
    assert len(set(sfens)) == 12, "openings repeat"
    assert all(" b " in s for s in sfens), "after 6 plies Black is to move"


def test_shipped_suite_parses():
    sfens = positions((REPO / "data/openings/balanced-8.txt").read_text())
    assert len(sfens) == 100
    assert len(set(sfens)) == 100

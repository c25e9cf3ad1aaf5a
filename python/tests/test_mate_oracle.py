"""Differential tests of `koma mate` (df-pn, koma-mate) against cshogi's df-pn as an oracle.

cshogi is used only through its Python API, as an independent solver: `DfPn(depth, nodes).search`
says whether the side to move mates within `depth` plies, `search_andnode` whether the side to
move (in check) is mated; a `False` with `searched_node` at the limit is undecided. Positions come
from seeded random games played by cshogi (cshogi_games.play), taken a few plies before their
checkmate with the winner to move, and from the middle of such games.

Asserted, at equal limits (31 plies, 100 000 nodes each):
- every line koma calls a mate replays in cshogi as legal checks and evasions ending in mate, and
  cshogi proves every position after an attacker move of it lost for the defender (forced);
- what koma proves has no mate, cshogi finds no mate for either;
- what cshogi proves is a mate, koma proves too.
"""

import json
import os
import random
import subprocess

import cshogi  # the oracle; python/requirements.txt pins it
import pytest
from cshogi_games import play

DEPTH = 31
NODES = 100_000


def koma_mate(lines, *args: str) -> list:
    """One `koma mate` process for all lines; one parsed JSON answer per line."""
    path = os.environ.get("KOMA_BIN")
    if not path:
        pytest.fail("KOMA_BIN is not set: run these tests through scripts/test")
    data = "".join(f"{line}\n" for line in lines).encode()
    proc = subprocess.run([path, "mate", *args], input=data, capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    out = proc.stdout.decode().splitlines()
    assert len(out) == len(lines), f"{len(lines)} lines in, {len(out)} out"
    return [json.loads(o) for o in out]


def positions(seed: int, count: int) -> list:
    """SFENs with the side to move holding a check: late positions of games that ended in mate
    (the winner to move, 1–15 plies before the end) and positions from the middle of games."""
    rng = random.Random(seed)
    out = []
    while len(out) < count:
        board = cshogi.Board()
        moves = play(board, rng, rng.randint(60, 240), mate_rate=0.3)
        if board.is_game_over():
            # The side to move is mated: step back an odd number of plies to the winner's move.
            back = rng.choice([1, 3, 5, 7, 9, 11, 13, 15])
            if back > len(moves):
                continue
            for _ in range(back):
                board.pop()
        elif rng.random() < 0.5:
            continue
        if board.is_game_over():
            continue
        if any(_gives_check(board, m) for m in board.legal_moves):
            out.append(board.sfen())
    return out


def _gives_check(board, move) -> bool:
    board.push(move)
    check = board.is_check()
    board.pop()
    return check


def cshogi_verdict(sfen: str):
    """(mated, decided, pv) from cshogi's df-pn at DEPTH plies and NODES nodes."""
    board = cshogi.Board(sfen)
    dfpn = cshogi.DfPn(DEPTH, NODES)
    found = dfpn.search(board)
    return found, found or dfpn.searched_node < NODES


def assert_forced_mate(sfen: str, line: list):
    """The line replays legally, every attacker move checks, it ends in mate, and after every
    attacker move cshogi proves the defender lost (every defence, not just the line's)."""
    board = cshogi.Board(sfen)
    assert len(line) % 2 == 1 and len(line) <= DEPTH, line
    for i, usi in enumerate(line):
        legal = {cshogi.move_to_usi(m) for m in board.legal_moves}
        assert usi in legal, f"{sfen}: move {i + 1} ({usi}) is not legal"
        board.push_usi(usi)
        if i % 2 == 0:
            assert board.is_check(), f"{sfen}: attacker move {i + 1} ({usi}) gives no check"
            remaining = len(line) - i - 1
            solver = cshogi.DfPn(max(remaining, 1), 2_000_000)
            assert solver.search_andnode(board), f"{sfen}: after {line[: i + 1]} cshogi finds an escape"
    assert board.is_game_over(), f"{sfen}: {line} does not end in mate"


def test_koma_mate_agrees_with_cshogi():
    sfens = positions(seed=20261202, count=150)
    answers = koma_mate([f"sfen {s}" for s in sfens], "--plies", str(DEPTH), "--nodes", str(NODES))
    counts = {"mate": 0, "nomate": 0, "nomate_within": 0, "unknown": 0}
    for sfen, answer in zip(sfens, answers):
        assert "error" not in answer, (sfen, answer)
        counts[answer["result"]] += 1
        mated, decided = cshogi_verdict(sfen)
        if answer["result"] == "mate":
            assert_forced_mate(sfen, answer["pv"])
        if answer["result"] in ("nomate", "nomate_within"):
            assert not mated, f"{sfen}: koma says {answer['result']}, cshogi mates"
        if mated:
            assert answer["result"] == "mate", f"{sfen}: cshogi mates within {DEPTH} plies and {NODES} nodes, koma: {answer}"
    assert counts["mate"] >= 30 and counts["nomate"] + counts["nomate_within"] >= 30, counts


def test_bad_lines_get_errors_and_the_rest_answers():
    answers = koma_mate(["sfen not a position", "sfen 4k4/9/4P4/9/9/9/9/9/4K4 b G 1", "startpos"])
    assert "error" in answers[0]
    assert answers[1]["result"] == "mate" and answers[1]["pv"] == ["G*5b"]
    assert answers[2]["result"] == "nomate"

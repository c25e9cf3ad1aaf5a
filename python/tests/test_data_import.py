"""`koma data import` against cshogi (an independent implementation, used only through its
Python API as an oracle).

cshogi plays random games from the even start, handicaps and random middle-game positions and
writes them as CSA and KIF records and as dlshogi hcpe files (its `to_hcp`, `move16`). koma
imports them; the shards, read with python/koma/data.py, must hold exactly cshogi's positions,
moves and results. The hcpe files must come back byte for byte from `koma data export`, which
checks koma's HuffmanCodedPos encoder and decoder bit for bit against cshogi's. Corrupt hcpe files
must be reported with the file and the record index.

Needs KOMA_BIN (scripts/test sets it). KOMA_IMPORT_GAMES sets the number of games (default 150).
"""

import json
import math
import os
import random
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

cshogi = pytest.importorskip("cshogi")
import cshogi.CSA  # noqa: E402
import cshogi.KIF  # noqa: E402
from cshogi_games import HANDICAPS as ALL_STARTS, play  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from koma.data import FULL_SEARCH, IMPORTED, PLY_UNKNOWN, read_dir  # noqa: E402

N_GAMES = int(os.environ.get("KOMA_IMPORT_GAMES", "150"))
EVAL_SCALE = 756.0864962951762
BLACK, WHITE = 0, 1

# Starts cshogi's KIF exporter names (手合割) and koma reads: name → SFEN.
HANDICAPS = {name: ALL_STARTS[name] for name in ("平手", "香落ち", "角落ち", "飛車落ち", "二枚落ち", "六枚落ち")}
NAMES = list(HANDICAPS)

# CSA endings: winner as a function of the side to move (None: draw), koma's end reason.
CSA_ENDINGS = {
    "%TORYO": (lambda stm: 1 - stm, "resignation"),
    "%TIME_UP": (lambda stm: 1 - stm, "time_loss"),
    "%KACHI": (lambda stm: stm, "declaration"),
    "%SENNICHITE": (lambda stm: None, "repetition"),
    "%MAX_MOVES": (lambda stm: None, "max_moves"),
    "%CHUDAN": (None, None),  # aborted: skipped
    None: (None, None),  # no result: skipped
}
KIF_ENDINGS = {
    "resign": (lambda stm: 1 - stm, "resignation"),
    "sennichite": (lambda stm: None, "repetition"),
    None: (None, None),
}


def normalize(sfen: str) -> str:
    """Board, side and hands in cshogi's canonical form (no move number)."""
    return " ".join(cshogi.Board(sfen).sfen().split()[:3])



class Game:
    def __init__(self, index: int, rng: random.Random):
        self.index = index
        if index % 7 == 6:
            board = cshogi.Board()
            play(board, rng, rng.randrange(10, 60), mate_rate=0.2)
            self.name = None
            self.start = " ".join(board.sfen().split()[:3]) + " 1"
        else:
            self.name = NAMES[index % len(NAMES)]
            self.start = HANDICAPS[self.name]
        board = cshogi.Board(self.start)
        self.moves = play(board, rng, rng.randrange(1, 120), mate_rate=0.2)
        self.usi = [cshogi.move_to_usi(m) for m in self.moves]
        self.stm = board.turn
        self.mated = board.is_game_over()
        self.evals = [rng.randrange(-2500, 2501) for _ in self.moves]
        self.rates = (rng.choice([1800.0, 2600.5, 3100.0]), rng.choice([1900.0, 2700.0, 3200.25]))
        if self.mated:
            self.csa_end, self.kif_end = "%TORYO", "resign"
        else:
            self.csa_end = rng.choice(list(CSA_ENDINGS))
            self.kif_end = rng.choice(list(KIF_ENDINGS))

    def expected(self, endings, end):
        """(winner code 1/-1/0, end reason) or None when the game is skipped."""
        winner_of, reason = endings[end]
        if winner_of is None:
            return None
        winner = winner_of(self.stm)
        if reason == "resignation" and self.mated:
            reason = "checkmate"
        return {None: 0, BLACK: 1, WHITE: -1}[winner], reason


def write_csa(game: Game, path: Path, evals: bool):
    e = cshogi.CSA.Exporter(str(path))
    e.info(init_board=cshogi.Board(game.start), names=["Sente", "Gote"], version="V2.2")
    for m, ev in zip(game.moves, game.evals):
        e.move(m, time=1, comment=f"** {ev}" if evals else None)
    if game.csa_end:
        e.endgame(game.csa_end)
    e.close()
    # Floodgate rating comments, as Floodgate writes them before the position.
    text = path.read_text().splitlines()
    at = next(i for i, l in enumerate(text) if l.startswith("N-")) + 1
    text[at:at] = [f"'black_rate:Sente+0123abcd:{game.rates[0]}", f"'white_rate:Gote+4567ef01:{game.rates[1]}"]
    path.write_text("\n".join(text) + "\n")


def write_kif(game: Game, path: Path):
    e = cshogi.KIF.Exporter(str(path))
    handicap = game.name if game.name else cshogi.Board(game.start)
    e.header(["Sente", "Gote"], starttime=datetime(2024, 1, 1, 10, 0, 0), handicap=handicap)
    for i, m in enumerate(game.moves):
        e.move(m, 1, i + 1)
    if game.kif_end:
        e.end(game.kif_end)
    e.close()


@pytest.fixture(scope="module")
def games():
    rng = random.Random(20250105)
    gs = [Game(i, rng) for i in range(N_GAMES)]
    assert {g.csa_end for g in gs} >= set(CSA_ENDINGS)
    return gs


def import_json(koma, *args):
    p = koma("data", "import", *args, "--json")
    return json.loads(p.stdout.strip().splitlines()[-1])


def samples_by_source(out: Path):
    """{source file name: (shard, game)} of every imported game."""
    found = {}
    for shard in read_dir(out):
        for g in shard.games:
            assert g.model not in found, g.model
            found[g.model] = (shard, g)
    return found


def check_game(shard, g, game: Game, expected, evals=False):
    what = f"game {game.index} ({g.model}) from {game.start}: {game.usi}"
    assert normalize(g.start) == normalize(game.start), what
    assert g.moves == game.usi, what
    assert (g.winner, g.end) == expected, what
    assert g.length == len(game.usi) == len(g.samples), what
    board = cshogi.Board(game.start)
    winner = {1: BLACK, -1: WHITE, 0: None}[g.winner]
    for ply, i in enumerate(g.samples):
        assert normalize(shard.sfen(i)) == normalize(board.sfen()), f"{what}: ply {ply}"
        assert int(shard.ply[i]) == ply
        assert shard.move_usi(i) == game.usi[ply]
        assert shard.policy(i)[0] == [game.usi[ply]] and shard.policy(i)[1].tolist() == [1.0]
        assert int(shard.result[i]) == (0 if winner is None else 1 if winner == board.turn else -1), f"{what}: ply {ply}"
        assert int(shard.flags[i]) == FULL_SEARCH | IMPORTED
        if evals:
            v = game.evals[ply] if board.turn == BLACK else -game.evals[ply]
            assert shard.root_wdl[i][0] == pytest.approx(1 / (1 + math.exp(-v / EVAL_SCALE)), abs=1e-6)
            assert shard.root_wdl[i][2] == pytest.approx(1 / (1 + math.exp(v / EVAL_SCALE)), abs=1e-6)
        else:
            assert shard.root_wdl[i].tolist() == [0.0, 0.0, 0.0]
        board.push_usi(game.usi[ply])


def test_csa_records(games, koma, tmp_path):
    src = tmp_path / "csa"
    (src / "nested").mkdir(parents=True)
    for g in games:
        write_csa(g, src / ("nested" if g.index % 2 else "") / f"g{g.index:05}.csa", evals=True)
    summary = import_json(koma, "--from", "csa", str(src), "--out", str(tmp_path / "out"), "--games-per-shard", "40", "--evals")
    expected = {g.index: g.expected(CSA_ENDINGS, g.csa_end) for g in games}
    imported = [g for g in games if expected[g.index]]
    assert summary["games_read"] == len(games) and summary["games"] == len(imported)
    assert summary["skipped"] == {"unfinished": len(games) - len(imported)}
    assert summary["bad_files"] == 0 and summary["samples"] == sum(len(g.usi) for g in imported)
    assert len(summary["shards"]) == math.ceil(len(imported) / 40)
    found = samples_by_source(tmp_path / "out")
    assert len(found) == len(imported)
    for g in imported:
        name = ("nested/" if g.index % 2 else "") + f"g{g.index:05}.csa"
        shard, sg = found[name]
        check_game(shard, sg, g, expected[g.index], evals=True)

    # Filters: at least 30 moves, both players rated 2600 or more.
    summary = import_json(koma, str(src), "--out", str(tmp_path / "filtered"), "--min-moves", "30", "--min-rating", "2600")
    keep = [g for g in imported if len(g.usi) >= 30 and min(g.rates) >= 2600]
    assert summary["games"] == len(keep), summary
    assert set(samples_by_source(tmp_path / "filtered")) == {("nested/" if g.index % 2 else "") + f"g{g.index:05}.csa" for g in keep}


def test_csa_multi_game_file(games, koma, tmp_path):
    path = tmp_path / "multi.csa"
    parts = []
    for g in games[:30]:
        write_csa(g, tmp_path / "one.csa", evals=False)
        parts.append((tmp_path / "one.csa").read_text())
    path.write_text("/\n".join(parts))
    summary = import_json(koma, str(path), "--out", str(tmp_path / "out"))
    imported = [(i, g) for i, g in enumerate(games[:30]) if g.expected(CSA_ENDINGS, g.csa_end)]
    assert summary["games_read"] == 30 and summary["games"] == len(imported)
    found = samples_by_source(tmp_path / "out")
    for i, g in imported:
        shard, sg = found[f"multi.csa#{i + 1}"]
        check_game(shard, sg, g, g.expected(CSA_ENDINGS, g.csa_end))


def test_kif_records(games, koma, koma_bin, tmp_path):
    src = tmp_path / "kif"
    src.mkdir()
    for g in games:
        write_kif(g, src / f"g{g.index:05}.{'kif' if g.index % 2 else 'kifu'}")
    summary = import_json(koma, "--from", "kif", str(src), "--out", str(tmp_path / "out"))
    imported = [g for g in games if g.expected(KIF_ENDINGS, g.kif_end)]
    assert summary["bad_files"] == 0, summary["problems"]
    assert summary["games"] == len(imported) and summary["games_read"] == len(games)
    found = samples_by_source(tmp_path / "out")
    for g in imported:
        shard, sg = found[f"g{g.index:05}.{'kif' if g.index % 2 else 'kifu'}"]
        check_game(shard, sg, g, g.expected(KIF_ENDINGS, g.kif_end))
    verify = subprocess.run([koma_bin, "data", "verify", str(tmp_path / "out")], capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def hcpe_of_games(games):
    """hcpe records of every position of the games, with random evaluations, in cshogi's dtype."""
    rng = random.Random(99)
    rows = []
    for g in games:
        board = cshogi.Board(g.start)
        winner = g.expected(CSA_ENDINGS, "%TORYO")[0]  # resigned by the side to move at the end
        result = {1: cshogi.BLACK_WIN, -1: cshogi.WHITE_WIN}[winner] if g.index % 5 else cshogi.DRAW
        for m in g.moves:
            rec = np.zeros(1, cshogi.HuffmanCodedPosAndEval)
            board.to_hcp(rec[0]["hcp"])
            rec[0]["eval"] = rng.choice([rng.randrange(-3000, 3001), rng.randrange(-32767, 32768), 30000, -30000, 0])
            rec[0]["bestMove16"] = cshogi.move16(m)
            rec[0]["gameResult"] = result
            rows.append((rec, board.sfen(), cshogi.move_to_usi(m), board.turn))
            board.push(m)
    return rows


def test_hcpe_matches_cshogi_bit_for_bit(games, koma, tmp_path):
    rows = hcpe_of_games(games)
    data = np.concatenate([r[0] for r in rows])
    src = tmp_path / "games.hcpe"
    data.tofile(src)
    summary = import_json(koma, "--from", "hcpe", str(src), "--out", str(tmp_path / "out"), "--positions-per-shard", "1000")
    assert (summary["hcpe_records"], summary["bad_records"], summary["samples"]) == (len(rows), 0, len(rows))
    assert len(summary["shards"]) == math.ceil(len(rows) / 1000)
    shards = read_dir(tmp_path / "out")
    k = 0
    board = cshogi.Board()
    for shard in shards:
        assert len(shard.games) == 1 and not shard.games[0].is_game and shard.games[0].model == "hcpe:games.hcpe"
        for i in range(len(shard)):
            rec, sfen, usi, turn = rows[k]
            board.set_hcp(rec[0]["hcp"])
            assert normalize(board.sfen()) == normalize(sfen)
            assert normalize(shard.sfen(i)) == normalize(sfen), f"record {k}"
            assert shard.move_usi(i) == usi == cshogi.move_to_usi(board.move_from_move16(int(rec[0]["bestMove16"]) & 0xFFFF))
            result = int(rec[0]["gameResult"])
            assert int(shard.result[i]) == (0 if result == cshogi.DRAW else 1 if (result == cshogi.BLACK_WIN) == (turn == BLACK) else -1)
            ev = int(rec[0]["eval"])
            assert shard.root_wdl[i][0] == pytest.approx(1 / (1 + math.exp(-ev / EVAL_SCALE)), abs=1e-6)
            assert int(shard.ply[i]) == PLY_UNKNOWN
            k += 1
    assert k == len(rows)

    # Back to hcpe: byte for byte what cshogi wrote.
    back = tmp_path / "back.hcpe"
    report = json.loads(koma("data", "export", "--to", "hcpe", str(tmp_path / "out"), "--out", str(back), "--json").stdout)
    assert back.read_bytes() == src.read_bytes()
    assert report["records"] == len(rows) and report["skipped"] == 0 and report["problems"] == []
    # And cshogi encodes koma's positions as koma does: the shard SFENs' hcp are the records'.
    for k in range(0, len(rows), 7):
        hcp = np.zeros(1, cshogi.HuffmanCodedPos)
        cshogi.Board(rows[k][1]).to_hcp(hcp)
        assert hcp[0]["hcp"].tobytes() == rows[k][0][0]["hcp"].tobytes()


def test_corrupt_hcpe_names_file_and_record(games, koma_bin, tmp_path):
    rows = hcpe_of_games(games[:6])
    data = np.concatenate([r[0] for r in rows])
    n = len(data)
    # Record 2: two Black pawns on one file (cshogi encodes it; it is not a legal position).
    nifu = np.zeros(1, cshogi.HuffmanCodedPos)
    cshogi.Board("4k4/9/9/9/9/9/P8/P8/4K4 b - 1").to_hcp(nifu)
    data[2]["hcp"] = nifu[0]["hcp"]
    # Record 4: garbage bytes. Record 5: a best move that is not legal there.
    data[4]["hcp"] = np.frombuffer(bytes(range(200, 232)), dtype=np.uint8)
    data[5]["bestMove16"] = 0 | (44 << 7)  # 5i to 1a: no piece moves so
    bad = tmp_path / "bad.hcpe"
    bad.write_bytes(data.tobytes() + b"\x00" * 20)
    p = subprocess.run([koma_bin, "data", "import", "--from", "hcpe", str(bad), "--out", str(tmp_path / "out"), "--json"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout.strip().splitlines()[-1])
    problems = summary["problems"]
    assert problems[0].startswith(str(bad)) and "record 2:" in problems[0] and "illegal position" in problems[0], problems
    assert "record 4:" in problems[1] and "king on square" in problems[1], problems
    assert "record 5:" in problems[2] and "is illegal in" in problems[2], problems
    assert f"record {n} is truncated" in problems[-1] and "not a multiple of 38" in problems[-1], problems
    assert summary["samples"] == n - summary["bad_records"]
    assert "bad.hcpe" in p.stderr and "record 2:" in p.stderr

    # --strict: the first bad record stops the import with an error naming it.
    p = subprocess.run([koma_bin, "data", "import", "--strict", str(bad), "--out", str(tmp_path / "strict")], capture_output=True, text=True)
    assert p.returncode == 1 and "bad.hcpe" in p.stderr and "record 2:" in p.stderr, p.stderr
    # Only a truncated tail: the complete records are imported, the file is reported.
    tail = tmp_path / "tail.hcpe"
    tail.write_bytes(np.concatenate([r[0] for r in rows]).tobytes()[: 38 * 10 + 7])
    p = subprocess.run([koma_bin, "data", "import", str(tail), "--out", str(tmp_path / "tail"), "--json"], capture_output=True, text=True)
    summary = json.loads(p.stdout.strip().splitlines()[-1])
    assert summary["samples"] == 10 and summary["bad_files"] == 1
    assert "tail.hcpe" in summary["problems"][0] and "record 10 is truncated (7 of 38 bytes)" in summary["problems"][0]

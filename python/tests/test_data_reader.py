"""python/koma/data.py reads shards that koma wrote, checked sample by sample against cshogi.

* self-play: a fresh tiny network plays a handful of short games (`koma selfplay`); every game is
  replayed in cshogi from its start, and each sample's position, move played, policy moves,
  result and game data must agree with the replay; dlshogi features and labels come from cshogi;
* imported records: cshogi writes CSA records of random games, `koma data import` reads them, and
  the reader must give back cshogi's positions, moves and results;
* `koma data stats --json` and `koma data verify` agree with what the reader computes.

Needs KOMA_BIN (scripts/test sets it).
"""

import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest

cshogi = pytest.importorskip("cshogi")
import cshogi.CSA  # noqa: E402
import cshogi.dlshogi as dl  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from koma.data import (  # noqa: E402
    FULL_SEARCH,
    IMPORTED,
    Shard,
    move16_to_usi,
    read_dir,
    shard_paths,
    unpack_position,
    usi_to_move16,
)

GAMES = 8
CONFIG = """
[selfplay]
workers = 1
games_per_worker = 8
simulations = 12
cheap_simulations = 4
full_search_fraction = 0.6
max_plies = 60
handicap_fraction = 0.3
resign_value = -0.6
resign_false_target = 0    # a fixed threshold: the test checks resignations against it
resign_consecutive = 2
no_resign_fraction = 0.3
temperature_plies = 30
seed = 5
"""


def normalize(sfen: str) -> str:
    return " ".join(cshogi.Board(sfen).sfen().split()[:3])


@pytest.fixture(scope="module")
def selfplay_dir(koma, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("reader")
    model = tmp / "model-00000000.safetensors"
    koma("init", "--config", "tiny", "--out", str(model))
    (tmp / "selfplay.toml").write_text(CONFIG)
    out = tmp / "shards"
    koma("selfplay", "--model", str(model), "--games", str(GAMES), "--out", str(out), "--config", str(tmp / "selfplay.toml"),
         "--games-per-shard", "3", "--threads", "1", "--device", "cpu")  # fmt: skip
    return out


def test_move_and_position_codecs():
    for usi in ["7g7f", "8h2b+", "P*5e", "G*1a", "1i9a", "9a1i+"]:
        assert move16_to_usi(usi_to_move16(usi)) == usi
    assert move16_to_usi(0) is None


def test_selfplay_shards_against_cshogi_replay(selfplay_dir):
    shards = read_dir(selfplay_dir)
    assert len(shards) == 3  # 3 + 3 + 2 games
    games = [(s, g) for s in shards for g in s.games]
    assert len(games) == GAMES
    full = 0
    for shard, g in games:
        assert g.is_game and g.length == len(g.moves) and g.winner in (-1, 0, 1)
        board = cshogi.Board(g.start)
        boards = [board.copy()]
        for usi in g.moves:
            assert board.is_legal(board.move_from_usi(usi)), f"{shard.path} {g.start}: {usi}"
            board.push_usi(usi)
            boards.append(board.copy())
        if g.end == "checkmate":
            assert board.is_game_over() and g.winner == (1 if board.turn == cshogi.WHITE else -1)
        winner = {1: cshogi.BLACK, -1: cshogi.WHITE, 0: None}[g.winner]
        for i in g.samples:
            ply = int(shard.ply[i])
            at = boards[ply]
            what = f"{shard.path} sample {i} ply {ply}"
            assert normalize(shard.sfen(i)) == normalize(at.sfen()), what
            assert shard.side_to_move(i) == at.turn
            move = shard.move_usi(i)
            if move is None:  # a resignation: the last searched position, nothing played
                assert ply == g.length and g.end == "resignation", what
            else:
                assert move == g.moves[ply], what
            moves, weights = shard.policy(i)
            legal = {cshogi.move_to_usi(m) for m in at.legal_moves}
            assert moves and set(moves) <= legal, what
            assert weights.sum() == pytest.approx(1.0, abs=1e-5) and (weights >= 0).all()
            assert int(shard.result[i]) == (0 if winner is None else 1 if winner == at.turn else -1), what
            assert shard.root_wdl[i].sum() == pytest.approx(1.0, abs=1e-4)
            assert int(shard.flags[i]) & FULL_SEARCH and not int(shard.flags[i]) & IMPORTED
            full += 1
    assert full == sum(len(s) for s in shards)

    # dlshogi features and labels of the reader (through cshogi) match cshogi on its own replay.
    shard, g = games[0]
    idx = list(g.samples)[:10]
    f1, f2 = shard.features(idx)
    ref1 = np.zeros_like(f1)
    ref2 = np.zeros_like(f2)
    labels = []
    for k, i in enumerate(idx):
        b = cshogi.Board(g.start)
        for usi in g.moves[: int(shard.ply[i])]:
            b.push_usi(usi)
        dl.make_input_features(b, ref1[k], ref2[k])
        usi = shard.move_usi(i)
        labels.append(-1 if usi is None else dl.make_move_label(b.move_from_usi(usi), b.turn))
    assert (f1 == ref1).all() and (f2 == ref2).all()
    assert shard.move_labels(idx).tolist() == labels


def test_stats_and_verify_agree_with_the_reader(selfplay_dir, koma, koma_bin):
    shards = read_dir(selfplay_dir)
    stats = json.loads(koma("data", "stats", str(selfplay_dir), "--json").stdout)
    games = [g for s in shards for g in s.games]
    assert stats["samples"] == sum(len(s) for s in shards)
    assert stats["games"] == len(games) and stats["shards"] == len(shards)
    w = stats["winners"]
    assert (w["black"], w["white"], w["draw"]) == (
        sum(g.winner == 1 for g in games), sum(g.winner == -1 for g in games), sum(g.winner == 0 for g in games))  # fmt: skip
    assert sum(stats["end_reasons"].values()) == len(games)
    lengths = sorted(g.length for g in games)
    assert (stats["game_length"]["min"], stats["game_length"]["max"]) == (lengths[0], lengths[-1])
    entries = sum(len(s.policy_move) for s in shards)
    assert stats["policy"]["entries"] == entries
    assert stats["policy"]["mean_per_sample"] == pytest.approx(entries / stats["samples"])
    size = sum(p.stat().st_size for p in shard_paths(selfplay_dir))
    assert stats["bytes_per_sample"] == pytest.approx(size / stats["samples"])
    assert 0 < stats["labels"]["distinct"] <= 2187 and stats["labels"]["entropy_bits"] > 0
    top = stats["labels"]["top"]
    assert top == sorted(top, key=lambda t: -t["share"])

    assert subprocess.run([koma_bin, "data", "verify", str(selfplay_dir)], capture_output=True).returncode == 0
    # A shard with an illegal move: verify names the file and the sample, exit status 1.
    import h5py

    bad = selfplay_dir.parent / "bad"
    bad.mkdir()
    src = shard_paths(selfplay_dir)[0]
    (bad / src.name).write_bytes(src.read_bytes())
    with h5py.File(bad / src.name, "r+") as f:
        moves = f["move"][()]
        moves[3] = usi_to_move16("5i1a")
        del f["move"]
        f["move"] = moves
    p = subprocess.run([koma_bin, "data", "verify", str(bad)], capture_output=True, text=True)
    assert p.returncode == 1 and src.name in p.stdout and "sample 3" in p.stdout, p.stdout + p.stderr


def test_imported_records_against_cshogi(koma, tmp_path):
    rng = random.Random(3)
    src = tmp_path / "csa"
    src.mkdir()
    expected = {}
    for n in range(20):
        board = cshogi.Board()
        moves = []
        for _ in range(rng.randrange(5, 90)):
            legal = list(board.legal_moves)
            if not legal:
                break
            m = rng.choice(legal)
            moves.append(cshogi.move_to_usi(m))
            board.push(m)
        e = cshogi.CSA.Exporter(str(src / f"r{n:02}.csa"))
        e.info(init_board=cshogi.STARTING_SFEN, names=["a", "b"], version="V2.2")
        b = cshogi.Board()
        for usi in moves:
            m = b.move_from_usi(usi)
            e.move(m)
            b.push(m)
        e.endgame("%TORYO")
        e.close()
        expected[f"r{n:02}.csa"] = (moves, 1 - b.turn)  # the side to move resigned
    koma("data", "import", str(src), "--out", str(tmp_path / "out"))
    shards = read_dir(tmp_path / "out")
    seen = 0
    for shard in shards:
        for g in shard.games:
            moves, winner = expected[g.model]
            assert g.moves == moves and g.winner == (1 if winner == cshogi.BLACK else -1)
            b = cshogi.Board()
            for ply, i in enumerate(g.samples):
                assert normalize(unpack_position(shard.position[i])) == normalize(b.sfen())
                assert shard.move_usi(i) == moves[ply]
                assert int(shard.result[i]) == (1 if b.turn == winner else -1)
                b.push_usi(moves[ply])
            seen += 1
    assert seen == 20

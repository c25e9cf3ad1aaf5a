"""Oracle test of `koma selfplay` against cshogi (an independent implementation, used only through
its Python API).

A fresh tiny network plays two runs of self-play with a small, fast config: few simulations, a
move limit low enough that games reach it, resignation that fires, handicap starts, and an opening
suite of positions chosen to end in other ways (a declaration after one move, mates in one that
the search finds, bare kings that repeat). One run writes KIF records, the other CSA. Then every
game in the shards is replayed through cshogi:

* every move is legal, the game is not over before its last move, and how it ended (checkmate,
  sennichite and perpetual check, declaration, the move limit, resignation) and its winner are
  what cshogi finds at the final position;
* every sample's packed position is cshogi's position at that ply, its move is the move played,
  its policy is over legal moves with weights summing to 1, its result is the game's result for
  the side to move, and a resigning player's last sample has no move and a value below the
  resignation threshold;
* the records parse in cshogi with the same start, moves, players, result and, on fully searched
  moves, the root value (KIF comment) and evaluation (CSA `'**` score).

Needs KOMA_BIN (scripts/test sets it).
"""

import json
import math
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

cshogi = pytest.importorskip("cshogi")
h5py = pytest.importorskip("h5py")
import cshogi.CSA  # noqa: E402
import cshogi.KIF  # noqa: E402
from cshogi_games import HANDICAPS as ALL_STARTS  # noqa: E402

GAMES_PER_RUN = 25
MAX_PLIES = 120
RESIGN_VALUE = -0.6
CONFIG = f"""
[selfplay]
workers = 1
games_per_worker = 25
simulations = 16
cheap_simulations = 8
full_search_fraction = 0.5
max_plies = {MAX_PLIES}
handicap_fraction = 0.25
openings_fraction = 0.35
resign_value = {RESIGN_VALUE}
resign_false_target = 0
resign_consecutive = 2
no_resign_fraction = 0.25
temperature_plies = 20
"""
OPENINGS = """
# Black may declare (CSA 27-point rule) after White's one move: 10 pieces in camp, 28 points.
sfen 9/PPPPKPPPP/R7B/9/9/9/9/9/4k4 w RB 1
# Eight legal moves, two of them mate in one (Black: 5c5b, 4d5b+; White: the same turned round).
sfen 4k2r1/3p1p3/4G4/5N3/9/9/8p/9/8K b - 1
sfen k8/9/P8/9/9/3n5/4g4/3P1P3/1R2K4 w - 1
# Bare kings: sennichite or the move limit.
sfen 4k4/9/9/9/9/9/9/9/4K4 b - 1
"""
STARTPOS = ALL_STARTS["平手"]
# koma's handicap starts (Handicap::ALL after the even game): KIF name → start SFEN. The records
# oracle's table plus the starts issue 17 added (their SFENs checked against cshogi's KIF table in
# test_rules_cli.py).
HANDICAPS = {name: sfen for name, sfen in ALL_STARTS.items() if sfen != STARTPOS} | {
    "右香落ち": "1nsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "三枚落ち": "lnsgkgsn1/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "五枚落ち": "2sgkgsn1/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "左五枚落ち": "1nsgkgs2/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "左七枚落ち": "2sgkg3/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "右七枚落ち": "3gkgs2/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
}
OPENING_SFENS = [line[len("sfen "):] for line in OPENINGS.splitlines() if line.startswith("sfen ")]
# Starts whose KIF form cshogi's KIF parser reads (it knows no board diagrams, 歩三兵 or 裸玉).
CSHOGI_KIF_STARTS = {STARTPOS} | {s for name, s in HANDICAPS.items() if name not in ("歩三兵", "裸玉", "左七枚落ち", "右七枚落ち")}

# game_end codes (docs/data-format.md).
CHECKMATE, RESIGNATION, REPETITION, PERPETUAL, DECLARATION, TRY, MAX_MOVES = range(7)
END_NAMES = {0: "checkmate", 1: "resignation", 2: "repetition", 3: "perpetual_check", 4: "declaration", 5: "try", 6: "max_moves"}
# Endings a record may come back as in cshogi, per end code.
CSA_ENDINGS = {
    CHECKMATE: {"%TORYO", "%TSUMI"},
    RESIGNATION: {"%TORYO"},
    REPETITION: {"%SENNICHITE"},
    PERPETUAL: {"%ILLEGAL_MOVE", "%+ILLEGAL_ACTION", "%-ILLEGAL_ACTION"},
    DECLARATION: {"%KACHI"},
    MAX_MOVES: {"%MAX_MOVES", "%JISHOGI"},
}
KIF_ENDINGS = {**CSA_ENDINGS, MAX_MOVES: {"%SENNICHITE", "%JISHOGI", "%MAX_MOVES"}}
WIN = {1: cshogi.BLACK_WIN, -1: cshogi.WHITE_WIN, 0: cshogi.DRAW}

# koma-packed-v1 piece codes (piece type − 1) and koma-move16-v1 drop piece types.
PACKED_PIECES = ["P", "L", "N", "S", "B", "R", "G", None, "+P", "+L", "+N", "+S", "+B", "+R"]
HAND_ORDER = "PLNSBRG"


def square_usi(index: int) -> str:
    return f"{index // 9 + 1}{chr(ord('a') + index % 9)}"


def move16_to_usi(m: int) -> str:
    to, frm = m & 0x7F, (m >> 7) & 0x7F
    if m & 0x8000:
        return f"{HAND_ORDER[frm - 1]}*{square_usi(to)}"
    return square_usi(frm) + square_usi(to) + ("+" if m & 0x4000 else "")


def unpack_position(packed: bytes) -> str:
    """koma-packed-v1 (docs/data-format.md) → board, side and hands of an SFEN."""
    assert len(packed) == 40
    bits = int.from_bytes(packed, "little")
    at = 0

    def read(n: int) -> int:
        nonlocal at
        value = (bits >> at) & ((1 << n) - 1)
        at += n
        return value

    side = read(1)
    kings = [read(7), read(7)]
    board = [None] * 81
    board[kings[0]], board[kings[1]] = "K", "k"
    for sq in range(81):
        if sq in kings or not read(1):
            continue
        code = read(5)
        piece = PACKED_PIECES[code >> 1]
        assert piece is not None, f"piece code {code}"
        board[sq] = piece if code & 1 == 0 else piece.lower()
    hands = ""
    for color in range(2):
        for letter in HAND_ORDER:
            n = 0
            while read(1):
                n += 1
            if n:
                hands += (str(n) if n > 1 else "") + (letter if color == 0 else letter.lower())
    assert bits >> at == 0, "bits after the hands must be zero"
    rows = []
    for rank in range(9):
        row, empty = "", 0
        for file in range(9, 0, -1):
            piece = board[(file - 1) * 9 + rank]
            if piece is None:
                empty += 1
                continue
            row += (str(empty) if empty else "") + piece
            empty = 0
        rows.append(row + (str(empty) if empty else ""))
    return normalize(f"{'/'.join(rows)} {'bw'[side]} {hands or '-'} 1")


def normalize(sfen: str) -> str:
    """Board, side and hands of an SFEN as cshogi writes them (canonical hand order)."""
    return " ".join(cshogi.Board(sfen).sfen().split()[:3])


def value_to_cp(value: float) -> int:
    p = min(max((1.0 + value) / 2.0, 1e-5), 1.0 - 1e-5)
    return round(-600.0 * math.log(1.0 / p - 1.0))


def read_text(shard, name):
    return [v.decode() if isinstance(v, bytes) else str(v) for v in shard[name][:]]


def load_games(shard_paths):
    """Every game of the shards (in shard order) with its moves and samples."""
    games = []
    for path in shard_paths:
        with h5py.File(path, "r") as f:
            assert f.attrs["format"] == "koma-replay" and int(f.attrs["format_version"]) == 1
            assert f.attrs["position_encoding"] == "koma-packed-v1" and f.attrs["move_encoding"] == "koma-move16-v1"
            starts, models = read_text(f, "game_start"), read_text(f, "game_model")
            winner, end, length = f["game_winner"][:], f["game_end"][:], f["game_length"][:]
            first, move_off, all_moves = f["game_first_sample"][:], f["game_move_offsets"][:], f["game_moves"][:]
            position = np.asarray(f["position"][:], dtype=np.uint8).reshape(-1, 40)
            move, ply, flags, game = f["move"][:], f["ply"][:], f["flags"][:], f["game"][:]
            result, wdl = f["result"][:], np.asarray(f["root_wdl"][:], dtype=np.float32).reshape(-1, 3)
            pol_off, pol_move, pol_weight = f["policy_offsets"][:], f["policy_move"][:], f["policy_weight"][:]
            n = len(move)
            assert len(first) == len(starts) + 1 and first[0] == 0 and first[-1] == n
            assert len(pol_off) == n + 1 and pol_off[0] == 0 and pol_off[-1] == len(pol_move) == len(pol_weight)
            assert len(move_off) == len(starts) + 1 and move_off[-1] == len(all_moves)
            for g in range(len(starts)):
                samples = [
                    {
                        "position": bytes(position[i]),
                        "move": int(move[i]),
                        "ply": int(ply[i]),
                        "flags": int(flags[i]),
                        "game": int(game[i]),
                        "result": int(result[i]),
                        "wdl": wdl[i],
                        "policy": list(zip(pol_move[pol_off[i] : pol_off[i + 1]].tolist(), pol_weight[pol_off[i] : pol_off[i + 1]].tolist())),
                    }
                    for i in range(first[g], first[g + 1])
                ]
                games.append(
                    {
                        "shard": Path(path).name,
                        "index": g,
                        "start": starts[g],
                        "model": models[g],
                        "winner": int(winner[g]),
                        "end": int(end[g]),
                        "length": int(length[g]),
                        "moves": [move16_to_usi(int(m)) for m in all_moves[move_off[g] : move_off[g + 1]]],
                        "samples": samples,
                    }
                )
    return games


@pytest.fixture(scope="module")
def runs(koma, tmp_path_factory):
    """Two self-play runs (KIF records, CSA records) of GAMES_PER_RUN games each."""
    tmp = tmp_path_factory.mktemp("selfplay")
    model = tmp / "model-00000000.safetensors"
    koma("init", "--config", "tiny", "--out", str(model))
    (tmp / "openings.txt").write_text(OPENINGS)
    out = []
    for seed, fmt in [(7, "kif"), (8, "csa")]:
        config = tmp / f"selfplay-{fmt}.toml"
        config.write_text(CONFIG + f"seed = {seed}\n")
        shards, records = tmp / "shards", tmp / f"records-{fmt}"
        p = koma(
            "selfplay", "--model", str(model), "--games", str(GAMES_PER_RUN), "--out", str(shards),
            "--config", str(config), "--openings", str(tmp / "openings.txt"), "--games-per-shard", "10",
            "--records", str(records), "--record-format", fmt, "--threads", "1", "--json",
        )  # fmt: skip
        summary = json.loads(p.stdout.strip().splitlines()[-1])
        assert summary["stats"]["games"] == GAMES_PER_RUN and summary["records_written"] == GAMES_PER_RUN
        shard_paths = sorted(summary["shards"])
        assert len(shard_paths) == 3, shard_paths  # 10 + 10 + 5 games
        prefix = Path(shard_paths[0]).name.rsplit("-", 1)[0]
        record_paths = sorted(records.iterdir())
        assert [r.name for r in record_paths] == [f"game-{prefix}-{i:06}.{fmt}" for i in range(GAMES_PER_RUN)]
        games = load_games(shard_paths)
        assert len(games) == GAMES_PER_RUN and sum(len(g["samples"]) for g in games) == summary["samples_written"]
        out.append({"format": fmt, "games": games, "records": record_paths, "stats": summary["stats"]})
    return out


def replay(game):
    """Replays a game in cshogi; returns per-ply (normalized SFEN, legal USI moves) and the final board."""
    board = cshogi.Board(game["start"])
    keys = [normalize(board.sfen())]
    checks = [board.is_check()]
    plies = [(keys[0], {cshogi.move_to_usi(m) for m in board.legal_moves})]
    where = f"{game['shard']} game {game['index']} from {game['start']}"
    for i, usi in enumerate(game["moves"]):
        assert usi in plies[-1][1], f"{where}: move {i + 1} {usi} is illegal in {plies[-1][0]}"
        if i > 0:
            # The game was not over before this move.
            assert ending(board, keys, checks, i) is None, f"{where}: over at ply {i} but went on"
        board.push_usi(usi)
        keys.append(normalize(board.sfen()))
        checks.append(board.is_check())
        plies.append((keys[-1], {cshogi.move_to_usi(m) for m in board.legal_moves}))
    return plies, board, keys, checks


def ending(board, keys, checks, plies):
    """(end code, winner 1/−1/0) cshogi finds at the current position, in koma's order of the
    rules (no legal move, sennichite, the move limit, declaration), or None while the game goes on."""
    stm = 1 if board.turn == cshogi.BLACK else -1
    if not any(True for _ in board.legal_moves):
        return CHECKMATE, -stm
    occurrences = [j for j in range(len(keys)) if keys[j] == keys[-1] and (len(keys) - 1 - j) % 2 == 0]
    if len(occurrences) >= 4:
        assert board.is_draw() in (cshogi.REPETITION_DRAW, cshogi.REPETITION_WIN, cshogi.REPETITION_LOSE), "cshogi sees no repetition"
        now, first = len(keys) - 1, occurrences[0]
        # checks[j]: the move into position j gave check. The opponent moved into now, now−2, …
        opponent_checked = all(checks[j] for j in range(first + 1, now + 1) if (now - j) % 2 == 0)
        own_checked = all(checks[j] for j in range(first + 1, now + 1) if (now - j) % 2 == 1)
        if opponent_checked:
            assert board.is_draw() == cshogi.REPETITION_WIN
            return PERPETUAL, stm
        if own_checked:
            assert board.is_draw() == cshogi.REPETITION_LOSE
            return PERPETUAL, -stm
        return REPETITION, 0
    if plies >= MAX_PLIES:
        return MAX_MOVES, 0
    if board.is_nyugyoku():
        return DECLARATION, stm
    return None


def test_games_replay_in_cshogi_with_the_recorded_endings(runs):
    endings = Counter()
    starts = Counter()
    for run in runs:
        for game in run["games"]:
            where = f"{game['shard']} game {game['index']} from {game['start']}"
            assert game["start"] in {STARTPOS, *HANDICAPS.values(), *OPENING_SFENS}, where
            starts["opening" if game["start"] in OPENING_SFENS else "handicap" if game["start"] in HANDICAPS.values() else "even"] += 1
            assert game["model"] == "model-00000000"
            assert game["length"] == len(game["moves"]) > 0, where
            plies, board, keys, checks = replay(game)
            expected = ending(board, keys, checks, game["length"])
            if game["end"] == RESIGNATION:
                assert expected is None, f"{where}: resigned in a finished game ({expected})"
                stm = 1 if board.turn == cshogi.BLACK else -1
                assert game["winner"] == -stm, f"{where}: the side to move resigns"
            else:
                assert (game["end"], game["winner"]) == expected, f"{where}: recorded {END_NAMES[game['end']]} winner {game['winner']}, cshogi {expected}"
            endings[END_NAMES[game["end"]]] += 1
            check_samples(game, plies, where)
    print(f"\n{sum(endings.values())} games replayed; endings {dict(endings)}; starts {dict(starts)}")
    assert sum(endings.values()) == 2 * GAMES_PER_RUN
    assert starts["handicap"] > 0 and starts["opening"] > 0 and starts["even"] > 0
    # The config and the opening suite make every kind of ending that self-play can reach likely;
    # perpetual check has no forced start here and is checked whenever it happens.
    for kind in ("checkmate", "resignation", "repetition", "declaration", "max_moves"):
        assert endings[kind] > 0, f"no {kind} ending in {dict(endings)}"


def check_samples(game, plies, where):
    samples = game["samples"]
    last_ply = -1
    no_resign = {s["flags"] & 2 for s in samples}
    assert len(no_resign) <= 1, f"{where}: no-resign flag differs within the game"
    if game["end"] == RESIGNATION:
        assert no_resign <= {0}, f"{where}: a no-resign game resigned"
    for s in samples:
        p = s["ply"]
        at = f"{where}, sample at ply {p}"
        assert p > last_ply, f"{at}: samples out of order"
        last_ply = p
        assert s["flags"] & 1, f"{at}: only fully searched moves are samples"
        assert s["flags"] & ~3 == 0
        sfen, legal = plies[p]
        assert unpack_position(s["position"]) == sfen, f"{at}: packed position differs from cshogi's"
        if p < game["length"]:
            assert move16_to_usi(s["move"]) == game["moves"][p], f"{at}: sample move is not the move played"
        else:
            # Only a resigning player's last search is a sample without a move.
            assert p == game["length"] and game["end"] == RESIGNATION and s["move"] == 0, at
            w, _, l = s["wdl"]
            assert float(np.float32(w) - np.float32(l)) < RESIGN_VALUE, f"{at}: resigned at value {w - l}"
        policy = [(move16_to_usi(m), w) for m, w in s["policy"]]
        moves = [m for m, _ in policy]
        assert moves and len(set(moves)) == len(moves), f"{at}: empty or repeated policy moves"
        assert set(moves) <= legal, f"{at}: policy over illegal moves {set(moves) - legal}"
        total = sum(w for _, w in policy)
        assert abs(total - 65535) <= len(policy) / 2 + 1, f"{at}: policy weights sum to {total / 65535}"
        if p < game["length"]:
            assert game["moves"][p] in moves, f"{at}: the move played has no policy weight"
        stm = 1 if sfen.split()[1] == "b" else -1
        assert s["result"] == game["winner"] * stm, f"{at}: result {s['result']} for winner {game['winner']}"
        assert np.all(s["wdl"] >= 0) and abs(float(s["wdl"].sum()) - 1) < 1e-3, f"{at}: wdl {s['wdl']}"


def sample_values(game):
    """Root value (side that moved) and Black-view centipawns by ply, for fully searched moves."""
    out = {}
    for s in game["samples"]:
        if s["ply"] < game["length"]:
            w, _, l = s["wdl"]
            value = float(np.float32(w) - np.float32(l))
            black_to_move = normalize_side(game["start"], s["ply"])
            out[s["ply"]] = (value, value_to_cp(value if black_to_move else -value))
    return out


def normalize_side(start: str, ply: int) -> bool:
    return (start.split()[1] == "b") == (ply % 2 == 0)


def test_records_parse_in_cshogi_with_the_same_game(runs):
    checked = Counter()
    for run in runs:
        fmt = run["format"]
        for game, path in zip(run["games"], run["records"]):
            where = f"{path.name} ({game['shard']} game {game['index']})"
            if fmt == "kif":
                if game["start"] not in CSHOGI_KIF_STARTS:
                    # cshogi's KIF parser reads board diagrams as the even start; koma's own
                    # reader is tested on those in test_records_oracle.py.
                    checked["kif skipped (diagram start)"] += 1
                    continue
                parsed = cshogi.KIF.Parser.parse_file(str(path))
                scores = None
                comments = parsed.comments
            else:
                games = cshogi.CSA.Parser.parse_file(str(path))
                assert len(games) == 1, where
                parsed = games[0]
                # cshogi keeps CSA `'*` comments as one game comment, so values are checked
                # through the `'**` scores there.
                scores, comments = parsed.scores, None
            assert normalize(parsed.sfen) == normalize(game["start"]), where
            assert [cshogi.move_to_usi(m) for m in parsed.moves] == game["moves"], f"{where}: moves differ"
            assert parsed.names == ["model-00000000", "model-00000000"], where
            assert parsed.win == WIN[game["winner"]], f"{where}: win {parsed.win} for {END_NAMES[game['end']]} {game['winner']}"
            endings = KIF_ENDINGS if fmt == "kif" else CSA_ENDINGS
            assert parsed.endgame in endings[game["end"]], f"{where}: {parsed.endgame} for {END_NAMES[game['end']]}"
            values = sample_values(game)
            checked["values"] += len(values)
            for ply in range(game["length"]):
                if comments is not None:
                    comment = (comments[ply] if ply < len(comments) else None) or ""
                    found = re.search(r"koma value ([+-]\d\.\d{3})", comment)
                    if ply in values:
                        assert found and abs(float(found.group(1)) - values[ply][0]) <= 0.0006, f"{where}: ply {ply} comment {comment!r}, value {values[ply][0]}"
                    else:
                        assert not found, f"{where}: ply {ply} (no full search) has a value: {comment!r}"
                if scores is not None:
                    expected = values[ply][1] if ply in values else 0
                    assert abs(scores[ply] - expected) <= 1, f"{where}: ply {ply} score {scores[ply]}, expected {expected}"
            checked[fmt] += 1
    print(f"\nrecords checked in cshogi: {dict(checked)}")
    assert checked["kif"] >= 8 and checked["csa"] == GAMES_PER_RUN and checked["values"] > 100

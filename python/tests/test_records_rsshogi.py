"""Oracle tests of koma's game records, legal moves and KI2 move text against rsshogi (MIT, with
its own Rust core; used only through its Python API), a second implementation beside cshogi
(test_records_oracle.py, test_rules_oracle.py), through `koma convert` and `koma rules`.

Random games are played with rsshogi's legal moves from every start koma knows (the even game,
all eighteen handicaps, random mid-game positions), favouring captures, promotions, drops and
moves that need 左/右/直/上/寄/引 or 打, and given a random ending. Then:

* rsshogi writes them as CSA, KIF (Shift_JIS and UTF-8) and KI2; koma reads the same start and
  moves, and writes CSA that rsshogi reads back to the same result, times and player names;
* koma writes CSA, KIF, KIFU and KI2 from USI and from rsshogi's CSA; rsshogi reads the same start,
  moves and result;
* `koma rules` gives the legal moves and check of positions from those games and of random
  placements crowded with pieces of one kind exactly as rsshogi does;
* koma's KI2 text of every legal move of such positions is rsshogi's `Move.to_ki2`, but for the
  differences listed at `classify`, and each reader reads the other's text back to the move.

Starts: rsshogi's 手合割 table (rsshogi.initial_positions, fourteen names) is koma's less 左七枚落ち,
右七枚落ち, 歩三兵 and 裸玉. koma writes the last two as board diagrams, which rsshogi reads; the
seven-piece starts it writes by name only in KIF and KI2, so those two are checked from koma to
rsshogi through CSA (and from rsshogi to koma in every format: rsshogi writes a diagram).

Needs KOMA_BIN (scripts/test sets it). KOMA_RSSHOGI_GAMES sets the number of games (default 380).
"""

import json
import os
import random
import re
import subprocess
from pathlib import Path

import pytest

rsshogi = pytest.importorskip("rsshogi")
from rsshogi.core import Board  # noqa: E402
from rsshogi.initial_positions import HANDICAP_TO_SFEN  # noqa: E402
from rsshogi.record import Record, RecordMetadata  # noqa: E402
from rsshogi.types import Color  # noqa: E402

N_GAMES = int(os.environ.get("KOMA_RSSHOGI_GAMES", "380"))

# koma's Handicap::ALL, in its order: KIF name (手合割) → start SFEN. test_handicap_tables checks
# it against koma's reading of each name and against rsshogi's table.
KOMA_STARTS = {
    "平手": "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1",
    "香落ち": "lnsgkgsn1/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "右香落ち": "1nsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "角落ち": "lnsgkgsnl/1r7/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "飛車落ち": "lnsgkgsnl/7b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "飛香落ち": "lnsgkgsn1/7b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "二枚落ち": "lnsgkgsnl/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "三枚落ち": "lnsgkgsn1/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "四枚落ち": "1nsgkgsn1/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "五枚落ち": "2sgkgsn1/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "左五枚落ち": "1nsgkgs2/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "六枚落ち": "2sgkgs2/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "左七枚落ち": "2sgkg3/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "右七枚落ち": "3gkgs2/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "八枚落ち": "3gkg3/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "十枚落ち": "4k4/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "歩三兵": "4k4/9/9/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w 3p 1",
    "裸玉": "4k4/9/9/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
}
NAMES = list(KOMA_STARTS)
# koma's starts that rsshogi's 手合割 table lacks, and of those the ones koma names (no diagram).
NOT_IN_RSSHOGI = {"左七枚落ち", "右七枚落ち", "歩三兵", "裸玉"}
NAMED_ONLY_BY_KOMA = {"左七枚落ち", "右七枚落ち"}

MOTION_WORDS = "上寄引"
SIDE_WORDS = "左右"


def key(sfen: str) -> str:
    """Board, side to move and hands of an SFEN, in rsshogi's canonical form (no move number)."""
    return " ".join(Board(sfen).to_sfen().split()[:3])


def black_to_move(board) -> bool:
    return board.turn == Color.BLACK


# ---------------------------------------------------------------------------------------------
# Random games and positions, played and judged by rsshogi
# ---------------------------------------------------------------------------------------------


def board_sources(board) -> dict:
    """(destination, piece type) → origins of the legal board moves of that kind there."""
    out = {}
    for m in board.legal_moves():
        if not m.is_drop():
            out.setdefault((m.to_sq.value, board.piece_on(m.from_sq).piece_type.value), set()).add(m.from_sq.value)
    return out


def needs_words(board, m, sources: dict) -> bool:
    """Whether KI2 must tell `m` apart from another legal move of the same kind to the same square
    (left/right/straight/motion words, or 打)."""
    if m.is_drop():
        return any(to == m.to_sq.value and pt == m.dropped_piece_type.value for to, pt in sources)
    return len(sources[(m.to_sq.value, board.piece_on(m.from_sq).piece_type.value)]) > 1


def play(board, rng: random.Random, plies: int) -> list:
    """Plays up to `plies` random legal moves on `board` (stopping at mate); returns them as USI.
    A quarter of the moves are ones KI2 must disambiguate when there are any, a third captures,
    promotions or drops, and a mate in one is taken now and then."""
    moves = []
    for _ in range(plies):
        legal = board.legal_moves()
        if not legal:
            break
        r = rng.random()
        pool = []
        if r < 0.05 and not board.is_in_check():
            mate = board.solve_mate_in_one()
            pool = [mate.to_move()] if mate is not None else []
        elif r < 0.3:
            sources = board_sources(board)
            pool = [m for m in legal if needs_words(board, m, sources)]
        elif r < 0.65:
            pool = [m for m in legal if m.is_drop() or m.is_promotion() or not board.is_square_empty(m.to_sq)]
        m = rng.choice(pool or legal)
        board.apply_move(m)
        moves.append(m.to_usi())
    return moves


# Endings rsshogi can write in CSA, KIF and KI2 alike, by who wins: the side to move at the end
# ("mover"), the other side ("other"), or nobody.
ENDINGS = {
    "resign": ("other", "WIN"),
    "declaration": ("mover", "WIN_BY_DECLARATION"),
    "illegal_by_mover": ("other", "WIN_BY_ILLEGAL_MOVE"),
    "illegal_by_other": ("mover", "WIN_BY_ILLEGAL_MOVE"),
    "timeout": ("other", "WIN_BY_TIMEOUT"),
    "repetition": (None, "DRAW_BY_REPETITION"),
    "impasse": (None, "DRAW_BY_IMPASSE"),
    "max_moves": (None, "DRAW_BY_MAX_PLIES"),
    "abort": (None, "PAUSED"),
}


def outcome(result) -> str:
    """Who won a record, by rsshogi's reading: black, white, draw, or none (aborted, unfinished)."""
    if result.is_black_win():
        return "black"
    if result.is_white_win():
        return "white"
    return "draw" if result.is_draw() else "none"


class Game:
    def __init__(self, index: int, rng: random.Random):
        self.index = index
        k = index % (len(NAMES) + 1)
        if k == len(NAMES):
            board = Board(KOMA_STARTS["平手"])
            play(board, rng, rng.randrange(0, 81))
            self.name = None
            self.start = key(board.to_sfen()) + " 1"
        else:
            self.name = NAMES[k]
            self.start = KOMA_STARTS[self.name]
        board = Board(self.start)
        self.usi = play(board, rng, rng.randrange(0, 161))
        black = black_to_move(board)
        mated = not board.legal_moves()
        self.ending = "resign" if mated else rng.choice([None, *ENDINGS])
        if self.ending is None:
            self.result = None
        else:
            who, name = ENDINGS[self.ending]
            winner_black = black if who == "mover" else not black
            self.result = name if who is None else ("BLACK_" if winner_black else "WHITE_") + name
        self.times_ms = [1000 * rng.randrange(0, 300) for _ in self.usi]
        self.names = (rng.choice(["Sente", "先手太郎", "a b"]), rng.choice(["Gote", "後手花子", "c"]))

    def record(self) -> Record:
        meta = RecordMetadata(black_player=self.names[0], white_player=self.names[1])
        return Record.from_usi_main_line(self.start, self.usi, result=self.result, move_times_ms=self.times_ms, metadata=meta)

    def usi_line(self) -> str:
        return f"sfen {self.start}" + (" moves " + " ".join(self.usi) if self.usi else "")

    def expected_outcome(self) -> str:
        if self.result is None:
            return "none"
        if self.result.startswith("BLACK_"):
            return "black"
        if self.result.startswith("WHITE_"):
            return "white"
        return "none" if self.result == "PAUSED" else "draw"


SET = {"R": 2, "B": 2, "G": 4, "S": 4, "N": 4, "L": 4, "P": 18}


def dead(letter: str, black: bool, rank: int) -> bool:
    """An unpromoted pawn or lance on its last rank, a knight on its last two: cannot move."""
    r = rank if black else 10 - rank
    return (letter in "PL" and r == 1) or (letter == "N" and r <= 2)


def random_placement(rng: random.Random):
    """A random legal position with a cluster of pieces of one kind and side (golds, silvers,
    tokins, promoted silvers, knights, dragons, horses, …) around a square, so that several of
    them can reach the same squares; other pieces scattered, some in hand. None when the side not
    to move would be in check."""
    board, left = {}, dict(SET)
    squares = [(f, r) for f in range(1, 10) for r in range(1, 10)]
    kb = rng.choice(squares)
    kw = rng.choice([s for s in squares if max(abs(s[0] - kb[0]), abs(s[1] - kb[1])) > 1])
    board[kb], board[kw] = "K", "k"
    pawn_files = {True: set(), False: set()}

    def put(sq, letter, black, promoted):
        if sq in board or not left[letter] or not (1 <= sq[0] <= 9 and 1 <= sq[1] <= 9):
            return
        if not promoted and (dead(letter, black, sq[1]) or (letter == "P" and sq[0] in pawn_files[black])):
            promoted = True  # never a gold: golds are never dead
        if letter == "P" and not promoted:
            pawn_files[black].add(sq[0])
        left[letter] -= 1
        board[sq] = ("+" if promoted else "") + (letter if black else letter.lower())

    letter, promoted = rng.choice([("G", False), ("G", False), ("P", True), ("P", True), ("S", True), ("S", False),
                                   ("S", False), ("N", False), ("L", True), ("R", True), ("B", True), ("B", False)])
    black = rng.random() < 0.5
    centre = (rng.randint(1, 9), rng.randint(1, 9))
    d = 1 if rng.random() < 0.7 else 2
    around = [(centre[0] + df, centre[1] + dr) for df in range(-d, d + 1) for dr in range(-d, d + 1) if (df, dr) != (0, 0)]
    rng.shuffle(around)
    for sq in around[: rng.randint(3, 8)]:
        put(sq, letter, black, promoted)
    for _ in range(rng.randint(0, 14)):
        other = rng.choice([l for l in SET if left[l]])
        put(rng.choice(squares), other, rng.random() < 0.5, other != "G" and rng.random() < 0.2)
    hands = {}
    for other, n in left.items():
        for _ in range(n):
            r = rng.random()
            if r < 0.1:
                hands[other] = hands.get(other, 0) + 1
            elif r < 0.2:
                hands[other.lower()] = hands.get(other.lower(), 0) + 1
    rows = []
    for rank in range(1, 10):
        row, empty = "", 0
        for file in range(9, 0, -1):
            p = board.get((file, rank))
            if p is None:
                empty += 1
                continue
            row += (str(empty) if empty else "") + p
            empty = 0
        rows.append(row + (str(empty) if empty else ""))
    hand = "".join(f"{n if n > 1 else ''}{c}" for c in "RBGSNLPrbgsnlp" for n in [hands.get(c, 0)] if n) or "-"
    side = rng.choice("bw")
    sfen = f"{'/'.join(rows)} {side} {hand} 1"
    other_side = f"{'/'.join(rows)} {'w' if side == 'b' else 'b'} {hand} 1"
    if Board(other_side).is_in_check():
        return None
    return sfen


# ---------------------------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def convert(koma_bin):
    def run(src: Path, dst, frm: str, to: str, *extra: str) -> str:
        args = [koma_bin, "convert", "--from", frm, "--to", to, *extra, str(src)] + ([str(dst)] if dst else [])
        p = subprocess.run(args, capture_output=True, text=True)
        assert p.returncode == 0, f"{' '.join(args[1:])} failed:\n{p.stderr[-3000:]}"
        return p.stdout

    return run


@pytest.fixture(scope="module")
def games():
    rng = random.Random(20260107)
    gs = [Game(i, rng) for i in range(N_GAMES)]
    # The corpus covers every start and every ending.
    assert {g.name for g in gs} == set(NAMES) | {None}
    assert {g.ending for g in gs} == set(ENDINGS) | {None}
    return gs


# ---------------------------------------------------------------------------------------------
# Starts
# ---------------------------------------------------------------------------------------------


def test_handicap_tables(convert, tmp_path):
    """koma reads every 手合割 name to the start in KOMA_STARTS, which is rsshogi's for every name
    rsshogi knows; rsshogi's table holds no start koma lacks."""
    assert set(HANDICAP_TO_SFEN) <= set(KOMA_STARTS)
    assert set(KOMA_STARTS) - set(HANDICAP_TO_SFEN) == NOT_IN_RSSHOGI
    src = tmp_path / "kif"
    src.mkdir()
    for i, name in enumerate(KOMA_STARTS):
        (src / f"h{i:02}.kifu").write_text(f"手合割：{name}\n手数----指手---------消費時間--\n")
    convert(src, tmp_path / "usi", "kif", "usi")
    for i, (name, sfen) in enumerate(KOMA_STARTS.items()):
        [line] = (tmp_path / "usi" / f"h{i:02}.usi").read_text().splitlines()
        assert read_usi_line(line) == (key(sfen), []), (name, line)
        if name in HANDICAP_TO_SFEN:
            assert HANDICAP_TO_SFEN[name] == sfen, name


# ---------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------


def read_usi_line(line: str):
    words = line.split()
    if words[:1] == ["position"]:
        words = words[1:]
    if words[0] == "startpos":
        start, rest = KOMA_STARTS["平手"], words[1:]
    else:
        start, rest = " ".join(words[1:5]), words[5:]
    return key(start), rest[1:] if rest[:1] == ["moves"] else []


def check_rsshogi_read(record: Record, game: Game, what: str, result: bool = True):
    assert key(record.init_position_sfen) == key(game.start), what
    assert [m.move.to_usi() for m in record.moves] == game.usi, what
    if result:
        assert outcome(record.result) == game.expected_outcome(), f"{what}: {record.result} for {game.result}"


KI2_MOVE = re.compile(r"[▲△][^▲△\s]+(?:\u3000[^▲△\s]+)?")


def rsshogi_reads_ki2(text: str, game: Game, what: str):
    """rsshogi's reading of a KI2 record koma wrote, or None where rsshogi refuses a move koma
    wrote without the words rsshogi would add for a pinned piece (checked: the first move rsshogi
    refuses must be such a move; see `classify`)."""
    try:
        return Record.from_ki2_str(text)
    except ValueError:
        pass
    lines = text.splitlines()
    header = [l for l in lines if not l.startswith(("▲", "△", "まで"))]
    tokens = KI2_MOVE.findall("\n".join(l for l in lines if l.startswith(("▲", "△"))))
    assert len(tokens) == len(game.usi), what
    board = Board(game.start)
    for k, token in enumerate(tokens):
        try:
            Record.from_ki2_str("\n".join(header + tokens[: k + 1]) + "\n")
        except ValueError as e:
            [m] = [m for m in board.legal_moves() if m.to_usi() == game.usi[k]]
            why = classify(board, m, token, m.to_ki2(board))
            assert why == "pinned", f"{what}: rsshogi refuses move {k + 1} {token} ({game.usi[k]}, {why}): {e}"
            return None
        board.apply_usi(game.usi[k])
    raise AssertionError(f"{what}: rsshogi refuses koma's KI2 but reads every move of it")


def write_rsshogi_records(games, root: Path) -> dict:
    """Each game as rsshogi writes it: CSA, KIF (odd games in Shift_JIS .kif, even ones UTF-8
    .kifu) and KI2 (odd games Shift_JIS, even ones UTF-8). Returns {format: directory}."""
    dirs = {fmt: root / fmt for fmt in ("csa", "kif", "ki2")}
    for d in dirs.values():
        d.mkdir(parents=True)
    for g in games:
        r = g.record()
        sjis = g.index % 2 == 1
        (dirs["csa"] / f"g{g.index:04}.csa").write_text(r.to_csa(), encoding="utf-8")
        (dirs["kif"] / f"g{g.index:04}.{'kif' if sjis else 'kifu'}").write_text(r.to_kif(), encoding="cp932" if sjis else "utf-8")
        (dirs["ki2"] / f"g{g.index:04}.ki2").write_text(r.to_ki2(), encoding="cp932" if sjis else "utf-8")
    return dirs


def test_rsshogi_records_read_by_koma(games, convert, tmp_path):
    """rsshogi writes; koma reads the same start and moves, and the CSA koma writes from what it
    read gives rsshogi the same result (and, from CSA and KIF, the same times and names)."""
    dirs = write_rsshogi_records(games, tmp_path / "src")
    for fmt, src in dirs.items():
        usi, csa = tmp_path / f"usi-{fmt}", tmp_path / f"csa-{fmt}"
        convert(src, usi, fmt, "usi")
        convert(src, csa, fmt, "csa")
        for g in games:
            what = f"{fmt} game {g.index} ({g.name}, {g.result}): {g.usi_line()}"
            [line] = (usi / f"g{g.index:04}.usi").read_text().splitlines()
            assert read_usi_line(line) == (key(g.start), g.usi), what
            back = Record.from_csa_str((csa / f"g{g.index:04}.csa").read_text())
            check_rsshogi_read(back, g, what)
            assert (back.metadata.black_player, back.metadata.white_player) == g.names, what
            if fmt != "ki2":  # KI2 has no times
                assert [m.time_ms for m in back.moves] == g.times_ms, what


def test_koma_records_read_by_rsshogi(games, convert, tmp_path):
    """koma writes CSA (all games in one file), KIF, KIFU and KI2 from USI lines; rsshogi reads the
    same start and moves. koma's CSA, KIF and KI2 of rsshogi's CSA (with endings) give rsshogi the
    same result."""
    src = tmp_path / "games.usi"
    src.write_text("".join(g.usi_line() + "\n" for g in games))
    convert(src, tmp_path / "all.csa", "usi", "csa")
    parsed = Record.from_csa_games_str((tmp_path / "all.csa").read_text())
    assert len(parsed) == len(games)
    for r, g in zip(parsed, games):
        check_rsshogi_read(r, g, f"csa game {g.index}: {g.usi_line()}", result=False)
    pinned = 0
    for fmt, encoding in (("kif", "cp932"), ("kifu", "utf-8"), ("ki2", "cp932")):
        out = tmp_path / fmt
        out.mkdir()
        convert(src, out / f"game.{fmt}", "usi", fmt)
        for g in games:
            if g.name in NAMED_ONLY_BY_KOMA:
                continue
            text = (out / f"game-{g.index + 1}.{fmt}").read_text(encoding=encoding)
            what = f"{fmt} game {g.index}: {g.usi_line()}\n{text}"
            r = rsshogi_reads_ki2(text, g, what) if fmt == "ki2" else Record.from_kif_str(text)
            if r is None:
                pinned += 1
                continue
            check_rsshogi_read(r, g, what, result=False)

    # Endings: rsshogi's CSA → koma → CSA, KIF, KI2 → rsshogi.
    dirs = write_rsshogi_records(games, tmp_path / "rs")
    for fmt in ("csa", "kifu", "ki2"):
        out = tmp_path / f"from-csa-{fmt}"
        convert(dirs["csa"], out, "csa", fmt)
        for g in games:
            if fmt != "csa" and g.name in NAMED_ONLY_BY_KOMA:
                continue
            text = (out / f"g{g.index:04}.{fmt}").read_text(encoding="cp932" if fmt == "ki2" else "utf-8")
            what = f"{fmt} game {g.index} ({g.result}): {g.usi_line()}\n{text}"
            read = {"csa": Record.from_csa_str, "kifu": Record.from_kif_str}.get(fmt)
            r = read(text) if read else rsshogi_reads_ki2(text, g, what)
            if r is None:
                pinned += 1
                continue
            check_rsshogi_read(r, g, what)
    assert pinned < len(games) // 20, pinned


# ---------------------------------------------------------------------------------------------
# Legal moves
# ---------------------------------------------------------------------------------------------


def run_rules(koma_bin, lines: list) -> list:
    p = subprocess.run([koma_bin, "rules"], input="".join(l + "\n" for l in lines), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    out = p.stdout.splitlines()
    assert len(out) == len(lines)
    return [json.loads(o) for o in out]


def placements(rng: random.Random, n: int) -> list:
    out = []
    while len(out) < n:
        sfen = random_placement(rng)
        if sfen is not None:
            out.append(sfen)
    return out


def test_legal_moves_match_rsshogi(games, koma_bin):
    """koma's legal moves and check for every position of the games and for random placements are
    rsshogi's."""
    sfens = []
    for g in games:
        board = Board(g.start)
        sfens.append(board.to_sfen())
        for u in g.usi:
            board.apply_usi(u)
            sfens.append(board.to_sfen())
    sfens += placements(random.Random(5), 4000)
    answers = run_rules(koma_bin, [f"sfen {s}" for s in sfens])
    n_moves = 0
    for sfen, a in zip(sfens, answers):
        board = Board(sfen)
        want = {m.to_usi() for m in board.legal_moves()}
        assert "error" not in a, (sfen, a)
        got = set(a["legal"])
        assert got == want, f"sfen {sfen}\n  only koma: {sorted(got - want)}\n  only rsshogi: {sorted(want - got)}"
        assert len(a["legal"]) == len(got), f"sfen {sfen}: koma repeats a move"
        assert a["in_check"] == board.is_in_check(), sfen
        assert key(a["sfen"]) == key(sfen), sfen
        n_moves += len(want)
    assert len(sfens) > 30000 and n_moves > 1_000_000, (len(sfens), n_moves)


# ---------------------------------------------------------------------------------------------
# KI2 move text
# ---------------------------------------------------------------------------------------------


def motion(black: bool, frm, to) -> str:
    """上/寄/引 of a move from `frm` to `to` (rsshogi squares), from the mover's side."""
    d = (frm.rank - to.rank) if black else (to.rank - frm.rank)
    return "上" if d > 0 else "寄" if d == 0 else "引"


def side(black: bool, frm, to):
    """左/右 of an origin relative to the destination, from the mover's side (None: same file)."""
    d = (frm.file - to.file) if black else (to.file - frm.file)
    return "左" if d > 0 else "右" if d < 0 else None


def classify(board, move, koma_text: str, rsshogi_text: str):
    """Why koma's KI2 text of `move` differs from rsshogi's, or None when it is not a known
    difference:

    * "padding": rsshogi pads every 同 with a full-width space (`同　成銀`); koma, like cshogi,
      only a one-character piece name with no suffix (`同　歩`, `同成銀`). Both read either.
    * "pinned": rsshogi counts a piece that cannot legally move to the square (a pinned one), so
      it adds words (or 打) koma leaves out: the JSA rules speak of pieces that can move there.
    * "side only": rsshogi writes a side word alone (`４八金左`) where koma writes the side and the
      motion (`４八金左寄`: golds on 5h, 3h and 5i reaching 4h). The mover does not move up and
      shares its motion with another piece, and the other piece on its side moves up. Read word
      by word, `４八金左` also names the gold on 5i (written `４八金上`): the JSA rules (motion
      first, then side, then both) give `左寄`; rsshogi and cshogi write both words in the same
      case with 上 and 寄 swapped (`５二金左上`), cshogi also in some cases where rsshogi leaves
      the motion out (a fourth gold on 3i), and rsshogi's own reader refuses its `４八金左`. koma
      reads both forms. See docs/records.md.
    """
    strip = lambda t: t.replace("同\u3000", "同")  # noqa: E731
    if strip(koma_text) == strip(rsshogi_text):
        return "padding"
    black = black_to_move(board)
    if move.is_drop():
        pseudo = [m for m in board.pseudo_legal_moves() if not m.is_drop() and m.to_sq == move.to_sq
                  and board.piece_on(m.from_sq).piece_type == move.dropped_piece_type]
        legal = [m for m in pseudo if board.is_legal_move(m)]
        if pseudo and not legal and rsshogi_text == koma_text + "打":
            return "pinned"
        return None
    pt = board.piece_on(move.from_sq).piece_type
    same = lambda ms: {m.from_sq.value: m.from_sq for m in ms if not m.is_drop() and m.to_sq == move.to_sq  # noqa: E731
                                                         and board.piece_on(m.from_sq).piece_type == pt}
    legal = same(board.legal_moves())
    pseudo = same(board.pseudo_legal_moves())
    bare = re.sub(f"[{SIDE_WORDS}直{MOTION_WORDS}]", "", rsshogi_text)
    if len(pseudo) > len(legal) and bare == re.sub(f"[{SIDE_WORDS}直{MOTION_WORDS}]", "", koma_text):
        return "pinned"
    others = [s for v, s in legal.items() if v != move.from_sq.value]
    my_motion, my_side = motion(black, move.from_sq, move.to_sq), side(black, move.from_sq, move.to_sq)
    if my_side and my_motion != "上" and koma_text.replace(my_side + my_motion, my_side) == rsshogi_text != koma_text:
        shares_motion = any(motion(black, o, move.to_sq) == my_motion for o in others)
        same_side = [o for o in others if side(black, o, move.to_sq) == my_side]
        if shares_motion and same_side and all(motion(black, o, move.to_sq) == "上" for o in same_side):
            return "side only"
    return None


def notation_cases(games, rng: random.Random, n_placements: int, stride: int):
    """(start SFEN, previous move, board after it, legal move) for every legal move of positions
    along every `stride`-th game (after a previous move, so that 同 appears) and of
    `n_placements` random placements."""
    cases = []
    for g in games[::stride]:
        board = Board(g.start)
        for j, u in enumerate(g.usi):
            before = board.to_sfen()
            board.apply_usi(u)
            if j % 7 == 3:
                after = board.copy()
                for m in after.legal_moves():
                    cases.append((before, u, after, m))
    for sfen in placements(rng, n_placements):
        board = Board(sfen)
        for m in board.legal_moves():
            cases.append((sfen, None, board, m))
    return cases


def test_japanese_notation_matches_rsshogi(games, convert, tmp_path):
    """koma's KI2 text for every legal move of many positions is rsshogi's `Move.to_ki2`, but for
    the differences `classify` lists; there are cases of the side-only form, and not many pinned."""
    cases = notation_cases(games, random.Random(11), 1200, 3)
    lines = []
    for sfen, prev, board, m in cases:
        lines.append(f"sfen {sfen} moves " + (f"{prev} " if prev else "") + m.to_usi())
    (tmp_path / "in.usi").write_text("\n".join(lines) + "\n")
    out = convert(tmp_path / "in.usi", None, "usi", "notation", "--style", "japanese").splitlines()
    # One line per move, `   N ▲text`; each game starts again at 1.
    texts, k = [], 0
    for sfen, prev, board, m in cases:
        n = 2 if prev else 1
        texts.append(out[k + n - 1].split(None, 1)[1])
        k += n
    assert k == len(out)
    counts, mismatches = {}, []
    for (sfen, prev, board, m), got, line in zip(cases, texts, lines):
        want = m.to_ki2(board)
        if got == want:
            counts["same"] = counts.get("same", 0) + 1
            continue
        why = classify(board, m, got, want)
        if why is None:
            mismatches.append((line, got, want))
        counts[why] = counts.get(why, 0) + 1
    assert not mismatches, f"{len(mismatches)} of {len(cases)} differ, e.g. {mismatches[:6]}"
    assert len(cases) > 80000, counts
    assert counts.get("side only", 0) >= 20, counts
    assert counts.get("pinned", 0) < len(cases) // 1000, counts
    assert counts.get("padding", 0) > 0, counts


def test_each_reader_reads_the_others_ki2(games, convert, tmp_path):
    """Every move that needs words (左右直上寄引打) or is written with 同, as a one-move KI2 record:
    koma reads rsshogi's record to the move (both forms of the side-only case, rsshogi's `左`
    here), and rsshogi reads koma's (koma's `左寄`), except where rsshogi counts a pinned piece."""
    cases = notation_cases(games, random.Random(13), 300, 8)
    chosen = []
    for i, (sfen, prev, board, m) in enumerate(cases):
        text = m.to_ki2(board)
        if re.search("[左右直上寄引打]", text[1:]) or (i % 8 == 0 and "同" in text):
            chosen.append((sfen, prev, board, m, text))
    src, usi, ki2 = tmp_path / "rs", tmp_path / "usi", tmp_path / "ki2"
    src.mkdir()
    (tmp_path / "in.usi").write_text("".join(f"sfen {s} moves " + (f"{p} " if p else "") + m.to_usi() + "\n"
                                             for s, p, _, m, _ in chosen))
    for i, (sfen, prev, board, m, text) in enumerate(chosen):
        moves = ([prev] if prev else []) + [m.to_usi()]
        (src / f"m{i:05}.ki2").write_text(Record.from_usi_main_line(sfen, moves).to_ki2())
    convert(src, usi, "ki2", "usi")
    side_only = pinned = 0
    for i, (sfen, prev, board, m, text) in enumerate(chosen):
        [line] = (usi / f"m{i:05}.usi").read_text().splitlines()
        assert read_usi_line(line)[1][-1] == m.to_usi(), f"koma read rsshogi's {text} as {line}"
    convert(tmp_path / "in.usi", ki2 / "m.ki2", "usi", "ki2")
    for i, (sfen, prev, board, m, text) in enumerate(chosen):
        koma_ki2 = (ki2 / f"m-{i + 1}.ki2").read_text(encoding="cp932")
        koma_text = re.findall(r"[▲△][^▲△\s]+(?:\u3000[^▲△\s]+)?", koma_ki2)[-1]
        why = classify(board, m, koma_text, text) if koma_text != text else None
        side_only += why == "side only"
        try:
            read = Record.from_ki2_str(koma_ki2).moves[-1].move.to_usi()
        except ValueError:
            read = None
        if why == "pinned" and read is None:
            pinned += 1
            continue
        assert read == m.to_usi(), f"rsshogi read koma's {koma_text} (rsshogi: {text}) as {read}\n{koma_ki2}"
    assert len(chosen) > 1000 and side_only >= 5 and pinned < len(chosen) // 200, (len(chosen), side_only, pinned)


def test_both_forms_of_a_side_word_read(convert, tmp_path):
    """Golds on 5h, 3h and 5i all reach 4h (and the same turned round for White): koma writes
    5h-4h `４八金左寄`, rsshogi `４八金左`; koma reads both, rsshogi reads koma's."""
    cases = [
        # (start, usi, koma's text, rsshogi's text)
        ("4k4/9/9/9/9/9/9/4G1G2/K3G4 b - 1", "5h4h", "▲４八金左寄", "▲４八金左"),
        ("4k4/9/9/9/9/9/9/4G1G2/K3G4 b - 1", "3h4h", "▲４八金右", "▲４八金右"),
        ("4k4/9/9/9/9/9/9/4G1G2/K3G4 b - 1", "5i4h", "▲４八金上", "▲４八金上"),
        ("k3g4/2g1g4/9/9/9/9/9/9/4K4 w - 1", "5b6b", "△６二金左寄", "△６二金左"),
        ("4k4/9/9/9/9/+P1+P6/+P8/9/4K4 b - 1", "9f8f", "▲８六と左寄", "▲８六と左"),
        ("4k4/9/9/9/9/+P1+P6/+P8/9/4K4 b - 1", "7f8f", "▲８六と右", "▲８六と右"),
    ]
    src = tmp_path / "src"
    src.mkdir()
    for i, (start, usi, koma_text, rs_text) in enumerate(cases):
        board = Board(start)
        [m] = [m for m in board.legal_moves() if m.to_usi() == usi]
        assert m.to_ki2(board) == rs_text
        record = Record.from_usi_main_line(start, [usi])
        written = record.to_ki2()
        assert written.count(rs_text) == 1
        (src / f"c{i}-rsshogi.ki2").write_text(written)
        (src / f"c{i}-koma.ki2").write_text(written.replace(rs_text, koma_text))
        (src / f"c{i}.usi").write_text(f"sfen {start} moves {usi}\n")
    convert(src, tmp_path / "usi", "ki2", "usi")
    convert(src, tmp_path / "ki2", "usi", "ki2")
    for i, (start, usi, koma_text, rs_text) in enumerate(cases):
        for form in ("rsshogi", "koma"):
            line = (tmp_path / "usi" / f"c{i}-{form}.usi").read_text().strip()
            assert read_usi_line(line) == (key(start), [usi]), (form, koma_text, rs_text, line)
        written = (tmp_path / "ki2" / f"c{i}.ki2").read_text(encoding="cp932")
        assert koma_text in written, written
        assert [m.move.to_usi() for m in Record.from_ki2_str(written).moves] == [usi]
        if koma_text != rs_text:
            # rsshogi's reader takes its own text word by word: 左 also names the piece moving up.
            with pytest.raises(ValueError):
                Record.from_ki2_str(Record.from_usi_main_line(start, [usi]).to_ki2())

"""Differential tests of `koma rules` (the rules core, koma-shogi) against cshogi as an oracle.

cshogi is used only through its Python API, as an independent implementation: legal move sets,
check, SFEN, and its impasse judgement. Repetition / perpetual check and the 24-point rule are also
computed independently here, in plain Python, from cshogi's positions.

Everything is deterministic (fixed seeds). The binary under test comes from KOMA_BIN (scripts/test
sets it).
"""

import json
import os
import random
import subprocess
import time

import cshogi  # the oracle; python/requirements.txt pins it
import pytest

STARTPOS = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1"
HANDICAPS = {
    "lance": "lnsgkgsn1/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "bishop": "lnsgkgsnl/1r7/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "rook": "lnsgkgsnl/7b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "rook-lance": "lnsgkgsn1/7b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "two-piece": "lnsgkgsnl/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "four-piece": "1nsgkgsn1/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "six-piece": "2sgkgs2/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "eight-piece": "3gkg3/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "ten-piece": "4k4/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "three-pawns": "4k4/9/9/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w 3p 1",
    "naked-king": "4k4/9/9/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "right-lance": "1nsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "three-piece": "lnsgkgsn1/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "five-piece": "2sgkgsn1/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "left-five-piece": "1nsgkgs2/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
}
STARTS = {"even": STARTPOS, **HANDICAPS}

MAX_PLIES = 512  # koma rules' default --max-plies


# ---------------------------------------------------------------------------------------------
# Running the oracle
# ---------------------------------------------------------------------------------------------


def koma_bin() -> str:
    path = os.environ.get("KOMA_BIN")
    if not path:
        pytest.fail("KOMA_BIN is not set: run these tests through scripts/test (it builds koma and sets KOMA_BIN)")
    if not os.access(path, os.X_OK):
        pytest.fail(f"KOMA_BIN={path!r} is not an executable file")
    return path


def run_rules(lines, *args: str, timeout: float = 300) -> list:
    """Feeds `lines` (str or bytes, no newlines) to ONE `koma rules` process; returns one parsed
    JSON object per line, checking that there is exactly one output line per input line."""
    data = b"".join((l if isinstance(l, bytes) else l.encode()) + b"\n" for l in lines)
    proc = subprocess.run([koma_bin(), "rules", *args], input=data, capture_output=True, timeout=timeout)
    assert proc.returncode == 0, f"koma rules exited with {proc.returncode}: {proc.stderr.decode(errors='replace')[-2000:]}"
    out = proc.stdout.decode().split("\n")
    assert out[-1] == "", "output does not end with a newline"
    out = out[:-1]
    assert len(out) == len(lines), f"{len(lines)} input lines but {len(out)} output lines"
    return [json.loads(o) for o in out]


# ---------------------------------------------------------------------------------------------
# Independent helpers
# ---------------------------------------------------------------------------------------------


def usi_moves(board) -> set:
    return {cshogi.move_to_usi(m) for m in board.legal_moves}


def position_key(sfen: str) -> str:
    """Board, side to move and hands: what repetition compares (the move number is not part of it)."""
    return " ".join(sfen.split()[:3])


def expected_repetition(keys: list, checks: list):
    """Sennichite judged for the last position, from scratch: `keys[i]` identifies the position
    after i plies, `checks[i]` says whether its side to move is in check (i.e. whether the move
    into it was a check). Returns None, "repetition_draw", "perpetual_check_win" or
    "perpetual_check_loss" (for the side to move at the end)."""
    n = len(keys) - 1
    same = [i for i in range(n + 1) if keys[i] == keys[n]]
    if len(same) < 4:
        return None
    first = same[0]
    opponent_moves = [j for j in range(first + 1, n + 1) if (n - j) % 2 == 0]
    own_moves = [j for j in range(first + 1, n + 1) if (n - j) % 2 == 1]
    if all(checks[j] for j in opponent_moves):
        return "perpetual_check_win"
    if all(checks[j] for j in own_moves):
        return "perpetual_check_loss"
    return "repetition_draw"


def parse_sfen(sfen: str):
    """A plain-Python reading of an SFEN: ({(file 1-9, rank 1-9): "P" / "+p" / …}, side, hands,
    move number); hands map a letter (upper case Black, lower case White) to a count."""
    board_text, side, hand_text, number = sfen.split()
    board = {}
    for rank, row in enumerate(board_text.split("/"), start=1):
        file, promoted = 9, ""
        for c in row:
            if c.isdigit():
                file -= int(c)
            elif c == "+":
                promoted = "+"
            else:
                board[(file, rank)] = promoted + c
                file -= 1
                promoted = ""
    hands, count = {}, ""
    for c in "" if hand_text == "-" else hand_text:
        if c.isdigit():
            count += c
        else:
            hands[c] = int(count or 1)
            count = ""
    return board, side, hands, int(number)


RANK_LETTERS = "abcdefghi"


def square_name(file: int, rank: int) -> str:
    return f"{file}{RANK_LETTERS[rank - 1]}"


def king_square(board: dict, black: bool):
    return next(sq for sq, p in board.items() if p == ("K" if black else "k"))


def is_uchifuzume_position(sfen: str, legal: set) -> bool:
    """Whether the side to move, not in check, could drop a pawn right in front of the enemy king
    (pawn in hand, square empty, no nifu) but that drop is not legal: a pawn-drop mate."""
    board, side, hands, _ = parse_sfen(sfen)
    black = side == "b"
    if not hands.get("P" if black else "p"):
        return False
    kf, kr = king_square(board, not black)
    to = (kf, kr + 1 if black else kr - 1)
    if not 1 <= to[1] <= 9 or to in board or to[1] == (1 if black else 9):
        return False
    own_pawn = "P" if black else "p"
    if any(board.get((kf, r)) == own_pawn for r in range(1, 10)):
        return False
    return f"P*{square_name(*to)}" not in legal


def mismatch(sfen: str, koma_moves, cshogi_moves) -> str:
    k, c = set(koma_moves), set(cshogi_moves)
    return (
        f"position: sfen {sfen}\n  only koma: {sorted(k - c)}\n  only cshogi: {sorted(c - k)}"
        f"\n  diagram:\n{cshogi.Board(sfen)}"
    )


def choose_move(rng: random.Random, moves: list, drop_weight: float):
    """A random move, favouring captures (x4 per move) so that hands fill up; drops as a whole
    weigh like `drop_weight` x (at most 8) ordinary moves, however many drop squares there are, so
    that pieces stay in hand for a while; promotions a little favoured."""
    captures, drops, quiet = [], [], []
    for m in moves:
        if cshogi.move_is_drop(m):
            drops.append(m)
        elif cshogi.move_cap(m):
            captures.append(m)
        else:
            quiet.append(m)
    groups = [(captures, 4.0 * len(captures)), (drops, drop_weight * min(len(drops), 8)), (quiet, float(len(quiet)))]
    group = rng.choices([g for g, _ in groups], [w for _, w in groups])[0]
    promotions = [m for m in group if cshogi.move_is_promotion(m)]
    if promotions and rng.random() < 0.3:
        return rng.choice(promotions)
    return rng.choice(group)


# ---------------------------------------------------------------------------------------------
# 1. Random playouts: legal moves, check, SFEN and status for >= 100,000 positions
# ---------------------------------------------------------------------------------------------


def generate_playout_cases(seed: int, games_per_start: int, max_game_plies: int):
    """Random games with cshogi from every start. Yields (line, expectation) pairs."""
    rng = random.Random(seed)
    cases = []
    for name, root in STARTS.items():
        for game in range(games_per_start):
            drop_weight = (0.3, 1.0, 3.0)[game % 3]
            board = cshogi.Board(root)
            history = []
            keys = [position_key(board.sfen())]
            checks = [board.is_check()]
            ply = 0
            while True:
                sfen = board.sfen()
                moves = list(board.legal_moves)
                usi = sorted(map(cshogi.move_to_usi, moves))
                in_check = board.is_check()
                expect = {
                    # Joined, to keep 100,000 positions' worth of moves small and fast to compare.
                    "legal": " ".join(usi),
                    "in_check": in_check,
                    "sfen": sfen,
                    "nyugyoku": bool(moves) and board.is_nyugyoku(),
                    "drops": bool(usi) and usi[-1][1] == "*",  # drops sort after board moves
                    "uchifuzume": not in_check and is_uchifuzume_position(sfen, usi),
                }
                r = rng.random()
                if r < 0.08 or ply == 0:
                    # The game so far, as moves from the root: repetition counts here.
                    prefix = "position " if rng.random() < 0.3 else ""
                    if name == "even" and rng.random() < 0.5:
                        line = f"{prefix}startpos"
                    else:
                        line = f"{prefix}sfen {root}"
                    if history:
                        line += " moves " + " ".join(history)
                    expect["repetition"] = expected_repetition(keys, checks)
                    expect["plies"] = int(sfen.split()[3]) - 1
                elif r < 0.11:
                    # The move number decides the move limit: give some positions a large one.
                    fields = sfen.split()
                    fields[3] = str(rng.choice([MAX_PLIES, MAX_PLIES + 1, MAX_PLIES + 2, 1000, 99999]))
                    sfen = " ".join(fields)
                    expect["sfen"] = sfen
                    line = f"sfen {sfen}"
                    expect["repetition"] = None
                    expect["plies"] = int(fields[3]) - 1
                else:
                    line = f"sfen {sfen}"
                    expect["repetition"] = None
                    expect["plies"] = int(sfen.split()[3]) - 1
                cases.append((line, expect))
                if not moves or ply >= max_game_plies:
                    break
                m = choose_move(rng, moves, drop_weight)
                history.append(cshogi.move_to_usi(m))
                board.push(m)
                keys.append(position_key(board.sfen()))
                checks.append(board.is_check())
                ply += 1
    return cases


def expected_status(e) -> str:
    if not e["legal"]:  # no legal move (an empty set or an empty joined string)
        return "checkmate"
    if e["repetition"]:
        return e["repetition"]
    if e["plies"] >= MAX_PLIES:
        return "max_moves_draw"
    if e["nyugyoku"]:
        return "declaration_win"
    return "ongoing"


def test_random_playouts_match_cshogi():
    t0 = time.time()
    cases = generate_playout_cases(seed=20240601, games_per_start=40, max_game_plies=240)
    t1 = time.time()
    answers = run_rules([line for line, _ in cases])
    t2 = time.time()
    counts = {}
    for (line, e), a in zip(cases, answers):
        assert "error" not in a, f"koma rejected a position cshogi accepts: {line}\n  {a}"
        sfen = e["sfen"]
        # Equal sorted lists: the same moves, and koma's sorted, without duplicates.
        if " ".join(a["legal"]) != e["legal"]:
            assert set(a["legal"]) == set(e["legal"].split()), mismatch(sfen, a["legal"], e["legal"].split())
            assert a["legal"] == sorted(set(a["legal"])), f"koma's legal moves are not sorted or repeat: sfen {sfen}"
        assert a["in_check"] == e["in_check"], f"in_check: koma {a['in_check']}, cshogi {e['in_check']}: sfen {sfen}"
        assert a["sfen"] == sfen, f"SFEN: koma {a['sfen']!r}, cshogi {sfen!r} (line {line[:200]})"
        want = expected_status(e)
        assert a["status"] == want, f"status: koma {a['status']}, expected {want}: {line[:300]}"
        counts[want] = counts.get(want, 0) + 1
    n = len(cases)
    print(
        f"\ncompared {n} positions with cshogi ({sum(e['legal'].count(' ') + bool(e['legal']) for _, e in cases)} legal moves); "
        f"statuses {counts}; generation {t1 - t0:.1f}s, koma {t2 - t1:.1f}s, comparison {time.time() - t2:.1f}s"
    )
    assert n >= 100_000
    # The playouts must reach the interesting cases, or the comparison proves little.
    assert counts.get("checkmate", 0) >= 50
    assert counts.get("max_moves_draw", 0) >= 1000
    assert sum(1 for _, e in cases if e["in_check"]) >= 2000
    assert sum(1 for _, e in cases if e["drops"]) >= 50_000
    assert sum(1 for _, e in cases if e["uchifuzume"]) >= 20


# ---------------------------------------------------------------------------------------------
# 2. Random piece placements: odd positions (pins, double checks, pawn-drop mates, impasse)
# ---------------------------------------------------------------------------------------------

FULL_SET = "P" * 18 + "L" * 4 + "N" * 4 + "S" * 4 + "G" * 4 + "B" * 2 + "R" * 2
PROMOTABLE = set("PLNSBR")


def is_dead(letter: str, black: bool, rank: int) -> bool:
    """An unpromoted pawn/lance on the last rank or knight on the last two can never move."""
    last = 1 if black else 9
    if letter in "PL":
        return rank == last
    if letter == "N":
        return rank == last or rank == (2 if black else 8)
    return False


def board_to_sfen(board: dict, side: str, hands: dict, number: int = 1) -> str:
    rows = []
    for rank in range(1, 10):
        row, empty = "", 0
        for file in range(9, 0, -1):
            p = board.get((file, rank))
            if p is None:
                empty += 1
                continue
            if empty:
                row += str(empty)
                empty = 0
            row += p
        rows.append(row + (str(empty) if empty else ""))
    hand = ""
    for letters in ("RBGSNLP", "rbgsnlp"):
        for c in letters:
            n = hands.get(c, 0)
            if n:
                hand += (str(n) if n > 1 else "") + c
    return f"{'/'.join(rows)} {side} {hand or '-'} {number}"


def side_not_to_move_in_check(sfen: str) -> bool:
    fields = sfen.split()
    fields[1] = "w" if fields[1] == "b" else "b"
    return cshogi.Board(" ".join(fields)).is_check()


def random_placement(rng: random.Random):
    """A random legal position: kings anywhere (not touching), a random part of a shogi set on the
    board (near the kings more often, sometimes promoted), some of the rest in hands. Returns an SFEN
    or None when the side not to move would be in check."""
    squares = [(f, r) for f in range(1, 10) for r in range(1, 10)]
    side = rng.choice("bw")
    # A third of the positions crowd the king of the side not to move (near its own back rank)
    # with few pieces, and give the side to move a pawn: pawn-drop mates (uchifuzume) and mates
    # are common there.
    net = rng.random() < 0.35
    board = {}
    kb = rng.choice(squares)
    if net and side == "w":
        kb = (rng.randint(1, 9), rng.choice([8, 9, 9]))
    while True:
        kw = rng.choice(squares)
        if net and side == "b":
            kw = (rng.randint(1, 9), rng.choice([1, 1, 2]))
        if max(abs(kw[0] - kb[0]), abs(kw[1] - kb[1])) > 1:
            break
    board[kb], board[kw] = "K", "k"
    pieces = list(FULL_SET)
    rng.shuffle(pieces)
    if net:
        pieces.remove("P")
    n_board = rng.randint(3, 10) if net else rng.randint(0, 30)
    pawn_files = {True: set(), False: set()}
    reserved = None
    if net:
        # Keep the square in front of the target king free for the pawn drop, and the file free
        # of the dropping side's pawns.
        target = kw if side == "b" else kb
        reserved = (target[0], target[1] + (1 if side == "b" else -1))
        pawn_files[side == "b"].add(target[0])
    for letter in pieces[:n_board]:
        black = rng.random() < (0.5 if not net else 0.65 if side == "b" else 0.35)
        if net or rng.random() < 0.6:
            kf, kr = (kw if side == "b" else kb) if net else rng.choice([kb, kw])
            d = 1 if net and rng.random() < 0.5 else 2
            sq = (kf + rng.randint(-d, d), kr + rng.randint(-d, d))
            if not (1 <= sq[0] <= 9 and 1 <= sq[1] <= 9):
                continue
        else:
            sq = rng.choice(squares)
        if sq in board or sq == reserved:
            continue
        promoted = letter in PROMOTABLE and (rng.random() < 0.25 or is_dead(letter, black, sq[1]))
        if letter == "P" and not promoted:
            if sq[0] in pawn_files[black]:
                promoted = True
            else:
                pawn_files[black].add(sq[0])
        board[sq] = ("+" if promoted else "") + (letter if black else letter.lower())
    hands = {}
    for letter in pieces[n_board:]:
        r = rng.random()
        if r < 0.35:
            hands[letter] = hands.get(letter, 0) + 1
        elif r < 0.7:
            hands[letter.lower()] = hands.get(letter.lower(), 0) + 1
    if net:
        hands["P" if side == "b" else "p"] = hands.get("P" if side == "b" else "p", 0) + 1
    sfen = board_to_sfen(board, side, hands, rng.choice([1, 2, 57, 200]))
    if side_not_to_move_in_check(sfen):
        return None
    return sfen


def expected_impasse_status(sfen: str, rule: str) -> str:
    """Independent judgement of a declaration (no check, king in the enemy camp, ten other pieces
    there; points: rook/bishop class 5, others 1, camp and hand) under csa27 / jsa24."""
    board, side, hands, _ = parse_sfen(sfen)
    black = side == "b"
    camp = (1, 2, 3) if black else (7, 8, 9)
    kf, kr = king_square(board, black)
    if kr not in camp or cshogi.Board(sfen).is_check():
        return "ongoing"
    mine = [p for (f, r), p in board.items() if r in camp and p.lstrip("+").isupper() == black and p.upper() != "K"]
    if len(mine) < 10:
        return "ongoing"
    points = sum(5 if p.lstrip("+").upper() in "BR" else 1 for p in mine)
    points += sum(n * (5 if c.upper() in "BR" else 1) for c, n in hands.items() if c.isupper() == black)
    if rule == "csa27":
        return "declaration_win" if points >= (28 if black else 27) else "ongoing"
    if rule == "jsa24":
        return "declaration_win" if points >= 31 else "declaration_draw" if points >= 24 else "ongoing"
    raise ValueError(rule)


def king_entered(board: dict, black: bool) -> bool:
    """Whether the king stands in its promotion zone (ranks a-c for Black, g-i for White)."""
    return king_square(board, black)[1] in ((1, 2, 3) if black else (7, 8, 9))


def expected_try_status(sfen: str, legal: set, unconditional: bool = False) -> str:
    """The Try rule as the seeds word it: once both kings have entered their promotion zones, the
    side that first brings its king to the enemy king's starting square wins (5a for Black, 5i for
    White). `unconditional`: the variant without the condition on the kings."""
    board, side, _, _ = parse_sfen(sfen)
    black = side == "b"
    if king_square(board, not black) == ((5, 9) if black else (5, 1)) and (unconditional or king_entered(board, black)):
        return "try_loss"
    if not legal:
        return "checkmate"
    kf, kr = king_square(board, black)
    target = (5, 1) if black else (5, 9)
    step = max(abs(kf - target[0]), abs(kr - target[1])) == 1 and square_name(kf, kr) + square_name(*target) in legal
    if step and (unconditional or king_entered(board, not black)):
        return "declaration_win"
    return "ongoing"


def expected_jishogi_status(sfen: str, legal: set) -> str:
    """Jishogi by agreement with the professional count, adjudicated once both kings have entered:
    every piece on the board and in hand, rook and bishop 5, others 1; fewer than 24 loses,
    otherwise a draw (both short: a draw)."""
    board, side, hands, _ = parse_sfen(sfen)
    black = side == "b"
    if not legal:
        return "checkmate"
    if not (king_entered(board, True) and king_entered(board, False)):
        return "ongoing"

    def points(of_black: bool) -> int:
        on_board = [p.lstrip("+") for p in board.values() if p.lstrip("+").isupper() == of_black and p.upper() != "K"]
        total = sum(5 if p.upper() in "BR" else 1 for p in on_board)
        return total + sum(n * (5 if c.upper() in "BR" else 1) for c, n in hands.items() if c.isupper() == of_black)

    mine, theirs = points(black) < 24, points(not black) < 24
    return "jishogi_win" if theirs and not mine else "jishogi_loss" if mine and not theirs else "jishogi_draw"


def test_random_placements_match_cshogi():
    rng = random.Random(77)
    sfens = []
    while len(sfens) < 20_000:
        sfen = random_placement(rng)
        if sfen is not None:
            sfens.append(sfen)
    lines = [f"sfen {s}" for s in sfens]
    # The other impasse rules on part of the positions only: the legal moves are the same.
    subset = 8_000
    rules = ("csa27", "jsa24", "try", "try-unconditional", "jishogi", "none")
    answers = {rule: run_rules(lines if rule == "csa27" else lines[:subset], "--impasse", rule) for rule in rules}
    stats = {"in_check": 0, "only_king_moves_in_check": 0, "checkmate": 0, "uchifuzume": 0}
    statuses = {rule: {} for rule in answers}
    for i, sfen in enumerate(sfens):
        board = cshogi.Board(sfen)
        legal = usi_moves(board)
        a = answers["csa27"][i]
        assert "error" not in a, f"koma rejected sfen {sfen}: {a}"
        assert set(a["legal"]) == legal, mismatch(sfen, a["legal"], legal)
        assert a["legal"] == sorted(legal)
        assert a["in_check"] == board.is_check(), f"in_check: koma {a['in_check']}: sfen {sfen}"
        assert a["sfen"] == sfen == board.sfen(), f"SFEN: koma {a['sfen']!r}, cshogi {board.sfen()!r}, built {sfen!r}"
        # Impasse: our independent judgement must agree with cshogi's, and koma with both.
        csa = expected_impasse_status(sfen, "csa27")
        jsa = expected_impasse_status(sfen, "jsa24")
        assert (csa == "declaration_win") == board.is_nyugyoku(cshogi.LAW_27), f"cshogi disagrees (27): {sfen}"
        assert {"declaration_win": cshogi.NYUGYOKU_WIN, "declaration_draw": cshogi.NYUGYOKU_DRAW}.get(
            jsa, cshogi.NYUGYOKU_NONE
        ) == board.nyugyoku_result(cshogi.LAW_24), f"cshogi disagrees (24): {sfen}"
        want = {
            "csa27": "checkmate" if not legal else csa,
            "jsa24": "checkmate" if not legal else jsa,
            "try": expected_try_status(sfen, legal),
            "try-unconditional": expected_try_status(sfen, legal, unconditional=True),
            "jishogi": expected_jishogi_status(sfen, legal),
            "none": "checkmate" if not legal else "ongoing",
        }
        for rule, ans in answers.items():
            if i >= len(ans):
                continue
            assert ans[i]["status"] == want[rule], f"--impasse {rule}: koma {ans[i]['status']}, expected {want[rule]}: sfen {sfen}"
            statuses[rule][want[rule]] = statuses[rule].get(want[rule], 0) + 1
        stats["in_check"] += board.is_check()
        stats["checkmate"] += not legal
        stats["uchifuzume"] += not board.is_check() and is_uchifuzume_position(sfen, legal)
        if board.is_check():
            king = square_name(*king_square(parse_sfen(sfen)[0], sfen.split()[1] == "b"))
            stats["only_king_moves_in_check"] += bool(legal) and all(m.startswith(king) for m in legal)
    print(f"\ncompared {len(sfens)} random placements with cshogi: {stats}; statuses {statuses}")
    assert stats["in_check"] >= 3000 and stats["checkmate"] >= 100 and stats["uchifuzume"] >= 60
    assert statuses["try-unconditional"].get("try_loss", 0) >= 50 and statuses["try-unconditional"].get("declaration_win", 0) >= 50
    assert statuses["try"].get("try_loss", 0) >= 5 and statuses["try"].get("declaration_win", 0) >= 5
    assert statuses["try"].get("try_loss", 0) < statuses["try-unconditional"].get("try_loss", 0)
    assert sum(statuses["jishogi"].get(s, 0) for s in ("jishogi_win", "jishogi_loss", "jishogi_draw")) >= 50


# ---------------------------------------------------------------------------------------------
# 3. Repetition and perpetual check, judged independently from cshogi's positions
# ---------------------------------------------------------------------------------------------


def rotate_square(sq: str) -> str:
    return f"{10 - int(sq[0])}{RANK_LETTERS[8 - RANK_LETTERS.index(sq[1])]}"


def rotate_move(m: str) -> str:
    """The same move seen from the other side (board turned 180 degrees)."""
    if m[1] == "*":
        return m[:2] + rotate_square(m[2:4])
    return rotate_square(m[0:2]) + rotate_square(m[2:4]) + m[4:]


def rotate_position(sfen: str) -> str:
    """The board turned 180 degrees with the colours swapped: the same position for the other side."""
    board, side, hands, number = parse_sfen(sfen)
    turned = {(10 - f, 10 - r): p.swapcase() for (f, r), p in board.items()}
    return board_to_sfen(turned, "w" if side == "b" else "b", {c.swapcase(): n for c, n in hands.items()}, number)


def reverse_move(m: str) -> str:
    return m[2:4] + m[0:2]


def history_cases(root: str, moves: list):
    """One (line, expectation) per ply of the game `root` + `moves` (including the root itself),
    with the status computed here from cshogi's positions."""
    board = cshogi.Board(root)
    keys, hashes, checks = [position_key(board.sfen())], [board.zobrist_hash()], [board.is_check()]
    cases = []
    for k in range(len(moves) + 1):
        if k:
            move = board.move_from_usi(moves[k - 1])
            assert move and board.is_legal(move), f"test bug: {moves[k - 1]} illegal after {moves[:k - 1]} from {root}"
            board.push(move)
            keys.append(position_key(board.sfen()))
            hashes.append(board.zobrist_hash())
            checks.append(board.is_check())
        # The oracle's hash and our key must agree on which positions are the same.
        assert [h == hashes[-1] for h in hashes] == [key == keys[-1] for key in keys]
        legal = usi_moves(board)
        sfen = board.sfen()
        e = {
            "legal": legal,
            "in_check": board.is_check(),
            "sfen": sfen,
            "repetition": expected_repetition(keys, checks),
            "plies": int(sfen.split()[3]) - 1,
            "nyugyoku": bool(legal) and board.is_nyugyoku(),
        }
        line = f"sfen {root}" + (" moves " + " ".join(moves[:k]) if k else "")
        cases.append((line, e))
    return cases


def check_history_cases(cases, *args, counts=None):
    answers = run_rules([line for line, _ in cases], *args)
    for (line, e), a in zip(cases, answers):
        assert "error" not in a, f"{line}: {a}"
        assert set(a["legal"]) == e["legal"], mismatch(e["sfen"], a["legal"], e["legal"])
        assert a["in_check"] == e["in_check"] and a["sfen"] == e["sfen"], line
        want = expected_status(e)
        assert a["status"] == want, f"status: koma {a['status']}, expected {want}: {line}"
        if counts is not None:
            counts[want] = counts.get(want, 0) + 1
    return answers


def find_cycle(rng: random.Random, board, checking: bool, tries: int = 12):
    """Moves A, B, A', B' from the current position that come back to it, A' and B' undoing A and B
    (no captures, drops or promotions). With `checking`, A and A' must both give check. None when
    nothing is found."""
    start = position_key(board.sfen())

    def reversible(moves):
        out = [m for m in moves if not cshogi.move_is_drop(m) and not cshogi.move_cap(m) and not cshogi.move_is_promotion(m)]
        rng.shuffle(out)
        return out

    for a in reversible(list(board.legal_moves))[:tries]:
        board.push(a)
        if checking and not board.is_check():
            board.pop()
            continue
        for b in reversible(list(board.legal_moves))[:tries]:
            board.push(b)
            ua, ub = reverse_move(cshogi.move_to_usi(a)), reverse_move(cshogi.move_to_usi(b))
            found = None
            if ua in usi_moves(board):
                board.push_usi(ua)
                if (not checking or board.is_check()) and ub in usi_moves(board):
                    board.push_usi(ub)
                    if position_key(board.sfen()) == start:
                        found = [cshogi.move_to_usi(a), cshogi.move_to_usi(b), ua, ub]
                    board.pop()
                board.pop()
            board.pop()
            if found:
                board.pop()
                return found
        board.pop()
    return None


def test_repetition_and_perpetual_check():
    counts = {}
    cases = []
    # Kings shuffling from the start: the start position's 4th occurrence (ply 12) is a draw.
    shuffle = ["5i5h", "5a5b", "5h5i", "5b5a"]
    cases += history_cases(STARTPOS, shuffle * 5)
    # A rook checking on every move while the king shuffles: at the 4th occurrence the checker
    # (to move at plies 0, 4, 8, 12) loses, and the checked side (plies 13, 17) wins.
    rook = "8k/9/9/9/9/9/9/7R1/K8 b - 1"
    perpetual = ["2h1h", "1a2a", "1h2h", "2a1a"]
    quiet = ["9i9h", "1a1b", "9h9i", "1b1a"]
    # The rook checks only every other move: a plain draw.
    half = ["3h1h", "1a2a", "1h3h", "2a1a"]
    sequences = [
        (rook, perpetual * 5),
        (rook, quiet + perpetual * 4),  # counted from the first occurrence, which precedes the checks
        (rook, perpetual + quiet + perpetual * 3),
        ("8k/9/9/9/9/9/9/6R2/K8 b - 1", half * 5),
        (rook, ["9i8i", "1a1b", "8i9i", "1b1a"] + perpetual * 4),
    ]
    for root, moves in sequences:
        cases += history_cases(root, moves)
        cases += history_cases(rotate_position(root), [rotate_move(m) for m in moves])
    expected_hand_built = {"repetition_draw", "perpetual_check_win", "perpetual_check_loss"}
    check_history_cases(cases, counts=counts)
    assert expected_hand_built <= counts.keys(), counts

    # Random cycles from random positions, quiet or checking, in random orders.
    rng = random.Random(4242)
    cases = []
    found = {"quiet": 0, "checking": 0}
    roots = 0
    while (found["checking"] < 60 or found["quiet"] < 150) and roots < 5000:
        root = random_placement(rng)
        if root is None:
            continue
        roots += 1
        board = cshogi.Board(root)
        prefix = []
        for _ in range(rng.randint(0, 3)):
            moves = list(board.legal_moves)
            if not moves:
                break
            m = rng.choice(moves)
            prefix.append(cshogi.move_to_usi(m))
            board.push(m)
        check_cycle = find_cycle(rng, board, checking=True)
        quiet_cycle = find_cycle(rng, board, checking=False)
        cycles = [c for c in (check_cycle, quiet_cycle) if c]
        if not cycles:
            continue
        found["checking"] += check_cycle is not None
        found["quiet"] += quiet_cycle is not None
        pattern = [rng.choice(cycles) for _ in range(rng.randint(4, 5))]
        if check_cycle and rng.random() < 0.5:
            pattern = [check_cycle] * rng.randint(4, 5)
        moves = prefix + [m for cycle in pattern for m in cycle]
        # Sometimes stop in the middle of the last cycle.
        cases += history_cases(root, moves[: len(moves) - rng.randint(0, 3)])
    check_history_cases(cases, counts=counts)
    print(f"\nrepetition: {len(cases)} random-cycle positions from {roots} roots, cycles found {found}; statuses {counts}")
    assert found["checking"] >= 60 and found["quiet"] >= 150
    assert counts["perpetual_check_win"] >= 40 and counts["perpetual_check_loss"] >= 40 and counts["repetition_draw"] >= 200


def ply_checks(line: str) -> dict:
    """For a USI position line: {ply: whether that ply gave check} for the plies whose result is
    seen (the root, i.e. the move that led to it, and every move after it), replayed by cshogi."""
    words = line.split()
    if words[0] == "position":
        words = words[1:]
    if words[0] == "startpos":
        board, rest = cshogi.Board(), words[1:]
    else:
        end = words.index("moves") if "moves" in words else len(words)
        board, rest = cshogi.Board(" ".join(words[1:end])), words[end:]
    root = int(board.sfen().split()[3]) - 1
    seen = {root: board.is_check()}
    for i, usi in enumerate(rest[1:], start=1):
        board.push_usi(usi)
        seen[root + i] = board.is_check()
    return seen


def expected_move_limit(checks: dict, plies: int, limit: int, rule: str) -> bool:
    """Whether the game is over by the move limit, as the rules word it. draw: once `limit` plies
    are played. checks (JSA): drawn after the move at the limit unless it is a check; then play goes
    on while every move of the checking side (plies limit, limit + 2, ...) is a check, and is drawn
    at the first one that is not. Plies not seen (before the position was set up) count as checks."""
    if plies < limit:
        return False
    if rule == "draw":
        return True
    return any(not checks.get(ply, True) for ply in range(limit, plies + 1, 2))


def test_move_limit_variants():
    """--max-plies with both --max-moves-rule variants, on games from the playouts."""
    cases = []
    for line, e in generate_playout_cases(seed=99, games_per_start=1, max_game_plies=60)[:400]:
        if " moves " in line or e["plies"] == 0:
            cases.append((line, e))
    rng = random.Random(5)
    for _ in range(200):
        # Positions given with a move number, and no history.
        sfen = random_placement(rng)
        if sfen is None:
            continue
        board = cshogi.Board(sfen)
        cases.append((f"sfen {sfen}", {"legal": usi_moves(board), "in_check": board.is_check(), "sfen": sfen,
                                       "repetition": None, "plies": int(sfen.split()[3]) - 1, "nyugyoku": board.is_nyugyoku()}))
    checks = [ply_checks(line) for line, _ in cases]
    seen = set()
    for limit in (20, 56, 57):
        for rule in ("draw", "checks"):
            answers = run_rules([line for line, _ in cases], "--max-plies", str(limit), "--max-moves-rule", rule)
            for (line, e), c, a in zip(cases, checks, answers):
                want = expected_status(e) if e["plies"] < MAX_PLIES else "max_moves_draw"
                if want in ("ongoing", "declaration_win") and expected_move_limit(c, e["plies"], limit, rule):
                    want = "max_moves_draw"
                assert a["status"] == want, f"--max-plies {limit} --max-moves-rule {rule}: koma {a['status']}, expected {want}: {line}"
                seen.add((rule, want, e["in_check"]))
    assert ("draw", "max_moves_draw", True) in seen and ("checks", "ongoing", True) in seen
    assert ("checks", "max_moves_draw", False) in seen and ("draw", "ongoing", False) in seen


def play_checking_game(rng: random.Random, plies: int, check_rate: float) -> list:
    """A random game from the start position whose moves are checks whenever possible with
    probability `check_rate`: long series of checks. Returns the USI moves; stops at mate."""
    board, moves = cshogi.Board(), []
    for _ in range(plies):
        legal = list(board.legal_moves)
        if not legal:
            break
        checking = []
        for m in legal:
            board.push(m)
            if board.is_check():
                checking.append(m)
            board.pop()
        m = rng.choice(checking) if checking and rng.random() < check_rate else rng.choice(legal)
        board.push(m)
        moves.append(cshogi.move_to_usi(m))
    return moves


def test_jsa_move_limit_plays_on_while_the_checks_go_on():
    """The JSA move limit on games full of check series: every prefix of every game, at several
    limits, judged from cshogi's check flags against the rule's wording; the plain rule beside it."""
    rng = random.Random(17)
    games = [play_checking_game(rng, 90, 0.8) for _ in range(40)]
    lines, plies = [], []
    for moves in games:
        for k in range(len(moves) + 1):
            lines.append("startpos moves " + " ".join(moves[:k]) if k else "startpos")
            plies.append(k)
    checks = [ply_checks(line) for line in lines]
    seen = {}
    for limit in (1, 10, 31, 60):
        for rule in ("checks", "draw"):
            answers = run_rules(lines, "--max-plies", str(limit), "--max-moves-rule", rule, "--impasse", "none")
            for line, p, c, a in zip(lines, plies, checks, answers):
                if a["status"] not in ("ongoing", "max_moves_draw"):
                    # Mate or repetition end the game first; they are checked elsewhere.
                    assert a["status"] in ("checkmate", "repetition_draw", "perpetual_check_win", "perpetual_check_loss"), a
                    continue
                want = "max_moves_draw" if expected_move_limit(c, p, limit, rule) else "ongoing"
                assert a["status"] == want, f"--max-plies {limit} --max-moves-rule {rule}: koma {a['status']}, expected {want}: {line}"
                if rule == "checks" and p > limit:
                    seen[want] = seen.get(want, 0) + 1
                    # After the checked side's reply within a series, the game goes on.
                    if (p - limit) % 2 == 1 and all(c[q] for q in range(limit, p, 2)):
                        assert a["status"] == "ongoing", line
    print(f"\nJSA move limit: {seen}")
    assert seen.get("ongoing", 0) >= 100 and seen.get("max_moves_draw", 0) >= 100


# ---------------------------------------------------------------------------------------------
# 4. Impasse declaration around the thresholds
# ---------------------------------------------------------------------------------------------


def impasse_details(sfen: str):
    """(king in camp, pieces in camp besides the king, points) for the side to move."""
    board, side, hands, _ = parse_sfen(sfen)
    black = side == "b"
    camp = (1, 2, 3) if black else (7, 8, 9)
    in_camp = king_square(board, black)[1] in camp
    mine = [p for (f, r), p in board.items() if r in camp and p.lstrip("+").isupper() == black and p.upper() != "K"]
    points = sum(5 if p.lstrip("+").upper() in "BR" else 1 for p in mine)
    points += sum(n * (5 if c.upper() in "BR" else 1) for c, n in hands.items() if c.isupper() == black)
    return in_camp, len(mine), points


def declaration_position(rng: random.Random):
    """A Black-to-move position with Black's king (usually) in the enemy camp and piece counts and
    points near the declaration thresholds; sometimes Black is in check. None if invalid."""
    board = {}
    king = (rng.randint(1, 9), rng.choice([1, 2, 3, 3, 4]) if rng.random() < 0.1 else rng.randint(1, 3))
    board[king] = "K"
    pool = list(FULL_SET)
    rng.shuffle(pool)
    n_camp = rng.choice([8, 9, 9, 10, 10, 10, 11, 12, 14])
    target = rng.choice([22, 23, 24, 24, 26, 27, 27, 28, 28, 29, 30, 30, 31, 31, 32, 35])
    big_camp = rng.choice([0, 0, 1, 1, 2, 3, 4])
    bigs = [p for p in pool if p in "BR"]
    smalls = [p for p in pool if p not in "BR"]
    camp_squares = [(f, r) for f in range(1, 10) for r in (1, 2, 3) if (f, r) != king]
    rng.shuffle(camp_squares)
    pawn_files = set()

    def place(letter, sq, white=False):
        promoted = letter in PROMOTABLE and (rng.random() < 0.3 or is_dead(letter, not white, sq[1]))
        if letter == "P" and not promoted:
            if (white, sq[0]) in pawn_files:
                promoted = True
            else:
                pawn_files.add((white, sq[0]))
        p = ("+" if promoted else "") + letter
        board[sq] = p.lower() if white else p

    for _ in range(min(big_camp, n_camp)):
        place(bigs.pop(), camp_squares.pop())
    for _ in range(n_camp - min(big_camp, n_camp)):
        place(smalls.pop(), camp_squares.pop())
    hands = {}
    rest = max(target - impasse_details(board_to_sfen(board, "b", {}))[2], 0)
    while bigs and rest >= 5 and rng.random() < 0.7:
        c = bigs.pop()
        hands[c] = hands.get(c, 0) + 1
        rest -= 5
    while smalls and rest > 0:
        c = smalls.pop()
        hands[c] = hands.get(c, 0) + 1
        rest -= 1
    # Black pieces outside the camp do not count.
    outside = [(f, r) for f in range(1, 10) for r in range(4, 10) if (f, r) != king]
    rng.shuffle(outside)
    for _ in range(rng.randint(0, 3)):
        if smalls:
            place(smalls.pop(), outside.pop())
    # White: its king far away, a few pieces, the rest in hand; sometimes a checker.
    while True:
        wk = outside.pop()
        if max(abs(wk[0] - king[0]), abs(wk[1] - king[1])) > 1:
            break
    board[wk] = "k"
    for _ in range(rng.randint(0, 3)):
        if smalls:
            place(smalls.pop(), outside.pop(), white=True)
    if rng.random() < 0.25 and (smalls or bigs):
        # A white gold-mover right above or beside Black's king gives check.
        spots = [(king[0], king[1] - 1), (king[0] - 1, king[1]), (king[0] + 1, king[1])]
        spots = [sq for sq in spots if 1 <= sq[0] <= 9 and 1 <= sq[1] <= 9]
        sq = rng.choice(spots)
        board[sq] = "g"  # may replace a black piece; the piece count changes, which is fine
    for c in smalls + bigs:
        hands[c.lower()] = hands.get(c.lower(), 0) + 1
    pieces_total = {}
    for p in list(board.values()) + [c * n for c, n in hands.items()]:
        for c in p.lstrip("+"):
            pieces_total[c.upper()] = pieces_total.get(c.upper(), 0) + 1
    if any(pieces_total.get(c, 0) > FULL_SET.count(c) for c in "PLNSGBR"):
        return None  # the extra white gold: drop the position rather than fix it
    sfen = board_to_sfen(board, "b", hands)
    return None if side_not_to_move_in_check(sfen) else sfen


def test_declaration_thresholds():
    rng = random.Random(2727)
    sfens = []
    while len(sfens) < 6000:
        sfen = declaration_position(rng)
        if sfen is None:
            continue
        sfens.append(sfen)
        sfens.append(rotate_position(sfen))  # the same for White, whose threshold is lower
    lines = [f"sfen {s}" for s in sfens]
    answers = {rule: run_rules(lines, "--impasse", rule) for rule in ("csa27", "jsa24")}
    seen = {}
    for i, sfen in enumerate(sfens):
        board = cshogi.Board(sfen)
        legal = usi_moves(board)
        csa, jsa = expected_impasse_status(sfen, "csa27"), expected_impasse_status(sfen, "jsa24")
        # cshogi's judgement (LAW_27 = CSA: 28 Black / 27 White; LAW_24) must agree with ours.
        assert (csa == "declaration_win") == board.is_nyugyoku(cshogi.LAW_27), f"cshogi disagrees (27): {sfen}"
        assert (jsa == "declaration_win") == board.is_nyugyoku(cshogi.LAW_24), f"cshogi disagrees (24): {sfen}"
        assert {"declaration_win": cshogi.NYUGYOKU_WIN, "declaration_draw": cshogi.NYUGYOKU_DRAW}.get(
            jsa, cshogi.NYUGYOKU_NONE
        ) == board.nyugyoku_result(cshogi.LAW_24), f"cshogi disagrees (24): {sfen}"
        for rule, want in (("csa27", csa), ("jsa24", jsa)):
            a = answers[rule][i]
            assert "error" not in a, f"{sfen}: {a}"
            if not legal:
                want = "checkmate"
            assert a["status"] == want, f"--impasse {rule}: koma {a['status']}, expected {want}: sfen {sfen}"
        assert set(answers["csa27"][i]["legal"]) == legal, mismatch(sfen, answers["csa27"][i]["legal"], legal)
        in_camp, n, points = impasse_details(sfen)
        key = (sfen.split()[1], in_camp, min(n, 10), points, board.is_check())
        seen[key] = seen.get(key, 0) + 1
    # Every threshold must have been probed from both sides, for both colours.
    for side in "bw":
        for points in (23, 24, 26, 27, 28, 30, 31):
            assert seen.get((side, True, 10, points, False)), f"no {side} position with 10 pieces and {points} points"
        assert any(k[:3] == (side, True, 9) and k[3] >= 31 and not k[4] for k in seen), "9 pieces, enough points"
        assert any(k[:3] == (side, True, 10) and k[3] >= 31 and k[4] for k in seen), "in check"
        assert any(k[:2] == (side, False) and k[2] >= 10 and k[3] >= 31 for k in seen), "king outside the camp"
    print(f"\ndeclaration: {len(sfens)} positions, {len(seen)} distinct (side, camp, pieces, points, check) cases")


# ---------------------------------------------------------------------------------------------
# 5. Bad input: one error line per bad line, and the process goes on
# ---------------------------------------------------------------------------------------------

K = "4k4/9/9/9/9/9/9/9/4K4"  # bare kings
BAD_SFENS = [
    "",  # no fields
    "b - 1",
    f"{K} b",  # too few fields
    f"{K} b - 1 extra",  # too many fields (before any 'moves')
    "9/9/9/9/9/9/9/9 b - 1",  # 8 ranks
    f"{K}/9 b - 1",  # 10 ranks
    "4k5/9/9/9/9/9/9/9/4K4 b - 1",  # rank of 10 files
    "4k3/9/9/9/9/9/9/9/4K4 b - 1",  # rank of 8 files
    "4k4P/9/9/9/9/9/9/9/4K4 b - 1",  # piece past file 1
    "4k4/9/9/9/9/9/9/9/4K4/ b - 1",
    "4k4/0/9/9/9/9/9/9/4K4 b - 1",  # digit 0
    "4k4/9/9/9/9/9/9/9/4X4 b - 1",  # unknown letter
    "4k4/9/9/9/9/9/9/9/4K3+ b - 1",  # dangling '+'
    "4k4/9/4+G4/9/9/9/9/9/4K4 b - 1",  # promoted gold
    "4k4/9/4+K4/9/9/9/9/9/4K4 b - 1",  # promoted king
    "4k4/9/4++P3/9/9/9/9/9/4K4 b - 1",
    "4k4/9/4+3P/9/9/9/9/9/4K4 b - 1",  # '+' before a digit
    f"{K} x - 1",  # side
    f"{K} B - 1",
    f"{K} - b 1",
    f"{K} b K 1",  # king in hand
    f"{K} b k 1",
    f"{K} b 3 1",  # count without piece
    f"{K} b 0P 1",
    f"{K} b 4R 1",  # more rooks in one hand than koma can store
    f"{K} b 32P 1",
    # More pieces of a kind than koma can store (3 rooks/bishops, 31 pawns, 7 of the rest; it
    # accepts more than a shogi set has, for published perft positions).
    "4k4/9/9/9/9/9/9/9/RR2K4 b 2R 1",
    "4k4/9/9/9/9/9/9/9/2B1K4 b 2Bb 1",
    "4k4/9/9/9/9/9/PPPPPPPPP/9/4K4 b 12P11p 1",
    "4k4/9/9/9/9/9/9/9/4K4 b 4G4g 1",
    f"{K} b PP 1",  # letter repeated
    f"{K} b 2P3P 1",
    f"{K} b P- 1",
    f"{K} b X 1",
    f"{K} b - 0",  # move number
    f"{K} b - -1",
    f"{K} b - x",
    f"{K} b - 1.5",
    f"{K} b - 99999999999999999999",
    "9/9/9/9/9/9/9/9/4K4 b - 1",  # white king missing
    "4k4/9/9/9/9/9/9/9/9 b - 1",  # black king missing
    "3kk4/9/9/9/9/9/9/9/4K4 b - 1",  # two white kings
    "4k4/9/9/9/9/9/9/9/3KK4 b - 1",
    "P3k4/9/9/9/9/9/9/9/4K4 b - 1",  # black pawn on rank a
    "L3k4/9/9/9/9/9/9/9/4K4 b - 1",
    "4k4/N8/9/9/9/9/9/9/4K4 b - 1",  # black knight on rank b
    "4k4/9/9/9/9/9/9/9/p3K4 b - 1",  # white pawn on rank i
    "4k4/9/9/9/9/9/9/n8/4K4 b - 1",  # white knight on rank h
    "4k4/9/9/9/9/9/9/9/l3K4 b - 1",
    "4k4/9/P8/9/P8/9/9/9/4K4 b - 1",  # nifu
    "4k4/9/p8/9/p8/9/9/9/4K4 b - 1",
    "4k4/4R4/9/9/9/9/9/9/4K4 b - 1",  # White (not to move) is in check
    "4k4/9/9/9/9/9/9/4r4/4K4 w - 1",  # Black (not to move) is in check
    "4k4/9/9/9/9/9/9/9/4K4 b - 1 moves",  # not an error itself: handled below
]
BAD_LINES = [
    "",
    " ",
    "\t",
    "position",
    "position position startpos",
    "startpos2",
    "Startpos",
    "sfen",
    "sfen startpos",
    "startpos 7g7f",
    "startpos move 7g7f",
    "startpos moves 7g7",
    "startpos moves 7g7f7",
    "startpos moves 7g7f+ ",
    "startpos moves p*5e",
    "startpos moves K*5e",
    "startpos moves P*5e",  # no pawn in hand
    "startpos moves 0a1a",
    "startpos moves 7j7f",
    "startpos moves 5e5e",
    "startpos moves 7g7f 7g7f",
    "startpos moves 3c3d",  # White's piece, Black to move
    "startpos moves 5i4i",  # onto own piece
    "startpos moves 8h2b",  # through pieces
    "startpos moves 6i5h+",  # gold promotes
    "startpos moves 5i5h+",
    "startpos moves 7g7f 3c3d 8h2b+ 3a2b B*3c 2b3c B*5e P*5e",
    "sfen 4k4/9/9/9/9/9/4P4/9/4K4 b P 1 moves P*5e",  # nifu
    "sfen 4k4/9/9/9/9/9/9/9/4K4 b P 1 moves P*1a",  # dead square
    "sfen 4k4/9/9/9/9/9/9/9/4K4 b L 1 moves L*1a",
    "sfen 4k4/9/9/9/9/9/9/9/4K4 b N 1 moves N*1b",
    "sfen 4k4/9/9/9/9/9/9/9/4K4 w p 1 moves P*1i",
    "sfen 4k4/9/9/9/9/9/9/9/4K4 w n 1 moves N*1h",
    "sfen kn7/9/1G7/9/9/9/9/9/4K4 b P 1 moves P*9b",  # pawn-drop mate
    "sfen 4k4/P8/9/9/9/9/9/9/4K4 b - 1 moves 9b9a",  # pawn must promote
    "sfen 4k4/9/N8/9/9/9/9/9/4K4 b - 1 moves 9c8a",  # knight must promote
    "sfen 4k4/9/9/9/9/9/9/9/4K4 b - 1 moves 5i5h+",
    "sfen 4k4/4r4/9/9/9/9/9/9/4K4 b - 1 moves 9i9h",  # no king there
    "sfen 4k4/4r4/9/9/9/9/9/4G4/4K4 b - 1 moves 5h6g",  # the pinned gold leaves the file diagonally
    "sfen 4k4/4r4/9/9/9/9/9/9/4K4 b G 1 moves G*1a",  # a drop that ignores the check
    "sfen 4k4/4r4/9/9/9/9/9/4G4/4K4 b - 1 moves 5h4h",  # pinned gold leaves the file
    "sfen 4k4/4r4/9/9/9/9/9/9/4K4 b - 1 moves 5i5h",  # king walks along the rook's file
    "sfen 4k4/9/9/9/9/9/9/9/4K4 b - 1 moves 5i5h 5a5b 5h5g 5b5c 5g5f 5c5d 5f5e 5d5e",
]


def test_bad_lines_answer_errors_and_the_process_goes_on():
    rng = random.Random(31337)
    bad = [f"sfen {s}".encode() for s in BAD_SFENS if not s.endswith("moves")] + [l.encode() for l in BAD_LINES]
    # Lines that are legal after all (checked below as good lines): a bare 'moves', a king
    # stepping out of a check.
    good = [
        (f"sfen {K} b - 1 moves", f"{K} b - 1"),
        ("sfen 4k4/4r4/9/9/9/9/9/9/4K4 b - 1 moves 5i6h", "4k4/4r4/9/9/9/9/9/3K5/9 w - 2"),
        ("startpos\r", STARTPOS),
        ("  position   startpos   moves   7g7f  ", "lnsgkgsnl/1r5b1/ppppppppp/9/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w - 2"),
    ]
    for _ in range(300):
        n = rng.choice([1, 2, 5, 20, 200, 3000])
        bad.append(bytes(rng.choice([b for b in range(256) if b != 10]) for _ in range(n)))
    bad.append(b"\xff\xfe startpos")
    bad.append(b"startpos moves 7g7f \xff")
    bad.append(b"sfen " + b"P" * 1_000_000)
    bad.append(b"x" * 2_000_000)
    bad.append(b"startpos moves " + b"7g7f " * 100_000)  # illegal at the second move
    bad.append(b"sfen " + K.encode() + b" b " + b"9" * 10_000 + b"P 1")
    bad.append(b"sfen " + K.encode() + b" b - " + b"9" * 10_000)
    bad.append(b"startpos moves " + b"5i5h 5a5b 5h5i 5b5a " * 20_000 + b"5i5i")
    # A huge good line: 3,000 plies of king shuffles; the 4th occurrence has long passed, and
    # repetition takes precedence over the move limit.
    huge = "startpos moves " + " ".join(["5i5h", "5a5b", "5h5i", "5b5a"] * 750)
    good.append((huge, STARTPOS.replace(" 1", " 3001")))
    # Ordinary positions between the bad lines, so that any misalignment shows.
    plain = [(line, e["sfen"]) for line, e in generate_playout_cases(seed=8, games_per_start=1, max_game_plies=40)]
    lines, expect = [], []
    for b in bad:
        lines.append(b)
        expect.append(None)
        line, sfen = rng.choice(plain + good)
        lines.append(line.encode())
        expect.append(sfen)
    answers = run_rules(lines, timeout=600)
    for line, e, a in zip(lines, expect, answers):
        shown = line[:200]
        if e is None:
            assert set(a) == {"error"} and isinstance(a["error"], str) and a["error"], f"{shown!r} -> {a}"
        else:
            assert "error" not in a and a["sfen"] == e, f"{shown!r}: expected sfen {e}, got {a}"
    huge_answer = answers[lines.index(huge.encode())] if huge.encode() in lines else run_rules([huge])[0]
    assert huge_answer["status"] == "repetition_draw"
    # No final newline: the last line still gets its answer.
    proc = subprocess.run([koma_bin(), "rules"], input=b"garbage\nstartpos", capture_output=True, timeout=60)
    out = proc.stdout.decode().splitlines()
    assert proc.returncode == 0 and len(out) == 2 and "error" in json.loads(out[0]) and json.loads(out[1])["sfen"] == STARTPOS
    # Bad options are refused up front.
    for args in (["--impasse", "bogus"], ["--max-moves-rule", "sometimes"], ["--max-plies", "-1"]):
        proc = subprocess.run([koma_bin(), "rules", *args], input=b"startpos\n", capture_output=True, timeout=60)
        assert proc.returncode != 0, args

"""Shared by the cshogi oracle tests: koma's start positions by KIF name, and random games with
some life in them (mates, captures, promotions, drops), played by cshogi."""

from __future__ import annotations

import random

import cshogi

# koma's twelve classic handicaps (Handicap::ALL less right-lance, three-piece, five-piece,
# left-five-piece and the seven-piece starts, which test_rules_cli.py checks against cshogi's KIF
# table), the even game first: KIF name (手合割) → start SFEN.
HANDICAPS = {
    "平手": "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1",
    "香落ち": "lnsgkgsn1/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "角落ち": "lnsgkgsnl/1r7/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "飛車落ち": "lnsgkgsnl/7b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "飛香落ち": "lnsgkgsn1/7b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "二枚落ち": "lnsgkgsnl/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "四枚落ち": "1nsgkgsn1/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "六枚落ち": "2sgkgs2/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "八枚落ち": "3gkg3/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "十枚落ち": "4k4/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
    "歩三兵": "4k4/9/9/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w 3p 1",
    "裸玉": "4k4/9/9/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
}


def play(board, rng: random.Random, plies: int, mate_rate: float = 0.3):
    """Plays up to `plies` random moves on `board` (stopping at the end of the game); returns them.
    With probability `mate_rate` a mate in one is played when there is one; half the other moves
    are captures, promotions or drops when there are any."""
    moves = []
    for _ in range(plies):
        if board.is_game_over():
            break
        # mate_move_in_1ply assumes the side to move is not in check.
        if rng.random() < mate_rate and not board.is_check():
            mate = board.mate_move_in_1ply()
            if mate:
                board.push(mate)
                moves.append(mate)
                continue
        legal = list(board.legal_moves)
        lively = [m for m in legal if cshogi.move_is_drop(m) or cshogi.move_is_promotion(m) or cshogi.move_cap(m)]
        m = rng.choice(lively) if lively and rng.random() < 0.5 else rng.choice(legal)
        board.push(m)
        moves.append(m)
    return moves

"""The rules choices and the notation of issue 17 through the koma binary: `koma show` in
Vietnamese and for every handicap, Hodges move text, `koma arena` under the run's rules, and
every handicap's KIF 手合割 read by cshogi (the oracle) to the same start position."""

import json
import subprocess

import cshogi
import cshogi.KIF
import pytest

from cshogi_games import HANDICAPS

# Every handicap of koma's Handicap::ALL: ASCII name → (KIF name, start SFEN).
ALL = {
    "even": ("平手", HANDICAPS["平手"]),
    "lance": ("香落ち", HANDICAPS["香落ち"]),
    "right-lance": ("右香落ち", "1nsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"),
    "bishop": ("角落ち", HANDICAPS["角落ち"]),
    "rook": ("飛車落ち", HANDICAPS["飛車落ち"]),
    "rook-lance": ("飛香落ち", HANDICAPS["飛香落ち"]),
    "two-piece": ("二枚落ち", HANDICAPS["二枚落ち"]),
    "three-piece": ("三枚落ち", "lnsgkgsn1/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"),
    "four-piece": ("四枚落ち", HANDICAPS["四枚落ち"]),
    "five-piece": ("五枚落ち", "2sgkgsn1/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"),
    "left-five-piece": ("左五枚落ち", "1nsgkgs2/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"),
    "six-piece": ("六枚落ち", HANDICAPS["六枚落ち"]),
    "left-seven-piece": ("左七枚落ち", "2sgkg3/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"),
    "right-seven-piece": ("右七枚落ち", "3gkgs2/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"),
    "eight-piece": ("八枚落ち", HANDICAPS["八枚落ち"]),
    "ten-piece": ("十枚落ち", HANDICAPS["十枚落ち"]),
    "three-pawns": ("歩三兵", HANDICAPS["歩三兵"]),
    "naked-king": ("裸玉", HANDICAPS["裸玉"]),
}
# cshogi 1.1.0's KIF reader knows every 手合割 but these.
NOT_IN_CSHOGI_KIF = {"歩三兵", "裸玉", "左七枚落ち", "右七枚落ち"}


def failing(koma_bin, *args, stdin=""):
    proc = subprocess.run([koma_bin, *args], input=stdin, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0, f"koma {' '.join(args)} should fail"
    assert "panicked" not in proc.stderr and "error" in proc.stderr, proc.stderr
    return proc.stderr


def test_every_handicap_by_name_and_in_kif(koma, tmp_path):
    for name, (kif_name, sfen) in ALL.items():
        shown = koma("show", "--handicap", name).stdout
        assert f"SFEN: {sfen}" in shown, (name, shown)
        assert f"SFEN: {sfen}" in koma("show", "--handicap", kif_name).stdout
        # A short game from the start, written as KIF by koma: the 手合割 line names the handicap
        # and cshogi reads it to the same start.
        board = cshogi.Board(sfen)
        moves = []
        for _ in range(6):
            m = sorted(cshogi.move_to_usi(m) for m in board.legal_moves)[0]
            board.push_usi(m)
            moves.append(m)
        usi = tmp_path / f"{name}.usi"
        usi.write_text(f"sfen {sfen} moves {' '.join(moves)}\n")
        kif = tmp_path / f"{name}.kifu"
        koma("convert", "--from", "usi", "--to", "kifu", str(usi), str(kif))
        text = kif.read_text()
        if name not in ("three-pawns", "naked-king"):
            assert f"手合割：{kif_name}" in text, text
        if kif_name not in NOT_IN_CSHOGI_KIF:
            parsed = cshogi.KIF.Parser.parse_file(str(kif))
            assert parsed.sfen == sfen, (name, parsed.sfen)
            # cshogi's own table: the same start for the name.
            assert cshogi.KIF.Parser.HANDYCAP_SFENS[kif_name] == sfen
            assert [cshogi.move_to_usi(m) for m in parsed.moves] == moves


def test_show_languages(koma, koma_bin):
    vi = koma("show", "--usi", "startpos moves 7g7f 3c3d 8h2b+", "--lang", "vi").stdout
    for name in ["thương", "mã", "bạc", "vàng", "vua", "Tốt", "+Tượng", "Xe"]:
        assert name in vi, vi
    assert "Trắng (hậu thủ) trên tay: Tượng" not in vi and "Đen (tiên thủ) trên tay: Tượng" in vi, vi
    ja = koma("show", "--handicap", "two-piece", "--lang", "ja").stdout
    assert "|v香v桂v銀v金v玉v金v銀v桂v香|一" in ja, ja
    assert "error" in failing(koma_bin, "show", "--handicap", "nine-piece")
    assert "error" in failing(koma_bin, "show", "--sfen", "startpos", "--lang", "xx")


def test_hodges_and_vietnamese_move_text(koma, koma_bin, tmp_path):
    usi = tmp_path / "g.usi"
    usi.write_text("startpos moves 7g7f 3c3d 8h2b+ 3a2b\n")
    hodges = koma("convert", "--from", "usi", "--to", "notation", "--style", "hodges", str(usi)).stdout
    assert hodges.splitlines() == ["1. P-7f P-3d", "2. Bx2b+ Sx2b"]
    two_piece = ALL["two-piece"][1]
    usi.write_text(f"sfen {two_piece} moves 3c3d 7g7f\n")
    hodges = koma("convert", "--from", "usi", "--to", "notation", "--style", "hodges", str(usi)).stdout
    assert hodges.splitlines() == ["1. ... P-3d", "2. P-7f"]
    names = koma("convert", "--from", "usi", "--to", "notation", "--style", "vietnamese-names", str(usi)).stdout
    assert names.split() == ["1", "Tốt-34", "2", "Tốt-76"]
    assert "hodges" in failing(koma_bin, "convert", "--from", "usi", "--to", "notation", "--style", "klingon", str(usi))


def rules_status(koma_bin, lines, *args):
    proc = subprocess.run([koma_bin, "rules", *args], input="".join(l + "\n" for l in lines), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(l)["status"] for l in proc.stdout.splitlines()]


def test_rules_options(koma_bin):
    # The JSA limit through the CLI: Black checks at plies 1, 3, 5 and stops at ply 7.
    moves = ["2h1h", "1a2a", "1h2h", "2a1a", "2h1h", "1a2a", "1h1g"]
    start = "sfen 8k/9/9/9/9/9/9/7R1/K8 b - 1"
    lines = [start] + [f"{start} moves {' '.join(moves[:k])}" for k in range(1, len(moves) + 1)]
    got = rules_status(koma_bin, lines, "--max-plies", "1", "--max-moves-rule", "checks")
    assert got == ["ongoing"] * 7 + ["max_moves_draw"], got
    got = rules_status(koma_bin, lines, "--max-plies", "1", "--max-moves-rule", "draw")
    assert got == ["ongoing"] + ["max_moves_draw"] * 7, got
    # Try: both kings must have entered; try-unconditional does not ask.
    try_lines = ["sfen 9/4K4/9/9/9/k8/9/9/9 b - 1", "sfen 9/4K4/9/9/9/9/k8/9/9 b - 1"]
    assert rules_status(koma_bin, try_lines, "--impasse", "try") == ["ongoing", "declaration_win"]
    assert rules_status(koma_bin, try_lines, "--impasse", "try-unconditional") == ["declaration_win", "declaration_win"]
    # Jishogi by agreement: adjudicated once both kings have entered.
    j = ["sfen 9/9/4K4/9/9/9/4k4/9/9 b RB14Prb4p 1", "sfen 9/9/4K4/9/9/9/4k4/9/9 w RB14Prb4p 1", "sfen 9/9/4K4/9/9/4k4/9/9/9 b RB14Prb4p 1"]
    assert rules_status(koma_bin, j, "--impasse", "jishogi") == ["jishogi_win", "jishogi_loss", "ongoing"]
    for args in (["--impasse", "try-sometimes"], ["--max-moves-rule", "jsa500"]):
        failing(koma_bin, "rules", *args, stdin="startpos\n")


def test_arena_takes_the_rules_and_a_handicap(koma, koma_bin, tmp_path):
    out = tmp_path / "arena"
    koma(
        "arena", "--player", "random", "--player", "greedy", "--games", "2", "--max-plies", "30",
        "--max-moves-rule", "checks", "--impasse", "jishogi", "--handicap", "three-piece",
        "--results", str(out / "results.jsonl"), "--records", str(out / "games"),
    )
    lines = [json.loads(l) for l in (out / "results.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and all(l["start"] == ALL["three-piece"][1] for l in lines), lines
    for args in (["--impasse", "bogus"], ["--max-moves-rule", "sometimes"], ["--handicap", "nine-piece"]):
        err = failing(koma_bin, "arena", "--player", "random", "--player", "random", "--games", "2", *args,
                      "--results", str(tmp_path / "r.jsonl"), "--records", str(tmp_path / "g"))
        assert args[1] in err, err

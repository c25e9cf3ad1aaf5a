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

And `go mate` (USI) answers the shortest mate, with the longest defence, on mates of 11 to 15
plies whose length an exhaustive search over cshogi's moves gives (`Forced`).
"""

import json
import os
import random
import subprocess
import time

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


# Shortest mates of 11 to 15 plies (by `shortest_mate`): positions from `positions(seed)` for seeds
# 1 to 3 whose mate cshogi's df-pn proves and whose shortest mate takes 11 to 15 plies, less one
# that koma takes over 2 million nodes to prove the shortest. On 5 of them koma's `go mate` gave a
# line of other length before: two plies more (df-pn's first proof, when the shortening ran out of
# time) or fewer (a line whose defence was not the longest).
SHORTEST = [
    ("+P3sg1nb/l3ks2l/p1p1pp2G/3p5/1r1PN1p2/B1P1S2p1/P1G1PPP1+l/1+p1G4R/LN2K1SN1 b P2p 67", 13),
    ("2+L2k2+L/1g1pp3p/1N1g1p2+N/2nS2ps1/1rp6/1p1g2P2/4S3P/lK2R2+p1/1SNGP3B w 2Pbl5p 218", 11),
    ("1n2ggs1b/lr1g2p1l/p2p1k1+Pp/1pp1p4/P1+r2n3/1N1P3p1/L3B1P1P/3KsPSGL/1+p4SN1 w 3p 102", 13),
    ("pns3S2/l2k3L1/1S2pg1rn/1gpPg1B2/1l2PRP2/P1P2P3/1P4G1N/L1KS4P/1N4B2 b 5P2p 135", 11),
    ("s1s1sk3/B+N1ggr1l1/l3+S1+B+P1/nppp2p1n/1GP1p2p1/5p2p/N2KP1P1P/p4L2R/P2GL3+p b 2p 127", 13),
    ("1n2k4/l1P1l1+BSg/p1Nr2p2/2SP1gPpP/g3b2P1/Np2Pp2p/2+sp2Ng1/PR7/1+l+l1KP2+s w 3p 190", 13),
    ("lg2k2+Pl/9/Ppp3s2/3sp2p1/Nb1P1G2L/1P2P1P2/S1+r4+s1/L3NKp+pG/GNPR4N w B5P 132", 11),
    ("ln+P+P5/r2+S+P+Sgpk/sp1P2p2/p6P1/1g+b2lPNp/3gg4/P1N+b1+p3/L1Rpl+n2+p/K1s1P4 w Pp 182", 13),
    ("1G1g1pr2/1P1s1krbl/l1npp2p+S/1pp3P2/p1Pg5/PS1PP4/N3KP1+nP/1+b1+s3PL/+p1L2+p1NG w - 120", 11),
    ("Bn3G2+P/l1Gsk1lsP/Np3g2L/1P2pn3/3p1KsPp/1BpRP1p2/PG2RPP2/LS5+p1/3P2+p1+n b P 149", 13),
    ("+Lls1p1snl/+P2pk2+P1/1g1g4p/1pp2pG2/2Pg3P1/p3bP1nP/1+p1+b5/1+n+l2KNSR/+p+p1r2S2 w Pp 216", 13),
    ("1+P+P1G1R1b/2S5l/3pkp3/ppK2n1pp/n3p1sG1/LPP4s1/1npPPPp2/1+l+s2B1+nR/4GG1+pL b p 135", 13),
    ("gn+Pgkg1n+P/l7r/p2ppp2p/1Lp2Np1s/7pP/1P4N2/P1s1bPP2/L+p2KG3/1+b4S1L w Sr2p 76", 15),
    ("1+Ppgsp1nl/2G1s4/+P3sb1pp/nL1ppkP2/p2P1gN2/1pP2PgN1/P3P1R1P/L1+p3K2/4S3L w Br 166", 13),
    ("1n1+B3nb/1p3Gs1P/5pp2/l3P2p1/P1p2PG1G/2k+r1SP2/N3S2RN/LP1S1LKP1/+p2+p+p3L b 3Pg 119", 11),
    ("G3k1pp1/1+P1rg1sLl/pg2G1+R1p/+P1p2pn2/LS1P2PP1/6NB1/PP+np1P3/1+n1+l3S1/+s2+pPBK1+p b - 195", 15),
    ("ln1+P1gBkl/1r7/1ps1+R2G1/p1p5p/1l2p2p1/s5p2/PPgp3n1/6SB1/sg1KN2PL b n6p 171", 11),
    ("4k2g1/lPp1gs+S2/P1P1pp+PNp/p2p1s3/1N3+B3/1nR1P2pP/L2P1PL2/2SKG3L/B+p2rG+pN1 b P 103", 11),
    ("+L1r1k4/5r3/+BgSs1p2l/l1p1P1Nnp/Pp5PS/2P3PNP/1PGPKP3/1g1B5/3+s2+p+nL b G3Pp 119", 13),
    ("l4g3/1n1P1ksbp/n1s3l2/p2prp3/2K3Gp1/1p4P2/PPP1PPgPP/1B2SG3/LN4SNL w 2Prp 86", 11),
    ("l1G3+S2/3P3gl/2n1ps2n/pk7/g1P2P1S1/1Pr2pPPP/P2+p1s2N/L1B1PR1bL/3GK2N1 w 5P 116", 11),
    ("3k2p1l/7sg/l1sp1g1p1/ppr1p4/4+BpN1p/PG4PPG/1+bn1PP2N/3KR3L/LN+pS2S2 w 4p 96", 11),
    ("BGn1k1gnl/2sPppPs1/2pgs+P3/6G1P/P1P3pn1/1P3P+bPp/2+nlP3L/l+pR2K1+s1/9 w R2P 124", 15),
    ("1n2+R3+N/l7+B/4p1s1p/p1p3n1k/3pBsppl/gPPGPGP2/LL2np3/1p3P1PS/4K1R1+s b G2Pp 159", 15),
    ("+P+N1g2sll/8+P/3nk1np1/b7G/p3srp2/1+l1PPp1P1/P1P1K1P1N/+b2R1GS1L/1PS2P2P w G3P 148", 15),
    ("ln5n1/2skpp2l/n6pp/pp4r2/P3s4/nPPp1P3/3SB+lg1L/1G5P1/1+b2K1GG1 w Sr6p 104", 13),
    ("2s3bn1/1G+P1k4/2P2pp1l/1PNp2g2/p2n5/3PP1PPP/1+p+p1G4/4R+B1SL/+p1+l1KR2L w G3P2sn 158", 11),
    ("lk3p+L1+P/s5sP1/ps4P2/nSrpng1p1/6g2/1N1+b5/LP2P1+pNp/1p1gR3P/1+l1g3Kb w 5p 230", 15),
    ("ln3p2+L/s+Nskp1P1P/1pg2+B2p/1N5p1/P7L/1P1p1P1P1/2BPPKS2/LS1RG2+n1/2GG3+p+p b R2P 127", 11),
    ("l1+P4l1/b4p2l/1gs2GG2/rNp1n3k/1p2p1P1p/2NpRP1pP/+pSPP3SN/3S3PL/3KG4 b BP2p 137", 13),
    ("sGbp2+L1n/rsp1g4/lpPkS2+SB/1g6R/2nnpP3/LP1L3P1/p1+p4K1/2N3+p2/3G5 b 2P5p 191", 11),
    ("1+N2p3s/2GPrpp1p/+P1Gn3g1/4G1nkl/pPp4pL/SB1plPPBS/2P3N2/4+p2KR/1+p2S3L b Pp 197", 11),
    ("2+S1+P1g2/P6kp/1rNp1pnpl/4n1pL1/+r1p1K4/pPP1pP2P/+s2sGlGBL/+p4G1P1/+s2N2P2 w bp 190", 15),
    ("3g2g2/1rk2gs1l/1p2p+B2p/pPP3pp1/S1L4P1/P3P4/3P1P2P/2+p1N2+nL/+sNSBK1GN1 b 3Prl 73", 13),
    ("s1pg2s1l/3+B1pgpl/pp1pp3p/2P4k1/1P2P4/6pPP/P2PGPL2/L3G1K1R/1NS3SN+n b RNbp 69", 11),
    ("l1p+P2+P2/nbs1P4/p2k2n1g/3r3Pl/Pp2KpG1P/L1Pp3p1/1+b1S+n4/4G1N1L/2gPSPS2 w R2Pp 146", 11),
    ("1n1pgks+S1/l4r1gn/pp1+Pp1n1P/6P1l/2PPP4/1P3G1pp/NR3Sg1L/L2+b1S1B1/P4P1K1 w 2Pp 144", 13),
    ("G1R2p+N2/g2k3+PP/p2p1+Ps1l/lp7/2P2G1sp/SPpP2p2/P1N1pRN1g/L+l1K1N1+p1/2B4+p1 b Sbp 187", 15),
    ("p2+P+P+S+P1+P/1+L2n3+S/1+Pgpg1n2/2p1kn2p/2Rrp1PpP/1Pl6/1+bN3p2/1+b2gg3/s1+s1+l2K1 w Pl2p 206", 13),
    ("1nk1r1snb/l1g5l/p1sppg2p/2p2p1P1/1p1K2p2/3P5/PPPGPP1RP/L2SG3L/BN5N1 w Psp 66", 13),
    ("R1+Pgk2+Sl/+N4s3/+P1+Pp2g1p/1P2p2p1/p2PN3l/gN2Gr1P1/3nKPp1P/1+p+p1P1P1L/L+b1b2+s2 b s 117", 13),
    ("rksnb1p1+R/l1gsg4/npppp2p1/p4ps1P/1NK6/P2P5/1P1+bGPGP1/L2S2L1L/8N w 4p 112", 11),
    ("l2g5/2P1pp+PpP/p1k3PRN/1p1P2G2/6p1p/1P1pP1b1L/PS1Ns2PG/L3Sr3/1+nB+pg+sNKL w - 156", 11),
    ("l1s1+NG1k1/1s6l/ppng1Gn1p/5+P1B1/l2pPrS1P/2P1pPp1R/PPp2K3/L5G2/1s1P1B2+p b N2p 117", 11),
    ("sns2k3/1gbs5/lp2p1L2/p3np1p1/2g3P2/P2P3PP/NP1GPP3/LNP2K1RL/3+p2+p2 w BS2Prg 80", 13),
    ("np1g4+S/2+Ssk1G2/l1P4P1/1KGb1g2s/6P1P/p3N3p/LPNP1R3/1R+l3+n1L/P2B3+p1 b 7P 201", 11),
    ("k3r3b/2np2p+P+L/1p3P3/2p1p4/l2n1sgP1/pP3nR2/L1BP+s1N2/G1gS2P2/2P1P1K1L w 3Pgsp 196", 11),
    ("1n1s1p3/2r1P1s1+P/lN2g1kNp/G1bp2sp1/1Pl+b2p2/K5P1P/N2P1P1P1/P3+p1+p1R/L3GG2L w SPp 128", 11),
    ("1s2g1s1l/1r4k2/+S1P1p1n2/3p1g1nP/nN4P2/p5G1L/PPLPP1+bP1/L1p2P3/1BS1GK2+p w 4Pr 116", 15),
    ("+L4G1+P1/+L1sk1gpG1/+N1gp3PR/p2Ppp3/1Sp2sPb1/1P2n1np1/P1Pr1P1N1/S+l4K2/2B1P3+l w Pp 192", 15),
    ("ln1+P3+S1/8+B/p1k1p2p1/1PlNg4/2grS2sp/b2P1Pp2/P1PK1SPPP/+pR2P4/NNG1G3+p b P2l 141", 15),
    ("p2+P2s1+N/2L1k1g2/G3p1p+Np/1N1BPp1P1/l2P3pB/1LPp2N1P/g3+r1P1L/1p6R/1PKS1G1+s+p w Ps 156", 11),
    ("2G1g4/1+L1s1g2l/p3p1kBb/P2p1p1Pp/2P1PP3/3P4S/1PSNNR2P/2R4pl/3K2+sNL b G4Pn 129", 15),
    ("k2p2snl/3s1+P1b1/2n1g1p2/p1P+RPp3/3N2Lpp/PPpK1lP2/1p1P1g1PP/1B1S3SR/g3+p2NL b G 85", 11),
    ("1Ssgkl1nn/B1p5+P/pp1+Lr2Pp/4ppngP/1nP4pL/1P2P1g2/P2P1PPG1/4K1S1S/+r+b5+l1 w P 90", 13),
    ("1npp1ks+P1/2+P1p1p1l/l1+P1Pp1P1/pp6p/3N1g3/PglS3gP/3G2+r2/L3K2B1/1N+b1S2N+s w RP2p 144", 15),
    ("l+S2k4/1r1g2G1l/1p1p+P3p/p1p3p2/1NP2n1p1/1G2p1Pr1/PP1P1P1P+b/LS2G1S2/4K2NL b SNPbp 77", 11),
]


def _checks(board) -> list:
    """Every legal check (cshogi's check generator, as legal moves)."""
    if board.is_check():
        out = []
        for m in board.legal_moves:
            board.push(m)
            if board.is_check():
                out.append(m)
            board.pop()
        return out
    legal = set(board.legal_moves)
    return [m for m in board.check_moves if m in legal]


def _no_mate_within(board, plies: int, nodes: int = 200_000) -> bool:
    """cshogi's df-pn proves no mate within `plies` (False: a mate, maybe longer, or undecided)."""
    dfpn = cshogi.DfPn(plies, nodes)
    return not dfpn.search(board) and dfpn.searched_node < nodes


class Forced:
    """Whether the side to move forces mate within n plies: an exhaustive search over cshogi's
    checks and every evasion, mates told by cshogi (no legal move). cshogi's `mate_move` only
    orders the checks (it misses mates by discovered check), and its df-pn's "no mate within n"
    cuts an evasion's subtree short."""

    def __init__(self):
        self.mates = {}  # zobrist hash → fewest plies proved
        self.refuted = {}  # zobrist hash → most plies refuted

    def attack(self, board, n: int) -> bool:
        key = board.zobrist_hash()
        if self.mates.get(key, 1 << 30) <= n:
            return True
        if self.refuted.get(key, -1) >= n:
            return False
        checks = _checks(board)
        if n >= 3:
            hint = board.mate_move(n)
            if hint in checks:
                checks.remove(hint)
                checks.insert(0, hint)
        mated = False
        for c in checks:
            board.push(c)
            mated = self.defend(board, n - 1)
            board.pop()
            if mated:
                break
        if mated:
            self.mates[key] = min(n, self.mates.get(key, 1 << 30))
        else:
            self.refuted[key] = max(n, self.refuted.get(key, -1))
        return mated

    def defend(self, board, n: int) -> bool:
        """The side to move (in check) is mated within n plies whatever it plays."""
        evasions = list(board.legal_moves)
        if not evasions:
            return True
        if n == 0:
            return False
        for e in evasions:
            board.push(e)
            mated = not (n - 1 >= 3 and _no_mate_within(board, n - 1)) and self.attack(board, n - 1)
            board.pop()
            if not mated:
                return False
        return True


def shortest_mate(sfen: str, most: int = 15):
    """The plies of the shortest forced mate, or None if there is none within `most`."""
    board, forced = cshogi.Board(sfen), Forced()
    return next((n for n in range(1, most + 1, 2) if forced.attack(board, n)), None)


def test_go_mate_answers_the_shortest_mate():
    path = os.environ.get("KOMA_BIN")
    if not path:
        pytest.fail("KOMA_BIN is not set: run these tests through scripts/test")
    engine = subprocess.Popen([path, "usi"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, bufsize=1)

    def send(line):
        engine.stdin.write(line + "\n")
        engine.stdin.flush()

    def until(prefix):
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = engine.stdout.readline()
            assert line, "the engine ended"
            if line.startswith(prefix):
                return line.split()
        pytest.fail(f"no {prefix} within 120 s")

    try:
        send("usi")
        until("usiok")
        send("isready")
        until("readyok")
        for sfen, plies in SHORTEST:
            assert shortest_mate(sfen) == plies, sfen
            send(f"position sfen {sfen}")
            send("go mate 60000")
            line = until("checkmate")[1:]
            assert len(line) == plies, f"{sfen}: shortest mate {plies} plies, go mate: {line}"
            # Every attacker move mates within the plies left; every defender move resists as
            # long as possible (no mate two plies sooner after it).
            board, forced = cshogi.Board(sfen), Forced()
            for i, usi in enumerate(line):
                assert usi in {cshogi.move_to_usi(m) for m in board.legal_moves}, f"{sfen}: {line}"
                board.push_usi(usi)
                left = plies - i - 1
                if i % 2 == 0:
                    assert board.is_check() and forced.defend(board, left), f"{sfen}: {line[: i + 1]}"
                elif left >= 3:
                    assert not forced.attack(board, left - 2), f"{sfen}: {line[: i + 1]} is no longest defence"
            assert board.is_game_over(), f"{sfen}: {line}"
    finally:
        send("quit")
        engine.wait(timeout=30)

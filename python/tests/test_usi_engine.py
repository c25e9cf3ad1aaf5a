"""`koma usi` as real GUIs and match runners see it: cshogi's USI client drives it through a whole
game, cshogi's match runner plays a short match (with pondering) between two `koma usi`
processes, garbage on stdin is survived, and byoyomi is never exceeded. Every move is checked
against cshogi's rules, and every record's result against its final position.

A tiny random network keeps it fast. KOMA_SLOW_TESTS=1 also runs the 100-move byoyomi test.
"""

import collections
import os
import random
import shlex
import subprocess
import threading
import time

import cshogi
import cshogi.cli
import pytest
from cshogi import CSA
from cshogi.usi import Engine, InfoListener


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory, koma):
    path = tmp_path_factory.mktemp("usi_model") / "tiny.safetensors"
    koma("init", "--config", "tiny", "--out", str(path))
    return str(path)


def wrapper(directory, name, koma_bin, *args):
    """An executable script that starts `koma usi ARGS`: GUIs (and cshogi) want one program."""
    script = directory / name
    script.write_text("#!/bin/sh\nexec " + " ".join(shlex.quote(a) for a in (koma_bin, "usi", *args)) + "\n")
    script.chmod(0o755)
    return str(script)


def play_out(board, engine, go, max_plies=256, check_info=False):
    """Has `engine` play both sides from `board` until the game ends; returns (result, moves)."""
    moves = []
    seen = collections.Counter([board.zobrist_hash()])
    while True:
        if board.move_number > max_plies:
            return "max_moves", moves
        engine.position(moves)
        listener = InfoListener()
        bestmove, _ = engine.go(listener=listener, **go)
        if bestmove == "resign":
            return "resign", moves
        if bestmove == "win":
            assert board.is_nyugyoku(), f"false declaration in {board.sfen()}"
            return "declaration", moves
        move = board.move_from_usi(bestmove)
        assert board.is_legal(move), f"illegal {bestmove} in {board.sfen()}"
        if check_info:
            info = listener.info
            assert info is not None and "score" in info and "nodes" in info and "pv" in info, info
            assert info["pv"][0] == bestmove
        board.push(move)
        moves.append(bestmove)
        if board.is_game_over():
            return "checkmate", moves
        seen[board.zobrist_hash()] += 1
        if seen[board.zobrist_hash()] >= 4:
            return "repetition", moves


def test_whole_game_with_cshogi_engine(koma_bin, tiny_model, tmp_path):
    cmd = wrapper(tmp_path, "koma-usi.sh", koma_bin, "--model", tiny_model, "--device", "cpu", "--threads", "1", "--playouts", "48")
    engine = Engine(cmd)
    try:
        assert engine.name.startswith("koma")
        options = engine.usi()
        assert any(line.startswith("option name Model type filename default ") for line in options)
        engine.setoption("MultiPV", 1)
        engine.isready()
        engine.usinewgame()
        board = cshogi.Board()
        start = time.monotonic()
        result, moves = play_out(board, engine, {"byoyomi": 2000}, max_plies=200, check_info=True)
        print(f"game: {result} after {len(moves)} plies in {time.monotonic() - start:.1f} s")
        if result == "checkmate":
            assert board.is_game_over()
        engine.gameover("win")
        # go mate on a mate-in-three position: a legal line that mates.
        mate3 = "2s1k3p/l2p2s1l/g1+B1p+P2n/pG2R1p1P/P6p1/Np2Ppg1L/+n2P2l2/R2K3P1/1NP1S2S1 b Pbg2p 157"
        engine.position(sfen="sfen " + mate3)
        answer = engine.go_mate(byoyomi=5000)
        board = cshogi.Board(mate3)
        for usi_move in answer.split():
            move = board.move_from_usi(usi_move)
            assert board.is_legal(move), answer
            board.push(move)
        assert board.is_game_over(), answer
    finally:
        engine.quit()


def test_match_between_two_engines(koma_bin, tiny_model, tmp_path):
    net = wrapper(tmp_path, "koma-net.sh", koma_bin, "--model", tiny_model, "--device", "cpu", "--threads", "1", "--playouts", "32")
    uniform = wrapper(tmp_path, "koma-uniform.sh", koma_bin, "--uniform", "--playouts", "32")
    records = tmp_path / "records"
    records.mkdir()
    # Two random openings: one that leaves the side to move a forced mate (cshogi's mate search
    # says so), so that games also end in checkmate, and one that does not.
    rng = random.Random(7)
    openings = tmp_path / "openings.txt"
    wanted = {True: None, False: None}
    while None in wanted.values():
        board = cshogi.Board()
        moves = []
        while len(moves) < 40 and not board.is_game_over():
            move = rng.choice(list(board.legal_moves))
            moves.append(cshogi.move_to_usi(move))
            board.push(move)
        if board.is_game_over():
            continue
        has_mate = bool(board.mate_move(5))
        if wanted[has_mate] is None:
            wanted[has_mate] = "startpos moves " + " ".join(moves)
    openings.write_text(wanted[True] + "\n" + wanted[False] + "\n")
    start = time.monotonic()
    # No pondering: cshogi's match driver sends `go ponder` from a worker thread and `stop` or
    # `ponderhit` from its main thread without ordering the two, so on a loaded machine the
    # `stop` can reach the engine first; the engine then (rightly) ponders until told to stop
    # and the driver waits for ever (seen in the load check, docs/benchmarks.md). Pondering is
    # tested in crates/engine/tests/protocol.rs, where the order of the commands is ours.
    result = cshogi.cli.main(
        net, uniform, names=["koma-net", "koma-uniform"], games=4, byoyomi=2000, time=60000, ponder=False,
        draw=160, opening=str(openings), opening_moves=40, opening_index=None, csa=str(records), print_summary=False,
    )
    print(f"match: {result} in {time.monotonic() - start:.1f} s")
    assert result["total"] == 4
    assert result["engine1_won"] + result["engine2_won"] + result["draw"] == 4
    files = sorted(records.glob("*.csa"))
    assert len(files) == 4, files
    for path in files:
        parser = CSA.Parser.parse_file(str(path))[0]
        board = cshogi.Board(parser.sfen)
        for move in parser.moves:
            assert board.is_legal(move), f"{path.name}: illegal {cshogi.move_to_usi(move)} in {board.sfen()}"
            board.push(move)
        ending = parser.endgame
        assert ending in ("%TORYO", "%SENNICHITE", "%JISHOGI", "%KACHI"), f"{path.name}: {ending}"
        if ending == "%KACHI":
            assert board.is_nyugyoku()
        if ending == "%TORYO" and not board.is_game_over():
            # A resignation: cshogi records the side to move as the loser.
            assert parser.win == (cshogi.WHITE_WIN if board.turn == cshogi.BLACK else cshogi.BLACK_WIN)
        if ending == "%TORYO" and board.is_game_over():
            assert parser.win == (cshogi.WHITE_WIN if board.turn == cshogi.BLACK else cshogi.BLACK_WIN)
        if ending == "%JISHOGI":
            assert board.move_number > 160


def test_garbage_on_stdin_is_survived(koma_bin):
    proc = subprocess.Popen([koma_bin, "usi", "--uniform"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    junk = b"".join([
        b"\xff\xfe\x00garbage\r\n",
        b"x" * (3 << 20) + b"\n",  # longer than the engine reads
        b"position startpos moves 7g7f 7g7f 3c3d\n",  # an illegal second move
        b"go nodes abc byoyomi\n",
        b"stop\nponderhit\nsetoption name Nope value 1\nsetoption\nposition sfen junk\n",
        "position startpos moves ７六歩\n".encode(),
        b"\t \n\n",
    ])
    out, err = proc.communicate(junk + b"usi\nisready\nposition startpos moves 7g7f\ngo nodes 20\n", timeout=60)
    assert proc.returncode == 0, err.decode(errors="replace")
    lines = out.decode().splitlines()
    assert "usiok" in lines and "readyok" in lines, lines
    bestmoves = [line for line in lines if line.startswith("bestmove")]
    # One for `go nodes abc byoyomi` (start position after the bad SFEN... then 7g7f), one at the end.
    assert len(bestmoves) == 2, lines
    board = cshogi.Board()
    board.push_usi("7g7f")
    assert board.is_legal(board.move_from_usi(bestmoves[-1].split()[1])), bestmoves
    assert "unknown command" in err.decode(errors="replace")


def byoyomi_times(koma_bin, tiny_model, tmp_path, plies, byoyomi=1000):
    """The time of each `go` to its `bestmove`, and the scheduling slack of this machine now: four
    times the slowest of five `isready` round trips (at most 1 s), what the pipe and the scheduler
    alone may add to any answer (as `scheduling_slack` in crates/engine/tests/common)."""
    cmd = wrapper(tmp_path, "koma-time.sh", koma_bin, "--model", tiny_model, "--device", "cpu", "--threads", "1")
    engine = Engine(cmd)
    times = []
    try:
        engine.isready()
        trips = []
        for _ in range(5):
            start = time.monotonic()
            engine.isready()
            trips.append(time.monotonic() - start)
        slack = min(4 * max(trips), 1.0)
        board = cshogi.Board()
        moves = []
        engine.usinewgame()
        while len(times) < plies:
            engine.position(moves)
            start = time.monotonic()
            bestmove, _ = engine.go(btime=0, wtime=0, byoyomi=byoyomi)
            times.append(time.monotonic() - start)
            if bestmove in ("resign", "win") or board.is_game_over():
                board, moves = cshogi.Board(), []
                engine.usinewgame()
                continue
            move = board.move_from_usi(bestmove)
            assert board.is_legal(move)
            board.push(move)
            moves.append(bestmove)
            if board.is_game_over() or board.move_number > 200:
                board, moves = cshogi.Board(), []
                engine.usinewgame()
    finally:
        engine.quit()
    print(f"byoyomi {byoyomi} ms: {len(times)} moves, mean {sum(times) / len(times) * 1000:.0f} ms, "
          f"max {max(times) * 1000:.0f} ms, scheduling slack {slack * 1000:.0f} ms")
    return times, slack


# Wall-clock bounds without slack hold on a machine with its cores to spare, and scripts/load-check
# shows they still hold with a build beside them; in the test suite, where anything may run
# beside the tests, they would pass or fail by luck.
LOAD_CHECK = pytest.mark.skipif(not os.environ.get("KOMA_LOAD_CHECK"),
                                reason="a time bound without slack: run by scripts/load-check (KOMA_LOAD_CHECK=1)")


def test_byoyomi_is_never_exceeded(koma_bin, tiny_model, tmp_path):
    times, slack = byoyomi_times(koma_bin, tiny_model, tmp_path, plies=6)
    assert max(times) < 1.0 + slack, (times, slack)


@LOAD_CHECK
def test_byoyomi_1s_over_100_moves(koma_bin, tiny_model, tmp_path):
    times, _ = byoyomi_times(koma_bin, tiny_model, tmp_path, plies=100)
    assert max(times) < 1.0, max(times)


def test_the_installed_engine_needs_no_environment(tmp_path, tiny_model):
    """Tournament managers start engines with an empty environment (issue 32): the copy that
    scripts/install-engine makes plays a move with none at all (no HOME, no PATH, no build step),
    and scripts/koma itself finds HOME and cargo without HOME and PATH."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    installed = subprocess.run(
        [os.path.join(repo, "scripts", "install-engine"), str(tmp_path / "bin")],
        capture_output=True, text=True, timeout=900,
    )
    assert installed.returncode == 0, installed.stderr
    engine = installed.stdout.strip().splitlines()[-1]
    assert engine == str(tmp_path / "bin" / "koma")
    proc = subprocess.Popen(
        [engine, "usi", "--model", tiny_model], env={}, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        proc.stdin.write("usi\nisready\nposition startpos\ngo nodes 16\n")
        proc.stdin.flush()
        lines = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line.strip())
            if line.startswith("bestmove"):
                break
        proc.stdin.write("quit\n")
        proc.stdin.flush()
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "usiok" in lines and "readyok" in lines, lines
    best = lines[-1].split()[1]
    assert cshogi.Board().is_legal(cshogi.Board().move_from_usi(best)), lines
    assert not any("error" in line for line in lines), lines
    # No HOME and no PATH; the cache and build folder this run uses are kept, so nothing is built.
    kept = {k: os.environ[k] for k in ("KOMA_CACHE", "CARGO_TARGET_DIR") if k in os.environ}
    version = subprocess.run(
        [os.path.join(repo, "scripts", "koma"), "--version"], env=kept, capture_output=True, text=True, timeout=900
    )
    assert version.returncode == 0 and version.stdout.startswith("koma "), version.stderr


class Usi:
    """A `koma usi` process with its default options (as a tournament manager starts it)."""

    def __init__(self, koma_bin, model):
        self.process = subprocess.Popen([koma_bin, "usi"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.send("usi")
        self.until("usiok")
        self.send(f"setoption name Model value {model}")
        self.send("isready")
        self.until("readyok")
        self.send("usinewgame")

    def send(self, line):
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def until(self, prefix):
        lines = []
        while True:
            line = self.process.stdout.readline()
            assert line, f"the engine ended before {prefix!r}: {lines[-5:]}"
            lines.append(line.strip())
            if line.startswith(prefix):
                return lines

    def quit(self):
        self.send("quit")
        self.process.wait(timeout=30)


@LOAD_CHECK
def test_engines_sharing_the_cores_keep_the_byoyomi(koma_bin, tiny_model):
    """Two games at once and a busy process on this machine's cores, every engine with its default
    threads: no move takes longer than the 300 ms byoyomi (before the engine sized its libtorch
    threads from the free cores and allocated its tables at isready, first moves took 0.9 s)."""
    byoyomi, plies = 300, 12
    busy = subprocess.Popen(["python3", "-c", "while True: pass"])
    times, notes = [], []

    def game(index):
        engines = [Usi(koma_bin, tiny_model), Usi(koma_bin, tiny_model)]
        board, moves = cshogi.Board(), []
        try:
            for ply in range(plies):
                engine = engines[ply % 2]
                engine.send("position startpos" + (" moves " + " ".join(moves) if moves else ""))
                start = time.monotonic()
                engine.send(f"go btime 0 wtime 0 byoyomi {byoyomi}")
                lines = engine.until("bestmove")
                took = time.monotonic() - start
                times.append(took)
                notes.extend(f"game {index} ply {ply}: {line}" for line in lines if line.startswith("info string"))
                best = lines[-1].split()[1]
                if best in ("resign", "win"):
                    break
                move = board.move_from_usi(best)
                assert board.is_legal(move), (best, board.sfen())
                board.push(move)
                moves.append(best)
        finally:
            for engine in engines:
                engine.quit()

    errors = []

    def run(index):
        try:
            game(index)
        except Exception as e:  # reported below, with the other game's times
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        busy.kill()
        busy.wait()
    assert not errors, errors
    print(f"{len(times)} moves, max {max(times) * 1000:.0f} ms, load {os.getloadavg()}")
    assert max(times) < byoyomi / 1000, (sorted(times)[-5:], notes[-10:])
    # Threads 0 chose a count from the free cores (said when it changes, so at least once).
    assert any("libtorch threads:" in note for note in notes), notes

"""A koma checkpoint plays a match against a second `koma usi` process through koma's USI client;
the games come out as KIF files that cshogi's KIF parser reads, with legal moves and a result
that matches arena/results.jsonl. A round robin of three (a checkpoint and two `koma usi` with
different options and clocks, one from a player file) runs in one command with --json; a scripted
engine at a path with a space that sleeps past its clock, answers garbage or dies loses that game
with the reason recorded."""

import json
import pathlib
import shlex
import subprocess
import sys

import pytest

import cshogi
import cshogi.KIF

REPO = pathlib.Path(__file__).resolve().parents[2]


def check_records(games_dir, lines):
    kifs = sorted(games_dir.glob("*.kifu"))
    assert len(kifs) == len(lines)
    for path in kifs:
        parser = cshogi.KIF.Parser.parse_file(str(path))
        board = cshogi.Board(parser.sfen)
        for move in parser.moves:
            assert board.is_legal(move), f"{path.name}: illegal {cshogi.move_to_usi(move)}"
            board.push(move)
        usi_moves = " ".join(cshogi.move_to_usi(m) for m in parser.moves)
        assert any(l["moves"] == usi_moves for l in lines), f"{path.name} matches no result line"


def test_checkpoint_against_reference_players(koma, tmp_path):
    model = tmp_path / "model-00000000.safetensors"
    koma("init", "--config", "tiny", "--out", str(model), "--seed", "4")
    for reference in ["random", "greedy", "mcts-material@16"]:
        out = tmp_path / reference
        koma(
            "arena", "--player", f"{model}@8", "--player", reference, "--games", "2", "--max-plies", "60",
            "--threads", "1", "--device", "cpu",
            "--results", str(out / "results.jsonl"), "--records", str(out / "games"),
        )
        lines = [json.loads(l) for l in (out / "results.jsonl").read_text().splitlines()]
        assert len(lines) == 2
        check_records(out / "games", lines)
    # From the shipped suite both games of a pair start at the same opening position. (Such games
    # are saved with a board-diagram start, which cshogi's KIF reader does not support; koma's
    # reader round-trips them, see crates/arena/tests/matches.rs.)
    out = tmp_path / "openings"
    koma(
        "arena", "--player", f"{model}@8", "--player", "greedy", "--games", "2", "--max-plies", "40",
        "--threads", "1", "--device", "cpu", "--openings", str(REPO / "data/openings/balanced-8.txt"),
        "--results", str(out / "results.jsonl"), "--records", str(out / "games"),
    )
    lines = [json.loads(l) for l in (out / "results.jsonl").read_text().splitlines()]
    assert lines[0]["start"] == lines[1]["start"] != cshogi.STARTING_SFEN


def test_checkpoint_against_koma_usi(koma, koma_bin, tmp_path):
    model = tmp_path / "model-00000000.safetensors"
    koma("init", "--config", "tiny", "--out", str(model), "--seed", "3")
    engine = f"usi:{shlex.quote(koma_bin)} usi --model {model} --device cpu --threads 1 --playouts 8"
    results = tmp_path / "arena" / "results.jsonl"
    games_dir = tmp_path / "arena" / "games"
    koma(
        "arena", "--player", f"{model}@8", "--player", engine, "--games", "2", "--byoyomi", "300",
        "--max-plies", "60", "--threads", "1", "--device", "cpu", "--concurrency", "2",
        "--results", str(results), "--records", str(games_dir),
    )
    lines = [json.loads(l) for l in results.read_text().splitlines()]
    assert len(lines) == 2
    assert {l["black"] for l in lines} == {l["white"] for l in lines}, "colours swap within the pair"
    check_records(games_dir, lines)


def read_lines(path):
    return [json.loads(l) for l in path.read_text().splitlines()]


def test_round_robin_of_three_with_engines_on_clocks(koma, koma_bin, tmp_path):
    """A checkpoint, `koma usi` with options from the command line on a main-time clock, and a
    second `koma usi` from a player file with other options and its own byoyomi clock: one round
    robin, rated together, with --json."""
    model = tmp_path / "model-00000000.safetensors"
    koma("init", "--config", "tiny", "--out", str(model), "--seed", "5")
    player_file = tmp_path / "players" / "koma usi 4.toml"
    player_file.parent.mkdir()
    player_file.write_text(
        f'name = "koma-usi-4"\npath = {json.dumps(koma_bin)}\n'
        f'args = ["usi", "--model", {json.dumps(str(model))}, "--device", "cpu"]\n'
        'options = { Threads = 1, Playouts = 4, ResignThreshold = 0 }\n'
        'byoyomi = "2s"\n'
    )
    results = tmp_path / "arena" / "results.jsonl"
    out = koma(
        "arena", "--round-robin", "--json",
        "--player", f"{model}@8",
        "--player", f"usi:{shlex.quote(koma_bin)} usi --model {model} --device cpu",
        "--option", "Threads=1", "--option", "Playouts=8",
        "--player", f"file:{player_file}",
        "--main-time", "60s", "--time-margin", "500ms",
        "--games", "2", "--max-plies", "40", "--threads", "1", "--device", "cpu",
        "--results", str(results), "--records", str(tmp_path / "arena" / "games"),
    )
    summary = json.loads(out.stdout)
    assert summary["format"] == "round-robin" and summary["games"] == 6
    names = {p["name"] for p in summary["players"]}
    assert len(names) == 3 and "koma-usi-4" in names and f"{model.stem}@8" in names
    assert summary["anchor"] == f"{model.stem}@8"
    for p in summary["players"]:
        assert p["games"] == 4 and p["lower"] <= p["elo"] <= p["upper"]
    assert [p["elo"] for p in summary["players"] if p["name"] == summary["anchor"]] == [0.0]
    assert len(summary["pairs"]) == 3
    for pair in summary["pairs"]:
        assert pair["games"] == 2 and pair["wins"] + pair["draws"] + pair["losses"] == 2
    lines = read_lines(results)
    assert len(lines) == 6
    assert {l["black"] for l in lines} | {l["white"] for l in lines} == names
    assert not any(l["reason"] in ("TimeLoss", "Forfeit") for l in lines), lines


def fake_engine(tmp_path):
    """The scripted engine at a path with a space, started by its shebang (this Python, which has
    cshogi)."""
    folder = tmp_path / "engine dir"
    folder.mkdir()
    path = folder / "fake engine.py"
    source = (REPO / "python/tests/fake_usi_engine.py").read_text()
    path.write_text(f"#!{sys.executable}\n{source}")
    path.chmod(0o755)
    return path


@pytest.mark.parametrize(
    "misbehaviour, reason, words",
    [
        (["Misbehave=sleep", "SleepSeconds=1.5"], "TimeLoss", "lost on time (1s + 100ms byoyomi)"),
        (["Misbehave=garbage"], "Forfeit", "not a USI move"),
        (["Misbehave=die"], "Forfeit", "crashed"),
    ],
)
def test_a_scripted_engine_that_misbehaves_loses_with_the_reason(koma, tmp_path, misbehaviour, reason, words):
    engine = fake_engine(tmp_path)
    options = [a for o in ["MisbehaveAt=3", *misbehaviour] for a in ("--option", o)]
    results = tmp_path / "results.jsonl"
    out = koma(
        "arena", "--player", f"usi:{engine}", *options, "--player", "greedy",
        "--games", "2", "--max-plies", "60", "--main-time", "1s", "--byoyomi", "100ms", "--time-margin", "100ms",
        "--results", str(results), "--records", str(tmp_path / "games"), "--json",
    )
    summary = json.loads(out.stdout)
    assert (summary["a"], summary["losses"]) == ("fake engine", 2)
    lines = read_lines(results)
    assert len(lines) == 2
    for l in lines:
        engine_colour = "black" if l["black"] == "fake engine" else "white"
        assert l["winner"] != engine_colour and l["reason"] == reason, l
        assert "fake engine" in l["note"] and words in l["note"], l["note"]
        assert l["plies"] in (4, 5), "two moves played, the third lost"


def test_bad_player_specs_get_clear_errors(koma_bin, tmp_path):
    bad_file = tmp_path / "bad.toml"
    bad_file.write_text('path = "engine"\nthreads = 1\n')
    for args, words in [
        (["--option", "Threads=1", "--player", "random", "--player", "greedy"], "applies to the --player before it"),
        (["--player", "random", "--option", "Threads=1", "--player", "greedy"], "is not a USI engine"),
        (["--player", f"file:{bad_file}", "--player", "greedy"], "unknown field `threads`"),
        (["--player", "random", "--player", "greedy", "--player", "greedy"], "--round-robin or --gauntlet"),
        (["--player", "random", "--player", "greedy", "--byoyomi", "1s", "--increment", "1s"], "one or the other"),
        (["--player", "random", "--player", "greedy", "--main-time", "ten"], "--main-time"),
        (["--player", "random", "--player", "greedy", "--increment", "2s"], "without main time"),
    ]:
        out = subprocess.run([koma_bin, "arena", *args, "--results", str(tmp_path / "r.jsonl")],
                             capture_output=True, text=True)
        assert out.returncode != 0 and words in out.stderr, (args, out.stderr)
        assert "panicked" not in out.stderr

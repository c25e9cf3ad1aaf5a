"""A koma checkpoint plays a match against a second `koma usi` process through koma's USI client;
the games come out as KIF files that cshogi's KIF parser reads, with legal moves and a result
that matches arena/results.jsonl."""

import json
import pathlib
import shlex

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

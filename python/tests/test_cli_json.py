"""Commands that print results take `--json` (one object a script reads), and flags with a closed
set of values list them in `--help` and refuse others (issue 18)."""

import json
import subprocess


def last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def test_arena_json(koma, tmp_path):
    out = koma("arena", "--player", "random", "--player", "greedy", "--games", "2", "--max-plies", "40",
               "--results", str(tmp_path / "r.jsonl"), "--records", str(tmp_path / "g"), "--json").stdout
    result = last_json(out)
    assert (result["a"], result["b"], result["games"]) == ("random", "greedy", 2)
    assert result["wins"] + result["draws"] + result["losses"] == 2
    assert result["as_black"]["games"] + result["as_white"]["games"] == 2
    assert 0.0 <= result["score"] <= 1.0


def test_openings_json(koma):
    result = last_json(koma("openings", "--count", "3", "--plies", "4", "--seed", "3", "--json").stdout)
    assert len(result["openings"]) == 3 and all(o.startswith("startpos moves ") for o in result["openings"])
    assert (result["plies"], result["seed"], result["judge"]) == (4, 3, "material")


def test_convert_json(koma, koma_bin, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.usi").write_text("startpos moves 7g7f 3c3d 2g2f\n")
    (src / "b.usi").write_text("startpos moves 7g7f 9z9z\n")
    p = subprocess.run([koma_bin, "convert", "--from", "usi", "--to", "csa", str(src), str(tmp_path / "out"), "--json"],
                       capture_output=True, text=True)
    assert p.returncode == 1, p.stderr  # one file fails, and says so
    result = last_json(p.stdout)
    assert result["games"] == 1 and len(result["files"]) == 1 and len(result["failed"]) == 1
    assert result["files"][0]["outputs"][0].endswith(".csa") and "b.usi" in result["failed"][0]
    # Records on stdout and a JSON summary cannot share it.
    p = subprocess.run([koma_bin, "convert", "--from", "usi", "--to", "csa", str(src / "a.usi"), "--json"],
                       capture_output=True, text=True)
    assert p.returncode != 0 and "--json" in p.stderr


def test_closed_sets_are_listed_and_checked(koma, koma_bin):
    assert "[possible values: csa, kif, kifu, usi, sfen, ki2]" in koma("convert", "--help").stdout
    assert "[possible values: csa27, jsa24, try, try-unconditional, jishogi, none]" in koma("rules", "--help").stdout
    assert "[possible values: auto, f32, f16, bf16]" in koma("eval", "--help").stdout
    p = subprocess.run([koma_bin, "convert", "--from", "pgn", "--to", "csa", "x"], capture_output=True, text=True)
    assert p.returncode == 2 and "pgn" in p.stderr and "possible values" in p.stderr, p.stderr
    # The library's aliases still work (`24` is jsa24).
    p = subprocess.run([koma_bin, "rules", "--impasse", "24"], input="startpos\n", capture_output=True, text=True)
    assert p.returncode == 0 and '"legal"' in p.stdout, p.stderr

"""`koma usi` under ShogiArena (PyPI `shogiarena`, pinned in python/requirements-tools.txt), the
tournament manager, as its users run it: the engine and tournament files of docs/engine.md
("Under ShogiArena") are read from the document itself, their paths pointed at a copy of the
binary under test and two tiny checkpoints, and run through the `shogiarena` command line:

- a round robin of the two checkpoints at 300 ms byoyomi, then at 1 s + 100 ms increment, two
  games at once;
- a short SPRT run (its `sprt.yaml`).

`greedy` is not in the round robin: it is a player of `koma arena` only; `koma usi` plays a
network (or uniform priors), so there is no USI engine for it.

Every engine runs with its default options (Threads 0 and all), and ShogiArena's clock has no
grace (`expiry_margin_ms: 0`, as in the document): a move that uses more than the clock allows is
a loss on time. Each run must finish every scheduled game with no loss on time, no illegal move
and no failed game, ShogiArena must log no warning or error, koma must write no `info string
error`/`warning` and nothing on stderr (the transcripts record both), and `shogiarena results
summary` must read back the games that `game.db` holds. Every move's clock use against its
budget is printed (`pytest -s`), and the overruns are listed when the test fails.
"""

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

shogiarena = pytest.importorskip(
    "shogiarena", reason="shogiarena is not installed (python/requirements-tools.txt pins it; scripts/bootstrap installs it)"
)
yaml = pytest.importorskip("yaml", reason="PyYAML (a dependency of shogiarena) is not installed")

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "engine.md"
GAMES = 6  # per run: a handful (even: ShogiArena plays each opening with both colours), ~2 minutes in all on two cores
MAX_PLIES = 160  # bounds a game of two tiny networks (ShogiArena's default is 320)
RUN_TIMEOUT_S = 240

# Game results that must never occur (rsshogi's GameResult names, as game.db stores them).
BAD_RESULTS = re.compile(r"TIMEOUT|ILLEGAL|FORFEIT|ERROR|INVALID|PAUSED")
# ShogiArena's log lines: "2026-01-01 12:00:00 [WARNING]: text".
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[(\w+)\]: (.*)$")
# ShogiArena's watchdog reports stalls of its own event loop (a busy machine); they are not about
# the engine, and a move they delay is classed as `orchestrator_stall`, which the time checks below
# would still catch. Listed, not failed.
OWN_LOAD = re.compile(r"^Event loop stalled for \d+ms$")


def doc_files() -> dict[str, str]:
    """The YAML files of docs/engine.md's "Under ShogiArena" section: "`NAME.yaml`:" then a block."""
    text = DOC.read_text(encoding="utf-8")
    assert "\n## Under ShogiArena\n" in text, "docs/engine.md has no 'Under ShogiArena' section"
    section = text.split("\n## Under ShogiArena\n", 1)[1].split("\n## ", 1)[0]
    files = dict(re.findall(r"^`([\w.-]+\.yaml)`:\n\n```yaml\n(.*?)^```", section, flags=re.M | re.S))
    assert {"koma-a.yaml", "koma-b.yaml", "tournament.yaml", "sprt.yaml"} <= files.keys(), files.keys()
    return files


def shogiarena_cli() -> str:
    beside = Path(sys.executable).with_name("shogiarena")
    found = str(beside) if beside.exists() else shutil.which("shogiarena")
    if not found:
        pytest.fail("the shogiarena package is installed but its `shogiarena` command is not")
    return found


class Arena:
    """A directory laid out as docs/engine.md describes, and the `shogiarena` command run in it."""

    def __init__(self, root: Path, koma, koma_bin: str):
        self.root = root
        self.files = doc_files()
        self.cli = shogiarena_cli()
        # The installed engine (what scripts/install-engine does: a plain copy of the binary).
        engine = root / "bin" / "koma"
        engine.parent.mkdir()
        shutil.copy2(koma_bin, engine)
        for label, seed in (("a", 1), ("b", 2)):
            model = root / f"model-{label}.safetensors"
            koma("init", "--config", "tiny", "--seed", str(seed), "--out", str(model))
            config = yaml.safe_load(self.files[f"koma-{label}.yaml"])
            config["engine_path"] = str(engine)
            config["options"]["Model"] = str(model)
            (root / f"koma-{label}.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        openings = (ROOT / "data" / "openings" / "balanced-8.txt").read_text(encoding="utf-8")
        (root / "openings.txt").write_text(
            "".join(line + "\n" for line in openings.splitlines() if line.strip() and not line.startswith("#")),
            encoding="utf-8",
        )
        self.env = dict(os.environ)
        # ShogiArena's settings and default output under the test directory, not ~/.config.
        self.env["XDG_CONFIG_HOME"] = str(root / "xdg-config")
        self.env["XDG_DATA_HOME"] = str(root / "xdg-data")

    def config(self, name: str) -> dict:
        """One of the document's run configs, shortened to GAMES games of at most MAX_PLIES plies."""
        config = yaml.safe_load(self.files[name])
        if "sprt" in config:
            config["sprt"]["max_games"] = GAMES
        else:
            config["tournament"]["games_per_pair"] = GAMES
        config["rules"].setdefault("adjudication", {})["max_plies"] = MAX_PLIES
        config.setdefault("logging", {})["usi_transcript_detail"] = "commands_and_info"
        return config

    def shogiarena(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        cwd = self.root / "elsewhere"
        cwd.mkdir(exist_ok=True)
        return subprocess.run(
            [self.cli, "--output-dir", str(self.root / "output"), *args],
            cwd=cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def run(self, command: str, name: str, config: dict) -> "Run":
        path = self.root / f"{name}.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        run_dir = self.root / "runs" / name
        start = time.monotonic()
        # Started elsewhere: the relative paths in the configs are read from the config's directory.
        proc = self.shogiarena("run", command, str(path), "--run-dir", str(run_dir), timeout=RUN_TIMEOUT_S)
        seconds = time.monotonic() - start
        log = proc.stdout + proc.stderr
        assert proc.returncode == 0, f"shogiarena run {command} {path.name} failed ({proc.returncode}):\n{log[-4000:]}"
        text = self.shogiarena("results", "summary", str(run_dir))
        assert text.returncode == 0, text.stdout + text.stderr
        print(text.stdout)
        summary = self.shogiarena("results", "summary", str(run_dir), "--format", "json")
        assert summary.returncode == 0, summary.stdout + summary.stderr
        return Run(run_dir, config, log, json.loads(summary.stdout), seconds, text.stdout)


class Run:
    """What one ShogiArena run left behind, and the checks on it."""

    def __init__(self, run_dir: Path, config: dict, log: str, summary: dict, seconds: float, summary_text: str = ""):
        self.dir = run_dir
        self.summary_text = summary_text
        self.config = config
        self.log = log
        self.summary = summary
        self.seconds = seconds
        self.status = json.loads((run_dir / "completion_status.json").read_text())
        self.state = json.loads((run_dir / "state.json").read_text())
        db = sqlite3.connect(run_dir / "game.db")
        db.row_factory = sqlite3.Row
        names = {row["id"]: row["player_name"] for row in db.execute("SELECT id, player_name FROM player")}
        self.games = [dict(row) for row in db.execute("SELECT * FROM game ORDER BY id")]
        for game in self.games:
            game["black"], game["white"] = names[game["black_player_id"]], names[game["white_player_id"]]
            game["moves"] = [
                dict(row)
                for row in db.execute(
                    "SELECT ply, wall_time_ms, next_move_time_ms, nodes FROM game_move WHERE game_id = ? ORDER BY ply",
                    (game["id"],),
                )
            ]
        db.close()

    def clock_use(self) -> list[dict]:
        """Every move with its clock budget: byoyomi plus main time left, or the main time left
        (ShogiArena's GameClock: the increment is added after the move; no grace here)."""
        limits = self.config["rules"]["time_control"]
        main = limits.get("time_ms") or 0
        byoyomi, increment = limits.get("byoyomi_ms") or 0, limits.get("increment_ms") or 0
        assert limits.get("expiry_margin_ms") == 0, "the document's configs give no grace"
        moves = []
        for game in self.games:
            left = {"b": main, "w": main}
            side = game["initial_position_sfen"].split()[1]
            for move in game["moves"]:
                wall = move["wall_time_ms"]
                if wall is None:  # the last entry: the resignation (or declaration), not clocked
                    continue
                budget = left[side] + byoyomi
                left[side] = max(0, left[side] - wall) + increment
                engine = game["black"] if side == "b" else game["white"]
                moves.append({
                    "game": game["game_name"], "ply": move["ply"], "engine": engine, "wall": wall, "budget": budget,
                    "engine_time": move["next_move_time_ms"], "nodes": move["nodes"],
                })
                side = "w" if side == "b" else "b"
        return moves

    def report(self) -> str:
        moves = self.clock_use()
        walls = [m["wall"] for m in moves]
        spare = [m["budget"] - m["wall"] for m in moves]
        over = [m for m in moves if m["wall"] > m["budget"]]
        results = ", ".join(
            f"{g['game_name']} {g['black']}-{g['white']} {g['game_result']} in {g['num_moves']}" for g in self.games
        )
        lines = [
            f"{self.dir.name}: {len(self.games)} games in {self.seconds:.0f} s ({results})",
            f"  {len(moves)} moves: clock use mean {sum(walls) / max(1, len(walls)):.0f} ms, "
            f"max {max(walls, default=0)} ms; least spare {min(spare, default=0)} ms; {len(over)} over the clock",
            f"  timeouts_by_origin {self.status.get('timeouts_by_origin')}, watchdog {self.status.get('watchdog')}",
        ]
        tightest = sorted(moves, key=lambda m: m["budget"] - m["wall"])[:5]
        lines += [f"  tight: {m}" for m in tightest]
        lines += [f"  OVER by {m['wall'] - m['budget']} ms: {m}" for m in over]
        return "\n".join(lines)

    def log_problems(self) -> tuple[list[str], list[str]]:
        """ShogiArena's WARNING/ERROR/CRITICAL lines (and tracebacks), and its own-load notes."""
        problems, load = [], []
        for line in self.log.splitlines():
            match = LOG_LINE.match(line)
            if match and match.group(1) in ("WARNING", "ERROR", "CRITICAL"):
                (load if OWN_LOAD.match(match.group(2)) else problems).append(line)
            elif line.startswith("Traceback"):
                problems.append(line)
        return problems, load

    def engine_problems(self) -> list[str]:
        """koma's complaints in the transcripts: stderr lines and `info string error|warning`."""
        problems = []
        transcripts = sorted((self.dir / "transcripts").glob("*.log"))
        assert transcripts, f"no USI transcripts in {self.dir}"
        for path in transcripts:
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                parts = line.split(" ", 3)
                if len(parts) < 4 or line.startswith("#"):
                    continue
                direction, text = parts[1], parts[3]
                if direction == "stderr" or re.match(r"info string (error|warning)", text, flags=re.I):
                    problems.append(f"{path.name}: {line}")
        return problems

    def check(self, expected_games: int) -> None:
        report = self.report()
        print(report)
        problems, load = self.log_problems()
        if load:
            print("  ShogiArena's own load:", *load, sep="\n    ")
        status = self.status
        assert status["status"] == "clean" and status["error_games"] == 0 and status["cancelled"] == 0, (status, report)
        assert status["completed"] == expected_games == len(self.games), (status, report)
        bad = [
            f"{g['game_name']}: {g['game_result']} after {g['num_moves']} plies ({g['end_comment']})"
            for g in self.games
            if BAD_RESULTS.search(g["game_result"])
        ]
        assert not bad and not status["timeouts_by_origin"], f"games lost on time or by an illegal move: {bad}\n{report}"
        over = [m for m in self.clock_use() if m["wall"] > m["budget"]]
        assert not over, f"moves over the clock:\n{report}"
        assert all(g["num_moves"] >= 2 for g in self.games), f"a game ended at once (a resigning engine?):\n{report}"
        assert not problems, "ShogiArena logged warnings or errors:\n" + "\n".join(problems[:40])
        engine = self.engine_problems()
        assert not engine, "koma complained (transcripts):\n" + "\n".join(engine[:40])
        # The results, read back with `shogiarena results summary`.
        summary = self.summary
        assert f"Completed games: {len(self.games)}\n" in self.summary_text, self.summary_text
        assert summary["completed_games"] == summary["total_scheduled_games"] == len(self.games), summary
        assert summary["failed_games"] == 0 and summary["incomplete_games"] == 0 and not summary["failures"], summary
        by_engine = {e["engine"]: e for e in summary["engines"]}
        assert set(by_engine) == {"koma-a", "koma-b"}, by_engine.keys()
        for name, entry in by_engine.items():
            played = [g for g in self.games if name in (g["black"], g["white"])]
            wins = sum(1 for g in played if g["game_result"].startswith("BLACK_WIN" if g["black"] == name else "WHITE_WIN"))
            draws = sum(1 for g in played if g["game_result"].startswith("DRAW"))
            assert (entry["games"], entry["wins"], entry["draws"]) == (len(played), wins, draws), (name, entry, report)
            assert entry["wins"] + entry["draws"] + entry["losses"] == entry["games"], entry


@pytest.fixture(scope="module")
def arena(tmp_path_factory, koma, koma_bin):
    return Arena(tmp_path_factory.mktemp("shogiarena"), koma, koma_bin)


def test_round_robin_byoyomi_then_increment(arena):
    config = arena.config("tournament.yaml")
    assert config["tournament"]["num_parallel"] == 2 and config["tournament"]["scheduler"] == "round_robin"
    assert config["rules"]["time_control"] == {"time_ms": 0, "byoyomi_ms": 300, "expiry_margin_ms": 0}
    runs = [arena.run("tournament", "rr-byoyomi", config)]
    config = arena.config("tournament.yaml")
    config["experiment_name"] = "koma-rr-increment"
    config["rules"]["time_control"] = {"time_ms": 1000, "increment_ms": 100, "expiry_margin_ms": 0}
    runs.append(arena.run("tournament", "rr-increment", config))
    failures = []  # both runs checked, so that a failure reports both time controls
    for run in runs:
        try:
            run.check(GAMES)
        except AssertionError as failure:
            failures.append(f"{run.dir.name}: {failure}")
    assert not failures, "\n\n".join(failures)
    # What koma was sent: the byoyomi form, then the increment form with the clock less the increment.
    byoyomi = (runs[0].dir / "transcripts").glob("*.log")
    assert any(re.search(r" out \S+ go btime 0 wtime 0 byoyomi 300$", t.read_text(), re.M) for t in byoyomi)
    increment = "\n".join(t.read_text() for t in (runs[1].dir / "transcripts").glob("*.log"))
    assert re.search(r" out \S+ go btime 900 wtime 900 binc 100 winc 100$", increment, re.M)
    assert re.search(r" out \S+ setoption name MaxMovesToDraw value 160$", increment, re.M)


def test_sprt(arena):
    config = arena.config("sprt.yaml")
    assert config["sprt"]["num_parallel"] == 2 and config["sprt"]["tested_engine"] == "koma-a"
    run = arena.run("sprt", "sprt", config)
    run.check(GAMES)
    sprt = run.state["sprt_state"]
    assert sprt["games_played"] == GAMES and sprt["wins"] + sprt["draws"] + sprt["losses"] == GAMES, sprt
    tested = {e["engine"]: e for e in run.summary["engines"]}["koma-a"]
    assert (sprt["wins"], sprt["draws"], sprt["losses"]) == (tested["wins"], tested["draws"], tested["losses"]), (sprt, tested)
    print(f"SPRT after {GAMES} games: {sprt}")

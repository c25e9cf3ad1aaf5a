"""`koma pipeline` end to end on a very small config: models are published and self-play switches
to them; killed with SIGKILL mid-run and resumed, nothing is lost; the separate stage processes
(`koma selfplay --run DIR --follow`, `koma train --run DIR --follow`) stop cleanly on Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import h5py
import pytest

CONFIG = """
[run]
minutes = 10
threads = 1
games_per_shard = 2
records = "kifu"

[selfplay]
games_per_worker = 8
leaves_per_game = 2
simulations = 8
cheap_simulations = 2
full_search_fraction = 0.5
max_plies = 96

[train]
batch_size = 32
checkpoint_every = 10
log_every = 5

[train.follow]
min_window_samples = 100
samples_per_new_sample = 4.0
poll_seconds = 0.5
refresh_every_batches = 2

[arena]
games = 2
references = ["greedy"]
curve_models = 1
curve_games = 2
simulations = 4
max_plies = 96
"""


def shards(run):
    d = os.path.join(run, "selfplay")
    if not os.path.isdir(d):
        return []
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".h5"))


def shard_games(path):
    """The seed attribute and every game's moves (as bytes) of a shard."""
    with h5py.File(path, "r") as f:
        seed = f.attrs.get("selfplay_seed")
        seed = seed.decode() if isinstance(seed, bytes) else seed
        offsets, moves = f["game_move_offsets"][()], f["game_moves"][()]
        return seed, [moves[offsets[g]:offsets[g + 1]].tobytes() for g in range(len(offsets) - 1)]


def read_shard(path):
    with h5py.File(path, "r") as f:
        models = [m.decode() if isinstance(m, bytes) else str(m) for m in f["game_model"][()]]
        return len(f["result"]), models, int(f["game_length"][()].sum())


def models(run):
    if not os.path.isdir(os.path.join(run, "models")):
        return []
    return sorted(f for f in os.listdir(os.path.join(run, "models")) if f.endswith(".safetensors"))


def wait_for(predicate, timeout, proc, what, log=None):
    """Waits for `predicate`; fails with the process's stderr (piped, or in the file `log`) when
    it exits first or `timeout` seconds pass."""
    def stderr():
        _, err = proc.communicate()
        return (open(log).read() if log else err or "")[-3000:]
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        if proc.poll() is not None:
            pytest.fail(f"koma exited ({proc.returncode}) before {what}:\n{stderr()}")
        time.sleep(0.5)
    proc.kill()
    pytest.fail(f"timed out waiting for {what}:\n{stderr()}")


@pytest.fixture()
def config(tmp_path):
    path = tmp_path / "tiny-test.toml"
    path.write_text(CONFIG)
    return str(path)


def test_pipeline_publishes_switches_survives_kill_and_resumes(koma_bin, tmp_path, config):
    run = str(tmp_path / "run")
    env = dict(os.environ, RUST_LOG="info")
    log = tmp_path / "pipeline.log"  # a file, not a pipe nobody reads while it fills
    with open(log, "w") as err:
        proc = subprocess.Popen([koma_bin, "pipeline", "--config", config, "--run", run, "--no-report"],
                                stdout=subprocess.DEVNULL, stderr=err, env=env)
    # Model 0 plus at least two trained models, and games played by a trained one.
    def switched():
        if len(models(run)) < 3:
            return False
        return any(m != "model-00000000" for s in shards(run) for m in read_shard(s)[1])
    wait_for(switched, 240, proc, "two published models and self-play on a new one", log=log)
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    # Nothing half-written: every shard opens, every checkpoint has its sidecar (a temporary the
    # kill left behind carries no final name, and nothing reads it).
    before = {s: read_shard(s) for s in shards(run)}
    assert before, "no shards"
    for m in models(run):
        with open(os.path.join(run, "models", m[: -len(".safetensors")] + ".json")) as f:
            json.load(f)
    samples_before = sum(n for n, _, _ in before.values())
    models_before = len(models(run))
    played = {m for _, ms, _ in before.values() for m in ms}
    assert "model-00000000" in played and len(played) >= 2, played
    state = json.load(open(os.path.join(run, "train", "state", "state.json")))
    step_at_kill = state["step"]
    assert step_at_kill >= 10
    with open(os.path.join(run, "train", "metrics.jsonl")) as f:
        assert any(json.loads(line)["step"] > 0 for line in f if line.strip())
    records = os.listdir(os.path.join(run, "selfplay", "records"))
    assert any(r.endswith(".kifu") for r in records)

    # A new run in the same directory is refused; --resume continues it.
    refused = subprocess.run([koma_bin, "pipeline", "--config", config, "--run", run], capture_output=True, text=True)
    assert refused.returncode != 0 and "--resume" in refused.stderr
    # Stopped by a step count, not a time (a loaded machine takes longer, never fewer steps):
    # 20 more steps publish two more models (checkpoint_every = 10).
    resumed = subprocess.run([koma_bin, "pipeline", "--run", run, "--resume", "--steps", str(step_at_kill + 20), "--json"],
                             capture_output=True, text=True, timeout=900, env=env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert summary["resumed"] and summary["stop_reason"] == "steps_reached"
    assert summary["train"]["resumed"] and summary["train"]["start_step"] == step_at_kill
    assert summary["train"]["final_step"] == step_at_kill + 20
    assert summary["selfplay"]["models"][0] != "model-00000000"  # starts on the newest model
    # Every shard from before the kill is still there, unchanged. (Whether self-play finished a
    # new shard within the 20 steps depends on the machine's load: the trainer may take them all
    # from the window it already has, so only "nothing lost" is asserted.)
    after = {s: read_shard(s) for s in shards(run)}
    for s, content in before.items():
        assert after[s] == content
    assert sum(n for n, _, _ in after.values()) >= samples_before
    assert len(models(run)) > models_before
    # The report ran: last model against model 0 and greedy, ratings written, plots drawn.
    report = summary["report"]
    assert [label for label, _ in report["matches"]][:2] == ["last model vs model 0 (2 games)", "last model vs greedy (2 games)"]
    ratings = json.load(open(os.path.join(run, "arena", "ratings.json")))
    assert any(r["player"] == "model-00000000@4" and r["elo"] == 0 for r in ratings)
    for png in ("train-loss.png", "train-accuracy.png", "elo.png"):
        assert os.path.getsize(os.path.join(run, png)) > 1000
    assert any(f.startswith("pipeline-") for f in os.listdir(os.path.join(run, "logs")))


def test_stages_run_as_separate_processes_and_stop_on_ctrl_c(koma_bin, tmp_path, config):
    run = str(tmp_path / "run")
    # A run directory with model 0, made by a pipeline that stops at once.
    made = subprocess.run([koma_bin, "pipeline", "--config", config, "--run", run, "--steps", "1", "--no-report", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr[-3000:]
    n0 = sum(read_shard(s)[0] for s in shards(run))
    selfplay = subprocess.Popen([koma_bin, "selfplay", "--run", run, "--follow", "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    trainer = subprocess.Popen([koma_bin, "train", "--run", run, "--follow", "--json"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    n_models = len(models(run))
    before = set(shards(run))
    def both_worked():
        # New models from the trainer, and new shards with games of two models: the self-play
        # process has followed the trainer (it looks for new models every 2 s, so new models
        # alone do not mean it has switched yet).
        new = [s for s in shards(run) if s not in before]
        played_with = {m for s in new for m in read_shard(s)[1]}
        return len(models(run)) >= n_models + 2 and len(new) >= 2 and len(played_with) >= 2
    wait_for(both_worked, 300, trainer, "new models from the trainer and self-play games with one of them")
    for p in (selfplay, trainer):
        p.send_signal(signal.SIGINT)
    outs = [p.communicate(timeout=120) for p in (selfplay, trainer)]
    assert selfplay.returncode == 0, outs[0][1][-3000:]
    assert trainer.returncode == 0, outs[1][1][-3000:]
    sp = json.loads(outs[0][0].strip().splitlines()[-1])
    assert sp["selfplay"]["games_written"] > 0 and len(sp["selfplay"]["models"]) >= 2
    tr = json.loads(outs[1][0].strip().splitlines()[-1])
    assert tr["stopped"] and tr["resumed"] and tr["final_step"] > 1
    # The trainer wrote a checkpoint and its state on the way out.
    state = json.load(open(os.path.join(run, "train", "state", "state.json")))
    assert state["step"] == tr["final_step"]
    assert sum(read_shard(s)[0] for s in shards(run)) > n0


def test_two_selfplay_processes_on_one_run_play_different_games(koma_bin, tmp_path, config):
    """Two `koma selfplay --run DIR --follow` processes with the same model and config (no trainer,
    so both play model 0 throughout) draw their own seeds and play different games; each shard
    records its process's seed. Before each process drew its own seed, every game of the second
    repeated one of the first."""
    run = str(tmp_path / "run")
    made = subprocess.run([koma_bin, "pipeline", "--config", config, "--run", run, "--steps", "1", "--no-report", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr[-3000:]
    before = set(shards(run))
    procs = [subprocess.Popen([koma_bin, "selfplay", "--run", run, "--follow", "--json"],
                              env=dict(os.environ, KOMA_HOST=f"host-{k}"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in "ab"]
    by_host = lambda h: [s for s in shards(run) if os.path.basename(s).startswith(f"selfplay-{h}-") and s not in before]
    try:
        for k, p in zip("ab", procs):
            wait_for(lambda: len(by_host(f"host-{k}")) >= 2, 300, p, f"two shards from host-{k}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in procs:
            p.communicate(timeout=120)
    games = {}
    for k in "ab":
        seeds = {shard_games(s)[0] for s in by_host(f"host-{k}")}
        assert len(seeds) == 1 and None not in seeds, seeds
        games[k] = (seeds.pop(), [g for s in by_host(f"host-{k}") for g in shard_games(s)[1]])
    assert games["a"][0] != games["b"][0], "both processes drew the same seed"
    repeated = set(games["a"][1]) & set(games["b"][1])
    assert not repeated, f"{len(repeated)} of {len(games['b'][1])} games of one process repeat the other's"


def test_reaching_the_step_count_ends_the_run_normally_with_its_report(koma_bin, tmp_path, config):
    # The trainer finishing its steps is a normal end (not "interrupted"), so the report runs;
    # minutes given as well, the run ends at whichever limit comes first (the docs' promise).
    run = str(tmp_path / "run")
    done = subprocess.run([koma_bin, "pipeline", "--config", config, "--run", run, "--steps", "12", "--minutes", "30",
                           "--json"],
                          capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["stop_reason"] == "steps_reached", summary["stop_reason"]
    assert summary["train"]["final_step"] == 12
    assert summary["report"] is not None


def test_an_evaluation_budget_ends_the_run_and_counts_across_resumes(koma_bin, tmp_path, config):
    # --evals is work, not time: the run stops once self-play has evaluated that many positions
    # over the whole run (a resumed run goes on from the saved count), and the summary names the
    # machine and its speed, so that the same work can be replayed elsewhere.
    run = str(tmp_path / "run")

    def pipeline(*args):
        # One host name for all three processes, so that the leftover below is "this host's".
        done = subprocess.run([koma_bin, "pipeline", "--run", run, "--no-report", "--json", *args],
                              capture_output=True, text=True, timeout=300, env=dict(os.environ, KOMA_HOST="soakhost"))
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    first = pipeline("--config", config, "--evals", "3000")
    assert first["stop_reason"] == "eval_limit", first["stop_reason"]
    assert 3000 <= first["evals"] == first["evals_total"], first
    assert first["evals_per_second"] > 0 and first["machine"]["cores"] >= 1 and first["machine"]["cpu"], first
    with open(os.path.join(run, "evals.json")) as f:
        assert json.load(f)["evals"] == first["evals_total"]
    # A temporary a killed writer of this host left (a process id no process has) is swept at the
    # resume; one of another host sharing the directory is not.
    dead = 2**32 - 7
    ours = os.path.join(run, "models", f".model-00009999.safetensors.tmp-soakhost-{dead}-0badcafe-0")
    theirs = os.path.join(run, "selfplay", f".shard.h5.tmp-otherhost-{dead}-0badcafe-0")
    for path in (ours, theirs):
        with open(path, "wb") as f:
            f.write(b"half")
    second = pipeline("--resume", "--evals", str(first["evals_total"] + 3000))
    assert not os.path.exists(ours) and os.path.exists(theirs)
    os.remove(theirs)
    assert second["stop_reason"] == "eval_limit", second["stop_reason"]
    assert second["evals_total"] == first["evals_total"] + second["evals"], (first, second)
    assert second["evals_total"] >= first["evals_total"] + 3000
    # Already spent: a resumed run stops at once.
    third = pipeline("--resume", "--evals", "3000")
    assert third["stop_reason"] == "eval_limit" and third["evals_total"] >= second["evals_total"]
    # Every checkpoint the trainer wrote is placed by the run's evaluations when it appeared.
    with open(os.path.join(run, "checkpoint-evals.jsonl")) as f:
        notes = {n["step"]: n["evals"] for n in map(json.loads, f)}
    steps = {int(m.split("-")[1].split(".")[0]) for m in models(run)} - {0}
    assert steps and set(notes) == steps, (notes, steps)
    evals = [notes[s] for s in sorted(notes)]
    assert evals == sorted(evals) and evals[-1] <= third["evals_total"], notes


def test_two_hosts_feed_one_trainer_and_a_second_trainer_is_refused(koma_bin, tmp_path, config):
    """Processes posing as two hosts (KOMA_HOST) share one run directory: their shards get
    distinct names and both reach the one trainer; a trainer started from the other host while
    the first runs is refused with the holder named."""
    run = str(tmp_path / "run")
    made = subprocess.run([koma_bin, "pipeline", "--config", config, "--run", run, "--steps", "1", "--no-report", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr[-3000:]
    n0 = sum(read_shard(s)[0] for s in shards(run))
    as_host = lambda host: dict(os.environ, KOMA_HOST=host)
    trainer = subprocess.Popen([koma_bin, "train", "--run", run, "--follow", "--json"], env=as_host("host-a"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    selfplay = {h: subprocess.Popen([koma_bin, "selfplay", "--run", run, "--follow", "--json"], env=as_host(h),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for h in ("host-a", "host-b")}
    try:
        wait_for(lambda: os.path.exists(os.path.join(run, "trainer.lease")), 120, trainer, "the trainer's lease")
        second = subprocess.run([koma_bin, "train", "--run", run, "--follow"], env=as_host("host-b"),
                                capture_output=True, text=True, timeout=120)
        assert second.returncode != 0
        assert "being trained by host-a" in second.stderr and "trainer.lease" in second.stderr, second.stderr[-3000:]
        by_host = lambda h: [s for s in shards(run) if os.path.basename(s).startswith(f"selfplay-{h}-")]
        wait_for(lambda: len(by_host("host-a")) >= 2 and len(by_host("host-b")) >= 2, 300, trainer, "shards from both hosts")
        # host-a stops; the trainer must count samples beyond everything host-a (and the first run) wrote.
        selfplay["host-a"].send_signal(signal.SIGINT)
        assert selfplay["host-a"].wait(timeout=120) == 0
        fixed = n0 + sum(read_shard(s)[0] for s in by_host("host-a"))

        def counted_host_b():
            path = os.path.join(run, "train", "metrics.jsonl")
            if not os.path.exists(path):
                return False
            return any(json.loads(l)["total_samples"] > fixed for l in open(path) if l.strip())

        wait_for(counted_host_b, 300, trainer, "the trainer counting host-b's samples")
    finally:
        for p in (trainer, *selfplay.values()):
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in (trainer, *selfplay.values()):
            p.communicate(timeout=120)
    assert trainer.returncode == 0
    # The lease is released when the trainer ends.
    assert not os.path.exists(os.path.join(run, "trainer.lease"))


def test_a_trainer_without_a_budget_refuses_a_schedule_over_the_budget_before_writing(koma_bin, tmp_path):
    """`koma train --run DIR` has no clock: without --steps a cosine over the run's budget
    (`decay_steps = 0`) is refused before the process writes model 0 or starts anything (it
    wrote model 0, then refused)."""
    config = tmp_path / "over-budget.toml"
    config.write_text(CONFIG + '\n[train.lr]\nschedule = "cosine"\ndecay_steps = 0\n')
    run = str(tmp_path / "run")
    made = subprocess.run([koma_bin, "pipeline", "--config", str(config), "--run", run, "--prepare", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr[-3000:]
    for f in os.listdir(os.path.join(run, "models")):
        os.remove(os.path.join(run, "models", f))
    refused = subprocess.run([koma_bin, "train", "--run", run, "--follow"], capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0
    assert "decay_steps = 0" in refused.stderr and "--steps" in refused.stderr, refused.stderr[-3000:]
    assert models(run) == [], "model 0 was written before the refusal"

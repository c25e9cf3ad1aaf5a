"""Smoke tests of the koma binary: it starts, and it loads the same libtorch as this venv's torch."""

import json
import os
import signal
import subprocess

import torch


def test_version(koma):
    out = koma("--version").stdout
    assert out.startswith("koma ")


def test_info_matches_python_torch(koma):
    # No LD_LIBRARY_PATH: the binary must find libtorch through its RUNPATH alone.
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    info = json.loads(koma("info", "--json", env=env).stdout)
    assert info["libtorch"]["version"] == torch.__version__
    assert os.path.samefile(info["libtorch"]["dir"], os.path.join(os.path.dirname(torch.__file__), "lib"))
    # A CUDA build of torch must stay a CUDA build once linked into koma.
    assert info["libtorch"]["cuda_linked"] == (torch.version.cuda is not None)
    assert info["cuda"]["available"] == torch.cuda.is_available()
    assert info["cuda"]["device_count"] == torch.cuda.device_count()
    assert info["device"] == ("cuda:0" if torch.cuda.is_available() else "cpu")


def test_config_check_names_the_bad_field_and_keeps_going(koma_bin, tmp_path):
    """`koma config check` validates every file it is given and names what is wrong in each."""
    good = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "tiny-cpu.toml")
    typo = tmp_path / "typo.toml"
    typo.write_text("[selfplay]\nsimulation = 64\n")
    wrong_type = tmp_path / "wrong-type.toml"
    wrong_type.write_text('[train.lr]\nbase = "fast"\n')
    result = subprocess.run(
        [koma_bin, "config", "check", "--json", good, str(typo), str(wrong_type)], capture_output=True, text=True
    )
    assert result.returncode == 1
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["valid"] for line in lines] == [True, False, False]
    assert "simulation" in lines[1]["error"] and "typo.toml" in lines[1]["error"]
    assert "base" in lines[2]["error"] or "[train]" in lines[2]["error"]
    assert "2 of 3" in result.stderr


def test_config_show_fills_in_defaults_and_reads_back(koma, tmp_path):
    """`--show` prints a complete config that is itself valid and has every table."""
    import tomllib

    minimal = tmp_path / "minimal.toml"
    minimal.write_text("[run]\nminutes = 5\n")
    shown = koma("config", "check", "--show", str(minimal)).stdout
    full = tomllib.loads(shown)
    assert full["run"]["minutes"] == 5.0
    assert {"run", "model", "selfplay", "train", "gating", "arena"} <= set(full)
    assert "search" in full["selfplay"] and "optimizer" in full["train"]
    again = tmp_path / "full.toml"
    again.write_text(shown)
    koma("config", "check", str(again))


def test_config_schema_describes_every_table(koma):
    schema = json.loads(koma("config", "schema").stdout)
    assert set(schema["properties"]) == {"run", "model", "selfplay", "train", "gating", "arena"}
    assert schema["additionalProperties"] is False
    experiment = json.loads(koma("config", "schema", "--experiment").stdout)
    assert "variant" in experiment["properties"]


def test_output_closed_early_is_not_a_crash(koma_bin):
    """`koma … | head` ends quietly when the reader goes away (SIGPIPE), with no panic and no error."""
    proc = subprocess.Popen(
        [koma_bin, "rules"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    # Input that fits in the pipe's buffer (54 kB: no deadlock while nobody reads koma's output)
    # and asks for far more output than one buffers (about 1 MB), so koma is still writing when
    # the reader leaves.
    proc.stdin.write(b"position startpos\n" * 3000)
    proc.stdin.close()
    proc.stdout.readline()
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait() == -signal.SIGPIPE, stderr
    assert "panicked" not in stderr and "error" not in stderr, stderr

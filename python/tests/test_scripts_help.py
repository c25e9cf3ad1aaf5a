"""Every script in scripts/ asked for help prints its usage and does nothing else: no install, no
build, no folder made where it was run (a newcomer's first `--help` must be safe)."""

import os
import subprocess

import pytest

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts")
# scripts/koma passes its arguments to koma (whose --help is clap's); lib.sh is sourced, not run.
NOT_COMMANDS = {"koma", "lib.sh"}


def commands():
    return sorted(f for f in os.listdir(SCRIPTS) if f not in NOT_COMMANDS and os.access(os.path.join(SCRIPTS, f), os.X_OK))


@pytest.mark.parametrize("flag", ["--help", "-h"])
@pytest.mark.parametrize("script", commands())
def test_help_prints_usage_and_does_nothing_else(script, flag, tmp_path):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    done = subprocess.run([os.path.join(SCRIPTS, script), flag], cwd=cwd, capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, HOME=str(tmp_path / "home")))
    assert done.returncode == 0, done.stderr[-2000:]
    usage = done.stdout
    assert len(usage.splitlines()) >= 2 and "scripts/" in usage, usage
    assert not list(cwd.iterdir()), f"{script} {flag} made {list(cwd.iterdir())}"
    assert not (tmp_path / "home").exists(), f"{script} {flag} wrote into HOME"


def test_every_script_is_covered():
    assert {"bootstrap", "build-portable", "gpu-check", "install-engine", "load-check", "soak", "test"} <= set(commands())

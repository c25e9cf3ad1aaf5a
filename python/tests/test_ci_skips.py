"""With CI=true a skip fails the run (conftest.py), so that a CI run where the Slurm cluster never
came up or an oracle package is missing cannot look green; opt-in skips (KOMA_SLOW_TESTS) stay
skips, and outside CI every skip only shows its reason. A test over its time limit fails by name
and the run goes on."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

SKIPPING = '''
import pytest
def test_skipped(): pytest.skip("the cluster never came up")
@pytest.mark.skipif(True, reason="slow; set KOMA_SLOW_TESTS=1")
def test_opt_in(): pass
def test_passes(): pass
'''
MISSING_PACKAGE = 'import pytest\npytest.importorskip("no_such_package_here")\ndef test_never(): pass\n'


def run_pytest(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess:
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_skipping.py").write_text(SKIPPING)
    (tmp_path / "test_missing.py").write_text(MISSING_PACKAGE)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip


def test_in_ci_a_skip_fails_the_run_and_is_named(tmp_path):
    p = run_pytest(tmp_path, "true")
    assert p.returncode == 1, p.stdout
    assert "test_skipping.py::test_skipped: Skipped: the cluster never came up" in p.stdout
    assert "test_missing.py" in p.stdout and "no_such_package_here" in p.stdout
    assert "test_opt_in" not in p.stdout.split("skips in CI")[1], "an opt-in skip is no failure"
    assert "1 failed, 1 passed" in p.stdout


def test_outside_ci_skips_show_their_reasons_and_pass(tmp_path):
    p = run_pytest(tmp_path, None)
    assert p.returncode == 0, p.stdout
    assert "SKIPPED" in p.stdout and "the cluster never came up" in p.stdout


HANGING = """
import time
import pytest
@pytest.mark.timeout(1)
def test_hangs(): time.sleep(30)
def test_after_it(): pass
"""


def test_a_test_over_its_time_limit_fails_by_name_and_the_run_goes_on(tmp_path):
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_hanging.py").write_text(HANGING)
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, timeout=25,
    )  # fmt: skip
    assert p.returncode == 1, p.stdout
    assert "test_hanging.py::test_hangs: the test ran over its 1 s limit" in p.stdout, p.stdout
    assert "1 failed, 1 passed" in p.stdout, p.stdout

import os
import subprocess

import pytest


@pytest.fixture(scope="session")
def koma_bin() -> str:
    """Path of the `koma` binary under test; scripts/test builds it and sets KOMA_BIN."""
    path = os.environ.get("KOMA_BIN")
    if not path or not os.access(path, os.X_OK):
        pytest.fail("KOMA_BIN is not set to an executable koma binary: run the tests with scripts/test")
    return path


@pytest.fixture(scope="session")
def koma(koma_bin):
    """Runs koma with the given arguments and returns the finished process (check=True)."""

    def run(*args: str, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run([koma_bin, *args], capture_output=True, text=True, check=True, **kwargs)

    return run


# In CI (`CI=true`, as CI services set it) a skip is a failure: a Slurm cluster that never came up,
# a missing oracle package or a TensorBoard reader that is not installed must not look green.
# Only skips that a developer opts into on purpose (`KOMA_SLOW_TESTS`) stay skips. Outside CI,
# scripts/test prints every skip's reason (`pytest -rs`).
OPT_IN_SKIPS = ("KOMA_SLOW_TESTS",)


def _strict() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


_skipped_in_ci: list[str] = []


def _fail_skip(report, collecting: bool) -> None:
    if not (_strict() and report.skipped) or hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if any(name in reason for name in OPT_IN_SKIPS):
        return
    _skipped_in_ci.append(f"{report.nodeid}: {reason}")
    if not collecting:  # a skipped module stays skipped, so that the other modules still run
        report.outcome = "failed"
        report.longrepr = f"skipped in CI (CI=true), which counts as a failure: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_skip(outcome.get_result(), collecting=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_skip(outcome.get_result(), collecting=True)


def pytest_terminal_summary(terminalreporter):
    if _skipped_in_ci:
        terminalreporter.section("skips in CI (each one fails the run)")
        for line in _skipped_in_ci:
            terminalreporter.write_line(line)


def pytest_sessionfinish(session, exitstatus):
    if _skipped_in_ci and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED

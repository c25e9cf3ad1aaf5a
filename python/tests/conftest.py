import os
import signal
import subprocess
import threading
from contextlib import contextmanager

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
OPT_IN_SKIPS = ("KOMA_SLOW_TESTS", "KOMA_LOAD_CHECK")


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


# Every test has a time limit, for its setup, its run and its teardown each: KOMA_TEST_TIMEOUT
# seconds (900 by default, above the slowest test's own bounds; 0 turns it off), or its own with
# `@pytest.mark.timeout(SECONDS)`. A hang then fails that test, by name, and the run goes on,
# instead of blocking CI until its 90-minute limit. A process the test waits on
# (`subprocess.run`) is killed when the limit interrupts the wait.
DEFAULT_TIMEOUT = float(os.environ.get("KOMA_TEST_TIMEOUT", "900"))


class TimeLimitExceeded(Exception):
    """A test (or its setup or teardown) ran over its time limit."""


def pytest_configure(config):
    config.addinivalue_line("markers", "timeout(seconds): this test's time limit (KOMA_TEST_TIMEOUT otherwise)")


@contextmanager
def _time_limit(item, phase: str):
    marker = item.get_closest_marker("timeout")
    limit = float(marker.args[0]) if marker else DEFAULT_TIMEOUT
    if limit <= 0 or not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum, frame):
        raise TimeLimitExceeded(f"{item.nodeid}: {phase} ran over its {limit:g} s limit (KOMA_TEST_TIMEOUT, or @pytest.mark.timeout)")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    with _time_limit(item, "setup"):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    with _time_limit(item, "the test"):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    with _time_limit(item, "teardown"):
        yield

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

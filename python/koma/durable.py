"""The durable write of koma's Python side, the same steps as crates/base/src/durable.rs: the
bytes go to a hidden temporary file beside the final one (same directory, so the rename is
atomic), the temporary is fsynced, renamed over the final name, and the directory is fsynced so
that the rename survives a power loss. A reader finds the old file or the new one, never part of
one; a failure before the rename leaves the old file as it was and removes the temporary.

`staged(path)` gives writers that need a path of their own (matplotlib's savefig, torch's ONNX
export) the temporary to write to; `write_bytes(path, data)` is the whole write for bytes in
memory. Every plot, report and export koma publishes from Python goes through one of them.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import warnings
from collections.abc import Iterator

#: The steps, in order; a DurableError names the one that failed.
STEPS = ("create", "write", "sync_file", "rename", "sync_dir")

#: Tests set this to a step name to make the next write fail there (as the Rust side's
#: `fault-injection` feature does); it is cleared when it fires.
fail_next: str | None = None


class DurableError(OSError):
    """A durable write of `path` failed at `step`; nothing was published."""

    def __init__(self, path: str, step: str, cause: BaseException):
        super().__init__(f"writing {path}: {step.replace('_', ' ')} failed: {cause}")
        self.path, self.step, self.cause = path, step, cause


def _fault(step: str) -> None:
    global fail_next
    if fail_next == step:
        fail_next = None
        raise OSError(f"injected failure at {step}")


def _sync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def staged(path: str, mode: int | None = None) -> Iterator[str]:
    """Yields a temporary path beside `path`; when the block ends without an exception, the file
    written there is fsynced and renamed over `path`, and the directory fsynced. `mode` (default:
    what a new file gets, 0666 less the umask) is set before the rename."""
    path = os.path.abspath(path)
    directory, name = os.path.split(path)
    step = "create"
    tmp = None
    try:
        _fault("create")
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
        os.close(fd)
        step = "write"
        yield tmp
        _fault("write")
        step = "sync_file"
        _fault("sync_file")
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        step = "rename"
        _fault("rename")
        os.replace(tmp, path)
        tmp = None
    except DurableError:
        raise
    except Exception as e:  # noqa: BLE001 — any failure of the writer or a step is this write's
        if step == "write" and not isinstance(e, OSError):
            raise
        raise DurableError(path, step, e) from e
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.remove(tmp)
    try:
        _fault("sync_dir")
        _sync_dir(directory)
    except OSError as e:
        # Published by now: only the rename's survival of a power loss is in doubt. Said, not
        # raised, as the Rust side does.
        warnings.warn(str(DurableError(path, "sync_dir", e)), stacklevel=3)


def write_bytes(path: str, data: bytes) -> None:
    """Publishes `data` as `path`, durably."""
    with staged(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)


def savefig(fig, path: str, **kwargs) -> None:
    """matplotlib's `fig.savefig(path)`, published durably (the format from `path`'s suffix)."""
    fmt = kwargs.pop("format", None) or os.path.splitext(path)[1].lstrip(".") or None
    with staged(path) as tmp:
        fig.savefig(tmp, format=fmt, **kwargs)

"""koma.durable, the staged write every file koma publishes from Python goes through (plots, soak
and GPU reports, the ONNX export): a failure at any step before the rename leaves the old file as
it was and no temporary behind; a failure at the directory sync is said, with the file published."""

import os
import stat
import sys
import warnings

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from koma import durable  # noqa: E402


def leftovers(directory):
    return sorted(f for f in os.listdir(directory) if f.endswith(".tmp"))


def test_a_write_replaces_the_file_whole_with_the_usual_mode(tmp_path):
    path = tmp_path / "report.md"
    path.write_text("old")
    durable.write_bytes(str(path), b"new")
    assert path.read_bytes() == b"new"
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o666 & ~umask, "a private temporary's mode leaked"
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("step", ["create", "write", "sync_file", "rename"])
def test_a_failure_before_the_rename_keeps_the_old_file_and_no_temporary(tmp_path, step):
    path = tmp_path / "report.json"
    path.write_text("old")
    durable.fail_next = step
    with pytest.raises(durable.DurableError) as failed:
        durable.write_bytes(str(path), b"new")
    assert failed.value.step == step and str(path) in str(failed.value)
    assert durable.fail_next is None, "the injected fault fired once"
    assert path.read_text() == "old"
    assert leftovers(tmp_path) == []


def test_a_failed_directory_sync_is_said_with_the_file_published(tmp_path):
    path = tmp_path / "soak.png"
    durable.fail_next = "sync_dir"
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        durable.write_bytes(str(path), b"png")
    assert path.read_bytes() == b"png"
    assert any("sync dir" in str(w.message) and str(path) in str(w.message) for w in said), [str(w.message) for w in said]


def test_a_writer_that_fails_leaves_nothing_and_its_error_passes_through(tmp_path):
    path = tmp_path / "model.onnx"
    with pytest.raises(ValueError, match="checker"):
        with durable.staged(str(path)) as tmp:
            with open(tmp, "wb") as f:
                f.write(b"half")
            raise ValueError("the checker refused it")
    assert not path.exists() and leftovers(tmp_path) == []
    # A writer's own I/O error is the write's, named by its step.
    with pytest.raises(durable.DurableError) as failed:
        with durable.staged(str(path)) as tmp:
            raise OSError(28, "No space left on device")
    assert failed.value.step == "write" and "No space left" in str(failed.value)
    assert leftovers(tmp_path) == []


def test_a_figure_is_published_in_the_format_its_name_says(tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    path = tmp_path / "elo-over-time.png"
    durable.savefig(fig, str(path), dpi=50)
    plt.close(fig)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert leftovers(tmp_path) == []

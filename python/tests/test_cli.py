"""Smoke tests of the koma binary: it starts, and it loads the same libtorch as this venv's torch."""

import json
import os

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

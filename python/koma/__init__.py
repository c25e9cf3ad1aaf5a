"""koma's Python side: the PyTorch mirror of the network (``koma.model``), ONNX export
(``koma.export``), and cshogi-based oracles used by the tests (``koma.dlshogi_oracle``).

Submodules are imported on demand so that ``import koma`` stays cheap (no torch import).
"""

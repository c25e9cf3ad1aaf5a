"""Bulk-counting perft through cshogi, the reference for `koma bench rules`.

Reads a JSON list of {"sfen": ..., "depth": ...} on stdin and prints one JSON object per entry
with the node count and the time taken. cshogi (GPL-3.0) is only run as an external program.
"""

import json
import sys
import time

import cshogi


def perft(board: cshogi.Board, depth: int) -> int:
    moves = board.legal_moves
    if depth == 1:
        return len(moves)
    nodes = 0
    for move in moves:
        board.push(move)
        nodes += perft(board, depth - 1)
        board.pop()
    return nodes


def main() -> None:
    for job in json.load(sys.stdin):
        board = cshogi.Board(job["sfen"])
        start = time.perf_counter()
        nodes = perft(board, job["depth"])
        seconds = time.perf_counter() - start
        print(json.dumps({"sfen": job["sfen"], "depth": job["depth"], "nodes": nodes, "seconds": seconds}), flush=True)


if __name__ == "__main__":
    main()

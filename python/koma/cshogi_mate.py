"""cshogi's df-pn mate search, the reference for `koma bench mate`.

Reads a JSON list of {"sfen": ..., "depth": ..., "nodes": ...} on stdin and prints one JSON object
per entry: whether the side to move mates, whether the search decided (a mate, or no mate found
below the node limit), the nodes searched, the time taken and the length of its mate line. A fresh solver per problem, as koma
starts each problem with an empty table. cshogi (GPL-3.0) is only run as an external program.
"""

import json
import sys
import time

import cshogi


def main() -> None:
    for job in json.load(sys.stdin):
        board = cshogi.Board(job["sfen"])
        start = time.perf_counter()
        solver = cshogi.DfPn(job["depth"], job["nodes"])
        mate = solver.search(board)
        seconds = time.perf_counter() - start
        nodes = solver.searched_node
        decided = bool(mate) or nodes < job["nodes"]
        plies = len(solver.get_pv(board)) if mate else 0
        print(json.dumps({"mate": bool(mate), "decided": decided, "nodes": nodes, "seconds": seconds, "plies": plies}),
              flush=True)


if __name__ == "__main__":
    main()

"""A scripted USI engine for koma's arena tests: it plays the first legal move (cshogi) and, by its
USI options, misbehaves at move N of each game: sleeps past its clock, answers garbage or dies.
The tests copy it to a path with a space and start it through `koma arena --player usi:…`."""

import sys
import time

import cshogi

OPTIONS = {"MisbehaveAt": "0", "Misbehave": "sleep", "SleepSeconds": "2"}


def main():
    board = cshogi.Board()
    moves = 0
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        command = words[0]
        if command == "usi":
            print("id name fake engine")
            print("option name MisbehaveAt type spin default 0 min 0 max 1000")
            print("option name Misbehave type combo default sleep var sleep var garbage var die")
            print("option name SleepSeconds type string default 2")
            print("usiok")
        elif command == "setoption" and len(words) >= 5 and words[1] == "name" and words[3] == "value":
            OPTIONS[words[2]] = " ".join(words[4:])
        elif command == "isready":
            print("readyok")
        elif command == "usinewgame":
            moves = 0
        elif command == "position":
            board.set_position(" ".join(words[1:]))
        elif command == "go":
            moves += 1
            if moves == int(OPTIONS["MisbehaveAt"]):
                kind = OPTIONS["Misbehave"]
                if kind == "die":
                    sys.exit(7)
                if kind == "garbage":
                    print("bestmove \x01garbage\x02", flush=True)
                    continue
                time.sleep(float(OPTIONS["SleepSeconds"]))
            legal = list(board.legal_moves)
            print("bestmove " + (cshogi.move_to_usi(legal[0]) if legal else "resign"))
        elif command == "quit":
            return
        sys.stdout.flush()


if __name__ == "__main__":
    main()

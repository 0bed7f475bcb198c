#!/usr/bin/python3
"""A ZeroMQ REP echo peer on the system's own libzmq, through pyzmq.

Started by the interop test the way ipc-matrix starts its own peers,
`zmq_rep_peer.py serve --config <json>`: it connects to the measuring side's REQ
socket, echoes every message unchanged, answers the empty goodbye and exits.
Its libzmq version goes to stderr, so a failure shows which library spoke.
"""

import json
import sys

import zmq


def endpoint(address):
    if address["transport"] == "tcp":
        return "tcp://" + address["addr"]
    if address["transport"] == "local":
        return "ipc://" + address["path"]
    sys.exit(f"zmq_rep_peer.py: no ZeroMQ endpoint for {address}")


def main():
    if len(sys.argv) != 4 or sys.argv[1:3] != ["serve", "--config"]:
        sys.exit("usage: zmq_rep_peer.py serve --config <json>")
    config = json.loads(sys.argv[3])
    idle = config["idle_timeout"]
    idle_ms = int(idle["secs"] * 1000 + idle["nanos"] // 1_000_000)
    print(f"pyzmq {zmq.pyzmq_version()}, libzmq {zmq.zmq_version()}", file=sys.stderr)
    context = zmq.Context()
    socket = context.socket(zmq.REP)
    socket.setsockopt(zmq.RCVTIMEO, idle_ms)
    socket.setsockopt(zmq.SNDTIMEO, idle_ms)
    socket.setsockopt(zmq.LINGER, 1000)
    socket.connect(endpoint(config["address"]))
    while True:
        message = socket.recv()
        socket.send(message)
        if not message:
            break
    socket.close()
    context.term()


if __name__ == "__main__":
    main()

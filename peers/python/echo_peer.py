#!/usr/bin/env python3
"""py-echo-peer: a reference external peer of ipc-matrix, peer protocol v1 (stdlib only).

    echo_peer.py [--corrupt N:OFFSET] serve --config '<json>'

Connects to the measuring side (tcp, local or udp), echoes every message byte for byte
until the goodbye (an empty message), then exits 0. Any error: one line on stderr,
"py-echo-peer: <what>", exit 2. --corrupt flips (xor 0xFF) byte OFFSET of the reply to
message N (0-based, every message counted), for the fault test that proves a wrong reply
byte is caught. Messages are numbered the same way in error lines.
"""

import ctypes
import ipaddress
import json
import os
import re
import socket
import sys

NAME = "py-echo-peer"
USAGE = f"usage: {NAME} [--corrupt N:OFFSET] serve --config <json>"
HELLO = b"ipc-matrix udp hello v1"
UDP_MAX = 65507
MAX_MESSAGE_LIMIT = 1 << 40  # the schema's maximum
PR_SET_PDEATHSIG = 1
STRING_KEYS = ("cell", "kind", "transport", "address")
INTEGER_KEYS = ("max_message", "idle_timeout_ms", "parent_pid")


class PeerError(Exception):
    """An error for the one stderr line; exit status 2."""


def parse_u64(text):
    if not re.fullmatch(r"[0-9]+", text) or int(text) >= 1 << 64:
        raise ValueError(text)
    return int(text)


def parse_args(argv):
    corrupt = None
    i = 0
    while i < len(argv) and argv[i] != "serve":
        if argv[i] != "--corrupt" or i + 1 >= len(argv) or corrupt is not None:
            raise PeerError(USAGE)
        index, sep, offset = argv[i + 1].partition(":")
        try:
            corrupt = (parse_u64(index), parse_u64(offset))
            if not sep:
                raise ValueError
        except ValueError:
            raise PeerError(f"--corrupt wants N:OFFSET (two decimal numbers), not {argv[i + 1]!r}") from None
        i += 2
    if argv[i:i + 2] != ["serve", "--config"] or len(argv) != i + 3:
        raise PeerError(USAGE)
    return corrupt, argv[i + 2]


def is_uint(value):
    return type(value) is int and value >= 0  # bool is an int subclass: not accepted


def parse_config(text):
    def no_duplicates(pairs):
        seen = {}
        for key, value in pairs:
            if key in seen:
                raise PeerError(f"--config: duplicate key {key!r}")
            seen[key] = value
        return seen

    def no_constant(name):
        raise PeerError(f"--config: {name} is not JSON")

    try:
        config = json.loads(text, object_pairs_hook=no_duplicates, parse_constant=no_constant)
    except ValueError as e:
        raise PeerError(f"--config: not JSON: {e}") from None
    if not isinstance(config, dict):
        raise PeerError("--config: not a JSON object")
    # The version first: another version may have other keys and types.
    if "protocol" not in config:
        raise PeerError("--config: missing 'protocol'")
    if not is_uint(config["protocol"]):
        raise PeerError("--config: 'protocol' must be an integer (this peer speaks protocol 1)")
    if config["protocol"] != 1:
        raise PeerError(f"--config: unknown protocol {config['protocol']} (this peer speaks protocol 1)")
    # Unknown keys are ignored: the schema forbids them, but a later minor addition
    # should not break this peer.
    for key in STRING_KEYS + INTEGER_KEYS:
        if key not in config:
            raise PeerError(f"--config: missing {key!r}")
        if key in STRING_KEYS and not isinstance(config[key], str):
            raise PeerError(f"--config: {key!r} must be a string")
        if key in INTEGER_KEYS and not is_uint(config[key]):
            raise PeerError(f"--config: {key!r} must be a non-negative integer")
    if config["kind"] not in ("echo", "bulk"):
        raise PeerError(f"--config: kind {config['kind']!r} is not echo or bulk")
    if config["transport"] not in ("tcp", "udp", "local"):
        raise PeerError(f"--config: transport {config['transport']!r} is not tcp, udp or local")
    for key in ("cell", "address"):
        if not config[key]:
            raise PeerError(f"--config: {key!r} is empty")
    if config["max_message"] > MAX_MESSAGE_LIMIT:
        raise PeerError(f"--config: max_message {config['max_message']} is above 2^40")
    if config["idle_timeout_ms"] < 1:
        raise PeerError("--config: idle_timeout_ms must be at least 1")
    if not 1 <= config["parent_pid"] <= 2**31 - 1:
        raise PeerError(f"--config: parent_pid {config['parent_pid']} is not a pid")
    return config


def ipv4_address(text):
    host, sep, port = text.rpartition(":")
    try:
        if not sep or not re.fullmatch(r"[0-9]{1,5}", port) or not 1 <= int(port) <= 65535:
            raise ValueError
        return str(ipaddress.IPv4Address(host)), int(port)
    except ValueError:
        raise PeerError(f"address {text!r} is not a.b.c.d:port") from None


def watch_parent(parent_pid):
    # Die with the measuring process (best effort: ctypes may be unavailable); if it is
    # already gone, we were reparented.
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)  # 9: SIGKILL
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent_pid:
        raise PeerError(
            f"parent_pid {parent_pid} is not this process's parent ({os.getppid()}): the measuring side is gone")


class Echo:
    def __init__(self, sock, max_message, idle_s, corrupt):
        self.sock, self.max_message, self.idle_s, self.corrupt = sock, max_message, idle_s, corrupt
        self.index = 0

    def timeout_error(self):
        return PeerError(f"message {self.index}: nothing received for {round(self.idle_s * 1000)} ms (idle timeout)")

    def corrupt_reply(self, view):
        if self.corrupt is None or self.corrupt[0] != self.index:
            return
        offset = self.corrupt[1]
        if offset >= len(view):
            raise PeerError(
                f"message {self.index}: --corrupt offset {offset} is past the end of its {len(view)}-byte message")
        view[offset] ^= 0xFF

    def recv_exact(self, view):
        # The socket timeout applies per recv: the idle timeout counts from the last byte.
        got = 0
        while got < len(view):
            try:
                n = self.sock.recv_into(view[got:])
            except socket.timeout:
                raise self.timeout_error() from None
            if n == 0:
                return got
            got += n
        return got

    def send_all(self, view):
        # Not sendall(): its timeout bounds the whole reply, this one each step of progress.
        sent = 0
        while sent < len(view):
            try:
                sent += self.sock.send(view[sent:])
            except socket.timeout:
                raise PeerError(
                    f"message {self.index}: reply not taken for {round(self.idle_s * 1000)} ms (idle timeout)") from None

    def serve_stream(self):
        buf = bytearray(8)  # the length prefix, then the message: one send per reply
        while True:
            got = self.recv_exact(memoryview(buf)[:8])
            if got < 8:
                where = "inside the length prefix" if got else "without a goodbye"
                raise PeerError(f"message {self.index}: connection closed {where}")
            length = int.from_bytes(buf[:8], "little")
            if length == 0:
                return  # goodbye: no reply
            if length > self.max_message:
                raise PeerError(f"message {self.index}: length {length} exceeds max_message {self.max_message}")
            if len(buf) < 8 + length:  # grows to the largest message so far, never past max_message
                grown = bytearray(8 + length)
                grown[:8] = buf[:8]
                buf = grown
            view = memoryview(buf)[:8 + length]
            got = self.recv_exact(view[8:])
            if got < length:
                raise PeerError(f"message {self.index}: connection closed after {got} of {length} bytes")
            self.corrupt_reply(view[8:])
            self.send_all(view)
            self.index += 1

    def serve_udp(self):
        cap = min(self.max_message, UDP_MAX)
        buf = bytearray(max(cap, 1))
        self.sock.send(HELLO)
        while True:
            try:
                # MSG_TRUNC returns the datagram's real length: one above cap is caught, not cut.
                n = self.sock.recv_into(buf, cap, socket.MSG_TRUNC)
            except socket.timeout:
                raise self.timeout_error() from None
            if n == 0:
                return  # goodbye
            if n > self.max_message:
                raise PeerError(f"message {self.index}: length {n} exceeds max_message {self.max_message}")
            view = memoryview(buf)[:n]
            self.corrupt_reply(view)
            try:
                self.sock.send(view)
            except socket.timeout:
                raise PeerError(f"message {self.index}: send blocked (idle timeout)") from None
            self.index += 1


def run(argv):
    corrupt, text = parse_args(argv)
    config = parse_config(text)
    watch_parent(config["parent_pid"])
    transport, address = config["transport"], config["address"]
    idle_s = config["idle_timeout_ms"] / 1000
    if transport == "local":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        target = address
    elif transport == "tcp":
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # replies go out at once
        target = ipv4_address(address)
    else:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        target = ipv4_address(address)
        # Bound to loopback when talking to loopback; connect() keeps out other senders and
        # turns an ICMP "port unreachable" (measuring side gone) into an error.
        sock.bind(("127.0.0.1" if ipaddress.IPv4Address(target[0]).is_loopback else "0.0.0.0", 0))
    sock.settimeout(idle_s)  # every blocking call is bounded by the idle timeout
    try:
        sock.connect(target)
    except socket.timeout:
        raise PeerError(f"connect to {address}: timed out") from None
    except OSError as e:
        raise PeerError(f"connect to {address}: {e.strerror or e}") from None
    echo = Echo(sock, config["max_message"], idle_s, corrupt)
    try:
        echo.serve_udp() if transport == "udp" else echo.serve_stream()
    except OSError as e:
        raise PeerError(f"message {echo.index}: {e.strerror or e}") from None
    sock.close()


def main():
    try:
        run(sys.argv[1:])
    except Exception as e:  # noqa: BLE001 - every error is the protocol's one line, exit 2
        line = str(e) if isinstance(e, PeerError) else f"{type(e).__name__}: {e}"
        line = "".join(c if c.isprintable() else "?" for c in line)  # ONE line
        print(f"{NAME}: {line}", file=sys.stderr, flush=True)
        sys.exit(2)
    sys.exit(0)


if __name__ == "__main__":
    main()

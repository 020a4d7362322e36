"""Free TCP ports on 127.0.0.1 for the servers the tests (and the cluster demo) start."""

from __future__ import annotations

import socket


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free right now (all held open together, so none repeats)."""
    ports: list[int] = []
    sockets = []
    try:
        while len(ports) < count:
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
            port = sock.getsockname()[1]
            if port not in ports:
                ports.append(port)
    finally:
        for sock in sockets:
            sock.close()
    return ports


def free_port() -> int:
    return free_ports(1)[0]

"""A database server that hangs, for tests: it accepts connections and never answers."""
from __future__ import annotations

import socket
import threading
from tests.support.ports import free_port



class SilentServer:
    """A TCP listener that accepts connections and never answers: a database
    that hangs instead of refusing."""

    def __init__(self) -> None:
        self.port = free_port()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", self.port))
        self.sock.listen(64)
        self.accepted: list[socket.socket] = []
        self._stop = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted.append(conn)

    def close(self) -> None:
        self._stop = True
        self._thread.join(5)
        for conn in self.accepted:
            conn.close()
        self.sock.close()

"""A loopback TCP proxy for the liveness tests: it forwards both ways until
told to freeze (it then holds every byte and keeps both sockets open, as a
path that silently stops forwarding: conntrack expiry, a dead node) or to
reset (both sides get an RST)."""

import socket
import struct
import threading


class Proxy:
    def __init__(self, host, port):
        self.target = (host, port)
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(16)
        self.host, self.port = self.lsock.getsockname()
        self.frozen = threading.Event()
        self.closed = threading.Event()
        self.lock = threading.Lock()
        self.socks = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                a, _ = self.lsock.accept()
            except OSError:
                return
            b = socket.create_connection(self.target)
            with self.lock:
                self.socks += [a, b]
            for src, dst in ((a, b), (b, a)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    dst.shutdown(socket.SHUT_WR)
                    return
                if self.frozen.is_set():
                    self.closed.wait()  # held: never forwarded, never closed
                    return
                dst.sendall(data)
        except OSError:
            return

    def freeze(self):
        self.frozen.set()

    def reset(self):
        """RST on every connection so far."""
        with self.lock:
            socks, self.socks = self.socks, []
        for s in socks:
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()
            except OSError:
                pass

    def close(self):
        self.closed.set()
        self.lsock.close()
        with self.lock:
            socks, self.socks = self.socks, []
        for s in socks:
            try:
                s.close()
            except OSError:
                pass

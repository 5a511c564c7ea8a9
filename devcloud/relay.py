"""A TCP relay that can damage traffic, for fault-injection tests.

It forwards every connection to an upstream address.  It can flip a byte
at a given offset of the client-to-server byte stream of the N-th
connection whose data exceeds that offset (``corrupt``), flip a byte
every so many bytes of every client-to-server stream, a given number of
times in all (``corrupt_many``), cut every
connection at once and refuse new ones for a while (``cut``).  Run it in
a thread from a test, or as a process:

    python -m devcloud.relay LISTEN_PORT UPSTREAM_HOST UPSTREAM_PORT \
        [--corrupt-after BYTES] [--min-conn-bytes BYTES]
"""

import argparse
import socket
import threading
import time


class Relay:
    def __init__(self, upstream, host="127.0.0.1", port=0):
        self.upstream = upstream
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.conns = []
        self.down_until = 0.0
        self.corrupt_after = None     # flip one byte past this offset
        self.corrupted = 0
        self.corrupt_every = None     # with corrupt_left: many flips
        self.corrupt_left = 0
        self.connections = 0
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def corrupt_once(self, after):
        """Flip one byte at offset ``after`` of the next client-to-server
        stream that carries that many bytes.
        """
        with self.lock:
            self.corrupt_after = after

    def corrupt_many(self, every, count):
        """Flip one byte every ``every`` bytes of each client-to-server
        stream that carries that many bytes, ``count`` times in all.
        """
        with self.lock:
            self.corrupt_every = every
            self.corrupt_left = count

    def _damage(self, data, seen):
        """``data`` (at offset ``seen`` of its stream) with the bytes
        due for damage flipped (lock held).
        """
        after = self.corrupt_after
        if after is not None and seen <= after < seen + len(data):
            data = self._flip(data, after - seen)
            self.corrupt_after = None
        every = self.corrupt_every
        if every:
            pos = (seen // every + 1) * every - 1
            while self.corrupt_left > 0 and pos < seen + len(data):
                data = self._flip(data, pos - seen)
                self.corrupt_left -= 1
                pos += every
        return data

    def _flip(self, data, i):
        buf = bytearray(data)
        buf[i] ^= 0xFF
        self.corrupted += 1
        return bytes(buf)

    def cut(self, down_for=0.0):
        """Reset every connection; refuse new ones for ``down_for`` s."""
        with self.lock:
            self.down_until = time.monotonic() + down_for
            conns, self.conns = self.conns, []
        for a, b in conns:
            for s in (a, b):
                try:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                 b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    s.close()
                except OSError:
                    pass

    def close(self):
        self._stop.set()
        self.cut()
        self.sock.close()

    def _accept(self):
        while not self._stop.is_set():
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            if time.monotonic() < self.down_until:
                client.close()
                continue
            try:
                server = self._dial()
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.conns.append((client, server))
                index = self.connections
                self.connections += 1
            threading.Thread(target=self._pump,
                             args=(client, server, True, index),
                             daemon=True).start()
            threading.Thread(target=self._pump,
                             args=(server, client, False, index),
                             daemon=True).start()

    def _dial(self):
        """A connection to the upstream address."""
        return socket.create_connection(self.upstream, timeout=5)

    def _pump(self, src, dst, upstream, index):
        """Copy ``src`` to ``dst`` (``upstream``: towards the sink) on
        the relay's connection number ``index``, until either ends.
        """
        try:
            self._copy(src, dst, upstream, index)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _copy(self, src, dst, upstream, index):
        seen = 0
        while True:
            data = src.recv(1 << 20)
            if not data:
                break
            if upstream:
                with self.lock:
                    data = self._damage(data, seen)
            seen += len(data)
            dst.sendall(data)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("port", type=int)
    p.add_argument("upstream_host")
    p.add_argument("upstream_port", type=int)
    p.add_argument("--listen", default="127.0.0.1")
    p.add_argument("--corrupt-after", type=int)
    args = p.parse_args()
    relay = Relay((args.upstream_host, args.upstream_port), args.listen,
                  args.port)
    if args.corrupt_after is not None:
        relay.corrupt_once(args.corrupt_after)
    print("relaying %d -> %s:%d" % (relay.port, args.upstream_host,
                                    args.upstream_port), flush=True)
    try:
        while True:
            time.sleep(1)
            if relay.corrupted:
                print("corrupted %d" % relay.corrupted, flush=True)
                relay.corrupted = 0
    except KeyboardInterrupt:
        relay.close()


if __name__ == "__main__":
    main()

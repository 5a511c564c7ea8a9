"""The source's CPU per GiB: one buffer per object (pread, xxh3 and
Poly1305 from it, the frame and bytes in one sendmsg: what the agent
does) against hashing from an mmap of the file and sending the object
with sendfile (no copy in the source process).  Over loopback to a
thread that only receives; the source thread's own CPU, by getrusage.

    .venv/bin/python doc/source/benchmarks/sendfile-13/source-copies.py \
        [FILE]   # default: the throughput benchmark's 4 GiB dataset

Reads the first 2 GiB of FILE (on tmpfs, so no disk is read), three
rounds of the three ways.
"""
import os, sys, socket, mmap, time, threading, resource
import xxhash
from cryptography.hazmat.primitives.poly1305 import Poly1305
PATH = sys.argv[1] if len(sys.argv) > 1 else \
    "/dev/shm/dtnm-bench/data/big-4G/big.bin"
OBJ = 4 << 20; PIECE = 256 << 10
def sink(port, ready):
    ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port)); ls.listen(1); ready.set()
    c, _ = ls.accept(); buf = bytearray(1 << 20); v = memoryview(buf)
    while c.recv_into(v): pass
def run(mode, port):
    ready = threading.Event()
    t = threading.Thread(target=sink, args=(port, ready)); t.start(); ready.wait()
    s = socket.create_connection(("127.0.0.1", port))
    fd = os.open(PATH, os.O_RDONLY); size = os.fstat(fd).st_size
    size = min(size, 2 << 30)
    r0 = resource.getrusage(resource.RUSAGE_THREAD); w0 = time.time()
    if mode == "buffer":
        buf = mmap.mmap(-1, OBJ); v = memoryview(buf)
        for off in range(0, size, OBJ):
            n = os.preadv(fd, [v], off)
            p = Poly1305(b"k" * 32)
            for q in range(0, n, PIECE):
                piece = v[q:q + PIECE]
                xxhash.xxh3_64_intdigest(piece); p.update(piece)
            p.finalize()
            s.sendmsg([b"h" * 40, v[:n]])
    else:
        m = mmap.mmap(fd, size, prot=mmap.PROT_READ); v = memoryview(m)
        for off in range(0, size, OBJ):
            n = min(OBJ, size - off)
            if mode == "mmap-willneed":
                m.madvise(mmap.MADV_WILLNEED, off, n)
            p = Poly1305(b"k" * 32)
            for q in range(off, off + n, PIECE):
                piece = v[q:q + PIECE]
                xxhash.xxh3_64_intdigest(piece); p.update(piece)
            p.finalize()
            s.sendall(b"h" * 40)
            sent = 0
            while sent < n:
                sent += os.sendfile(s.fileno(), fd, off + sent, n - sent)
        del piece; v.release(); m.close()
    r1 = resource.getrusage(resource.RUSAGE_THREAD)
    s.close(); t.join()
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    print("%-14s source-thread CPU %.2f s/GiB (user %.2f sys %.2f) wall %.1f" % (
        mode, cpu / (size / 2**30), (r1.ru_utime - r0.ru_utime) / (size / 2**30),
        (r1.ru_stime - r0.ru_stime) / (size / 2**30), time.time() - w0))
port = 47000
for rep in range(3):
    for mode in ("buffer", "mmap", "mmap-willneed"):
        port += 1; run(mode, port)

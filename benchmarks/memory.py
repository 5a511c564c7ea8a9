"""Peak memory (RSS) of each agent during a large transfer.

Two real ``dtn-migrate-agent`` processes on a private RabbitMQ vhost; the
source agent sends a generated file (4 GiB by default) to the sink agent
over RPC, while this script samples both processes' VmRSS every 50 ms and
reads their kernel-kept peak (VmHWM) at the end.  The same is measured for
the standalone ``dtn-migrate-transfer`` pair.  Target: <= 300 MiB each.

    python -m benchmarks.memory [--size 4G] \
        [--out doc/source/benchmarks/memory]
"""

import argparse
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from benchmarks import report
from benchmarks import workloads
from dtn_migrate import rpc
from tests.functional import base

MiB = 1 << 20


def rss(pid):
    """(VmRSS, VmHWM) in bytes."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                k, v = line.split(":")
                out[k] = int(v.split()[0]) * 1024
    return out.get("VmRSS", 0), out.get("VmHWM", 0)


class Sampler(threading.Thread):
    def __init__(self, pids, interval=0.05):
        super().__init__(daemon=True)
        self.pids = pids
        self.interval = interval
        self.peak = {p: 0 for p in pids}
        self.hwm = {p: 0 for p in pids}
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            for p in self.pids:
                try:
                    cur, hwm = rss(p)
                except OSError:
                    continue
                self.peak[p] = max(self.peak[p], cur)
                self.hwm[p] = max(self.hwm[p], hwm)
            self.stop.wait(self.interval)


def agents_run(ds, work):
    ok, why = base.Broker.available()
    if not ok:
        raise SystemExit(why)
    broker = base.Broker()
    key = secrets.token_hex(32)
    ports = (base.free_port(), base.free_port())
    src = base.Agent(work, "mem-src", key, broker.url(),
                     {"mem-dst": ("127.0.0.1", ports[1])}, port=ports[0],
                     staging=ds.root)
    dst = base.Agent(work, "mem-dst", key, broker.url(),
                     {"mem-src": ("127.0.0.1", ports[0])}, port=ports[1])
    api = base.rpc_api(broker.url(), timeout=10)
    try:
        for a in (dst, src):
            a.start()
        for a in (dst, src):
            a.wait_ready(api)
        idle = {a.name: rss(a.proc.pid)[0] for a in (src, dst)}
        sampler = Sampler([src.proc.pid, dst.proc.pid])
        sampler.start()
        t0 = time.monotonic()
        status = api.start_transfer({}, src.name, dst.name, ds.files)
        tid = status["transfer_id"]
        while status["state"] not in base.FINAL:
            time.sleep(0.2)
            status = api.get_transfer({}, src.name, tid)
        seconds = time.monotonic() - t0
        time.sleep(0.2)
        sampler.stop.set()
        sampler.join()
        if status["state"] != "complete":
            raise SystemExit("transfer %s: %s" % (status["state"],
                                                  status["error"]))
        return {a.name: {"idle": idle[a.name],
                         "peak_sampled": sampler.peak[a.proc.pid],
                         "peak_hwm": sampler.hwm[a.proc.pid]}
                for a in (src, dst)}, seconds
    finally:
        for a in (src, dst):
            a.stop()
        rpc.cleanup()
        broker.delete()


def cli_run(ds, work):
    exe = os.path.join(os.path.dirname(sys.executable),
                       "dtn-migrate-transfer")
    keyf = os.path.join(work, "key")
    with open(keyf, "w") as f:
        f.write(secrets.token_hex(32))
    port = base.free_port()
    dst = os.path.join(work, "cli-dst")
    sink = subprocess.Popen([exe, "serve", "--root", dst, "--listen",
                             "127.0.0.1:%d" % port, "--key-file", keyf],
                            stdout=subprocess.PIPE, text=True)
    try:
        sink.stdout.readline()
        t0 = time.monotonic()
        src = subprocess.Popen([exe, "send", "--peer", "127.0.0.1:%d" % port,
                                "--key-file", keyf, "--state-dir",
                                os.path.join(work, "cli-state"), "--root",
                                ds.root, "--manifest", ds.manifest_path]
                               + ds.files)
        sampler = Sampler([src.pid, sink.pid])
        sampler.start()
        src.wait()
        seconds = time.monotonic() - t0
        sampler.stop.set()
        sampler.join()
        return {"send": {"peak_sampled": sampler.peak[src.pid],
                         "peak_hwm": sampler.hwm[src.pid]},
                "serve": {"peak_sampled": sampler.peak[sink.pid],
                          "peak_hwm": sampler.hwm[sink.pid]}}, seconds
    finally:
        sink.terminate()
        sink.wait()


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.memory")
    p.add_argument("--size", type=workloads.parse_size, default=4 << 30)
    p.add_argument("--data-dir", default="/dev/shm/dtnm-bench/data")
    p.add_argument("--out", default="doc/source/benchmarks/memory")
    args = p.parse_args(argv)
    ds = workloads.Dataset("big", args.data_dir, size_big=args.size)
    ds.ensure()
    work = tempfile.mkdtemp(prefix="dtnm-mem-", dir="/dev/shm")
    try:
        agents, a_sec = agents_run(ds, work)
        cli, c_sec = cli_run(ds, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = []
    for role, name in (("source agent", "mem-src"), ("sink agent",
                                                     "mem-dst")):
        m = agents[name]
        rows.append([role, "%.0f" % (m["idle"] / MiB),
                     "%.0f" % (m["peak_hwm"] / MiB), "%.2f" % a_sec])
    for role, name in (("source CLI (send)", "send"),
                       ("sink CLI (serve)", "serve")):
        rows.append([role, "–", "%.0f" % (cli[name]["peak_hwm"] / MiB),
                     "%.2f" % c_sec])
    headers = ["process", "RSS idle (MiB)", "peak RSS (MiB)",
               "transfer (s)"]
    print(report.text_table(headers, rows))
    os.makedirs(args.out, exist_ok=True)
    report.write_text(os.path.join(args.out, "memory.md"),
                      report.markdown_table(headers, rows) + "\n")
    report.write_text(os.path.join(args.out, "memory.rst"),
                      report.rst_table(headers, rows) + "\n")
    report.write_json(os.path.join(args.out, "memory.json"), {
        "command": report.command_line(), "machine": report.machine_info(),
        "bytes": ds.total_bytes, "agents": agents, "cli": cli})


if __name__ == "__main__":
    main()

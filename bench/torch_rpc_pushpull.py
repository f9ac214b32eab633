#!/usr/bin/python3
"""torch.distributed.rpc push-and-pull on loopback: the PyTorch peer of bench/ps_throughput.cc.

One ps process holds one float32 tensor of each --sizes entry; it applies SGD
(value -= lr * grad) to a pushed gradient under that tensor's lock and returns a copy of the
updated value (pstrain's PushPull: the gradient up, the value down). For each --workers
count W, W client processes call rpc_sync(ps, push_pull) in a loop, all at once, for
--seconds per size (TensorPipe, torch's default rpc backend, on 127.0.0.1). Prints
`torch X.Y`, then one line per (workers, size):

  torch_rpc workers=1 bytes=1048576 pushpull_per_s=812.3 cpu_us_per_call=1234.5 calls=1625

pushpull_per_s: every client's calls / its own window, summed (the windows start together
at a barrier on the ps); cpu_us_per_call: user+sys (getrusage, every thread) of the ps and
of every client over their windows, summed, / calls, as ps_throughput's `cpu us/call`
counts its whole process. Runs with Debian's /usr/bin/python3 (python3-torch); prints
"python3-torch not installed: skipped" and exits 0 without it.
"""
import argparse
import ctypes
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time

LR = 0.01
WARMUP_CALLS = 2


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)  # every thread of this process
    return r.ru_utime + r.ru_stime


# -------------------------------------------------------------------------------- the ps
class _Ps:
    def __init__(self, sizes, workers, torch):
        self.values = {b: torch.zeros(b // 4, dtype=torch.float32) for b in sizes}
        self.locks = {b: threading.Lock() for b in sizes}
        self.workers = workers
        self.cond = threading.Condition()
        self.arrived = {}  # bytes -> clients at the barrier
        self.finished = {}  # bytes -> [(calls, rate, cpu_s)]
        self.cpu_start = {}

    def push_pull(self, nbytes, grad):
        with self.locks[nbytes]:  # as pstrain's ps: one push at a time per variable
            value = self.values[nbytes]
            value.sub_(grad, alpha=LR)
            return value.clone()  # a snapshot under the lock, as a pull takes

    def barrier(self, nbytes, timeout):
        with self.cond:
            self.arrived[nbytes] = self.arrived.get(nbytes, 0) + 1
            if self.arrived[nbytes] == self.workers:
                self.cpu_start[nbytes] = cpu_seconds()
                self.cond.notify_all()
            elif not self.cond.wait_for(lambda: self.arrived[nbytes] >= self.workers, timeout):
                raise RuntimeError("barrier: %d of %d clients after %gs" %
                                   (self.arrived[nbytes], self.workers, timeout))

    def finish(self, nbytes, calls, rate, cpu_s):
        with self.cond:
            done = self.finished.setdefault(nbytes, [])
            done.append((calls, rate, cpu_s))
            if len(done) < self.workers:
                return
            ps_cpu = cpu_seconds() - self.cpu_start[nbytes]
        calls = sum(c for c, _, _ in done)
        cpu = ps_cpu + sum(c for _, _, c in done)
        print("torch_rpc workers=%d bytes=%d pushpull_per_s=%.1f cpu_us_per_call=%.1f calls=%d" %
              (self.workers, nbytes, sum(r for _, r, _ in done), 1e6 * cpu / calls, calls),
              flush=True)


_PS = None


def _push_pull(nbytes, grad):
    return _PS.push_pull(nbytes, grad)


def _barrier(nbytes, timeout):
    _PS.barrier(nbytes, timeout)


def _finish(nbytes, calls, rate, cpu_s):
    _PS.finish(nbytes, calls, rate, cpu_s)


# --------------------------------------------------------------------------- a process
def child(args, torch):
    import torch.distributed.rpc as rpc
    global _PS
    torch.set_num_threads(1)
    sizes = [int(s) for s in args.sizes.split(",")]
    workers = args.workers_now
    if args.rank == 0:
        _PS = _Ps(sizes, workers, torch)
    # Few rpc threads: at most `workers` calls and `workers` barrier waits are in flight at
    # once, and each idle thread of the pool (default 16 per process) is one more to wake
    # on a 2-core machine shared by 1 + workers processes.
    options = rpc.TensorPipeRpcBackendOptions(
        init_method="tcp://127.0.0.1:%d" % args.port, num_worker_threads=max(4, 2 * workers),
        rpc_timeout=args.timeout,
        _transports=args.transports.split(",") if args.transports else None,
        _channels=args.channels.split(",") if args.channels else None)
    rpc.init_rpc("ps" if args.rank == 0 else "worker%d" % args.rank, rank=args.rank,
                 world_size=workers + 1, rpc_backend_options=options)
    if args.rank > 0:
        for nbytes in sizes:
            grad = torch.zeros(nbytes // 4, dtype=torch.float32)
            for _ in range(WARMUP_CALLS):  # connections and buffers set up
                rpc.rpc_sync("ps", _push_pull, args=(nbytes, grad))
            rpc.rpc_sync("ps", _barrier, args=(nbytes, args.timeout / 2))
            cpu0 = cpu_seconds()
            start = time.perf_counter()
            calls = 0
            while calls < 2 or time.perf_counter() - start < args.seconds:
                rpc.rpc_sync("ps", _push_pull, args=(nbytes, grad))
                calls += 1
            elapsed = time.perf_counter() - start
            cpu = cpu_seconds() - cpu0
            rpc.rpc_sync("ps", _finish, args=(nbytes, calls, calls / elapsed, cpu))
    rpc.shutdown(timeout=args.timeout)  # graceful: the ps serves until the clients are done
    return 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(args, workers):
    """The ps and `workers` clients as processes; their stdout is ours. False on failure."""
    port = args.port or free_port()
    env = dict(os.environ, GLOG_minloglevel="1")  # no INFO lines from the rpc agents
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__)] + sys.argv[1:] +
                              ["--rank=%d" % r, "--port=%d" % port, "--workers_now=%d" % workers,
                               "--launcher=%d" % os.getpid()],
                              env=env)
             for r in range(workers + 1)]
    deadline = time.monotonic() + args.timeout
    failed = False
    try:  # until all exit, one fails (the others would wait for it) or the deadline
        while not failed and any(p.poll() is None for p in procs):
            failed = time.monotonic() > deadline or any(p.poll() for p in procs)
            time.sleep(0.05)
        failed = failed or any(p.returncode for p in procs)
    finally:
        for p in procs:  # nothing outlives the run, also when it failed
            if p.poll() is None:
                p.kill()
                p.wait()
    if failed:
        print("torch_rpc workers=%d failed (exit codes %s)" %
              (workers, [p.returncode for p in procs]), flush=True)
    return not failed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1024,1048576,16777216", help="tensor bytes")
    parser.add_argument("--workers", default="1,2", help="concurrent client processes")
    parser.add_argument("--seconds", type=float, default=2.0, help="measuring time per cell")
    parser.add_argument("--port", type=int, default=0, help="rendezvous port (0: a free one)")
    parser.add_argument("--timeout", type=float, default=0,
                        help="per --workers count (0: 60 s + 30 s and --seconds per size)")
    parser.add_argument("--transports", default="",
                        help="TensorPipe's transports, e.g. uv or shm (default: torch's choice)")
    parser.add_argument("--channels", default="",
                        help="TensorPipe's channels, e.g. basic, cma or mpt_uv (default: torch's)")
    parser.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)
    parser.add_argument("--workers_now", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--launcher", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.timeout:
        args.timeout = 60 + len(args.sizes.split(",")) * (30 + args.seconds)
    if args.rank >= 0:
        # Die with the launcher, and in any case after --timeout: nothing waits forever (in
        # torch 1.13 the rendezvous waits up to 30 minutes, a graceful shutdown without end).
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != args.launcher:  # it died before that
            return 1
        signal.alarm(int(args.timeout) + 10)
    try:
        import torch
        import torch.distributed.rpc  # noqa: F401
    except ImportError:
        print("python3-torch not installed: skipped")
        return 0
    if args.rank >= 0:
        return child(args, torch)
    print("torch", torch.__version__, flush=True)
    ok = True
    for workers in (int(w) for w in args.workers.split(",")):
        ok = run(args, workers) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

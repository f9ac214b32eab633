#!/usr/bin/python3
"""PyTorch peers of bench/cluster_throughput.sh's configurations, the same jobs as real
processes on loopback: the job's model (bench/torch_baseline.py maps its Keras layers),
Adam with the job's learning rate, Fashion-MNIST in memory, 60,000 samples an epoch, one
thread per process.

  --mode=one       one process, batch 64
  --mode=rpc_ps    a torch.distributed.rpc parameter server: --ps processes each hold
                   the model's parameters assigned to them round robin (as pstrain's
                   placement spreads whole variables) with Adam applied on the ps;
                   --workers processes each train on their half of the data, batch 64,
                   and push each step's gradients to every ps in one rpc_async per ps
                   that answers with the updated values (pstrain's PushPull), all ps at
                   once, asynchronously (no worker waits for another)
  --mode=ddp       DistributedDataParallel over gloo, --workers replicas, global batch 64
                   (64 / workers per replica), the replicas' own Adam

Prints one line, e.g.

  torch mode=rpc_ps ps=2 workers=2 epochs=3 epoch_s=2.401 samples_per_s=24989.6 \
      cpu_us_per_sample=61.2 periods=2.38,2.42

epoch_s: the median over epochs 2..N of the time between the epoch ends of the process
that trains (rank 0 / worker 0); cpu_us_per_sample: user+sys of every process of the
run, / (60000 x N). Without python3-torch it prints "python3-torch not installed:
skipped" and exits 0.
"""
import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_baseline  # noqa: E402  (the job's model, the data)

SAMPLES_PER_EPOCH = 60000


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build(job_path, torch):
    with open(job_path) as f:
        make_model, shape, lr = torch_baseline.keras_model(json.load(f), torch)
    if len(shape) != 1:
        raise ValueError("torch peers: only flat inputs (the seed and wide models)")
    return make_model, lr


def load_data(args, torch):
    x, y, _ = torch_baseline.load(args.data_dir)
    return torch.from_numpy(x[:SAMPLES_PER_EPOCH]), torch.from_numpy(y[:SAMPLES_PER_EPOCH])


def epoch_batches(x, y, batch, seed, torch):
    g = torch.Generator()
    g.manual_seed(seed)
    perm = torch.randperm(x.shape[0], generator=g)
    for j in range(0, x.shape[0], batch):
        idx = perm[j:j + batch]
        yield x[idx], y[idx]


# ---------------------------------------------------------------------------- one process
def run_one(args, torch):
    make_model, lr = build(args.job, torch)
    torch.manual_seed(args.seed)
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    x, y = load_data(args, torch)
    ends = [time.perf_counter()]
    for epoch in range(args.epochs):
        for xb, yb in epoch_batches(x, y, 64, args.seed + epoch, torch):
            opt.zero_grad(set_to_none=True)
            loss_fn(model(xb), yb).backward()
            opt.step()
        ends.append(time.perf_counter())
    return ends


# ------------------------------------------------------------------ rpc parameter server
_SHARD = None  # the ps process's parameters and optimizer


class _Shard:
    def __init__(self, params, lr, torch):
        self.lock = threading.Lock()
        self.params = {n: torch.nn.Parameter(t.clone()) for n, t in params.items()}
        self.opt = torch.optim.Adam(list(self.params.values()), lr=lr)

    def push_pull(self, grads):
        with self.lock:  # as a ps applies one push at a time per variable
            for n, g in grads.items():
                self.params[n].grad = g
            self.opt.step()
            return {n: p.detach().clone() for n, p in self.params.items()}

    def pull(self):
        with self.lock:
            return {n: p.detach().clone() for n, p in self.params.items()}


def _rpc_push_pull(grads):
    return _SHARD.push_pull(grads)


def _rpc_pull():
    return _SHARD.pull()


def _assignment(names, num_ps):
    return {n: i % num_ps for i, n in enumerate(names)}


def rpc_process(args, rank, port, torch):
    """Rank 0..ps-1: a ps; then the workers."""
    import torch.distributed.rpc as rpc
    global _SHARD
    torch.set_num_threads(1)
    make_model, lr = build(args.job, torch)
    torch.manual_seed(args.seed)
    model = make_model()  # every process draws the same initial weights
    names = [n for n, _ in model.named_parameters()]
    owner = _assignment(names, args.ps)
    world = args.ps + args.workers
    options = rpc.TensorPipeRpcBackendOptions(init_method="tcp://127.0.0.1:%d" % port,
                                              num_worker_threads=8, rpc_timeout=120)
    is_ps = rank < args.ps
    name = "ps%d" % rank if is_ps else "worker%d" % (rank - args.ps)
    if is_ps:
        _SHARD = _Shard({n: p.detach() for n, p in model.named_parameters()
                         if owner[n] == rank}, lr, torch)
    rpc.init_rpc(name, rank=rank, world_size=world, rpc_backend_options=options)
    ends = []
    if not is_ps:
        w = rank - args.ps
        x, y = load_data(args, torch)
        x, y = x[w::args.workers].contiguous(), y[w::args.workers].contiguous()
        params = dict(model.named_parameters())
        by_ps = [[n for n in names if owner[n] == p] for p in range(args.ps)]
        with torch.no_grad():
            for p in range(args.ps):
                for n, t in rpc.rpc_sync("ps%d" % p, _rpc_pull).items():
                    params[n].copy_(t)
        loss_fn = torch.nn.CrossEntropyLoss()
        ends.append(time.perf_counter())
        for epoch in range(args.epochs):
            for xb, yb in epoch_batches(x, y, 64, args.seed + 1000 * w + epoch, torch):
                model.zero_grad(set_to_none=True)
                loss_fn(model(xb), yb).backward()
                futures = [rpc.rpc_async("ps%d" % p, _rpc_push_pull,
                                         args=({n: params[n].grad for n in by_ps[p]},))
                           for p in range(args.ps)]
                with torch.no_grad():
                    for f in futures:
                        for n, t in f.wait().items():
                            params[n].copy_(t)
            ends.append(time.perf_counter())
    rpc.shutdown()  # waits for every process: the ps serve until the workers are done
    return ends


# -------------------------------------------------------------------------------- DDP
def ddp_process(args, rank, port, torch):
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                            world_size=args.workers)
    make_model, lr = build(args.job, torch)
    torch.manual_seed(args.seed)
    model = torch.nn.parallel.DistributedDataParallel(make_model())
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    x, y = load_data(args, torch)
    x, y = x[rank::args.workers].contiguous(), y[rank::args.workers].contiguous()
    per_replica = 64 // args.workers
    ends = [time.perf_counter()]
    for epoch in range(args.epochs):
        # The same order on every replica's own half: each step is one global batch.
        for xb, yb in epoch_batches(x, y, per_replica, args.seed + epoch, torch):
            opt.zero_grad(set_to_none=True)
            loss_fn(model(xb), yb).backward()
            opt.step()
        ends.append(time.perf_counter())
    dist.destroy_process_group()
    return ends


def child(args):
    import torch
    port = args.port
    if args.mode == "rpc_ps":
        ends = rpc_process(args, args.rank, port, torch)
    else:
        ends = ddp_process(args, args.rank, port, torch)
    if ends:
        print("ENDS " + ",".join("%.6f" % e for e in ends))
    return 0


def report(args, ends, cpu_s):
    periods = [b - a for a, b in zip(ends[1:], ends[2:])]  # epochs 2..N
    epoch_s = statistics.median(periods) if periods else float("nan")
    extra = " ps=%d" % args.ps if args.mode == "rpc_ps" else ""
    extra += " workers=%d" % args.workers if args.mode != "one" else ""
    print("torch mode=%s%s epochs=%d epoch_s=%.3f samples_per_s=%.1f cpu_us_per_sample=%.2f "
          "periods=%s" % (args.mode, extra, args.epochs, epoch_s, SAMPLES_PER_EPOCH / epoch_s,
                          1e6 * cpu_s / (SAMPLES_PER_EPOCH * args.epochs),
                          ",".join("%.3f" % p for p in periods)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["one", "rpc_ps", "ddp"], default="one")
    parser.add_argument("--job", required=True, help="the job spec whose model to train")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--ps", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.epochs < 2:
        parser.error("--epochs must be at least 2 (epoch 1 is not timed)")
    try:
        import torch
    except ImportError:
        print("python3-torch not installed: skipped")
        return 0
    if args.rank >= 0:
        return child(args)
    if args.mode == "one":
        torch.set_num_threads(1)
        start = resource.getrusage(resource.RUSAGE_SELF)
        ends = run_one(args, torch)
        end = resource.getrusage(resource.RUSAGE_SELF)
        report(args, ends, end.ru_utime - start.ru_utime + end.ru_stime - start.ru_stime)
        return 0
    # One process per rank, on a port free now; rank 0 of the trainers reports its epochs.
    port = free_port()
    world = args.ps + args.workers if args.mode == "rpc_ps" else args.workers
    first_trainer = args.ps if args.mode == "rpc_ps" else 0
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__)] + sys.argv[1:] +
                              ["--rank=%d" % r, "--port=%d" % port],
                              stdout=subprocess.PIPE, text=True)
             for r in range(world)]
    outputs = []
    failed = False
    deadline = time.time() + args.timeout
    for p in procs:
        try:
            out, _ = p.communicate(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            failed = True
            out = ""
        outputs.append(out)
        failed = failed or p.returncode != 0
    for p in procs:  # nothing outlives the run, also when it failed
        if p.poll() is None:
            p.kill()
            p.wait()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    if failed:
        print("torch mode=%s failed (exit codes %s)" % (args.mode, [p.returncode for p in procs]))
        return 1
    ends = [float(v) for line in outputs[first_trainer].splitlines()
            if line.startswith("ENDS ") for v in line[5:].split(",")]
    report(args, ends, usage.ru_utime + usage.ru_stime)
    return 0


if __name__ == "__main__":
    sys.exit(main())

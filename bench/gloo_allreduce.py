"""torch.distributed gloo all-reduce bus bandwidth on loopback: the peer for
bench/allreduce_bandwidth.cc. Prints one line per (ranks, size):
  gloo n=2 bytes=4194304 busbw_gbs=0.85
Runs with Debian's /usr/bin/python3 (python3-torch); prints "... skipped" without it."""
import argparse
import os
import sys
import time

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError:
    print("python3-torch not installed: skipped")
    sys.exit(0)


def worker(rank, n, port, sizes, seconds, queue):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=n)
    for size in sizes:
        t = torch.ones(size // 4, dtype=torch.float32)
        dist.all_reduce(t)  # warm-up
        iters = 0
        dist.barrier()
        start = time.perf_counter()
        while True:
            dist.all_reduce(t)
            iters += 1
            done = torch.tensor([1.0 if time.perf_counter() - start >= seconds else 0.0])
            dist.all_reduce(done, op=dist.ReduceOp.MIN)
            if done.item() > 0:
                break
        elapsed = time.perf_counter() - start
        if rank == 0:
            algbw = size * iters / elapsed / 1e9
            queue.put((size, algbw * 2 * (n - 1) / n))
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", default="2,4")
    p.add_argument("--sizes", default="4096,65536,1048576,4194304,16777216,67108864")
    p.add_argument("--seconds", type=float, default=1.0)
    p.add_argument("--port", type=int, default=29517)
    a = p.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    print("torch", torch.__version__, flush=True)
    ctx = mp.get_context("spawn")
    for i, n in enumerate(int(r) for r in a.ranks.split(",")):
        queue = ctx.Queue()
        procs = [ctx.Process(target=worker, args=(r, n, a.port + i, sizes, a.seconds, queue))
                 for r in range(n)]
        for pr in procs:
            pr.start()
        for _ in sizes:
            size, busbw = queue.get()
            print(f"gloo n={n} bytes={size} busbw_gbs={busbw:.4f}", flush=True)
        for pr in procs:
            pr.join()


if __name__ == "__main__":
    main()

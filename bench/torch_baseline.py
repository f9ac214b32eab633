#!/usr/bin/python3
"""PyTorch peer for bench/train_throughput.cc: the seed's 784-64-10 model (ReLU, dropout 0.2,
softmax folded into the cross-entropy loss, as Keras and pstrain do), Adam(lr=1e-3),
Fashion-MNIST in memory, on a fixed number of threads. Prints one line per batch size:

    torch batch=64 samples_per_s=45123.4

Runs with Debian's /usr/bin/python3 (python3-torch); without it prints
"python3-torch not installed: skipped" and exits 0.
"""
import argparse
import gzip
import os
import sys
import time

import numpy as np


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(data_dir):
    images = os.path.join(data_dir, "train-images-idx3-ubyte.gz")
    labels = os.path.join(data_dir, "train-labels-idx1-ubyte.gz")
    if os.path.exists(images) and os.path.exists(labels):
        x = read_idx(images).reshape(-1, 784).astype(np.float32) / 255.0
        y = read_idx(labels).astype(np.int64)
        return x, y, "fashion_mnist"
    rng = np.random.default_rng(1)  # same shapes as the real data
    return (rng.random((60000, 784), dtype=np.float32), rng.integers(0, 10, 60000),
            "synthetic")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch_sizes", default="64,256")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("python3-torch not installed: skipped")
        return 0
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x_np, y_np, source = load(args.data_dir)
    x = torch.from_numpy(x_np)
    y = torch.from_numpy(y_np)
    print("torch version=%s threads=%d data=%s" % (torch.__version__, torch.get_num_threads(),
                                                   source))
    n = x.shape[0]
    for batch in [int(b) for b in args.batch_sizes.split(",")]:
        model = torch.nn.Sequential(torch.nn.Linear(784, 64), torch.nn.ReLU(),
                                    torch.nn.Dropout(0.2), torch.nn.Linear(64, 10))
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        loss_fn = torch.nn.CrossEntropyLoss()
        model.train()
        # A shuffled copy per pass, then contiguous slices: batching cost stays out of the
        # step, as in the C++ step loop.
        perm = torch.randperm(n)
        xs, ys = x[perm].contiguous(), y[perm].contiguous()
        steps_per_pass = n // batch

        def step(i):
            j = (i % steps_per_pass) * batch
            xb, yb = xs[j:j + batch], ys[j:j + batch]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()

        for i in range(50):  # warm-up
            step(i)
        samples = 0
        i = 0
        start = time.perf_counter()
        while True:
            for _ in range(20):
                step(i)
                i += 1
            samples += 20 * batch
            elapsed = time.perf_counter() - start
            if elapsed >= args.seconds:
                break
        print("torch batch=%d samples_per_s=%.1f" % (batch, samples / elapsed))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

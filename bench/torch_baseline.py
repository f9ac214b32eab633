#!/usr/bin/python3
"""PyTorch peer for bench/train_throughput.cc: the seed's 784-64-10 model (ReLU, dropout 0.2,
softmax folded into the cross-entropy loss, as Keras and pstrain do), Adam(lr=1e-3),
Fashion-MNIST in memory, on a fixed number of threads. With --job=FILE, the job's Keras
Sequential model instead (the layers bench/train_throughput measures: Conv2D, pooling,
BatchNormalization, Dense, ...), built layer for layer in PyTorch (images as NCHW, the
same shapes and FLOPs), with the job's Adam learning rate. Prints one line per batch size:

    torch batch=64 samples_per_s=45123.4

Runs with Debian's /usr/bin/python3 (python3-torch); without it prints
"python3-torch not installed: skipped" and exits 0.
"""
import argparse
import gzip
import json
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


def pair(v):
    return tuple(v) if isinstance(v, (list, tuple)) else (v, v)


def keras_model(job, torch):
    """The job's Keras Sequential model as a torch.nn.Sequential on NCHW images, and the
    input shape it takes; a final softmax is left to the loss (as pstrain fuses it)."""
    nn = torch.nn
    layers = job["model"]["config"]["layers"]
    shape = None
    for layer in layers:
        cfg = layer.get("config", {})
        for key in ("batch_shape", "batch_input_shape"):
            if cfg.get(key):
                shape = list(cfg[key][1:])
    if shape is None:
        raise ValueError("the model declares no input shape")
    # Keras channels_last [h, w, c] -> torch [c, h, w].
    dims = [shape[2], shape[0], shape[1]] if len(shape) == 3 else list(shape)
    modules = []
    acts = {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid}

    def activation(name, last):
        if name in (None, "linear") or (name == "softmax" and last):
            return
        if name == "softmax":
            modules.append(nn.Softmax(dim=1))
        else:
            modules.append(acts[name]())

    for i, layer in enumerate(layers):
        kind, cfg = layer["class_name"], layer.get("config", {})
        last = i == len(layers) - 1
        if kind == "InputLayer":
            continue
        if kind == "Conv2D":
            k, s = pair(cfg["kernel_size"]), pair(cfg.get("strides", 1))
            pad = "same" if cfg.get("padding", "valid") == "same" else 0
            modules.append(nn.Conv2d(dims[0], cfg["filters"], k, s, padding=pad,
                                     bias=cfg.get("use_bias", True)))
            if pad == 0:
                dims = [cfg["filters"], (dims[1] - k[0]) // s[0] + 1, (dims[2] - k[1]) // s[1] + 1]
            else:
                dims = [cfg["filters"], dims[1], dims[2]]
            activation(cfg.get("activation"), last)
        elif kind in ("MaxPooling2D", "AveragePooling2D"):
            if cfg.get("padding", "valid") != "valid":
                raise ValueError("torch peer: only valid pooling")
            k = pair(cfg.get("pool_size", 2))
            s = pair(cfg.get("strides") or k)
            pool = nn.MaxPool2d if kind == "MaxPooling2D" else nn.AvgPool2d
            modules.append(pool(k, s))
            dims = [dims[0], (dims[1] - k[0]) // s[0] + 1, (dims[2] - k[1]) // s[1] + 1]
        elif kind == "BatchNormalization":
            bn = nn.BatchNorm2d if len(dims) == 3 else nn.BatchNorm1d
            modules.append(bn(dims[0], eps=cfg.get("epsilon", 1e-3),
                              momentum=1 - cfg.get("momentum", 0.99),
                              affine=cfg.get("scale", True)))
        elif kind == "GlobalAveragePooling2D":
            modules.append(nn.AdaptiveAvgPool2d(1))
            modules.append(nn.Flatten())
            dims = [dims[0]]
        elif kind == "Flatten":
            modules.append(nn.Flatten())
            n = 1
            for d in dims:
                n *= d
            dims = [n]
        elif kind == "Dense":
            modules.append(nn.Linear(dims[0], cfg["units"], bias=cfg.get("use_bias", True)))
            dims = [cfg["units"]]
            activation(cfg.get("activation"), last)
        elif kind == "Dropout":
            modules.append(nn.Dropout(cfg["rate"]))
        elif kind == "Activation":
            activation(cfg["activation"], last)
        else:
            raise ValueError("torch peer: layer %s is not mapped" % kind)
    lr = 1e-3
    opt = job.get("compile", {}).get("optimizer")
    if isinstance(opt, dict):
        lr = opt.get("config", {}).get("learning_rate", lr)
        if isinstance(lr, dict):  # a schedule: its first rate (speed does not depend on it)
            lr = lr.get("config", {}).get("initial_learning_rate", 1e-3)
    return (lambda: nn.Sequential(*modules)), [shape[2], shape[0], shape[1]] if len(shape) == 3 else shape, lr


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch_sizes", default="64,256")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--job", default="", help="a job spec whose model to train")
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
    lr = 1e-3
    make_model = lambda: torch.nn.Sequential(torch.nn.Linear(784, 64), torch.nn.ReLU(),
                                             torch.nn.Dropout(0.2), torch.nn.Linear(64, 10))
    if args.job:
        with open(args.job) as f:
            make_model, shape, lr = keras_model(json.load(f), torch)
        # Keras's [h, w, c] rows (channels_last) seen as torch's [c, h, w] images.
        x = x.reshape([-1, shape[1], shape[2], shape[0]]).permute(0, 3, 1, 2).contiguous() \
            if len(shape) == 3 else x.reshape([-1] + list(shape))
    print("torch version=%s threads=%d data=%s" % (torch.__version__, torch.get_num_threads(),
                                                   source))
    n = x.shape[0]
    for batch in [int(b) for b in args.batch_sizes.split(",")]:
        model = make_model()
        opt = torch.optim.Adam(model.parameters(), lr=lr)
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

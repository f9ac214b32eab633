#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target under tests/fuzz/corpus/ (standard
library only, plus Debian's protoc for the protobuf messages and Debian's python3-h5py and
numpy for the .keras weights). Run from the repository root with Debian's Python:
/usr/bin/python3 tests/fuzz/make_seed_corpus.py. The files are checked in; rerun after a
format changes."""

import gzip
import json
import os
import shutil
import struct
import subprocess

ROOT = os.path.join("tests", "fuzz", "corpus")
SEP = b"\n--\n"


def put(target, name, data):
    folder = os.path.join(ROOT, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def encode(message, text):
    """A protobuf message of proto/ps.proto from its text format, by protoc --encode."""
    return subprocess.run(
        ["protoc", "-I.", "--encode=pstrain." + message, "proto/ps.proto"],
        input=text.encode(), capture_output=True, check=True).stdout


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def floats(*values):
    return struct.pack("<%df" % len(values), *values)


def tf_config():
    cluster = {"chief": ["localhost:5000"], "ps": ["localhost:5001", "localhost:5002"],
               "worker": ["localhost:5003", "localhost:5004"]}
    put("tf_config_fuzzer", "worker.json",
        json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 1}}))
    put("tf_config_fuzzer", "master.json",
        json.dumps({"cluster": {"master": ["h:1"], "worker": ["h:2"]},
                    "task": {"type": "master", "index": "0"}, "environment": "cloud"}))
    put("tf_config_fuzzer", "sparse.json",
        json.dumps({"cluster": {"worker": {"1": "[::1]:3", "0": "h:2"}},
                    "task": {"type": "evaluator"}}))
    put("tf_config_fuzzer", "flags.txt", b"chief=h:1;worker=h:2,h:3;ps=h:4" + SEP + b"worker" + SEP + b"xx")
    put("tf_config_fuzzer", "bad.json", '{"cluster": {"worker": ["h:99999"]}, "task": {"type": "ps"}}')


def models():
    with open("examples/fashion_mnist.json") as f:
        job = json.load(f)
    put("job_spec_fuzzer", "fashion_mnist.json", json.dumps(job))
    for name in ("seed_synthetic.json", "seed_mse.json"):
        shutil.copy(os.path.join("examples", name), os.path.join(ROOT, "job_spec_fuzzer", name))
    tiny = {"model": job["model"],
            "compile": {"optimizer": {"class_name": "SGD", "config": {"learning_rate": {
                "class_name": "ExponentialDecay", "config": {"initial_learning_rate": 0.1,
                                                              "decay_steps": 10, "decay_rate": 0.5}}}},
                        "loss": "sparse_categorical_crossentropy", "metrics": ["accuracy"]},
            "fit": {"epochs": 2, "batch_size": 16, "steps_per_epoch": 3, "shuffle": False},
            "consistency": {"mode": "sync", "replicas_to_aggregate": 2},
            "placement": {"strategy": "round_robin", "num_shards": 2},
            "nonfinite": "skip", "strategy": "parameter_server", "seed": 9,
            "data": {"train": {"type": "synthetic", "samples": 10, "features": 784}}}
    put("job_spec_fuzzer", "everything.json", json.dumps(tiny))
    put("keras_model_fuzzer", "seed.json", json.dumps(job["model"]))
    cnn = {"class_name": "Sequential", "config": {"name": "cnn", "layers": [
        {"class_name": "InputLayer", "config": {"batch_input_shape": [None, 28, 28, 1]}},
        {"class_name": "Conv2D", "config": {"name": "conv", "filters": 4, "kernel_size": [3, 3],
                                            "activation": "relu"}},
        {"class_name": "MaxPooling2D", "config": {"name": "pool", "pool_size": [2, 2]}},
        {"class_name": "Flatten", "config": {"name": "flatten"}},
        {"class_name": "Dense", "config": {"name": "out", "units": 10, "activation": "softmax"}}]}}
    put("keras_model_fuzzer", "cnn.json", json.dumps(cnn))


def keras_weights_h5(layers):
    """model.weights.h5 as Keras 3 lays it out: an empty root "vars" group, then per layer
    "layers/<path>/vars" holding datasets "0", "1", ... (no timestamps: the bytes are
    reproducible)."""
    import io
    import h5py
    import numpy as np
    buffer = io.BytesIO()
    untimed = h5py.h5p.create(h5py.h5p.GROUP_CREATE)
    untimed.set_obj_track_times(False)

    def group(f, name):
        return h5py.Group(h5py.h5g.create(f.id, name.encode(), gcpl=untimed))

    with h5py.File(buffer, "w") as f:
        group(f, "vars")
        group(f, "layers")
        for path, arrays in layers:
            group(f, "layers/" + path)
            vars_group = group(f, "layers/%s/vars" % path)
            for i, array in enumerate(arrays):
                vars_group.create_dataset(str(i), data=np.asarray(array), track_times=False)
    return buffer.getvalue()


def keras_file():
    """Inputs of keras_file_fuzzer: config.json, then model.weights.h5 (split at SEP)."""
    import numpy as np
    rng = np.random.default_rng(7)
    dense = {"class_name": "Sequential", "config": {"name": "tiny", "layers": [
        {"class_name": "InputLayer", "config": {"batch_input_shape": [None, 4]}},
        {"class_name": "Dense", "config": {"name": "dense", "units": 3, "activation": "relu"}},
        {"class_name": "Dropout", "config": {"name": "dropout", "rate": 0.5}},
        {"class_name": "Dense", "config": {"name": "dense_1", "units": 2,
                                           "activation": "softmax"}}]},
        "compile_config": {"optimizer": "adam", "loss": "sparse_categorical_crossentropy"}}
    f32 = lambda *shape: rng.standard_normal(shape).astype("<f4")
    weights = [("dense", [f32(4, 3), f32(3)]), ("dropout", []),
               ("dense_1", [f32(3, 2), f32(2)])]
    put("keras_file_fuzzer", "dense.txt", json.dumps(dense).encode() + SEP +
        keras_weights_h5(weights))
    # Integers and doubles are converted to float32, as Keras's loader casts them.
    other_types = [("dense", [np.arange(12, dtype="<i4").reshape(4, 3), np.zeros(3, "<f8")]),
                   ("dropout", []), ("dense_1", [f32(3, 2), f32(2)])]
    put("keras_file_fuzzer", "int_and_double.txt", json.dumps(dense).encode() + SEP +
        keras_weights_h5(other_types))
    wrong_shape = [("dense", [f32(3, 4), f32(3)]), ("dropout", []),
                   ("dense_1", [f32(3, 2), f32(2)])]
    put("keras_file_fuzzer", "wrong_shape.txt", json.dumps(dense).encode() + SEP +
        keras_weights_h5(wrong_shape))
    # A whole archive, for the reading of the raw input as the file (stored members with a
    # fixed date, as Python's zipfile and Keras write them).
    import io
    import zipfile
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as z:
        for name, data in (("metadata.json", b'{"keras_version": "3.3.3"}'),
                           ("config.json", json.dumps(dense).encode()),
                           ("model.weights.h5", keras_weights_h5(weights))):
            z.writestr(zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0)), data)
    put("keras_file_fuzzer", "dense.keras", archive.getvalue())
    cnn = {"class_name": "Sequential", "config": {"name": "cnn", "layers": [
        {"class_name": "InputLayer", "config": {"batch_input_shape": [None, 6, 6, 1]}},
        {"class_name": "Conv2D", "config": {"name": "conv", "filters": 2, "kernel_size": [3, 3],
                                            "use_bias": False}},
        {"class_name": "BatchNormalization", "config": {"name": "bn"}},
        {"class_name": "MaxPooling2D", "config": {"name": "pool", "pool_size": [2, 2]}},
        {"class_name": "Flatten", "config": {"name": "flatten"}},
        {"class_name": "Dense", "config": {"name": "out", "units": 3,
                                           "activation": "softmax"}}]}}
    cnn_weights = [("conv2d", [f32(3, 3, 1, 2)]),
                   ("batch_normalization", [f32(2), f32(2), f32(2), np.ones(2, "<f4")]),
                   ("max_pooling2d", []), ("flatten", []), ("dense", [f32(8, 3), f32(3)])]
    put("keras_file_fuzzer", "cnn.txt", json.dumps(cnn).encode() + SEP +
        keras_weights_h5(cnn_weights))


def idx():
    images = struct.pack(">IIII", 0x803, 2, 3, 3) + bytes(range(18))
    labels = struct.pack(">II", 0x801, 2) + bytes([1, 7])
    put("idx_reader_fuzzer", "images.idx", images)
    put("idx_reader_fuzzer", "labels.idx", labels)
    put("idx_reader_fuzzer", "images.idx.gz", gzip.compress(images, mtime=0))
    put("idx_reader_fuzzer", "truncated.idx", images[:20])


def npy_bytes(descr, shape, payload):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    while (10 + len(header) + 1) % 64:
        header += " "
    header += "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + payload


def npy():
    x = npy_bytes("<f4", "(2, 3)", floats(1, 2, 3, 4, 5, 6))
    y = npy_bytes("<i8", "(2,)", struct.pack("<2q", 0, 1))
    put("npy_reader_fuzzer", "pair.bin", x + SEP + y)
    put("npy_reader_fuzzer", "f8.npy", npy_bytes("<f8", "(2,)", struct.pack("<2d", 0.5, -1)))
    put("npy_reader_fuzzer", "u1.npy", npy_bytes("|u1", "(2, 2, 1)", bytes([0, 1, 2, 255])))


def csv():
    put("csv_reader_fuzzer", "header.csv", b"\x01" + b"a,b,label\n1,2,0\n3.5,-4,1\n\n")
    put("csv_reader_fuzzer", "semicolon.csv", b"\x06" + b"0;1;2\r\n1;3;4\r\n")
    put("csv_reader_fuzzer", "nan.csv", b"\x01" + b"a,y\n1,0\nnan,1\n")


def checkpoint():
    kernel = floats(1, 2, 3, 4, 5, 6)
    bias = floats(-1, 0.5)
    manifest = {"format": "pstrain-checkpoint", "version": 1, "step": 7, "epoch": 1,
                "job_spec": {}, "metadata": {"variables": {"dense/kernel": 3}},
                "data_files": ["data-00000"],
                "tensors": [{"name": "dense/kernel", "dtype": "float32", "shape": [2, 3],
                             "file": "data-00000", "offset": 0, "length": 24,
                             "crc32c": crc32c(kernel)},
                            {"name": "dense/bias", "dtype": "float32", "shape": [2],
                             "file": "data-00000", "offset": 24, "length": 8,
                             "crc32c": crc32c(bias)}]}
    put("checkpoint_fuzzer", "good.bin", json.dumps(manifest).encode() + SEP + kernel + bias)
    manifest["tensors"][0]["offset"] = 9223372036854775000
    put("checkpoint_fuzzer", "offset_overflow.bin", json.dumps(manifest).encode() + SEP + kernel + bias)


def safetensors():
    header = json.dumps({"__metadata__": {"format": "pt"},
                         "w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
                         "b": {"dtype": "F32", "shape": [2], "data_offsets": [16, 24]}}).encode()
    while (8 + len(header)) % 8:
        header += b" "
    put("safetensors_fuzzer", "model.safetensors",
        struct.pack("<Q", len(header)) + header + floats(1, 2, 3, 4, 5, 6))
    # As tensor specs for the round trip: rank 2 [2,3], then rank 1 [4].
    put("safetensors_fuzzer", "specs.bin", bytes([0b10101110]) + floats(*range(6)) +
        bytes([0b00010001]) + floats(1, 2, 3, 4))


def payload_message():
    header = encode("PushPullChunkRequest",
                    'push { worker: "worker 0" step: 3 request_id: 99 gradients { name: "w" '
                    'gradient { dtype: DT_FLOAT shape: 2 } } }')
    chunk = encode("PushPullChunkRequest", 'tensor: 0 offset: 8 data: "abcdefgh" commit: true')
    put("payload_message_fuzzer", "header.bin", b"\x00" + header)
    put("payload_message_fuzzer", "chunk_split.bin", b"\x1b" + chunk)


def ps_service():
    def call(method, message, text):
        body = encode(message, text)
        return bytes([method]) + struct.pack("<H", len(body)) + body

    create = call(0, "CreateVariablesRequest",
                  'variables { name: "w" initial_value { dtype: DT_FLOAT shape: 2 content: '
                  '"\\000\\000\\200?\\000\\000\\000@" } } optimizer { name: "adam" learning_rate: 0.1 }')
    push = call(3, "PushPullRequest",
                'push { request_id: 5 gradients { name: "w" gradient { dtype: DT_FLOAT shape: 2 '
                'content: "\\000\\000\\200?\\000\\000\\200?" } } }')
    nan = call(2, "PushRequest",
               'gradients { name: "w" gradient { dtype: DT_FLOAT shape: 2 '
               'content: "\\000\\000\\300\\177\\000\\000\\200?" } }')
    pull = call(1, "PullRequest", 'names: "w" names: "w"')
    read = call(4, "ReadStateRequest", "")
    restore = call(5, "RestoreStateRequest",
                   'variables { name: "w" version: 3 iterations: 3 value { dtype: DT_FLOAT shape: 2 '
                   'content: "\\000\\000\\000\\000\\000\\000\\000\\000" } }')
    put("ps_service_fuzzer", "session.bin", create + push + push + nan + pull + read + restore + b"\x06\x00\x00")
    sync = call(0, "CreateVariablesRequest",
                'variables { name: "v" initial_value { dtype: DT_FLOAT shape: 1 '
                'content: "\\000\\000\\000\\000" } } optimizer { name: "sgd" } '
                'consistency { mode: CONSISTENCY_SYNC replicas_to_aggregate: 2 timeout_ms: 1 }')
    put("ps_service_fuzzer", "sync.bin", sync + call(2, "PushRequest",
        'worker: "a" versions: 0 gradients { name: "v" gradient { dtype: DT_FLOAT shape: 1 '
        'content: "\\000\\000\\200?" } }'))


def main():
    # Nothing is deleted first: reproducers of fixed bugs, added to the corpus by hand
    # (ps_service_fuzzer/adam_velocity_overflow.bin), stay.
    tf_config()
    models()
    keras_file()
    idx()
    npy()
    csv()
    checkpoint()
    safetensors()
    payload_message()
    ps_service()


if __name__ == "__main__":
    main()

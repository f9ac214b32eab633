#!/usr/bin/python3
"""Loads a .safetensors file with numpy alone, written from the format's specification
(github.com/huggingface/safetensors, "Format"), with nothing of pstrain's exporter:

  8 bytes    N, an unsigned little-endian 64-bit integer: the size of the header
  N bytes    a UTF-8 JSON object: for each tensor name {"dtype", "shape", "data_offsets":
             [begin, end]}, offsets into the byte buffer that follows; an optional
             "__metadata__" object of strings
  the rest   the byte buffer: every tensor's little-endian data, the tensors' ranges
             contiguous, covering the whole buffer, neither overlapping nor leaving holes

usage: load_safetensors.py FILE [RAW_DIR]

Prints "NAME DTYPE SHAPE" per tensor (shape as AxB) in name order. With RAW_DIR, each
tensor is also compared with RAW_DIR/NAME.raw ('/' in NAME as '__'), raw little-endian data
of the same dtype written by the caller from its own copy: "equal NAME" or "DIFFERENT
NAME", bit for bit. Exits 1 on a malformed file or a difference.
"""

import json
import os
import struct
import sys

import numpy as np

DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4",
          "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?"}


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError("shorter than the 8-byte header size")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError("header size %d past the end of the file" % n)
    header = json.loads(data[8:8 + n].decode("utf-8"))
    metadata = header.pop("__metadata__", {})
    buffer = data[8 + n:]
    tensors = {}
    spans = []
    for name, entry in header.items():
        dtype = np.dtype(DTYPES[entry["dtype"]])
        shape = [int(d) for d in entry["shape"]]
        begin, end = (int(x) for x in entry["data_offsets"])
        count = int(np.prod(shape, dtype=np.int64))
        if end - begin != count * dtype.itemsize:
            raise ValueError("%s: %d bytes for %d values" % (name, end - begin, count))
        tensors[name] = np.frombuffer(buffer, dtype=dtype, count=count,
                                      offset=begin).reshape(shape)
        spans.append((begin, end, name))
    position = 0
    for begin, end, name in sorted(spans):
        if begin != position:
            raise ValueError("%s starts at %d, not %d: a hole or an overlap" %
                             (name, begin, position))
        position = end
    if position != len(buffer):
        raise ValueError("the tensors cover %d of the buffer's %d bytes" %
                         (position, len(buffer)))
    return tensors, metadata


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        tensors, _ = load(sys.argv[1])
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as error:
        print("malformed: %s" % error, file=sys.stderr)
        return 1
    differences = 0
    for name in sorted(tensors):
        t = tensors[name]
        print("%s %s %s" % (name, t.dtype.str, "x".join(str(d) for d in t.shape)))
        if len(sys.argv) == 3:
            raw = os.path.join(sys.argv[2], name.replace("/", "__") + ".raw")
            expected = np.fromfile(raw, dtype=t.dtype)
            same = t.tobytes() == expected.tobytes()
            differences += 0 if same else 1
            print("%s %s" % ("equal" if same else "DIFFERENT", name))
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())

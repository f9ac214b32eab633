"""Checks a .keras file against the checkpoint it was exported from, with Python's zipfile,
h5py and numpy only (no pstrain code): the layout Keras 3's saving library writes
(keras/src/saving/saving_lib.py) and every layer's weights equal to the checkpoint's.

  check_keras_file.py MODEL.keras CHECKPOINT_DIR

CHECKPOINT_DIR holds manifest.json and the data files (common/checkpoint/checkpoint.h).
Prints one "ok: ..." line and exits 0, or prints what differs and exits 1.
"""

import json
import re
import sys
import zipfile

import h5py
import numpy as np

# Each Keras layer's variables, in the order Keras declares (and saves) them.
def keras_variables(class_name, config):
    if class_name in ("Dense", "Conv2D"):
        return ["kernel", "bias"] if config.get("use_bias", True) else ["kernel"]
    if class_name == "BatchNormalization":
        names = (["gamma"] if config.get("scale", True) else []) + \
                (["beta"] if config.get("center", True) else [])
        return names + ["moving_mean", "moving_variance"]
    if class_name == "Embedding":
        return ["embeddings"]
    return []


def snake_case(name):  # keras/src/utils/naming.py to_snake_case
    name = re.sub(r"\W+", "", name)
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    name = re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()
    return name


def read_checkpoint(directory):
    with open(f"{directory}/manifest.json") as f:
        manifest = json.load(f)
    tensors = {}
    for t in manifest["tensors"]:
        assert t["dtype"] == "float32", t
        with open(f"{directory}/{t['file']}", "rb") as f:
            f.seek(t["offset"])
            raw = f.read(t["length"])
        tensors[t["name"]] = np.frombuffer(raw, dtype="<f4").reshape(t["shape"])
    return tensors


def main(keras_path, checkpoint_dir):
    errors = []
    with zipfile.ZipFile(keras_path) as archive:
        names = archive.namelist()
        if names != ["metadata.json", "config.json", "model.weights.h5"]:
            errors.append(f"members {names}")
        for info in archive.infolist():
            if info.compress_type != zipfile.ZIP_STORED:
                errors.append(f"{info.filename} is compressed ({info.compress_type})")
        metadata = json.loads(archive.read("metadata.json"))
        config = json.loads(archive.read("config.json"))
        with archive.open("model.weights.h5") as f:
            weights_bytes = f.read()
    if not str(metadata.get("keras_version", "")).startswith("3."):
        errors.append(f"keras_version {metadata.get('keras_version')}")
    if not re.fullmatch(r"\d{4}-\d\d-\d\d@\d\d:\d\d:\d\d", metadata.get("date_saved", "")):
        errors.append(f"date_saved {metadata.get('date_saved')}")

    for key in ("module", "class_name", "config", "registered_name", "build_config",
                "compile_config"):
        if key not in config:
            errors.append(f"config.json has no {key}")
    if config.get("class_name") != "Sequential" or config.get("module") != "keras":
        errors.append(f"model {config.get('module')}.{config.get('class_name')}")
    layers = config["config"]["layers"]
    if layers[0]["class_name"] != "InputLayer":
        errors.append(f"first layer {layers[0]['class_name']}")
    batch_shape = layers[0]["config"]["batch_shape"]
    if config["build_config"]["input_shape"] != batch_shape:
        errors.append(f"build input {config['build_config']['input_shape']} vs {batch_shape}")
    for layer in layers:
        for key in ("module", "class_name", "config", "registered_name"):
            if key not in layer:
                errors.append(f"layer {layer.get('class_name')} has no {key}")
    compile_config = config["compile_config"]
    for key in ("optimizer", "loss", "metrics"):
        if key not in compile_config:
            errors.append(f"compile_config has no {key}")

    checkpoint = read_checkpoint(checkpoint_dir)
    import io
    h5 = h5py.File(io.BytesIO(weights_bytes), "r")
    if "vars" not in h5 or len(h5["vars"]) != 0:
        errors.append("no empty root vars group")
    used = {}
    expected_groups = []
    compared = 0
    for layer in layers[1:]:
        class_name, layer_config = layer["class_name"], layer["config"]
        group = snake_case(class_name)
        if group in used:
            used[group] += 1
            group = f"{group}_{used[group]}"
        else:
            used[group] = 0
        expected_groups.append(group)
        path = f"layers/{group}/vars"
        if path not in h5:
            errors.append(f"no group {path}")
            continue
        variables = keras_variables(class_name, layer_config)
        if sorted(h5[path].keys()) != sorted(str(i) for i in range(len(variables))):
            errors.append(f"{path} holds {sorted(h5[path].keys())}, want {len(variables)}")
            continue
        for i, variable in enumerate(variables):
            dataset = h5[f"{path}/{i}"]
            want = checkpoint.get(f"{layer_config['name']}/{variable}")
            if want is None:
                errors.append(f"checkpoint has no {layer_config['name']}/{variable}")
                continue
            if dataset.dtype != np.dtype("<f4"):
                errors.append(f"{path}/{i} dtype {dataset.dtype}")
            got = dataset[()]
            if got.shape != want.shape or not np.array_equal(got, want):
                errors.append(f"{path}/{i} ({layer_config['name']}/{variable}) differs: "
                              f"{got.shape} vs {want.shape}")
            compared += 1
        # Shapes as Keras builds them from the config.
        if class_name == "Dense" and f"{path}/0" in h5:
            if h5[f"{path}/0"].shape[1] != layer_config["units"]:
                errors.append(f"{path}/0 shape {h5[f'{path}/0'].shape} for {layer_config['units']} units")
    if sorted(h5["layers"].keys()) != sorted(expected_groups):
        errors.append(f"layer groups {sorted(h5['layers'].keys())}, want {sorted(expected_groups)}")
    if errors:
        print("\n".join(errors))
        return 1
    print(f"ok: {len(layers) - 1} layers, {compared} tensors equal to the checkpoint's")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))

#!/usr/bin/env bash
# End-to-end training throughput of pstrain's configurations, in one run, as real processes
# on loopback (issue 29 item 1). For the seed model (examples/fashion_mnist.json) and the
# wide one (examples/fashion_mnist_wide.json, 784-1024-10) it runs, one after the other:
#   one process (--strategy=default), the parameter-server cluster with 2 ps + 2 workers
#   and 1 ps + 1 worker, and multi_worker_mirrored with 2 workers,
# each for --epochs epochs (the job's validation data left out: training only), and prints
# samples/s (60000 / the median epoch period of epochs 2..N), CPU per sample (user + sys
# of the launcher and every process under it, /usr/bin/time; for epochs 2..N alone, the
# N-epoch run's CPU minus that of a 1-epoch run of the same configuration) and each
# configuration's ratio to the one process of the same model; then, for each parameter-
# server configuration, its ceiling on this machine's cores: the CPU one exchange per ps
# per step costs (bench/ps_throughput at each ps's bytes, in the same run) added to one
# process's work. Asserts nothing about time (bench/README.md).
#
# Epoch period: the time between consecutive "checkpoint ... written (epoch N" log lines of
# the process that trains or coordinates (the trainer, the chief, worker 0), which carry
# millisecond timestamps; every configuration writes one checkpoint per epoch.
#
#   bench/cluster_throughput.sh [--epochs=3] [--timeout=600] [--models=seed,wide]
#                               [--configs=one,ps2w2,ps1w1,mwm2] [--keep]
#                               [--wire_dtype=float32|bfloat16|float16] [--overlap]
#                               [--no_peers]
# --wire_dtype sets the jobs' "wire_dtype" (the parameter-server exchange in 16 bits).
# --overlap sets the jobs' "overlap": true (a parameter-server worker computes a step while
# the previous one's exchange is in flight; the other strategies ignore it).
# --no_peers leaves out the PyTorch peers (for before/after runs of pstrain alone).
set -euo pipefail

epochs=3
run_timeout=600
models=seed,wide
configs=one,ps2w2,ps1w1,mwm2
keep=false
peers=true
wire_dtype=float32
overlap=false
for a in "$@"; do
  case "$a" in
    --epochs=*) epochs="${a#--epochs=}" ;;
    --timeout=*) run_timeout="${a#--timeout=}" ;;
    --models=*) models="${a#--models=}" ;;
    --configs=*) configs="${a#--configs=}" ;;
    --keep) keep=true ;;
    --no_peers) peers=false ;;
    --wire_dtype=*) wire_dtype="${a#--wire_dtype=}" ;;
    --overlap) overlap=true ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "cluster_throughput: unknown flag $a" >&2; exit 2 ;;
  esac
done
if ! [[ "$epochs" =~ ^[0-9]+$ ]] || (( epochs < 2 )); then
  echo "cluster_throughput: --epochs must be at least 2 (epoch 1 is not timed)" >&2
  exit 2
fi
command -v python3 >/dev/null || { echo "cluster_throughput: needs python3" >&2; exit 1; }

cd "$(dirname "$0")/.."
log=$(mktemp /tmp/pstrain-bench-build-XXXXXX.log)
if ! bazel build //deploy/local:launcher //bench:ps_throughput >"$log" 2>&1; then
  tail -20 "$log" >&2
  echo "cluster_throughput: build failed; log in $log" >&2
  exit 1
fi
rm -f "$log"
launcher=bazel-bin/deploy/local/launcher
ps_throughput=bazel-bin/bench/ps_throughput

work=$(mktemp -d /tmp/pstrain-bench-XXXXXX)
cleanup() {
  if [[ "$keep" == true ]]; then
    echo "kept $work"
    return
  fi
  # Folders the launcher made itself (it prints them) though this script names its own.
  grep -ho '/tmp/pstrain-\(logs\|checkpoints\|tensorboard\)-[A-Za-z0-9]*' \
    "$work"/*/out 2>/dev/null | sort -u | while read -r d; do rm -rf -- "$d"; done || true
  rm -rf -- "$work"
}
trap cleanup EXIT

declare -A job_of=([seed]=examples/fashion_mnist.json [wide]=examples/fashion_mnist_wide.json)
declare -A args_of=(
  [one]="--strategy=default"
  [ps2w2]="--ps=2 --workers=2"
  [ps1w1]="--ps=1 --workers=1"
  [mwm2]="--strategy=multi_worker_mirrored --workers=2"
)

echo "cluster_throughput: $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) cores," \
  "$epochs epochs per run, wire_dtype $wire_dtype, overlap $overlap, $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

results="$work/results.jsonl"
: >"$results"
IFS=, read -ra model_list <<<"$models"
IFS=, read -ra config_list <<<"$configs"
for model in "${model_list[@]}"; do
  [[ -n "${job_of[$model]:-}" ]] || { echo "unknown model $model" >&2; exit 2; }
  job="$work/$model.json"
  # Training only: without validation data the epoch period is the training epoch and
  # its checkpoint, in every configuration alike.
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); j["data"].pop("validation",None); j["wire_dtype"]=sys.argv[3]; j["overlap"]=sys.argv[4]=="true"; json.dump(j,open(sys.argv[2],"w"))' \
    "${job_of[$model]}" "$job" "$wire_dtype" "$overlap"
  for config in "${config_list[@]}"; do
    [[ -n "${args_of[$config]:-}" ]] || { echo "unknown config $config" >&2; exit 2; }
    # A 1-epoch run first: what the N-epoch run's CPU has beyond it is epochs 2..N alone
    # (no start-up, data loading or shutdown).
    for n in 1 "$epochs"; do
    run="$work/$model-$config-$n"
    mkdir -p "$run"
    rc=0
    # shellcheck disable=SC2086  # the configuration's flags are words
    /usr/bin/time -f '%U %S %e' -o "$run/time" timeout -k 10 "$run_timeout" \
      "$launcher" ${args_of[$config]} --epochs="$n" --job="$(realpath "$job")" \
      --log_dir="$run/logs" --checkpoint_dir="$run/ckpt" --logdir="$run/tb" \
      >"$run/out" 2>&1 || rc=$?
    python3 - "$run" "$model" "$config" "$rc" "$n" >>"$results" <<'EOF'
import glob, json, re, statistics, sys
run, model, config, rc, epochs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
line = re.compile(r"^I (\d\d):(\d\d):(\d\d\.\d+) [^]]*\] checkpoint \S+ written \(epoch (\d+),")
times = {}
# The trainer's lines are in out (one process); the chief's and worker 0's in logs/.
for path in [run + "/logs/chief.log", run + "/logs/worker0.log", run + "/out"]:
    try:
        text = open(path, errors="replace").read().splitlines()
    except OSError:
        continue
    for l in text:
        m = line.match(l)
        if m:
            times[int(m.group(4))] = int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
    if times:
        break
periods = []
for e in range(2, epochs + 1):
    if e in times and e - 1 in times:
        d = times[e] - times[e - 1]
        periods.append(d + 86400 if d < 0 else d)  # past midnight
user, sys_, wall = 0.0, 0.0, 0.0
try:
    user, sys_, wall = (float(x) for x in open(run + "/time").read().strip().splitlines()[-1].split())
except (OSError, ValueError):
    pass
period = statistics.median(periods) if periods and len(periods) == epochs - 1 else None
print(json.dumps({"model": model, "config": config, "rc": rc, "epochs": epochs, "periods": periods,
                  "epoch_s": period, "samples_per_s": 60000 / period if period else None,
                  "cpu_s": user + sys_, "wall_s": wall,
                  "cpu_us_per_sample": 1e6 * (user + sys_) / (60000 * epochs)}))
EOF
    if (( rc != 0 )); then
      echo "  $model $config: launcher exit $rc; last lines of its output:" >&2
      tail -5 "$run/out" >&2
    fi
    done
  done
done

# The ceiling of each parameter-server configuration on this machine's cores, measured in
# the same run: what one exchange with each ps costs in CPU (bench/ps_throughput, a real ps
# over gRPC with authorization on, as the daemons run, Adam on the ps, one client), at the
# bytes that ps holds (its shard file in the N-epoch run's newest checkpoint, optimizer
# slots left out). A cluster that spent nothing beyond one process's work would still
# spend those exchanges on every step: the report prints what that allows.
ceiling="$work/ceiling.jsonl"
: >"$ceiling"
for model in "${model_list[@]}"; do
  for config in "${config_list[@]}"; do
    [[ "$config" == ps* ]] || continue
    ckpt=$(ls -d "$work/$model-$config-$epochs"/ckpt/ckpt-* 2>/dev/null | sort -t- -k2 -n | tail -1)
    [[ -n "$ckpt" && -f "$ckpt/manifest.json" ]] || continue
    sizes=$(python3 - "$ckpt/manifest.json" <<'EOF'
import collections, json, sys
m = json.load(open(sys.argv[1]))
per_file = collections.Counter()
for t in m["tensors"]:
    if "/optimizer/" in t["name"]:
        continue
    for piece in t["pieces"]:
        for block in piece["blocks"]:
            per_file[piece["file"]] += block["length"]
print(",".join(str(per_file[f]) for f in sorted(per_file)))
EOF
)
    out="$work/$model-$config-ceiling.out"
    timeout -k 10 "$run_timeout" "$ps_throughput" --sizes="$sizes" --workers=1 --optimizer=adam \
      --torch_peer=false \
      --authorization=on --seconds=2 >"$out" 2>&1 || true
    python3 - "$model" "$config" "$sizes" "$out" >>"$ceiling" <<'EOF'
import json, sys
model, config, sizes, path = sys.argv[1:5]
cells = {}
for line in open(path, errors="replace"):
    f = line.split()
    if len(f) == 12 and f[0].isdigit() and f[1] == "1":
        cells[int(f[0])] = {"store_push_per_s": float(f[9]), "cpu_us_per_call": float(f[10])}
wanted = [int(b) for b in sizes.split(",")]
ps = [dict(bytes=b, **cells[b]) for b in wanted if b in cells]
print(json.dumps({"model": model, "config": config, "ps": ps, "complete": len(ps) == len(wanted)}))
EOF
  done
done

# The PyTorch peers of every configuration, where python3-torch is installed
# (bench/torch_cluster_peers.py: one process, a torch.distributed.rpc parameter server,
# DDP over gloo; the same models, data, batch sizes and epochs, one thread a process).
torch_results="$work/torch.jsonl"
: >"$torch_results"
torch_line="python3-torch not installed: PyTorch peers skipped"
if [[ "$peers" == false ]]; then
  torch_line="PyTorch peers skipped (--no_peers)"
elif /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  torch_line=""
  declare -A torch_args_of=(
    [one]="--mode=one"
    [ps2w2]="--mode=rpc_ps --ps=2 --workers=2"
    [ps1w1]="--mode=rpc_ps --ps=1 --workers=1"
    [mwm2]="--mode=ddp --workers=2"
  )
  mkdir -p "$work/torch"
  for model in "${model_list[@]}"; do
    for config in "${config_list[@]}"; do
      out="$work/torch/$model-$config"
      # shellcheck disable=SC2086  # the configuration's flags are words
      timeout -k 10 "$run_timeout" /usr/bin/python3 bench/torch_cluster_peers.py \
        ${torch_args_of[$config]} --epochs="$epochs" --job="$(realpath "$work/$model.json")" \
        >"$out" 2>&1 || true
      line=$(grep '^torch mode=' "$out" | tail -1)
      python3 -c 'import json,sys; f=dict(kv.split("=",1) for kv in sys.argv[3].split()[1:] if "=" in kv); print(json.dumps({"model":sys.argv[1],"config":sys.argv[2],"samples_per_s":float(f["samples_per_s"]) if "samples_per_s" in f else None,"epoch_s":f.get("epoch_s"),"cpu_us_per_sample":f.get("cpu_us_per_sample")}))' \
        "$model" "$config" "${line:-torch failed}" >>"$torch_results"
    done
  done
fi

echo "load average at end:   $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$results" "$torch_results" "$ceiling" "$(nproc)" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
labels = {"one": "one process (--strategy=default)", "ps2w2": "ps cluster, 2 ps + 2 workers",
          "ps1w1": "ps cluster, 1 ps + 1 worker", "mwm2": "multi_worker_mirrored, 2 workers"}
short = {(r["model"], r["config"]): r for r in rows if r["epochs"] == 1}
full = [r for r in rows if r["epochs"] > 1]
for r in full:
    s = short.get((r["model"], r["config"]))
    r["cpu_us_steady"] = None
    if s and s["rc"] == 0 and r["rc"] == 0:
        r["cpu_us_steady"] = 1e6 * (r["cpu_s"] - s["cpu_s"]) / (60000 * (r["epochs"] - 1))
base = {r["model"]: r for r in full if r["config"] == "one"}
def ratio(r, b, key):
    return f"{r[key] / b[key]:.2f}x" if b and b.get(key) and r.get(key) else ""
print()
print("| model | configuration | s/epoch (median 2..N) | samples/s | x one process "
      "| CPU us/sample, epochs 2..N | x one process | CPU us/sample, whole run | epoch periods (s) |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for r in full:
    b = base.get(r["model"])
    if r["samples_per_s"] is None:
        print(f"| {r['model']} | {labels[r['config']]} | failed (exit {r['rc']}) | | | | | | |")
        continue
    steady = f"{r['cpu_us_steady']:.2f}" if r["cpu_us_steady"] is not None else "n/a"
    periods = " ".join(f"{p:.3f}" for p in r["periods"])
    print(f"| {r['model']} | {labels[r['config']]} | {r['epoch_s']:.3f} | {r['samples_per_s']:.0f} "
          f"| {ratio(r, b, 'samples_per_s')} | {steady} | {ratio(r, b, 'cpu_us_steady')} "
          f"| {r['cpu_us_per_sample']:.2f} | {periods} |")
print()
print("samples/s: 60000 / the median period between the epoch-end checkpoint log lines of epochs 2..N.")
print("CPU us/sample, epochs 2..N: user+sys of every process of the N-epoch run minus that of a")
print("1-epoch run of the same configuration, / (60000 x (N-1)). Whole run: / (60000 x N).")
ceilings = [json.loads(l) for l in open(sys.argv[3]) if l.strip()]
cores = int(sys.argv[4])
if ceilings:
    print()
    print("| model | configuration | bytes per ps | CPU us per exchange, each ps | of it Adam on the ps "
          "| floor CPU us/sample | x one process | ceiling samples/s on " + str(cores) + " cores "
          "| x one process on one busy core | measured CPU us/sample, epochs 2..N | of it the exchanges |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    by = {(r["model"], r["config"]): r for r in full}
    batch = 64  # per worker, in every job of this bench
    for c in ceilings:
        b = base.get(c["model"])
        if not c["complete"] or not b or b.get("cpu_us_steady") is None:
            print(f"| {c['model']} | {labels[c['config']]} | not measured | | | | | | | | |")
            continue
        exchange = sum(p["cpu_us_per_call"] for p in c["ps"])
        adam = sum(1e6 / p["store_push_per_s"] for p in c["ps"])
        floor = b["cpu_us_steady"] + (exchange - adam) / batch
        ceiling = cores * 1e6 / floor
        measured = (by.get((c["model"], c["config"])) or {}).get("cpu_us_steady")
        sizes = " + ".join(str(p["bytes"]) for p in c["ps"])
        calls = " + ".join(f"{p['cpu_us_per_call']:.0f}" for p in c["ps"])
        measured_text = f"{measured:.2f}" if measured else "n/a"
        share = f"{100 * (exchange - adam) / batch / measured:.0f}%" if measured else ""
        print(f"| {c['model']} | {labels[c['config']]} | {sizes} | {calls} | {adam:.0f} | {floor:.2f} "
              f"| {floor / b['cpu_us_steady']:.2f}x | {ceiling:.0f} | {cores * b['cpu_us_steady'] / floor:.2f}x "
              f"| {measured_text} | {share} |")
    print()
    print("Ceiling: one exchange per ps per step, each costing the CPU bench/ps_throughput measured for")
    print("that ps's bytes (one client, Adam, authorization on; client and ps together), on top of the")
    print("one process's CPU per sample (whose Adam the ps runs instead): the floor CPU per sample, and")
    print(f"what {cores} fully busy cores give at that floor, next to one process keeping one core busy")
    print("(CPU figures only, so the ratio does not move with the machine's other load; the one process")
    print("keeps about 1.1 cores busy). A goal above that ratio needs cheaper exchanges.")
torch = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
if torch:
    peers = {"one": "PyTorch one process", "ps2w2": "torch.distributed.rpc ps, 2 ps + 2 workers",
             "ps1w1": "torch.distributed.rpc ps, 1 ps + 1 worker", "mwm2": "DDP over gloo, 2 workers"}
    ours = {(r["model"], r["config"]): r for r in full}
    print()
    print("| model | PyTorch peer | s/epoch (median 2..N) | samples/s | pstrain's same configuration x this "
          "| CPU us/sample, whole run | pstrain's x this |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for t in torch:
        o = ours.get((t["model"], t["config"]))
        if t["samples_per_s"] is None:
            print(f"| {t['model']} | {peers[t['config']]} | failed | | | | |")
            continue
        speed = f"{o['samples_per_s'] / t['samples_per_s']:.2f}x" if o and o.get("samples_per_s") else ""
        cpu = f"{float(t['cpu_us_per_sample']) / o['cpu_us_per_sample']:.2f}x less" \
            if o and o.get("cpu_us_per_sample") and t.get("cpu_us_per_sample") else ""
        print(f"| {t['model']} | {peers[t['config']]} | {float(t['epoch_s']):.3f} | {t['samples_per_s']:.0f} "
              f"| {speed} | {float(t['cpu_us_per_sample']):.2f} | {cpu} |")
    print()
    print("PyTorch peers: bench/torch_cluster_peers.py, the same job, epochs and batch sizes; CPU of")
    print("the whole run (start-up and data loading included, as pstrain's whole-run column).")
EOF
[[ -n "$torch_line" ]] && echo "$torch_line"
if grep -q '"rc": [1-9]' "$results"; then exit 1; fi

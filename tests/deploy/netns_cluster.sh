#!/usr/bin/env bash
# A multi-host run without containers: the chief, 2 ps and 2 workers each in a network
# namespace of its own, with its own address in 192.0.2.0/24 (TEST-NET-1, a documentation
# range), joined by a bridge that lives in one more namespace made here. Nothing of it is
# in the host's own namespace, so traffic stays inside the namespaces this script made.
#
# It trains examples/fashion_mnist.json (Fashion-MNIST from Debian's dataset-fashion-mnist)
# for --epochs=N (4) with TF_CONFIG naming those addresses, each daemon started in its own
# working folder, and checks:
#   - every daemon exits 0 and the chief's last epoch line reaches --min_accuracy (0.83);
#   - the tasks talked over the bridge: sampled with `ss` inside each namespace during the
#     run, the chief had connections with all four other addresses, every task with at
#     least one other, and no connection had a loopback peer (a namespace's loopback
#     reaches only itself, so a daemon that tried another over loopback would fail);
#   - no shared filesystem is needed: the chief's folder holds the checkpoints, and the ps
#     and workers' folders stay empty (the logs are kept beside them).
# Everything it made (processes, namespaces, links, folders) is removed on exit, also on
# failure or Ctrl-C.
#
#   tests/deploy/netns_cluster.sh [--epochs=N] [--min_accuracy=X] [--keep_logs]
#
# Needs root (ip netns, veth, bridge); exits 77 with one line "SKIPPED: ..." where network
# namespaces are not permitted (./test.sh counts it as skipped). Builds the daemons with
# Bazel when they are missing. Ports are fixed (2222) because each namespace has its own.
set -uo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)

epochs=4
min_accuracy=0.83
keep_logs=0
for arg in "$@"; do
  case "$arg" in
    --epochs=*) epochs=${arg#--epochs=} ;;
    --min_accuracy=*) min_accuracy=${arg#--min_accuracy=} ;;
    --keep_logs) keep_logs=1 ;;
    *) echo "netns_cluster: unknown argument $arg" >&2; exit 2 ;;
  esac
done

say() { echo "netns_cluster: $*"; }
fail() { say "FAILED: $*"; exit 1; }

# ---- can this machine make network namespaces? ------------------------------------------
prefix="pst$$"          # short: interface and namespace names stay well under 15 chars
probe="${prefix}-probe"
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null 2>&1 ||
   ! ip netns add "$probe" 2>/dev/null; then
  echo "SKIPPED: network namespaces are not permitted here (needs root and 'ip netns add')"
  exit 77
fi
ip netns del "$probe"

tasks=(chief ps0 ps1 worker0 worker1)
declare -A address=([chief]=192.0.2.10 [ps0]=192.0.2.11 [ps1]=192.0.2.12
                    [worker0]=192.0.2.13 [worker1]=192.0.2.14)
declare -A pid=()
switch="${prefix}-sw"
work=$(mktemp -d /tmp/pstrain-netns-XXXXXX)
sampler_pid=""

cleanup() {
  local status=$?
  [ -n "$sampler_pid" ] && kill "$sampler_pid" 2>/dev/null
  for t in "${tasks[@]}"; do
    [ -n "${pid[$t]:-}" ] && kill -KILL "${pid[$t]}" 2>/dev/null
  done
  wait 2>/dev/null
  # Deleting a namespace deletes the veth ends in it, and so their peers on the bridge.
  for t in "${tasks[@]}"; do ip netns del "${prefix}-$t" 2>/dev/null; done
  ip netns del "$switch" 2>/dev/null
  if [ "$keep_logs" -eq 1 ]; then say "logs kept in $work"; else rm -rf "$work"; fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- the binaries -------------------------------------------------------------------------
binaries=(chief/chief ps_server/ps_server worker/worker)
for b in "${binaries[@]}"; do
  if [ ! -x "bazel-bin/$b" ]; then
    say "building the daemons"
    bazel build //chief //ps_server //worker >"$work/build.log" 2>&1 ||
      { tail -20 "$work/build.log"; fail "bazel build"; }
    break
  fi
done
declare -A binary=([chief]=$(realpath bazel-bin/chief/chief)
                   [ps]=$(realpath bazel-bin/ps_server/ps_server)
                   [worker]=$(realpath bazel-bin/worker/worker))

# ---- the network: a bridge in its own namespace, one veth pair per task ------------------
ip netns add "$switch" || fail "ip netns add $switch"
ip -n "$switch" link add br0 type bridge || fail "bridge"
ip -n "$switch" link set br0 up
for t in "${tasks[@]}"; do
  ns="${prefix}-$t"
  ip netns add "$ns" || fail "ip netns add $ns"
  ip -n "$switch" link add "v$t" type veth peer name eth0 netns "$ns" || fail "veth for $t"
  ip -n "$switch" link set "v$t" master br0 up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "${address[$t]}/24" dev eth0
  ip -n "$ns" link set eth0 up
done
# Wait until every bridge port forwards (at once without STP; a few seconds at most).
for _ in $(seq 1 50); do
  [ "$(bridge -n "$switch" link show | grep -c "state forwarding")" -eq ${#tasks[@]} ] && break
  sleep 0.2
done
[ "$(bridge -n "$switch" link show | grep -c "state forwarding")" -eq ${#tasks[@]} ] ||
  fail "the bridge's ports do not forward: $(bridge -n "$switch" link show)"
say "5 namespaces on a bridge: chief ${address[chief]}, ps ${address[ps0]} ${address[ps1]}," \
    "workers ${address[worker0]} ${address[worker1]}"

# ---- the cluster ----------------------------------------------------------------------------
cluster="{\"chief\":[\"${address[chief]}:2222\"],\"ps\":[\"${address[ps0]}:2222\",\"${address[ps1]}:2222\"],\"worker\":[\"${address[worker0]}:2222\",\"${address[worker1]}:2222\"]}"
# The job's shared auth token (authorization is on by default), one per run.
auth_token=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
start_task() {  # name type index flags...
  local name=$1 type=$2 index=$3
  shift 3
  mkdir -p "$work/$name"
  # cd, then exec: the PID recorded is the daemon's own.
  (cd "$work/$name" &&
   exec ip netns exec "${prefix}-$name" env \
     TF_CONFIG="{\"cluster\":$cluster,\"task\":{\"type\":\"$type\",\"index\":$index}}" \
     OPENBLAS_NUM_THREADS=1 PSTRAIN_AUTH_TOKEN="$auth_token" "${binary[$type]}" "$@") \
     >"$work/$name.log" 2>&1 &
  pid[$name]=$!
}
start_task ps0 ps 0 --register_timeout=120s
start_task ps1 ps 1 --register_timeout=120s
start_task worker0 worker 0 --device=cpu --register_timeout=120s
start_task worker1 worker 1 --device=cpu --register_timeout=120s
start_task chief chief 0 --job="$repo/examples/fashion_mnist.json" --epochs="$epochs" \
  --register_timeout=120s --checkpoint_dir="$work/chief/checkpoints"
started=$(date +%s)

# Established TCP connections in every namespace, once a second, while the job runs.
(
  while :; do
    for t in "${tasks[@]}"; do
      ip netns exec "${prefix}-$t" ss -Htn state established 2>/dev/null |
        awk -v t="$t" '{print t, $3, $4}' >>"$work/connections"
    done
    sleep 1
  done
) &
sampler_pid=$!

# ---- wait for the job -------------------------------------------------------------------
deadline=$((started + 900))
while kill -0 "${pid[chief]}" 2>/dev/null; do
  [ "$(date +%s)" -lt "$deadline" ] || { tail -5 "$work/chief.log"; fail "the job took over 900 s"; }
  sleep 1
done
declare -A code=()
for t in "${tasks[@]}"; do
  for _ in $(seq 1 60); do kill -0 "${pid[$t]}" 2>/dev/null || break; sleep 1; done
  if kill -0 "${pid[$t]}" 2>/dev/null; then
    tail -5 "$work/$t.log"
    fail "$t still runs 60 s after the chief exited"
  fi
  wait "${pid[$t]}"
  code[$t]=$?
  pid[$t]=""
done
kill "$sampler_pid" 2>/dev/null
wait "$sampler_pid" 2>/dev/null
sampler_pid=""
elapsed=$(($(date +%s) - started))

for t in "${tasks[@]}"; do
  if [ "${code[$t]}" -ne 0 ]; then
    tail -5 "$work/$t.log"
    fail "$t exited ${code[$t]}"
  fi
done
last_epoch=$(grep -E "^Epoch $epochs/$epochs .*val_accuracy: [0-9.]+" "$work/chief.log" | tail -1)
[ -n "$last_epoch" ] || { tail -10 "$work/chief.log"; fail "no line for epoch $epochs/$epochs"; }
accuracy=$(sed -E 's/.*val_accuracy: ([0-9.]+).*/\1/' <<<"$last_epoch")
awk -v a="$accuracy" -v m="$min_accuracy" 'BEGIN { exit !(a >= m) }' ||
  fail "val_accuracy $accuracy is below $min_accuracy"
say "all 5 daemons exited 0 after $elapsed s; $last_epoch"

# ---- who talked to whom -------------------------------------------------------------------
[ -s "$work/connections" ] || fail "no established connection was seen in any namespace"
loopback=$(awk '$3 ~ /^(127\.|\[::1\]|\[::ffff:127\.)/' "$work/connections" | sort -u)
[ -z "$loopback" ] || { head -5 <<<"$loopback"; fail "a connection over loopback"; }
for t in "${tasks[@]}"; do
  peers=$(awk -v t="$t" '$1 == t { sub(/:[0-9]+$/, "", $3); gsub(/\[::ffff:|\[|\]/, "", $3);
                                   print $3 }' "$work/connections" |
          sort -u | tr '\n' ' ')
  [ -n "$peers" ] || fail "$t had no connection"
  for p in $peers; do
    [[ "$p" == 192.0.2.* ]] || fail "$t talked to $p, outside 192.0.2.0/24"
    [ "$p" != "${address[$t]}" ] || fail "$t talked to its own address"
  done
  if [ "$t" = chief ]; then
    for other in ps0 ps1 worker0 worker1; do
      [[ " $peers" == *" ${address[$other]} "* ]] ||
        fail "the chief never had a connection with $other (${address[$other]})"
    done
  fi
  say "$t (${address[$t]}) talked to: $peers"
done

# ---- storage: the chief's alone -----------------------------------------------------------
checkpoints=$(find "$work/chief/checkpoints" -type f 2>/dev/null | wc -l)
[ "$checkpoints" -gt 0 ] || fail "the chief wrote no checkpoint in its folder"
for t in ps0 ps1 worker0 worker1; do
  stray=$(find "$work/$t" -mindepth 1 | head -3)
  [ -z "$stray" ] || fail "$t wrote into its folder: $stray"
done
say "checkpoints: $checkpoints files in the chief's folder only; the ps and workers wrote none"
say "PASSED"

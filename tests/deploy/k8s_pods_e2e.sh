#!/usr/bin/env bash
# The Kubernetes manifests of deploy/k8s run as pods by `podman kube play`, as far as
# Podman goes without a cluster:
#
#   tests/deploy/k8s_pods_e2e.sh [--no-build] [--min_accuracy=0.85] [--keep_logs]
#
# Renders deploy/k8s with `kubectl kustomize` (exactly what `kubectl apply -k` would send),
# turns each Job's pod template into a Pod of the same name (tests/deploy/k8s_pods.py: its
# command, env with TF_CONFIG and OPENBLAS_NUM_THREADS from the CPU limit, securityContext,
# resources, probes, restartPolicy, the ConfigMap with the job spec and the
# PersistentVolumeClaim mounted in the chief), plays them on a Podman network of their own,
# and checks that:
#   - OPENBLAS_NUM_THREADS in each container is its CPU limit (the downward API resolved);
#   - the chief reads its job spec from the ConfigMap volume and writes checkpoints into
#     the claim's volume as uid 10001;
#   - all five containers exit 0 and the chief's last epoch has val_accuracy >=
#     --min_accuracy.
# What only a real cluster shows is in deploy/README.md ("What has been run here").
# Everything it made (pods, volumes, network) is removed on exit, also on failure.
#
# Needs root, Podman (installed from Debian when missing, as by container_e2e.sh) and
# kubectl for kustomize; builds localhost/pstrain:latest unless --no-build and it exists.
set -uo pipefail
cd "$(dirname "$0")/../.."

build=1
keep_logs=0
min_accuracy=0.85
for arg in "$@"; do
  case "$arg" in
    --no-build) build=0 ;;
    --keep_logs) keep_logs=1 ;;
    --min_accuracy=*) min_accuracy=${arg#--min_accuracy=} ;;
    *) echo "k8s_pods_e2e: unknown argument $arg" >&2; exit 2 ;;
  esac
done

work=$(mktemp -d /tmp/pstrain-k8s-XXXXXX)
# shellcheck source=tests/deploy/podman_lib.sh
source tests/deploy/podman_lib.sh

run="pstrain-k8s-$$"
network="$run"
claim="$run-checkpoints"
pods=(pstrain-chief-0 pstrain-ps-0 pstrain-ps-1 pstrain-worker-0 pstrain-worker-1)
declare -A container_of=([pstrain-chief-0]=chief [pstrain-ps-0]=ps [pstrain-ps-1]=ps
                         [pstrain-worker-0]=worker [pstrain-worker-1]=worker)
ctr() { echo "$1-${container_of[$1]}"; }   # kube play names a container <pod>-<container>

cleanup() {
  local status=$?
  [ -f "$work/pods.yaml" ] && podman kube down "$work/pods.yaml" >/dev/null 2>&1
  for p in "${pods[@]}"; do podman pod rm -f "$p" >/dev/null 2>&1; done
  podman volume rm -f "$claim" pstrain-job >/dev/null 2>&1
  podman secret rm pstrain-auth >/dev/null 2>&1
  podman network rm -f "$network" >/dev/null 2>&1
  if [ "$keep_logs" -eq 1 ]; then say "logs kept in $work"; else rm -rf "$work"; fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[ "$(id -u)" -eq 0 ] || fail "run as root (Podman's networks and the packages need it)"
command -v kubectl >/dev/null || fail "needs kubectl (its kustomize renders deploy/k8s)"
podman_install
podman_configure
if [ "$build" -eq 1 ] || ! podman image exists "$PSTRAIN_IMAGE"; then
  podman_base_images
  podman_build_image
else
  phase "image" "$PSTRAIN_IMAGE as it is (--no-build): $(image_size)"
fi
for p in "${pods[@]}"; do
  ! podman pod exists "$p" || fail "a pod named $p exists already (not this script's): remove it first"
done
podman volume exists pstrain-job && fail "a volume pstrain-job exists already: remove it first"

# ---- render and extract ----------------------------------------------------------------
kubectl kustomize deploy/k8s >"$work/rendered.yaml" || fail "kubectl kustomize deploy/k8s"
python3 tests/deploy/k8s_pods.py --claim="$claim" <"$work/rendered.yaml" >"$work/pods.yaml" ||
  fail "extracting the pod templates"
# The Secret the pods read the job's auth token from (what `kubectl create secret generic
# pstrain-auth --from-literal=token=...` makes on a cluster), made before the pods. Podman
# 4.3 stores a Secret played by `kube play` as YAML but reads a pod's secretKeyRef only from
# JSON ("secret pstrain-auth is not valid JSON"), so it is made with `podman secret create`
# as Podman's own form: a JSON map of key to base64 value.
token=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
printf '{"token": "%s"}' "$(printf %s "$token" | base64 -w0)" >"$work/secret.json"
phase "render" "kubectl kustomize deploy/k8s: $(grep -c '^kind: Job' "$work/rendered.yaml") Jobs -> $(grep -c '^kind: Pod' "$work/pods.yaml") Pods, the ConfigMap and the claim (as $claim)"

# ---- play ----------------------------------------------------------------------------------
podman network create "$network" >/dev/null || fail "podman network create"
started=$(date +%s)
podman secret create pstrain-auth "$work/secret.json" >"$work/play.log" 2>&1 ||
  { cat "$work/play.log"; fail "podman secret create (the auth token's Secret)"; }
podman kube play --network "$network" "$work/pods.yaml" >>"$work/play.log" 2>&1 ||
  { cat "$work/play.log"; fail "podman kube play"; }
phase "kube play" "${pods[*]} on network $network"

# What each container was given.
for p in "${pods[@]}"; do
  threads=$(podman exec "$(ctr "$p")" printenv OPENBLAS_NUM_THREADS 2>/dev/null) ||
    threads=$(podman inspect --format '{{range .Config.Env}}{{println .}}{{end}}' "$(ctr "$p")" |
              sed -n 's/^OPENBLAS_NUM_THREADS=//p')
  limit=$(python3 - "$work/pods.yaml" "$p" <<'EOF'
import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d["kind"] == "Pod" and d["metadata"]["name"] == sys.argv[2]:
        print(d["spec"]["containers"][0]["resources"]["limits"]["cpu"])
EOF
)
  [ -n "$threads" ] && [ "$threads" = "$limit" ] ||
    fail "$p: OPENBLAS_NUM_THREADS is '$threads', its CPU limit $limit"
done
# The chief's job spec is the ConfigMap's, mounted where its --job points.
podman exec "$(ctr pstrain-chief-0)" cat /etc/pstrain/job/fashion_mnist.json >"$work/job.json" ||
  fail "no job spec at /etc/pstrain/job in the chief"
cmp -s "$work/job.json" deploy/k8s/fashion_mnist.json ||
  fail "the chief's /etc/pstrain/job/fashion_mnist.json is not the ConfigMap's"
phase "environment" "the ConfigMap mounted at /etc/pstrain/job in the chief; OPENBLAS_NUM_THREADS = each container's CPU limit (chief 1, ps 1, workers 2)"

chief=$(ctr pstrain-chief-0)
chief_log() { podman logs "$chief" 2>&1; }
state() { podman inspect --format '{{.State.Status}}' "$1" 2>/dev/null; }
code() { podman inspect --format '{{.State.ExitCode}}' "$1" 2>/dev/null; }

# Follow the epochs until every container has exited (twice in a row, 3 s apart).
printed=0
deadline=$(($(date +%s) + 900))
quiet=0
while [ "$quiet" -lt 2 ]; do
  lines=$(chief_log | grep -E '^Epoch [0-9]+/[0-9]+ ')
  total=$(grep -c . <<<"$lines")
  if [ "$total" -gt "$printed" ]; then
    tail -n $((total - printed)) <<<"$lines" | sed 's/^/    chief: /'
    printed=$total
  fi
  all=1
  for p in "${pods[@]}"; do [ "$(state "$(ctr "$p")")" = exited ] || all=0; done
  if [ "$all" -eq 1 ]; then quiet=$((quiet + 1)); else quiet=0; fi
  [ "$(date +%s)" -lt "$deadline" ] || fail "the job did not end within 900 s"
  sleep 3
done
for p in "${pods[@]}"; do
  [ "$(code "$(ctr "$p")")" = 0 ] ||
    { podman logs --tail 5 "$(ctr "$p")" 2>&1; fail "$p exited $(code "$(ctr "$p")")"; }
done

# The job spec came from the ConfigMap; the checkpoints went to the claim's volume.
volume_dir=$(podman volume inspect --format '{{.Mountpoint}}' "$claim")
files=$(find "$volume_dir" -type f | wc -l)
owners=$(find "$volume_dir" -mindepth 1 -printf '%U\n' | sort -u | tr '\n' ' ')
[ "$files" -gt 0 ] || fail "no checkpoint in the claim's volume $claim"
[ "$owners" = "10001 " ] || fail "checkpoint files owned by '$owners', not uid 10001"
phase "volumes" "$files checkpoint files in the claim's volume, owned by uid 10001"

last=$(chief_log | grep -E '^Epoch ([0-9]+)/\1 .*val_accuracy: ' | tail -1)
[ -n "$last" ] || fail "no last epoch line"
accuracy=$(sed -E 's/.*val_accuracy: ([0-9.]+).*/\1/' <<<"$last")
awk -v a="$accuracy" -v m="$min_accuracy" 'BEGIN { exit !(a >= m) }' ||
  fail "val_accuracy $accuracy is below $min_accuracy"
phase "result" "all 5 pods' containers exited 0 in $(seconds_since "$started") s; final val_accuracy $accuracy"

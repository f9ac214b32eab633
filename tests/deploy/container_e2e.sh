#!/usr/bin/env bash
# The Compose deployment for real, with Docker (docker build, docker-compose) or Podman
# (podman build, podman-compose): builds the image from deploy/docker/Dockerfile, runs
# deploy/compose/docker-compose.yml (1 chief, 2 ps, 2 workers training Fashion-MNIST),
# then runs it again with faults.
#
#   tests/deploy/container_e2e.sh [--engine=docker|podman] [--no-build] [--no-plain]
#                                 [--no-faults] [--tls] [--min_accuracy=0.85]
#                                 [--fault_epochs=40] [--keep_logs] [--keep_images]
#
# --engine: docker (the default where docker-compose or docker.io is installed) or podman.
# On a fresh Debian 12 machine, as root: installs the engine and what it needs from Debian,
# makes the base images debian:bookworm and debian:bookworm-slim with mmdebstrap when the
# engine has none (nothing can be pulled), builds pstrain:latest (--no-build: use the one
# there is). Docker: when no dockerd answers, starts one (no systemd needed) with every
# address in 198.18.0.0/16 (--bip, --default-address-pool), and stops it at the end.
# Not part of ./test.sh: it takes many minutes (the image build alone ~7 on 2 idle cores).
#
# Phase 1, plain run: all five containers exit 0 and the chief's last epoch line has
# val_accuracy >= --min_accuracy; while it trains, the image's HEALTHCHECK (psctl health)
# says every container is healthy (Docker: `docker inspect` shows the health status
# Docker's own timer set; Podman, whose timers need systemd: `podman healthcheck run`);
# afterwards the image's evaluate reads the checkpoint volume (test accuracy within 0.01
# of the last epoch's) and export_safetensors exports it.
# Phase 2, faults, on a fresh checkpoint volume, the same Compose file with the chief's
# --epochs raised to --fault_epochs (40; an epoch takes about a second here, and the faults
# and their recoveries must fall inside the training):
#   - a crash of worker0 during training: the chief reports it lost and hands its chunks
#     to worker1; it comes back and rejoins. Docker: its process SIGKILLed from the host
#     (a crash, the OOM killer), and the restart policy alone restarts it (checked: the
#     script starts nothing). Podman: `podman kill` (SIGKILL), which Podman 4.3 treats like
#     `stop`, as the operator's own decision, applying no restart policy (checked, and
#     said), so the script starts it again as an orchestrator would;
#   - a crash of ps1: its process SIGKILLed from the host (as the OOM killer does, not
#     through Podman): the restart policy (on-failure:5) restarts it (checked), it comes
#     back empty and the chief gives it its shards from the newest checkpoint written
#     before the crash (checked: the step it restores is that checkpoint's);
#   - `docker-compose stop chief` (SIGTERM; Docker waits the service's stop_grace_period,
#     30 s, before a SIGKILL) or `podman stop -t 60` (podman-compose ignores
#     stop_grace_period): it checkpoints and exits 42 ("preempted"). Neither engine applies
#     a restart policy to a container stopped with `stop` (checked: it stays down), so the
#     script starts it again (`docker-compose start chief`), as an operator would, and
#     checks that the new chief restores the very checkpoint the old one wrote at its last
#     step: nothing trained before the stop is lost;
#   the job then completes: all five containers exit 0, val_accuracy >= --min_accuracy.
# Phase 3, with --tls, mutual TLS: deploy/compose/docker-compose.tls.yml over the same file,
# with certificates tools/make_certs.sh makes for this run. The healthchecks (on the
# plaintext --health_port) say all five are healthy while it trains; on the cluster's
# network, psctl without a certificate cannot read the chief's status (the handshake is
# refused) while psctl with the admin certificate can; all five exit 0 and val_accuracy
# >= --min_accuracy. (It runs before phase 2.)
# One line per phase; the last one gives the final val_accuracy. Every container, network
# and volume it made is removed on exit, also on failure or Ctrl-C. Docker: so are the
# images it made (the base images, pstrain:latest; --keep_images keeps them, for a rerun
# with --no-build) and the dockerd it started (with docker0 and its iptables rules; the
# FORWARD policy, which dockerd sets to DROP, and ip_forward are put back). Podman: the
# images are kept.
set -uo pipefail
cd "$(dirname "$0")/../.."

build=1
plain=1
faults=1
tls=0
keep_logs=0
min_accuracy=0.85
fault_epochs=40
keep_images=0
engine=podman
if command -v docker-compose >/dev/null 2>&1 && command -v dockerd >/dev/null 2>&1 ||
   ! command -v podman >/dev/null 2>&1; then
  engine=docker
fi
for arg in "$@"; do
  case "$arg" in
    --engine=docker|--engine=podman) engine=${arg#--engine=} ;;
    --keep_images) keep_images=1 ;;
    --no-build) build=0 ;;
    --no-faults) faults=0 ;;
    --no-plain) plain=0 ;;
    --tls) tls=1 ;;
    --keep_logs) keep_logs=1 ;;
    --min_accuracy=*) min_accuracy=${arg#--min_accuracy=} ;;
    --fault_epochs=*) fault_epochs=${arg#--fault_epochs=} ;;
    *) echo "container_e2e: unknown argument $arg" >&2; exit 2 ;;
  esac
done

work=$(mktemp -d /tmp/pstrain-containers-XXXXXX)
# shellcheck source=tests/deploy/podman_lib.sh
source tests/deploy/podman_lib.sh
# shellcheck source=tests/deploy/docker_lib.sh
source tests/deploy/docker_lib.sh
ENGINE=$engine
[ "$engine" = docker ] && PSTRAIN_IMAGE=pstrain:latest   # Compose's image: docker.io/library/pstrain

compose_file=deploy/compose/docker-compose.yml
project="pstrain-e2e-$$"
services=(chief ps0 ps1 worker0 worker1)
run=plain    # which run the containers are of: plain, faults (names their kept logs)
# The Compose file's variables: a volume of this run's own, the dashboard on a free port.
export PSTRAIN_CHECKPOINT_VOLUME="$project-checkpoints"
# The job's auth token (authorization is on by default; Compose passes it to every task).
export PSTRAIN_AUTH_TOKEN="${PSTRAIN_AUTH_TOKEN:-$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')}"

active_compose=$compose_file   # the file the current run uses
# docker-compose 1.29 applies the file's deploy.resources (one CPU each) with --compatibility.
if [ "$engine" = docker ]; then
  compose() { docker-compose --compatibility -p "$project" -f "$active_compose" "$@"; }
else
  compose() { podman-compose -p "$project" -f "$active_compose" "$@"; }
fi
container() { echo "${project}_$1_1"; }   # both Compose tools' container names

remove_everything() {
  local s
  command -v "$engine" >/dev/null 2>&1 || return 0
  [ "$engine" = podman ] || docker info >/dev/null 2>&1 || return 0
  for s in "${services[@]}"; do   # each container's log, for --keep_logs
    $engine logs "$(container "$s")" >"$work/$run-$s.log" 2>&1 || rm -f "$work/$run-$s.log"
  done
  compose down -v >>"$work/compose.log" 2>&1
  local ids
  if [ "$engine" = docker ]; then
    ids=$(docker ps -aq --filter "label=com.docker.compose.project=$project" 2>/dev/null)
    [ -n "$ids" ] && docker rm -f $ids >/dev/null 2>&1
    docker network rm "${project}_default" >/dev/null 2>&1
    docker volume rm -f "$PSTRAIN_CHECKPOINT_VOLUME" >/dev/null 2>&1
  else
    ids=$(podman ps -aq --filter "label=io.podman.compose.project=$project" 2>/dev/null)
    [ -n "$ids" ] && podman rm -f $ids >/dev/null 2>&1
    podman network rm -f "${project}_default" >/dev/null 2>&1
    podman volume rm -f "$PSTRAIN_CHECKPOINT_VOLUME" >/dev/null 2>&1
  fi
  return 0
}

cleanup() {
  local status=$?
  remove_everything
  if [ "$engine" = docker ]; then
    [ "$keep_images" -eq 1 ] || docker_remove_images
    docker_stop_daemon
  fi
  if [ "$keep_logs" -eq 1 ]; then say "logs kept in $work"; else rm -rf "$work"; fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

state() { $engine inspect --format '{{.State.Status}}' "$(container "$1")" 2>/dev/null; }
exit_code() { $engine inspect --format '{{.State.ExitCode}}' "$(container "$1")" 2>/dev/null; }
restarts() { $engine inspect --format '{{.RestartCount}}' "$(container "$1")" 2>/dev/null; }
chief_log() { $engine logs "$(container chief)" 2>&1; }
# Whether the chief's log has a line matching the extended regex $1. (Not `| grep -q`:
# under pipefail, grep quitting at the first match can fail the pipeline with SIGPIPE.)
chief_says() { chief_log | grep -E "$1" >/dev/null; }
epochs_done() { chief_log | grep -cE '^Epoch [0-9]+/[0-9]+ '; }

# Prints the chief's epoch lines not printed yet (indented); $printed counts them.
printed=0
follow_epochs() {
  local lines
  lines=$(chief_log | grep -E '^Epoch [0-9]+/[0-9]+ ')
  [ -z "$lines" ] && return 0
  local total
  total=$(wc -l <<<"$lines")
  if [ "$total" -gt "$printed" ]; then
    tail -n $((total - printed)) <<<"$lines" | sed 's/^/    chief: /'
    printed=$total
  fi
}

# Waits (following the epoch lines) until the chief has printed `n` epoch lines.
wait_for_epochs() {
  local n=$1 deadline=$(($(date +%s) + 600))
  while [ "$(epochs_done)" -lt "$n" ]; do
    follow_epochs
    [ "$(date +%s)" -lt "$deadline" ] || fail "no epoch $n line within 600 s"
    [ "$(state chief)" = running ] || fail "the chief is $(state chief) (exit $(exit_code chief)) before epoch $n"
    sleep 0.5
  done
  follow_epochs
}

# Waits until every container has exited (twice in a row, 3 s apart: a restart policy
# may be about to start one again), then checks that each exited 0.
wait_for_the_end() {
  local deadline=$(($(date +%s) + 900)) quiet=0 s all
  while [ "$quiet" -lt 2 ]; do
    follow_epochs
    all=1
    for s in "${services[@]}"; do [ "$(state "$s")" = exited ] || all=0; done
    if [ "$all" -eq 1 ]; then quiet=$((quiet + 1)); else quiet=0; fi
    [ "$(date +%s)" -lt "$deadline" ] || fail "the job did not end within 900 s"
    sleep 3
  done
  follow_epochs
  for s in "${services[@]}"; do
    [ "$(exit_code "$s")" = 0 ] ||
      { $engine logs --tail 5 "$(container "$s")" 2>&1; fail "$s exited $(exit_code "$s")"; }
  done
}

# The last epoch line's val_accuracy, checked against --min_accuracy.
final_accuracy() {
  local last accuracy
  last=$(chief_log | grep -E '^Epoch ([0-9]+)/\1 .*val_accuracy: ' | tail -1)
  [ -n "$last" ] || fail "the chief printed no last epoch line with val_accuracy"
  accuracy=$(sed -E 's/.*val_accuracy: ([0-9.]+).*/\1/' <<<"$last")
  awk -v a="$accuracy" -v m="$min_accuracy" 'BEGIN { exit !(a >= m) }' ||
    fail "val_accuracy $accuracy is below $min_accuracy"
  echo "$accuracy"
}

# Every container healthy by its healthcheck ($1 says which), asked now: Podman's
# `podman healthcheck run`; Docker has no such command, so the container's own healthcheck
# command (its Config.Healthcheck: the image's HEALTHCHECK or Compose's healthcheck) runs
# with `docker exec`, as Docker's timer runs it. (Docker's timer itself first checks 15 s,
# an interval, after the start, when the 10 epochs of the plain run may be over and the
# tasks have closed their ports: expect_docker_health_status checks it in the longer fault
# run.)
expect_all_healthy() {
  local s unhealthy="" check
  for s in "${services[@]}"; do
    if [ "$engine" = docker ]; then
      check=$(docker inspect --format '{{json .Config.Healthcheck.Test}}' "$(container "$s")")
      # ["CMD", args...] runs args; ["CMD-SHELL", line] runs sh -c line.
      mapfile -t args < <(python3 -c 'import json, sys
t = json.loads(sys.argv[1])
print("\n".join(t[1:] if t[0] == "CMD" else ["sh", "-c", t[1]]))' "$check")
      [ ${#args[@]} -gt 0 ] || fail "no healthcheck in $s: $check"
      docker exec "$(container "$s")" "${args[@]}" >/dev/null 2>&1 || unhealthy+=" $s"
    else
      podman healthcheck run "$(container "$s")" >/dev/null 2>&1 || unhealthy+=" $s"
    fi
  done
  [ -z "$unhealthy" ] || fail "the healthcheck ($1) failed in:$unhealthy"
  if [ "$engine" = docker ]; then
    healthy_line="each container's healthcheck command run by docker exec: all 5 healthy"
  else
    healthy_line="podman healthcheck run: all 5 healthy"
  fi
}

# Docker's own health status: waits up to 90 s, while the chief trains, until `docker
# inspect` shows every container "healthy" (set by Docker's timer running the image's
# HEALTHCHECK); fails on "unhealthy".
health_statuses() {
  local s out=""
  for s in "${services[@]}"; do
    out+=" $s=$(docker inspect --format '{{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}' "$(container "$s")" 2>/dev/null)"
  done
  echo "${out# }"
}
expect_docker_health_status() {
  local deadline=$(($(date +%s) + 90)) statuses started
  started=$(date +%s)
  while :; do
    statuses=$(health_statuses)
    [ "$(grep -o '=healthy' <<<"$statuses" | wc -l)" -eq ${#services[@]} ] && break
    [[ "$statuses" == *=unhealthy* ]] && fail "docker inspect: $statuses"
    [ "$(date +%s)" -lt "$deadline" ] || fail "not all healthy within 90 s: $statuses"
    [ "$(state chief)" = running ] || fail "the chief is $(state chief) before all were healthy"
    follow_epochs
    sleep 1
  done
  phase "healthcheck" "docker inspect while training, $(seconds_since "$started") s after epoch 1: $statuses (Docker's own timer ran the image's HEALTHCHECK)"
}

compose_up() {
  run=$1
  export PSTRAIN_DASHBOARD_PORT
  PSTRAIN_DASHBOARD_PORT=$(free_port)
  compose up -d --no-build >>"$work/compose.log" 2>&1 ||
    { tail -20 "$work/compose.log"; fail "$engine compose up"; }
  printed=0
}

# ---- set-up: packages, the engine, base images, the image ------------------------------
[ "$(id -u)" -eq 0 ] || fail "run as root (the engine's networks and the packages need it)"
phase "engine" "$engine"
if [ "$engine" = docker ]; then
  docker_install
  docker_start_daemon
  if [ "$build" -eq 1 ] || ! docker image inspect "$PSTRAIN_IMAGE" >/dev/null 2>&1; then
    docker_base_images
    docker_build_image
  else
    phase "image" "$PSTRAIN_IMAGE as it is (--no-build): $(image_size)"
  fi
else
  podman_install
  podman_configure
  if [ "$build" -eq 1 ] || ! podman image exists "$PSTRAIN_IMAGE"; then
    podman_base_images
    podman_build_image
  else
    phase "image" "$PSTRAIN_IMAGE as it is (--no-build): $(image_size)"
  fi
fi
check_image

# ---- phase 1: the plain run ---------------------------------------------------------------
plain_run() {
started=$(date +%s)
compose_up plain
phase "compose up" "project $project: ${services[*]} started by $engine compose"
wait_for_epochs 1
expect_all_healthy "psctl health"
phase "healthcheck" "the image's HEALTHCHECK (psctl health) while training, $healthy_line"
wait_for_the_end
accuracy=$(final_accuracy)
phase "plain run" "all 5 containers exited 0 in $(seconds_since "$started") s; val_accuracy $accuracy"
# The image's tools on the checkpoint volume the job left: evaluate its newest checkpoint
# (the same weights and test data as the last epoch's validation) and export it.
tools=$($engine run --rm --no-healthcheck -v "$PSTRAIN_CHECKPOINT_VOLUME:/var/lib/pstrain/checkpoints:ro" \
          "$PSTRAIN_IMAGE" sh -c 'evaluate --checkpoint=/var/lib/pstrain/checkpoints &&
            export_safetensors --checkpoint=/var/lib/pstrain/checkpoints --out=/tmp/m.safetensors &&
            wc -c </tmp/m.safetensors' 2>&1) || fail "evaluate/export_safetensors in the image: $tools"
evaluated=$(sed -nE 's/.* test accuracy: ([0-9.]+) .*/\1/p' <<<"$tools")
exported=$(tail -1 <<<"$tools")
awk -v a="$evaluated" -v b="$accuracy" 'BEGIN { d = a - b; exit !(a != "" && d < 0.01 && d > -0.01) }' ||
  fail "evaluate says test accuracy '$evaluated', the last epoch $accuracy: $tools"
phase "tools" "evaluate on the checkpoint volume: test accuracy $evaluated; export_safetensors wrote $exported bytes"
remove_everything
}
[ "$plain" -eq 0 ] || plain_run

# ---- phase 3 (--tls): the plain run over mutual TLS -------------------------------------
tls_run() {
active_compose="$work/docker-compose.tls.yml"
tools/make_certs.sh "$work/certs" chief-0=chief ps-0=ps0 ps-1=ps1 worker-0=worker0 \
  worker-1=worker1 admin >"$work/certs.log" 2>&1 || { cat "$work/certs.log"; fail "tools/make_certs.sh"; }
chmod 644 "$work"/certs/*.key   # the image runs as uid 10001 (docker-compose.tls.yml says why)
rm -f "$work/certs/ca.key"      # signs identities; no task needs it
# Compose's own merge of the two files (command and healthcheck replaced, volumes added),
# with the override's ./certs (relative to deploy/compose) pointing at this run's folder.
# The chief trains --fault_epochs (40) here: the checks below (five docker execs and two
# docker runs) must fall inside the training, and the Compose file's 10 epochs of about 2 s
# were over before the second docker run on a loaded machine (the chief had exited: the
# admin's psctl met a refused connection).
python3 - "$compose_file" deploy/compose/docker-compose.tls.yml "$work/certs" "$fault_epochs" \
  >"$active_compose" <<'EOF' || fail "writing the TLS run's compose file"
import sys, yaml
compose = yaml.safe_load(open(sys.argv[1]))
override = yaml.safe_load(open(sys.argv[2]))
for name, service in compose["services"].items():
    service.pop("build", None)   # the image is built already; the context is relative
    extra = override["services"].get(name, {})
    for key in ("command", "healthcheck"):
        if key in extra:
            service[key] = extra[key]
    service["volumes"] = service.get("volumes", []) + [
        v.replace("./certs:", sys.argv[3] + ":", 1) for v in extra.get("volumes", [])]
compose["services"]["chief"]["command"].append("--epochs=" + sys.argv[4])
yaml.safe_dump(compose, sys.stdout, sort_keys=False)
EOF
started=$(date +%s)
compose_up tls
phase "compose up" "mutual TLS (docker-compose.tls.yml, this run's certificates): ${services[*]}"
wait_for_epochs 1
expect_all_healthy "psctl health on --health_port"
# psctl in a container on the cluster's network, without and with the admin certificate
# (with the job's token both times: the certificate is what is missing).
psctl_on_network() {
  $engine run --rm --no-healthcheck --network "${project}_default" -e PSTRAIN_AUTH_TOKEN \
    -v "$work/certs:/etc/pstrain/tls:ro" "$PSTRAIN_IMAGE" psctl status --chief=chief:2222 \
    --timeout=10s "$@" 2>&1
}
if refused=$(psctl_on_network); then
  fail "psctl without a certificate read the chief's status over TLS: $refused"
fi
answer=$(psctl_on_network --tls_dir=/etc/pstrain/tls) ||
  fail "psctl with the admin certificate could not read the chief's status: $answer"
phase "healthcheck" "all 5 healthy on --health_port ($healthy_line); psctl without a certificate refused ($(head -1 <<<"$refused" | cut -c1-100)); with the admin certificate it answered"
wait_for_the_end
accuracy=$(final_accuracy)
phase "tls run" "all 5 containers exited 0 in $(seconds_since "$started") s over mutual TLS; val_accuracy $accuracy"
remove_everything
}
[ "$tls" -eq 0 ] || tls_run
[ "$faults" -eq 1 ] || { phase "result" "val_accuracy $accuracy (no fault run: --no-faults)"; exit 0; }

# ---- phase 2: the same job with a worker killed, a ps killed and the chief stopped -----
# The same file, but the chief trains --fault_epochs (40): an epoch takes about a second
# here, and the three faults with their recoveries must fall inside the training.
active_compose="$work/docker-compose.faults.yml"
python3 - "$compose_file" "$fault_epochs" >"$active_compose" <<'EOF' ||
import sys, yaml
compose = yaml.safe_load(open(sys.argv[1]))
for service in compose["services"].values():
    service.pop("build", None)   # the image is built already; the context is relative
compose["services"]["chief"]["command"].append("--epochs=" + sys.argv[2])
yaml.safe_dump(compose, sys.stdout, sort_keys=False)
EOF
  fail "writing the fault run's compose file"
started=$(date +%s)
compose_up faults
phase "compose up" "fresh checkpoint volume $PSTRAIN_CHECKPOINT_VOLUME; the job again with faults, the chief with --epochs=$fault_epochs"

# Seconds (one decimal) until container $1's restart count exceeds $2, at most 60.
seconds_to_restart() {
  local from
  from=$(date +%s%N)
  for _ in $(seq 1 600); do
    [ "$(restarts "$1")" -gt "$2" ] &&
      { awk -v a="$from" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }'; return 0; }
    sleep 0.1
  done
  return 1
}
# The pid, on the host, of container $1's process (the daemon: the image has no init).
host_pid() { $engine inspect --format '{{.State.Pid}}' "$(container "$1")"; }

# A worker that crashes while the chief hands out the second epoch. Docker: its process
# SIGKILLed from the host, and the restart policy alone must restart it (`docker kill`
# would count as the operator's decision, like `stop`). Podman: `podman kill` (SIGKILL),
# which Podman 4.3 treats like `podman stop` and applies no restart policy to (measured
# here): the script starts it again, as an orchestrator would.
wait_for_epochs 1
[ "$engine" = docker ] && expect_docker_health_status
sleep 0.5
killed_at=$(epochs_done)
before=$(restarts worker0)
if [ "$engine" = docker ]; then
  kill -KILL "$(host_pid worker0)" || fail "kill -KILL of worker0's process"
  how="worker0's process SIGKILLed from the host"
  worker_restart=$(seconds_to_restart worker0 "$before") ||
    fail "Docker's restart policy did not restart worker0 within 60 s after its process died"
  kill_code=$(docker inspect --format '{{.State.ExitCode}}' "$(container worker0)")
  policy_restarted="yes, ${worker_restart} s after the kill"
else
  podman kill "$(container worker0)" >/dev/null || fail "podman kill worker0"
  how="podman kill worker0"
  sleep 5
  kill_code=$(exit_code worker0)
  policy_restarted=no
  [ "$(restarts worker0)" -gt "$before" ] && policy_restarted=yes
  [ "$policy_restarted" = yes ] || podman start "$(container worker0)" >/dev/null 2>&1 ||
    fail "podman start worker0"
fi
for _ in $(seq 1 60); do chief_says "worker task 0 .* lost: " && break; sleep 1; done
chief_says "worker task 0 .* lost: " || fail "the chief never reported worker 0 lost"
phase "worker kill" "$how after $killed_at epochs; the chief reported it lost and gave its chunks to worker1; restarted by the policy: $policy_restarted$([ "$policy_restarted" = no ] && echo " (exit $kill_code), so started again by this script")"

# A ps that crashes during the next epoch: its process SIGKILLed from the host, as the OOM
# killer would, not through Podman. The restart policy must restart it, and it must come
# back with the newest checkpoint's shards.
wait_for_epochs $((killed_at + 1))
sleep 0.5
killed_at=$(epochs_done)
before=$(restarts ps1)
kill -KILL "$(host_pid ps1)" || fail "kill -KILL of ps1's process"
ps_restart=$(seconds_to_restart ps1 "$before") ||
  fail "the restart policy did not restart ps1 within 60 s after its process died"
for _ in $(seq 1 120); do
  chief_says "came back empty; its shards restored from" && break
  sleep 1
done
restored=$(chief_log | grep "came back empty; its shards restored from" | tail -1)
[ -n "$restored" ] || fail "the chief did not restore ps1's shards within 120 s"
restored_step=$(sed -nE 's/.*restored from .* \(step ([0-9]+)\).*/\1/p' <<<"$restored")
# The newest checkpoint written before that restore (none can be written while a ps is
# down: the chief reads every shard to write one).
newest=$(chief_log | sed "/came back empty; its shards restored from/q" |
         grep -E 'checkpoint .* written \(' | tail -1)
newest_step=$(sed -nE 's/.*, step ([0-9]+)\)$/\1/p' <<<"$newest")
[ -n "$newest_step" ] || fail "no checkpoint was written before the ps kill"
[ "$restored_step" = "$newest_step" ] ||
  fail "ps1 got step $restored_step back, not the newest checkpoint's $newest_step"
phase "ps crash" "ps1's process SIGKILLed from the host after $killed_at epochs; the restart policy restarted it ${ps_restart} s later (restarts: $(restarts ps1)); its shards restored from the newest checkpoint (step $newest_step)"

# The chief, stopped (SIGTERM) during the next epoch.
wait_for_epochs $((killed_at + 1))
sleep 0.5
killed_at=$(epochs_done)
stop_started=$(date +%s)
if [ "$engine" = docker ]; then
  # No timeout given: docker-compose takes the service's stop_grace_period (30 s).
  compose stop chief >>"$work/compose.log" 2>&1 || fail "docker-compose stop chief"
  how="docker-compose stop chief (stop_grace_period 30s)"
else
  podman stop -t 60 "$(container chief)" >/dev/null 2>&1 || fail "podman stop chief"
  how="podman stop -t 60"
fi
stop_seconds=$(seconds_since "$stop_started")
stop_code=$(exit_code chief)
stopped_log=$(chief_log | grep "stopped for a restart" | tail -1)
[ "$stop_code" = 42 ] || fail "the chief exited $stop_code on SIGTERM, not 42 (preempted): $(chief_log | tail -3)"
saved_step=$(sed -nE 's/.*preempted at step ([0-9]+);.*/\1/p' <<<"$stopped_log")
saved_path=$(sed -nE 's/.*the newest checkpoint is ([^ ]+) \(epoch [0-9]+, step ([0-9]+)\).*/\1 \2/p' <<<"$stopped_log")
[ -n "$saved_step" ] && [ "${saved_path##* }" = "$saved_step" ] ||
  fail "the stopped chief did not checkpoint its last step: $stopped_log"
# Does the restart policy bring it back? (Docker's and Podman's do not, after `stop`.)
sleep 10
policy_restarted=no
[ "$(state chief)" = running ] && policy_restarted=yes
phase "chief stop" "$how after $killed_at epochs: exit 42 in $stop_seconds s after checkpointing step $saved_step; restarted by the policy: $policy_restarted"
if [ "$policy_restarted" = no ]; then
  if [ "$engine" = docker ]; then
    compose start chief >>"$work/compose.log" 2>&1 || fail "docker-compose start chief"
  else
    podman start "$(container chief)" >/dev/null 2>&1 || fail "podman start chief"
  fi
fi
for _ in $(seq 1 120); do
  chief_says "restored .* \(epoch [0-9]+, step [0-9]+\) onto" && break
  sleep 1
done
resumed=$(chief_log | grep -E "restored .* \(epoch [0-9]+, step [0-9]+\) onto" | tail -1)
resumed_path=$(sed -nE 's/.*restored ([^ ]+) \(epoch [0-9]+, step ([0-9]+)\) onto.*/\1 \2/p' <<<"$resumed")
[ "$resumed_path" = "$saved_path" ] ||
  fail "the restarted chief restored '$resumed_path', not the stop's checkpoint '$saved_path'"
phase "chief restart" "$([ "$policy_restarted" = no ] && echo "started again by this script ($([ "$engine" = docker ] && echo "docker-compose start chief" || echo "podman start"), as an operator would); ")it restored ${saved_path% *} (step $saved_step) and goes on"

wait_for_the_end
accuracy=$(final_accuracy)
phase "fault run" "all 5 containers exited 0 in $(seconds_since "$started") s after the worker kill, the ps crash and the chief stop"
phase "result" "final val_accuracy $accuracy"

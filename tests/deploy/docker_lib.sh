# Docker's side of tests/deploy/container_e2e.sh (sourced, not run, after podman_lib.sh,
# whose say/fail/phase and image checks it uses): installs Docker Engine and docker-compose
# from Debian, starts a dockerd of its own when none answers (no systemd needed) and stops
# it again, makes the Debian base images locally, builds the pstrain image.
#
# Every address Docker hands out stays in the benchmark range 198.18.0.0/15 (RFC 2544):
# the dockerd started here gets --bip=198.18.0.1/24 and a default address pool of /24s in
# 198.18.0.0/16, so neither docker0 nor a Compose network takes Docker's 172.17.0.0/16.
#
# The caller sets `work` (a temp folder it removes) first.

DOCKERD_PID=""           # the dockerd started here, if any: stopped by docker_stop_daemon
DOCKER_IMAGES_MADE=()    # images made here: removed by docker_remove_images
DOCKER_FORWARD_POLICY="" # iptables' FORWARD policy before that dockerd (it sets DROP)
DOCKER_IP_FORWARD=""     # net.ipv4.ip_forward before it (it sets 1, and then DROP above)

# Debian's docker.io (Engine 20.10 with containerd and runc), docker-compose (1.29),
# mmdebstrap (the base images), python3-yaml (the script rewrites YAML), iptables.
docker_install() {
  local packages=(docker.io docker-compose mmdebstrap iptables python3 python3-yaml)
  local missing=() p
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null && apt-get install -y -qq "${missing[@]}" >/dev/null ||
    fail "apt-get install ${missing[*]}"
}

# Uses the dockerd that answers, or starts one (its log in $work/dockerd.log) and waits up
# to 60 s for it. The classic builder: the BuildKit of a newer docker CLI would need the
# buildx plugin, and nothing here needs BuildKit.
docker_start_daemon() {
  export DOCKER_BUILDKIT=0
  if docker info >/dev/null 2>&1; then
    phase "dockerd" "using the dockerd that is running (not started, and not stopped, here)"
    return 0
  fi
  [ -e /var/run/docker.pid ] && fail "/var/run/docker.pid exists but no dockerd answers; remove it if no dockerd runs"
  DOCKER_FORWARD_POLICY=$(iptables -S FORWARD 2>/dev/null | sed -nE 's/^-P FORWARD ([A-Z]+)$/\1/p')
  DOCKER_IP_FORWARD=$(cat /proc/sys/net/ipv4/ip_forward 2>/dev/null)
  local started
  started=$(date +%s)
  dockerd --bip=198.18.0.1/24 --default-address-pool base=198.18.0.0/16,size=24 \
    >"$work/dockerd.log" 2>&1 &
  DOCKERD_PID=$!
  local deadline=$((started + 60))
  until docker info >/dev/null 2>&1; do
    kill -0 "$DOCKERD_PID" 2>/dev/null ||
      { DOCKERD_PID=""; tail -20 "$work/dockerd.log"; fail "dockerd exited at start"; }
    [ "$(date +%s)" -lt "$deadline" ] || { tail -20 "$work/dockerd.log"; fail "dockerd did not answer within 60 s"; }
    sleep 1
  done
  phase "dockerd" "started (pid $DOCKERD_PID, $(docker version --format 'Engine {{.Server.Version}}' 2>/dev/null), docker0 $(ip -4 -o addr show docker0 | awk '{print $4}')) in $(seconds_since "$started") s"
}

# Stops the dockerd started here (SIGTERM: it stops its containers; SIGKILL after 60 s),
# removes docker0 and the iptables rules and chains it made, and puts the FORWARD policy
# and net.ipv4.ip_forward back as they were. Nothing when it used a running dockerd.
docker_stop_daemon() {
  [ -n "$DOCKERD_PID" ] || return 0
  kill -TERM "$DOCKERD_PID" 2>/dev/null
  local i
  for i in $(seq 1 60); do kill -0 "$DOCKERD_PID" 2>/dev/null || break; sleep 1; done
  kill -0 "$DOCKERD_PID" 2>/dev/null && kill -KILL "$DOCKERD_PID" 2>/dev/null
  wait "$DOCKERD_PID" 2>/dev/null
  DOCKERD_PID=""
  ip link del docker0 2>/dev/null
  # Docker's rules: every rule that jumps to a DOCKER chain or names docker0, then the
  # DOCKER chains themselves.
  local table rule chain
  for table in filter nat; do
    iptables-save -t "$table" 2>/dev/null | grep -E '^-A ' | grep -E 'DOCKER|docker0' |
      grep -vE '^-A DOCKER' | sed 's/^-A /-D /' | while read -r rule; do
        eval "iptables -t $table $rule" 2>/dev/null
      done
    for chain in $(iptables-save -t "$table" 2>/dev/null | sed -nE 's/^:(DOCKER[A-Z0-9_-]*) .*/\1/p'); do
      iptables -t "$table" -F "$chain" 2>/dev/null
    done
    for chain in $(iptables-save -t "$table" 2>/dev/null | sed -nE 's/^:(DOCKER[A-Z0-9_-]*) .*/\1/p'); do
      iptables -t "$table" -X "$chain" 2>/dev/null
    done
  done
  [ -n "$DOCKER_FORWARD_POLICY" ] && iptables -P FORWARD "$DOCKER_FORWARD_POLICY" 2>/dev/null
  [ -n "$DOCKER_IP_FORWARD" ] && echo "$DOCKER_IP_FORWARD" >/proc/sys/net/ipv4/ip_forward 2>/dev/null
  return 0
}

# The Dockerfile's FROM images, debian:bookworm and debian:bookworm-slim, made with
# mmdebstrap and `docker import` when the engine has none (as podman_base_images does).
docker_base_images() {
  local variant name started
  for variant in bookworm bookworm-slim; do
    name="debian:$variant"
    docker image inspect "$name" >/dev/null 2>&1 && continue
    local options=(--variant=minbase)
    if [ "$variant" = bookworm-slim ]; then
      options+=(--dpkgopt='path-exclude=/usr/share/man/*'
                --dpkgopt='path-exclude=/usr/share/locale/*'
                --dpkgopt='path-include=/usr/share/locale/locale.alias'
                --dpkgopt='path-exclude=/usr/share/doc/*'
                --dpkgopt='path-include=/usr/share/doc/*/copyright'
                --dpkgopt='path-exclude=/usr/share/info/*'
                --aptopt='APT::Install-Recommends "false"')
    fi
    started=$(date +%s)
    mmdebstrap "${options[@]}" bookworm "$work/$variant.tar" >"$work/mmdebstrap.log" 2>&1 ||
      { tail -20 "$work/mmdebstrap.log"; fail "mmdebstrap $variant"; }
    docker import --change 'CMD ["bash"]' "$work/$variant.tar" "$name" >/dev/null ||
      fail "docker import $name"
    DOCKER_IMAGES_MADE+=("$name")
    rm -f "$work/$variant.tar"
    phase "base image" "$name made with mmdebstrap from Debian's archive and docker import in $(seconds_since "$started") s"
  done
}

# Builds $PSTRAIN_IMAGE with `docker build -f deploy/docker/Dockerfile` from the repository
# root. The build stage's apt-get reaches Debian's archive over docker0 (NAT), as a user's
# build does.
docker_build_image() {
  local started
  started=$(date +%s)
  DOCKER_IMAGES_MADE+=("$PSTRAIN_IMAGE")
  docker build -f deploy/docker/Dockerfile -t "$PSTRAIN_IMAGE" . >"$work/build.log" 2>&1 ||
    { tail -30 "$work/build.log"; fail "docker build"; }
  phase "image" "$PSTRAIN_IMAGE built by docker build in $(seconds_since "$started") s: $(image_size)"
}

# Removes the images made here (and the build's dangling layers), unless --keep_images.
docker_remove_images() {
  [ ${#DOCKER_IMAGES_MADE[@]} -gt 0 ] || return 0
  docker image rm -f "${DOCKER_IMAGES_MADE[@]}" >/dev/null 2>&1
  # The classic builder's untagged layers; only on a dockerd of this script's own.
  [ -n "$DOCKERD_PID" ] && docker image prune -f >/dev/null 2>&1
  DOCKER_IMAGES_MADE=()
  return 0
}

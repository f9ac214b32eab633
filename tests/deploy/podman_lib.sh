# Shared by tests/deploy/container_e2e.sh and tests/deploy/k8s_pods_e2e.sh (sourced, not
# run): installs Podman from Debian, configures it for this kind of machine, makes the
# Debian base images locally when they are missing, and builds the pstrain image.
#
# The caller sets `work` (a temp folder it removes) before calling podman_setup.

PSTRAIN_IMAGE=localhost/pstrain:latest   # what deploy/compose and deploy/k8s run ("pstrain:latest")
ENGINE=podman   # the container CLI image_size and check_image use (container_e2e.sh: or docker)

say() { echo "$(basename "$0" .sh): $*"; }
fail() { say "FAILED: $*"; exit 1; }
# One line per phase: "phase-name  what happened".
phase() { printf '%-16s %s\n' "$1" "$2"; }
seconds_since() { echo $(($(date +%s) - $1)); }

# Debian's packages the container tests need, installed when missing (as tools/install_deps.sh
# does for the build): Podman with runc (crun refuses some cgroup layouts), podman-compose,
# netavark and aardvark-dns (networks, name resolution), iptables (netavark's firewall),
# catatonit (the pause image of `podman kube play`), mmdebstrap (the base images),
# python3-yaml (the scripts rewrite YAML).
podman_install() {
  local packages=(podman runc podman-compose netavark aardvark-dns iptables catatonit
                  mmdebstrap python3 python3-yaml)
  local missing=() p
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" -eq 0 ] || fail "missing packages (${missing[*]}); install them as root and rerun"
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null && apt-get install -y -qq "${missing[@]}" >/dev/null ||
    fail "apt-get install ${missing[*]}"
}

# Podman's settings for these runs only (CONTAINERS_CONF replaces the system's
# containers.conf for this process and its children): runc, whose cgroup handling works
# where crun's does not ("cgroups in hybrid mode not supported"), and no rlimits set in the
# containers (setrlimit is refused in some sandboxes; the containers inherit the host's).
podman_configure() {
  cat >"$work/containers.conf" <<'EOF'
[containers]
default_ulimits = []

[engine]
runtime = "runc"
EOF
  export CONTAINERS_CONF="$work/containers.conf"
}

# The Dockerfile's FROM images, debian:bookworm (build stage) and debian:bookworm-slim
# (runtime stage), made from Debian's archive with mmdebstrap when no registry provides
# them. "slim" is made as Docker's is: no manuals, locales or docs (copyrights kept).
# Kept afterwards, as a pulled image would be.
podman_base_images() {
  local variant name started
  for variant in bookworm bookworm-slim; do
    name="docker.io/library/debian:$variant"
    podman image exists "$name" && continue
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
    podman import --change 'CMD ["bash"]' "$work/$variant.tar" "$name" >/dev/null ||
      fail "podman import $name"
    rm -f "$work/$variant.tar"
    phase "base image" "$name made with mmdebstrap from Debian's archive in $(seconds_since "$started") s (kept)"
  done
}

# Builds $PSTRAIN_IMAGE from deploy/docker/Dockerfile (from the repository root; the
# top-level .dockerignore keeps .git and Bazel's outputs out of the context). Docker's
# image format, so that the HEALTHCHECK is kept (OCI's has none).
podman_build_image() {
  local started
  started=$(date +%s)
  podman build --format docker -f deploy/docker/Dockerfile -t "$PSTRAIN_IMAGE" . \
    >"$work/build.log" 2>&1 || { tail -30 "$work/build.log"; fail "podman build"; }
  phase "image" "$PSTRAIN_IMAGE built in $(seconds_since "$started") s: $(image_size)"
}

image_size() {
  "$ENGINE" image inspect --format '{{.Size}}' "$PSTRAIN_IMAGE" |
    awk '{ printf "%.0f MB", $1 / 1000000 }'
}

# What the image holds: the daemons and tools, their libraries all found, no toolchain, the
# non-root user, a HEALTHCHECK running psctl health, the version label when the source
# has a version constant.
check_image() {
  local out
  out=$("$ENGINE" run --rm --no-healthcheck "$PSTRAIN_IMAGE" sh -c '
    for b in ps_server worker chief psctl evaluate export_safetensors; do
      command -v "$b" >/dev/null || echo "missing: $b"
    done
    ldd /usr/local/bin/* | grep "not found" | sed "s/^/unresolved library: /"
    for t in gcc g++ cc c++ bazel make ld; do
      command -v "$t" >/dev/null && echo "build tool in the image: $t"
    done
    [ "$(id -u)" = 10001 ] || echo "runs as uid $(id -u), not 10001"
    true' 2>&1) || fail "$ENGINE run $PSTRAIN_IMAGE: $out"
  [ -z "$out" ] || fail "the image: $out"
  local health
  health=$("$ENGINE" image inspect --format '{{json .Config.Healthcheck}}' "$PSTRAIN_IMAGE")
  [[ "$health" == *psctl*health* ]] || fail "no HEALTHCHECK with psctl health: $health"
  local label="" version=""
  label=$("$ENGINE" image inspect \
            --format '{{index .Config.Labels "org.opencontainers.image.version"}}' \
            "$PSTRAIN_IMAGE" 2>/dev/null)
  if [ -f common/version.h ]; then
    version=$(sed -nE 's/.*kPstrainVersion\[\] = "([^"]+)".*/\1/p' common/version.h)
    [ "$label" = "$version" ] ||
      fail "image label org.opencontainers.image.version '$label' is not kPstrainVersion '$version'"
  fi
  phase "image contents" "6 binaries, every library found, no build tools, uid 10001, HEALTHCHECK psctl health${version:+, version $version}"
}

# A free TCP port on the host's loopback.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

#!/usr/bin/env bash
# Makes a pstrain cluster's certificates for mutual TLS with Debian's openssl:
#
#   tools/make_certs.sh DIR NAME=HOSTS [NAME=HOSTS ...]
#
# DIR gets ca.crt and ca.key (the cluster CA; made once, reused when DIR already has it,
# so more tasks can be added later) and, per NAME, NAME.crt and NAME.key. NAME is the
# identity: chief-0, ps-0, ps-1, worker-0, ..., or admin for psctl; it is the
# certificate's common name (CN), its role is the organizational unit (OU) and O=pstrain.
# HOSTS, comma-separated, are the names and addresses the task is reached at (its
# TF_CONFIG host: localhost, a Compose service, a Kubernetes Service's DNS name, an IP),
# written into the subjectAltName that clients check; admin needs none. A daemon started
# with --tls_dir=DIR reads ca.crt and its own NAME.crt/NAME.key.
#
#   tools/make_certs.sh certs chief-0=localhost ps-0=localhost worker-0=localhost admin
#
# Keys are ECDSA P-256, certificates valid for 825 days, keys readable by the user only.
# Keep ca.key away from the tasks: it signs identities.
set -euo pipefail

usage() {
  sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
[ $# -ge 2 ] || usage
dir=$1
shift
command -v openssl >/dev/null || { echo "make_certs: openssl is not installed (apt-get install openssl)" >&2; exit 1; }
mkdir -p "$dir"
umask 077

if [ ! -s "$dir/ca.crt" ] || [ ! -s "$dir/ca.key" ]; then
  openssl ecparam -name prime256v1 -genkey -noout -out "$dir/ca.key" 2>/dev/null
  openssl req -x509 -new -key "$dir/ca.key" -sha256 -days 3650 \
    -subj "/O=pstrain/CN=pstrain cluster CA" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$dir/ca.crt" 2>/dev/null
  chmod 644 "$dir/ca.crt"
fi

for spec in "$@"; do
  name=${spec%%=*}
  hosts=""
  [[ "$spec" == *=* ]] && hosts=${spec#*=}
  role=${name%%-*}
  case "$role" in
    chief|ps|worker) [[ "$name" =~ ^[a-z]+-[0-9]+$ ]] || { echo "make_certs: $name: expected $role-INDEX (e.g. $role-0)" >&2; exit 2; } ;;
    admin) [ "$name" = admin ] || { echo "make_certs: $name: the operator's identity is just admin" >&2; exit 2; } ;;
    *) echo "make_certs: $name: the role must be chief, ps, worker or admin" >&2; exit 2 ;;
  esac
  san=""
  IFS=',' read -r -a host_list <<<"$hosts"
  for h in "${host_list[@]}"; do
    [ -n "$h" ] || continue
    if [[ "$h" =~ ^[0-9.]+$ || "$h" == *:* ]]; then entry="IP:$h"; else entry="DNS:$h"; fi
    san="${san:+$san,}$entry"
  done
  ext=$(mktemp)
  trap 'rm -f "$ext"' EXIT
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=serverAuth,clientAuth"
    [ -n "$san" ] && echo "subjectAltName=$san"
  } >"$ext"
  openssl ecparam -name prime256v1 -genkey -noout -out "$dir/$name.key" 2>/dev/null
  openssl req -new -key "$dir/$name.key" -subj "/O=pstrain/OU=$role/CN=$name" 2>/dev/null |
    openssl x509 -req -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -sha256 \
      -days 825 -extfile "$ext" -out "$dir/$name.crt" 2>/dev/null
  rm -f "$ext"
  chmod 644 "$dir/$name.crt"
  echo "$dir/$name.crt: CN=$name OU=$role${san:+ $san}"
done

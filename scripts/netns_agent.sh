#!/usr/bin/env bash
# OpenMPI's remote-launch agent for the namespace hosts of scripts/netns_hosts.sh, in place of ssh
# (`--mca plm_rsh_agent scripts/netns_agent.sh`, which netns_hosts.sh's mpi.env sets): mpirun calls it as it
# would call ssh, `netns_agent.sh HOST COMMAND...`, and it runs COMMAND in the network namespace named HOST
# with HOST as the hostname (a UTS namespace of its own), through a shell as ssh does (mpirun quotes the
# orted command line for one). It is not a general ssh: no options, no other machine.
# Invariant: it only enters a namespace that exists and is named like the hosts netns_hosts.sh makes.
set -euo pipefail
# ssh's own options, which mpirun may pass before the host (e.g. -x): none is meaningful here.
while [[ $# -gt 0 && $1 == -* ]]; do shift; done
host=${1:-}
[[ $host =~ ^[a-z][a-z0-9]{0,7}h[0-9]+$ ]] || {
  echo "netns_agent: '$host' is not a namespace host of scripts/netns_hosts.sh (PREFIXhN)" >&2
  exit 255
}
shift
namespaces=$(ip netns list | awk '{print $1}')  # read first: grep -q's early exit would fail a pipefail pipeline
grep -qx "$host" <<<"$namespaces" || {
  echo "netns_agent: no network namespace '$host'" >&2
  echo "  hint: scripts/netns_hosts.sh up N makes them; scripts/netns_hosts.sh status lists them" >&2
  exit 255
}
exec ip netns exec "$host" unshare --uts /bin/sh -c 'hostname "$1" || exit 255; eval "$2"' sh "$host" "$*"

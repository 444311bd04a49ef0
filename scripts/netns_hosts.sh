#!/usr/bin/env bash
# Hosts of our own on this machine: N network namespaces ("hosts") joined by veth pairs through one bridge,
# each with its own address and hostname, the links between them shaped with Linux tbf, so that mpirun can run
# a job across them as across nodes (docs/cluster.md §"Rehearsing on one machine"). Not a network emulator:
# no delay or loss (this kernel offers tbf and htb, not netem), one rate per host and direction.
# Invariant: only addresses of the namespaces and of the bridge it creates are used (no default route, no
# forwarding); `down` removes everything `up` made, is idempotent, and `up` runs it itself when it fails.
#   scripts/netns_hosts.sh up N [--inter RATE] [--slots S] [--prefix P] [--subnet A.B.C] [--dir DIR]
#   scripts/netns_hosts.sh down [--prefix P] [--dir DIR]
#   scripts/netns_hosts.sh status [--prefix P]
#   scripts/netns_hosts.sh check          exit 0 when this machine can make them, else 77 and the reason
# `up` writes DIR/hosts (an OpenMPI hostfile: one host per namespace, S slots each) and DIR/mpi.env (the
# OMPI_MCA_* variables that make mpirun launch through scripts/netns_agent.sh, over TCP on the bridge's
# subnet between hosts and shared memory within one); `source DIR/mpi.env` and run mpirun, `train --np` or
# `prove` unchanged.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
prefix=spnet
inter=300mbit
slots=2
subnet=""
dir=""

usage() {
  sed -n '8,11p' "${BASH_SOURCE[0]}" | sed 's/^# //' >&2
  exit 2
}

fail() {
  echo "netns_hosts: error: $1" >&2
  [[ $# -ge 2 ]] && echo "  hint: $2" >&2
  exit "${3:-1}"
}

[[ $# -ge 1 ]] || usage
action=$1
shift
count=0
if [[ $action == up ]]; then
  [[ $# -ge 1 && $1 =~ ^[0-9]+$ ]] || fail "up needs the number of hosts (2 to 16), got '${1:-}'" \
    "scripts/netns_hosts.sh up 2 --inter 300mbit" 2
  count=$1
  shift
  ((count >= 2 && count <= 16)) || fail "up $count: the number of hosts must be 2 to 16" "up 2 or up 4" 2
fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --inter) inter=${2:?}; shift 2 ;;
    --slots) slots=${2:?}; shift 2 ;;
    --prefix) prefix=${2:?}; shift 2 ;;
    --subnet) subnet=${2:?}; shift 2 ;;
    --dir) dir=${2:?}; shift 2 ;;
    *) fail "unknown argument '$1'" "see the usage at the top of scripts/netns_hosts.sh" 2 ;;
  esac
done
[[ $prefix =~ ^[a-z][a-z0-9]{0,7}$ ]] ||
  fail "--prefix '$prefix' must be 1 to 8 lowercase letters or digits, starting with a letter" \
    "interface names are limited to 15 characters: the prefix names the namespaces PREFIXhN and the bridge PREFIXbr" 2
[[ $slots =~ ^[1-9][0-9]*$ ]] || fail "--slots '$slots' must be a positive integer" "--slots 2" 2
dir=${dir:-/tmp/shardproof-netns-$prefix}
bridge=${prefix}br

host_name() { echo "${prefix}h$1"; }

# Every namespace named PREFIXhN, whatever N: a `down` after a failed `up 4` finds all of them.
our_namespaces() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${prefix}h[0-9]+$" || true; }

down() {
  local ns
  for ns in $(our_namespaces); do ip netns del "$ns" 2>/dev/null || true; done  # also removes its veth pair
  ip link del "$bridge" 2>/dev/null || true
  local i
  for i in $(seq 0 15); do ip link del "${prefix}v$i" 2>/dev/null || true; done
  rm -rf "$dir"
}

status() {
  local ns
  for ns in $(our_namespaces); do
    echo "$ns: $(ip -n "$ns" -4 -o addr show dev eth0 2>/dev/null | awk '{print $4}')"
    ip netns exec "$ns" tc qdisc show dev eth0 2>/dev/null | sed 's/^/  egress  /'
  done
  ip link show "$bridge" >/dev/null 2>&1 && echo "$bridge: $(ip -4 -o addr show dev "$bridge" | awk '{print $4}')"
  [[ -f $dir/hosts ]] && echo "hostfile: $dir/hosts" && echo "environment: $dir/mpi.env"
  return 0
}

# Whether an interface of this machine has an address in A.B.C.0/24. (The addresses are read first: `ip | grep
# -q` under pipefail fails when grep's early exit kills ip with SIGPIPE, which would read as "not in use".)
subnet_in_use() {
  local addrs
  addrs=$(ip -4 -o addr show)
  grep -q " ${1//./\\.}\." <<<"$addrs"
}

# The first 10.213.X.0/24 that no interface of this machine uses.
free_subnet() {
  local x
  for x in $(seq 0 254); do
    subnet_in_use "10.213.$x" || { echo "10.213.$x"; return; }
  done
  fail "no free 10.213.X.0/24 subnet" "pass --subnet A.B.C"
}

# tbf on DEV (inside namespace NS when given) at the --inter rate, a burst of about 1 ms at that rate (at least 32 KiB, so that
# one 64 KiB segment offload passes without being split many times), and a queue of 50 ms at that rate (at
# least 512 KiB) so that TCP is shaped by the rate rather than by drops.
shape() {
  local dev=$1 ns=${2:-} bits
  bits=$(rate_bits "$inter")
  local burst=$((bits / 8 / 1000)) limit=$((bits / 8 / 20))
  ((burst >= 32768)) || burst=32768
  ((limit >= 524288)) || limit=524288
  local -a in_ns=()
  [[ -z $ns ]] || in_ns=(ip netns exec "$ns")
  "${in_ns[@]}" tc qdisc replace dev "$dev" root tbf rate "$inter" burst "$burst" limit "$limit" >/dev/null
}

rate_bits() {
  local r=$1 n unit
  [[ $r =~ ^([0-9]+)([kmg]?)bit$ ]] || fail "--inter '$r' must be a rate like 300mbit, 1gbit or 800kbit" \
    "tc's own units: kbit, mbit, gbit" 2
  n=${BASH_REMATCH[1]}
  unit=${BASH_REMATCH[2]}
  case $unit in
    k) echo $((n * 1000)) ;;
    m) echo $((n * 1000000)) ;;
    g) echo $((n * 1000000000)) ;;
    *) echo "$n" ;;
  esac
}

# Whether this machine can make the hosts: root, the tools, and a scratch namespace in which a bridge, a veth
# pair, tbf and a UTS namespace all work (nothing outside the scratch namespace is touched).
check() {
  [[ $(id -u) == 0 ]] || fail "making network namespaces needs root (ip netns add)" \
    "run as root, or on a machine where you are" 77
  command -v ip >/dev/null && command -v tc >/dev/null || fail "ip and tc (iproute2) are not installed" \
    "apt-get install iproute2" 77
  command -v unshare >/dev/null || fail "unshare (util-linux) is not installed" "apt-get install util-linux" 77
  local probe="${prefix}probe$$" why=""
  if ! ip netns add "$probe" 2>/dev/null; then
    fail "ip netns add failed: this process may not make network namespaces (no CAP_NET_ADMIN?)" \
      "run on a machine or container where root may (docker: --cap-add NET_ADMIN --cap-add SYS_ADMIN)" 77
  fi
  ip -n "$probe" link add pbr type bridge 2>/dev/null || why="no bridge support"
  [[ -n $why ]] || ip -n "$probe" link add pv0 type veth peer name pv1 2>/dev/null || why="no veth support"
  [[ -n $why ]] || ip netns exec "$probe" tc qdisc add dev pv0 root tbf rate 1mbit burst 32k limit 64k 2>/dev/null ||
    why="no tbf qdisc"
  [[ -n $why ]] || ip netns exec "$probe" unshare --uts true 2>/dev/null || why="unshare --uts fails"
  ip netns del "$probe" 2>/dev/null || true
  [[ -z $why ]] || fail "this kernel or container cannot make the namespace hosts: $why" \
    "the hosts need network namespaces, veth, a bridge, the tbf qdisc and UTS namespaces" 77
}

up() {
  check
  rate_bits "$inter" >/dev/null
  [[ -z $(our_namespaces) ]] || fail "namespaces of prefix '$prefix' exist already: $(our_namespaces | tr '\n' ' ')" \
    "scripts/netns_hosts.sh down --prefix $prefix, or choose another --prefix" 2
  # Two `up`s at once (ctest -j 2) must not pick the same free subnet: choosing it and taking it (the bridge's
  # address) happen under one lock.
  exec 9>/tmp/shardproof-netns.lock
  flock 9
  [[ -n $subnet ]] || subnet=$(free_subnet)
  [[ $subnet =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "--subnet '$subnet' must be three octets, e.g. 10.213.0" "" 2
  ! subnet_in_use "$subnet" || fail "subnet $subnet.0/24 is in use on this machine" \
    "choose another --subnet, or leave it out to take the first free one" 2
  trap 'echo "netns_hosts: up failed; removing what it made" >&2; down' ERR
  ip link add "$bridge" type bridge
  ip addr add "$subnet.254/24" dev "$bridge"
  ip link set "$bridge" up
  flock -u 9
  mkdir -p "$dir"
  : >"$dir/hosts"
  local i ns
  for i in $(seq 0 $((count - 1))); do
    ns=$(host_name "$i")
    ip netns add "$ns"
    ip link add "${prefix}v$i" type veth peer name eth0 netns "$ns"
    ip link set "${prefix}v$i" master "$bridge"
    ip link set "${prefix}v$i" up
    ip -n "$ns" addr add "$subnet.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    shape eth0 "$ns"      # what the host sends
    shape "${prefix}v$i"  # what it receives
    echo "$ns slots=$slots" >>"$dir/hosts"
  done
  cat >"$dir/mpi.env" <<EOF
# Written by scripts/netns_hosts.sh up: mpirun across the namespace hosts of prefix '$prefix'.
export OMPI_MCA_orte_default_hostfile=$dir/hosts
export OMPI_MCA_plm_rsh_agent=$here/netns_agent.sh
export OMPI_MCA_oob_tcp_if_include=$subnet.0/24
export OMPI_MCA_btl=self,vader,tcp
export OMPI_MCA_btl_tcp_if_include=$subnet.0/24
EOF
  trap - ERR
  echo "netns_hosts: $count hosts $(host_name 0) … $(host_name $((count - 1))) on $subnet.0/24 (bridge $bridge" \
    "$subnet.254), each link shaped to $inter per direction with tbf; hostfile $dir/hosts, environment $dir/mpi.env"
}

case $action in
  up) up ;;
  down) down ;;
  status) status ;;
  check) check ;;
  *) usage ;;
esac

#!/usr/bin/env bash
# The Debian package on a fresh Debian 12 (issue 32): debootstraps a minimal bookworm chroot, installs the
# built .deb there with apt (which pulls every Depends from the mirror), and runs `shardproof prove --preset
# demo` from / and from a scratch directory. Not in `make test`: it needs root, the network and minutes
# (docs/install.md has a transcript and the time it took). The chroot is removed at the end, pass or fail.
#
#   sudo bash tests/install/fresh_debian12.sh [PACKAGE.deb] [MIRROR]
#     PACKAGE.deb  default: the newest build/package/shardproof_*.deb (make package)
#     MIRROR       default: http://deb.debian.org/debian
#   SP_CHROOT_KEEP=1 keeps the chroot (its path is printed) instead of removing it.
set -euo pipefail

here=$(cd "$(dirname "$0")/../.." && pwd)
deb=${1:-$(ls -t "$here"/build/package/shardproof_*.deb 2>/dev/null | head -n 1 || true)}
mirror=${2:-http://deb.debian.org/debian}

die() { echo "fresh_debian12: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, mount): run it with sudo"
command -v debootstrap >/dev/null || die "debootstrap is missing: apt-get install debootstrap"
[ -n "$deb" ] && [ -f "$deb" ] || die "no package: run 'make package' first or name the .deb"

root=$(mktemp -d /var/tmp/shardproof-bookworm.XXXXXX)
chmod 755 "$root"  # the chroot's /: apt's _apt user and every other user must traverse it
mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done
  rm -f "$root.debootstrap.log"
  if [ "${SP_CHROOT_KEEP:-0}" = 1 ]; then
    echo "fresh_debian12: chroot kept at $root"
  else
    # Only our own directory, after every mount in it is gone (never follow a mount into the host).
    if ! grep -q " $root/" /proc/mounts; then rm -rf --one-file-system "$root"; fi
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP  # a signal exits through the EXIT trap: nothing stays mounted or on disk
mnt() { mount "$@"; mounted+=("${!#}"); }

start=$(date +%s)
stamp() { echo "[$(($(date +%s) - start)) s] $*"; }

stamp "debootstrap bookworm (minbase) into $root from $mirror"
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.debootstrap.log" 2>&1 ||
  { tail -n 20 "$root.debootstrap.log"; die "debootstrap failed"; }

mnt -t proc proc "$root/proc"
mnt -t sysfs sysfs "$root/sys"
mnt --bind /dev "$root/dev"
mnt -t tmpfs -o size=2g tmpfs "$root/dev/shm"
cp /etc/resolv.conf "$root/etc/resolv.conf"
cp "$deb" "$root/tmp/"
pkg=/tmp/$(basename "$deb")

in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 DEBIAN_FRONTEND=noninteractive "$@"; }

# As the issue asks: dpkg -i (which leaves the package unconfigured while its Depends are missing), then
# apt-get -f install, which fetches them from the mirror and configures it.
stamp "dpkg -i $pkg, then apt-get -f install (its Depends from the mirror)"
in_root apt-get update -q >/dev/null
in_root dpkg -i "$pkg" >"$root/tmp/dpkg.log" 2>&1 || grep -m 1 'dependency problems' "$root/tmp/dpkg.log" || true
in_root apt-get -f install -y -q --no-install-recommends >"$root/tmp/apt.log" 2>&1 ||
  { tail -n 30 "$root/tmp/apt.log"; die "apt-get -f install failed"; }
grep -E '^[0-9]+ upgraded|^Setting up shardproof' "$root/tmp/apt.log" || true
in_root dpkg -s shardproof | grep -q '^Status: install ok installed' || die "shardproof is not installed and configured"
in_root dpkg -s shardproof | grep -E '^(Version|Depends):'

in_root shardproof --version
# No source or build tree in the chroot: everything the demo reads comes from the package.
[ ! -f "$here/CMakeLists.txt" ] || [ ! -e "$root$here" ] || die "the source tree is visible in the chroot ($here)"

prove_from() { # DIR: cd there (inside the chroot) and prove the demo; its out dir is relative to DIR
  local dir=$1 log=$root/tmp/prove.$2.log
  stamp "prove --preset demo from $dir"
  if ! in_root /bin/sh -c "mkdir -p '$dir' && cd '$dir' && shardproof prove --preset demo --out demo-run" \
    >"$log" 2>&1; then
    tail -n 30 "$log"; die "prove --preset demo failed from $dir"
  fi
  grep -E 'PASS|FAIL|verdict' "$log" | tail -n 3
  grep -q PASS "$log" || { tail -n 30 "$log"; die "prove from $dir did not say PASS"; }
  [ -f "$root$dir/demo-run/prove.json" ] || die "no $dir/demo-run/prove.json"
}
prove_from / root
prove_from /tmp/scratch/work scratch

stamp "PASS: the package installs on a fresh Debian 12 and proves the demo from / and from a scratch directory"

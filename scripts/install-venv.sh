#!/usr/bin/env bash
# Creates the project's Python environment .venv/ at the repository root from python/requirements.txt (every
# package pinned with its hash, installed exactly: --require-hashes --no-deps) and installs python/ into it in
# editable mode. Idempotent: skipped when .venv's stamp holds the SHA-256 of requirements.txt and pyproject.toml;
# when either changed, .venv is rebuilt from scratch (pip's cache keeps the download). docs/install.md has what
# this costs on a fresh machine and why the CUDA pieces torch does not load on a CPU are left out.
# Not the Debian side (scripts/install-deps.sh, which this needs for python3-venv) and not the C++ engine's
# dependencies: the engine never imports Python.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.venv"
req="$root/python/requirements.txt"
stamp="$venv/.shardproof-requirements"
want="$(cat "$req" "$root/python/pyproject.toml" | sha256sum | cut -d' ' -f1)"

if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "install-venv: .venv is current (python/requirements.txt ${want:0:12})"
  exit 0
fi
if [ ! -x /usr/bin/python3 ] || ! /usr/bin/python3 -c "import ensurepip, venv" 2>/dev/null; then
  echo "install-venv: error: /usr/bin/python3 with the venv module is needed to create .venv" >&2
  echo "hint: run scripts/install-deps.sh as root (it installs python3-venv), or: apt-get install python3-venv" >&2
  exit 2
fi

echo "install-venv: creating .venv from python/requirements.txt (a fresh machine downloads about 2.9 GB)"
start=$(date +%s)
rm -rf "$venv"
/usr/bin/python3 -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check)
if ! "${pip[@]}" install --require-hashes --no-deps -r "$req"; then
  rm -rf "$venv"
  echo "install-venv: error: pip could not install python/requirements.txt into .venv (removed again)" >&2
  echo "hint: check that PyPI is reachable (pip download torch==2.15.0 --no-deps -d /tmp), then run make venv" >&2
  exit 1
fi
"${pip[@]}" install --no-deps --no-build-isolation -e "$root/python"
"$venv/bin/python" -c "import torch, transformers, shardproof_torch; import torch.distributed.fsdp, torch.distributed.tensor"
echo "$want" > "$stamp"
echo "install-venv: .venv ready in $(($(date +%s) - start)) s, $(du -sh "$venv" | cut -f1)"

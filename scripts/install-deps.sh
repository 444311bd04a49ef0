#!/usr/bin/env bash
# Installs every Debian package shardproof needs to build, run and test (Debian 12, as root).
# Idempotent: only missing packages are installed; prints nothing to do when all are present.
# python3-torch is a test oracle only (tests/oracle, tests/judge); the engine never links or calls it.
# python3-venv creates the project's .venv (scripts/install-venv.sh: torch 2.x and the frameworks from PyPI);
# python3-dev has the headers DeepSpeed's CPU communication op is compiled against on its first use (examples/deepspeed).
set -euo pipefail

packages=(
  # build
  build-essential cmake ninja-build pkg-config git clang-format lld
  # runtime libraries
  libopenblas-dev libopenmpi-dev openmpi-bin libdnnl-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev libtomlplusplus-dev libxxhash-dev libssl-dev
  # a user's SentencePiece tokenizer.model (src/data/spm_tokenizer.cc)
  libsentencepiece-dev
  # the HTML report: Chart.js, embedded into the binary at build time (src/report/CMakeLists.txt)
  libjs-chart.js
  # tests and benchmarks (chromium: the report's browser test, tests/report/)
  libgtest-dev libgmock-dev googletest libbenchmark-dev python3 python3-numpy python3-torch python3-venv python3-dev chromium openssl
  # the tokenizer references (spm_train, spm_encode, spm_export_vocab: tests/data/tokenizers_test.py)
  sentencepiece
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: error: need root to install ${missing[*]}" >&2
  echo "hint: run as root, or: sudo apt-get install ${missing[*]}" >&2
  exit 2
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"

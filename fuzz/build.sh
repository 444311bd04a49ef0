#!/usr/bin/env bash
# Builds and runs the libFuzzer target for ckpt/safetensors with ASan + UBSan.
# Needs clang++ with libFuzzer (Debian: clang, libclang-rt-14-dev), which scripts/install-deps.sh does not
# install; that is why this is not part of the CMake build.
#   fuzz/build.sh [OUT_DIR] [-- libFuzzer flags...]     default OUT_DIR=build-fuzz, runs 60 s
# Seeds: tests/fixtures/safetensors/reference.safetensors; new inputs go to OUT_DIR/corpus.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/build-fuzz}"
shift || true
[ "${1:-}" = "--" ] && shift
flags=("$@")
[ ${#flags[@]} -eq 0 ] && flags=(-max_total_time=60 -max_len=4096 -rss_limit_mb=2048)
command -v clang++ >/dev/null || { echo "fuzz/build.sh: clang++ not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 2; }
mkdir -p "$out/obj" "$out/corpus"
cxxflags=(-std=c++20 -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
          -I"$root/src" -DSP_GIT_REVISION=\"fuzz\" -Wall -Wextra -Wno-unused-parameter)
sources=("$root"/src/core/*.cc "$root"/src/tensor/*.cc "$root/src/ckpt/safetensors.cc")
objs=()
for src in "${sources[@]}"; do
  obj="$out/obj/$(basename "$(dirname "$src")")_$(basename "$src" .cc).o"
  clang++ "${cxxflags[@]}" -c "$src" -o "$obj"
  objs+=("$obj")
done
clang++ "${cxxflags[@]}" -fsanitize=fuzzer "$root/fuzz/safetensors_fuzz.cc" "${objs[@]}" \
  -lfmt -lxxhash -lcrypto -o "$out/safetensors_fuzz"
cp -n "$root/tests/fixtures/safetensors/reference.safetensors" "$out/corpus/" 2>/dev/null || true
exec "$out/safetensors_fuzz" -dict="$root/fuzz/safetensors.dict" "${flags[@]}" "$out/corpus"

# shardproof: the two commands that do all set-up on a fresh Debian 12 machine (as root).
#   make demo   installs missing packages, builds, runs the main job on the bundled default
#   make test   installs missing packages and the Python environment .venv (once; docs/install.md), builds,
#               runs every test in the optimized build (docs/performance.md has the clean-clone time on
#               2 cores); `make test-asan` runs the unit tests again under ASan + UBSan (.ci/run does both)
# Other targets: venv, build, test-asan (only the sanitizer part; test-unit is the same), bench, format, clean.
JOBS    ?= $(shell nproc)
BUILD   ?= build
ASAN    ?= build-asan
CTEST_J ?= 2
SP      := $(BUILD)/bin/shardproof

PREFIX  ?= /usr/local

.PHONY: deps venv build build-asan demo test test-long test-asan test-unit bench format format-check clean install package

deps:
	@bash scripts/install-deps.sh

# The project's Python environment (.venv: torch 2.x, transformers, DeepSpeed, ... pinned with hashes in
# python/requirements.txt, and python/ installed editable): what the python and integration tests run on.
# Skipped when current (a stamp of the requirements' hash); `make demo` does not need it.
venv: deps
	@bash scripts/install-venv.sh

# Unity build: each library compiles as a few large files, which halves a clean build on 2 cores
# (3.7 instead of 6.3 minutes) and gives the same bits (checksums compared; docs/testing.md). The unit
# tests are one executable here (tests/CMakeLists.txt), run by `make test`; `make test-asan` builds them again
# under the sanitizers.
# Configured once: afterwards ninja re-runs CMake by itself when a CMakeLists.txt changes, keeping the cache's
# options, so `make demo` / `make build` on a current tree build nothing (issue 33: a CMakeLists.txt newer than
# build.ninja made Make configure again with these options over the user's).
$(BUILD)/build.ninja: | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DSP_BUILD_BENCH=OFF -DCMAKE_UNITY_BUILD=ON \
	  -DSP_UNIT_TESTS=ON

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# The sanitizer build compiles the libraries (unity, -O0 -g1, instrumented) and only what the unit tests
# run: one executable of every unit test (tests/CMakeLists.txt, sp_unit_tests) and the CLI they call
# (CMakeLists.txt says which checks are on and why the test drivers themselves are not instrumented).

$(ASAN)/build.ninja: CMakeLists.txt | deps
	cmake -S . -B $(ASAN) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O0 -g1" \
	  -DCMAKE_UNITY_BUILD=ON -DSP_SANITIZE=ON -DSP_BUILD_BENCH=OFF

build-asan: deps $(ASAN)/build.ninja
	cmake --build $(ASAN) -j $(JOBS) --target shardproof unit_tests

demo: build
	@bash scripts/demo.sh $(SP)

# Installs the binary into $(PREFIX)/bin and configs/ and data/ into $(PREFIX)/share/shardproof, where the
# binary finds them relative to itself (README §Install). `make package` builds the .deb (CPack).
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

package: build
	cd $(BUILD) && cpack -G DEB

# Every test: unit, oracle, mpi, parity, ckpt, faults, compare, activations, labs, ... (docs/testing.md) in the
# optimized build. The sanitizer pass (a second build, about 6 minutes on 2 cores) is `make test-asan`, which
# .ci/run and `make test-long` run after it (issue 45: `make test` within 15 minutes on 2 cores).
test: venv build
	cd $(BUILD) && ctest --output-on-failure -j $(CTEST_J) -LE long

# The long suite (not part of `make test`): the anchored-equivalence matrix of issue 21 at the tiny preset's
# full length, the second cases of mechanisms `make test` proves once, the README's examples as written
# (docs/testing.md), then the unit tests under the sanitizers.
test-long: venv build
	cd $(BUILD) && ctest --output-on-failure -j $(CTEST_J) -L long
	@$(MAKE) --no-print-directory test-asan

# Leak checking is off: MPI and OpenBLAS keep process-lifetime allocations that are not leaks.
test-asan: build-asan
	cd $(ASAN) && ASAN_OPTIONS=detect_leaks=0 ctest -L unit --output-on-failure -j $(CTEST_J)

test-unit: test-asan

# Benchmarks are not part of `build` (they are not tests); this turns them on in the same build tree.
bench: build
	cmake -S . -B $(BUILD) -DSP_BUILD_BENCH=ON
	cmake --build $(BUILD) -j $(JOBS)
	@bash bench/run_all.sh $(BUILD)

format:
	find src tests bench fuzz -name '*.h' -o -name '*.cc' | xargs clang-format -i

# Fails (naming the files) when a source file is not formatted: .ci/run calls it before the tests.
format-check: deps
	find src tests bench fuzz -name '*.h' -o -name '*.cc' | xargs clang-format --dry-run --Werror

clean:
	rm -rf $(BUILD) $(ASAN)

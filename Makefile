# shardproof: the two commands that do all set-up on a fresh Debian 12 machine (as root).
#   make demo   installs missing packages, builds, runs the main job on the bundled default
#   make test   installs missing packages, builds, runs every test
# Other targets: build, test-asan (unit tests under ASan/UBSan), bench, format, clean.
JOBS    ?= $(shell nproc)
BUILD   ?= build
ASAN    ?= build-asan
CTEST_J ?= 2
SP      := $(BUILD)/bin/shardproof

.PHONY: deps build build-asan demo test test-asan test-unit bench format clean

deps:
	@bash scripts/install-deps.sh

$(BUILD)/build.ninja: CMakeLists.txt | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DSP_BUILD_BENCH=OFF

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# The sanitizer build compiles each library as one unity file at -O0 -g1 (about 5.5 minutes on 2 cores)
# and builds only what the unit tests run: their executables and the CLI they call.
UNIT_TESTS := $(basename $(notdir $(wildcard tests/unit/*_test.cc)))

$(ASAN)/build.ninja: CMakeLists.txt | deps
	cmake -S . -B $(ASAN) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O0 -g1" \
	  -DCMAKE_UNITY_BUILD=ON -DSP_SANITIZE=ON -DSP_BUILD_BENCH=OFF

build-asan: deps $(ASAN)/build.ninja
	cmake --build $(ASAN) -j $(JOBS) --target shardproof $(UNIT_TESTS)

demo: build
	@bash scripts/demo.sh $(SP)

# Every test: unit, oracle, mpi, parity, ckpt, faults, compare (docs/testing.md).
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(CTEST_J)

# The unit tests again under AddressSanitizer and UndefinedBehaviorSanitizer (a second build; .ci/run
# runs it after `make test`).
test-asan: build-asan
	cd $(ASAN) && ASAN_OPTIONS=detect_leaks=0 ctest -L unit --output-on-failure -j $(CTEST_J)

test-unit: build
	cd $(BUILD) && ctest -L unit --output-on-failure -j $(CTEST_J)

# Benchmarks are not part of `build` (they are not tests); this turns them on in the same build tree.
bench: build
	cmake -S . -B $(BUILD) -DSP_BUILD_BENCH=ON
	cmake --build $(BUILD) -j $(JOBS)
	@bash bench/run_all.sh $(BUILD)

format:
	find src tests bench -name '*.h' -o -name '*.cc' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(ASAN)

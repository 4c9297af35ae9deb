# Thin wrapper over CMake for the two commands in README.md.
#   make demo   builds and runs examples/seed_cnn
#   make test   builds with -Werror and runs every test, and again under ASan+UBSan (below)
#   make test-tsan  builds build-tsan with ThreadSanitizer and runs the concurrency tests, then
#               every test, under it
#   make fuzz   runs the random-program fuzzer for FUZZ_SECONDS (tests/fuzz/README.md)
#   make fuzz-libfuzzer  the same generator under libFuzzer (clang, ASan) for FUZZ_SECONDS
#   make gpu-deps   (development machine) fetches what the GPU machine lacks into .deps/
#   make test-gpu   (GPU machine) builds build-gpu with CUDA and without LLVM, runs the gpu
#               tests, the whole suite, the gpu tests under compute-sanitizer memcheck and
#               the GEMM, attention and reduction kernels under racecheck (test_gpu.sh)
#   make test-gpu-memcheck  only the memcheck phase (builds build-gpu when missing)
SHELL := bash
JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan

.PHONY: all deps demo test test-release test-asan test-release-tagged test-asan-tagged \
        test-release-steps test-asan-steps test-tsan bench bench-deps clean fuzz \
        fuzz-libfuzzer gpu-deps test-gpu test-gpu-memcheck

all: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD) -j $(JOBS)

deps:
	@./.ci/deps.sh

demo: all
	./$(BUILD)/examples/seed_cnn
	@echo "More: ./$(BUILD)/examples/resnet18 (ResNet18, compiled vs eager), ./$(BUILD)/examples/bert (BERT-base, sequence-length sweep) and ./$(BUILD)/examples/train_cifar (training on CIFAR-10, synthetic when --data DIR is missing: --model cnn|resnet18 --max-steps 200); --help lists their flags."

# make test: two builds of the whole tree, both with -Werror, built and tested side by side
# (make -j2 of test-release and test-asan; each line of their output is prefixed [release] or
# [asan]), so that the two cores stay busy through each build's serial steps (configure, the
# links) and the tail of each ctest run; each ctest starts its longest tests first (the COST
# of tests/CMakeLists.txt, then the times of the last run in that build).
#   $(BUILD) (RelWithDebInfo): the library, the examples, the benchmarks and the tests (so all
#       of them compile warning-free), and every ctest entry: each test on the default backend
#       (LLVM) and its variants (interp, eager, the AVX2 and SSE targets, the shards), the
#       install check, the fuzzer's slice and corpus, the layer check.
#   $(ASAN_BUILD) (Debug tests, the library at -O2, ASan + UBSan with leak checks): the
#       library and the tests (examples and benchmarks off: no test runs them), and every
#       ctest entry but those labelled release_only (tests/CMakeLists.txt says why each one
#       adds nothing under the sanitizers) and install_and_consume (a sanitized library needs
#       the sanitizer runtime in its consumer).
# OMP_WAIT_POLICY=passive: OpenMP's idle threads sleep instead of spinning, so the tests that
# run at once do not take each other's cores (it changes when idle threads wait, not what runs).
# test-release and test-asan run one build alone.
TEST_ENV = OMP_WAIT_POLICY=passive
test: deps
	@$(MAKE) --no-print-directory -j2 test-release-tagged test-asan-tagged
	@echo "make test: both builds passed"

test-release-tagged:
	@set -o pipefail; $(MAKE) --no-print-directory test-release-steps 2>&1 | sed -u 's/^/[release] /'

test-asan-tagged:
	@set -o pipefail; $(MAKE) --no-print-directory test-asan-steps 2>&1 | sed -u 's/^/[asan] /'

test-release: deps test-release-steps

test-release-steps:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTGC_WERROR=ON
	cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && $(TEST_ENV) ctest --output-on-failure -j $(JOBS)

test-asan: deps test-asan-steps

test-asan-steps:
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTGC_WERROR=ON -DTGC_SANITIZE=ON \
	      -DTGC_BUILD_BENCH=OFF -DTGC_BUILD_EXAMPLES=OFF
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && $(TEST_ENV) ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	    ctest --output-on-failure -j $(JOBS) -LE release_only

# ThreadSanitizer (TGC_SANITIZE=thread; it cannot be combined with ASan). The concurrency
# tests (and the executor's, whose arenas and kept values take locks) run first, then the whole suite (slow: ~8 min on 2 cores). LLVM and libgomp are not
# instrumented; tests/tsan.supp says which of their reports are suppressed and why, and
# runtime/parallel.c declares OpenMP's fork/join to TSan. allocator_may_return_null: the
# out-of-memory tests ask for more than TSan's allocator serves and expect NULL.
TSAN_ENV = TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp halt_on_error=1 \
	allocator_may_return_null=1 second_deadlock_stack=1"
test-tsan: deps
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTGC_WERROR=ON \
	      -DTGC_SANITIZE=thread -DTGC_BUILD_BENCH=OFF -DTGC_BUILD_EXAMPLES=OFF
	cmake --build $(TSAN_BUILD) -j $(JOBS)
	cd $(TSAN_BUILD) && $(TSAN_ENV) ctest --output-on-failure -R 'test_(concurrency|jit_threads|driver)$$'
	cd $(TSAN_BUILD) && $(TSAN_ENV) ctest --output-on-failure -j $(JOBS)

bench-deps:
	@./tests/bench/deps.sh

# Benchmark-only packages (OpenBLAS, oneDNN) are installed first so CMake finds them.
bench: bench-deps all
	./$(BUILD)/tests/bench/bench_cache_hit
	./$(BUILD)/tests/bench/bench_sgemm --threads 1,2
	./$(BUILD)/tests/bench/bench_conv --threads 1,2
	./$(BUILD)/tests/bench/bench_pointwise --threads 1,2
	BUILD=$(BUILD) ./tests/bench/compare_models.sh 2

# The fuzzer: a longer run than ctest's slice, from a seed of its own (FUZZ_SEED=N to choose).
# Findings are printed and recorded as corpus entries under $(BUILD)/fuzz-findings.
FUZZ_SECONDS ?= 600
FUZZ_SEED ?= $(shell date +%s)
LIBFUZZER_BUILD ?= build-libfuzzer
fuzz: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD) -j $(JOBS) --target fuzz_run
	mkdir -p $(BUILD)/fuzz-findings
	./$(BUILD)/tests/fuzz/fuzz_run --seed $(FUZZ_SEED) --count 100000000 --seconds $(FUZZ_SECONDS) \
	    --known tests/fuzz/known_failures --corpus tests/fuzz/corpus --record $(BUILD)/fuzz-findings

fuzz-libfuzzer: deps
	cmake -S . -B $(LIBFUZZER_BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	      -DTGC_BUILD_LIBFUZZER=ON -DTGC_BUILD_EXAMPLES=OFF -DTGC_BUILD_BENCH=OFF
	cmake --build $(LIBFUZZER_BUILD) -j $(JOBS) --target fuzz_libfuzzer
	mkdir -p $(LIBFUZZER_BUILD)/fuzz-corpus $(LIBFUZZER_BUILD)/fuzz-crashes
	ASAN_OPTIONS=detect_leaks=0 ./$(LIBFUZZER_BUILD)/tests/fuzz/fuzz_libfuzzer \
	    -max_total_time=$(FUZZ_SECONDS) -timeout=120 -rss_limit_mb=4096 -fork=1 -ignore_crashes=1 \
	    -artifact_prefix=$(LIBFUZZER_BUILD)/fuzz-crashes/ $(LIBFUZZER_BUILD)/fuzz-corpus

# GPU machine (an H200 host with no apt, no network, no cmocka). On the development
# machine `make gpu-deps` downloads the cmocka .debs into .deps/cmocka and copies the PyTorch
# reference scripts (from the directory SHARED_BENCH names) into .deps/torch; .deps is
# git-ignored, so a copy of the tree sent to the GPU machine must include it. tests/gpu/test_gpu.sh
# says what test-gpu does, phase by phase (about 1-2 min build and tests on 16 cores, plus
# memcheck, whose time is printed per test); tests/gpu/device_run.sh runs it and the GPU
# benchmarks in one run.
SHARED_BENCH ?=
gpu-deps:
	mkdir -p .deps/cmocka .deps/torch
	cd .deps/cmocka && rm -f ./*.deb && apt-get download libcmocka0 libcmocka-dev
	if [ -n "$(SHARED_BENCH)" ] && [ -d "$(SHARED_BENCH)" ]; then cp -f $(SHARED_BENCH)/torch_ref.py $(SHARED_BENCH)/torch_graph_ref.py .deps/torch/; \
	else echo "gpu-deps: $(SHARED_BENCH) not found: set SHARED_BENCH=<dir of torch_ref.py>"; fi
	@ls -l .deps/cmocka .deps/torch

test-gpu:
	./tests/gpu/test_gpu.sh

test-gpu-memcheck:
	./tests/gpu/test_gpu.sh --memcheck-only

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(LIBFUZZER_BUILD) build-gpu

# Thin wrapper over CMake for the two commands in README.md.
#   make demo   builds and runs examples/seed_cnn
#   make test   builds with -Werror and runs every test, then again under ASan+UBSan
#   make test-tsan  builds build-tsan with ThreadSanitizer and runs the concurrency tests, then
#               every test, under it
JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan

.PHONY: all deps demo test test-release test-asan test-tsan bench bench-deps clean

all: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD) -j $(JOBS)

deps:
	@./.ci/deps.sh

demo: all
	./$(BUILD)/examples/seed_cnn
	@echo "More: ./$(BUILD)/examples/resnet18 (ResNet18, compiled vs eager) and ./$(BUILD)/examples/bert (BERT-base, sequence-length sweep); --help lists their flags."

test: test-release test-asan

test-release: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTGC_WERROR=ON
	cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTGC_WERROR=ON -DTGC_SANITIZE=ON \
	      -DTGC_BUILD_BENCH=OFF
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)

# ThreadSanitizer (TGC_SANITIZE=thread; it cannot be combined with ASan). The concurrency
# tests run first, then the whole suite (slow: ~8 min on 2 cores). LLVM and libgomp are not
# instrumented; tests/tsan.supp says which of their reports are suppressed and why, and
# runtime/parallel.c declares OpenMP's fork/join to TSan. allocator_may_return_null: the
# out-of-memory tests ask for more than TSan's allocator serves and expect NULL.
TSAN_ENV = TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp halt_on_error=1 \
	allocator_may_return_null=1 second_deadlock_stack=1"
test-tsan: deps
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTGC_WERROR=ON \
	      -DTGC_SANITIZE=thread -DTGC_BUILD_BENCH=OFF -DTGC_BUILD_EXAMPLES=OFF
	cmake --build $(TSAN_BUILD) -j $(JOBS)
	cd $(TSAN_BUILD) && $(TSAN_ENV) ctest --output-on-failure -R 'test_(concurrency|jit_threads)$$'
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

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD)

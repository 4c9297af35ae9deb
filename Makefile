# Thin wrapper over CMake for the two commands in README.md.
#   make demo   builds and runs examples/seed_cnn
#   make test   builds with -Werror and runs every test, then again under ASan+UBSan
JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan

.PHONY: all deps demo test test-release test-asan bench bench-deps clean

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
	rm -rf $(BUILD) $(ASAN_BUILD)

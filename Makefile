# nuvec — the two commands of the README and the rest of the developer targets.
#   make         build libnuvec.so / libnuvec.a (Release with debug info)
#   make test    build and run every test; ends with "N passed, N failed, N skipped"
#   make run     build and run the main example (examples/charlm: train, sample, plot)
#   make asan    the tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   make tsan    the threading tests under ThreadSanitizer
#   make bench   the benchmarks beside their peers
#   make fuzz    the file loaders under libFuzzer (clang, ASan+UBSan), FUZZ_TIME s each
#   make fuzz-api  the Python API with adversarial arguments, FUZZ_TIME s (FUZZ_SEED=n repeats)
#   make install install headers, libraries, nuvec.pc and the CMake package (PREFIX=...)
SHELL := /bin/bash
JOBS ?= $(shell nproc)
PREFIX ?= /usr/local
BUILD ?= build
CMAKE_FLAGS ?=

.PHONY: all setup configure build test test-full run asan tsan bench fuzz fuzz-api install clean

all: build

setup:
	@tools/setup.sh

$(BUILD)/CMakeCache.txt: | setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS)

configure: $(BUILD)/CMakeCache.txt

build: setup configure
	cmake --build $(BUILD) -j $(JOBS)

# Runs the CTest suite, then the aggregated closing line.
define run_tests
	rm -rf $(1)/test-results && mkdir -p $(1)/test-results
	cd $(1) && ctest -j $(JOBS) --output-on-failure --output-junit ctest-junit.xml $(2) ; true
	python3 tools/test_summary.py $(1)/test-results $(1)/ctest-junit.xml
endef

test: build
	$(call run_tests,$(BUILD),)

test-full: build
	NUVEC_TEST_FULL=1 $(MAKE) --no-print-directory test

# The main job: examples/charlm trains its character-level transformer with its defaults (about
# 2-4 minutes on 2 cores), then the loss curve is drawn to $(BUILD)/charlm/loss.png.
run: build
	$(BUILD)/examples/charlm --out $(BUILD)/charlm
	python3 examples/charlm/plot_loss.py $(BUILD)/charlm

asan: setup
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DNUVEC_SANITIZE=address $(CMAKE_FLAGS)
	cmake --build build-asan -j $(JOBS)
	export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1; \
	$(call run_tests,build-asan,)

tsan: setup
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DNUVEC_SANITIZE=thread $(CMAKE_FLAGS)
	cmake --build build-tsan -j $(JOBS)
	export TSAN_OPTIONS=halt_on_error=1 OPENBLAS_NUM_THREADS=1; \
	$(call run_tests,build-tsan,-L tsan)

# The benchmarks' peers include PyTorch, installed here (setup.sh --bench) and never for the tests.
bench: build
	@tools/setup.sh --bench
	NUVEC_BUILD=$(abspath $(BUILD)) bench/run_all.sh

# The file-format fuzzers: the library built by clang with coverage and ASan+UBSan, one
# libFuzzer binary per format (each input loaded from memory, and by path through the format's
# loader and nv_load), each run FUZZ_TIME seconds from its seed corpus (copied, so the committed
# seeds stay as they are); the closing lines give executions per fuzzer. A crashing input is
# kept as build-fuzz/fuzz_<format>-crash-<sha1>.
FUZZ_TIME ?= 60
FUZZERS := npy npz safetensors gguf export
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_SYMBOLIZER := $(shell command -v llvm-symbolizer || command -v llvm-symbolizer-14)
fuzz: setup
	cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DNUVEC_WERROR=OFF -DNUVEC_WITH_CUDA=OFF \
	  -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link $(FUZZ_SAN)" $(CMAKE_FLAGS) >/dev/null
	cmake --build build-fuzz -j $(JOBS) --target nuvec_static
	set -e; for f in $(FUZZERS); do \
	  clang -g -O1 -fsanitize=fuzzer $(FUZZ_SAN) -Iinclude -Isrc tests/fuzz/fuzz_$$f.c \
	    build-fuzz/src/libnuvec.a -llapacke -lopenblas -lminizip -lz -lm -lpthread -ldl -o build-fuzz/fuzz_$$f; \
	  rm -rf build-fuzz/corpus-$$f && cp -r tests/fuzz/corpus/$$f build-fuzz/corpus-$$f; \
	done
	set -e; for f in $(FUZZERS); do \
	  echo "== fuzz_$$f ($(FUZZ_TIME) s)"; \
	  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  $(if $(FUZZ_SYMBOLIZER),ASAN_SYMBOLIZER_PATH=$(FUZZ_SYMBOLIZER)) \
	  build-fuzz/fuzz_$$f -max_total_time=$(FUZZ_TIME) -max_len=8192 -timeout=10 \
	    -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix=build-fuzz/fuzz_$$f- \
	    build-fuzz/corpus-$$f 2>build-fuzz/fuzz_$$f.log \
	    || { tail -50 build-fuzz/fuzz_$$f.log; exit 1; }; \
	  grep -E "^Done|stat::number_of_executed_units" build-fuzz/fuzz_$$f.log; \
	done

# The Python API fuzzer (tools/fuzz_api.py): every public callable of nuvec, nuvec.random, the
# array's methods, operators, indexing and the transforms called with adversarial arguments,
# in child processes under a memory limit; a crash, SystemError, non-Exception or hang fails,
# printed with its reproducer. Seeded: the seed is printed, FUZZ_SEED repeats a run.
fuzz-api: build
	python3 tools/fuzz_api.py --time $(FUZZ_TIME) --build $(abspath $(BUILD)) $(if $(FUZZ_SEED),--seed $(FUZZ_SEED))

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz

# onigpu - the two commands a fresh machine needs:
#   make run    build, then run the closed loop on the embedded emulated card
#   make test   build and run every test: plain, ASan+UBSan, TSan (threaded tests), libFuzzer (brief)
# Each build lives in its own directory; everything is built from source with cmake.
# CTest runs JOBS tests at a time, except those in tests/realtime.labels (alone),
# and stops any test at its TIMEOUT (tests/CMakeLists.txt).

JOBS  ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE ?= cmake
CTEST ?= ctest
CLANG ?= clang

.PHONY: all build run test test-plain test-asan test-tsan test-fuzz deps deps-fuzz clean

all: build

# What build and run need (cmake, cc, jansson, gnuplot); the fuzz build adds
# clang and libFuzzer, so `make run` never needs them.
deps:
	@tools/deps.sh build

deps-fuzz:
	@tools/deps.sh fuzz

# Run the tests of build dir $(1) (more ctest arguments: $(2)); when one fails,
# tools/test-failures.sh prints why, briefly (whole outputs: LastTest.log).
run_tests = $(CTEST) --test-dir $(1) -j $(JOBS) $(2) || { tools/test-failures.sh $(1); exit 1; }

build: deps
	$(CMAKE) -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
	$(CMAKE) --build build -j $(JOBS)

run: build
	./build/onigpu run $(ARGS)

test: test-plain test-asan test-tsan test-fuzz

test-plain: build
	$(call run_tests,build)

# Sanitizer builds skip CUDA: the CUDA runtime and ASan disagree about the
# address space, and the GPU tests only skip here anyway.
test-asan: deps
	$(CMAKE) -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DONIGPU_CUDA=OFF -DONIGPU_SANITIZE=address,undefined
	$(CMAKE) --build build-asan -j $(JOBS)
	$(call run_tests,build-asan)

test-tsan: deps
	$(CMAKE) -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DONIGPU_CUDA=OFF -DONIGPU_SANITIZE=thread
	$(CMAKE) --build build-tsan -j $(JOBS)
	$(call run_tests,build-tsan,-L threads)

test-fuzz: deps-fuzz
	CC=$(CLANG) $(CMAKE) -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DONIGPU_CUDA=OFF -DONIGPU_FUZZ=ON
	$(CMAKE) --build build-fuzz -j $(JOBS)
	$(call run_tests,build-fuzz,-L fuzz)

clean:
	rm -rf build build-asan build-tsan build-fuzz

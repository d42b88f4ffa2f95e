#!/bin/sh
# deps.sh [build|fuzz] - make sure what the build needs is present; install the
# missing Debian packages when we are allowed to (root), else say what to install.
#   build (default)  what `make build` and `make run` need: cmake, a C compiler,
#                    pkg-config, jansson (result files' JSON), gnuplot (their plots),
#                    HDF5 (NWB recordings), UCX (the net driver and `onigpu serve`;
#                    ucx_perftest for `onigpu bench remote`), and Debian's python3
#                    with numpy and h5py (the tests' independent readers of recordings)
#   fuzz             that and what `make test`'s fuzz build adds: clang with libFuzzer and the
#                    sanitizer runtimes
set -e
what=${1:-build}
case $what in
build|fuzz) ;;
*) echo "deps: unknown target '$what' (build or fuzz)" >&2; exit 2 ;;
esac
missing=""
command -v cmake >/dev/null 2>&1 || missing="$missing cmake"
command -v cc >/dev/null 2>&1 || missing="$missing build-essential"
command -v pkg-config >/dev/null 2>&1 || missing="$missing pkg-config"
pkg-config --exists jansson 2>/dev/null || missing="$missing libjansson-dev"
command -v gnuplot >/dev/null 2>&1 || missing="$missing gnuplot-nox"
pkg-config --exists hdf5 2>/dev/null || [ -f /usr/include/hdf5/serial/hdf5.h ] || missing="$missing libhdf5-dev"
# the system's python3, not one first on PATH: the tests run /usr/bin/python3
/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1 || missing="$missing python3-numpy"
/usr/bin/python3 -c 'import h5py' >/dev/null 2>&1 || missing="$missing python3-h5py"
pkg-config --exists ucx 2>/dev/null || missing="$missing libucx-dev"
command -v ucx_perftest >/dev/null 2>&1 || missing="$missing ucx-utils"
if [ "$what" = fuzz ]; then
    command -v clang >/dev/null 2>&1 || missing="$missing clang"
    # libFuzzer and the sanitizer runtimes for clang
    if command -v clang >/dev/null 2>&1; then
        echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n){return 0;}' > /tmp/onigpu-fuzzprobe.c
        clang -fsanitize=fuzzer /tmp/onigpu-fuzzprobe.c -o /tmp/onigpu-fuzzprobe 2>/dev/null || missing="$missing libclang-rt-$(clang --version | sed -n "s/.*clang version \([0-9]*\).*/\1/p" | head -1)-dev"
        rm -f /tmp/onigpu-fuzzprobe.c /tmp/onigpu-fuzzprobe
    fi
fi
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "deps: installing$missing"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
else
    echo "deps: missing$missing - install them (Debian: apt-get install$missing)" >&2
    exit 1
fi

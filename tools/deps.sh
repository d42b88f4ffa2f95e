#!/bin/sh
# deps.sh [build|fuzz] - make sure what the build needs is present; install the
# missing Debian packages when we are allowed to (root), else say what to install.
#   build (default)  what `make build` and `make run` need: cmake, a C compiler,
#                    pkg-config, jansson (result files' JSON), gnuplot (their plots),
#                    HDF5 (NWB recordings), UCX (the net driver and `onigpu serve`;
#                    ucx_perftest for `onigpu bench remote`), Debian's python3
#                    with numpy and h5py (the tests' independent readers of recordings),
#                    libmicrohttpd (`run --view`'s server), and for the live page and
#                    its browser test node and npm, chromium, and the npm packages
#                    of web/view (uPlot) and tests/view (playwright-core), installed
#                    with `npm ci` from their lock files into those folders' node_modules
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
[ -f /usr/include/microhttpd.h ] || missing="$missing libmicrohttpd-dev"
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
if [ "$what" = fuzz ]; then
    command -v clang >/dev/null 2>&1 || missing="$missing clang"
    # libFuzzer and the sanitizer runtimes for clang
    if command -v clang >/dev/null 2>&1; then
        echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n){return 0;}' > /tmp/onigpu-fuzzprobe.c
        clang -fsanitize=fuzzer /tmp/onigpu-fuzzprobe.c -o /tmp/onigpu-fuzzprobe 2>/dev/null || missing="$missing libclang-rt-$(clang --version | sed -n "s/.*clang version \([0-9]*\).*/\1/p" | head -1)-dev"
        rm -f /tmp/onigpu-fuzzprobe.c /tmp/onigpu-fuzzprobe
    fi
fi
if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "deps: installing$missing"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
    else
        echo "deps: missing$missing - install them (Debian: apt-get install$missing)" >&2
        exit 1
    fi
fi
# the npm packages, at the versions of the committed lock files (a folder
# whose node_modules was installed after its lock file last changed is left)
command -v npm >/dev/null 2>&1 || exit 0
root=$(cd "$(dirname "$0")/.." && pwd)
for dir in web/view tests/view; do
    [ "$root/$dir/node_modules/.package-lock.json" -nt "$root/$dir/package-lock.json" ] && continue
    echo "deps: npm ci in $dir"
    # not fatal: the build needs none of it (run --view then refuses to start, naming the
    # missing file; its tests skip saying so)
    (cd "$root/$dir" && npm ci --no-audit --no-fund --loglevel=error) ||
        echo "deps: WARNING: npm ci in $dir failed (the registry unreachable?): no live view" >&2
done
exit 0

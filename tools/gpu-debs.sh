#!/bin/sh
# gpu-debs.sh [DIR] - fetch, on this machine, the Debian packages the lent GPU
# machine lacks for the build (it has no network): jansson (result files),
# UCX and what UCX links (the net driver, ucx_perftest). They go to DIR
# (default .deb, which git ignores); name DIR in the device call's carry and
# tools/gpu-run.sh installs them there before it builds.
set -e
dir=${1:-.deb}
mkdir -p "$dir"
cd "$dir"
apt-get download libjansson-dev libjansson4 libucx-dev libucx0 ucx-utils libibverbs1 librdmacm1 libnuma1
ls -1 *.deb

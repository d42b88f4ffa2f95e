#!/usr/bin/env bash
# tools/check-layers.sh - the layout of DEVELOPERS.md as a check: each
# directory's files may include (with "...") only the headers its row of
# the table allows; and, given a build directory, each directory's object
# files may use (nm -u) only the symbols of the directories its row of the
# second table allows (a symbol no object of the project defines is the
# system's: libc, pthreads, CUDA). Above all: nothing above the drivers
# includes or calls src/emu, so the product works unchanged with real
# hardware. Prints each include and each symbol that breaks the rule; exit
# 1 if any. Run by CTest (test "layers", with the build directory).
#
#   tools/check-layers.sh [SOURCE_DIR [BUILD_DIR]]
set -u
cd "${1:-$(dirname "$0")/..}" || exit 2
BUILD=${2:-}
PUBLIC='oni\.h|onidefs\.h|onidriver\.h|onix\.h|onigpu\.h|oniemu\.h|onitest\.h|oninet\.h|onigpu_stage\.h'
CLOCK='oni/util/clock\.h'
UTIL='oni/util/(clock|cobs|npy|opt|probe|wire)\.h' # the util headers (src/oni/util)
DRIVER='oni/driver\.h'                    # the driver table and loader
# directory (its own files, not its subdirectories) -> the other headers it
# may include; a header of the same directory, by its bare name, always may
declare -A ALLOW=(
    [src/oni]="$PUBLIC|$DRIVER|$UTIL"
    [src/oni/util]="$PUBLIC|$UTIL"
    [src/drivers]="$PUBLIC|$DRIVER"
    [src/drivers/test]="$PUBLIC|$DRIVER|$UTIL"
    [src/drivers/net]="$PUBLIC|$DRIVER|$UTIL|gpu/gpu\.h"
    [src/drivers/emu]="$PUBLIC|$DRIVER|$UTIL|emu/emu\.h|emu/dma\.h|gpustream/gpustream\.h|gpu/[a-z_]+\.h"
    [src/gpustream]="$PUBLIC|$UTIL|gpu/gpu\.h|gpu/pipe\.h"
    [src/emu]="$PUBLIC|$UTIL|gpu/[a-z_]+\.(h|cuh)"
    [src/emu/devices]="$PUBLIC|emu/card\.h|emu/neural\.h|emu/headstage\.h|emu/headstages\.h"
    [src/gpu]="$PUBLIC|$CLOCK"
    [src/loop]="$PUBLIC|$CLOCK|oni/util/(npy|probe)\.h|gpu/[a-z_]+\.(h|cuh)|loop/[a-z_]+\.h"
    [src/results]="$PUBLIC"
    [src/bench]="$PUBLIC|$CLOCK|gpu/[a-z_]+\.(h|cuh)|loop/[a-z_]+\.h|bench/[a-z_]+\.h|results/results\.h|record/(record|looptap)\.h|view/(view|client)\.h"
    [src/record]="$PUBLIC|$CLOCK|oni/util/(npy|probe)\.h|loop/[a-z_]+\.h|record/[a-z_]+\.h"
    [src/view]="$PUBLIC|$CLOCK|loop/[a-z_]+\.h|record/record\.h|view/[a-z_]+\.h"
    [tools/onigpu]="$PUBLIC|$CLOCK|gpu/[a-z_]+\.h|loop/[a-z_]+\.h|bench/[a-z_]+\.h|results/results\.h|record/(record|looptap)\.h|view/view\.h|drivers/net/net(serve|proto)\.h|common/[a-z_]+\.h"
    [tools/common]="" # stopsig, mkdirs (tools/onigpu): system headers only
    [tools]="oni\.h" # stand-alone programs (framerate.c builds against upstream liboni too)
)
bad=0
for dir in "${!ALLOW[@]}"; do
    [ -d "$dir" ] || { echo "check-layers: no directory $dir (the table is stale)"; bad=1; continue; }
    for f in "$dir"/*.c "$dir"/*.h "$dir"/*.cu "$dir"/*.cuh; do
        [ -f "$f" ] || continue
        while IFS= read -r inc; do
            [[ "$inc" != */* && -f "$dir/$inc" ]] && continue # its own
            if ! [[ "$inc" =~ ^(${ALLOW[$dir]})$ ]]; then
                echo "$f includes \"$inc\": not allowed in $dir (DEVELOPERS.md, Layout)"
                bad=1
            fi
        done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
    done
done
# every source directory has a row: a new one must be placed in the layout
while IFS= read -r dir; do
    [ -n "${ALLOW[$dir]+x}" ] || { echo "check-layers: $dir has no row here (nor, likely, in DEVELOPERS.md)"; bad=1; }
done < <(find src tools -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -printf '%h\n' | sort -u)
[ $bad -eq 0 ] && echo "check-layers: every include within its layer"

# Symbols: directory -> the other directories whose symbols it may use
# (its own always). The core's builtin.c names the drivers' tables; the net
# directory holds the server, which loads drivers through the core.
DRIVERS='src/drivers|src/drivers/test|src/drivers/emu|src/drivers/net'
ABOVE='api|src/oni/util|src/gpu' # what every layer above the drivers may call (api: the public API)
declare -A USES=(
    [src/oni]="src/oni/util|$DRIVERS"
    [src/oni/util]=""
    [src/drivers]="$DRIVERS"
    [src/drivers/test]="src/oni/util"
    [src/drivers/net]="src/oni|src/oni/util|src/gpu"
    [src/drivers/emu]="src/oni/util|src/emu|src/gpustream|src/gpu"
    [src/emu]="src/oni/util|src/emu/devices|src/gpu"
    [src/emu/devices]="src/oni/util|src/emu"
    [src/gpustream]="src/oni/util|src/gpu"
    [src/gpu]="src/oni/util"
    [src/loop]="$ABOVE"
    [src/results]=""
    [src/bench]="$ABOVE|src/loop|src/record|src/results|src/view"
    [src/record]="$ABOVE|src/loop"
    [src/view]="$ABOVE|src/loop|src/record"
    [tools/onigpu]="$ABOVE|src/loop|src/bench|src/results|src/record|src/view|src/drivers/net|tools/common"
    [tools/common]=""
    [tools]="api"
)
if [ -n "$BUILD" ]; then
    [ -d "$BUILD/CMakeFiles" ] || { echo "check-layers: $BUILD is no CMake build directory"; exit 2; }
    # object file -> its source's directory: .../<target>.dir/[__/__/]<dir>/<file>.o
    objs=$(find "$BUILD" -path '*.dir/*' -name '*.o' | grep -E '\.dir/(__/)*(src|tools)/')
    [ -n "$objs" ] || { echo "check-layers: no object files in $BUILD (build it first)"; exit 2; }
    live="" # the objects whose source is still in the tree (not left by a moved one)
    for o in $objs; do
        f=${o##*.dir/}
        while [[ $f == __/* ]]; do f=${f#__/}; done
        [ -f "${f%.o}" ] && live="$live $o"
    done
    # the public API (what the headers mark ONI_EXPORT): pseudo-directory "api"
    api=$(sed -n 's/^ONI_EXPORT[^(]*[ *]\([A-Za-z_][A-Za-z0-9_]*\)(.*/\1/p' include/*.h)
    {
        for dir in "${!USES[@]}"; do echo "A $dir ${USES[$dir]:-^$}"; done
        for sym in $api; do echo "P $sym"; done
        # one nm for all objects, POSIX format: "<object>: <symbol> <type> ..." (-A -P)
        # shellcheck disable=SC2086
        nm -A -P $live 2>/dev/null | awk -v build="$BUILD/" '
            { o = $1; sub(/:$/, "", o); f = o; sub(/.*\.dir\/(__\/)*/, "", f); sub(/\.o$/, "", f)
              d = f; sub(/\/[^\/]*$/, "", d); r = o; sub("^" build, "", r) }
            $3 == "U" { print "U", d, $2, r; next }
            $3 ~ /^[TDBRVWC]$/ && d ~ /^(src|tools\/common)/ { print "D", d, $2 }'
    } | awk '
        $1 == "A" { allow[$2] = $3; next }
        $1 == "P" { pub[$2] = 1; next }
        $1 == "D" { def[$3] = def[$3] " " $2; next }
        $1 == "U" { use[n++] = $0 }
        # may dir use what dir2 defines? (each pair matched once)
        function may(dir, dir2) {
            if (!((dir, dir2) in memo)) memo[dir, dir2] = dir2 ~ ("^(" allow[dir] ")$")
            return memo[dir, dir2]
        }
        END {
            for (i = 0; i < n; i++) {
                split(use[i], u, " ")
                dir = u[2]; sym = u[3]
                if (!(sym in def)) continue          # the system
                if (!(dir in allow)) { print "check-layers: " dir " has no row in USES"; bad = 1; continue }
                ok = 0; k = split(def[sym], from, " ")
                for (j = 1; j <= k && !ok; j++)
                    ok = from[j] == dir || may(dir, from[j])
                if (!ok && (sym in pub) && may(dir, "api")) ok = 1
                if (!ok) { print u[4] " uses " sym " of" def[sym] ": not allowed in " dir " (DEVELOPERS.md, Layout)"; bad = 1 }
            }
            exit bad
        }' || bad=1
    [ $bad -eq 0 ] && echo "check-layers: every symbol used within its layer ($(wc -l <<<"$objs") objects)"
fi
exit $bad

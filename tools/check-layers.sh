#!/usr/bin/env bash
# tools/check-layers.sh - the layout of DEVELOPERS.md as a check: each
# directory's files may include (with "...") only the headers its row of
# the table allows. Above all: nothing above the drivers includes src/emu,
# so the product works unchanged with real hardware. Prints each include
# that breaks the rule; exit 1 if any. Run by CTest (test "layers").
#
#   tools/check-layers.sh [SOURCE_DIR]
set -u
cd "${1:-$(dirname "$0")/..}" || exit 2
PUBLIC='oni\.h|onidefs\.h|onidriver\.h|onix\.h|onigpu\.h|oniemu\.h|onitest\.h|oninet\.h'
CLOCK='oni/util/clock\.h'
# directory (its own files, not its subdirectories) -> the other headers it
# may include; a header of the same directory, by its bare name, always may
declare -A ALLOW=(
    [src/oni]="$PUBLIC|onii\.h|ctx\.h|$CLOCK"
    [src/oni/util]="$PUBLIC|onii\.h|$CLOCK"
    [src/drivers]="$PUBLIC|onii\.h"
    [src/drivers/test]="$PUBLIC|onii\.h"
    [src/drivers/net]="$PUBLIC|onii\.h|gpu/gpu\.h"
    [src/drivers/emu]="$PUBLIC|onii\.h|emu/emu\.h|emu/dma\.h|gpu/[a-z_]+\.h"
    [src/emu]="$PUBLIC|onii\.h|gpu/[a-z_]+\.(h|cuh)"
    [src/emu/devices]="$PUBLIC|emu/card\.h|emu/neural\.h"
    [src/gpu]="$PUBLIC|$CLOCK"
    [src/loop]="$PUBLIC|$CLOCK|gpu/[a-z_]+\.(h|cuh)|loop/[a-z_]+\.h"
    [src/bench]="$PUBLIC|$CLOCK|gpu/[a-z_]+\.(h|cuh)|loop/[a-z_]+\.h|bench/[a-z_]+\.h"
    [tools/onigpu]="$PUBLIC|$CLOCK|gpu/[a-z_]+\.h|loop/[a-z_]+\.h|bench/[a-z_]+\.h|drivers/net/net(serve|proto)\.h|common/[a-z_]+\.h"
    [tools/common]="" # what both tools share: system headers only
    [tools]="oni\.h" # stand-alone programs (framerate.c builds against upstream liboni too)
    [tools/onix-emu]="$PUBLIC|$CLOCK|emu/emu\.h|emu/dma\.h|gpu/[a-z_]+\.h|drivers/emu/emuproto\.h|common/stopsig\.h"
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
exit $bad

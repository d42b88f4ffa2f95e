#!/usr/bin/env bash
# check.sh - liboni.so is the ONI library and nothing more: its dynamic
# section needs no CUDA runtime and no C++ runtime, and it exports exactly
# the functions the public headers declare for it (ONI_EXPORT in oni.h,
# onix.h, onitest.h; onidriver.h's are a driver's, not liboni's). Prints
# what differs; exit 1 if anything does. Run by CTest (test "liboni_lean").
#
#   tests/liboni/check.sh LIBONI_SO SOURCE_DIR
set -u
lib=$1 src=$2
[ -f "$lib" ] || { echo "check: no $lib"; exit 2; }
bad=0
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
[ -n "$needed" ] || { echo "check: readelf found no NEEDED entry in $lib"; exit 2; }
for n in $needed; do
    case "$n" in
    libcudart* | libcuda.* | libstdc++*)
        echo "$lib needs $n"
        bad=1
        ;;
    esac
done
want=$(sed -n 's/^ONI_EXPORT[^(]*[ *]\([A-Za-z_][A-Za-z0-9_]*\)(.*/\1/p' \
    "$src/include/oni.h" "$src/include/onix.h" "$src/include/onitest.h" | sort -u)
[ "$(wc -l <<<"$want")" -ge 17 ] || { echo "check: found only $(wc -l <<<"$want") declarations"; exit 2; }
got=$(nm -D --defined-only "$lib" | awk '{print $NF}' | sort -u)
extra=$(comm -13 <(echo "$want") <(echo "$got"))
missing=$(comm -23 <(echo "$want") <(echo "$got"))
[ -z "$extra" ] || { echo "$lib exports what no public header declares:"; echo "$extra"; bad=1; }
[ -z "$missing" ] || { echo "$lib lacks what the public headers declare:"; echo "$missing"; bad=1; }
[ $bad -eq 0 ] && echo "check: $lib needs $(echo $needed) and exports the $(wc -l <<<"$want") public functions"
exit $bad

# upstream-lib.sh - sourced by tools/bench-upstream.sh and tools/compat-upstream.sh:
# find an upstream liboni checkout and build its library with its own flags.
# Upstream's code never enters this repository; the checkout is the caller's.
#
#   upstream_find PATH       sets UP to PATH's api/liboni folder (or PATH itself),
#                            absolute; exits 2 when it is not an upstream checkout
#   upstream_build DIR       copies UP's sources to DIR and builds DIR/liboni.so.1
#                            with upstream's Makefile, else its flags without
#                            -Werror; sets UP_BUILD (how) and UP_VERSION (oni.h's);
#                            exits 1 when both fail (the log goes to stderr)

upstream_find() {
    UP=$1
    [[ -d $UP/api/liboni ]] && UP=$UP/api/liboni
    local f
    for f in oni.c oni.h onidefs.h onidriver.h onidriverloader.c onidriverloader.h; do
        [[ -f $UP/$f ]] || { echo "$(basename "$0"): $UP/$f missing: not an upstream liboni checkout" >&2; exit 2; }
    done
    UP=$(cd "$UP" && pwd)
}

upstream_build() {
    local dir=$1 cc=${CC:-cc}
    mkdir -p "$dir"
    cp "$UP"/*.c "$UP"/*.h "$dir/"
    [[ -f $UP/Makefile ]] && cp "$UP/Makefile" "$dir/"
    UP_BUILD="make liboni.so.1 (upstream's Makefile)"
    if ! { [[ -f $dir/Makefile ]] && make -C "$dir" CC="$cc" liboni.so.1 >"$dir/build.log" 2>&1; }; then
        UP_BUILD="$cc -Wall -W -fPIC -O3 [-pedantic for oni.c, onix.c] (upstream's Makefile flags without -Werror)"
        (
            cd "$dir"
            objs=()
            for f in oni.c onix.c onidriverloader.c; do
                [[ -f $f ]] || continue
                extra=(); [[ $f != onidriverloader.c ]] && extra=(-pedantic)
                "$cc" -Wall -W -fPIC -O3 "${extra[@]}" -c "$f" -o "${f%.c}.o"
                objs+=("${f%.c}.o")
            done
            "$cc" -shared "${objs[@]}" -o liboni.so.1 -ldl
        ) >>"$dir/build.log" 2>&1 || { cat "$dir/build.log" >&2; echo "$(basename "$0"): upstream build failed" >&2; exit 1; }
    fi
    UP_VERSION=$(awk '/#define ONI_VERSION_(MAJOR|MINOR|PATCH)/ {v = v (v ? "." : "") $3} END {print v}' "$UP/oni.h")
}

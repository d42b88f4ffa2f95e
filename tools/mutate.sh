#!/usr/bin/env bash
# tools/mutate.sh - mutation testing: apply each mutation of a list to the
# tree, one at a time, rebuild, run the tests named for it, restore the file.
# A mutation the tests fail on (or hang on) is "killed"; one they pass is
# "survived": either the tests miss a bug of that shape, or the mutation
# changes nothing observable (an equivalent mutant; say why in the page).
#
#   tools/mutate.sh LIST BUILD_DIR [RESULTS_TSV]
#
# LIST: one mutation per line, five fields separated by one TAB:
#   id  file  ctest-regex  old  new
# where old is an exact text of file that occurs exactly once in it, replaced
# by new; both are read as printf %b reads them (\n a newline, \\ a
# backslash). Lines starting with # and empty lines are skipped.
# BUILD_DIR must be configured already. The clean tree's tests (the union of
# the list's regexes) run first and must pass. They must also pass without
# skipping (a GPU test skips without a GPU, and then every mutant would
# "survive"), unless MUTATE_ALLOW_SKIPS=1: then a mutant counts as "skipped"
# only where a case skips that ran on the clean tree.
#
# Environment: MUTATE_TIMEOUT (s per mutant's tests, default 300; a test cut
# by it counts as killed), MUTATE_ONLY (space-separated ids to run),
# MUTATE_BASELINE=0 (skip the clean tree's run: it passed on this build
# directory already, e.g. in an earlier call on the same machine), JOBS.
# Output: RESULTS_TSV (default mutate-results.tsv): id, file, result
# (killed | survived | skipped | build-error | bad-line), failing test programs
# and their failed cases (":case"), seconds.
set -u
LIST=${1:?usage: tools/mutate.sh LIST BUILD_DIR [RESULTS_TSV]}
B=${2:?usage: tools/mutate.sh LIST BUILD_DIR [RESULTS_TSV]}
RES=${3:-mutate-results.tsv}
T=${MUTATE_TIMEOUT:-300}
JOBS=${JOBS:-$(nproc)}
[ -f "$LIST" ] || { echo "mutate: no list $LIST" >&2; exit 2; }
[ -f "$B/CMakeCache.txt" ] || { echo "mutate: $B is not a configured build directory" >&2; exit 2; }
LIST=$(realpath "$LIST") B=$(realpath "$B") RES=$(realpath -m "$RES") # the paths are the caller's
cd "$(dirname "$0")/.."
TMP=$(mktemp -d /tmp/onigpu-mutate.XXXXXX)
SAVED= # the file being mutated, while it is

restore() { [ -n "$SAVED" ] && cp "$TMP/orig" "$SAVED"; SAVED=; }
trap 'restore; rm -rf "$TMP"' EXIT
trap 'exit 130' INT TERM

# run_tests REGEX: ctest on the build; prints the failing programs and cases; status 0
# pass, 1 fail (or cut by the timeout), 2 a test not run, 3 a skip the clean tree did not have
run_tests() {
    timeout "$((T + 30))" ctest --test-dir "$B" -R "$1" --timeout "$T" -V >"$TMP/ctest.log" 2>&1
    local rc=$?
    sed -n '/tests FAILED/,$p' "$TMP/ctest.log" | grep -oE '(test|fuzz)_[A-Za-z0-9_]+' | sort -u | tr '\n' ' '
    # and the failed cases (tests/unit.h), as ctest -V prints them: "N: [ FAIL ] name"
    sed -n 's/^.*\[ FAIL \] \([A-Za-z0-9_]*\).*$/\1/p' "$TMP/ctest.log" | sort -u | sed 's/^/:/' | tr '\n' ' '
    [ $rc -ne 0 ] && return 1
    grep -qE 'Not Run|No tests were found' "$TMP/ctest.log" && return 2
    skips >"$TMP/skips"
    # a skip the clean tree did not have (all of them, without a clean run)
    [ -n "$(comm -13 "$TMP/base-skips" "$TMP/skips")" ] && return 3
    return 0
}

# The cases that skipped (tests/unit.h's [ SKIP ]) and programs that skipped
# whole (exit 77), sorted.
skips() {
    { sed -n 's/^.*\[ SKIP \] \([A-Za-z0-9_]*\).*$/\1/p' "$TMP/ctest.log"
      sed -n 's/^.*Test *#[0-9]*: *\([A-Za-z0-9_]*\) .*\*\*\*Skipped.*$/\1/p' "$TMP/ctest.log"; } | sort -u
}

build() { cmake --build "$B" -j "$JOBS" >"$TMP/build.log" 2>&1; }

echo "mutate: building $B"
build || { tail -n 30 "$TMP/build.log"; echo "mutate: the clean tree does not build" >&2; exit 1; }
all=$(grep -vE '^(#|$)' "$LIST" | cut -f3 | tr '|' '\n' | sort -u | paste -sd'|')
echo "mutate: clean tree's tests: $all"
: >"$TMP/base-skips"
if [ "${MUTATE_BASELINE:-1}" = 0 ]; then
    echo "mutate: not run (MUTATE_BASELINE=0)"
else
    failed=$(run_tests "$all")
    case $? in
    1) tail -n 30 "$TMP/ctest.log"; echo "mutate: the clean tree fails: $failed" >&2; exit 1 ;;
    2) grep -E 'Not Run|No tests' "$TMP/ctest.log"; echo "mutate: tests not run on the clean tree" >&2; exit 1 ;;
    3) ;;
    esac
    if [ -s "$TMP/skips" ]; then
        echo "mutate: skipped on the clean tree: $(tr '\n' ' ' <"$TMP/skips")"
        [ "${MUTATE_ALLOW_SKIPS:-0}" = 1 ] || { echo "mutate: skips not allowed (MUTATE_ALLOW_SKIPS=1)" >&2; exit 1; }
        cp "$TMP/skips" "$TMP/base-skips"
    fi
fi

printf 'id\tfile\tresult\tfailing\tseconds\n' >"$RES"
while IFS=$'\t' read -r -u 3 id file regex old new; do
    case $id in '#'* | '') continue ;; esac
    if [ -n "${MUTATE_ONLY:-}" ] && [[ " $MUTATE_ONLY " != *" $id "* ]]; then continue; fi
    t0=$(date +%s)
    result=bad-line failing=
    printf -v old '%b' "$old"
    printf -v new '%b' "$new"
    if [ -f "$file" ] && [ -n "$old" ]; then
        text=$(cat "$file"; printf x)
        text=${text%x}
        rest=${text#*"$old"}
        if [ "$rest" != "$text" ] && [[ "$rest" != *"$old"* ]]; then
            cp "$file" "$TMP/orig"
            SAVED=$file
            printf '%s' "${text/"$old"/"$new"}" >"$file"
            # the mutated file was compiled: by name, or for a header, some object that includes it
            obj=$(basename "$file")
            case $file in *.h | *.cuh) obj='.' ;; esac
            if ! build || ! grep -qE "Building [A-Z]+ object .*$obj" "$TMP/build.log"; then
                result=build-error
            else
                failing=$(run_tests "$regex")
                case $? in 0) result=survived ;; 1) result=killed ;; *) result=skipped ;; esac
            fi
            restore
        fi
    fi
    printf '%s\t%s\t%s\t%s\t%s\n' "$id" "$file" "$result" "$failing" "$(($(date +%s) - t0))" | tee -a "$RES"
done 3<"$LIST" # not stdin: cmake and ctest may read that
build >/dev/null || echo "mutate: warning: the restored tree did not rebuild" >&2
echo "mutate: $(cut -f3 "$RES" | tail -n +2 | sort | uniq -c | tr '\n' ' ')"

#!/bin/sh
# test-failures.sh BUILD_DIR - after a failed ctest run, print what failed, briefly.
# For each failed test in BUILD_DIR/Testing/Temporary/LastTest.log: the lines
# that say why (a failed check, a sanitizer's report, a crash), then the last
# lines of its output. The whole output of every test stays in that file.
# Why not ctest --output-on-failure alone: a test that logs a lot (test_net)
# pushes the failed check far from the "Failed" line, out of a CI log's excerpt.
set -u
log="${1:?usage: test-failures.sh BUILD_DIR}/Testing/Temporary/LastTest.log"
[ -r "$log" ] || { echo "test-failures: no $log" >&2; exit 1; }
awk -v file="$log" '
function flush(   i, from) {
    if (!failed) return
    printf "\n=== %s failed; why:\n", name
    for (i = 1; i <= nwhy; i++) print "  | " why[i]
    if (!nwhy) print "  | (no failed check printed: a crash, a timeout or an exit code; see the output)"
    from = n > 30 ? n - 30 : 0
    printf "=== last %d lines of its output:\n", n - from
    for (i = from + 1; i <= n; i++) print "  | " out[i]
}
/^[0-9]+\/[0-9]+ Testing: / { flush(); name = $3; n = 0; nwhy = 0; failed = 0; inout = 0; next }
/^Output:$/ { inout = 1; getline; next }
/^<end of output>$/ { inout = 0; next }
/^Test Failed\.|^Test Passed\./ { failed = /Failed/; next }
inout {
    out[++n] = $0
    if (nwhy < 40 && ($0 ~ /^\[ FAIL \]|^  [^ ]+:[0-9]+: |Sanitizer|^SUMMARY|ERROR|runtime error|Assertion|Segmentation|HUNG/))
        why[++nwhy] = $0
}
END { flush(); printf "\n(whole outputs: %s)\n", file }
' "$log"

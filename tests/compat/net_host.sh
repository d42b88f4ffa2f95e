#!/bin/sh
# net_host.sh ONIGPU COMPAT_HOST - the upstream-style host program (host.c)
# through the `net` driver: `onigpu serve` serves the test driver on a free
# loopback port, and the program, which knows nothing of onigpu, opens "net"
# with only ONIGPU_NET set. Exit: the program's (1 also when the server did
# not start or did not end after the one session).
out=$(mktemp) || exit 1
trap 'rm -f "$out"' EXIT
"$1" serve --driver test --listen 127.0.0.1:0 --sessions 1 >"$out" &
pid=$!
addr=
for _ in $(seq 100); do
    addr=$(sed -n 's/^onigpu serve: .* on //p' "$out")
    [ -n "$addr" ] && break
    sleep 0.1
done
if [ -z "$addr" ]; then
    echo "net_host: the server did not start" >&2
    kill "$pid" 2>/dev/null
    exit 1
fi
ONIGPU_NET=$addr "$2" net 20000
rc=$?
# the session ended with the program: the server exits by itself (--sessions 1)
for _ in $(seq 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
if kill -0 "$pid" 2>/dev/null; then
    echo "net_host: the server did not end after the session" >&2
    kill "$pid"
    rc=1
fi
wait "$pid" 2>/dev/null
cat "$out" >&2
exit $rc

#!/usr/bin/env bash
# bench-latency-ab.sh - `onigpu bench latency` of two builds, interleaved:
# what a change of the loop's code (not of a knob `bench latency` varies
# itself) does to the closed loop's latency. Each round runs the bench once
# per build (--repeat 1), the builds' order alternating from round to round,
# so that a shared machine's load touches both alike.
#
#   tools/bench-latency-ab.sh --old DIR [--old-label NAME] [--build DIR] [--new-label NAME]
#                             [--rounds N] [--out DIR] [-- BENCH-LATENCY-ARGS...]
#   tools/bench-latency-ab.sh --summary PREFIX    the table of a set written before
#
# DIR: a build folder holding `onigpu` (e.g. the tree before the change).
# Writes OUT/latency/latency-ab-<date>.csv (every row of both builds with
# columns `build`, `round` (this script's) and `load1`, the 1-minute load
# average before the run), -ratios.csv (new / old of the same backend,
# block, variant and round: latency and each stage's p50, p99, p99.9, max)
# and .json (meta: command, commits, machine, load), and prints a table:
# per configuration and build the runs that kept up and the medians over
# them, then the median of the ratios of the rounds where both kept up.
# Defaults: build, 3 rounds, docs/results; the bench's own defaults otherwise.
set -euo pipefail

usage() { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
BUILD=build OLD= OLD_LABEL=old NEW_LABEL=new ROUNDS=3 OUT=docs/results
COMMAND="tools/bench-latency-ab.sh $*"
REPO=$(cd "$(dirname "$0")/.." && pwd)

summary() { # PREFIX: the table of PREFIX.csv and PREFIX-ratios.csv
python3 - "$1" <<'PYTHON'
import csv, math, statistics, sys
base = sys.argv[1]
rows = list(csv.DictReader(open(base + '.csv')))
ratios = list(csv.DictReader(open(base + '-ratios.csv')))
builds = list(dict.fromkeys(r['build'] for r in rows))
ident = lambda r: (r['backend'], r['block_frames'], r['spin_us'], r['reads'], r['spec'])
def num(s):
    try:
        v = float(s)
        return v if math.isfinite(v) else None
    except ValueError:
        return None
def med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None
def us(v):
    return '-' if v is None else f'{v:.0f}' if v >= 100 else f'{v:.1f}'
cols = [('lat_p50_us', 'latency p50'), ('lat_p99_us', 'p99'), ('lat_p999_us', 'p99.9'), ('lat_max_us', 'max'),
        ('after_p50_us', 'after p50'), ('ready_p50_us', 'ready p50'), ('handoff_p50_us', 'handoff p50'),
        ('handoff_p99_us', 'handoff p99'), ('compute_p50_us', 'compute p50'), ('write_p50_us', 'write p50')]
loads = [num(r['load1']) for r in rows]
print(f'load average (1 min) before each run: {min(loads):.1f}-{max(loads):.1f}; medians over the runs that kept up, us')
print('| backend | block | build | kept up | ' + ' | '.join(c[1] for c in cols) + ' |')
print('|' + '---|' * (4 + len(cols)))
for k in dict.fromkeys(ident(r) for r in rows):
    for b in builds:
        sel = [r for r in rows if r['build'] == b and ident(r) == k]
        ok = [r for r in sel if num(r['keeping_up']) == 1]
        print(f'| {k[0]} | {k[1]} | {b} | {len(ok)}/{len(sel)} | ' +
              ' | '.join(us(med([num(r[c]) for r in ok])) for c, _ in cols) + ' |')
    both = [x for x in ratios if ident(x) == k and num(x['keeping_up_new']) == 1 and num(x['keeping_up_old']) == 1]
    m = [med([num(x[c + '_ratio']) for x in both]) for c, _ in cols]
    print(f'| {k[0]} | {k[1]} | {builds[-1]}/{builds[0]} | {len(both)} | ' +
          ' | '.join('-' if v is None else f'{v:.2f}' for v in m) + ' |')
PYTHON
}

if [[ ${1-} == --summary ]]; then
    [[ $# -eq 2 && -f $2.csv && -f $2-ratios.csv ]] || { echo "bench-latency-ab: --summary PREFIX (PREFIX.csv and PREFIX-ratios.csv)" >&2; exit 2; }
    summary "$2"
    exit 0
fi
while [[ $# -gt 0 ]]; do
    case $1 in
    --build) BUILD=$2; shift 2 ;;
    --old) OLD=$2; shift 2 ;;
    --old-label) OLD_LABEL=$2; shift 2 ;;
    --new-label) NEW_LABEL=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --) shift; break ;;
    *) usage ;;
    esac
done
[[ -n $OLD ]] || { echo "bench-latency-ab: --old DIR is required" >&2; exit 2; }
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "bench-latency-ab: --rounds must be a positive integer" >&2; exit 2; }
for d in "$BUILD" "$OLD"; do
    [[ -x $d/onigpu ]] || { echo "bench-latency-ab: no onigpu in $d" >&2; exit 2; }
done
case " $* " in *" --repeat "*|*" --out "*)
    echo "bench-latency-ab: --repeat and --out are this script's (--rounds, --out)" >&2; exit 2 ;;
esac
abs() { [[ $1 == /* ]] && echo "$1" || echo "$REPO/$1"; }
BUILD=$(abs "$BUILD") OLD=$(abs "$OLD") OUT=$(abs "$OUT")
TMP=$(mktemp -d /tmp/bench-latency-ab-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
STAMP=$(date -u +%Y%m%d-%H%M%S)
LOAD0=$(cat /proc/loadavg)
for ((r = 0; r < ROUNDS; r++)); do
    if ((r % 2)); then order="new old"; else order="old new"; fi
    for b in $order; do
        if [[ $b == old ]]; then bin=$OLD/onigpu; else bin=$BUILD/onigpu; fi
        cut -d' ' -f1 /proc/loadavg > "$TMP/load-$b-$r"
        echo "bench-latency-ab: round $r, $b ($bin)" >&2
        "$bin" bench latency "$@" --repeat 1 --out "$TMP/$b-$r" >&2
    done
done
mkdir -p "$OUT/latency"
python3 - "$TMP" "$OUT/latency/latency-ab-$STAMP" "$ROUNDS" "$OLD_LABEL" "$NEW_LABEL" "$LOAD0" \
    "$(cat /proc/loadavg)" "$REPO" "$OLD" "$BUILD" "$COMMAND" <<'PYTHON'
import csv, glob, json, math, os, platform, subprocess, sys, time

tmp, base, rounds, old_label, new_label, load0, load1, repo, old_dir, new_dir, command = sys.argv[1:]
rounds = int(rounds)
label = {'old': old_label, 'new': new_label}
rows, header = [], None
for r in range(rounds):
    for b in ('old', 'new'):
        (path,) = [p for p in glob.glob(f'{tmp}/{b}-{r}/latency/latency-*.csv')
                   if not p.endswith('-ratios.csv')]
        load = open(f'{tmp}/load-{b}-{r}').read().strip()
        with open(path) as f:
            rd = csv.DictReader(f)
            if header is None:
                header = [c for c in rd.fieldnames if c != 'round']
            for row in rd:
                row['round'], row['build'], row['load1'] = str(r), label[b], load
                rows.append(row)
cols = ['build', 'round', 'load1'] + header
with open(base + '.csv', 'w', newline='') as f:
    w = csv.DictWriter(f, cols, extrasaction='ignore')
    w.writeheader()
    w.writerows(rows)

key = lambda row: (row['backend'], row['block_frames'], row['spin_us'], row['reads'], row['spec'], row['round'])
old = {key(x): x for x in rows if x['build'] == old_label}
stats = [c for c in header if c.endswith('_us') and ('_p50' in c or '_p99' in c or '_max' in c)
         and not c.startswith(('block_wait', 'link_', 'clock_', 'echo_'))]
def num(s):
    try:
        v = float(s)
        return v if math.isfinite(v) else None
    except ValueError:
        return None
with open(base + '-ratios.csv', 'w', newline='') as f:
    w = csv.writer(f)
    w.writerow(['backend', 'block_frames', 'spin_us', 'reads', 'spec', 'round', 'keeping_up_new', 'keeping_up_old']
               + [c + '_ratio' for c in stats])
    for x in rows:
        if x['build'] != new_label or key(x) not in old:
            continue
        o = old[key(x)]
        out = list(key(x)) + [x['keeping_up'], o['keeping_up']]
        for c in stats:
            a, b = num(x[c]), num(o[c])
            out.append(f'{a / b:.3f}' if a is not None and b else '')
        w.writerow(out)

def git(d, *a):
    try:
        return subprocess.run(['git', '-C', d, *a], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return '-'
def cpu_model():
    try:
        for line in open('/proc/cpuinfo'):
            if line.startswith('model name'):
                return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or '-'
meta = {'hostname': platform.node(), 'cpu': cpu_model(), 'cores': os.cpu_count(), 'kernel': ' '.join(platform.uname()[2:4]),
        'loadavg_start': load0, 'loadavg_end': load1,
        'command': command,
        'date': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()),
        'git_commit': git(repo, 'rev-parse', 'HEAD'), 'git_dirty': 'yes' if git(repo, 'status', '--porcelain', '-uno') else 'no',
        'old': f'{old_label}: {old_dir}', 'new': f'{new_label}: {new_dir}'}
json.dump({'meta': meta}, open(base + '.json', 'w'), indent=1)
print(base + '.csv')
PYTHON
summary "$OUT/latency/latency-ab-$STAMP"

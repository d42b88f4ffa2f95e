#!/usr/bin/env bash
# results-index.sh - writes docs/results/README.md, the index of the committed
# result sets: per set its date, machine, commit, command and the pages that
# cite it.
#
#   tools/results-index.sh            write docs/results/README.md
#   tools/results-index.sh --check    exit 1 if README.md is not current
#   tools/results-index.sh --uncited  list the sets no page cites (exit 0)
#   tools/results-index.sh --dangling list citations that name no set (exit 0)
#
# A set is the files sharing a <name>-<stamp> prefix, the stamp being
# YYYYMMDD-HHMMSS (or -HHMM); where a name carries a date alone, the set is
# the files sharing the name up to its extension (mutation-net-20261125.md
# and .tsv), or up to a later full stamp in it. A folder whose name carries a stamp is one set. Sets live in
# docs/results/<bench>/, <bench> being the set's name up to its first '-'.
# The files are those git tracks (all files where the tree is not a git
# checkout). Date, machine, commit and command come from the set's JSON
# "meta" where it has one, else from the file name and the file's first
# lines, else "-". A page cites a set when it names one of its files, its
# prefix, or a pattern matching them (`run-<backend>-20261122-141[89]*`,
# `frames{,-upstream}-...`, `-20261205-202224`); the citing pages are
# docs/*.md, README.md, DEVELOPERS.md and the logs and reports in
# docs/results (docs/results/*/log.md, mutation/*.md), a report not citing
# its own set.
set -euo pipefail

usage() { sed -n '2,/^set -e/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2; }
MODE=write
case ${1-} in
'') ;;
--check) MODE=check ;;
--uncited) MODE=uncited ;;
--dangling) MODE=dangling ;;
-h|--help) usage ;;
*) echo "results-index.sh: unknown argument '$1' (allowed: --check, --uncited, --dangling)" >&2; exit 2 ;;
esac
[[ $# -le 1 ]] || { echo "results-index.sh: one argument at most, got $#" >&2; exit 2; }

REPO=$(cd "$(dirname "$0")/.." && pwd)
exec python3 - "$REPO" "$MODE" <<'PYTHON'
import json, os, re, subprocess, sys

repo, mode = sys.argv[1], sys.argv[2]
RES = 'docs/results'
INDEX = RES + '/README.md'
STAMP = re.compile(r'^(.*?-\d{8})(-\d{6}|-\d{4})?(?=[-._/]|$)')


def tracked():
    """Paths under docs/results, relative to the repository: git's list, else a walk."""
    try:
        out = subprocess.run(['git', '-C', repo, 'ls-files', '-z', '--', RES],
                             capture_output=True, check=True).stdout.decode()
        paths = [p for p in out.split('\0') if p]
        if paths:
            return [p for p in paths if os.path.exists(os.path.join(repo, p))]
    except (OSError, subprocess.CalledProcessError):
        pass
    paths = []
    for d, _, files in os.walk(os.path.join(repo, RES)):
        paths += [os.path.relpath(os.path.join(d, f), repo) for f in files]
    return paths


def set_id(base):
    """The set a file or folder name belongs to, or None for an undated name."""
    m = STAMP.match(base)
    if not m:
        return None
    if m.group(2):
        return m.group(1) + m.group(2)
    inner = re.match(r'^(.*?-\d{8}-\d{6})(?=[-._]|$)', base)  # run-DATE-h100-cpu-run-DATE-TIME-...
    if inner:
        return inner.group(1)
    return re.sub(r'\.[A-Za-z0-9]+$', '', base)


def collect():
    """{set id: {'dir': folder, 'files': [paths]}} for every dated file or folder."""
    sets = {}
    for p in sorted(tracked()):
        rel = p[len(RES) + 1:].split('/')
        # a dated folder (run-cpu-vm-20261122/) is one set; else the file names it
        base = next((c for c in rel[:-1] if set_id(c)), rel[-1])
        sid = set_id(base)
        if sid is None:
            continue
        s = sets.setdefault(sid, {'files': [], 'names': set()})
        s['files'].append(p)
        s['names'].add(base)
        s['names'].add(rel[-1])
    return sets


def pages():
    """The pages whose citations count: docs/*.md, README.md, DEVELOPERS.md, the logs and
    reports in docs/results (a report does not cite its own set)."""
    out = ['README.md', 'DEVELOPERS.md']
    out += sorted('docs/' + f for f in os.listdir(os.path.join(repo, 'docs')) if f.endswith('.md'))
    for d, _, files in sorted(os.walk(os.path.join(repo, RES))):
        out += sorted(os.path.relpath(os.path.join(d, f), repo)
                      for f in files if f.endswith('.md') and f != 'README.md')
    return [p for p in out if os.path.isfile(os.path.join(repo, p))]


PATHTOKEN = re.compile(r'docs/results/[\w.*<>{},\[\]/+-]+')
TOKEN = re.compile(r"[\w.*<>{},\[\]/+-]*(?<!\d)20\d\d[01]\d[0-3]\d(?!\d)[\w.*<>{},\[\]/+-]*")


def pattern(tok, backticked=False):
    """A regex for one citation, or None if it cannot name a result file."""
    path = tok.startswith('docs/results/')
    tok = tok.rstrip('/,;:)').lstrip('(')
    if tok.endswith('.') and not tok.endswith('*.'):
        tok = tok.rstrip('.')
    # the last component that names a file: `x-*.csv/json` names x-*.csv
    parts = [c for c in tok.split('/') if re.search(r'\d{8}|\*', c)]
    tok = parts[-1] if parts else tok.rsplit('/', 1)[-1]
    glob = path or backticked
    if not re.search(r'\d{8}', tok) and not (glob and set_id(tok.replace('*', '20000101'))):
        return None
    rx, i = '', 0
    while i < len(tok):
        c = tok[i]
        if c == '*':
            rx += r'[^/\s]*'
        elif c == '<' and '>' in tok[i:]:
            j = tok.index('>', i)
            rx += r'[^/\s]*?'
            i = j
        elif c == '{' and '}' in tok[i:]:
            j = tok.index('}', i)
            rx += '(?:' + '|'.join(re.escape(a) for a in tok[i + 1:j].split(',')) + ')'
            i = j
        elif c == '[' and ']' in tok[i:]:
            j = tok.index(']', i)
            rx += '[' + re.escape(tok[i + 1:j]) + ']'
            i = j
        else:
            rx += re.escape(c)
        i += 1
    if tok.startswith('-'):
        rx = r'[^/\s]*' + rx
    return re.compile(rx + r'(?=[-._/]|$)')


GLOB = re.compile(r'`([a-z][\w.-]*-\*[^`\s]*)`')
SHORT = re.compile(r'(?<![\w.-])-\d{6}(?!\d)[\w.*{},-]*')
RANGE = re.compile(r'`([^`\s]+)` to `([^`\s]+)`')


def short_pattern(tok):
    """`-102052`, `-200415-fit.csv`: a set named by its time alone, the name being the context's."""
    return pattern('-20000000' + tok.rstrip('.,;:)')).pattern.replace('20000000', r'\d{8}', 1)


def matches(rx, sets):
    return [sid for sid, s in sets.items() if any(rx.match(n) for n in s['names'])]


def stem_of(sid):
    """A set id's name and stamp: ('transfer-unlimited', '20261124-064404')."""
    m = re.match(r'^(.*?)-(\d{8}(?:-\d{4,6})?)', sid)
    return m.groups() if m else (sid, '')


def citations(sets):
    """{set id: [pages citing it]}, and the citations that match no set or several."""
    cited, dangling = {}, []

    def cite(page, sids):
        for sid in sids:
            if page in sets[sid]['files']:
                continue
            if page not in cited.setdefault(sid, []):
                cited[sid].append(page)

    for page in pages():
        with open(os.path.join(repo, page), encoding='utf-8') as f:
            text = f.read()
        for tok in sorted(set(TOKEN.findall(text)) | set(PATHTOKEN.findall(text))):
            rx = pattern(tok)
            if rx is None:
                continue
            hit = matches(rx, sets)
            cite(page, hit)
            if not hit:
                dangling.append((page, tok))
        for tok in sorted(set(GLOB.findall(text))):
            cite(page, matches(pattern(tok, True), sets))
        named = {stem_of(sid)[0] for sid in cited if page in cited[sid]}
        for tok in sorted(set(SHORT.findall(text))):
            hit = matches(re.compile(short_pattern(tok)), sets)
            if len(hit) > 1:  # the context's name: one the page cites in full
                hit = [sid for sid in hit if stem_of(sid)[0] in named] or hit
            cite(page, hit)
            if len(hit) != 1:
                dangling.append((page, tok + ' (%d sets)' % len(hit)))
        # `transfer-unlimited-20261124-064404` to `-071236`: every set of that name between
        for a, b in RANGE.findall(text):
            ra = pattern(a) if TOKEN.fullmatch(a) else re.compile(short_pattern(a))
            rb = pattern(b) if TOKEN.fullmatch(b) else re.compile(short_pattern(b))
            ends = [stem_of(x) for x in matches(ra, sets) + matches(rb, sets)]
            if not ends:
                continue
            names = {n for n, _ in ends}
            lo, hi = min(st for _, st in ends), max(st for _, st in ends)
            cite(page, [sid for sid in sets
                        if stem_of(sid)[0] in names and lo <= stem_of(sid)[1] <= hi])
    return cited, dangling


def head(path, n=6):
    try:
        with open(os.path.join(repo, path), encoding='utf-8', errors='replace') as f:
            return [next(f, '') for _ in range(n)]
    except OSError:
        return []


def meta_of(sid, s):
    """The set's JSON meta: the one named like the set first, then any."""
    js = sorted((p for p in s['files'] if p.endswith('.json')),
                key=lambda p: os.path.basename(p) != sid + '.json')
    for p in js:
        try:
            with open(os.path.join(repo, p), encoding='utf-8') as f:
                m = json.load(f).get('meta')
            if isinstance(m, dict):
                return m
        except (OSError, ValueError, AttributeError):
            continue
    return {}


MACHINES = (('h100', 'H100'), ('h200', 'H200'), ('amd', 'AMD EPYC'))


def describe(sid, s):
    """(date, machine, commit, command) of one set."""
    m = meta_of(sid, s)
    lines = [l for p in s['files'] if not p.endswith('.json') for l in head(p)][:24]
    text = ''.join(lines)
    d = re.search(r'-(\d{4})(\d\d)(\d\d)(?:-(\d\d)(\d\d)(\d\d)?)?', sid)
    date = m.get('date') or ('%s-%s-%s' % d.groups()[:3]
                             + (' %s:%s' % d.groups()[3:5] if d.group(4) else ''))
    date = date.replace('T', ' ').rstrip('Z')
    if m.get('gpu'):
        machine = m['gpu']
    elif m.get('cpu'):
        machine = '%s, %s cores' % (m['cpu'], m.get('cores', '?'))
    else:
        words = sid.lower().split('-')
        machine = next((n for k, n in MACHINES if k in words), None)
        if machine is None:
            g = re.search(r'NVIDIA (H100|H200)|\b(H100|H200)\b', text)
            machine = (g.group(1) or g.group(2)) if g else '-'
    commit = m.get('git_commit')
    if not commit:
        names = [w for n in s['names'] for w in re.split(r'[-.]', n)]
        commit = next((w for w in names if re.fullmatch(r'[0-9a-f]{7,40}', w)
                       and re.search(r'[a-f]', w) and re.search(r'\d', w)), None)
    if not commit:
        g = re.search(r'\b(?:tree|commit|onigpu) ([0-9a-f]{7,40})\b', text)
        commit = g.group(1) if g else '-'
    command = m.get('command')
    if not command:
        g = re.search(r'^=== [^\n]*?\(\d\d:\d\d:\d\d\): (.+)$', text, re.M)
        command = g.group(1) if g else '-'
    return date, machine, commit[:7], command


def main_file(sid, s):
    """What the index links to: the set's folder, else its file named like the set."""
    f = sorted(s['files'])[0]
    if os.path.basename(os.path.dirname(f)) == sid:
        return os.path.dirname(f)
    for ext in ('.md', '.json', '.csv'):
        for f2 in s['files']:
            if os.path.basename(f2) == sid + ext:
                return f2
    return f


def cell(v):
    return str(v).replace('|', '\\|').replace('\n', ' ')


def render(sets, cited):
    out = ['# Result sets', '',
           'Generated by `tools/results-index.sh` from the files in this folder and the pages that',
           'cite them; do not edit by hand (`tools/results-index.sh --check` says whether it is current).',
           'One folder per benchmark (a set\'s name up to its first `-`). Date, machine, commit and',
           'command are read from each set\'s JSON `meta`, else from its file names and first lines;',
           '`-` where the set does not say. How the figures came about (commands, trees, what was',
           'tried) is told in the logs: ' + ', '.join(
               '[%s](%s)' % (p[len(RES) + 1:], p[len(RES) + 1:])
               for p in pages() if p.startswith(RES + '/') and p.endswith('/log.md'))
           + '; mutation/ holds the mutation-testing reports.', '']
    folders = {}
    for sid in sorted(sets):
        folders.setdefault(sets[sid]['files'][0][len(RES) + 1:].split('/')[0], []).append(sid)
    for folder in sorted(folders):
        out += ['## %s/' % folder, '',
                '| set | files | date (UTC) | machine | commit | command | cited by |',
                '|---|---|---|---|---|---|---|']
        for sid in folders[folder]:
            s = sets[sid]
            date, machine, commit, command = describe(sid, s)
            first = os.path.relpath(main_file(sid, s), RES)
            by = ', '.join('[%s](%s)' % (p[len(RES) + 1:] if p.startswith(RES + '/') else p,
                                         os.path.relpath(p, RES))
                           for p in sorted(cited.get(sid, [])))
            out.append('| [%s](%s) | %d | %s | %s | %s | %s | %s |' % (
                sid, first, len(s['files']), cell(date), cell(machine), cell(commit),
                cell('`%s`' % command if command != '-' else '-'), by or '-'))
        out.append('')
    return '\n'.join(out)


sets = collect()
cited, dangling = citations(sets)
if mode == 'uncited':
    for sid in sorted(sets):
        if sid not in cited:
            print(sid + '\t' + ' '.join(sorted(sets[sid]['files'])))
elif mode == 'dangling':
    for page, tok in dangling:
        print(page + '\t' + tok)
else:
    text = render(sets, cited)
    path = os.path.join(repo, INDEX)
    if mode == 'check':
        try:
            with open(path, encoding='utf-8') as f:
                old = f.read()
        except OSError:
            old = None
        if old != text:
            sys.stderr.write('results-index.sh: %s is not current; run tools/results-index.sh\n' % INDEX)
            sys.exit(1)
    else:
        with open(path, 'w', encoding='utf-8') as f:
            f.write(text)
PYTHON

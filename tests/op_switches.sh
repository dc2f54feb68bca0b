#!/usr/bin/env bash
# No switch over operators (MC_OP_*) or operator kinds (MC_KIND_*) has a `default:` label: each
# lists every operator, so adding one to ir/ops.def makes the compiler (-Wswitch, part of -Wall,
# an error under -Werror) name every place that must decide what to do with it.
set -u
cd "${MINIC_SRC:-$(dirname "$0")/..}" || exit 2
command -v python3 >/dev/null || { echo "skipped: no python3 to read the sources"; exit 77; }
python3 - "$@" <<'PY'
import re, sys
import glob
# the files on disk (not git's index: a copy of the tree may carry a stale one)
files = sorted(f for d in ['support', 'ir', 'kir', 'frontend', 'passes', 'backends', 'runtime', 'tools']
               for f in glob.glob(d + '/**/*', recursive=True))
def block_end(text, b):
    depth = 0
    for j in range(b, len(text)):
        if text[j] == '{': depth += 1
        elif text[j] == '}':
            depth -= 1
            if depth == 0: return j
    return -1
bad = checked = 0
for path in files:
    if not path.endswith(('.c', '.h')): continue
    text = open(path).read()
    for m in re.finditer(r'\bswitch \(', text):
        b = text.find('{', m.end())
        j = block_end(text, b) if b >= 0 else -1
        if j < 0: continue
        body = text[b + 1:j]
        labels, has_default, depth, k = [], False, 0, 0
        while k < len(body):
            c = body[k]
            if c == '{': depth += 1
            elif c == '}': depth -= 1
            elif depth == 0 and body.startswith('switch (', k):
                q = body.find('{', k)
                k = block_end(body, q) if q >= 0 else len(body)
            elif depth == 0 and not body[k - 1].isalnum():
                lm = re.match(r'case (MC_\w+):', body[k:])
                if lm: labels.append(lm.group(1))
                if body.startswith('default:', k): has_default = True
            k += 1
        if any(l.startswith(('MC_OP_', 'MC_KIND_')) for l in labels):
            checked += 1
            if has_default:
                bad += 1
                print('%s:%d: a switch over operators has default:' % (path, text.count('\n', 0, m.start()) + 1))
print('op_switches: %d switches over operators or kinds, %d with default:' % (checked, bad))
sys.exit(1 if bad or checked < 10 else 0)
PY

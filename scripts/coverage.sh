#!/usr/bin/env bash
# Line and branch coverage of src/ per layer: builds the coverage preset (gcov instrumentation, -O1),
# runs the whole CTest suite on it (the redis-server tests load the instrumented module, which writes
# its counts when the server exits), then prints a Markdown table per layer; docs/testing.md holds the
# last one. Per-file figures: build/coverage/summary.json (gcovr).
# Usage: scripts/coverage.sh          (CTEST_ARGS="-R regex" to run part of the suite)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/shared_dirs.sh
scripts/setup.sh coverage
find build/coverage -name '*.gcda' -delete
ctest --preset coverage -j "$(nproc)" ${CTEST_ARGS:-} ||
  echo "coverage: some tests failed; the table counts what ran" >&2
gcovr --root . --object-directory build/coverage --filter 'src/' --exclude-unreachable-branches --gcov-ignore-parse-errors \
  --exclude-throw-branches --json-summary build/coverage/summary.json --json-summary-pretty >/dev/null
/usr/bin/python3 - build/coverage/summary.json <<'PY'
import collections, json, re, sys
layers = collections.OrderedDict()
for f in json.load(open(sys.argv[1]))["files"]:
    # Headers reached through a layer's include folder (build/<preset>/layers/<layer>/<layer>/...) are src/<layer>/...
    layer = re.sub(r"^build/[^/]+/layers/[^/]+/", "src/", f["filename"]).split("/")[1]
    t = layers.setdefault(layer, [0, 0, 0, 0])
    for i, k in enumerate(("line_covered", "line_total", "branch_covered", "branch_total")):
        t[i] += f[k]
pct = lambda a, b: f"{100.0 * a / b:.1f}%" if b else "-"
print("| layer | lines | line coverage | branches | branch coverage |")
print("|---|---|---|---|---|")
for name, (lc, lt, bc, bt) in sorted(layers.items()):
    print(f"| {name} | {lt:,} | {pct(lc, lt)} | {bt:,} | {pct(bc, bt)} |")
tot = [sum(v[i] for v in layers.values()) for i in range(4)]
print(f"| all | {tot[1]:,} | {pct(tot[0], tot[1])} | {tot[3]:,} | {pct(tot[2], tot[3])} |")
PY

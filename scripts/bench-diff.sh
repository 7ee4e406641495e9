#!/bin/sh
# bench-diff.sh BINARY LABEL [CONTRACT]: the diff of a 100k-file change set (100 dirs x 1000
# one-line text files made by the command); prints wall time, cordon's peak RSS and
# the diff's own time (cmd.end to fs.diff in the log), and the fs.diff line size.
set -e
bin=$1; label=$2; contract=${3:-"version: 1"}
d=${TMPDIR:-/var/tmp}/cordon-bench-diff-$label; rm -rf $d; mkdir -p $d/ws $d/home; cd $d/ws
printf '%s\n' "$contract" > cordon.yaml
/usr/bin/time -f "$label: wall %e s, cordon peak RSS %M KB" env HOME=$d/home $bin run -- perl -e '
for my $d (1..100) { mkdir "d$d"; for my $f (1..1000) { open(my $h, ">", "d$d/f$f.txt"); print $h "line $d $f\n"; } }' 2>&1 | grep -v "logged in"
log=$(ls -d $d/home/.local/state/cordon/runs/*/events.jsonl)
python3 - "$log" "$label" <<'PY'
import json, sys
from datetime import datetime
end = diff = None; size = 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    ts = datetime.fromisoformat(r["ts"][:26].rstrip("Z"))
    if r["type"] == "cmd.end": end = ts
    if r["type"] == "fs.diff": diff = ts; size = len(line); body = r["body"]
print(f"{sys.argv[2]}: diff {(diff-end).total_seconds():.2f} s (cmd.end to fs.diff), fs.diff line {size} bytes, files {body['files']}, itemized {len(body['changes'])}, gap {body.get('gap', {}).get('unlisted', 0)} unlisted")
PY
rm -rf $d

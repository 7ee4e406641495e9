#!/usr/bin/env bash
# Regenerates the committed BPF bindings (monitor_bpf{el,eb}.{go,o}) from bpf/monitor.c
# with Debian's clang 14 and the libbpf headers of libbpf-dev, installing them when
# missing (as root), so that a plain `go build` never needs clang.
#
# Usage: monitor/generate.sh [--check]
#   --check  regenerate, then fail if anything differs from what is committed.
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$PATH:/usr/local/go/bin"

CLANG=clang-14             # Debian 12's clang; another major version emits other bytes
STRIP=llvm-strip-14
LIBBPF=1:1.1.2-0+deb12u1   # the libbpf-dev whose headers are vendored in bpf/include

missing=()
command -v "$CLANG" >/dev/null 2>&1 || missing+=(clang-14)
command -v "$STRIP" >/dev/null 2>&1 || missing+=(llvm-14)
[ -f /usr/include/bpf/bpf_helpers.h ] || missing+=(libbpf-dev)
if ((${#missing[@]})); then
  if [ "$(id -u)" != 0 ]; then
    echo "generate: missing ${missing[*]}; install them (apt-get install ${missing[*]})" >&2
    exit 1
  fi
  echo "generate: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi
have=$(dpkg-query -W -f '${Version}' libbpf-dev 2>/dev/null || echo none)
if [ "$have" != "$LIBBPF" ]; then
  echo "generate: libbpf-dev is $have, the vendored headers come from $LIBBPF; keeping the vendored ones" >&2
else
  for h in bpf_helpers.h bpf_helper_defs.h bpf_core_read.h bpf_tracing.h; do
    cp "/usr/include/bpf/$h" "bpf/include/$h"
  done
fi

BPF2GO_CC=$CLANG BPF2GO_STRIP=$STRIP go generate .

if [ "${1:-}" = --check ]; then
  if ! git diff --exit-code --stat -- . || [ -n "$(git status --porcelain -- .)" ]; then
    echo "generate: the committed BPF bindings are stale; run monitor/generate.sh and commit" >&2
    exit 1
  fi
  echo "generate: BPF bindings are up to date"
fi

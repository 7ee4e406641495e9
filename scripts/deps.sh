#!/usr/bin/env bash
# Installs what cordon's build, tests and demo need on a Debian machine, only when
# missing (chromium looks at the audit HTML report in a test; git, npm and curl are the
# clients whose view of a denial is tested, node and npm also run the MCP TypeScript SDK's
# client; gcc is cgo's compiler for `go test -race`;
# python3 and perl are the interpreters the monitor's and the attacks' tests run in the
# sandbox; make runs the targets a test reads; e2fsprogs makes the file system of a
# served tenant's disk; libcap2-bin's setcap gives the attacks' files a capability). A fresh Debian (debootstrap's minbase)
# has none of them but perl.
# Usage: scripts/deps.sh [test|bench|generate]
set -euo pipefail
want=(bwrap:bubblewrap curl:curl git:git wget:wget openssl:openssl chromium:chromium socat:socat node:nodejs npm:npm
  gcc:gcc python3:python3 perl:perl make:make mke2fs:e2fsprogs setcap:libcap2-bin)
case "${1:-test}" in
  bench) want+=(hyperfine:hyperfine rg:ripgrep) ;;
  generate) want+=(clang:clang llvm-strip:llvm) ;;
esac
missing=()
for pair in "${want[@]}"; do
  cmd=${pair%%:*} pkg=${pair#*:}
  command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
done
if ((${#missing[@]})); then
  if [ "$(id -u)" != 0 ]; then
    echo "deps: missing ${missing[*]}; install them (apt-get install ${missing[*]})" >&2
    exit 1
  fi
  echo "deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  echo "deps: go is at /usr/local/go/bin; add it to PATH" >&2
fi

#!/usr/bin/env bash
# The tests of `make test`, in four processes at once. The integration package's tests
# run one at a time and wait on sandboxes, Pods and container engines far more than
# they compute: in one process they took 22 of CI's 26 minutes, most of them with one
# of the two cores idle. So they run in three processes (the tests on Pods and on the
# engines; the red teams' attacks, about half of the rest; everything else) beside one
# for every other package (two packages at a time, as `go test` does). Each process's
# tests share the machine with the others', as every test must (integration/doc.go).
# Exits non-zero when any lane failed, after all of them have ended.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
flags=(-race -tags k8s -count=1 -timeout 30m)
integration=github.com/cordonhq/cordon/integration
engines='^(TestEscapesOnPods|TestContainer[A-Za-z]*)$'
red='^TestRed'

pkgs=$("$GO" list -tags k8s ./... | grep -vx "$integration") || { echo "test-lanes: go list failed" >&2; exit 1; }
pids=() names=()
lane() {
  local name=$1
  shift
  "$GO" test "${flags[@]}" "$@" &
  pids+=($!) names+=("$name")
}
# shellcheck disable=SC2086 # one package a word
lane packages $pkgs
lane "integration (Pods, engines)" -run "$engines" ./integration/
lane "integration (red teams)" -run "$red" ./integration/
lane "integration (the rest)" -skip "$engines|$red" ./integration/
rc=0
for i in "${!pids[@]}"; do
  if ! wait "${pids[i]}"; then
    echo "make test: the lane '${names[i]}' failed" >&2
    rc=1
  fi
done
exit $rc

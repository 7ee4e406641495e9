#!/usr/bin/env bash
# A demo of cordon's built-in default contract: the workspace is writable, everything
# else is read-only or invisible, there is no network, and the caller's secrets stay out.
set -uo pipefail
cordon=$(realpath "${1:-bin/cordon}")
ws=$(mktemp -d /tmp/cordon-demo.XXXXXX)
trap 'rm -rf "$ws"' EXIT
cd "$ws"
echo 'print("hello")' > main.py
export AWS_SECRET_ACCESS_KEY=demo-secret-from-the-caller

echo "== cordon explain (the built-in default contract, compiled)"
"$cordon" explain
echo
echo "== cordon run: an untrusted step tries its luck"
"$cordon" run -- sh -c '
  try() { desc=$1; shift; if "$@" >/dev/null 2>&1; then echo "  ALLOWED  $desc"; else echo "  denied   $desc"; fi; }
  try "write in the workspace"            sh -c "echo built > out.txt"
  try "write /etc/profile"                sh -c "echo evil >> /etc/profile"
  try "plant a git hook"                  sh -c "mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit"
  try "read /etc/shadow"                  cat /etc/shadow
  try "read the caller ~/.ssh"            ls "$HOME/.ssh"
  try "reach the host loopback directly"  curl -sS --max-time 3 http://127.0.0.1:22/
  try "reach example.com via the proxy"   curl -sSf --max-time 3 http://example.com/
  try "see AWS_SECRET_ACCESS_KEY"         sh -c "test -n \"\$AWS_SECRET_ACCESS_KEY\""
'
echo "   (exit status $?)"
echo
echo "== on the host afterwards"
ls -A "$ws"
echo
echo "== cordon audit show last (the run's tamper-evident log)"
"$cordon" audit show last
"$cordon" audit verify last

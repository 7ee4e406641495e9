#!/usr/bin/env bash
# cordon-action.sh: a pull request's step under the BASE branch's contract.
#
# What the GitHub Action (action.yml) and the GitLab example (deploy/gitlab) run. It
#   1. reads the base branch's contract out of git (never the checkout's copy, never
#      executed) into BASE_FILE beside the pull request's contract;
#   2. compares the two with `cordon diff`; a widening fails the check unless
#      CORDON_ALLOW_WIDENING=true; the diff goes to the job summary;
#   3. runs CORDON_COMMAND under the BASE contract (a pull request cannot widen its
#      own boundary: its cordon.yaml takes effect once merged), even when 2 failed;
#   4. writes the run's HTML audit report to CORDON_REPORT.
# Exit status: the command's when it failed (124 timeout, 125 cordon refused), else 1
# when the contract check failed, else 0.
#
# The checkout is hostile: the pull request wrote every file in it. So nothing from it
# is evaluated or sourced, every expansion is quoted, the contract path must stay inside
# the workspace without a symbolic link on the way, and git reads the base blob with
# no configuration but the repository's own .git/config (written by the checkout, not
# by the pull request): no system or global file (GIT_CONFIG_NOSYSTEM, GIT_CONFIG_GLOBAL),
# hooks pointed at /dev/null, no fsmonitor, and `git cat-file blob`, which unlike
# `git show` applies no textconv or filter driver either way.
#
# Environment (inputs):
#   GITHUB_WORKSPACE       the checkout (required)
#   CORDON_COMMAND         the shell command to run in the sandbox (required; it is the
#                          workflow's, not the pull request's)
#   CORDON_CONTRACT        the contract's path in the repository (default cordon.yaml)
#   CORDON_BASE_REF        the base branch (default GITHUB_BASE_REF; empty on a push:
#                          the commit's own contract, read from git, is used)
#   CORDON_ALLOW_WIDENING  true: a wider contract is reported, not failed
#   CORDON_BIN             the cordon binary (default: cordon on PATH)
#   CORDON_REPORT          where the HTML report goes (default RUNNER_TEMP/cordon-report.html)
#   CORDON_USE_SUDO        auto (default: sudo for the run when not root) | false
#   GITHUB_STEP_SUMMARY, GITHUB_OUTPUT, RUNNER_TEMP   as GitHub sets them (optional)
# Outputs (GITHUB_OUTPUT): wider=true|false, exit-code=N, report=PATH.
set -euo pipefail

die() { printf 'cordon-action: %s\n' "$*" >&2; exit 2; }
note() { printf 'cordon-action: %s\n' "$*" >&2; }
output() { if [ -n "${GITHUB_OUTPUT:-}" ]; then printf '%s=%s\n' "$1" "$2" >>"$GITHUB_OUTPUT"; fi; }
summary() { if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then printf '%s\n' "$@" >>"$GITHUB_STEP_SUMMARY"; fi; }
html_escape() { sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g'; }

ws=${GITHUB_WORKSPACE:?GITHUB_WORKSPACE: the checkout}
command=${CORDON_COMMAND:?CORDON_COMMAND: the command to run}
contract=${CORDON_CONTRACT:-cordon.yaml}
base_ref=${CORDON_BASE_REF-${GITHUB_BASE_REF:-}}
tmp=${RUNNER_TEMP:-${TMPDIR:-/tmp}}
report=${CORDON_REPORT:-$tmp/cordon-report.html}
cordon=${CORDON_BIN:-$(command -v cordon || true)}
[ -n "$cordon" ] && [ -x "$cordon" ] || die "cordon is not installed (set CORDON_BIN)"

ws=$(cd -- "$ws" && pwd -P) || die "GITHUB_WORKSPACE: $GITHUB_WORKSPACE is not a directory"

# The contract's path: relative, no "..", no symbolic link in any component (the pull
# request could point cordon.yaml or its directory at a host file the diff would print).
case "/$contract/" in
  //* | *//* | */../* | */./*) die "CORDON_CONTRACT: $contract must be a plain relative path" ;;
esac
p=$ws
IFS=/ read -r -a parts <<<"$contract"
for part in "${parts[@]}"; do
  p=$p/$part
  [ ! -L "$p" ] || die "$contract: $p is a symbolic link"
done
pr_file=$ws/$contract
dir=$(dirname -- "$pr_file")
[ -d "$dir" ] || die "$contract: its directory does not exist in the checkout"
[ ! -e "$pr_file" ] || [ -f "$pr_file" ] || die "$contract is not a regular file"
base_file=$dir/.cordon-base.yaml

# git for the base read: no configuration but the repository's own.
git_() {
  env -u GIT_DIR -u GIT_WORK_TREE -u GIT_INDEX_FILE -u GIT_OBJECT_DIRECTORY \
    -u GIT_ALTERNATE_OBJECT_DIRECTORIES -u GIT_CONFIG -u GIT_CONFIG_PARAMETERS \
    -u GIT_CONFIG_COUNT GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null \
    GIT_TERMINAL_PROMPT=0 GIT_OPTIONAL_LOCKS=0 \
    git -C "$ws" -c safe.directory="$ws" -c core.hooksPath=/dev/null \
    -c core.fsmonitor=false -c protocol.file.allow=never "$@"
}

# base_commit prints the commit the base contract is read from.
base_commit() {
  if [ -z "$base_ref" ]; then
    note "no base branch (not a pull request): the contract of HEAD itself, read from git"
    git_ rev-parse --verify --quiet 'HEAD^{commit}' || die "HEAD is not a commit"
    return
  fi
  git_ check-ref-format --branch "$base_ref" >/dev/null 2>&1 || die "CORDON_BASE_REF: $base_ref is not a branch name"
  local remote="refs/remotes/origin/$base_ref"
  if ! git_ rev-parse --verify --quiet "$remote^{commit}" >/dev/null &&
    git_ remote get-url origin >/dev/null 2>&1; then
    git_ fetch --quiet --no-tags --depth=1 origin "+refs/heads/$base_ref:$remote" >&2 ||
      note "could not fetch $base_ref from origin"
  fi
  for ref in "$remote" "refs/heads/$base_ref"; do
    if git_ rev-parse --verify --quiet "$ref^{commit}"; then return; fi
  done
  die "base branch $base_ref: no such branch here or on origin"
}

base=$(base_commit)
rm -rf -- "$base_file" # the pull request may have committed a file or link by that name
if git_ cat-file -e "$base:$contract" 2>/dev/null; then
  [ "$(git_ cat-file -t "$base:$contract")" = blob ] || die "$contract on the base branch is not a file"
  (set -o noclobber; git_ cat-file blob "$base:$contract" >"$base_file")
else
  note "$contract does not exist on the base branch: the built-in default contract"
  (set -o noclobber; printf 'version: 1\n' >"$base_file")
fi
new_file=$pr_file
if [ ! -e "$pr_file" ]; then
  new_file=$dir/.cordon-pr.yaml
  rm -rf -- "$new_file"
  (set -o noclobber; printf 'version: 1\n' >"$new_file")
fi

# 2. The contract check.
check_failed=0
set +e
diff_out=$(cd -- "$dir" && "$cordon" diff --workspace "$dir" "$base_file" "$new_file" 2>&1)
diff_status=$?
set -e
printf '%s\n' "$diff_out"
summary "## cordon: the pull request's contract against $(printf '%s' "${base_ref:-HEAD}" | html_escape)'s" "" \
  "<pre>" "$(printf '%s\n' "$diff_out" | html_escape)" "</pre>" ""
case $diff_status in
  0) output wider false
     summary "$contract is the same as the base branch's, or narrower." ;;
  1) output wider true
     if [ "${CORDON_ALLOW_WIDENING:-false}" = true ]; then
       summary "**$contract widens the contract**; allowed by allow-widening."
       printf '::notice::%s widens the contract; allowed by allow-widening\n' "$contract"
     else
       check_failed=1
       summary "**$contract widens the contract**: a maintainer must review and approve it."
       printf '::error::%s widens the contract (above); it needs a maintainer'"'"'s approval\n' "$contract"
     fi ;;
  *) check_failed=1
     summary "**cordon diff could not compare the contracts** (exit $diff_status)."
     printf '::error::cordon diff could not compare the contracts (above)\n' ;;
esac

# 3. The command, under the base branch's contract, with an audit root of its own.
audit=$(mktemp -d "$tmp/cordon-audit.XXXXXX")
runas=()
if [ "$(id -u)" != 0 ] && [ "${CORDON_USE_SUDO:-auto}" != false ] && command -v sudo >/dev/null; then
  runas=(sudo --)
fi
set +e
(cd -- "$ws" && "${runas[@]}" "$cordon" run -c "$base_file" --audit-dir "$audit" -- sh -c "$command")
run_status=$?
set -e
output exit-code "$run_status"
summary "" "Ran under the base branch's contract: exit $run_status."

# 4. The report, also when the command failed.
rm -rf -- "$report" # the checkout may hold a file, link or directory by that name
if (cd -- "$ws" && "${runas[@]}" "$cordon" audit report --audit-dir "$audit" --all -o "$report" last); then
  # Under sudo the report is root's, 0600: hand it to the job's user for the upload.
  if [ "${#runas[@]}" -gt 0 ]; then sudo -- chown "$(id -u):$(id -g)" "$report"; fi
  output report "$report"
else
  note "no audit report (cordon refused before the run started?)"
fi
rm -f -- "$base_file" "$dir/.cordon-pr.yaml"

if [ "$run_status" != 0 ]; then exit "$run_status"; fi
exit "$check_failed"

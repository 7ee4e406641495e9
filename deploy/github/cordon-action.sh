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
#
# The job log is the pull request's too: GitHub reads every line of it starting with
# "::" as a workflow command (::error::, ::add-mask::, ::stop-commands::). So all that
# the pull request controls and that reaches the log (cordon diff's output, the
# command's stdout and stderr, cordon's messages, which quote the contracts) goes to
# stdout between ::stop-commands::TOKEN and ::TOKEN::, TOKEN fresh from /dev/urandom for
# each region; the script's own messages are one line each, newlines escaped.
#
# The base branch is not the pull request's to choose: its author picks the branch it
# targets (GITHUB_BASE_REF), and a branch with a wider contract, or none, would be the
# contract in force. So the base is the repository's default branch, and a pull
# request's base other than that is accepted only when CORDON_PROTECTED_BASES lists it;
# any other base is refused (exit 2).
#
# Environment (inputs):
#   GITHUB_WORKSPACE       the checkout (required)
#   CORDON_COMMAND         the shell command to run in the sandbox (required; it is the
#                          workflow's, not the pull request's)
#   CORDON_CONTRACT        the contract's path in the repository (default cordon.yaml)
#   CORDON_BASE_REF        the pull request's base branch (default GITHUB_BASE_REF; empty
#                          on a push: the commit's own contract, read from git, is used)
#   CORDON_DEFAULT_BRANCH  the repository's default branch (the action passes
#                          github.event.repository.default_branch; default: origin/HEAD)
#   CORDON_PROTECTED_BASES the branches (shell patterns, space-separated: "main
#                          release/*") a pull request's base may be besides the default
#                          branch (default: none)
#   CORDON_ALLOW_WIDENING  true: a wider contract is reported, not failed
#   CORDON_BIN             the cordon binary (default: cordon on PATH)
#   CORDON_REPORT          where the HTML report goes (default RUNNER_TEMP/cordon-report.html)
#   CORDON_USE_SUDO        auto (default: sudo for the run when not root) | false
#   GITHUB_STEP_SUMMARY, GITHUB_OUTPUT, RUNNER_TEMP   as GitHub sets them (optional)
# Outputs (GITHUB_OUTPUT): wider=true|false, exit-code=N, report=PATH.
set -euo pipefail

# note and die print one line: a newline in what they quote (a path, a branch name)
# cannot start a workflow command.
oneline() { local m=$*; m=${m//$'\r'/\\r}; printf '%s' "${m//$'\n'/\\n}"; }
die() { printf 'cordon-action: %s\n' "$(oneline "$*")" >&2; exit 2; }
note() { printf 'cordon-action: %s\n' "$(oneline "$*")" >&2; }
# untrusted CMD... runs CMD with its stdout and stderr on stdout between
# ::stop-commands::TOKEN and ::TOKEN::, where GitHub reads no workflow command, and
# returns its status. TOKEN is new for each region and random: the pull request cannot
# end a region it cannot predict. The newline before ::TOKEN:: ends a last line without
# one, which would otherwise swallow the token. One stream, so that stdout and stderr,
# which the runner reads apart, cannot reorder a region's start and end.
untrusted() {
  local token status=0
  token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n') || die "no random token from /dev/urandom"
  [ "${#token}" = 32 ] || die "no random token from /dev/urandom"
  printf '::stop-commands::%s\n' "$token"
  "$@" 2>&1 || status=$?
  printf '\n::%s::\n' "$token"
  return "$status"
}
output() { if [ -n "${GITHUB_OUTPUT:-}" ]; then printf '%s=%s\n' "$1" "$2" >>"$GITHUB_OUTPUT"; fi; }
summary() { if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then printf '%s\n' "$@" >>"$GITHUB_STEP_SUMMARY"; fi; }
html_escape() { sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g'; }

ws=${GITHUB_WORKSPACE:?GITHUB_WORKSPACE: the checkout}
command=${CORDON_COMMAND:?CORDON_COMMAND: the command to run}
contract=${CORDON_CONTRACT:-cordon.yaml}
pr_base=${CORDON_BASE_REF-${GITHUB_BASE_REF:-}}
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

# choose_base prints the branch whose contract is in force: empty on a push (no pull
# request), the default branch, or the pull request's base when CORDON_PROTECTED_BASES
# lists it. Any other base is refused: the pull request's author picked it.
choose_base() {
  [ -n "$pr_base" ] || return 0
  git_ check-ref-format --branch "$pr_base" >/dev/null 2>&1 || die "CORDON_BASE_REF: $pr_base is not a branch name"
  local default=${CORDON_DEFAULT_BRANCH:-} pattern patterns
  if [ -z "$default" ]; then
    default=$(git_ symbolic-ref --quiet --short refs/remotes/origin/HEAD 2>/dev/null) || true
    default=${default#origin/}
  fi
  [ -n "$default" ] || die "CORDON_DEFAULT_BRANCH: the repository's default branch is not known (no origin/HEAD either)"
  git_ check-ref-format --branch "$default" >/dev/null 2>&1 || die "CORDON_DEFAULT_BRANCH: $default is not a branch name"
  if [ "$pr_base" = "$default" ]; then printf '%s\n' "$default"; return; fi
  read -r -a patterns <<<"${CORDON_PROTECTED_BASES:-}"
  for pattern in "${patterns[@]}"; do
    # shellcheck disable=SC2053 # $pattern is a pattern
    if [[ $pr_base == $pattern ]]; then printf '%s\n' "$pr_base"; return; fi
  done
  die "the pull request's base branch $pr_base is neither the default branch ($default) nor in protected-bases" \
    "(${CORDON_PROTECTED_BASES:-empty}): its contract is not a reviewed one, so nothing runs." \
    "Retarget the pull request, or list the branch in protected-bases (CORDON_PROTECTED_BASES)"
}

# base_commit prints the commit the base contract is read from.
base_commit() {
  if [ -z "$base_ref" ]; then
    note "no base branch (not a pull request): the contract of HEAD itself, read from git"
    git_ rev-parse --verify --quiet 'HEAD^{commit}' || die "HEAD is not a commit"
    return
  fi
  local remote="refs/remotes/origin/$base_ref"
  if ! git_ rev-parse --verify --quiet "$remote^{commit}" >/dev/null &&
    git_ remote get-url origin >/dev/null 2>&1; then
    local out # git's messages quote the remote's, on one line through note
    out=$(git_ fetch --quiet --no-tags --depth=1 origin "+refs/heads/$base_ref:$remote" 2>&1) ||
      note "could not fetch $base_ref from origin: $out"
  fi
  for ref in "$remote" "refs/heads/$base_ref"; do
    if git_ rev-parse --verify --quiet "$ref^{commit}"; then return; fi
  done
  die "base branch $base_ref: no such branch here or on origin"
}

base_ref=$(choose_base)
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
untrusted printf '%s\n' "$diff_out"
summary "## cordon: the pull request's contract against $(printf '%s' "${base_ref:-HEAD}" | html_escape)'s" "" \
  "<pre>" "$(printf '%s\n' "$diff_out" | html_escape)" "</pre>" ""
case $diff_status in
  0) output wider false
     summary "$contract is the same as the base branch's, or narrower." ;;
  1) output wider true
     if [ "${CORDON_ALLOW_WIDENING:-false}" = true ]; then
       summary "**$contract widens the contract**; allowed by allow-widening."
       printf '::notice::%s widens the contract; allowed by allow-widening\n' "$(oneline "$contract")"
     else
       check_failed=1
       summary "**$contract widens the contract**: a maintainer must review and approve it."
       printf '::error::%s widens the contract (above); it needs a maintainer'"'"'s approval\n' "$(oneline "$contract")"
     fi ;;
  *) check_failed=1
     summary "**cordon diff could not compare the contracts** (exit $diff_status)."
     printf '::error::cordon diff could not compare the contracts (above)\n' ;;
esac

run_in_ws() { (cd -- "$ws" && "$@"); }

# 3. The command, under the base branch's contract, with an audit root of its own.
audit=$(mktemp -d "$tmp/cordon-audit.XXXXXX")
runas=()
if [ "$(id -u)" != 0 ] && [ "${CORDON_USE_SUDO:-auto}" != false ] && command -v sudo >/dev/null; then
  runas=(sudo --)
fi
run_status=0
untrusted run_in_ws "${runas[@]}" "$cordon" run -c "$base_file" --audit-dir "$audit" -- sh -c "$command" || run_status=$?
output exit-code "$run_status"
summary "" "Ran under the base branch's contract: exit $run_status."

# 4. The report, also when the command failed.
rm -rf -- "$report" # the checkout may hold a file, link or directory by that name
if untrusted run_in_ws "${runas[@]}" "$cordon" audit report --audit-dir "$audit" --all -o "$report" last; then
  # Under sudo the report is root's, 0600: hand it to the job's user for the upload.
  if [ "${#runas[@]}" -gt 0 ]; then sudo -- chown "$(id -u):$(id -g)" "$report"; fi
  output report "$report"
else
  note "no audit report (cordon refused before the run started?)"
fi
rm -f -- "$base_file" "$dir/.cordon-pr.yaml"

if [ "$run_status" != 0 ]; then exit "$run_status"; fi
exit "$check_failed"

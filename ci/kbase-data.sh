#!/usr/bin/env bash
# kbase's baselines in a git branch of your repository (default `kbase-data`): the CI templates' store option A.
# Copy this file into your repository next to the template (ci/kbase-data.sh); docs/ci.md explains it.
#
#   kbase-data.sh pull   fetch the data branch into $KBASE_DATA_DIR (a worktree) and `kbase import` it into the
#                        store (KBASE_DB: a fresh SQLite file per job); no branch yet: an empty folder
#   kbase-data.sh push   [prune] -> `kbase export` -> commit -> push; a push refused because another runner
#                        pushed first (non-fast-forward) is retried: fetch, take theirs, re-import, re-export.
#                        Baselines the data branch never had are refused (exit 2, nothing pushed) unless
#                        KBASE_DATA_NEW (or `push --new=...`) allows them: `head` (a CI job: the baselines of
#                        the checked-out commit, what its snapshot stored), `all`; default `none` (an acceptance
#                        or a prune from a scratch store: docs/ci.md), so a local store's experiments never
#                        become the team's history by accident.
#
# Every baseline is a file named by the hash of its bytes (docs/export-format.md), so two runners never write
# the same file and a retry merges without conflicts: nothing is lost.
#
# Environment: KBASE_DATA_BRANCH (kbase-data), KBASE_DATA_DIR (.kbase-data), KBASE_DATA_REMOTE (origin),
# KBASE_DATA_RETRIES (8), KBASE_DATA_NEW (none: see push), KBASE_PRUNE (arguments of `kbase prune` run before each export, e.g.
# "--keep-branch main --older-than 14d"; empty: no pruning), KBASE_DATA_MESSAGE (the commit message).
set -euo pipefail

branch=${KBASE_DATA_BRANCH:-kbase-data}
dir=${KBASE_DATA_DIR:-.kbase-data}
remote=${KBASE_DATA_REMOTE:-origin}
retries=${KBASE_DATA_RETRIES:-8}
new_ok=${KBASE_DATA_NEW:-none}
files="$dir/baselines"
git_id=(-c "user.name=${KBASE_DATA_AUTHOR_NAME:-kbase CI}" -c "user.email=${KBASE_DATA_AUTHOR_EMAIL:-kbase-ci@users.noreply.invalid}")

say() { echo "kbase-data: $*" >&2; }
refuse() { say "$*"; exit 2; }

# The environment is checked before anything is touched: this script deletes and rewrites files only inside a
# worktree it created, and commits only onto a branch that holds no code.
validate() {
  case "$remote" in
    ""|-*|*[[:space:]]*) refuse "KBASE_DATA_REMOTE='$remote' is not a remote name or URL" ;;
  esac
  case "$new_ok" in
    none|head|all) ;;
    *) refuse "KBASE_DATA_NEW='$new_ok' must be none, head or all (which baselines the data branch never had may be pushed)" ;;
  esac
  git check-ref-format --branch "$branch" >/dev/null 2>&1 && [ "${branch#-}" = "$branch" ] \
    || refuse "KBASE_DATA_BRANCH='$branch' is not a branch name"
  local current top
  current=$(git symbolic-ref -q --short HEAD || true)
  if [ "$branch" = "$current" ] || [ "$branch" = "${CI_DEFAULT_BRANCH:-}" ] || [ "$branch" = "${GITHUB_REF_NAME:-}" ] \
      || git merge-base --is-ancestor "refs/heads/$branch" HEAD 2>/dev/null; then
    refuse "KBASE_DATA_BRANCH='$branch' is a branch of the code; the baselines need a branch of their own"
  fi
  case "$dir" in
    ""|.|./|..|../*|*/..|*/../*|/*) refuse "KBASE_DATA_DIR='$dir' must be a new folder inside the checkout (e.g. .kbase-data)" ;;
  esac
  top=$(git rev-parse --show-toplevel)
  if [ -e "$dir" ] || [ -L "$dir" ]; then
    # ours: a worktree of this repository registered at that path; anything else is not this script's to delete
    local here
    here=$(cd "$dir" 2>/dev/null && pwd -P) || refuse "KBASE_DATA_DIR='$dir' exists and is not a folder"
    if [ "$here" = "$(cd "$top" && pwd -P)" ] || ! git worktree list --porcelain \
        | grep -qxF -e "worktree $here" -e "worktree $(cd "$dir" && pwd)"; then
      [ -z "$(ls -A "$dir")" ] || refuse "KBASE_DATA_DIR='$dir' exists and is not this script's worktree; remove it or choose another folder"
    fi
  fi
}

# The remote data branch's newest commit checked out in $dir (a worktree of this repository, so the checkout's
# credentials serve); an empty orphan when the branch does not exist yet.
checkout() {
  local found=0
  git ls-remote --exit-code --heads "$remote" "$branch" >/dev/null 2>&1 || found=$?
  if [ "$found" -ne 0 ] && [ "$found" -ne 2 ]; then
    say "cannot reach remote '$remote' (git ls-remote exit $found)"; return 1
  fi
  local exclude
  exclude=$(git rev-parse --git-path info/exclude)
  mkdir -p "$(dirname "$exclude")"
  grep -qxF "/$dir/" "$exclude" 2>/dev/null || echo "/$dir/" >> "$exclude"  # never in the job's `git status`
  if [ "$found" -eq 0 ]; then
    git fetch -q "$remote" "+refs/heads/$branch:refs/remotes/$remote/$branch"
    if git merge-base "refs/remotes/$remote/$branch" HEAD >/dev/null 2>&1; then
      refuse "'$branch' on '$remote' shares history with the code: it is not a data branch (KBASE_DATA_BRANCH)"
    fi
  fi
  if [ ! -e "$dir/.git" ]; then
    [ ! -e "$dir" ] || rmdir "$dir"  # an empty folder (validate refused anything else)
    git worktree prune
    git worktree add -q --detach "$dir" HEAD
  fi
  if [ "$found" -eq 0 ]; then
    git -C "$dir" checkout -q -f --detach "refs/remotes/$remote/$branch"
    git -C "$dir" reset -q --hard "refs/remotes/$remote/$branch"
  else
    say "no branch '$branch' on '$remote' yet: starting it"
    git -C "$dir" checkout -q -f --detach "$(git rev-parse HEAD)"  # the code's commit: the worktree's may be unborn
    git -C "$dir" checkout -q --orphan "kbase-data-new-$$"
    git -C "$dir" rm -rfq --cached . >/dev/null 2>&1 || true
  fi
  git -C "$dir" clean -qfdx
  mkdir -p "$files"
}

pull() {
  checkout
  kbase import "$files"
}

# The baselines the export added that the data branch's tip does not have, refused unless KBASE_DATA_NEW allows
# them (`head`: those of the checked-out commit only). A file's commit is read from its header line (ASCII JSON,
# sorted keys: the baseline row's "commit" comes first; docs/export-format.md).
check_new() {
  [ "$new_ok" = all ] && return 0
  local head f commit foreign=0 total=0 shown=""
  head=$(git rev-parse HEAD)
  while IFS= read -r f; do
    [ -n "$f" ] || continue
    total=$((total + 1))
    commit=$(sed -n '2{p;q}' "$dir/$f" | grep -o '"commit":"[0-9a-f]*"' | head -n 1 | cut -d'"' -f4)
    if [ "$new_ok" = head ] && [ "$commit" = "$head" ]; then
      continue
    fi
    foreign=$((foreign + 1))
    [ "$foreign" -gt 3 ] || shown="$shown ${commit:0:12}"
  done < <(git -C "$dir" ls-files --others --exclude-standard -- baselines | grep '\.baseline$' || true)
  if [ "$foreign" -gt 0 ]; then
    git -C "$dir" clean -qfd -- baselines  # what this export added: the store and the branch stay as they were
    refuse "refusing to push $foreign baseline(s) the data branch never had (of $total new; commits:$shown$([ "$foreign" -gt 3 ] && echo " …")): a local store's baselines would become the team's history. Push from a scratch store holding only the branch's baselines (docs/ci.md), or allow them: KBASE_DATA_NEW=head (this commit's) or all"
  fi
}

push() {
  local attempt=1
  while :; do
    if [ -n "${KBASE_PRUNE:-}" ]; then
      # shellcheck disable=SC2086 # KBASE_PRUNE is a list of arguments
      kbase prune $KBASE_PRUNE --yes --export "$files" --quiet
    fi
    kbase export "$files"
    check_new
    git -C "$dir" add -A .
    if git -C "$dir" diff --cached --quiet; then
      say "nothing new to push"; return 0
    fi
    git -C "$dir" "${git_id[@]}" commit -q -m "${KBASE_DATA_MESSAGE:-kbase baselines}"
    if git -C "$dir" push -q "$remote" "HEAD:refs/heads/$branch"; then
      say "pushed to $branch (attempt $attempt)"; return 0
    fi
    if [ "$attempt" -ge "$retries" ]; then
      say "push refused $attempt times; giving up"; return 1
    fi
    attempt=$((attempt + 1))
    say "push refused (another runner pushed first?): fetching theirs, re-importing, retrying"
    sleep "$(( RANDOM % attempt )).$(( RANDOM % 10 ))"
    checkout
    kbase import "$files"
  done
}

case "${1:-}" in
  pull) validate; pull ;;
  push)
    case "${2:-}" in
      "") ;;
      --new=*) new_ok=${2#--new=} ;;
      *) echo "usage: $0 push [--new=none|head|all]" >&2; exit 2 ;;
    esac
    validate; push ;;
  *) echo "usage: $0 pull|push [--new=none|head|all]" >&2; exit 2 ;;
esac

#!/bin/sh
# Copy a worktree's tracked and untracked-not-ignored files to DEST, with a
# COMMIT file naming its HEAD: stage.sh WORKTREE DEST
src=$1 dest=$2
rm -rf "$dest" && mkdir -p "$dest" || exit 1
(cd "$src" && git ls-files -z -co --exclude-standard | xargs -0 cp --parents -t "$dest") || exit 1
(cd "$src" && git log --oneline -1) >"$dest/COMMIT"

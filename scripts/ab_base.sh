#!/usr/bin/env bash
# Lays out .ab/base for scripts/gpu_call_kernel_ab.sh: the files under src/cuda (and include/nibble/cuda)
# that changed between COMMIT and the working tree, as they were at COMMIT. Files new since COMMIT are
# left out (the base tree's older files do not include them). Usage: scripts/ab_base.sh COMMIT
set -euo pipefail
cd "$(dirname "$0")/.."
commit=${1:?usage: scripts/ab_base.sh COMMIT (the code before the kernel change)}
git rev-parse --verify -q "$commit^{commit}" >/dev/null || { echo "ab_base: '$commit' is not a commit" >&2; exit 2; }
rm -rf .ab/base && mkdir -p .ab/base
n=0
for f in $(git diff --name-only "$commit" -- src/cuda include/nibble/cuda); do
  if git cat-file -e "$commit:$f" 2>/dev/null; then
    mkdir -p ".ab/base/$(dirname "$f")"
    git show "$commit:$f" >".ab/base/$f"
    n=$((n + 1))
    echo "base: $f"
  fi
done
echo "ab_base: $n files from $commit in .ab/base (carry [\".ab\"] to the device)"

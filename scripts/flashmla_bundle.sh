#!/usr/bin/env bash
# Makes .gpu/flashmla/ (git-ignored): FlashMLA's source at a pinned commit plus the CUTLASS headers its
# build needs, as one xz tarball (~1.2 MB) for the GPU machine, where `bash scripts/h200.sh flashmla`
# builds it (benchmarks/peers/flashmla.py is the peer).  Nothing of FlashMLA is committed here.
#
#   bash scripts/flashmla_bundle.sh [FLASHMLA_GIT=<git dir>] [CUTLASS_GIT=<git dir>]
#
# The git dirs default to the mirrors the `fetch` tool leaves (fetch github:deepseek-ai/FlashMLA and
# github:NVIDIA/cutlass first); the CUTLASS commit is the one FlashMLA's tree pins for csrc/cutlass.
set -euo pipefail
for kv in "$@"; do export "$kv"; done
FLASHMLA_COMMIT="${FLASHMLA_COMMIT:-9241ae3ef9bac614dd25e45e507e089f888280e0}"
FLASHMLA_GIT="${FLASHMLA_GIT:-/work/.mirror/deepseek-ai+FlashMLA/repo}"
CUTLASS_GIT="${CUTLASS_GIT:-/work/.mirror/NVIDIA+cutlass/repo}"
dest=".gpu/flashmla"
for g in "$FLASHMLA_GIT" "$CUTLASS_GIT"; do
  git -C "$g" rev-parse --git-dir >/dev/null 2>&1 || {
    echo "flashmla_bundle: $g is not a git directory; fetch the repository first or pass FLASHMLA_GIT=/CUTLASS_GIT="; exit 2; }
done
git -C "$FLASHMLA_GIT" cat-file -e "$FLASHMLA_COMMIT^{commit}" 2>/dev/null || {
  echo "flashmla_bundle: commit $FLASHMLA_COMMIT is not in $FLASHMLA_GIT; fetch a newer snapshot or set FLASHMLA_COMMIT"; exit 2; }
cutlass_commit=$(git -C "$FLASHMLA_GIT" ls-tree "$FLASHMLA_COMMIT" csrc/cutlass | awk '{print $3}')
git -C "$CUTLASS_GIT" cat-file -e "$cutlass_commit^{commit}" 2>/dev/null || {
  echo "flashmla_bundle: CUTLASS commit $cutlass_commit (FlashMLA's csrc/cutlass) is not in $CUTLASS_GIT"; exit 2; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir -p "$work/FlashMLA/csrc/cutlass" "$dest"
git -C "$FLASHMLA_GIT" archive "$FLASHMLA_COMMIT" | tar x -C "$work/FlashMLA"
# only the header trees the build's include_dirs name (the mirror may lack CUTLASS's media blobs)
# (git archive may still complain about a missing media blob outside those paths: checked by count below)
git -C "$CUTLASS_GIT" archive "$cutlass_commit" -- include tools/util/include 2>"$work/archive.err" |
  tar x -C "$work/FlashMLA/csrc/cutlass"
want=$(git -C "$CUTLASS_GIT" ls-tree -r "$cutlass_commit" -- include tools/util/include | wc -l)
got=$(find "$work/FlashMLA/csrc/cutlass" -type f | wc -l)
[ "$want" -eq "$got" ] || { echo "flashmla_bundle: CUTLASS headers incomplete ($got of $want files):"; cat "$work/archive.err"; exit 2; }
printf 'FlashMLA %s\nCUTLASS %s\n' "$FLASHMLA_COMMIT" "$cutlass_commit" >"$work/FlashMLA/KFORGE_COMMITS"
tar cJf "$dest/flashmla-src.tar.xz" -C "$work" FlashMLA
cp "$work/FlashMLA/KFORGE_COMMITS" "$dest/COMMITS"
(cd "$dest" && sha256sum flashmla-src.tar.xz >SHA256SUMS)
echo "flashmla_bundle: wrote $dest ($(du -h "$dest/flashmla-src.tar.xz" | cut -f1)); carry .gpu/flashmla and run: bash scripts/h200.sh flashmla"

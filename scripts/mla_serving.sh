#!/usr/bin/env bash
# One device call for issue 35's serving-shape table, run ON THE GPU MACHINE from the repository root once the
# CuTe DSL and peers parts are staged and /tmp/kforge-gpu/env.sh is sourced (../shared/gpu/README.md):
#   the best version beside FlashInfer (and FlashMLA where installed) on the serve_* trials of kernels/mla/spec.py,
#   the host time per call with and without the packed launch (the default, and KFORGE_CUTE_FASTCALL=0),
#   then the exported package's own test (correctness, ragged shapes, CUDA-graph capture + replay) from a clean
#   directory.   bash scripts/mla_serving.sh [VERSION=v59_cute] [PEERS=flashinfer_fa3,flashmla] [STEP_S=540]
#                                            [ONLY=serving,export,export-test,host,host-library,graph]
# ONLY picks the steps (in that order) when one call cannot hold them all.  The logs and results are packed into
# $OUT/mla-serving.tgz at the end: a device call brings back only a few files.
set -u
for kv in "$@"; do export "${kv?}"; done
STEP_DEFAULT=540; source "$(dirname "$0")/steps.sh"
VERSION=${VERSION:-v59_cute}; PEERS=${PEERS:-flashinfer_fa3,flashmla}
ONLY=${ONLY:-serving,export,export-test,host,host-library,graph}
TRIALS=serve_tp8,serve_tp4,serve_tp2,serve_b1,serve_b256,serve_ragged,serve_mtp4,serve_spec_tp8
want() { case ",$ONLY," in *",$1,"*) return 0;; esac; return 1; }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
want serving && step serving 380 python3 -m benchmarks.compare --kernel mla --versions "$VERSION" --peers "$PEERS" \
    --trial "$TRIALS" --rounds 30 --by-trial --out "$OUT/serving.md" --json "$OUT/serving.json"
want export && step export 30 python3 -m pytest_kforge.export mla "$VERSION" /tmp/kf-export --force
want export-test && step export-test 120 bash -c "cd /tmp/kf-export && python3 -m pytest -q -p no:cacheprovider -rs"
# host time per call (issue 35: under 10 us): the default launch path (the packed call + raw stream getter,
# kernels/_shared/cute_fastcall.py), then the library's run_compiled_program (KFORGE_CUTE_FASTCALL=0);
# public_call also captures each in a CUDA graph and replays it on new values
want host && step host 150 python3 -m benchmarks.public_call --versions "$VERSION" --trials decode,spec \
    --out "$OUT/host-default"
want host-library && step host-library 150 env KFORGE_CUTE_FASTCALL=0 python3 -m benchmarks.public_call \
    --versions "$VERSION" --trials decode,spec --out "$OUT/host-library"
want graph && step graph 120 python3 -m pytest -q -p no:cacheprovider -rs tests/test_public_call_gpu.py
echo "== done in $(( $(date +%s) - T0 )) s"
# pack (then remove) only what this script wrote: $OUT may hold a caller's own files
made=(); for f in gpu.txt serving.md serving.json host-default host-library serving.log export.log export-test.log \
    host.log host-library.log graph.log; do [ -e "$OUT/$f" ] && made+=("$f"); done
tar czf "$OUT/mla-serving.tgz" -C "$OUT" "${made[@]}" && (cd "$OUT" && rm -rf "${made[@]}")

#!/usr/bin/env bash
# One device call for the rmsnorm_fp8 kernel (issue 36), run ON THE GPU MACHINE from the repository root once
# the cuTile, CuTe DSL and peers parts are staged and /tmp/kforge-gpu/env.sh is sourced (../shared/gpu/README.md):
#   calibration of this GPU, the suite of every version (correctness, fuzz, trials; pytest-benchmark storage),
#   versions beside the torch peers on the three trials, ncu profile-contract reports of the given versions.
#   a --dry-run plan and one offline loop iteration from FROM (default v2_cute), its checkout changes packed.
#   bash scripts/rmsnorm_gpu.sh [PROFILE=v1_cute,v1] [FROM=v2_cute] [LOOP_S=200] [STEP_S=520]
# Everything lands in $OUT/rmsnorm-all.tgz (logs, suite.json, peers.md/json, reports/, bench/, runs/); a step with
# < 15 s left is skipped.
set -u
for kv in "$@"; do export "${kv?}"; done
STEP_DEFAULT=520; source "$(dirname "$0")/steps.sh"
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
step calibrate 90 python3 -m pytest_kforge.calibrate --out "$OUT/calibration.json"
step suite 260 python3 -m pytest -p no:cacheprovider -q -rs --kernel rmsnorm_fp8 --kforge-json "$OUT/suite.json" \
    --benchmark-storage="file://$OUT/bench" --benchmark-save=rmsnorm_fp8 -n 4 --kforge-workers-per-gpu 4
step compare 150 python3 -m benchmarks.compare --kernel rmsnorm_fp8 --versions v0,v1,v2,v1_cute,v2_cute,v3_cute \
    --peers torch_eager,torch_compile --trial prefill,decode,qlora --out "$OUT/peers.md" --json "$OUT/peers.json"
# the compare above runs the packed CuTe launch (kernels/_shared/cute_fastcall.py, the default); the same compare
# through the library's run_compiled_program (KFORGE_CUTE_FASTCALL=0), host us beside the step above's (LIBRARY=0
# skips it)
[ "${LIBRARY:-1}" = 1 ] && step library 60 env KFORGE_CUTE_FASTCALL=0 python3 -m benchmarks.compare \
    --kernel rmsnorm_fp8 --versions v1_cute,v2_cute,v3_cute --trial prefill,decode,qlora --out "$OUT/library.md" \
    --json "$OUT/library.json"
# the loop on this kernel: the plan only, then one offline iteration from the best version (verified, evaluated
# and learned like any other); what it writes in the checkout (a new version, devlog, knowledge) comes back
FROM=${FROM:-v2_cute}
step dryrun 60 python3 -m pytest_kforge.orchestrate --kernel rmsnorm_fp8 --from "$FROM" --dry-run \
    --results "$OUT/suite.json" --runs-dir "$OUT/runs"
step loop "${LOOP_S:-200}" python3 -m pytest_kforge.orchestrate --kernel rmsnorm_fp8 --from "$FROM" --iterations 1 \
    --agents offline --results "$OUT/suite.json" --runs-dir "$OUT/runs" --suite-args "-n 4 --kforge-workers-per-gpu 4"
# ncu last: the loop verifies and learns with its own profile; these reports are the profile contract of PROFILE
for v in ${PROFILE:+${PROFILE//,/ }}; do
    step "profile-$v" 70 python3 -m pytest_kforge.profile --kernel rmsnorm_fp8 --version "$v" --trial prefill,decode \
        --out "$OUT/reports" --no-devlog --bench-json "$OUT/suite.json"
done
echo "== done in $(( $(date +%s) - T0 )) s"
git status --porcelain > "$OUT/git-status.txt" 2>&1
git ls-files -m -o --exclude-standard -z | grep -zv '^\.gpu/' | tar czf "$OUT/checkout-changes.tgz" --null -T - 2>/dev/null
# the device returns a handful of files (run 02 lost its archive to the count): everything travels as one archive
(cd "$OUT" && tar czf /tmp/rmsnorm-all.tgz . && find . -mindepth 1 -delete && mv /tmp/rmsnorm-all.tgz .)
echo "== packed: $OUT/rmsnorm-all.tgz (logs, suite.json, peers/library JSON, bench/, reports/, runs/, checkout changes)"

#!/usr/bin/env bash
# The project's own H200 session, one step per device call (each call <= 10 minutes).
# Runs ON THE GPU MACHINE from the repository root, after the toolchain is staged
# (../shared/gpu/README.md).  Every step leaves its logs and artifacts in /tmp/kf (kept while
# the machine stays warm) and packs them into $OUT/kf-<step>.tgz so they come back.
#
#   bash scripts/h200.sh suite   BEST=v5   # doctor, full suite of every version, benchmark compare
#   bash scripts/h200.sh peers   BEST=v5   # peers side by side, trust GPU checks
#   bash scripts/h200.sh profile BEST=v5   # ncu profile reports (v0 and BEST) through the plugin
#   bash scripts/h200.sh loop    BEST=v5   # orchestrator: 2 iterations, killed in VERIFY, resumed
set -uo pipefail
step="${1:?step: suite|peers|profile|loop}"
shift || true
for kv in "$@"; do export "$kv"; done
BEST="${BEST:-v3}"
KF=/tmp/kf
mkdir -p "$KF" "${OUT:-/tmp/out}"
OUT="${OUT:-/tmp/out}"
source /tmp/kforge-gpu/env.sh
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$KF/pip.log" 2>&1 || { echo "pip install failed"; tail -5 "$KF/pip.log"; }
log() { echo "[$(date +%T)] $*" | tee -a "$KF/$step.log"; }
run() { local name="$1"; local limit="$2"; shift 2; log "$name: $*"; local t0=$SECONDS
  timeout "$limit" "$@" >"$KF/$name.log" 2>&1; local rc=$?
  log "$name: rc=$rc in $((SECONDS - t0)) s"; tail -n "${TAIL:-6}" "$KF/$name.log"; return 0; }

case "$step" in
suite)
  run doctor 60 python3 -m pytest_kforge.doctor
  # every version: correctness (trial configs + fuzz) and both trial benchmarks, saved twice
  S="file://$KF/bench"
  TAIL=25 run suite-all 420 python3 -m pytest --kernel mla --kernel-version all -p no:cacheprovider -rs \
      --kforge-json="$KF/suite-all.json" --benchmark-autosave --benchmark-storage="$S" \
      --benchmark-json="$KF/bench-all.json"
  TAIL=30 run suite-compare 150 python3 -m pytest --kernel mla --kernel-version "v0,$BEST" -k test_trial \
      -p no:cacheprovider --kforge-json="$KF/suite-rerun.json" --benchmark-autosave \
      --benchmark-storage="$S" --benchmark-compare
  # the harness's time vs ncu's gpu__time_duration.sum for the best version's kernels
  run ncu-agree 150 ncu --clock-control none --metrics gpu__time_duration.sum --csv \
      --kernel-name-base function -k "regex:^(?!.*(fill|elementwise|vectorized)).*" \
      python3 -m pytest --kernel "mla:$BEST" -k "test_trial and decode" --kforge-rounds 20 \
      --kforge-warmup 2 -p no:cacheprovider --kforge-json="$KF/ncu-agree.json"
  ;;
peers)
  run test-peers 200 python3 -m pytest tests/test_peers.py -q -p no:cacheprovider -rs
  TAIL=20 run compare 300 python3 -m benchmarks.compare --kernel mla --versions "v0,v1,v3,$BEST,v1_cute" \
      --peers torch_bmm,torch_bmm_contig,flashinfer_fa3,flashinfer_fa2 --trial decode,spec --rounds 40 \
      --out "$KF/peers.md" --json "$KF/peers.json"
  run trust-gpu 120 python3 -m pytest -q -rs -p no:cacheprovider tests/test_trust_runtime.py tests/test_trust_sandbox.py \
      tests/adversarial
  ;;
profile)
  TAIL=30 run profile 400 python3 -m pytest --kernel mla --kernel-version "v0,$BEST" --kforge-profile \
      --kforge-no-bench -p no:cacheprovider -rs
  ;;
loop)
  rm -f "$KF/orch1.log"
  log "orchestrator: 2 iterations from $BEST, killed during the first VERIFY, then resumed"
  setsid python3 -u -m pytest_kforge.orchestrate --kernel mla --from "$BEST" --iterations 2 --timeout 300 \
      >"$KF/orch1.log" 2>&1 & PID=$!
  for _ in $(seq 1 150); do grep -q '\[1:VERIFY\] \.\.\.' "$KF/orch1.log" && break; sleep 2; done
  sleep 15; kill -9 -- -"$PID" 2>/dev/null; log "killed the run (pid $PID) in VERIFY"; tail -5 "$KF/orch1.log"
  RID=$(ls -t runs | head -1)
  TAIL=40 run orch-resume 420 python3 -u -m pytest_kforge.orchestrate --resume "$RID"
  cp -r "runs/$RID" "$KF/run-$RID" 2>/dev/null
  ;;
*) echo "unknown step $step"; exit 2 ;;
esac
# bring back: /tmp/kf plus everything the step changed or created in the checkout
git status --porcelain --untracked-files=all | awk '{print $2}' | grep -v '^\.gpu/' >"$KF/changed.txt"
tar czf "$OUT/kf-$step.tgz" -C / tmp/kf --exclude='*.ncu-rep' 2>/dev/null
tar czf "$OUT/tree-$step.tgz" -T "$KF/changed.txt" 2>/dev/null
ls -la "$OUT"

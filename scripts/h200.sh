#!/usr/bin/env bash
# The project's own H200 session, one step per device call (each call <= 10 minutes).
# Runs ON THE GPU MACHINE from the repository root, after the toolchain part it needs is staged
# (../shared/gpu/README.md).  Every step leaves its logs and artifacts in /tmp/kf (kept while
# the machine stays warm) and packs them into $OUT/kf-<step>.tgz (+ the checkout files it
# changed or created, $OUT/tree-<step>.tgz) so they come back.
#
#   bash scripts/h200.sh cutile            # (cutile staged) cuTile tile sweep, suite of v0 + cuTile line
#   bash scripts/h200.sh peers   BEST=v6   # (+cute1, peers) peers side by side, trust GPU checks, v0 profile
#   bash scripts/h200.sh all     BEST=v6   # (+cute2) suite of every version, benchmark compare, ncu vs harness
#   bash scripts/h200.sh loop    BEST=v6   # orchestrator: 2 iterations, killed in VERIFY, resumed
#   bash scripts/h200.sh trust             # trust/adversarial tests on the GPU
#   bash scripts/h200.sh cute VERSIONS=v4_cute   # (cute staged) CuTe self-check + harness suite (+ ncu)
set -uo pipefail
step="${1:?step: cutile|peers|all|loop|trust|cute}"
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
cutile)
  TAIL=40 run sweep "${SWEEP_S:-260}" python3 kernels/mla/_cutile_sweep.py --budget "${SWEEP_BUDGET:-200}" ${SWEEP_ONLY:+--only "$SWEEP_ONLY"}
  [ -n "${SKIP_SUITE:-}" ] && { tar czf "$OUT/kf-$step.tgz" -C / tmp/kf 2>/dev/null; exit 0; }
  cp "$OUT"/cutile_sweep.* "$KF"/ 2>/dev/null
  V=$(ls kernels/mla | sed -n 's/^\(v[0-9][0-9]*\)\.py$/\1/p' | sort -V | paste -sd, -)
  TAIL=30 run suite-cutile 300 python3 -m pytest --kernel mla --kernel-version "$V" -p no:cacheprovider -rs \
      --kforge-examples 8 --kforge-json="$KF/suite-cutile.json"
  ;;
peers)
  [ -n "${SKIP_PEERTESTS:-}" ] || run test-peers 150 python3 -m pytest tests/test_peers.py -q -p no:cacheprovider -rs
  TAIL=20 run compare 240 python3 -m benchmarks.compare --kernel mla --versions "${PEER_VERSIONS:-v0,v3,$BEST}" \
      --peers torch_bmm,torch_bmm_contig,flashinfer_fa3,flashinfer_fa2 --trial decode,spec --rounds 40 \
      --out "$KF/peers.md" --json "$KF/peers.json"
  [ -n "${SKIP_TRUST:-}" ] || run trust-gpu 90 python3 -m pytest -q -rs -p no:cacheprovider tests/test_trust_runtime.py \
      tests/test_trust_sandbox.py tests/adversarial
  [ -n "${SKIP_PROFILE:-}" ] || TAIL=30 run profile-v0 120 python3 -m pytest --kernel mla --kernel-version v0 \
      --kforge-profile --kforge-no-bench -p no:cacheprovider -rs
  ;;
trust)
  TAIL=25 run trust-gpu 150 python3 -m pytest -q -rs -p no:cacheprovider tests/test_trust_runtime.py \
      tests/test_trust_sandbox.py tests/adversarial tests/test_timing.py
  # the best versions' trials again, now with the stream audit in every trial
  TAIL=12 run trial-audit 150 python3 -m pytest --kernel mla --kernel-version "v3,$BEST" -k test_trial \
      -p no:cacheprovider --kforge-json="$KF/trial-audit.json"
  ;;
all)
  run doctor 60 python3 -m pytest_kforge.doctor
  S="file://$KF/bench"
  TAIL=30 run suite-all 330 python3 -m pytest --kernel mla --kernel-version all -p no:cacheprovider -rs \
      --kforge-examples 8 --kforge-json="$KF/suite-all.json" --benchmark-autosave --benchmark-storage="$S"
  [ -n "${SKIP_COMPARE:-}" ] || TAIL=30 run suite-compare 100 python3 -m pytest --kernel mla --kernel-version "v0,$BEST" -k test_trial \
      -p no:cacheprovider --kforge-json="$KF/suite-rerun.json" --benchmark-autosave \
      --benchmark-storage="$S" --benchmark-compare
  # the harness's time vs ncu's gpu__time_duration.sum for the best version's kernels (flush excluded)
  [ -n "${SKIP_NCU:-}" ] || run ncu-agree 120 ncu --clock-control none --metrics gpu__time_duration.sum --csv \
      -k "regex:mla" python3 -m pytest --kernel "mla:$BEST" -k "test_trial and decode" \
      --kforge-rounds 20 --kforge-warmup 2 -p no:cacheprovider --kforge-json="$KF/ncu-agree.json"
  ;;
loop)
  rm -f "$KF/orch1.log"
  log "orchestrator: 2 iterations from $BEST, killed during the first VERIFY, then resumed"
  setsid python3 -u -m pytest_kforge.orchestrate --kernel mla --from "$BEST" --iterations 2 --timeout 240 \
      >"$KF/orch1.log" 2>&1 & PID=$!
  for _ in $(seq 1 120); do grep -q '\[1:VERIFY\] \.\.\.' "$KF/orch1.log" && break; sleep 2; done
  sleep 15; kill -9 -- -"$PID" 2>/dev/null; log "killed the run (pid $PID) in VERIFY"; tail -5 "$KF/orch1.log"
  RID=$(ls -t runs | head -1)
  TAIL=40 run orch-resume 450 python3 -u -m pytest_kforge.orchestrate --resume "$RID"
  cp -r "runs/$RID" "$KF/run-$RID" 2>/dev/null
  ;;
cute)
  V="${VERSIONS:-v4_cute}"
  TAIL=40 run cute-selfcheck "${SELFCHECK_S:-240}" python3 kernels/mla/_cute_selfcheck.py --versions "$V"
  TAIL=30 run suite-cute "${SUITE_S:-240}" python3 -m pytest --kernel mla --kernel-version "$V" -p no:cacheprovider \
      -rs --kforge-examples 8 --kforge-json="$KF/suite-cute.json"
  [ -n "${SKIP_PROFILE:-}" ] || TAIL=30 run profile-cute 200 python3 -m pytest --kernel mla --kernel-version "$V" \
      --kforge-profile --kforge-no-bench -p no:cacheprovider -rs
  ;;
*) echo "unknown step $step"; exit 2 ;;
esac
# bring back: /tmp/kf plus everything the step changed or created in the checkout
git status --porcelain --untracked-files=all | awk '{print $2}' | grep -v '^\.gpu/' >"$KF/changed.txt"
tar czf "$OUT/kf-$step.tgz" -C / tmp/kf --exclude='*.ncu-rep' 2>/dev/null
case "$step" in loop|all|cutile) tar czf "$OUT/tree-$step.tgz" -T "$KF/changed.txt" 2>/dev/null ;; esac
ls -la "$OUT"

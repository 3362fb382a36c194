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
#                                          # (WORKERS=12: 12 xdist workers share the GPU, ~3x faster)
#   bash scripts/h200.sh loop    BEST=v6   # orchestrator: 2 iterations, killed in VERIFY, resumed
#   bash scripts/h200.sh trust             # trust/adversarial tests on the GPU
#   bash scripts/h200.sh cute VERSIONS=v4_cute   # (cute staged) CuTe self-check + harness suite (+ ncu)
#   bash scripts/h200.sh profile VERSIONS=v48_cute,v49_cute [WORKERS=8]   # (cute staged) ncu reports per version
#   bash scripts/h200.sh candidates VERSIONS=v46_cute BEST=v35_cute [TRACE=<kind>_trace,...] [GPU_TESTS="<pytest args>"]
#                                          # (cute + peers staged) self-check, probes, compare and harness vs BEST
#   bash scripts/h200.sh flashmla BEST=v35_cute COMPARE=1   # (.gpu/flashmla carried) build the FlashMLA peer, test, compare
#                                          # (PEERS=..., COMPARE_VERSIONS=...: other peers / versions in that compare)
#                                          # (SIDE=1: + BEST vs FlashMLA under ncu --set full, pytest_kforge.profile.side)
#                                          # (SCALING=1 [SCALING_VERSIONS=v36_cute]: + fixed vs streaming cost, benchmarks.scaling)
#
# Time: a device call ends at 600 s, and a step killed there brings nothing back (the packing
# below never runs).  So the whole step gets STEP_S seconds (default 540, counted from the
# script's start; lower it when the same call stages the toolchain first): each command's cap is
# cut to the time left, a command with under 15 s left is not run, and both say so in the log.
# A command killed at its cap is logged as "TIME CAP HIT".
#
# The all step with many versions: CuTe versions compile for a minute or two each, so every
# version does not fit in one call.  VERSIONS (default all) picks the suite's versions and
# SUITE_S its cap (default: the time left minus what the compare and ncu commands need); split
# it into two calls, the cuTile line first, then the rest with v0 and BEST (the compare re-times
# those two against this call's saved run, and is skipped when they are not in it):
#   bash scripts/h200.sh all VERSIONS=v1,v2,v3,v4,v5,v6,v7,v8,v9,v10,v11 SKIP_COMPARE=1 SKIP_NCU=1
#   bash scripts/h200.sh all VERSIONS=v0,v1_cute,v2_cute,v3_cute,v4_cute,v5_cute,v6_cute,v7_cute BEST=v5_cute
# or let it slice: VERSIONS=part:K/N (part 1: v0 + the cuTile line; 2..N: the rest in equal slices).
# Run 27 (72 versions, one loan): part:1/4 with WORKERS=12 took 107 s (the cuTile versions compile in their prepare,
# outside the GPU lock, since run 26), parts 2/4..4/4 (20 CuTe versions each) 233-260 s with WORKERS=16; the
# best record (docs/kernels/mla/best.json) and the devlog table are then computed from all four JSONs:
#   python -m pytest_kforge.devlog best --from-json suite-all-v0-v11.json suite-all-<...>.json ... \
#       --best-json docs/kernels/mla/best.json --devlog docs/kernels/mla.md
# Before the first part, compile every CuTe version's paths locally (no GPU; run 24 lost three versions to a host
# error only the sm80 kinds reached): python kernels/mla/tools/cute_compilecheck.py --prepare all
# Each part writes suite-all-<first>-<last>.json/.log; when the cap cuts a suite the log names the
# versions it did not finish (no finished trial benchmark) and the command that runs them.
set -uo pipefail
step="${1:?step: cutile|peers|all|loop|trust|cute|candidates|flashmla|profile}"
shift || true
for kv in "$@"; do export "$kv"; done
BEST="${BEST:-v3}"
KF="${KF:-/tmp/kf}"
mkdir -p "$KF" "${OUT:-/tmp/out}"
OUT="${OUT:-/tmp/out}"
log() { echo "[$(date +%T)] $*" | tee -a "$KF/$step.log"; }
DEADLINE="${STEP_S:-540}"  # bash's SECONDS counts from the script's start
left() { echo $((DEADLINE - SECONDS)); }
# run NAME CAP CMD...: CMD with its output in $KF/NAME.log, killed after CAP s (cut to the time
# left; not run with under 15 s left or a cap under 1 s); sets RC (124/137: killed at the cap,
# 125: not run); always returns 0
run() { local name="$1"; local limit="$2"; shift 2; local t0=$SECONDS
  local want=$limit budget=$(( $(left) - 10 ))  # 10 s for timeout's -k grace
  [ "$limit" -le "$budget" ] || limit=$budget
  if [ "$budget" -lt 15 ] || [ "$limit" -lt 1 ]; then
    log "$name: NOT RUN: $(left) s left of the step's $DEADLINE s (STEP_S), cap $want s: $*"; RC=125; return 0; fi
  [ "$limit" -eq "$want" ] || log "$name: cap cut from $want s to the $limit s left"
  log "$name: $*"
  timeout -k 10 "$limit" "$@" >"$KF/$name.log" 2>&1; RC=$?
  if [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ]; then
    log "$name: TIME CAP HIT: killed after $limit s (rc=$RC); its output so far is in $KF/$name.log"
  else
    log "$name: rc=$RC in $((SECONDS - t0)) s"
  fi
  tail -n "${TAIL:-6}" "$KF/$name.log"; return 0; }
# mla versions: "all" as the registry lists them; "part:K/N" the K-th of N parts of them (part 1: v0
# and the cuTile line, which needs the cutile toolchain; parts 2..N: the DSL-suffixed versions in
# contiguous near-equal slices); else the comma list given
mla_versions() { local all k n d=kernels/mla
  [ -d "$d/versions" ] && d=$d/versions  # the registry's rule: versions/ when it exists
  all=$(ls "$d" | sed -n 's/^\(v[0-9][0-9]*\(_[a-z0-9_]*\)\{0,1\}\)\.py$/\1/p' | sort -V)
  case "$1" in
    all) echo "$all" | paste -sd, - ;;
    part:*/*) k=${1#part:}; n=${k#*/}; k=${k%/*}
      [[ "$k" =~ ^[0-9]+$ && "$n" =~ ^[0-9]+$ ]] && k=$((10#$k)) && n=$((10#$n))  # 10#: "08" is not octal
      if ! [[ "$k" =~ ^[0-9]+$ && "$n" =~ ^[0-9]+$ ]] || [ "$n" -lt 2 ] || [ "$k" -lt 1 ] || [ "$k" -gt "$n" ]; then
        echo "VERSIONS=$1: want part:K/N with 1 <= K <= N and N >= 2 (part 1 is v0 and the cuTile line)" >&2
        return 2; fi
      local sel
      if [ "$k" -eq 1 ]; then sel=$(echo "$all" | { grep -v _ || true; } | paste -sd, -)
      else sel=$(echo "$all" | { grep _ || true; } | awk -v k=$((k - 1)) -v n=$((n - 1)) '{v[NR] = $0}
          END {lo = int((k - 1) * NR / n) + 1; hi = int(k * NR / n); s = ""
               for (i = lo; i <= hi; i++) s = s (s == "" ? "" : ",") v[i]; print s}')
      fi
      [ -n "$sel" ] || { echo "VERSIONS=$1: that part has no versions (kernels/mla lists $(echo "$all" | grep -c .)); use fewer parts" >&2; return 2; }
      echo "$sel" ;;
    *) echo "$1" ;;
  esac; }
# the versions of selection $1 that a capped `pytest -v` run (log $2) did not finish: no trial
# benchmark result for them, or their test was the one running when it was killed (-v prints a
# test's id before it runs and its outcome after)
unfinished() { local v out=() cur
  cur=$(tail -n 1 "$2" 2>/dev/null | grep -vE ' (PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)' |
        sed -n 's/.*\[mla-\(v[0-9][0-9a-z_]*\)[]-].*/\1/p')
  for v in $(mla_versions "$1" | tr ',' ' '); do
    # one process: "...::test_trial[mla-v-...] PASSED"; xdist workers: "[gw3] [ 50%] PASSED ...::test_trial[mla-v-...]"
    if [ "$v" = "$cur" ] || ! grep -qE "test_trial\[mla-$v-.*\] (PASSED|FAILED|SKIPPED|ERROR)|(PASSED|FAILED|SKIPPED|ERROR) .*test_trial\[mla-$v-" "$2" 2>/dev/null; then
      out+=("$v"); fi
  done
  (IFS=,; echo "${out[*]}"); }
# pack $KF (less the .ncu-rep files) into $OUT/kf-<step>.tgz
pack() { tar czf "$OUT/kf-$step.tgz" -C "$(dirname "$KF")" --exclude='*.ncu-rep' "$(basename "$KF")" 2>/dev/null; }
# H200_FUNCTIONS_ONLY=1 source scripts/h200.sh STEP: only the definitions above (the tests use them)
[ -z "${H200_FUNCTIONS_ONLY:-}" ] || return 0 2>/dev/null || exit 0

source "${GPU_ENV:-/tmp/kforge-gpu/env.sh}"
export PYTHONUNBUFFERED=1
# the GPU's SM clock, power, temperature and clock-event reasons every 200 ms for the whole step
# (smi.csv): a timing step that moves with the clock is then visible (run 8: shared-mode spec steps)
if command -v nvidia-smi >/dev/null && [ -z "${SKIP_SMI:-}" ]; then
  q=timestamp,clocks.sm,power.draw,temperature.gpu,utilization.gpu
  for r in clocks_event_reasons.active clocks_throttle_reasons.active; do
    nvidia-smi --query-gpu="$q,$r" --format=csv >/dev/null 2>&1 && { q="$q,$r"; break; }; done
  nvidia-smi --query-gpu="$q" --format=csv,nounits -lms 200 >"$KF/smi.csv" 2>&1 &
  SMI_PID=$!; trap 'kill "$SMI_PID" 2>/dev/null' EXIT
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$KF/pip.log" 2>&1 || { echo "pip install failed"; tail -5 "$KF/pip.log"; }

case "$step" in
cutile)
  TAIL=40 run sweep "${SWEEP_S:-260}" python3 kernels/mla/tools/cutile_sweep.py --budget "${SWEEP_BUDGET:-200}" ${SWEEP_ONLY:+--only "$SWEEP_ONLY"}
  [ -n "${SKIP_SUITE:-}" ] && { pack; exit 0; }
  cp "$OUT"/cutile_sweep.* "$KF"/ 2>/dev/null
  V=$(mla_versions part:1/2)  # v0 and the cuTile line
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
flashmla)
  # FlashMLA (the peer benchmarks/peers/flashmla.py) built from the carried bundle (scripts/flashmla_bundle.sh),
  # sm90 only; the build is incremental (ninja), so a build cut by the cap continues in the next call while
  # the machine stays warm.  Then the peer's GPU tests and, with COMPARE=1, BEST and fa3 beside it.
  FM="${KFORGE_FLASHMLA_DIR:-/tmp/kforge-gpu/FlashMLA}"
  if [ ! -e "$FM/.kforge-built" ]; then
    if [ ! -d "$FM" ]; then
      [ -f .gpu/flashmla/flashmla-src.tar.xz ] || { log "flashmla: .gpu/flashmla was not carried (make it with bash scripts/flashmla_bundle.sh)"; pack; exit 2; }
      (cd .gpu/flashmla && sha256sum -c --quiet SHA256SUMS) || { log "flashmla: .gpu/flashmla is damaged (checksum)"; pack; exit 2; }
      mkdir -p "$(dirname "$FM")" && tar xJf .gpu/flashmla/flashmla-src.tar.xz -C "$(dirname "$FM")"
    fi
    # CUDA 13 keeps CCCL (cuda/std/...) under include/cccl, which nvcc adds itself but g++ (api.cpp) does not
    if nvcc=$(command -v nvcc); then
      cccl=$(dirname "$(dirname "$(readlink -f "$nvcc")")")/include/cccl
      [ ! -d "$cccl" ] || export CPLUS_INCLUDE_PATH="$cccl${CPLUS_INCLUDE_PATH:+:$CPLUS_INCLUDE_PATH}"
    fi
    TAIL=20 run flashmla-build "${BUILD_S:-420}" env -C "$FM" FLASH_MLA_DISABLE_SM100=1 MAX_JOBS="${MAX_JOBS:-16}" \
        NVCC_THREADS="${NVCC_THREADS:-2}" python3 setup.py build_ext --inplace
    if [ "$RC" -eq 0 ]; then touch "$FM/.kforge-built"
    else log "flashmla: build not finished (rc=$RC); run the step again while the machine is warm"; fi
  fi
  if [ -e "$FM/.kforge-built" ]; then
    export KFORGE_FLASHMLA_DIR="$FM"
    TAIL=20 run test-flashmla 150 python3 -m pytest tests/test_peers.py -k flashmla -q -p no:cacheprovider -rs
    # PEERS / COMPARE_VERSIONS widen the compare (every peer side by side: PEERS=flashmla,flashinfer_fa3,
    # flashinfer_fa2,torch_bmm,torch_bmm_contig; the torch path's spec rounds take ~5 ms each)
    [ -z "${COMPARE:-}" ] || TAIL=20 run compare-flashmla "${COMPARE_S:-200}" python3 -m benchmarks.compare \
        --kernel mla --versions "${COMPARE_VERSIONS:-$BEST}" --peers "${PEERS:-flashmla,flashinfer_fa3}" \
        --trial decode,spec --rounds 60 \
        --out "$KF/peers-flashmla.md" --json "$KF/peers-flashmla.json"
    # SIDE=1: BEST's and FlashMLA's spec kernels side by side under ncu --set full (~1-2 min)
    [ -z "${SIDE:-}" ] || TAIL=60 run side-flashmla 240 python3 -m pytest_kforge.profile.side --kernel mla \
        --trial "${SIDE_TRIAL:-spec}" --candidates "$BEST,peer:flashmla" --out "$KF/side-${SIDE_TRIAL:-spec}" --timeout 110
    # SCALING=1: BEST (+ SCALING_VERSIONS) and FlashMLA timed at three sequence lengths, a line fitted to each:
    # the per-tile fixed cost against the streaming cost (benchmarks/scaling.py, ~3-4 min)
    [ -z "${SCALING:-}" ] || TAIL=30 run scaling-flashmla 300 python3 -m benchmarks.scaling --kernel mla \
        --versions "$BEST${SCALING_VERSIONS:+,$SCALING_VERSIONS}" --peers flashmla --trial "${SCALING_TRIAL:-spec}" \
        --vary "${SCALING_VARY:-t=2048,4096,8192}" --rounds 30 --out "$KF/scaling.md" --json "$KF/scaling.json"
  fi
  ;;
trust)
  TAIL=25 run trust-gpu 150 python3 -m pytest -q -rs -p no:cacheprovider tests/test_trust_runtime.py \
      tests/test_trust_sandbox.py tests/adversarial tests/test_timing.py
  # the best versions' trials again, now with the stream audit in every trial
  TAIL=12 run trial-audit 150 python3 -m pytest --kernel mla --kernel-version "v3,$BEST" -k test_trial \
      -p no:cacheprovider --kforge-json="$KF/trial-audit.json"
  ;;
all)
  V="${VERSIONS:-all}"
  case "$V" in part:*)  # checked before anything runs, and said in the step's log
    V=$(mla_versions "$V" 2>"$KF/part.err") || { log "$(cat "$KF/part.err")"; pack; exit 2; }
    log "VERSIONS=$VERSIONS: $V" ;; esac
  # the doctor checks the toolchains these versions need (a CuTe-only part has no cuTile staged)
  dsl=""
  if [ "$V" = all ]; then dsl="cutile-dsl,cute-dsl"; else
    echo "$V" | tr ',' '\n' | grep -qE '^v[1-9][0-9]*$' && dsl="cutile-dsl"
    echo "$V" | tr ',' '\n' | grep -qE '^v[0-9]+_cute$' && dsl="${dsl:+$dsl,}cute-dsl"; fi
  run doctor 60 python3 -m pytest_kforge.doctor ${dsl:+--dsl "$dsl"}
  S="file://$KF/bench"
  name=suite-all
  [ "$V" = all ] || name="suite-all-$(echo "$V" | awk -F, '{print (NF > 1) ? $1 "-" $NF : $1}')"
  if [ -z "${SKIP_COMPARE:-}" ] && [ "$V" != all ] && ! { echo ",$V," | grep -q ",v0," && echo ",$V," | grep -q ",$BEST,"; }; then
    log "suite-compare: skipped: VERSIONS=$V lacks v0 or BEST=$BEST, and it compares those with this call's saved run"
    SKIP_COMPARE=1
  fi
  reserve=0  # what the commands after the suite need
  [ -n "${SKIP_COMPARE:-}" ] || reserve=$((reserve + 100 + 10))
  [ -n "${SKIP_NCU:-}" ] || reserve=$((reserve + 120 + 10))
  cap=$(( $(left) - 10 - reserve )); [ "$cap" -ge 15 ] || cap=0  # 0: not run
  # WORKERS=K: K xdist workers share the GPU (compiles in parallel, GPU sections under its lock;
  # timings noisier than a run of their own: README "Parallel runs").  --durations: run 8's 36
  # versions took 516 s with the GPU busy ~3% of it (smi log), so the slowest tests say where it goes
  # (a cuTile version has no prepare(): its first launch of a shape compiles inside the GPU lock)
  par=(); [ "${WORKERS:-1}" -gt 1 ] && par=(-n "$WORKERS" --kforge-workers-per-gpu "$WORKERS")
  TAIL=30 run "$name" "${SUITE_S:-$cap}" python3 -m pytest --kernel mla --kernel-version "$V" "${par[@]}" \
      -p no:cacheprovider -rs -v --durations=25 --kforge-examples 8 --kforge-json="$KF/$name.json" \
      --benchmark-autosave --benchmark-storage="$S"
  if [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ] || [ "$RC" -eq 125 ]; then
    missed=$(unfinished "$V" "$KF/$name.log")
    log "$name: versions NOT RUN to the end (no finished trial benchmark): ${missed:-none}"
    [ -z "$missed" ] || log "$name: run them in another call: bash scripts/h200.sh all VERSIONS=$missed BEST=$BEST" \
        "(add SKIP_COMPARE=1 SKIP_NCU=1 unless v0 and $BEST are among them)"
    echo "${missed:-}" >"$KF/$name.not-run.txt"
    # the trials that did finish are in the journal: rebuild the results JSON from it
    [ ! -f "$KF/$name.json.partial.jsonl" ] || run journal 30 python3 -m pytest_kforge.journal \
        "$KF/$name.json.partial.jsonl" "$KF/$name.json"
  fi
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
candidates)
  # new CuTe versions against BEST in one call (cute + peers staged): self-check (its timeouts guard a hang),
  # optional timeline probes (TRACE=kind,...: the *_trace kinds), then, only when the self-check passed, the
  # comparison with BEST and fa3 and the harness on BEST + VERSIONS (what runs 13-16 ran from ad-hoc scripts)
  # VERSIONS may name probe kinds as kind:<kind>[@<version>] (the self-check runs them with that version's CONFIG
  # and times them beside BEST); the compare and the harness take the real versions only
  V="${VERSIONS:?VERSIONS=v46_cute[,...]: the candidate versions (or kind:<kind> probe kinds)}"
  SV="$V"; case ",$V," in *,kind:*) SV="$BEST,$V" ;; esac
  TAIL=40 run selfcheck "${SELFCHECK_S:-200}" python3 kernels/mla/tools/cute_selfcheck.py --versions "$SV"
  SC=$RC
  # GPU_TESTS="tests/test_kernels_cute.py -k v57": repository GPU tests of the candidates, in the same call
  [ -z "${GPU_TESTS:-}" ] || TAIL=30 run gpu-tests "${GPU_TESTS_S:-150}" python3 -m pytest $GPU_TESTS \
      -p no:cacheprovider -p no:randomly -rs -q
  V=$(echo "$V" | tr ',' '\n' | grep -v '^kind:' | paste -sd, -)
  T="${TRACE:-}"
  for k in ${T//,/ }; do
    TAIL=30 run "trace-${k%_trace}" 60 python3 kernels/mla/tools/cute_trace.py --trial "${TRACE_TRIAL:-spec}" --kind "$k"
  done
  [ -z "$T" ] || grep -H "pair period\|^probe" "$KF"/trace-*.log >"$KF/periods.txt" 2>/dev/null
  if [ "$SC" -ne 0 ]; then
    log "candidates: self-check rc=$SC: not timed (see $KF/selfcheck.log)"
  elif [ -z "$V" ]; then
    log "candidates: only probe kinds: their self-check timings (beside $BEST) are the comparison"
  else
    # SKIP_COMPARE=1: the harness alone (the peers' side-by-side costs ~90 s)
    [ -n "${SKIP_COMPARE:-}" ] || TAIL=20 run compare "${COMPARE_S:-150}" python3 -m benchmarks.compare --kernel mla \
        --versions "$BEST,$V" --peers flashinfer_fa3 --trial decode,spec --rounds 60 --out "$KF/peers.md" \
        --json "$KF/peers.json"
    n=$(echo "$BEST,$V" | tr ',' '\n' | sort -u | grep -c .); [ "$n" -le 4 ] || n=4  # workers share the GPU
    TAIL=30 run harness "${HARNESS_S:-200}" python3 -m pytest --kernel mla --kernel-version "$BEST,$V" -n "$n" \
        --kforge-workers-per-gpu "$n" --kforge-examples 8 -p no:cacheprovider --kforge-json="$KF/suite.json"
  fi
  ;;
profile)
  # ncu profile-contract reports (reports/mla/<v>/<trial>.md|.json and the devlog's perf block) for VERSIONS, in
  # the order given (the cap may cut the tail): correctness on W workers first, then one ncu run per version and
  # trial on the controller (~20 s each). The reports come back in tree-profile.tgz, without the .ncu-rep files.
  V=$(mla_versions "${VERSIONS:?profile: set VERSIONS=v46_cute,... (the versions to profile)}") || { pack; exit 2; }
  TAIL=45 run profile "${PROFILE_S:-$(( $(left) - 20 ))}" python3 -m pytest --kernel mla --kernel-version "$V" \
      -n "${WORKERS:-8}" --kforge-workers-per-gpu "${WORKERS:-8}" --kforge-profile --kforge-no-bench \
      --kforge-examples 2 -p no:cacheprovider -rs
  ;;
cute)
  V="${VERSIONS:-v4_cute}"
  TAIL=40 run cute-selfcheck "${SELFCHECK_S:-240}" python3 kernels/mla/tools/cute_selfcheck.py --versions "$V"
  TAIL=30 run suite-cute "${SUITE_S:-240}" python3 -m pytest --kernel mla --kernel-version "$V" -p no:cacheprovider \
      -rs --kforge-examples 8 --kforge-json="$KF/suite-cute.json"
  [ -n "${SKIP_PROFILE:-}" ] || TAIL=30 run profile-cute 200 python3 -m pytest --kernel mla --kernel-version "$V" \
      --kforge-profile --kforge-no-bench -p no:cacheprovider -rs
  ;;
*) echo "unknown step $step"; exit 2 ;;
esac
# bring back: $KF plus everything the step changed or created in the checkout
git status --porcelain --untracked-files=all | awk '{print $2}' | grep -v '^\.gpu/' >"$KF/changed.txt"
pack
case "$step" in loop|all|cutile) tar czf "$OUT/tree-$step.tgz" -T "$KF/changed.txt" 2>/dev/null ;;
  profile) tar czf "$OUT/tree-$step.tgz" --exclude='*.ncu-rep' -T "$KF/changed.txt" 2>/dev/null ;; esac
ls -la "$OUT"

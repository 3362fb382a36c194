# Sourced by the device-call scripts (scripts/*_gpu.sh, scripts/mla_serving.sh): `step NAME CAP CMD...` runs CMD
# with its log in $OUT/NAME.log, capped at CAP seconds and at what is left of STEP_S (default $STEP_DEFAULT, set by
# the caller) since the script started; a step with < 15 s left is skipped, so the call ends before its limit.
OUT=${OUT:-/tmp/kf-out}; mkdir -p "$OUT"
T0=$(date +%s)
left() { echo $(( ${STEP_S:-${STEP_DEFAULT:-520}} - ($(date +%s) - T0) )); }
step() {
    local name=$1 cap=$2; shift 2
    local l; l=$(left)
    if [ "$l" -lt 15 ]; then echo "== $name: skipped (${l} s left)"; return; fi
    [ "$cap" -gt "$l" ] && cap=$l
    echo "== $name (cap ${cap} s): $*"
    local t=$(date +%s)
    timeout "$cap" "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    [ $rc -eq 124 ] && echo "   TIME CAP HIT"
    echo "   rc=$rc in $(( $(date +%s) - t )) s; tail:"; tail -4 "$OUT/$name.log" | sed 's/^/   /'
}

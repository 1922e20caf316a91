# Sourced by the test scripts: `phase NAME CMD...` runs CMD and, when $CONVEYOR_PHASES names a
# file, appends one line to it: seconds, exit status and NAME, tab-separated. scripts/test.sh
# prints those lines as a table at its end (phase_table), whatever failed before.

# phase NAME CMD...: runs CMD (a program or script: a shell function run this way would not stop
# at its first error) and records it; returns its exit status.
phase() {
  local name=$1
  shift
  local start=$SECONDS rc=0
  "$@" || rc=$?
  phase_record "$name" $((SECONDS - start)) $rc
  return $rc
}

# phase_record NAME SECONDS STATUS: records a phase timed by the caller.
phase_record() {
  if [ -n "${CONVEYOR_PHASES:-}" ]; then
    printf '%s\t%s\t%s\n' "$2" "$3" "$1" >>"$CONVEYOR_PHASES"
  fi
}

# phase_table FILE: the phases recorded in FILE, their minutes and the total, on stderr.
phase_table() {
  [ -s "$1" ] || return 0
  awk -F '\t' '
    { t += $1; printf "test: %-44s %7.1f min  %s\n", $3, $1 / 60, ($2 == 0 ? "ok" : "FAILED (exit " $2 ")") }
    END { printf "test: %-44s %7.1f min\n", "total", t / 60 }' "$1" >&2
}

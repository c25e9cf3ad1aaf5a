# Shared by scripts/koma, scripts/test and scripts/build-portable (sourced, not run).

# Runs `cargo build "$@"` quietly: prints nothing when the build is fresh, one line when it has to
# compile, and cargo's full output on failure.
quiet_cargo_build() {
  local log announced=0 line status
  log=$(mktemp "${TMPDIR:-/tmp}/koma-build.XXXXXX")
  set +e
  cargo build --color=never "$@" 2>&1 | while IFS= read -r line; do
    printf '%s\n' "$line" >>"$log"
    case $line in
      *Compiling*)
        if [ $announced -eq 0 ]; then
          echo "koma: compiling (a cold build of the workspace and tch takes a few minutes) …" >&2
          announced=1
        fi ;;
    esac
  done
  status=${PIPESTATUS[0]}
  set -e
  if [ "$status" -ne 0 ]; then
    cat "$log" >&2
    rm -f "$log"
    echo "koma: cargo build failed (exit $status)" >&2
    return "$status"
  fi
  rm -f "$log"
}

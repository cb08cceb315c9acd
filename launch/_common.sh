# Shared by the launchers: find the venv's python, run or print the command.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-$here/.venv/bin/python}"

launch() {
  # PRINT_ONLY=1 prints the command (shell-quoted) instead of running it.
  if [ "${PRINT_ONLY:-0}" = 1 ]; then
    printf '%q ' "$python" -m pipeline.run "$@"; echo
  else
    cd "$here" && exec "$python" -m pipeline.run "$@"
  fi
}

usage_if_short() {  # usage_if_short NEEDED GIVEN SCRIPT
  if [ "$2" -lt "$1" ]; then
    sed -n '2,/^set /p' "$3" | sed '$d' | sed 's/^# \{0,1\}//'
    exit 2
  fi
}

#!/bin/bash
# The alpine interop reader (tests/interop/readers/alpine): Alpine from Debian, driven
# under a private tmux server by python3 (the reader never sends mail: no MTA needed).
# Only what is missing is installed; apt-get update only then.
# Run by scripts/install-test-deps; root or sudo.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH

log() { echo "install-test-deps: alpine: $*" >&2; }
SUDO=()
[ "$(id -u)" = 0 ] || SUDO=(sudo -n env DEBIAN_FRONTEND=noninteractive)

# package -> a file that proves it is usable
declare -A WANT=(
    [alpine]=/usr/bin/alpine
    [tmux]=/usr/bin/tmux
    [python3]=/usr/bin/python3
)
missing=()
for p in "${!WANT[@]}"; do
    [ -x "${WANT[$p]}" ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "installing: ${missing[*]}"
    "${SUDO[@]}" apt-get update -q >&2
    "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
fi
log "ok"

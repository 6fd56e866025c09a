#!/bin/bash
# DKIM signer and verifier for tests/mta/dkim_e2e.rs and verified_e2e.rs: OpenDKIM
# (run by the tests in the foreground with their own config and key, never as a system
# service), its tools (opendkim-genkey), and python3-dkim (signing and verifying
# without DNS).
# Only what is missing is installed. Run by scripts/install-test-deps; root or sudo.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH

log() { echo "install-test-deps: dkim: $*" >&2; }
SUDO=()
[ "$(id -u)" = 0 ] || SUDO=(sudo -n env DEBIAN_FRONTEND=noninteractive)
as_root() { "${SUDO[@]}" "$@"; }

# package -> a command that proves it is usable
declare -A WANT=(
    [opendkim]="test -x /usr/sbin/opendkim"
    [opendkim-tools]="test -x /usr/sbin/opendkim-genkey"
    [python3-dkim]="/usr/bin/python3 -c 'import dkim'"
)
missing=()
for p in "${!WANT[@]}"; do
    bash -c "${WANT[$p]}" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "installing: ${missing[*]}"
    # policy-rc.d exit 101 keeps the opendkim package from starting its daemon;
    # only ours is removed afterwards.
    own_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' | as_root tee /usr/sbin/policy-rc.d >/dev/null
        as_root chmod 755 /usr/sbin/policy-rc.d
        own_policy=1
    fi
    trap '[ "$own_policy" = 1 ] && as_root rm -f /usr/sbin/policy-rc.d; true' EXIT
    as_root apt-get update -q >&2
    as_root apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
fi
# The tests start their own opendkim; a system one must neither run nor start at
# boot (the package enables it). systemctl disable also works without a running
# systemd (it edits the unit links and the SysV rc links).
if [ -x /etc/init.d/opendkim ] && [ ! -d /run/systemd/system ]; then
    as_root /etc/init.d/opendkim stop >/dev/null 2>&1 || true
fi
if command -v systemctl >/dev/null; then
    now=()
    [ -d /run/systemd/system ] && now=(--now)
    as_root systemctl disable "${now[@]}" opendkim >/dev/null 2>&1 || true
elif command -v update-rc.d >/dev/null; then
    as_root update-rc.d opendkim disable >/dev/null 2>&1 || true
fi
log "ok: $(/usr/sbin/opendkim -V 2>/dev/null | head -n1)"

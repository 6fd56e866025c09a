#!/bin/bash
# rspamd for tests/mta/rspamd_e2e.rs (a second milter in the same smtpd_milters list) and
# verified_e2e.rs (a DKIM verifier, its keys from a DNS server of the test's own). The
# tests run their own `rspamd -f -c CONF` (proxy worker in milter mode, self_scan, only
# the modules a test names, no redis); the Debian package's service must neither start
# nor stay enabled. Installed only when missing. Run by scripts/install-test-deps; root or sudo.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH

log() { echo "install-test-deps: rspamd: $*" >&2; }
SUDO=()
[ "$(id -u)" = 0 ] || SUDO=(sudo -n env DEBIAN_FRONTEND=noninteractive)
as_root() { "${SUDO[@]}" "$@"; }

if [ ! -x /usr/bin/rspamd ] || ! getent passwd _rspamd >/dev/null; then
    log "installing rspamd"
    # policy-rc.d exit 101 keeps the maintainer script from starting the service;
    # only ours is removed afterwards.
    own_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' | as_root tee /usr/sbin/policy-rc.d >/dev/null
        as_root chmod 755 /usr/sbin/policy-rc.d
        own_policy=1
    fi
    trap '[ "$own_policy" = 1 ] && as_root rm -f /usr/sbin/policy-rc.d; true' EXIT
    # Without recommends: no redis-server, which the test's configuration does not use.
    as_root apt-get update -q >&2
    as_root apt-get install -y -q --no-install-recommends rspamd >&2
fi

# Also on a re-run: whatever started or enabled it since, nothing system-wide stays.
# Disabling works on the unit and rc.d links, with or without a running systemd.
if [ -d /run/systemd/system ]; then
    as_root systemctl disable --now rspamd >/dev/null 2>&1 || true
else
    [ ! -x /etc/init.d/rspamd ] || as_root /etc/init.d/rspamd stop >/dev/null 2>&1 || true
    as_root systemctl disable rspamd >/dev/null 2>&1 || true
fi
as_root update-rc.d rspamd disable >/dev/null 2>&1 || true
log "ok: $(/usr/bin/rspamd --version 2>/dev/null | head -1)"

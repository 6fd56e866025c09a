#!/bin/bash
# The PyPI `miltertest` library (a milter client in pure Python, independent of
# indymilter, OpenDKIM's miltertest and the MTAs) for tests/milter/milter_protocol.rs,
# in a virtual environment of its own under $MIMEREF_PY_VENV (default
# /opt/mimeref-test/py-miltertest), made with Debian's python3 and python3-venv.
# Only what is missing is installed. Run by scripts/install-test-deps; root or sudo.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH
VENV=${MIMEREF_PY_VENV:-/opt/mimeref-test/py-miltertest}
VERSION=1.0.0

log() { echo "install-test-deps: py-miltertest: $*" >&2; }
SUDO=()
[ "$(id -u)" = 0 ] || SUDO=(sudo -n env DEBIAN_FRONTEND=noninteractive)
as_root() { "${SUDO[@]}" "$@"; }

if ! /usr/bin/python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    log "installing python3-venv"
    as_root apt-get update -q >&2
    as_root apt-get install -y -q --no-install-recommends python3 python3-venv >&2
fi
have() {
    [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c '
import importlib.metadata, sys
sys.exit(importlib.metadata.version("miltertest") != sys.argv[1])' "$VERSION" >/dev/null 2>&1
}
if ! have; then
    log "installing miltertest==$VERSION into $VENV"
    as_root mkdir -p "$(dirname "$VENV")"
    as_root /usr/bin/python3 -m venv "$VENV"
    as_root "$VENV/bin/pip" install -q --disable-pip-version-check "miltertest==$VERSION" >&2
    have || { log "miltertest $VERSION not importable from $VENV"; exit 1; }
fi
log "ok: miltertest $VERSION in $VENV"

#!/bin/bash
# Interop readers (scripts/interop, tests/interop/readers): GMime 3 through python3-gi,
# Perl MIME-tools and URI, Ruby mail, and the Node packages of tests/interop
# (mailparser; playwright-core for the Chromium reader). Only what is missing is
# installed. Run by scripts/install-test-deps; root or sudo.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH
cd "$(dirname "$0")/../.."

log() { echo "install-test-deps: readers: $*" >&2; }
SUDO=()
[ "$(id -u)" = 0 ] || SUDO=(sudo -n env DEBIAN_FRONTEND=noninteractive)

# package -> a command that proves it is usable
declare -A WANT=(
    [python3-gi]="/usr/bin/python3 -c 'import gi'"
    [gir1.2-gmime-3.0]="/usr/bin/python3 -c 'import gi; gi.require_version(\"GMime\", \"3.0\"); from gi.repository import GMime'"
    [libmime-tools-perl]="perl -MMIME::Parser -e 1"
    [liburi-perl]="perl -MURI -e 1"
    [ruby-mail]="ruby -e 'require \"mail\"'"
    [nodejs]="node --version"
    [npm]="npm --version"
)
missing=()
for p in "${!WANT[@]}"; do
    bash -c "${WANT[$p]}" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "installing: ${missing[*]}"
    "${SUDO[@]}" apt-get update -q >&2
    "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
fi

# Node packages, exactly as locked; again only when the installed tree differs.
lock=tests/interop/package-lock.json
stamp=tests/interop/node_modules/.package-lock.json
if [ ! -f "$stamp" ] || ! node -e '
    const a = require(process.argv[1]).packages, b = require(process.argv[2]).packages;
    for (const k of Object.keys(a)) if (k && (!b[k] || b[k].version !== a[k].version)) process.exit(1);
' "$PWD/$lock" "$PWD/$stamp"; then
    log "npm ci in tests/interop"
    (cd tests/interop && npm ci --no-audit --no-fund --loglevel=error >&2)
fi
log "ok"

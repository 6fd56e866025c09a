#!/bin/bash
# The horde-mime interop reader (tests/interop/readers/horde-mime): Horde_Mime from
# Debian (php-horde-mime, which brings Horde_Util, Horde_Stream, ...), run by php-cli
# with mbstring (charsets) and the DOM extension (Horde_Domhtml, for
# Horde_Mime_Related::cidReplace). Only what is missing is installed; apt-get update
# only then. Run by scripts/install-test-deps; root or sudo.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH

log() { echo "install-test-deps: horde-mime: $*" >&2; }
SUDO=()
[ "$(id -u)" = 0 ] || SUDO=(sudo -n env DEBIAN_FRONTEND=noninteractive)

# package -> a command that proves it is usable
declare -A WANT=(
    [php-cli]="php -r 'exit(0);'"
    [php-mbstring]="php -r 'exit(function_exists(\"mb_check_encoding\") ? 0 : 1);'"
    [php-xml]="php -r 'exit(class_exists(\"DOMDocument\") ? 0 : 1);'"
    [php-horde-mime]="test -f /usr/share/php/Horde/Mime/Related.php && test -f /usr/share/php/Horde/Domhtml.php"
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
log "ok"

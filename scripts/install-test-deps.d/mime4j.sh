#!/bin/bash
# The mime4j interop reader (tests/interop/readers/mime4j): Apache James mime4j from
# Debian (libapache-mime4j-java) and a JDK to compile the reader's one class against it
# (default-jdk-headless). Only what is missing is installed; apt-get update only then.
# Run by scripts/install-test-deps; root or sudo.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH

log() { echo "install-test-deps: mime4j: $*" >&2; }
SUDO=()
[ "$(id -u)" = 0 ] || SUDO=(sudo -n env DEBIAN_FRONTEND=noninteractive)

# package -> a command that proves it is usable
declare -A WANT=(
    [libapache-mime4j-java]="test -f /usr/share/java/apache-mime4j-core.jar && test -f /usr/share/java/apache-mime4j-dom.jar"
    [default-jdk-headless]="javac -version && java -version"
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

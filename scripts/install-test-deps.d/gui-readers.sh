#!/bin/bash
# Dependencies of the real-program interop readers in tests/interop/readers/
# (chromium, neomutt, thunderbird; see tests/interop/readers/README-gui.md):
#   Debian packages chromium, thunderbird, neomutt, tmux, python3, xvfb, imagemagick, xdotool, fonts,
#   nodejs + npm, and playwright-core/pngjs from the npm registry (npm ci in
#   tests/interop/readers/chromium.d; it drives the system Chromium, it never
#   downloads a browser).
# Idempotent: installs only what is missing; 'apt-get update' only then.
# Run as root, or sourced by scripts/install-test-deps.
# (A function body, so that 'source' does not leak set -e or variables.)
mimeref_gui_readers_deps() {
    set -euo pipefail
    export DEBIAN_FRONTEND=noninteractive
    local root here log
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    root=$(cd "$here/../.." && pwd)
    log() { echo "install-test-deps (gui-readers): $*" >&2; }
    local -a sudo=()
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null || { log "must run as root (or with sudo)"; return 1; }
        sudo=(sudo -n env DEBIAN_FRONTEND=noninteractive)
    fi
    # package -> a file that proves it is usable
    local -A want=(
        [chromium]=/usr/bin/chromium
        [thunderbird]=/usr/bin/thunderbird
        [neomutt]=/usr/bin/neomutt
        [tmux]=/usr/bin/tmux
        [xvfb]=/usr/bin/Xvfb
        [xauth]=/usr/bin/xauth
        [imagemagick]=/usr/bin/import
        [xdotool]=/usr/bin/xdotool
        [fonts-dejavu-core]=/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf
        [fonts-liberation]=/usr/share/fonts/truetype/liberation/LiberationSerif-Regular.ttf
        [nodejs]=/usr/bin/node
        [npm]=/usr/bin/npm
        [python3]=/usr/bin/python3
    )
    local -a missing=()
    local p
    for p in "${!want[@]}"; do
        [ -e "${want[$p]}" ] && continue
        # node/npm may come from elsewhere (e.g. NodeSource): accept them on PATH
        case $p in nodejs) command -v node >/dev/null && continue ;; npm) command -v npm >/dev/null && continue ;; esac
        missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        log "installing: ${missing[*]}"
        "${sudo[@]}" apt-get update -q >&2
        "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
    fi
    local d=$root/tests/interop/readers/chromium.d
    if [ ! -d "$d/node_modules/playwright-core" ] || [ ! -d "$d/node_modules/pngjs" ]; then
        log "npm ci in $d"
        (cd "$d" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error >&2)
    fi
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    mimeref_gui_readers_deps
else
    ( mimeref_gui_readers_deps )
fi

#!/bin/bash
# IMAP readers of the interop matrix (scripts/interop, tests/interop/readers/*-imap):
#   - Dovecot (dovecot-imapd, dovecot-lmtpd), installed; its system service is
#     disabled: the harness runs a private instance on loopback,
#   - Cyrus IMAP: cyrus-imapd conflicts with dovecot-imapd (both provide imap-server),
#     so cyrus-imapd and cyrus-common are unpacked under $MIMEREF_CYRUS_ROOT (default
#     /opt/mimeref-test/cyrus) with dpkg-deb -x, as the Sendmail install does, and only
#     the shared libraries they load are installed; sasl2-bin makes the private sasldb,
#   - Roundcube (roundcube-core with its SQLite flavour, php-cli): the readers run its
#     rcube_imap/rcube_message code from the command line; php8.2-cgi satisfies the
#     "php" dependency so that no web server is pulled in, and dbconfig-common is told
#     not to make a database (the readers need none),
#   - Evolution's Camel (evolution-data-server for the IMAPX provider, gir1.2-camel-1.2
#     for python3-gi).
# Idempotent: installs only what is missing; apt-get update only then.
# Run by scripts/install-test-deps; root or sudo.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH
CYRUS_ROOT=${MIMEREF_CYRUS_ROOT:-/opt/mimeref-test/cyrus}

log() { echo "install-test-deps: imap: $*" >&2; }
SUDO=()
[ "$(id -u)" = 0 ] || SUDO=(sudo -n env DEBIAN_FRONTEND=noninteractive)
as_root() { "${SUDO[@]}" "$@"; }

# package -> a command that proves it is usable
declare -A WANT=(
    [dovecot-imapd]="test -x /usr/lib/dovecot/imap"
    [dovecot-lmtpd]="test -x /usr/lib/dovecot/lmtp"
    [php-cli]="php -r 'exit(0);'"
    [php-mbstring]="php -r 'exit(function_exists(\"mb_strlen\") ? 0 : 1);'"
    [php-intl]="php -r 'exit(class_exists(\"Normalizer\") ? 0 : 1);'"
    [php8.2-cgi]="test -x /usr/bin/php-cgi8.2"
    [roundcube-core]="test -f /usr/share/roundcube/program/lib/Roundcube/rcube_imap.php"
    [roundcube-sqlite3]="dpkg-query -W -f='\${Status}' roundcube-sqlite3 | grep -q 'ok installed'"
    [evolution-data-server]="test -f /usr/lib/evolution-data-server/camel-providers/libcamelimapx.so"
    [gir1.2-camel-1.2]="/usr/bin/python3 -c 'import gi; gi.require_version(\"Camel\", \"1.2\"); from gi.repository import Camel'"
    [sasl2-bin]="test -x /usr/sbin/saslpasswd2"
    [libsasl2-modules]="test -f /usr/lib/x86_64-linux-gnu/sasl2/libplain.so || dpkg-query -W -f='\${Status}' libsasl2-modules | grep -q 'ok installed'"
    # what the unpacked Cyrus binaries load (cyrus-common's Depends, less the MTA,
    # adduser and the scripts' tools)
    [libclamav12]="dpkg-query -W -f='\${Status}' libclamav12 | grep -q 'ok installed'"
    [libical3]="dpkg-query -W -f='\${Status}' libical3 | grep -q 'ok installed'"
    [libjansson4]="dpkg-query -W -f='\${Status}' libjansson4 | grep -q 'ok installed'"
    [libxapian30]="dpkg-query -W -f='\${Status}' libxapian30 | grep -q 'ok installed'"
    [libzephyr4]="dpkg-query -W -f='\${Status}' libzephyr4 | grep -q 'ok installed'"
    [libwrap0]="dpkg-query -W -f='\${Status}' libwrap0 | grep -q 'ok installed'"
    [libpq5]="dpkg-query -W -f='\${Status}' libpq5 | grep -q 'ok installed'"
    [libldap-2.5-0]="dpkg-query -W -f='\${Status}' libldap-2.5-0 | grep -q 'ok installed'"
    [libpcre3]="dpkg-query -W -f='\${Status}' libpcre3 | grep -q 'ok installed'"
)
missing=()
for p in "${!WANT[@]}"; do
    bash -c "${WANT[$p]}" >/dev/null 2>&1 || missing+=("$p")
done
UPDATED=0
apt_update() { [ "$UPDATED" = 1 ] || { as_root apt-get update -q >&2; UPDATED=1; }; }
if [ ${#missing[@]} -gt 0 ]; then
    log "installing: ${missing[*]}"
    # policy-rc.d exit 101 keeps the maintainer scripts from starting Dovecot;
    # only ours is removed afterwards.
    own_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' | as_root tee /usr/sbin/policy-rc.d >/dev/null
        as_root chmod 755 /usr/sbin/policy-rc.d
        own_policy=1
    fi
    trap '[ "$own_policy" = 1 ] && as_root rm -f /usr/sbin/policy-rc.d; true' EXIT
    printf '%s\n' "roundcube-core roundcube/dbconfig-install boolean false" \
        | as_root debconf-set-selections
    apt_update
    as_root apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
fi

# Also on a re-run: the harness starts its own Dovecot, a system one neither runs nor
# starts at boot. Disabling works on the unit and rc.d links, with or without systemd.
if [ -d /run/systemd/system ]; then
    as_root systemctl disable --now dovecot >/dev/null 2>&1 || true
else
    [ ! -x /etc/init.d/dovecot ] || as_root /etc/init.d/dovecot stop >/dev/null 2>&1 || true
    as_root systemctl disable dovecot >/dev/null 2>&1 || true
fi
as_root update-rc.d dovecot disable >/dev/null 2>&1 || true

if [ ! -x "$CYRUS_ROOT/usr/lib/cyrus/bin/imapd" ] || [ ! -x "$CYRUS_ROOT/usr/lib/cyrus/bin/lmtpd" ]; then
    log "unpacking cyrus-imapd and cyrus-common into $CYRUS_ROOT"
    apt_update
    dl=$(mktemp -d)
    # apt-get download runs as the _apt user when root: the directory must be
    # writable by it.
    chmod 0777 "$dl"
    (cd "$dl" && as_root apt-get download -q cyrus-imapd cyrus-common >&2)
    as_root mkdir -p "$CYRUS_ROOT"
    for deb in "$dl"/*.deb; do as_root dpkg-deb -x "$deb" "$CYRUS_ROOT"; done
    rm -rf "$dl"
fi
bin=$CYRUS_ROOT/usr/lib/cyrus/bin
for b in master imapd lmtpd mkimap; do
    [ -x "$bin/$b" ] || [ "$b" = mkimap ] || { log "cyrus $b missing after unpack"; exit 1; }
done
# Every library the unpacked binaries load must resolve (their own beside them).
unresolved=$(LD_LIBRARY_PATH=$CYRUS_ROOT/usr/lib/x86_64-linux-gnu:$CYRUS_ROOT/usr/lib/$(uname -m)-linux-gnu \
    ldd "$bin/master" "$bin/imapd" "$bin/lmtpd" 2>&1 | grep 'not found' | sort -u || true)
if [ -n "$unresolved" ]; then
    log "cyrus libraries not found: $unresolved"
    exit 1
fi
log "ok: $(/usr/sbin/dovecot --version 2>/dev/null | head -n1), cyrus in $CYRUS_ROOT, roundcube $(sed -n "s/.*define('RCMAIL_VERSION', '\([^']*\)'.*/\1/p" /usr/share/roundcube/program/include/iniset.php 2>/dev/null), camel $(dpkg-query -W -f='${Version}' libcamel-1.2-64 2>/dev/null)"

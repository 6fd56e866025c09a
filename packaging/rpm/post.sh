# %post ($1: 1 on install, 2 and more on upgrade). As the Debian package's
# postinst: the config directory readable by the daemon, not by all, and what a
# unix socket for a chrooted Postfix needs (mimeref-milter(8), "POSTFIX"): the
# set-group-ID directory /var/spool/postfix/mimeref-milter gives the socket
# group postfix. Postfix installed later: run these lines again, or see the man
# page. Then %systemd_post: presets decide whether the unit is enabled.
chown root:mimeref-milter /etc/mimeref-milter && chmod 0750 /etc/mimeref-milter
if getent group postfix >/dev/null; then
    if ! id -nG mimeref-milter | tr ' ' '\n' | grep -qx postfix; then
        usermod -a -G postfix mimeref-milter
    fi
    if [ -d /var/spool/postfix ] && [ ! -e /var/spool/postfix/mimeref-milter ]; then
        install -d -o mimeref-milter -g postfix -m 2750 /var/spool/postfix/mimeref-milter
    fi
fi
if [ "$1" -eq 1 ]; then
    systemctl --no-reload preset mimeref-milter.service >/dev/null 2>&1 || :
fi

# %postun, as %systemd_postun_with_restart: after an upgrade the running daemon
# is restarted on the new binary. On removal the socket directory in Postfix's
# queue directory goes when empty (the daemon removes its socket when it
# stops); the system user stays, as Fedora's guidelines want.
if [ "$1" -ge 1 ]; then
    systemctl try-restart mimeref-milter.service >/dev/null 2>&1 || :
elif [ -d /var/spool/postfix/mimeref-milter ]; then
    rmdir /var/spool/postfix/mimeref-milter 2>/dev/null || :
fi

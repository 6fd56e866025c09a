# %postun, as %systemd_postun_with_restart: after an upgrade the running daemon
# is restarted on the new binary. On removal the socket directory in Postfix's
# queue directory goes when empty (the daemon removes its socket when it
# stops); the system user stays, as Fedora's guidelines want.
#
# Also on removal, the directories the package's files were in, each when empty,
# deepest first: a package built with rpmbuild owns them through %dir, but
# cargo-generate-rpm 0.21 cannot put a directory in a package (its `dir = true`
# assets fail with "No such file or directory"), so rpm -e would leave them
# (scripts/check-systemd erases the package and looks).
if [ "$1" -ge 1 ]; then
    systemctl try-restart mimeref-milter.service >/dev/null 2>&1 || :
else
    for d in /var/spool/postfix/mimeref-milter /etc/mimeref-milter \
        /usr/share/doc/mimeref-milter /usr/share/licenses/mimeref-milter \
        /usr/lib/systemd/system/postfix@.service.d \
        /usr/share/zsh/site-functions /usr/share/fish/vendor_completions.d /usr/share/fish; do
        [ -d "$d" ] && rmdir "$d" 2>/dev/null || :
    done
fi

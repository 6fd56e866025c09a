# %preun, as %systemd_preun: on removal ($1 = 0), not on upgrade, stop and
# disable the service.
if [ "$1" -eq 0 ]; then
    systemctl --no-reload disable --now mimeref-milter.service >/dev/null 2>&1 || :
fi

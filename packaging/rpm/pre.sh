# %pre: the system user, from the sysusers.d file this package installs (the
# same lines; scripts/check-rpm checks that they agree), before any file owned
# by it is unpacked. What Fedora's %sysusers_create_compat expands to.
systemd-sysusers --replace=/usr/lib/sysusers.d/mimeref-milter.conf - <<'SYSUSERS' || :
u mimeref-milter - "mimeref-milter daemon" /nonexistent -
SYSUSERS

//! Whether a unix socket with `socket_group` can work, judged before the daemon binds
//! it, by `serve` as it loads its configuration (as the service's user, under the
//! unit) and by `config-check` (as whoever runs it, the unit's ExecReload= among
//! them): the two ways this setup used to fail only once the service ran were a group the daemon's user may not give the socket (chown(2) needs
//! membership: "Operation not permitted" at start) and a directory the group cannot
//! enter (the daemon starts, and the MTA gets "Permission denied" on every message).
//!
//! Users and groups are read from /etc/passwd and /etc/group, where Debian keeps
//! system users; the daemon's own groups come from the kernel.
//!
//! Under the unit's PrivateUsers= the service runs in a user namespace that maps only
//! root and its own user and group: every other group, postfix among them, shows as
//! the overflow gid (65534, nogroup) on files and in the process's own groups, and
//! chown(2) cannot name it. Such a group can neither be checked nor given from inside;
//! a set-group-ID directory of that group still gives it to the socket, and a
//! directory that shows an unmapped group is taken to be that one ([`GidMap`]).

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// A numeric gid, or a group name looked up in /etc/group.
pub fn group_id(group: &str) -> Option<u32> {
    if let Ok(n) = group.parse() {
        return Some(n);
    }
    Accounts::read()
        .groups
        .into_iter()
        .find(|g| g.name == group)
        .map(|g| g.gid)
}

/// The name of the group `gid`, from /etc/group.
pub fn group_name(gid: u32) -> Option<String> {
    Accounts::read()
        .groups
        .into_iter()
        .find(|g| g.gid == gid)
        .map(|g| g.name)
}

/// Whether the socket at `path` has group `gid`: as seen, or (when `gid` is not
/// mapped into this process's user namespace) by the set-group-ID directory it was
/// created in, whose group it shares and which cannot be named from here either.
pub fn socket_has_group(path: &Path, gid: u32) -> bool {
    let Ok(sock) = std::fs::metadata(path) else {
        return false;
    };
    if sock.gid() == gid {
        return true;
    }
    let ids = GidMap::of_self();
    ids.hidden(gid)
        && ids.hidden(sock.gid())
        && path
            .parent()
            .and_then(|d| std::fs::metadata(d).ok())
            .is_some_and(|d| d.mode() & 0o2000 != 0 && d.gid() == sock.gid())
}

/// The process's umask, from /proc/self/status (reading it with umask(2) would
/// change it).
fn own_umask() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_umask(&status)
}

fn parse_umask(status: &str) -> Option<u32> {
    let v = status.lines().find_map(|l| l.strip_prefix("Umask:"))?;
    u32::from_str_radix(v.trim(), 8).ok()
}

/// The group ids of this process's user namespace (/proc/self/gid_map): inside
/// systemd's PrivateUsers= only root and the service's own group; outside any user
/// namespace all of them.
pub(super) struct GidMap(Vec<(u64, u64)>);

impl GidMap {
    fn of_self() -> GidMap {
        std::fs::read_to_string("/proc/self/gid_map")
            .map_or_else(|_| GidMap::all(), |t| GidMap::parse(&t))
    }

    fn all() -> GidMap {
        GidMap(vec![(0, u64::from(u32::MAX))])
    }

    /// Lines "inside outside count"; an unreadable map counts as the full one, which
    /// keeps the checks as they are outside a user namespace.
    fn parse(text: &str) -> GidMap {
        let ranges: Vec<(u64, u64)> = text
            .lines()
            .filter_map(|l| {
                let f: Vec<u64> = l
                    .split_whitespace()
                    .filter_map(|n| n.parse().ok())
                    .collect();
                (f.len() == 3).then(|| (f[0], f[2]))
            })
            .collect();
        if ranges.is_empty() {
            GidMap::all()
        } else {
            GidMap(ranges)
        }
    }

    /// A gid this namespace cannot name: a group looked up in /etc/group that is not
    /// mapped, or the overflow gid a file of such a group shows.
    fn hidden(&self, gid: u32) -> bool {
        let g = u64::from(gid);
        !self
            .0
            .iter()
            .any(|&(start, count)| g >= start && g - start < count)
    }

    /// Whether a file showing group `seen` may be of group `gid`: the same id, or
    /// both unmapped here (the one shows as the overflow gid for the other).
    fn same_group(&self, seen: u32, gid: u32) -> bool {
        seen == gid || (self.hidden(gid) && self.hidden(seen))
    }
}

/// Which key a problem is reported at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Key {
    Socket,
    SocketMode,
    SocketGroup,
}

/// What is wrong with a socket at `path` given to `group` with `mode`, each problem
/// with the key whose line it is reported at.
pub(super) fn check(path: &Path, group: &str, mode: Option<u32>) -> Vec<(Key, String)> {
    let accounts = Accounts::read();
    let Some(gid) = group.parse().ok().or_else(|| {
        accounts
            .groups
            .iter()
            .find(|g| g.name == group)
            .map(|g| g.gid)
    }) else {
        return vec![(
            Key::SocketGroup,
            format!("socket_group {group:?}: no such group"),
        )];
    };
    let me = Me::now();
    let ids = GidMap::of_self();
    let mut problems = Vec::new();
    // A set-group-ID directory of that group gives the socket its group: the daemon
    // then has nothing to change.
    let inherited = path
        .parent()
        .and_then(|d| std::fs::metadata(d).ok())
        .is_some_and(|m| m.mode() & 0o2000 != 0 && ids.same_group(m.gid(), gid));
    if !inherited && ids.hidden(gid) {
        problems.push((
            Key::SocketGroup,
            format!(
                "socket_group {group:?}: group {group} is not mapped into this user \
                 namespace (the unit's PrivateUsers=), so the daemon cannot give the \
                 socket that group; put the socket in a set-group-ID directory of group \
                 {group}, as the Debian package makes /var/spool/postfix/mimeref-milter \
                 (2750 mimeref-milter:postfix)"
            ),
        ));
    } else if !inherited && !me.may_chown_to(gid) {
        problems.push((
            Key::SocketGroup,
            format!(
                "socket_group {group:?}: {} is not a member of group {group}, so the \
                 socket cannot be given that group (chown: Operation not permitted); add \
                 it (adduser {} {group}; the Debian package does so when {group} exists \
                 at install time) and restart",
                me.describe(&accounts),
                me.name(&accounts).unwrap_or("the daemon's user"),
            ),
        ));
    }
    // connect(2) on a unix socket needs write permission.
    if let Some(m) = mode {
        if m & 0o020 == 0 {
            problems.push((
                Key::SocketMode,
                format!(
                    "socket_mode \"{m:04o}\" with socket_group {group:?}: the group may \
                     not write to the socket, so its members cannot connect; e.g. \"0660\""
                ),
            ));
        }
    } else if let Some(u) = own_umask().filter(|u| u & 0o020 != 0) {
        // Without socket_mode the socket keeps what bind(2) gives it under the umask;
        // the unit's UMask=0077 leaves the group nothing.
        problems.push((
            Key::SocketGroup,
            format!(
                "socket_group {group:?} without socket_mode: under umask {u:04o} the socket \
                 gets mode {:04o}, so the group's members cannot connect; add \
                 socket_mode = \"0660\"",
                0o777 & !u
            ),
        ));
    }
    if let Some(p) = directory_problem(path, group, gid, me.uid, &accounts, &ids) {
        problems.push((Key::Socket, p));
    }
    problems
}

/// The first directory on the way to the socket that members of `gid` cannot search.
fn directory_problem(
    path: &Path,
    group: &str,
    gid: u32,
    own_uid: u32,
    accounts: &Accounts,
    ids: &GidMap,
) -> Option<String> {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty())?;
    let mut dirs = Vec::new();
    for dir in parent.ancestors() {
        match std::fs::metadata(dir) {
            Ok(m) if m.is_dir() => dirs.push((dir, m)),
            Ok(_) => return Some(format!("{} is not a directory", dir.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && dir == parent => {
                return Some(format!(
                    "the socket's directory {} does not exist (the daemon does not \
                     create it)",
                    dir.display()
                ))
            }
            Err(e) => return Some(format!("{}: {e}", dir.display())),
        }
    }
    // The MTA's user is one of the group's members, but which one is not known: the
    // group as such may search every directory, or at least one member other than the
    // daemon's user (and root, who may search anything) may, through its own uid or
    // another of its groups.
    let group_may = |m: &std::fs::Metadata| {
        m.mode() & 0o001 != 0 || (ids.same_group(m.gid(), gid) && m.mode() & 0o010 != 0)
    };
    if dirs.iter().all(|(_, m)| group_may(m)) {
        return None;
    }
    let members = accounts.members(gid);
    let someone_may = members
        .iter()
        .filter(|u| u.uid != own_uid && u.uid != 0)
        .any(|u| {
            let groups = accounts.groups_of(u);
            dirs.iter().all(|(_, m)| {
                let mode = m.mode();
                (m.uid() == u.uid && mode & 0o100 != 0)
                    || (groups.contains(&m.gid()) && mode & 0o010 != 0)
                    || mode & 0o001 != 0
            })
        });
    if someone_may {
        return None;
    }
    let (dir, m) = dirs.iter().find(|(_, m)| !group_may(m))?;
    Some(format!(
        "group {group} cannot enter {} ({:04o} {}:{}), so the MTA cannot reach the \
         socket; e.g. chgrp {group} {} and chmod g+x it",
        dir.display(),
        m.mode() & 0o7777,
        accounts.user_name(m.uid()),
        accounts.group_name(m.gid()),
        dir.display(),
    ))
}

/// The process's credentials.
struct Me {
    uid: u32,
    gid: u32,
    groups: Vec<u32>,
}

impl Me {
    fn now() -> Me {
        Me {
            uid: rustix::process::geteuid().as_raw(),
            gid: rustix::process::getegid().as_raw(),
            groups: rustix::process::getgroups()
                .map(|g| g.into_iter().map(|g| g.as_raw()).collect())
                .unwrap_or_default(),
        }
    }

    /// chown(2) to a group: root (CAP_CHOWN), or a member of it.
    fn may_chown_to(&self, gid: u32) -> bool {
        self.uid == 0 || self.gid == gid || self.groups.contains(&gid)
    }

    fn name<'a>(&self, accounts: &'a Accounts) -> Option<&'a str> {
        accounts
            .users
            .iter()
            .find(|u| u.uid == self.uid)
            .map(|u| u.name.as_str())
    }

    fn describe(&self, accounts: &Accounts) -> String {
        match self.name(accounts) {
            Some(n) => format!("user {n}"),
            None => format!("uid {}", self.uid),
        }
    }
}

struct User {
    name: String,
    uid: u32,
    gid: u32,
}

struct Group {
    name: String,
    gid: u32,
    members: Vec<String>,
}

struct Accounts {
    users: Vec<User>,
    groups: Vec<Group>,
}

impl Accounts {
    fn read() -> Accounts {
        let text = |p| std::fs::read_to_string(p).unwrap_or_default();
        Accounts::parse(&text("/etc/passwd"), &text("/etc/group"))
    }

    fn parse(passwd: &str, group: &str) -> Accounts {
        let users = passwd
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split(':').collect();
                Some(User {
                    name: f.first()?.to_string(),
                    uid: f.get(2)?.parse().ok()?,
                    gid: f.get(3)?.parse().ok()?,
                })
            })
            .collect();
        let groups = group
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split(':').collect();
                Some(Group {
                    name: f.first()?.to_string(),
                    gid: f.get(2)?.parse().ok()?,
                    members: f
                        .get(3)
                        .map(|m| {
                            m.split(',')
                                .filter(|s| !s.is_empty())
                                .map(str::to_string)
                                .collect()
                        })
                        .unwrap_or_default(),
                })
            })
            .collect();
        Accounts { users, groups }
    }

    /// Users whose primary group is `gid` or who are listed in it.
    fn members(&self, gid: u32) -> Vec<&User> {
        let listed: Vec<&str> = self
            .groups
            .iter()
            .filter(|g| g.gid == gid)
            .flat_map(|g| g.members.iter().map(String::as_str))
            .collect();
        self.users
            .iter()
            .filter(|u| u.gid == gid || listed.contains(&u.name.as_str()))
            .collect()
    }

    fn groups_of(&self, u: &User) -> Vec<u32> {
        let mut g: Vec<u32> = self
            .groups
            .iter()
            .filter(|g| g.members.contains(&u.name))
            .map(|g| g.gid)
            .collect();
        g.push(u.gid);
        g
    }

    fn user_name(&self, uid: u32) -> String {
        self.users
            .iter()
            .find(|u| u.uid == uid)
            .map_or_else(|| uid.to_string(), |u| u.name.clone())
    }

    fn group_name(&self, gid: u32) -> String {
        self.groups
            .iter()
            .find(|g| g.gid == gid)
            .map_or_else(|| gid.to_string(), |g| g.name.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\n\
        postfix:x:101:104::/var/spool/postfix:/usr/sbin/nologin\n\
        mimeref-milter:x:102:105::/nonexistent:/usr/sbin/nologin\n";

    fn accounts(postfix_members: &str, milter_members: &str) -> Accounts {
        Accounts::parse(
            PASSWD,
            &format!(
                "root:x:0:\npostfix:x:104:{postfix_members}\n\
                 mimeref-milter:x:105:{milter_members}\n"
            ),
        )
    }

    #[test]
    fn members_are_listed_or_have_it_as_primary_group() {
        let a = accounts("mimeref-milter", "");
        let names =
            |gid| -> Vec<String> { a.members(gid).iter().map(|u| u.name.clone()).collect() };
        assert_eq!(names(104), ["postfix", "mimeref-milter"]);
        assert_eq!(names(105), ["mimeref-milter"]);
        let postfix = a.users.iter().find(|u| u.name == "postfix").unwrap();
        assert_eq!(a.groups_of(postfix), [104]);
    }

    #[test]
    fn root_and_members_may_chown_others_not() {
        let member = Me {
            uid: 102,
            gid: 105,
            groups: vec![105, 104],
        };
        assert!(member.may_chown_to(104));
        let stranger = Me {
            uid: 102,
            gid: 105,
            groups: vec![105],
        };
        assert!(!stranger.may_chown_to(104));
        assert!(stranger.may_chown_to(105));
        let root = Me {
            uid: 0,
            gid: 0,
            groups: vec![],
        };
        assert!(root.may_chown_to(104));
    }

    #[test]
    fn a_directory_the_group_cannot_enter_is_named() {
        use std::os::unix::fs::PermissionsExt;
        let base = std::env::temp_dir().join(format!("mimeref-sockdir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let dir = base.join("run");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
        let m = std::fs::metadata(&dir).unwrap();
        let (owner, owner_gid) = (m.uid(), m.gid());
        // The MTA's user and group: ids nobody else here has.
        let (mta, mta_gid) = (u32::MAX - 7, owner_gid.wrapping_add(1000));
        let accounts = |mta_in_owner_group: bool| {
            Accounts::parse(
                &format!("own:x:{owner}:{owner_gid}::/:/bin/false\nmta:x:{mta}:{mta_gid}::/:/bin/false\n"),
                &format!(
                    "own:x:{owner_gid}:{}\nmta:x:{mta_gid}:own\n",
                    if mta_in_owner_group { "mta" } else { "" }
                ),
            )
        };
        let sock = dir.join("m.sock");
        let chmod =
            |mode| std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();

        chmod(0o750);
        let p = directory_problem(
            &sock,
            "mta",
            mta_gid,
            owner,
            &accounts(false),
            &GidMap::all(),
        );
        let want = format!("group mta cannot enter {} (0750 own:own)", dir.display());
        assert!(p.as_deref().is_some_and(|p| p.starts_with(&want)), "{p:?}");
        // The MTA's user gets in through another of its groups.
        assert_eq!(
            directory_problem(
                &sock,
                "mta",
                mta_gid,
                owner,
                &accounts(true),
                &GidMap::all()
            ),
            None
        );
        // Anyone may search it.
        chmod(0o751);
        assert_eq!(
            directory_problem(
                &sock,
                "mta",
                mta_gid,
                owner,
                &accounts(false),
                &GidMap::all()
            ),
            None
        );

        let gone = dir.join("missing/m.sock");
        let p = directory_problem(
            &gone,
            "mta",
            mta_gid,
            owner,
            &accounts(false),
            &GidMap::all(),
        );
        assert!(
            p.as_deref().is_some_and(|p| p.contains("does not exist")),
            "{p:?}"
        );
        // Under PrivateUsers= (only root and the daemon's own group mapped; here a map
        // with neither the directory's group nor the MTA's) both show as the
        // overflow gid: not knowable, so not reported.
        chmod(0o710);
        assert!(directory_problem(
            &sock,
            "mta",
            mta_gid,
            owner,
            &accounts(false),
            &GidMap::all()
        )
        .is_some());
        let private_users = GidMap::parse(&format!("{0} {0} 1\n", owner_gid.wrapping_add(1)));
        assert_eq!(
            directory_problem(
                &sock,
                "mta",
                mta_gid,
                owner,
                &accounts(false),
                &private_users
            ),
            None
        );
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn the_umask_is_read_from_proc_status() {
        assert_eq!(
            parse_umask("Name:\tx\nUmask:\t0077\nState:\tR\n"),
            Some(0o077)
        );
        assert_eq!(parse_umask("Name:\tx\n"), None);
        assert!(own_umask().is_some());
    }

    #[test]
    fn groups_outside_the_private_users_map_are_hidden() {
        // systemd's PrivateUsers= for a service with group 113; postfix is 105.
        let ids =
            GidMap::parse("         0          0          1\n       113        113          1\n");
        assert!(!ids.hidden(0));
        assert!(!ids.hidden(113));
        assert!(ids.hidden(105));
        assert!(ids.hidden(65534));
        // postfix's directory shows as nogroup: may be postfix's; the daemon's own
        // group is known not to be.
        assert!(ids.same_group(65534, 105));
        assert!(!ids.same_group(113, 105));
        assert!(!ids.same_group(65534, 113));
        // Outside any user namespace every id is mapped: nothing is taken on trust.
        let all = GidMap::parse("         0          0 4294967295\n");
        assert!(!all.hidden(105));
        assert!(!all.same_group(65534, 105));
        assert!(!GidMap::parse("").hidden(105));
    }
}

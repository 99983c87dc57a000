//! Confinement on Linux: a Landlock ruleset (the `landlock` crate), made
//! in the host and enforced in the child between fork and exec, so the
//! program and its whole tree inherit it and the host does not.
//! `no_new_privs` comes with it (a setuid program would otherwise run
//! unconfined). A pseudo-terminal's program (portable-pty has no hook
//! before exec) is started from a short-lived thread that confines itself
//! first instead: a Landlock domain is a thread's, and a child inherits it.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, LandlockStatus, NetPort, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetError, RulesetStatus, Scope,
    path_beneath_rules,
};

use super::{Confinement, Enforcement, visible};

/// The rights asked for: files (with truncation, renames and device
/// ioctls), TCP ports, signals and abstract sockets. An older kernel gets
/// what it has ([`probe`] says what that is).
const WANTED: ABI = ABI::V6;

/// The kernel ABI that restricts connecting to named Unix sockets.
const UNIX_SOCKETS_ABI: i32 = 9;

fn ruleset(c: &Confinement) -> Result<RulesetCreated, RulesetError> {
    let all = AccessFs::from_all(WANTED);
    let mut rules = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)?
        .scope(Scope::from_all(WANTED))?;
    if c.connect.is_some() {
        rules = rules.handle_access(AccessNet::ConnectTcp)?;
    }
    if c.bind.is_some() {
        rules = rules.handle_access(AccessNet::BindTcp)?;
    }
    let mut created = rules.create()?;
    for root in c.read.iter().filter(|r| r.is_dir()) {
        // Listing stays possible everywhere beneath a read root (names are
        // not contents); reading and running, only outside what is hidden.
        created = created
            .add_rules(path_beneath_rules([root], AccessFs::ReadDir))?
            .add_rules(path_beneath_rules(
                visible(root, &c.hidden),
                AccessFs::from_read(WANTED),
            ))?;
    }
    created = created.add_rules(path_beneath_rules(&c.write, all))?;
    for port in c.connect.iter().flatten() {
        created = created.add_rule(NetPort::new(*port, AccessNet::ConnectTcp))?;
    }
    for port in c.bind.iter().flatten() {
        created = created.add_rule(NetPort::new(*port, AccessNet::BindTcp))?;
    }
    Ok(created)
}

/// [`ruleset`], its error in words for the start that needed it.
fn built(c: &Confinement) -> io::Result<RulesetCreated> {
    ruleset(c).map_err(|e| io::Error::other(format!("cannot confine the program: {e}")))
}

/// Make `command` confine its child before exec.
pub fn prepare(command: &mut tokio::process::Command, c: &Confinement) -> io::Result<()> {
    let created = built(c)?;
    // No descriptor: this kernel has no Landlock, and [`probe`] says so.
    let Some(fd): Option<OwnedFd> = created.into() else {
        return Ok(());
    };
    // SAFETY: the closure makes two system calls, both async-signal-safe,
    // and reads only the descriptor it owns (closed at exec).
    unsafe {
        command.pre_exec(move || enforce(fd.as_raw_fd()));
    }
    Ok(())
}

/// In the child: no new privileges, then the ruleset `fd` for good.
fn enforce(fd: RawFd) -> io::Result<()> {
    // SAFETY: plain system calls with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

pub fn start<T: Send>(
    c: &Confinement,
    start: impl FnOnce() -> io::Result<T> + Send,
) -> io::Result<T> {
    let created = built(c)?;
    std::thread::scope(|scope| {
        scope
            .spawn(move || {
                created
                    .restrict_self()
                    .map_err(|e| io::Error::other(format!("cannot confine the program: {e}")))?;
                start()
            })
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the confined start panicked")))
    })
}

/// What this kernel enforces, found by confining a thread that then ends.
pub fn probe() -> Enforcement {
    let tried = std::thread::spawn(|| {
        Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(WANTED))?
            .handle_access(AccessNet::from_all(WANTED))?
            .scope(Scope::from_all(WANTED))?
            .create()?
            .restrict_self()
    })
    .join();
    let status = match tried {
        Ok(Ok(status)) => status,
        Ok(Err(e)) => {
            return Enforcement::None {
                why: format!("Landlock refused a ruleset: {e}"),
            };
        }
        Err(_) => {
            return Enforcement::None {
                why: "the Landlock probe panicked".into(),
            };
        }
    };
    let abi = match status.landlock {
        LandlockStatus::Available { effective_abi, .. } => effective_abi as i32,
        LandlockStatus::NotEnabled => {
            return Enforcement::None {
                why: "the kernel has Landlock but it is not enabled: add `landlock` to the `lsm=` boot parameter".into(),
            };
        }
        LandlockStatus::NotImplemented => {
            return Enforcement::None {
                why: "the kernel has no Landlock (Linux 5.13 or later built with CONFIG_SECURITY_LANDLOCK)".into(),
            };
        }
    };
    let unix = if abi < UNIX_SOCKETS_ABI {
        "; connecting to named Unix sockets is not restricted before Landlock ABI 9"
    } else {
        ""
    };
    let how = format!("Landlock ABI {abi}: files, TCP ports, signals{unix}");
    let mut missing = Vec::new();
    for (needs, what) in [
        (2, "renames and links across folders"),
        (3, "truncating files"),
        (4, "TCP ports"),
        (5, "device ioctls"),
        (6, "signals and abstract Unix sockets outside the tree"),
    ] {
        if abi < needs {
            missing.push(what);
        }
    }
    match status.ruleset {
        RulesetStatus::FullyEnforced => Enforcement::Full { how },
        RulesetStatus::PartiallyEnforced => Enforcement::Partial {
            how: format!("Landlock ABI {abi}"),
            missing: missing.join(", "),
        },
        RulesetStatus::NotEnforced => Enforcement::None {
            why: format!("Landlock ABI {abi} enforced nothing"),
        },
    }
}

//! The second host of a `host: netns` cell: a network namespace of its own, joined to
//! this host by a veth pair, made with iproute2's `ip` before the peer starts and removed
//! when the cell ends ([`Link`]'s Drop). A `kill -9` leaves them; the next run's sweep
//! ([`remove_stale_links`]) removes those whose creator is gone.
//!
//! Names carry their creator's pid: namespace `ipcm-<pid>-<n>`, veth ends
//! `ipcm<pid>h<n>` (this host) and `ipcm<pid>p<n>` (in the namespace), `<n>` in base 36
//! (an interface name has at most 15 bytes: 4 + 7 digits of a pid up to 4194304 + 1 + 3).
//! Each link has a /30 of the benchmarking range 198.18.0.0/15 (RFC 2544), this host .1
//! and the peer .2, chosen under a lock from the free ones: concurrent test processes
//! never share one, and traffic only ever goes to addresses of links the run made.

use ipc_matrix_results::Fragmentation;
use ipc_matrix_spec::{Cell, NetnsLink};
use ipc_matrix_transport::process_alive;
use std::fs::File;
use std::io::Read;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long one `ip` or `tc` invocation may take before it is killed.
const COMMAND_WITHIN: Duration = Duration::from_secs(10);
/// How long the choice of a subnet may wait for another process choosing one.
const LOCK_WITHIN: Duration = Duration::from_secs(10);
/// How long the host's end of a new link may take to come up.
const UP_WITHIN: Duration = Duration::from_secs(5);
/// The first address of 198.18.0.0/15 and the number of /30 subnets in it.
const RANGE_START: u32 = u32::from_be_bytes([198, 18, 0, 0]);
const SUBNETS: u32 = 1 << 15;
/// Where `ip netns add` mounts a namespace, and where interfaces are listed.
const NETNS_DIR: &str = "/run/netns";
const NET_CLASS_DIR: &str = "/sys/class/net";
/// Held while a subnet is chosen and given to this host's end, across processes.
const SUBNET_LOCK: &str = "/run/ipcm-links.lock";
/// The prefix of every name a link has.
const PREFIX: &str = "ipcm";
/// The most links one process makes: `<n>` has at most 3 base-36 digits.
const MAX_LINKS: u32 = 36 * 36 * 36;
/// CAP_NET_ADMIN's and CAP_SYS_ADMIN's bits in CapEff.
const CAP_NET_ADMIN: u32 = 12;
const CAP_SYS_ADMIN: u32 = 21;

/// Links made by this process so far: the `<n>` of the next one.
static NEXT: AtomicU32 = AtomicU32::new(0);

/// Where a cell's peer runs and the two ends' addresses, as the kinds see them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecondHost {
    /// The network namespace the peer is started in (`ip netns exec <namespace>`).
    pub namespace: String,
    /// This host's end of the link: the measuring side binds here.
    pub host: Ipv4Addr,
    /// The peer's end of the link.
    pub peer: Ipv4Addr,
}

/// What keeps `cell` from running here, if anything: a netns cell needs CAP_NET_ADMIN,
/// CAP_SYS_ADMIN (with which `ip netns` mounts a namespace) and iproute2's `ip`; a shaped
/// link also `sch_netem` and `tc`. Checked when cells are listed.
pub fn unmet_need(cell: &Cell) -> Option<String> {
    let link = cell.host.netns()?;
    let need = if !has_capability(CAP_NET_ADMIN) {
        "needs CAP_NET_ADMIN"
    } else if !has_capability(CAP_SYS_ADMIN) {
        "needs CAP_SYS_ADMIN"
    } else if find_program("ip").is_none() {
        "needs iproute2's ip"
    } else if link.is_shaped() && !has_netem() {
        "needs sch_netem"
    } else if link.is_shaped() && find_program("tc").is_none() {
        "needs iproute2's tc"
    } else {
        return None;
    };
    Some(need.into())
}

/// Capability `bit` is in this process's effective set.
fn has_capability(bit: u32) -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << bit) != 0)
}

/// `sch_netem` is loaded, or a module of it is installed for this kernel.
fn has_netem() -> bool {
    if Path::new("/sys/module/sch_netem").exists() {
        return true;
    }
    let Ok(release) = std::fs::read_to_string("/proc/sys/kernel/osrelease") else {
        return false;
    };
    let modules = Path::new("/lib/modules").join(release.trim());
    let built_in = std::fs::read_to_string(modules.join("modules.builtin"))
        .is_ok_and(|list| list.lines().any(|l| l.ends_with("/sch_netem.ko")));
    let installed = std::fs::read_dir(modules.join("kernel/net/sched")).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("sch_netem.ko"))
    });
    built_in || installed
}

/// `program` in PATH or in the system folders root's PATH has (`ip` is in /usr/sbin).
fn find_program(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|dir| dir.join(program))
        .find(|candidate| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The command prefix that runs a program in network namespace `namespace`.
pub(crate) fn exec_in(namespace: &str) -> Vec<String> {
    let ip = find_program("ip").map_or_else(|| "ip".into(), |p| p.to_string_lossy().into_owned());
    vec![ip, "netns".into(), "exec".into(), namespace.into()]
}

/// The names of link `n` of process `pid`: namespace, this host's end, the peer's end.
fn names(pid: u32, n: u32) -> (String, String, String) {
    let n = base36(n);
    (
        format!("{PREFIX}-{pid}-{n}"),
        format!("{PREFIX}{pid}h{n}"),
        format!("{PREFIX}{pid}p{n}"),
    )
}

fn base36(mut n: u32) -> String {
    let mut digits = Vec::new();
    loop {
        digits.push(char::from_digit(n % 36, 36).expect("below 36"));
        n /= 36;
        if n == 0 {
            break;
        }
    }
    digits.iter().rev().collect()
}

/// The creator's pid and the link's `<n>` of a namespace `ipcm-<pid>-<n>`.
fn namespace_owner(name: &str) -> Option<(u32, &str)> {
    let (pid, n) = name
        .strip_prefix(PREFIX)?
        .strip_prefix('-')?
        .split_once('-')?;
    owner(pid, n)
}

/// The creator's pid and the link's `<n>` of an interface `ipcm<pid>h<n>` or
/// `ipcm<pid>p<n>`.
fn interface_owner(name: &str) -> Option<(u32, &str)> {
    let (pid, n) = name.strip_prefix(PREFIX)?.split_once(['h', 'p'])?;
    owner(pid, n)
}

/// A decimal pid and a base-36 `<n>` (lowercase), or `None`.
fn owner<'a>(pid: &str, n: &'a str) -> Option<(u32, &'a str)> {
    let decimal = !pid.is_empty() && pid.chars().all(|c| c.is_ascii_digit());
    let base36 = !n.is_empty()
        && n.chars()
            .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase());
    (decimal && base36).then(|| Some((pid.parse().ok()?, n)))?
}

/// The /30 where a search for link `n` of process `pid` starts: spread over the range,
/// so processes rarely look at the same ones.
fn first_subnet(pid: u32, n: u32) -> u32 {
    let mut state = (u64::from(pid) << 32) | u64::from(n);
    (ipc_matrix_spec::splitmix64(&mut state) % u64::from(SUBNETS)) as u32
}

/// The first /30 from `start` on (wrapping) that overlaps none of `taken` (networks as
/// (address, prefix length)); its first address.
fn free_subnet(start: u32, taken: &[(Ipv4Addr, u8)]) -> Option<u32> {
    let overlaps = |base: u32| {
        taken.iter().any(|&(addr, len)| {
            let mask = if len == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(len.min(32)))
            };
            let net = u32::from(addr) & mask;
            let last = net | !mask;
            base <= last && net <= base + 3
        })
    };
    (0..SUBNETS)
        .map(|i| RANGE_START + ((start + i) % SUBNETS) * 4)
        .find(|&base| !overlaps(base))
}

/// The IPv4 networks of `ip -4 -o addr show`: `2: eth0    inet 192.0.2.2/24 brd ...`.
fn parse_addresses(listing: &str) -> Vec<(Ipv4Addr, u8)> {
    listing
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            words.find(|w| *w == "inet")?;
            let (addr, len) = words.next()?.split_once('/')?;
            Some((addr.parse().ok()?, len.parse().ok()?))
        })
        .collect()
}

/// A network namespace and the veth pair into it, removed when dropped.
pub(crate) struct Link {
    ip: PathBuf,
    namespace: String,
    host_if: String,
    host: Option<SecondHost>,
    /// A shared lock on the namespace's file, held for the link's life: a sweep in
    /// another PID namespace, where our pid means nothing, sees it held and leaves the
    /// link alone; the kernel drops it when this process dies, however it dies.
    alive: Option<File>,
}

impl Link {
    /// Makes the second host of a cell whose peer runs on one; `None` for the others.
    pub(crate) fn for_cell(cell: &Cell) -> Result<Option<Link>, LinkError> {
        let Some(link) = cell.host.netns() else {
            return Ok(None);
        };
        if let Some(need) = unmet_need(cell) {
            return Err(LinkError::Unmet { need });
        }
        Link::create(link).map(Some)
    }

    fn create(shape: &NetnsLink) -> Result<Link, LinkError> {
        let ip = find_program("ip").ok_or(LinkError::NotInstalled("ip"))?;
        let pid = std::process::id();
        let (n, (namespace, host_if, peer_if)) = loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            if n >= MAX_LINKS {
                return Err(LinkError::TooMany);
            }
            let names = names(pid, n);
            // A namesake's creator had our pid: a live run in another PID namespace
            // (its lock is held), whose name is skipped, or a dead process, whose
            // leftovers go.
            if lock_held(&Path::new(NETNS_DIR).join(&names.0)) {
                continue;
            }
            if Path::new(NET_CLASS_DIR).join(&names.1).exists() {
                run(&ip, &["link", "del", &names.1])?;
            }
            if Path::new(NETNS_DIR).join(&names.0).exists() {
                run(&ip, &["netns", "del", &names.0])?;
            }
            break (n, names);
        };
        let mut link = Link {
            ip,
            namespace,
            host_if,
            host: None,
            alive: None,
        };
        link.ip(&["netns", "add", &link.namespace])?;
        let file = Path::new(NETNS_DIR).join(&link.namespace);
        link.alive = Some(
            File::open(&file)
                .and_then(|f| f.lock_shared().map(|()| f))
                .map_err(|source| LinkError::Locking { path: file, source })?,
        );
        link.ip(&[
            "link",
            "add",
            &link.host_if,
            "type",
            "veth",
            "peer",
            "name",
            &peer_if,
            "netns",
            &link.namespace,
        ])?;
        let base = link.give_subnet(first_subnet(pid, n))?;
        let (host, peer) = (Ipv4Addr::from(base + 1), Ipv4Addr::from(base + 2));
        let ns = link.namespace.clone();
        let mtu = shape.mtu.to_string();
        link.ip(&[
            "-n",
            &ns,
            "addr",
            "add",
            &format!("{peer}/30"),
            "dev",
            &peer_if,
        ])?;
        link.ip(&[
            "link",
            "set",
            "dev",
            &link.host_if.clone(),
            "mtu",
            &mtu,
            "up",
        ])?;
        link.ip(&["-n", &ns, "link", "set", "dev", &peer_if, "mtu", &mtu, "up"])?;
        link.ip(&["-n", &ns, "link", "set", "dev", "lo", "up"])?;
        if shape.is_shaped() {
            let tc = find_program("tc").ok_or(LinkError::NotInstalled("tc"))?;
            let netem = netem_args(shape);
            for (namespace, dev) in [(None, &link.host_if), (Some(&ns), &peer_if)] {
                let mut args: Vec<&str> = Vec::new();
                if let Some(ns) = namespace {
                    args.extend(["-n", ns.as_str()]);
                }
                args.extend(["qdisc", "add", "dev", dev, "root", "netem"]);
                args.extend(netem.iter().map(String::as_str));
                run(&tc, &args)?;
            }
        }
        link.wait_up()?;
        link.host = Some(SecondHost {
            namespace: ns,
            host,
            peer,
        });
        Ok(link)
    }

    /// Chooses a free /30 and puts this host's end on its .1, holding the lock so no
    /// other process chooses it meanwhile.
    fn give_subnet(&self, start: u32) -> Result<u32, LinkError> {
        let _lock = SubnetLock::take()?;
        let listing = self.ip(&["-4", "-o", "addr", "show"])?;
        let base = free_subnet(start, &parse_addresses(&listing)).ok_or(LinkError::NoFreeSubnet)?;
        let host = Ipv4Addr::from(base + 1);
        self.ip(&["addr", "add", &format!("{host}/30"), "dev", &self.host_if])?;
        Ok(base)
    }

    /// Waits for this host's end to be up (a veth is up once both ends are).
    fn wait_up(&self) -> Result<(), LinkError> {
        let state = Path::new(NET_CLASS_DIR)
            .join(&self.host_if)
            .join("operstate");
        let deadline = Instant::now() + UP_WITHIN;
        loop {
            let now = std::fs::read_to_string(&state).unwrap_or_default();
            if now.trim() == "up" {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(LinkError::NotUp {
                    interface: self.host_if.clone(),
                    state: now.trim().to_string(),
                });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn ip(&self, args: &[&str]) -> Result<String, CommandError> {
        run(&self.ip, args)
    }

    /// The second host, once made.
    pub(crate) fn host(&self) -> Option<&SecondHost> {
        self.host.as_ref()
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        // Deleting one end of a veth pair deletes both; the namespace goes with its
        // mount, once its last process (the peer, stopped by now) and descriptor are gone.
        self.alive = None;
        for args in [
            ["link", "del", self.host_if.as_str()],
            ["netns", "del", self.namespace.as_str()],
        ] {
            if let Err(e) = run(&self.ip, &args) {
                let e = e.to_string();
                if !e.contains("Cannot find device") && !e.contains("No such file") {
                    eprintln!("warning: removing {}: {e}", args[2]);
                }
            }
        }
    }
}

/// `delay 1ms loss 0.5%` for `tc qdisc add ... netem`.
fn netem_args(shape: &NetnsLink) -> Vec<String> {
    let mut args = Vec::new();
    if let Some(delay) = shape.delay {
        args.extend(["delay".to_string(), format!("{}us", delay.as_micros())]);
    }
    if let Some(loss) = shape.loss_percent {
        args.extend(["loss".to_string(), format!("{loss}%")]);
    }
    args
}

/// An exclusive lock on [`SUBNET_LOCK`], taken within [`LOCK_WITHIN`].
struct SubnetLock {
    _file: File,
}

impl SubnetLock {
    fn take() -> Result<Self, LinkError> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(SUBNET_LOCK)
            .map_err(|source| LinkError::Opening {
                path: SUBNET_LOCK.into(),
                source,
            })?;
        let deadline = Instant::now() + LOCK_WITHIN;
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(Self { _file: file }),
                Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(std::fs::TryLockError::WouldBlock) => return Err(LinkError::LockedTooLong),
                Err(std::fs::TryLockError::Error(source)) => {
                    return Err(LinkError::Locking {
                        path: SUBNET_LOCK.into(),
                        source,
                    })
                }
            }
        }
    }
}

/// Runs `program args` to its end within [`COMMAND_WITHIN`] (killed after that); its
/// stdout, or an error naming the command and quoting its stderr.
fn run(program: &Path, args: &[&str]) -> Result<String, CommandError> {
    let shown = || {
        let name = program.file_name().unwrap_or_default().to_string_lossy();
        format!("`{name} {}`", args.join(" "))
    };
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| CommandError::Starting {
            command: shown(),
            source,
        })?;
    // Read on threads, so a full pipe never blocks the command.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_string(&mut text);
            }
            text
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + COMMAND_WITHIN;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(CommandError::TimedOut { command: shown() });
            }
            Err(source) => {
                return Err(CommandError::Waiting {
                    command: shown(),
                    source,
                })
            }
        }
    };
    let out = stdout.join().unwrap_or_default();
    let err = stderr.join().unwrap_or_default();
    if status.success() {
        Ok(out)
    } else {
        Err(CommandError::Failed {
            command: shown(),
            status,
            stderr: err.trim().to_string(),
        })
    }
}

/// The IP fragmentation counters of the network namespace process `pid` runs in (its
/// `/proc/<pid>/net/snmp`), as totals since the namespace was made.
pub(crate) fn fragmentation_of(pid: u32) -> Result<Fragmentation, CountersError> {
    let path = format!("/proc/{pid}/net/snmp");
    let text =
        std::fs::read_to_string(&path).map_err(|source| CountersError::Reading { pid, source })?;
    parse_snmp(&text).map_err(|source| CountersError::Parsing { pid, source })
}

/// The `Ip:` counters of an snmp file: a line of names, then one of values.
fn parse_snmp(text: &str) -> Result<Fragmentation, SnmpError> {
    let mut ip = text.lines().filter_map(|l| l.strip_prefix("Ip:"));
    let (Some(names), Some(values)) = (ip.next(), ip.next()) else {
        return Err(SnmpError::NoIp);
    };
    let counters: Vec<(&str, &str)> = names
        .split_whitespace()
        .zip(values.split_whitespace())
        .collect();
    let get = |name: &'static str| -> Result<u64, SnmpError> {
        let (_, value) = counters
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or(SnmpError::NoCounter(name))?;
        value.parse().map_err(|_| SnmpError::NotACount {
            name,
            value: value.to_string(),
        })
    };
    Ok(Fragmentation {
        fragments_received: get("ReasmReqds")?,
        reassembled: get("ReasmOKs")?,
        reassembly_failed: get("ReasmFails")?,
        fragmented: get("FragOKs")?,
        fragments_created: get("FragCreates")?,
        fragmentation_failed: get("FragFails")?,
    })
}

/// Why a second host could not be made for a cell.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LinkError {
    /// What [`unmet_need`] says it lacks.
    #[error("its peer runs on a second host, which {need}")]
    Unmet { need: String },
    #[error("`{0}` (iproute2) is not installed")]
    NotInstalled(&'static str),
    #[error("this process made {MAX_LINKS} links already")]
    TooMany,
    #[error("opening {}: {source}", .path.display())]
    Opening {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("locking {}: {source}", .path.display())]
    Locking {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{SUBNET_LOCK} stayed locked by another process for {LOCK_WITHIN:?}")]
    LockedTooLong,
    #[error("no /30 of 198.18.0.0/15 is free on this host")]
    NoFreeSubnet,
    /// This host's end of the link, and the state it stayed in.
    #[error("{interface} was not up within {UP_WITHIN:?} (state {state:?})")]
    NotUp { interface: String, state: String },
    #[error(transparent)]
    Command(#[from] CommandError),
}

/// An `ip` or `tc` command that did not do its job; `command` as it is shown,
/// `` `ip link del ipcm42h0` ``.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CommandError {
    #[error("starting {command}: {source}")]
    Starting {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{command} did not finish within {COMMAND_WITHIN:?}")]
    TimedOut { command: String },
    #[error("waiting for {command}: {source}")]
    Waiting {
        command: String,
        #[source]
        source: std::io::Error,
    },
    /// It exited with `status`, saying `stderr` (trimmed).
    #[error("{command} failed ({}): {stderr}", crate::spawn::describe(*.status))]
    Failed {
        command: String,
        status: ExitStatus,
        stderr: String,
    },
}

/// Why the IP counters of the second host that process `pid` runs on could not be read
/// (from its `/proc/<pid>/net/snmp`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum CountersError {
    #[error("reading /proc/{pid}/net/snmp: {source}")]
    Reading {
        pid: u32,
        #[source]
        source: std::io::Error,
    },
    #[error("/proc/{pid}/net/snmp: {source}")]
    Parsing {
        pid: u32,
        #[source]
        source: SnmpError,
    },
}

/// What an snmp file lacks.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SnmpError {
    #[error("no `Ip:` names and values")]
    NoIp,
    #[error("no `Ip:` counter {0}")]
    NoCounter(&'static str),
    #[error("`Ip:` counter {name} is {value:?}, not a count")]
    NotACount { name: &'static str, value: String },
}

/// What the counters went up by from `before` to `after`.
pub(crate) fn fragmentation_between(
    before: &Fragmentation,
    after: &Fragmentation,
) -> Fragmentation {
    Fragmentation {
        fragments_received: after
            .fragments_received
            .saturating_sub(before.fragments_received),
        reassembled: after.reassembled.saturating_sub(before.reassembled),
        reassembly_failed: after
            .reassembly_failed
            .saturating_sub(before.reassembly_failed),
        fragmented: after.fragmented.saturating_sub(before.fragmented),
        fragments_created: after
            .fragments_created
            .saturating_sub(before.fragments_created),
        fragmentation_failed: after
            .fragmentation_failed
            .saturating_sub(before.fragmentation_failed),
    }
}

/// Removes the namespaces and veth ends of links whose creator is no longer running
/// (left by a `kill -9`); the paths of what it removed (`/run/netns/<name>`,
/// `/sys/class/net/<name>`), for the user to see. A link whose pid is not running here
/// is still left alone while its namespace's life lock is held (by a creator in another
/// PID namespace).
pub fn remove_stale_links() -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Some(ip) = find_program("ip").filter(|_| has_capability(CAP_NET_ADMIN)) else {
        return removed;
    };
    let abandoned = |pid: u32, n: &str| {
        !process_alive(pid) && !lock_held(&Path::new(NETNS_DIR).join(format!("{PREFIX}-{pid}-{n}")))
    };
    let stale = |dir: &str, owner_of: fn(&str) -> Option<(u32, &str)>| {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                let (pid, n) = owner_of(&name)?;
                abandoned(pid, n).then(|| (name.clone(), entry.path()))
            })
            .collect::<Vec<_>>()
    };
    // The veth ends first: a namespace whose mount is gone may still hold them.
    for (name, path) in stale(NET_CLASS_DIR, interface_owner) {
        if run(&ip, &["link", "del", &name]).is_ok() {
            removed.push(path);
        }
    }
    for (name, path) in stale(NETNS_DIR, namespace_owner) {
        if run(&ip, &["netns", "del", &name]).is_ok() {
            removed.push(path);
        }
    }
    removed
}

/// Someone holds a lock on `path` (a namespace's file): its creator is alive.
fn lock_held(path: &Path) -> bool {
    File::open(path)
        .is_ok_and(|file| matches!(file.try_lock(), Err(std::fs::TryLockError::WouldBlock)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_an_interface_and_read_back() {
        for pid in [1, 4242, 4_194_304] {
            for n in [0, 35, 36, 1295, MAX_LINKS - 1] {
                let (namespace, host, peer) = names(pid, n);
                assert!(host.len() <= 15 && peer.len() <= 15, "{host} {peer}");
                let n = base36(n);
                assert_eq!(
                    namespace_owner(&namespace),
                    Some((pid, n.as_str())),
                    "{namespace}"
                );
                assert_eq!(interface_owner(&host), Some((pid, n.as_str())), "{host}");
                assert_eq!(interface_owner(&peer), Some((pid, n.as_str())), "{peer}");
            }
        }
        assert_eq!(names(4_194_304, 46655).1, "ipcm4194304hzzz");
        for other in [
            "ipcm",
            "ipcm-",
            "ipcm-12",
            "ipcm-x-1",
            "ipcm-1-",
            "ipc-matrix.1.2",
            "ipcmh1",
            "ipcm12h",
            "eth0",
            "ipcm1hA",
        ] {
            assert_eq!(namespace_owner(other), None, "{other}");
            assert_eq!(interface_owner(other), None, "{other}");
        }
    }

    #[test]
    fn a_subnet_is_a_free_slash_30_of_the_benchmarking_range() {
        let listing = "1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever\n\
                       4: eth0    inet 192.0.2.2/24 brd 192.0.2.255 scope global eth0\n\
                       9: ipcm7h0    inet 198.18.0.5/30 scope global ipcm7h0\n";
        let taken = parse_addresses(listing);
        assert_eq!(taken.len(), 3);
        // 198.18.0.4/30 is taken: the next one is chosen.
        assert_eq!(free_subnet(1, &taken), Some(RANGE_START + 8));
        assert_eq!(free_subnet(0, &taken), Some(RANGE_START));
        // The last /30 wraps to the first.
        assert_eq!(
            free_subnet(SUBNETS - 1, &[]),
            Some(RANGE_START + (SUBNETS - 1) * 4)
        );
        assert_eq!(
            Ipv4Addr::from(RANGE_START + (SUBNETS - 1) * 4 + 3),
            Ipv4Addr::new(198, 19, 255, 255)
        );
        // A network over the whole range leaves nothing.
        assert_eq!(free_subnet(5, &[(Ipv4Addr::new(198, 18, 0, 0), 15)]), None);
        assert!(first_subnet(4_194_304, 7) < SUBNETS);
        assert_ne!(first_subnet(100, 0), first_subnet(101, 0));
    }

    #[test]
    fn the_snmp_ip_counters_are_read_by_name() {
        let snmp = "Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams InUnknownProtos InDiscards InDelivers OutRequests OutDiscards OutNoRoutes ReasmTimeout ReasmReqds ReasmOKs ReasmFails FragOKs FragFails FragCreates OutTransmits\n\
                    Ip: 2 64 900 0 0 0 0 0 900 450 0 0 0 900 20 3 10 1 450 450\n\
                    Icmp: InMsgs InErrors\n\
                    Icmp: 0 0\n";
        let counted = parse_snmp(snmp).unwrap();
        assert_eq!(
            counted,
            Fragmentation {
                fragments_received: 900,
                reassembled: 20,
                reassembly_failed: 3,
                fragmented: 10,
                fragments_created: 450,
                fragmentation_failed: 1,
            }
        );
        let before = Fragmentation {
            fragments_received: 45,
            reassembled: 1,
            ..Fragmentation::default()
        };
        let during = fragmentation_between(&before, &counted);
        assert_eq!(during.fragments_received, 855);
        assert_eq!(during.fragments_per_datagram(), Some(45.0));
        // Names and values are matched, not read by position; a missing one is named.
        let shuffled =
            "Ip: ReasmOKs ReasmReqds ReasmFails FragOKs FragCreates FragFails\nIp: 1 2 3 4 5 6\n";
        assert_eq!(parse_snmp(shuffled).unwrap().fragments_received, 2);
        let short = "Ip: ReasmOKs ReasmReqds\nIp: 1 2\n";
        assert!(parse_snmp(short)
            .unwrap_err()
            .to_string()
            .contains("ReasmFails"));
        assert!(parse_snmp("Ip: ReasmReqds\n").is_err());
        let bad =
            "Ip: ReasmReqds ReasmOKs ReasmFails FragOKs FragCreates FragFails\nIp: x 2 3 4 5 6\n";
        assert!(parse_snmp(bad)
            .unwrap_err()
            .to_string()
            .contains("ReasmReqds"));
    }

    #[test]
    fn a_loopback_cell_needs_nothing_and_a_netns_cell_says_what_it_lacks() {
        let mut cell = Cell {
            id: "echo-netns::tcp::200B".into(),
            scenario: "echo-netns".into(),
            transport: ipc_matrix_spec::TransportKind::Tcp,
            wake: None,
            payload_bytes: 200,
            payload_label: "200B".into(),
            iterations: 10,
            warmup: 0,
            seed: 1,
            profile: "quick".into(),
            work: ipc_matrix_spec::Work::Echo(ipc_matrix_spec::Echoes::new(
                Duration::from_secs(1),
                0.0,
            )),
            host: ipc_matrix_spec::Host::Loopback,
            peer: None,
        };
        assert_eq!(unmet_need(&cell), None);
        cell.host = ipc_matrix_spec::Host::Netns(NetnsLink {
            mtu: 1500,
            delay: None,
            loss_percent: None,
        });
        let lacks_nothing = has_capability(CAP_NET_ADMIN)
            && has_capability(CAP_SYS_ADMIN)
            && find_program("ip").is_some();
        match unmet_need(&cell) {
            None => assert!(lacks_nothing),
            Some(need) => assert!(!lacks_nothing && need.starts_with("needs "), "{need}"),
        }
    }

    #[test]
    fn netem_is_told_the_delay_and_the_loss() {
        let shape = NetnsLink {
            mtu: 1500,
            delay: Some(Duration::from_millis(1)),
            loss_percent: Some(0.5),
        };
        assert_eq!(netem_args(&shape), ["delay", "1000us", "loss", "0.5%"]);
    }
}

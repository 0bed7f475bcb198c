//! Where a cell's peer runs and whose code it is: on this host over loopback (the
//! default) or on a second host, a network namespace joined by a veth link
//! (`host: netns`, with `mtu` and `link`); our own peer or a program the user brings
//! (`peer: { command: [...] }`, the external peer protocol of `peers/`).

use crate::keys::Problems;
use crate::kinds::ScenarioKind;
use crate::locate::Segment;
use crate::model::TransportKind;
use crate::units::{DurationSpec, UnitError};
use serde::{Deserialize, Deserializer, Serialize};
use std::time::Duration;

/// The MTU of a namespace's link when matrix.yaml gives none: Ethernet's.
pub const DEFAULT_MTU: u32 = 1500;
/// The smallest MTU an IPv4 link may have (RFC 791), and the largest a veth link takes.
const MTU_RANGE: std::ops::RangeInclusive<u32> = 68..=65535;
/// The most words an external peer's command may have, and the longest each may be.
const MAX_COMMAND_WORDS: usize = 64;
const MAX_COMMAND_WORD_BYTES: usize = 4096;
/// In a command word, replaced by the target triple the measuring binary was built for,
/// so one matrix.yaml names a peer built per target (`target/peers/{target}/...`).
pub const TARGET_PLACEHOLDER: &str = "{target}";

/// Where the peer process runs.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "on", rename_all = "kebab-case")]
pub enum Host {
    /// On this host; the cell's sockets are on 127.0.0.1.
    #[default]
    Loopback,
    /// In a network namespace of its own, a second host joined to the measuring side by
    /// a veth pair the run creates for the cell.
    Netns(NetnsLink),
}

impl Host {
    pub fn is_loopback(&self) -> bool {
        matches!(self, Host::Loopback)
    }

    /// The link to the second host, when the peer runs on one.
    pub fn netns(&self) -> Option<&NetnsLink> {
        match self {
            Host::Loopback => None,
            Host::Netns(link) => Some(link),
        }
    }
}

/// The veth link between the measuring side and a namespace's peer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetnsLink {
    /// Bytes of the largest IP packet on the link; a larger datagram is fragmented.
    pub mtu: u32,
    /// Added to every packet each way (netem), where the kernel has `sch_netem`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<Duration>,
    /// The share of packets dropped each way, in percent (netem).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_percent: Option<f64>,
}

impl NetnsLink {
    /// The link is shaped by netem (a delay or a loss), which needs `sch_netem`.
    pub fn is_shaped(&self) -> bool {
        self.delay.is_some() || self.loss_percent.is_some()
    }
}

/// A peer program the user brings, started as `<command...> serve --config <json>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExternalPeer {
    /// The program (a path with a `/`, relative to matrix.yaml's folder, or a name looked
    /// up in PATH) and its arguments; `{target}` stands for the target triple.
    pub command: Vec<String>,
}

impl ExternalPeer {
    /// The command with `{target}` replaced by `triple`.
    pub fn command_for(&self, triple: &str) -> Vec<String> {
        self.command
            .iter()
            .map(|word| word.replace(TARGET_PLACEHOLDER, triple))
            .collect()
    }
}

/// `host:` as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum RawHost {
    Loopback,
    Netns,
}

/// `link:` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLink {
    pub delay: Option<DurationSpec>,
    pub loss: Option<Percent>,
}

/// `peer:` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPeer {
    pub command: Vec<String>,
}

/// A share written as `0.5%`; bad text is kept for validation to report at its path.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Percent(Result<f64, UnitError>);

impl Percent {
    fn parse(text: &str) -> Result<f64, UnitError> {
        let expected = || UnitError::NotUnderstood {
            text: text.to_string(),
            expected: "a share like 0.5% (0% to 100%)",
        };
        let number = text.trim().strip_suffix('%').ok_or_else(expected)?;
        match number.trim().parse::<f64>() {
            Ok(value) if (0.0..=100.0).contains(&value) => Ok(value),
            _ => Err(expected()),
        }
    }
}

impl<'de> Deserialize<'de> for Percent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Ok(Percent(Self::parse(&text)))
    }
}

/// The kinds whose peer may run on a second host: those that reach it over tcp or udp.
const NETNS_KINDS: [ScenarioKind; 5] = [
    ScenarioKind::Echo,
    ScenarioKind::Bulk,
    ScenarioKind::ReqRep,
    ScenarioKind::Rpc,
    ScenarioKind::UdpLoad,
];
/// The transports that cross to a second host.
const NETNS_TRANSPORTS: [TransportKind; 2] = [TransportKind::Tcp, TransportKind::Udp];
/// The kinds an external peer may serve: it echoes every message.
const EXTERNAL_KINDS: [ScenarioKind; 2] = [ScenarioKind::Echo, ScenarioKind::Bulk];
/// The transports of the external peer protocol.
const EXTERNAL_TRANSPORTS: [TransportKind; 3] =
    [TransportKind::Tcp, TransportKind::Udp, TransportKind::Local];

/// What a scenario writes about where its peer runs and whose it is.
pub(crate) struct RawReach<'a> {
    pub kind: ScenarioKind,
    pub transports: &'a [TransportKind],
    pub host: Option<RawHost>,
    pub mtu: Option<u32>,
    pub link: Option<&'a RawLink>,
    pub peer: Option<&'a RawPeer>,
}

impl RawReach<'_> {
    /// The host and the peer, each checked; problems at `at(key)`.
    pub(crate) fn check(
        &self,
        at: impl Fn(&str) -> Vec<Segment>,
        out: &mut Problems,
    ) -> (Host, Option<ExternalPeer>) {
        let host = self.check_host(&at, out);
        let peer = self.check_peer(&at, out);
        (host, peer)
    }

    fn check_host(&self, at: &impl Fn(&str) -> Vec<Segment>, out: &mut Problems) -> Host {
        if self.host != Some(RawHost::Netns) {
            for (key, given) in [("mtu", self.mtu.is_some()), ("link", self.link.is_some())] {
                if given {
                    out.push((
                        at(key),
                        format!("`{key}` is the link to a second host: it applies only with `host: netns`"),
                    ));
                }
            }
            return Host::Loopback;
        }
        if !NETNS_KINDS.contains(&self.kind) {
            out.push((
                at("host"),
                format!(
                    "`host: netns` applies to echo, bulk, req-rep, rpc and udp-load scenarios (over tcp or udp), not to {}",
                    self.kind.as_str()
                ),
            ));
        }
        self.only_over(&NETNS_TRANSPORTS, "`host: netns` reaches its peer", at, out);
        let mtu = self.mtu.unwrap_or(DEFAULT_MTU);
        if !MTU_RANGE.contains(&mtu) {
            out.push((
                at("mtu"),
                format!(
                    "an MTU of {mtu} bytes is outside {}..={} (IPv4's least, veth's most)",
                    MTU_RANGE.start(),
                    MTU_RANGE.end()
                ),
            ));
        }
        let mut link = NetnsLink {
            mtu,
            delay: None,
            loss_percent: None,
        };
        if let Some(raw) = self.link {
            let field = |name: &str| {
                let mut path = at("link");
                path.push(Segment::Key(name.to_string()));
                path
            };
            if let Some(delay) = &raw.delay {
                match delay.invalid() {
                    Some(why) => out.push((field("delay"), why.to_string())),
                    None => link.delay = Some(delay.get()),
                }
            }
            if let Some(loss) = &raw.loss {
                match &loss.0 {
                    Err(why) => out.push((field("loss"), why.to_string())),
                    Ok(share) => link.loss_percent = Some(*share),
                }
            }
            if raw.delay.is_none() && raw.loss.is_none() {
                out.push((
                    at("link"),
                    "give `delay`, `loss` or both, e.g. `link: { delay: 1ms, loss: 0.5% }`".into(),
                ));
            }
        }
        Host::Netns(link)
    }

    fn check_peer(
        &self,
        at: &impl Fn(&str) -> Vec<Segment>,
        out: &mut Problems,
    ) -> Option<ExternalPeer> {
        let raw = self.peer?;
        if !EXTERNAL_KINDS.contains(&self.kind) {
            out.push((
                at("peer"),
                format!(
                    "an external peer echoes: it serves echo and bulk scenarios, not {}",
                    self.kind.as_str()
                ),
            ));
        }
        self.only_over(&EXTERNAL_TRANSPORTS, "an external peer connects", at, out);
        let command_at = |j: Option<usize>| {
            let mut path = at("peer");
            path.push(Segment::Key("command".into()));
            if let Some(j) = j {
                path.push(Segment::Index(j));
            }
            path
        };
        let before = out.len();
        match raw.command.first() {
            None => out.push((
                command_at(None),
                "name the peer program, e.g. `command: [peers/my-peer]`".into(),
            )),
            Some(program) if program.trim().is_empty() => out.push((
                command_at(Some(0)),
                "the peer program's name is empty".into(),
            )),
            Some(_) => {}
        }
        if raw.command.len() > MAX_COMMAND_WORDS {
            out.push((
                command_at(None),
                format!(
                    "{} words; a peer command has at most {MAX_COMMAND_WORDS}",
                    raw.command.len()
                ),
            ));
        }
        for (j, word) in raw.command.iter().enumerate() {
            if word.len() > MAX_COMMAND_WORD_BYTES || word.contains('\0') {
                out.push((
                    command_at(Some(j)),
                    format!(
                        "a command word has at most {MAX_COMMAND_WORD_BYTES} bytes and no NUL byte"
                    ),
                ));
            }
        }
        (out.len() == before).then(|| ExternalPeer {
            command: raw.command.clone(),
        })
    }

    /// Every listed transport is one of `allowed`, or a problem at its place.
    fn only_over(
        &self,
        allowed: &[TransportKind],
        what: &str,
        at: &impl Fn(&str) -> Vec<Segment>,
        out: &mut Problems,
    ) {
        let names: Vec<&str> = allowed.iter().map(|t| t.as_str()).collect();
        for (j, transport) in self.transports.iter().enumerate() {
            if !allowed.contains(transport) {
                let mut path = at("transports");
                path.push(Segment::Index(j));
                out.push((
                    path,
                    format!(
                        "{what} over {} only, not over {transport}",
                        names.join(", ")
                    ),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_read_as_percent_and_refuse_the_rest() {
        assert_eq!(Percent::parse("0.5%"), Ok(0.5));
        assert_eq!(Percent::parse(" 100 % "), Ok(100.0));
        for bad in ["0.5", "-1%", "101%", "x%", "NaN%", ""] {
            assert!(Percent::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn the_target_placeholder_is_replaced_in_every_word() {
        let peer = ExternalPeer {
            command: vec!["target/peers/{target}/p".into(), "--x={target}".into()],
        };
        assert_eq!(
            peer.command_for("s390x-unknown-linux-gnu"),
            [
                "target/peers/s390x-unknown-linux-gnu/p",
                "--x=s390x-unknown-linux-gnu"
            ]
        );
    }
}

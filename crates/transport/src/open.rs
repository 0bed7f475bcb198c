//! [`listen`] and [`connect`]: the two ends of a channel, each picking its transport (a
//! built-in one, or a registered stack).

use crate::address::PeerAddress;
use crate::contract::{Acceptor, Channel, ListenOptions};
use crate::error::TransportError;
use crate::{iceoryx2, local, pipe, plugin, shm, stack, tcp, udp};
use ipc_matrix_spec::{ChannelKind, WakeMode};
use std::time::Instant;

/// Opens the measuring side of a channel of `kind`.
pub fn listen(
    kind: ChannelKind,
    options: ListenOptions,
) -> Result<Box<dyn Acceptor>, TransportError> {
    Ok(match kind {
        ChannelKind::Shm => Box::new(shm::ShmAcceptor::create(
            options.wake.unwrap_or(WakeMode::Blocking),
            options.max_message,
        )?),
        ChannelKind::Local => Box::new(local::LocalAcceptor::bind()?),
        ChannelKind::Tcp => Box::new(tcp::TcpAcceptor::bind(options.bind)?),
        ChannelKind::Udp => Box::new(udp::UdpAcceptor::bind(options.bind)?),
        ChannelKind::Pipe => Box::new(pipe::PipeAcceptor::create()?),
        ChannelKind::Iceoryx2 => Box::new(iceoryx2::Iceoryx2Acceptor::create(
            options.wake.unwrap_or(WakeMode::Blocking),
            options.max_message,
        )?),
        ChannelKind::Stack(name) => stack::listen(name, &options)?,
    })
}

/// Connects the peer's side of a channel.
pub fn connect(
    address: &PeerAddress,
    deadline: Instant,
) -> Result<Box<dyn Channel>, TransportError> {
    Ok(match address {
        PeerAddress::Shm { os_id, wake } => Box::new(shm::attach(os_id, *wake, deadline)?),
        PeerAddress::Local { path } => Box::new(local::connect(path, deadline)?),
        PeerAddress::Tcp { addr } => Box::new(tcp::connect(*addr, deadline)?),
        PeerAddress::Udp { addr } => Box::new(udp::connect(*addr, deadline)?),
        PeerAddress::Pipe { read_fd, write_fd } => Box::new(pipe::connect(*read_fd, *write_fd)?),
        PeerAddress::Iceoryx2 {
            root,
            prefix,
            wake,
            max_message,
            owner_pid,
        } => Box::new(iceoryx2::connect(
            root,
            prefix,
            *wake,
            *max_message,
            *owner_pid,
            deadline,
        )?),
        PeerAddress::Stack {
            stack,
            address,
            library,
        } => {
            // A stack in a shared library is loaded from it first, where this process
            // (the peer) has not yet.
            if let (Some(library), None) = (library, stack.traits()) {
                plugin::register_plugin(stack.as_str(), library)?;
            }
            stack::connect(*stack, address, deadline)?
        }
    })
}

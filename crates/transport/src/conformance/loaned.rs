//! The loaned path's checks ([`crate::Loans`]: loan, fill, commit; borrow, compare,
//! release), for the subjects whose message paths list it.

use super::subject::{
    exits_cleanly_on_the_goodbye, has_loans, open, sizes_for, with_stderr, Subject,
};
use super::support::{bytes, compare, Peer, OP};
use super::support::{violated, CheckFailure};
use crate::contract::Channel;
use crate::error::TransportError;
use std::time::Instant;

/// Sizes for the loaned path: every size of [`sizes_for`] that one loan holds, and the
/// largest it holds.
fn loan_sizes(subject: Subject, max_loan: usize) -> Vec<usize> {
    let mut sizes = sizes_for(subject.limit().min(max_loan));
    sizes.retain(|&len| len > 0);
    if !sizes.contains(&max_loan.min(subject.limit())) {
        sizes.push(max_loan.min(subject.limit()));
    }
    sizes
}

/// The loaned path's goodbye (a loan of 0 bytes, committed); the peer then exits 0, and
/// sends nothing after it.
fn loaned_goodbye(channel: &mut dyn Channel, peer: &mut Peer) -> Result<(), CheckFailure> {
    let loans = channel.loans().ok_or("the loaned path went away")?;
    let _ = loans
        .loan(0, Instant::now() + OP)
        .map_err(|e| format!("loaning the goodbye: {e}"))?;
    loans
        .commit(Instant::now() + OP)
        .map_err(|e| format!("the goodbye: {e}"))
        .map_err(with_stderr(peer))?;
    exits_cleanly_on_the_goodbye(peer, "the peer")
}

/// Every transport says whether it has the loaned path, and those that have it are the
/// ones checked for it here ([`has_loans`]): a transport that gains one gains its checks.
pub(super) fn loans_offered_as_listed(subject: Subject) -> Result<(), CheckFailure> {
    let (mut channel, mut peer) = open(subject, "echo")?;
    let offered = channel.loans().map(|loans| loans.max_loan());
    let _ = peer.finish();
    match (offered, has_loans(subject)) {
        (Some(0), _) => Err("a loaned path whose loans hold 0 bytes".into()),
        (Some(_), true) | (None, false) => Ok(()),
        (Some(max), false) => Err(violated!(
            "a loaned path (up to {max} bytes) that has_loans does not list, so it goes unchecked"
        )),
        (None, true) => Err("no loaned path, but has_loans lists one".into()),
    }
}

/// The loaned path both ways: the measuring side fills each request in its loan and
/// commits it, takes the next loan before it waits for the reply (as a zero-copy
/// stack's users do), and compares each reply where it lies before it releases it; the
/// peer echoes each request from where it lies into the reply's loan (`echo_loaned`).
/// Every size a loan holds, up to the largest.
pub(super) fn loaned_echo(subject: Subject) -> Result<(), CheckFailure> {
    let (mut channel, mut peer) = open(subject, "loan-echoer")?;
    let loans = channel.loans().ok_or("no loaned path")?;
    let sizes = loan_sizes(subject, loans.max_loan());
    let deadline = || Instant::now() + OP;
    let request = |i: usize| bytes(0x10a4_0000 + i as u64, sizes[i]);
    loans
        .loan(sizes[0], deadline())
        .map_err(|e| e.to_string())?
        .copy_from_slice(&request(0));
    for (i, &len) in sizes.iter().enumerate() {
        loans
            .commit(deadline())
            .map_err(|e| format!("committing the {len}-byte request: {e}"))
            .map_err(with_stderr(&mut peer))?;
        if let Some(&following) = sizes.get(i + 1) {
            loans
                .loan(following, deadline())
                .map_err(|e| format!("loaning ahead for the {following}-byte request: {e}"))?
                .copy_from_slice(&request(i + 1));
        }
        let reply = loans
            .borrow(subject.limit(), deadline())
            .map_err(|e| format!("borrowing the reply to the {len}-byte request: {e}"))
            .map_err(with_stderr(&mut peer))?;
        compare(
            &format!("the reply to the {len}-byte request"),
            &request(i),
            reply,
        )?;
        loans.release();
    }
    loaned_goodbye(channel.as_mut(), &mut peer)
}

/// The measuring side's end of a loaned round trip, in the order a loaned cell runs it:
/// each request written into the loan taken ahead and committed, the next request's loan
/// taken, the previous reply (still borrowed until then, also when the stack's loan and
/// borrowed message share memory) given back, and the reply held when it arrives
/// (`hold`, nothing of it read) and lent where it lies afterwards (`held`), its length
/// checked then, and compared. While a message is held a borrow is refused, and after its
/// release nothing is held. A reply longer than the limit given to `hold` is refused, by
/// `hold` or by `held`, never lent. Every size a loan holds.
pub(super) fn held_replies(subject: Subject) -> Result<(), CheckFailure> {
    let (mut channel, mut peer) = open(subject, "loan-echoer")?;
    let loans = channel.loans().ok_or("no loaned path")?;
    let deadline = || Instant::now() + OP;
    let refused = |what: &str, result: Result<(), TransportError>| match result {
        Err(TransportError::Loan(_)) => Ok(()),
        other => Err(violated!(
            "{what}: {other:?}, where the loaned path refuses it"
        )),
    };
    refused("`held` with nothing held", loans.held().map(|_| ()))?;
    let sizes = loan_sizes(subject, loans.max_loan());
    loans
        .loan(sizes[0], deadline())
        .map_err(|e| format!("loaning the first request: {e}"))?;
    for (i, &len) in sizes.iter().enumerate() {
        let request = bytes(0x4e1d_0000 + i as u64, len);
        if loans.loaned().map(|room| room.len()) != Some(len) {
            loans.cancel();
            loans
                .loan(len, deadline())
                .map_err(|e| format!("loaning the {len}-byte request: {e}"))?;
        }
        loans
            .loaned()
            .ok_or("the loan taken ahead is not found again")?
            .copy_from_slice(&request);
        loans
            .commit(deadline())
            .map_err(|e| format!("committing the {len}-byte request: {e}"))
            .map_err(with_stderr(&mut peer))?;
        loans
            .loan(len, deadline())
            .map_err(|e| format!("loaning ahead after the {len}-byte request: {e}"))?;
        loans.release();
        refused("`held` after the release", loans.held().map(|_| ()))?;
        loans
            .hold(subject.limit(), deadline())
            .map_err(|e| format!("holding the reply to the {len}-byte request: {e}"))
            .map_err(with_stderr(&mut peer))?;
        refused(
            "a borrow while a message is held",
            loans.borrow(subject.limit(), deadline()).map(|_| ()),
        )?;
        let reply = loans
            .held()
            .map_err(|e| format!("reading the held reply to the {len}-byte request: {e}"))?;
        compare(
            &format!("the held reply to the {len}-byte request"),
            &request,
            reply,
        )?;
    }
    loans.release();
    loans.cancel();
    // One byte over the limit: the reply is refused, not lent. The channel may be left to
    // fail after it (shared memory leaves the message where it is), so the peer is ended.
    let len = sizes[sizes.len() - 1];
    let request = bytes(0x4e1e_0000, len);
    loans
        .loan(len, deadline())
        .map_err(|e| e.to_string())?
        .copy_from_slice(&request);
    loans
        .commit(deadline())
        .map_err(|e| format!("committing the {len}-byte request: {e}"))
        .map_err(with_stderr(&mut peer))?;
    let limit = len - 1;
    let outcome = match loans.hold(limit, deadline()) {
        Ok(()) => loans.held().map(<[u8]>::len),
        Err(e) => Err(e),
    };
    loans.release();
    let _ = peer.finish();
    match outcome {
        Err(TransportError::TooLarge { announced, limit: said })
            if announced == len as u64 && said == limit =>
        {
            Ok(())
        }
        other => Err(violated!(
            "a {len}-byte reply held with a limit of {limit} bytes: {other:?}, where it is refused as too large"
        )),
    }
}

/// A loaned message is received on the copying path and a copied one on the loaned path:
/// the loaned measuring side with a peer that echoes by copying, and a copying measuring
/// side with a peer that echoes from its loans.
pub(super) fn loaned_and_copying_paths_meet(subject: Subject) -> Result<(), CheckFailure> {
    let (mut channel, mut peer) = open(subject, "echoer")?;
    let loans = channel.loans().ok_or("no loaned path")?;
    let max = loans.max_loan();
    for (i, &len) in loan_sizes(subject, max).iter().enumerate() {
        let request = bytes(0x3ee7_0000 + i as u64, len);
        let room = loans
            .loan(len, Instant::now() + OP)
            .map_err(|e| e.to_string())?;
        room.copy_from_slice(&request);
        loans
            .commit(Instant::now() + OP)
            .map_err(|e| format!("committing the {len}-byte request: {e}"))
            .map_err(with_stderr(&mut peer))?;
        let reply = loans
            .borrow(subject.limit(), Instant::now() + OP)
            .map_err(|e| format!("borrowing the copied reply to the {len}-byte request: {e}"))
            .map_err(with_stderr(&mut peer))?;
        compare(
            &format!("the copied reply to the loaned {len}-byte request"),
            &request,
            reply,
        )?;
        loans.release();
    }
    loaned_goodbye(channel.as_mut(), &mut peer)?;

    let (mut channel, mut peer) = open(subject, "loan-echoer")?;
    let mut reply = Vec::new();
    for (i, &len) in loan_sizes(subject, max).iter().enumerate() {
        let request = bytes(0x3ee8_0000 + i as u64, len);
        channel
            .send(&request, Instant::now() + OP)
            .map_err(|e| format!("sending the {len}-byte request: {e}"))
            .map_err(with_stderr(&mut peer))?;
        channel
            .recv(&mut reply, subject.limit(), Instant::now() + OP)
            .map_err(|e| format!("receiving the loaned reply to the {len}-byte request: {e}"))
            .map_err(with_stderr(&mut peer))?;
        compare(
            &format!("the loaned reply to the copied {len}-byte request"),
            &request,
            &reply,
        )?;
    }
    channel
        .send(&[], Instant::now() + OP)
        .map_err(|e| format!("the goodbye: {e}"))?;
    exits_cleanly_on_the_goodbye(&mut peer, "the loan-echoing peer")
}

/// What the loaned path cannot do it refuses, saying so, and the channel goes on: a
/// commit with no loan open, a second loan, a loan larger than a loan holds, a second
/// borrow. The copying path over an open loan or a borrowed message is refused, or (where
/// the copying path does not look at loans, so as to cost what it did) takes the loan's
/// room or the borrowed message, after which the loan's commit is refused and the borrow
/// gives back nothing: never a message made of both, never one lost. A release with
/// nothing borrowed does nothing.
pub(super) fn loans_refuse_misuse(subject: Subject) -> Result<(), CheckFailure> {
    let (mut channel, mut peer) = open(subject, "echoer")?;
    let deadline = || Instant::now() + OP;
    let refused = |what: &str, result: Result<(), TransportError>| match result {
        Err(TransportError::Loan(_)) => Ok(()),
        other => Err(violated!(
            "{what}: {other:?}, where the loaned path refuses it"
        )),
    };
    let loans = channel.loans().ok_or("no loaned path")?;
    let max = loans.max_loan();
    refused("a commit with no loan open", loans.commit(deadline()))?;
    refused(
        "a loan larger than a loan holds",
        loans.loan(max + 1, deadline()).map(|_| ()),
    )?;
    loans.release();
    let request = bytes(0x3150, 200.min(max));
    loans
        .loan(request.len(), deadline())
        .map_err(|e| e.to_string())?
        .copy_from_slice(&request);
    refused("a second loan", loans.loan(1, deadline()).map(|_| ()))?;
    // A copying send while a loan is open: refused (iceoryx2), or it takes the loan's
    // room for its own message, which goes out whole, and the stale loan's commit is
    // refused (shared memory, whose copying path never looks at loans). Never a message
    // made of both.
    let expected = match channel.send(b"copied", deadline()) {
        Err(TransportError::Loan(_)) => {
            let loans = channel.loans().ok_or("the loaned path went away")?;
            loans
                .commit(deadline())
                .map_err(|e| format!("committing after the refused send: {e}"))
                .map_err(with_stderr(&mut peer))?;
            request.clone()
        }
        Ok(()) => {
            let loans = channel.loans().ok_or("the loaned path went away")?;
            refused(
                "the commit of a loan whose room the copying path took",
                loans.commit(deadline()),
            )?;
            b"copied".to_vec()
        }
        Err(e) => return Err(violated!("a copying send while a loan is open: {e}")),
    };
    let loans = channel.loans().ok_or("the loaned path went away")?;
    let reply = loans
        .borrow(subject.limit(), deadline())
        .map_err(|e| format!("borrowing the reply: {e}"))
        .map_err(with_stderr(&mut peer))?;
    compare("the reply after the refusals", &expected, reply)?;
    refused(
        "a second borrow",
        loans.borrow(subject.limit(), deadline()).map(|_| ()),
    )?;
    // A copying receive while a message is borrowed: refused (iceoryx2), or it takes
    // that message, whose borrow is then stale (shared memory). Never a later message.
    let mut copy = Vec::new();
    match channel.recv(&mut copy, subject.limit(), deadline()) {
        Err(TransportError::Loan(_)) => {}
        Ok(()) => {
            compare(
                "a copying receive of the borrowed message",
                &expected,
                &copy,
            )?;
            let loans = channel.loans().ok_or("the loaned path went away")?;
            if loans.borrowed().is_some() {
                return Err("a message taken by the copying path is still borrowed".into());
            }
        }
        Err(e) => {
            return Err(violated!(
                "a copying receive while a message is borrowed: {e}"
            ))
        }
    }
    let loans = channel.loans().ok_or("the loaned path went away")?;
    loans.release();
    loans.release();
    // Both paths go on as before.
    let mut reply = Vec::new();
    channel
        .send(&request, deadline())
        .and_then(|()| channel.recv(&mut reply, subject.limit(), deadline()))
        .map_err(|e| format!("a round trip after the refusals: {e}"))
        .map_err(with_stderr(&mut peer))?;
    compare("the copied reply after the refusals", &request, &reply)?;
    cancelled_loans_send_nothing(channel.as_mut(), &mut peer, subject)?;
    loaned_goodbye(channel.as_mut(), &mut peer)
}

/// An open loan is found again (`loaned`) and given back unsent (`cancel`): nothing of
/// it arrives, and the copying path goes on; a borrowed message is found again
/// (`borrowed`) until it is released.
fn cancelled_loans_send_nothing(
    channel: &mut dyn Channel,
    peer: &mut Peer,
    subject: Subject,
) -> Result<(), CheckFailure> {
    let deadline = || Instant::now() + OP;
    let loans = channel.loans().ok_or("no loaned path")?;
    if loans.loaned().is_some() || loans.borrowed().is_some() {
        return Err("a loan or a borrowed message open after its commit or release".into());
    }
    let cancelled = bytes(0xca9c, 100.min(loans.max_loan()));
    loans
        .loan(cancelled.len(), deadline())
        .map_err(|e| e.to_string())?;
    loans
        .loaned()
        .ok_or("the open loan is not found again")?
        .copy_from_slice(&cancelled);
    loans.cancel();
    if loans.loaned().is_some() {
        return Err("a cancelled loan is still open".into());
    }
    let request = bytes(0xca9d, 150.min(loans.max_loan()));
    channel
        .send(&request, deadline())
        .map_err(|e| format!("a copying send after a cancelled loan: {e}"))
        .map_err(with_stderr(peer))?;
    let loans = channel.loans().ok_or("the loaned path went away")?;
    let reply = loans
        .borrow(subject.limit(), deadline())
        .map_err(|e| format!("the reply after a cancelled loan: {e}"))
        .map_err(with_stderr(peer))?
        .to_vec();
    compare("the reply after a cancelled loan", &request, &reply)?;
    if loans.borrowed() != Some(&reply[..]) {
        return Err("the borrowed message is not found again as it was borrowed".into());
    }
    loans.release();
    if loans.borrowed().is_some() {
        return Err("a released message is still borrowed".into());
    }
    Ok(())
}

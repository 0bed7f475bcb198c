use super::abi::*;
use super::*;
use std::ffi::c_char;
use std::ffi::CStr;

/// A table as a C stack would give it, made here: every call present, none called.
fn table(name: &'static CStr) -> Table {
    unsafe extern "C" fn listen(_: usize, _: *mut *mut Acc, _: *mut ErrorBuf) -> u32 {
        ERROR
    }
    unsafe extern "C" fn address(_: *const Acc) -> *const c_char {
        std::ptr::null()
    }
    unsafe extern "C" fn accept(
        _: *mut Acc,
        _: u32,
        _: u64,
        _: *mut *mut Chan,
        _: *mut ErrorBuf,
    ) -> u32 {
        ERROR
    }
    unsafe extern "C" fn drop_acceptor(_: *mut Acc) {}
    unsafe extern "C" fn connect(
        _: *const c_char,
        _: u64,
        _: *mut *mut Chan,
        _: *mut ErrorBuf,
    ) -> u32 {
        ERROR
    }
    unsafe extern "C" fn send(
        _: *mut Chan,
        _: *const u8,
        _: usize,
        _: u64,
        _: *mut ErrorBuf,
    ) -> u32 {
        ERROR
    }
    unsafe extern "C" fn recv(
        _: *mut Chan,
        _: *mut u8,
        _: usize,
        _: *mut usize,
        _: u64,
        _: *mut ErrorBuf,
    ) -> u32 {
        ERROR
    }
    unsafe extern "C" fn close(_: *mut Chan) {}
    Table {
        abi_version: ABI_VERSION,
        size: std::mem::size_of::<Table>() as u32,
        name: name.as_ptr(),
        floor: 0,
        reserved: 0,
        listen: Some(listen),
        address: Some(address),
        accept: Some(accept),
        drop_acceptor: Some(drop_acceptor),
        connect: Some(connect),
        send: Some(send),
        recv: Some(recv),
        close: Some(close),
        max_loan: 0,
        loan: None,
        commit: None,
        cancel: None,
        borrow: None,
        release: None,
    }
}

fn checked(t: Table) -> Result<StackTraits, String> {
    let t: &'static Table = Box::leak(Box::new(t));
    // SAFETY: a whole table that is never freed.
    unsafe { check("made-here", t) }
        .map(|(_, traits)| traits)
        .map_err(|why| why.to_string())
}

#[test]
fn a_whole_table_is_taken_with_its_floor_and_without_loans() {
    let mut t = table(c"made-here");
    t.floor = 1;
    let traits = checked(t).unwrap();
    assert_eq!(traits.floor_like, ChannelKind::Tcp);
    assert_eq!(traits.message_paths, &[MessagePath::Copied]);
}

#[test]
fn each_thing_wrong_with_a_table_is_refused_naming_it() {
    type Spoil = fn(&mut Table);
    let cases: [(Spoil, &str); 7] = [
        (|t| t.abi_version = 2, "ABI version 2"),
        (|t| t.size -= 8, "bytes; version 1's is"),
        (|t| t.name = std::ptr::null(), "has no name"),
        (|t| t.name = c"other".as_ptr(), "it calls itself `other`"),
        (|t| t.floor = 9, "its floor is 9"),
        (|t| t.recv = None, "has no `recv`"),
        (|t| t.max_loan = 64, "max_loan but no loaned path"),
    ];
    for (spoil, said) in cases {
        let mut t = table(c"made-here");
        spoil(&mut t);
        let why = checked(t).expect_err(said);
        assert!(why.contains(said), "{said:?} not in {why:?}");
    }
    // SAFETY: NULL is what the check is for.
    let why = unsafe { check("made-here", std::ptr::null()) }
        .map(|(_, traits)| traits)
        .unwrap_err();
    assert_eq!(why, super::abi::TableRefusal::Null);
    assert!(why.to_string().contains("returned NULL"), "{why}");
}

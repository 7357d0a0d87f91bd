//! The raw side of the `ofi` driver: the functions of `shim.c` (which wrap libfabric's inline
//! calls) and the few libfabric structures the driver reads, plus [`Endpoint`] and
//! [`MemReg`], which own the libfabric objects and close them on drop.
//!
//! Every libfabric failure becomes an [`Error::Io`] naming the provider and the libfabric call,
//! with `fi_strerror`'s text.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::mem::MaybeUninit;

use crate::{Error, Result};

/// `struct madmpi_ofi` of `shim.c`: opaque.
#[repr(C)]
pub(super) struct RawOfi {
    _private: [u8; 0],
}

/// `struct fid_mr`: opaque.
#[repr(C)]
pub(super) struct RawMr {
    _private: [u8; 0],
}

/// `struct madmpi_ofi_attr` of `shim.c`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct RawAttr {
    provider: [c_char; 64],
    fabric: [c_char; 128],
    domain: [c_char; 128],
    caps: u64,
    mode: u64,
    mr_mode: u64,
    max_msg_size: u64,
    inject_size: u64,
    iov_limit: u64,
    rma_iov_limit: u64,
    tx_size: u64,
    rx_size: u64,
    mr_key_size: u64,
}

/// libfabric's `struct fi_cq_msg_entry`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(super) struct CqEntry {
    /// The context given to the operation.
    pub op_context: *mut c_void,
    /// `FI_SEND`, `FI_RECV`, ...
    pub flags: u64,
    /// Bytes received.
    pub len: usize,
}

/// libfabric's `struct fi_context2`: the room a provider may use per operation.
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct Context {
    _internal: [*mut c_void; 8],
}

impl Default for Context {
    fn default() -> Context {
        Context {
            _internal: [std::ptr::null_mut(); 8],
        }
    }
}

extern "C" {
    fn madmpi_ofi_probe(prov: *const c_char, name: *mut c_char, len: usize) -> c_int;
    fn madmpi_ofi_open(
        prov: *const c_char,
        want_rma: c_int,
        cq_size: u64,
        out: *mut *mut RawOfi,
        attr: *mut RawAttr,
        call: *mut *const c_char,
    ) -> c_int;
    fn madmpi_ofi_close(o: *mut RawOfi);
    fn madmpi_ofi_close_ep(o: *mut RawOfi);
    fn madmpi_ofi_getname(o: *mut RawOfi, addr: *mut c_void, len: *mut usize) -> c_int;
    fn madmpi_ofi_av_insert(o: *mut RawOfi, addr: *const c_void, fi_addr: *mut u64) -> c_int;
    fn madmpi_ofi_mr_reg(
        o: *mut RawOfi,
        buf: *const c_void,
        len: usize,
        access: u64,
        requested_key: u64,
        mr: *mut *mut RawMr,
        desc: *mut *mut c_void,
        key: *mut u64,
        call: *mut *const c_char,
    ) -> c_int;
    fn madmpi_ofi_mr_close(mr: *mut RawMr) -> c_int;
    fn madmpi_ofi_send(
        o: *mut RawOfi,
        buf: *const c_void,
        len: usize,
        desc: *mut c_void,
        dest: u64,
        ctx: *mut c_void,
    ) -> isize;
    fn madmpi_ofi_inject(o: *mut RawOfi, buf: *const c_void, len: usize, dest: u64) -> isize;
    fn madmpi_ofi_recv(
        o: *mut RawOfi,
        buf: *mut c_void,
        len: usize,
        desc: *mut c_void,
        ctx: *mut c_void,
    ) -> isize;
    fn madmpi_ofi_read(
        o: *mut RawOfi,
        buf: *mut c_void,
        len: usize,
        desc: *mut c_void,
        src: u64,
        addr: u64,
        key: u64,
        ctx: *mut c_void,
    ) -> isize;
    fn madmpi_ofi_write(
        o: *mut RawOfi,
        buf: *const c_void,
        len: usize,
        desc: *mut c_void,
        dest: u64,
        addr: u64,
        key: u64,
        ctx: *mut c_void,
        delivery: c_int,
    ) -> isize;
    fn madmpi_ofi_cq_read(o: *mut RawOfi, entries: *mut CqEntry, count: usize) -> isize;
    fn madmpi_ofi_cq_readerr(
        o: *mut RawOfi,
        ctx: *mut *mut c_void,
        err: *mut c_int,
        text: *mut c_char,
        len: usize,
    ) -> isize;
    fn madmpi_ofi_strerror(err: c_int) -> *const c_char;
    fn madmpi_ofi_const(which: c_int) -> u64;
}

/// `FI_EAGAIN`.
pub(super) fn eagain() -> isize {
    // SAFETY: a pure function of its argument.
    unsafe { madmpi_ofi_const(8) as isize }
}

/// `FI_EAVAIL`.
fn eavail() -> isize {
    // SAFETY: as above.
    unsafe { madmpi_ofi_const(9) as isize }
}

/// `fi_strerror` of a (negative or positive) fi errno.
pub(super) fn strerror(err: isize) -> String {
    // SAFETY: fi_strerror returns a static string (or one of a static buffer) for any value.
    unsafe {
        let s = madmpi_ofi_strerror(err as c_int);
        if s.is_null() {
            format!("libfabric error {err}")
        } else {
            CStr::from_ptr(s).to_string_lossy().into_owned()
        }
    }
}

/// The error of libfabric call `call` (which returned `ret`) under provider `prov`.
pub(super) fn fi_error(prov: &str, call: &str, ret: isize) -> Error {
    let code = ret.unsigned_abs() as i32;
    Error::Io {
        what: format!("ofi (provider {prov}): {call}"),
        source: std::io::Error::new(
            std::io::Error::from_raw_os_error(code).kind(),
            strerror(ret),
        ),
    }
}

fn c_str(s: &[c_char]) -> String {
    let bytes: Vec<u8> = s
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The provider libfabric would choose for an RDM endpoint with `FI_MSG` (restricted to
/// `prov` when given), without opening it.
///
/// # Errors
///
/// No provider matches (the error names the call and the provider asked for).
pub(super) fn probe(prov: Option<&str>) -> Result<String> {
    let cprov = prov
        .map(|p| CString::new(p).map_err(|_| Error::Invalid(format!("provider name {p:?}"))))
        .transpose()?;
    let mut name = [0 as c_char; 64];
    // SAFETY: `name` has room for 64 bytes; the provider string lives across the call.
    let ret = unsafe {
        madmpi_ofi_probe(
            cprov.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
            name.as_mut_ptr(),
            name.len(),
        )
    };
    if ret != 0 {
        return Err(fi_error(prov.unwrap_or("any"), "fi_getinfo", ret as isize));
    }
    Ok(c_str(&name))
}

/// What the provider said of the endpoint it opened.
#[derive(Clone, Debug)]
pub(super) struct Attr {
    /// Provider name (`tcp;ofi_rxm`, `verbs;ofi_rxm`, `efa`, ...).
    pub provider: String,
    /// Fabric and domain names (network and interface).
    pub fabric: String,
    pub domain: String,
    /// The endpoint offers `FI_RMA`.
    pub rma: bool,
    /// It offers RDMA writes as well (`FI_WRITE` and `FI_REMOTE_WRITE`: one-sided windows).
    pub rma_write: bool,
    /// Buffers must be registered for local use (`FI_MR_LOCAL`).
    pub mr_local: bool,
    /// Remote addresses are virtual addresses (`FI_MR_VIRT_ADDR`); else offsets.
    pub mr_virt_addr: bool,
    pub max_msg_size: u64,
    pub inject_size: u64,
    pub iov_limit: u64,
    pub rma_iov_limit: u64,
    pub tx_size: u64,
    pub rx_size: u64,
}

/// An RDM endpoint with its fabric, domain, completion queue and address vector.
pub(super) struct Endpoint {
    raw: *mut RawOfi,
    attr: Attr,
}

// SAFETY: the libfabric objects are used by one thread at a time (the driver's owner holds
// it mutably; FI_THREAD_DOMAIN), and may move between threads.
unsafe impl Send for Endpoint {}

impl Drop for Endpoint {
    fn drop(&mut self) {
        // SAFETY: `raw` came from madmpi_ofi_open and is closed once.
        unsafe { madmpi_ofi_close(self.raw) };
    }
}

impl Endpoint {
    /// Open an endpoint of provider `prov` (libfabric's choice when `None`), with `FI_RMA`
    /// when `want_rma` and the provider has it.
    ///
    /// # Errors
    ///
    /// The libfabric call that failed, with the provider.
    pub(super) fn open(prov: Option<&str>, want_rma: bool, cq_size: usize) -> Result<Endpoint> {
        let cprov = prov
            .map(|p| CString::new(p).map_err(|_| Error::Invalid(format!("provider name {p:?}"))))
            .transpose()?;
        let mut raw = std::ptr::null_mut();
        let mut a = std::mem::MaybeUninit::<RawAttr>::zeroed();
        let mut call: *const c_char = std::ptr::null();
        // SAFETY: every out-pointer points to a live local; the provider string outlives the
        // call.
        let ret = unsafe {
            madmpi_ofi_open(
                cprov.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
                want_rma as c_int,
                cq_size as u64,
                &mut raw,
                a.as_mut_ptr(),
                &mut call,
            )
        };
        if ret != 0 {
            // SAFETY: `call` points to a string literal of the shim.
            let call = unsafe { CStr::from_ptr(call) }.to_string_lossy();
            return Err(fi_error(prov.unwrap_or("any"), &call, ret as isize));
        }
        // SAFETY: the shim filled the struct on success (and it was zeroed before).
        let a = unsafe { a.assume_init() };
        // SAFETY: pure functions of their argument.
        let k = |i| unsafe { madmpi_ofi_const(i) };
        let attr = Attr {
            provider: c_str(&a.provider),
            fabric: c_str(&a.fabric),
            domain: c_str(&a.domain),
            rma: a.caps & k(0) != 0,
            rma_write: a.caps & k(0) != 0 && a.caps & k(12) != 0 && a.caps & k(13) != 0,
            mr_local: a.mr_mode & k(1) != 0,
            mr_virt_addr: a.mr_mode & k(2) != 0,
            max_msg_size: a.max_msg_size,
            inject_size: a.inject_size,
            iov_limit: a.iov_limit,
            rma_iov_limit: a.rma_iov_limit,
            tx_size: a.tx_size,
            rx_size: a.rx_size,
        };
        let _ = (a.mode, a.mr_key_size);
        Ok(Endpoint { raw, attr })
    }

    /// Close the endpoint alone: its posted operations end, and the memory registrations may
    /// then be dropped (before the domain, which [`Drop`] closes). Nothing may be posted after.
    pub(super) fn close_ep(&mut self) {
        // SAFETY: `raw` is live; the shim closes the endpoint once and forgets it.
        unsafe { madmpi_ofi_close_ep(self.raw) };
    }

    /// The provider's figures.
    pub(super) fn attr(&self) -> &Attr {
        &self.attr
    }

    fn err(&self, call: &str, ret: isize) -> Error {
        fi_error(&self.attr.provider, call, ret)
    }

    /// This endpoint's address.
    pub(super) fn name(&self) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; 256];
        loop {
            let mut len = buf.len();
            // SAFETY: `buf` has room for `len` bytes.
            let ret = unsafe { madmpi_ofi_getname(self.raw, buf.as_mut_ptr().cast(), &mut len) };
            if ret == 0 {
                buf.truncate(len);
                return Ok(buf);
            }
            if len > buf.len() && buf.len() < 1 << 16 {
                buf.resize(len, 0);
                continue;
            }
            return Err(self.err("fi_getname", ret as isize));
        }
    }

    /// Insert a peer's address; its `fi_addr_t`.
    pub(super) fn av_insert(&self, addr: &[u8]) -> Result<u64> {
        let mut fi_addr = u64::MAX;
        // SAFETY: the provider reads one address of its own format from `addr`; a peer's card
        // is checked to be at least as long as ours before (mod.rs), and the provider's
        // addresses have a fixed length per provider.
        let ret = unsafe { madmpi_ofi_av_insert(self.raw, addr.as_ptr().cast(), &mut fi_addr) };
        if ret != 1 {
            return Err(self.err("fi_av_insert", if ret < 0 { ret as isize } else { -22 }));
        }
        Ok(fi_addr)
    }

    /// Register `len` bytes at `ptr` for `access` (see [`Access`]).
    ///
    /// # Safety
    ///
    /// The memory stays allocated until the returned registration is dropped.
    pub(super) unsafe fn register(
        &self,
        ptr: *const u8,
        len: usize,
        access: Access,
        requested_key: u64,
    ) -> Result<MemReg> {
        // SAFETY: pure functions of their argument.
        let k = |i| unsafe { madmpi_ofi_const(i) };
        let bits = match access {
            Access::Local => k(4) | k(5) | k(6),
            Access::RemoteRead => k(7),
            Access::Window => k(7) | k(13),
            Access::WriteSource => k(12),
        };
        let (mut mr, mut desc, mut key) = (std::ptr::null_mut(), std::ptr::null_mut(), 0u64);
        let mut call: *const c_char = std::ptr::null();
        // SAFETY: out-pointers to locals; the memory contract is the caller's.
        let ret = unsafe {
            madmpi_ofi_mr_reg(
                self.raw,
                ptr.cast(),
                len,
                bits,
                requested_key,
                &mut mr,
                &mut desc,
                &mut key,
                &mut call,
            )
        };
        if ret != 0 {
            // SAFETY: `call` points to a string literal of the shim.
            let call = unsafe { CStr::from_ptr(call) }.to_string_lossy();
            return Err(self.err(&call, ret as isize));
        }
        Ok(MemReg { mr, desc, key })
    }

    /// Post a send of `len` bytes at `buf` (registered, `desc`) to `dest`. `Ok(false)`:
    /// `FI_EAGAIN`.
    ///
    /// # Safety
    ///
    /// `buf` and `ctx` stay valid and untouched until the completion of `ctx` is read.
    pub(super) unsafe fn send(
        &self,
        buf: *const u8,
        len: usize,
        desc: *mut c_void,
        dest: u64,
        ctx: *mut Context,
    ) -> Result<bool> {
        // SAFETY: the caller's contract.
        let ret = unsafe { madmpi_ofi_send(self.raw, buf.cast(), len, desc, dest, ctx.cast()) };
        self.posted("fi_send", ret)
    }

    /// Send `buf` (at most the provider's `inject_size` bytes) to `dest` with `fi_inject`: the
    /// provider copies it before returning and writes no completion. `Ok(false)`: `FI_EAGAIN`.
    pub(super) fn inject(&self, buf: &[u8], dest: u64) -> Result<bool> {
        // SAFETY: the provider reads `buf.len()` bytes of `buf` during the call only.
        let ret = unsafe { madmpi_ofi_inject(self.raw, buf.as_ptr().cast(), buf.len(), dest) };
        self.posted("fi_inject", ret)
    }

    /// Post an RDMA read of `len` bytes from `src`'s registered memory (`addr` as the
    /// provider addresses it, key `key`) into `buf` (registered, `desc`). `Ok(false)`:
    /// `FI_EAGAIN`.
    ///
    /// # Safety
    ///
    /// As [`send`](Self::send), for writes into `buf`.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn read(
        &self,
        buf: *mut u8,
        len: usize,
        desc: *mut c_void,
        src: u64,
        addr: u64,
        key: u64,
        ctx: *mut Context,
    ) -> Result<bool> {
        // SAFETY: the caller's contract.
        let ret =
            unsafe { madmpi_ofi_read(self.raw, buf.cast(), len, desc, src, addr, key, ctx.cast()) };
        self.posted("fi_read", ret)
    }

    /// Post an RDMA write of `len` bytes at `buf` (registered, `desc`) into `dest`'s
    /// registered memory (`addr` as the provider addresses it, key `key`), completed once the
    /// data is in the target's memory (`FI_DELIVERY_COMPLETE`). `Ok(false)`: `FI_EAGAIN`.
    ///
    /// # Safety
    ///
    /// As [`send`](Self::send).
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn write(
        &self,
        buf: *const u8,
        len: usize,
        desc: *mut c_void,
        dest: u64,
        addr: u64,
        key: u64,
        ctx: *mut Context,
    ) -> Result<bool> {
        // SAFETY: the caller's contract.
        let ret = unsafe {
            madmpi_ofi_write(
                self.raw,
                buf.cast(),
                len,
                desc,
                dest,
                addr,
                key,
                ctx.cast(),
                1,
            )
        };
        self.posted("fi_write", ret)
    }

    /// Post a receive buffer. `Ok(false)`: `FI_EAGAIN`.
    ///
    /// # Safety
    ///
    /// As [`send`](Self::send), for writes.
    pub(super) unsafe fn recv(
        &self,
        buf: *mut u8,
        len: usize,
        desc: *mut c_void,
        ctx: *mut Context,
    ) -> Result<bool> {
        // SAFETY: the caller's contract.
        let ret = unsafe { madmpi_ofi_recv(self.raw, buf.cast(), len, desc, ctx.cast()) };
        self.posted("fi_recv", ret)
    }

    fn posted(&self, call: &str, ret: isize) -> Result<bool> {
        match ret {
            0 => Ok(true),
            r if r == -eagain() => Ok(false),
            r => Err(self.err(call, r)),
        }
    }

    /// Read completions into `out`: how many, or the error completion at the head of the
    /// queue.
    pub(super) fn cq_read(&self, out: &mut [MaybeUninit<CqEntry>]) -> Result<Completions> {
        // SAFETY: `out` has room for `out.len()` entries of the queue's format (FI_CQ_FORMAT_MSG);
        // the provider writes the ones it returns.
        let ret = unsafe { madmpi_ofi_cq_read(self.raw, out.as_mut_ptr().cast(), out.len()) };
        if ret >= 0 {
            return Ok(Completions::Done(ret as usize));
        }
        if ret == -eagain() {
            return Ok(Completions::Done(0));
        }
        if ret != -eavail() {
            return Err(self.err("fi_cq_read", ret));
        }
        let mut ctx = std::ptr::null_mut();
        let mut err: c_int = 0;
        let mut text = [0 as c_char; 256];
        // SAFETY: out-pointers to locals, `text` with its length.
        let r = unsafe {
            madmpi_ofi_cq_readerr(self.raw, &mut ctx, &mut err, text.as_mut_ptr(), text.len())
        };
        if r < 0 {
            return if r == -eagain() {
                Ok(Completions::Done(0))
            } else {
                Err(self.err("fi_cq_readerr", r))
            };
        }
        Ok(Completions::Failed {
            ctx: ctx.cast(),
            text: format!("{} ({})", c_str(&text), strerror(err as isize)),
        })
    }
}

/// What [`Endpoint::cq_read`] found.
pub(super) enum Completions {
    /// This many entries were written (0: none).
    Done(usize),
    /// The operation of `ctx` failed.
    Failed {
        /// The context given to the operation.
        ctx: *mut Context,
        /// The provider's error text and `fi_strerror`'s.
        text: String,
    },
}

/// How registered memory is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Access {
    /// Sends and receives of this process (bounce buffers).
    Local,
    /// Read by the peers (`fi_read` from the other side).
    #[allow(dead_code)]
    RemoteRead,
    /// Read and written by the peers (a one-sided window: `fi_read`, `fi_write`).
    Window,
    /// The source of this process's `fi_write` (providers with `FI_MR_LOCAL`).
    WriteSource,
}

/// A memory registration, closed on drop.
pub(super) struct MemReg {
    mr: *mut RawMr,
    /// The descriptor local operations pass (`fi_mr_desc`).
    pub desc: *mut c_void,
    /// The key peers use (`fi_mr_key`).
    pub key: u64,
}

// SAFETY: as Endpoint.
unsafe impl Send for MemReg {}

impl Drop for MemReg {
    fn drop(&mut self) {
        // SAFETY: `mr` came from a successful registration and is closed once.
        unsafe { madmpi_ofi_mr_close(self.mr) };
    }
}

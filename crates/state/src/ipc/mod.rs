//! Named pipes on IPC$ and the DCE/RPC services behind them.
//!
//! Clients list a server's shares through the `srvsvc` pipe ([MS-SRVS]
//! NetrShareEnum) and ask who the server is through `srvsvc`
//! (NetrServerGetInfo) and `wkssvc` (NetrWkstaGetInfo). Each call is a
//! connection-oriented DCE/RPC exchange ([C706] chapter 12, [MS-RPCE]): a BIND
//! answered by a BIND_ACK, then REQUEST/RESPONSE pairs, carried by SMB2
//! WRITE/READ or by one FSCTL_PIPE_TRANSCEIVE.
//!
//! ACL editors translate SIDs to names and back through `lsarpc` ([`lsa`]),
//! and Windows' object picker lists the server's accounts through `samr`
//! ([`samr`], read-only): a call that needs NSS parks its request until the
//! driver's lookup threads answer ([`Progress::Needs`]).
//!
//! Only what listing shares and naming SIDs need is served; anything else gets
//! a DCE/RPC fault, never a dropped connection. No RPC authentication is
//! needed on IPC$ (NTLMSSP binds are taken, [`rpcauth`]): the pipes reveal
//! share names and comments, and the names of Unix accounts, which any
//! authenticated (or, if configured, guest) SMB session may see. Witness over
//! TCP needs packet integrity ([`rpcauth`]).

pub mod epm;
mod fuzz;
mod local;
mod lsa;
mod ndr;
pub mod rpcauth;
mod samr;
mod srvsvc;
pub mod witness;

use std::collections::VecDeque;

use ringshare_wire::codec::Reader;
use ringshare_wire::NtStatus;

use crate::lookup::{NameAnswers, NameQuery};
pub use fuzz::FuzzPipe;
pub use srvsvc::{ShareEntry, ShareKind};

/// What the services need to know about the server.
pub struct ServerFacts {
    pub netbios_name: String,
    pub workgroup: String,
    pub comment: String,
    pub shares: Vec<ShareEntry>,
    /// The accounts of the user database (the smbpasswd file), in its order: what `samr`
    /// lists and `lsarpc` names as `SERVER\name`.
    pub users: Vec<UserEntry>,
    /// `guest account` (Samba's default `nobody`): the account samr and lsarpc answer for
    /// RID 501 of the account domain when NSS knows it, as Samba's passdb does.
    pub guest_account: String,
    /// On a domain member with an id source: how it names the domain's accounts, for the
    /// domain SIDs and names lsarpc is asked about.
    pub member: Option<MemberFacts>,
}

/// What lsarpc knows of the domain a member server belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberFacts {
    /// `workgroup`, `winbind separator`, `winbind use default domain`.
    pub naming: crate::domain::DomainMember,
    /// The domains whose SIDs logons stated (NetBIOS name, SID).
    pub domains: Vec<(String, ringshare_wire::security::Sid)>,
}

/// An account of the user database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserEntry {
    pub name: String,
    pub disabled: bool,
}

/// The services we serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Srvsvc,
    Wkssvc,
    Lsarpc,
    /// [MS-SWN] over TCP: its calls are answered by the caller ([`Pipe::take_call`]).
    Witness,
    /// The endpoint mapper ([C706] appendix O, ept_map) on TCP 135, answered by the caller.
    Epmapper,
    Samr,
}

/// A whole request of a service its caller answers ([`Service::Witness`],
/// [`Service::Epmapper`]): answer it with [`Pipe::reply`], now or later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub call_id: u32,
    pub ctx_id: u16,
    pub opnum: u16,
    pub stub: Vec<u8>,
}

/// How a write to a pipe went.
#[derive(Debug, PartialEq, Eq)]
pub enum Progress {
    /// All taken; answers are queued for reading.
    Done,
    /// A call waits for NSS's answers to these ([`Pipe::resume`]).
    Needs(Vec<NameQuery>),
}

impl Service {
    pub fn interface(self) -> ([u8; 16], u16) {
        match self {
            // 4b324fc8-1670-01d3-1278-5a47bf6ee188 v3.0
            Service::Srvsvc => (
                uuid([0x4b32_4fc8, 0x1670_01d3, 0x1278_5a47, 0xbf6e_e188]),
                3,
            ),
            // 6bffd098-a112-3610-9833-46c3f87e345a v1.0
            Service::Wkssvc => (
                uuid([0x6bff_d098, 0xa112_3610, 0x9833_46c3, 0xf87e_345a]),
                1,
            ),
            // 12345778-1234-abcd-ef00-0123456789ab v0.0
            Service::Lsarpc => (
                uuid([0x1234_5778, 0x1234_abcd, 0xef00_0123, 0x4567_89ab]),
                0,
            ),
            // ccd8c074-d0e5-4a40-92b4-d074faa6ba28 v1.1
            Service::Witness => (
                uuid([0xccd8_c074, 0xd0e5_4a40, 0x92b4_d074, 0xfaa6_ba28]),
                1,
            ),
            // e1af8308-5d1f-11c9-91a4-08002b14a0fa v3.0
            Service::Epmapper => (
                uuid([0xe1af_8308, 0x5d1f_11c9, 0x91a4_0800, 0x2b14_a0fa]),
                3,
            ),
            // 12345778-1234-abcd-ef00-0123456789ac v1.0
            Service::Samr => (
                uuid([0x1234_5778, 0x1234_abcd, 0xef00_0123, 0x4567_89ac]),
                1,
            ),
        }
    }

    /// The secondary address of a BIND_ACK on a named pipe.
    fn pipe_name(self) -> &'static str {
        match self {
            Service::Srvsvc => "\\PIPE\\srvsvc",
            Service::Wkssvc => "\\PIPE\\wkssvc",
            Service::Lsarpc | Service::Samr => "\\PIPE\\lsass",
            Service::Witness | Service::Epmapper => "",
        }
    }
}

/// A UUID in its NDR (mixed-endian) byte order from the four 32-bit groups of
/// its text form `aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee`.
pub(crate) const fn uuid(g: [u32; 4]) -> [u8; 16] {
    let a = g[0].to_le_bytes();
    let b = ((g[1] >> 16) as u16).to_le_bytes();
    let c = (g[1] as u16).to_le_bytes();
    let d = g[2].to_be_bytes();
    let e = g[3].to_be_bytes();
    [
        a[0], a[1], a[2], a[3], b[0], b[1], c[0], c[1], d[0], d[1], d[2], d[3], e[0], e[1], e[2],
        e[3],
    ]
}

/// NDR 2.0 transfer syntax: 8a885d04-1ceb-11c9-9fe8-08002b104860 v2.
pub(crate) const NDR20: [u8; 16] = uuid([0x8a88_5d04, 0x1ceb_11c9, 0x9fe8_0800, 0x2b10_4860]);
/// Bind-time feature negotiation syntaxes start with these 8 bytes
/// (6cb71c2c-9812-4540-...), [MS-RPCE] 3.3.1.5.3.
const BIND_TIME_FEATURES: [u8; 8] = [0x2c, 0x1c, 0xb7, 0x6c, 0x12, 0x98, 0x40, 0x45];

const PTYPE_REQUEST: u8 = 0;
const PTYPE_RESPONSE: u8 = 2;
const PTYPE_FAULT: u8 = 3;
const PTYPE_BIND: u8 = 11;
const PTYPE_BIND_ACK: u8 = 12;
const PTYPE_BIND_NAK: u8 = 13;
const PTYPE_ALTER_CONTEXT: u8 = 14;
const PTYPE_ALTER_CONTEXT_RESP: u8 = 15;
const PTYPE_AUTH3: u8 = 16;
const PFC_FIRST_FRAG: u8 = 0x01;
const PFC_LAST_FRAG: u8 = 0x02;
/// nca_s_op_rng_error: the operation number is not served.
pub(crate) const FAULT_OP_RANGE: u32 = 0x1c01_0002;
/// nca_s_fault_context_mismatch ([MS-RPCE] 3.1.1.5.5, RPC_SS_CONTEXT_MISMATCH): a
/// context handle the server does not have.
pub(crate) const FAULT_CONTEXT_MISMATCH: u32 = 0x1c00_001a;
/// nca_s_proto_error.
const FAULT_PROTO: u32 = 0x1c01_000b;
/// nca_s_fault_ndr (RPC_X_BAD_STUB_DATA): a request stub that does not decode.
pub(crate) const FAULT_NDR: u32 = 0x0000_06f7;
/// A request larger than this (reassembled) is refused.
const REQUEST_SIZE_MAX: usize = 64 * 1024;
/// Output waiting to be read is bounded by the responses we build (share lists).
const FRAG_SIZE_DEFAULT: u16 = 4280;

/// One open named pipe.
pub struct Pipe {
    service: Service,
    /// Bytes written by the client, not yet a whole PDU.
    input: Vec<u8>,
    /// Bytes of response PDUs not yet read by the client.
    output: VecDeque<u8>,
    /// Context ids the client bound to our interface.
    contexts: Vec<u16>,
    /// The client's max_recv_frag: our response fragments are at most this.
    frag_max: u16,
    /// Stub bytes of a request being reassembled, with its call id and opnum.
    pending: Option<(u32, u16, Vec<u8>)>,
    /// lsarpc's policy handles.
    lsa: lsa::State,
    /// samr's handles.
    samr: samr::State,
    /// A call waiting for NSS: call id, context id, opnum and stub.
    waiting: Option<(u32, u16, u16, Vec<u8>)>,
    /// What the waiting call needs to know.
    needs: Vec<NameQuery>,
    /// The BIND_ACK's secondary address: the pipe's name, or a TCP port.
    sec_addr: String,
    /// Requests the caller answers ([`Service::Witness`], [`Service::Epmapper`]).
    calls: VecDeque<Call>,
    /// The association's authentication, on pipes that take one ([`Pipe::with_auth`]).
    auth: Option<Box<rpcauth::Auth>>,
    /// Why the association ends, after what is queued is read ([`Pipe::closed`]).
    closed: Option<String>,
}

impl Pipe {
    /// Open a pipe by the name a CREATE on IPC$ gives (`srvsvc`, `\PIPE\srvsvc`).
    pub fn open(name: &str) -> Option<Pipe> {
        let n = name.trim_start_matches('\\');
        let n = n
            .strip_prefix("PIPE\\")
            .or_else(|| n.strip_prefix("pipe\\"))
            .unwrap_or(n);
        let service = if n.eq_ignore_ascii_case("srvsvc") {
            Service::Srvsvc
        } else if n.eq_ignore_ascii_case("wkssvc") {
            Service::Wkssvc
        } else if n.eq_ignore_ascii_case("lsarpc") {
            Service::Lsarpc
        } else if n.eq_ignore_ascii_case("samr") {
            Service::Samr
        } else {
            return None;
        };
        Some(Pipe::new(service, service.pipe_name().to_string()))
    }

    /// A connection-oriented DCE/RPC association over TCP (ncacn_ip_tcp) to
    /// `service` on `port`.
    pub fn tcp(service: Service, port: u16) -> Pipe {
        Pipe::new(service, port.to_string())
    }

    fn new(service: Service, sec_addr: String) -> Pipe {
        Pipe {
            service,
            input: Vec::new(),
            output: VecDeque::new(),
            contexts: Vec::new(),
            frag_max: FRAG_SIZE_DEFAULT,
            pending: None,
            lsa: lsa::State::default(),
            samr: samr::State::default(),
            waiting: None,
            needs: Vec::new(),
            sec_addr,
            calls: VecDeque::new(),
            auth: None,
            closed: None,
        }
    }

    /// The pipe is opened by the user `uid` of an SMB session: samr grants root every right
    /// and lets an account's own object allow it a few more ([`samr::Caller`]).
    pub fn opened_by(mut self, uid: u32) -> Pipe {
        self.samr.caller = samr::Caller {
            root: uid == 0,
            rid: crate::localsam::user_rid(uid),
        };
        self
    }

    /// This pipe takes DCE/RPC authentication (NTLMSSP) as `acceptor` says ([`rpcauth`]).
    pub fn with_auth(mut self, acceptor: rpcauth::Acceptor) -> Pipe {
        self.auth = Some(Box::new(rpcauth::Auth::new(acceptor)));
        self
    }

    /// Why the association must end (a call failed its authentication check and was answered
    /// with a fault): the caller sends what is queued, then closes the connection.
    pub fn closed(&self) -> Option<&str> {
        self.closed.as_deref()
    }

    /// The next whole request of a service its caller answers.
    pub fn take_call(&mut self) -> Option<Call> {
        self.calls.pop_front()
    }

    /// Answers `call`: a RESPONSE with this stub, or a FAULT with this status.
    pub fn reply(&mut self, call: &Call, answer: Result<Vec<u8>, u32>) {
        match answer {
            Ok(out) => self.respond(call.call_id, call.ctx_id, &out),
            Err(code) => self.fault(call.call_id, call.ctx_id, code),
        }
    }

    /// Bytes waiting to be read.
    pub fn available(&self) -> usize {
        self.output.len()
    }

    /// The client writes: whole PDUs are processed and their answers queued,
    /// until a call needs NSS (then the rest waits for [`Pipe::resume`]).
    pub fn write(&mut self, data: &[u8], facts: &ServerFacts) -> Result<Progress, NtStatus> {
        if self.input.len() + data.len() > REQUEST_SIZE_MAX + 64 {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        self.input.extend_from_slice(data);
        if self.waiting.is_some() {
            // Taken; processed when the waiting call has its answers.
            return Ok(Progress::Done);
        }
        self.take_input(facts)
    }

    /// Whether a call waits for NSS's answers.
    pub fn waits(&self) -> bool {
        self.waiting.is_some()
    }

    /// The waiting call goes on with NSS's `answers` (what they lack is not
    /// found), then the PDUs written meanwhile.
    pub fn resume(
        &mut self,
        facts: &ServerFacts,
        answers: &NameAnswers,
    ) -> Result<Progress, NtStatus> {
        if let Some((call_id, ctx_id, opnum, stub)) = self.waiting.take() {
            self.needs.clear();
            self.answer(call_id, ctx_id, opnum, &stub, facts, (answers, true));
        }
        self.take_input(facts)
    }

    fn take_input(&mut self, facts: &ServerFacts) -> Result<Progress, NtStatus> {
        while self.input.len() >= 16 && self.waiting.is_none() && self.closed.is_none() {
            let frag_len = usize::from(u16::from_le_bytes([self.input[8], self.input[9]]));
            if frag_len < 16 {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            if self.input.len() < frag_len {
                break;
            }
            let pdu: Vec<u8> = self.input.drain(..frag_len).collect();
            self.process(&pdu, facts);
        }
        if self.waiting.is_some() {
            return Ok(Progress::Needs(self.needs.clone()));
        }
        Ok(Progress::Done)
    }

    /// The client reads up to `max` bytes; `true` when more remain (the read
    /// answers STATUS_BUFFER_OVERFLOW then, as a message-mode pipe does).
    pub fn read(&mut self, max: usize) -> (Vec<u8>, bool) {
        let n = max.min(self.output.len());
        let out: Vec<u8> = self.output.drain(..n).collect();
        (out, !self.output.is_empty())
    }

    /// FSCTL_PIPE_TRANSCEIVE: write then read in one exchange (calls that need NSS
    /// answer nothing yet).
    #[cfg(test)]
    pub fn transceive(
        &mut self,
        input: &[u8],
        max_out: usize,
        facts: &ServerFacts,
    ) -> Result<(Vec<u8>, bool), NtStatus> {
        self.write(input, facts)?;
        Ok(self.read(max_out))
    }

    /// Answers the stub of a whole request, or makes it wait for NSS.
    fn answer(
        &mut self,
        call_id: u32,
        ctx_id: u16,
        opnum: u16,
        stub: &[u8],
        facts: &ServerFacts,
        answers: (&NameAnswers, bool),
    ) {
        let answer = match self.service {
            Service::Srvsvc => Ok(srvsvc::call(opnum, stub, facts).ok_or(FAULT_OP_RANGE)),
            Service::Wkssvc => Ok(srvsvc::wkssvc_call(opnum, stub, facts).ok_or(FAULT_OP_RANGE)),
            Service::Lsarpc => lsa::call(opnum, stub, facts, &mut self.lsa, answers),
            Service::Samr => samr::call(opnum, stub, facts, &mut self.samr, answers),
            Service::Witness | Service::Epmapper => {
                self.calls.push_back(Call {
                    call_id,
                    ctx_id,
                    opnum,
                    stub: stub.to_vec(),
                });
                return;
            }
        };
        let answer = match answer {
            Ok(a) => a,
            Err(local::Needs(q)) => {
                self.waiting = Some((call_id, ctx_id, opnum, stub.to_vec()));
                self.needs = q;
                return;
            }
        };
        match answer {
            Ok(out) => self.respond(call_id, ctx_id, &out),
            Err(code) => self.fault(call_id, ctx_id, code),
        }
    }

    fn process(&mut self, pdu: &[u8], facts: &ServerFacts) {
        let call_id = u32::from_le_bytes([pdu[12], pdu[13], pdu[14], pdu[15]]);
        // rpc_vers 5.0, little-endian integers; an auth trailer only where authentication is
        // taken.
        let well_formed = pdu[0] == 5 && pdu[1] == 0 && pdu[4] & 0xF0 == 0x10;
        let split = rpcauth::split(pdu)
            .ok()
            .filter(|(_, t)| well_formed && (t.is_none() || self.auth.is_some()));
        let Some((body_end, trailer)) = split else {
            self.fault(call_id, 0, FAULT_PROTO);
            return;
        };
        let body = &pdu[16..body_end];
        match pdu[2] {
            PTYPE_BIND | PTYPE_ALTER_CONTEXT => {
                let is_bind = pdu[2] == PTYPE_BIND;
                let verifier = match (&trailer, self.auth.as_mut()) {
                    (Some(t), Some(a)) => match a.bind(t, is_bind, pdu[3]) {
                        rpcauth::Leg::Answer(v) => v,
                        rpcauth::Leg::Refuse(why) => {
                            tracing::info!("rpc: a bind refused: {why}");
                            self.nak_or_fault(is_bind, call_id);
                            return;
                        }
                    },
                    _ => Vec::new(),
                };
                let ack = if is_bind {
                    PTYPE_BIND_ACK
                } else {
                    PTYPE_ALTER_CONTEXT_RESP
                };
                match self.bind(body, is_bind) {
                    Some(mut ack_body) => {
                        let auth_len = verifier.len().saturating_sub(8) as u16;
                        ack_body.extend_from_slice(&verifier);
                        let len = (16 + ack_body.len()) as u16;
                        let signing = self.auth.as_ref().is_some_and(|a| a.header_signing());
                        let flags = PFC_FIRST_FRAG
                            | PFC_LAST_FRAG
                            | if signing {
                                rpcauth::PFC_SUPPORT_HEADER_SIGN
                            } else {
                                0
                            };
                        let mut h = header(ack, flags, len, call_id);
                        h[10..12].copy_from_slice(&auth_len.to_le_bytes());
                        self.output.extend(h);
                        self.output.extend(ack_body);
                    }
                    None => self.nak_or_fault(true, call_id),
                }
            }
            PTYPE_AUTH3 => match (&trailer, self.auth.as_mut()) {
                (Some(t), Some(a)) => {
                    if let Err(why) = a.auth3(t) {
                        tracing::info!("rpc: an AUTH3 refused: {why}");
                    }
                }
                _ => self.fault(call_id, 0, FAULT_PROTO),
            },
            PTYPE_REQUEST => {
                let checked = match self.auth.as_mut() {
                    None => Ok(body.to_vec()),
                    Some(a) => a.request(pdu, body_end, trailer.as_ref()),
                };
                match checked {
                    Ok(body) => self.request(pdu[3], call_id, &body, facts),
                    Err(why) => {
                        tracing::warn!("rpc: a call refused: {why}");
                        self.fault(call_id, 0, rpcauth::FAULT_ACCESS_DENIED);
                        self.closed = Some(format!("access denied: {why}"));
                    }
                }
            }
            _ => self.fault(call_id, 0, FAULT_PROTO),
        }
    }

    /// A refused BIND gets a bind_nak (reason 0, not specified; no protocol versions), a
    /// refused ALTER_CONTEXT a fault.
    fn nak_or_fault(&mut self, is_bind: bool, call_id: u32) {
        if is_bind {
            self.queue(
                PTYPE_BIND_NAK,
                PFC_FIRST_FRAG | PFC_LAST_FRAG,
                call_id,
                &[0, 0, 0],
            );
        } else {
            self.fault(call_id, 0, rpcauth::FAULT_ACCESS_DENIED);
        }
    }

    /// BIND / ALTER_CONTEXT: accept the contexts that name our interface with
    /// NDR 2.0; answer the others as [C706] 12.6.3.4 and [MS-RPCE] 3.3.1.5.3 say.
    fn bind(&mut self, body: &[u8], is_bind: bool) -> Option<Vec<u8>> {
        let mut r = Reader::new(body);
        let max_xmit = r.u16().ok()?;
        let max_recv = r.u16().ok()?;
        let assoc = r.u32().ok()?;
        let n = r.u8().ok()?;
        r.skip(3).ok()?;
        let (ours, our_major) = self.service.interface();
        let mut results: Vec<(u16, u16, [u8; 16], u32)> = Vec::new();
        for _ in 0..n {
            let ctx_id = r.u16().ok()?;
            let n_syntax = r.u8().ok()?;
            r.skip(1).ok()?;
            let abstract_uuid: [u8; 16] = r.array().ok()?;
            let abstract_ver = r.u32().ok()?;
            let mut syntaxes = Vec::new();
            for _ in 0..n_syntax {
                let u: [u8; 16] = r.array().ok()?;
                let v = r.u32().ok()?;
                syntaxes.push((u, v));
            }
            if let Some((u, _)) = syntaxes.iter().find(|(u, _)| u[..8] == BIND_TIME_FEATURES) {
                // negotiate_ack with no features supported.
                let _ = u;
                results.push((3, 0, [0; 16], 0));
            } else if abstract_uuid != ours || (abstract_ver & 0xFFFF) as u16 != our_major {
                // provider rejection: abstract syntax not supported.
                results.push((2, 1, [0; 16], 0));
            } else if syntaxes.iter().any(|(u, v)| *u == NDR20 && *v == 2) {
                if !self.contexts.contains(&ctx_id) {
                    self.contexts.push(ctx_id);
                }
                results.push((0, 0, NDR20, 2));
            } else {
                // provider rejection: proposed transfer syntaxes not supported.
                results.push((2, 2, [0; 16], 0));
            }
        }
        self.frag_max = max_recv.clamp(1024, 16384);
        let _ = max_xmit;
        let mut out = Vec::new();
        out.extend_from_slice(&FRAG_SIZE_DEFAULT.to_le_bytes());
        out.extend_from_slice(&FRAG_SIZE_DEFAULT.to_le_bytes());
        let assoc_group = if assoc == 0 { 0x0001_2345 } else { assoc };
        out.extend_from_slice(&assoc_group.to_le_bytes());
        if is_bind {
            let name = self.sec_addr.as_str();
            out.extend_from_slice(&((name.len() + 1) as u16).to_le_bytes());
            out.extend_from_slice(name.as_bytes());
            out.push(0);
        } else {
            out.extend_from_slice(&0u16.to_le_bytes());
        }
        // Pad to 4 bytes, counted from the PDU start (16-byte header).
        while !(16 + out.len()).is_multiple_of(4) {
            out.push(0);
        }
        out.push(results.len() as u8);
        out.extend_from_slice(&[0, 0, 0]);
        for (result, reason, syntax, ver) in results {
            out.extend_from_slice(&result.to_le_bytes());
            out.extend_from_slice(&reason.to_le_bytes());
            out.extend_from_slice(&syntax);
            out.extend_from_slice(&ver.to_le_bytes());
        }
        Some(out)
    }

    fn request(&mut self, flags: u8, call_id: u32, body: &[u8], facts: &ServerFacts) {
        let mut r = Reader::new(body);
        let (Ok(_alloc_hint), Ok(ctx_id), Ok(opnum)) = (r.u32(), r.u16(), r.u16()) else {
            self.fault(call_id, 0, FAULT_PROTO);
            return;
        };
        let stub = r.rest();
        if flags & PFC_FIRST_FRAG != 0 {
            self.pending = Some((call_id, opnum, Vec::new()));
        }
        let Some((pending_call, pending_op, buf)) = self.pending.as_mut() else {
            self.fault(call_id, ctx_id, FAULT_PROTO);
            return;
        };
        if *pending_call != call_id || buf.len() + stub.len() > REQUEST_SIZE_MAX {
            self.pending = None;
            self.fault(call_id, ctx_id, FAULT_PROTO);
            return;
        }
        let opnum = *pending_op;
        buf.extend_from_slice(stub);
        if flags & PFC_LAST_FRAG == 0 {
            return;
        }
        let Some((_, _, stub)) = self.pending.take() else {
            return;
        };
        if !self.contexts.contains(&ctx_id) {
            self.fault(call_id, ctx_id, FAULT_PROTO);
            return;
        }
        let none = NameAnswers::default();
        self.answer(call_id, ctx_id, opnum, &stub, facts, (&none, false));
    }

    /// Queue a RESPONSE, cut into fragments the client can take.
    fn respond(&mut self, call_id: u32, ctx_id: u16, stub: &[u8]) {
        let overhead = self.auth.as_ref().map_or(0, |a| a.overhead());
        let room = usize::from(self.frag_max) - 24 - overhead;
        let chunks: Vec<&[u8]> = if stub.is_empty() {
            vec![&[][..]]
        } else {
            stub.chunks(room).collect()
        };
        let n = chunks.len();
        for (i, chunk) in chunks.into_iter().enumerate() {
            let mut flags = 0;
            if i == 0 {
                flags |= PFC_FIRST_FRAG;
            }
            if i + 1 == n {
                flags |= PFC_LAST_FRAG;
            }
            let mut body = Vec::with_capacity(8 + chunk.len());
            body.extend_from_slice(&(stub.len() as u32).to_le_bytes());
            body.extend_from_slice(&ctx_id.to_le_bytes());
            body.extend_from_slice(&[0, 0]);
            body.extend_from_slice(chunk);
            match self
                .auth
                .as_mut()
                .filter(|a| a.level() >= rpcauth::LEVEL_PKT)
            {
                Some(a) => match a.response(flags, call_id, &body) {
                    Some(pdu) => self.output.extend(pdu),
                    None => {
                        self.closed = Some("a response could not be protected".into());
                        return;
                    }
                },
                None => self.queue(PTYPE_RESPONSE, flags, call_id, &body),
            }
        }
    }

    fn fault(&mut self, call_id: u32, ctx_id: u16, status: u32) {
        let mut body = Vec::with_capacity(16);
        body.extend_from_slice(&0u32.to_le_bytes());
        body.extend_from_slice(&ctx_id.to_le_bytes());
        body.extend_from_slice(&[0, 0]);
        body.extend_from_slice(&status.to_le_bytes());
        body.extend_from_slice(&0u32.to_le_bytes());
        self.queue(PTYPE_FAULT, PFC_FIRST_FRAG | PFC_LAST_FRAG, call_id, &body);
    }

    fn queue(&mut self, ptype: u8, flags: u8, call_id: u32, body: &[u8]) {
        let len = (16 + body.len()) as u16;
        self.output.extend(header(ptype, flags, len, call_id));
        self.output.extend(body);
    }
}

/// A PDU's 16-byte header: version 5.0, little-endian, no auth_length.
fn header(ptype: u8, flags: u8, frag_len: u16, call_id: u32) -> Vec<u8> {
    let mut h = vec![5, 0, ptype, flags, 0x10, 0, 0, 0];
    h.extend_from_slice(&frag_len.to_le_bytes());
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(&call_id.to_le_bytes());
    h
}

#[cfg(test)]
mod tests;

//! How a client connection connects ([`ClientOptions`]).

use ringshare_wire::consts::Dialect;

/// How to connect.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    pub user: String,
    pub domain: String,
    pub password: String,
    /// The share as `\\server\share`.
    pub share_unc: String,
    /// Dialects offered (the server picks one).
    pub dialects: Vec<Dialect>,
    /// Require signing (SecurityMode SIGNING_REQUIRED; every request signed).
    pub sign: bool,
    /// Encrypt every request after the session is set up (SMB 3.x).
    pub encrypt: bool,
    /// Credits to hold (available + in flight); the server may grant fewer.
    pub credits_target: u16,
    /// Seed for the client GUID, preauth salt, NTLM client challenge and
    /// random session key.
    pub seed: u64,
    /// The wall clock as a FILETIME (NTLMv2 timestamps, the Kerberos authenticator's time).
    pub now_filetime: u64,
    /// Log on with this Kerberos service ticket (from a credential cache) instead of NTLM.
    pub kerberos: Option<ringshare_auth::krb5::ccache::Credential>,
    /// Log on with tokens made elsewhere (another GSS implementation), relayed as they are.
    pub relay: Option<ringshare_auth::gss::Relay>,
    /// 3.1.1: offer these compression algorithms (chained); when the server
    /// agrees, WRITEs go compressed when it pays and READs ask for compressed
    /// responses. Empty (the default): no compression.
    pub compression: Vec<ringshare_wire::consts::CompressionAlgorithm>,
    /// 3.1.1 over a transport that is itself secure (SMB over QUIC): offer
    /// SMB2_TRANSPORT_CAPABILITIES with ACCEPT_TRANSPORT_LEVEL_SECURITY
    /// ([MS-SMB2] 2.2.3.1.5), as Windows does over QUIC; a server that
    /// accepts asks for no SMB encryption on the connection.
    pub transport_security: bool,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            user: String::new(),
            domain: String::new(),
            password: String::new(),
            share_unc: String::new(),
            dialects: Dialect::ALL.to_vec(),
            sign: false,
            encrypt: false,
            credits_target: 512,
            seed: 0x5EED,
            now_filetime: 133_500_000_000_000_000,
            kerberos: None,
            relay: None,
            compression: Vec::new(),
            transport_security: false,
        }
    }
}

//! The IAKerb legs of a server exchange ([`crate::krb5::iakerb`]): bare, or inside SPNEGO when
//! the client lists IAKerb first. Each proxy token is answered with the KDC's reply the caller
//! obtained ([`ServerAuth::kdc_request`], [`ServerAuth::kdc_answered`]); the final AP-REQ goes
//! through the Kerberos acceptor, and its finished checksum must cover the legs.

use super::{ServerAuth, ServerState, ServerStep};
use crate::krb5::acceptor::AcceptorConfig;
use crate::krb5::iakerb::{self, Iakerb, KdcRequest, OID_IAKERB};
use crate::spnego::{self, neg_state, NegToken, NegTokenResp};
use crate::AuthError;

impl ServerAuth {
    /// The KDC exchange the client's `token` asks this server to relay before it can be stepped:
    /// Some when the exchange is at (or starts) an IAKerb leg and `token` carries a KDC request
    /// for the server's own realm. Nothing changes; the caller asks a KDC of that realm apart
    /// from the exchange, then hands the reply over with [`ServerAuth::kdc_answered`] and steps.
    pub fn kdc_request(&self, token: &[u8]) -> Option<KdcRequest> {
        match (&self.iakerb, self.state) {
            (Some(iak), ServerState::Iakerb(_)) => iak.request(&self.iakerb_token(token)?),
            (None, ServerState::Start) => {
                Self::first_kdc_request(&self.kerberos.as_ref()?.config, token)
            }
            _ => None,
        }
    }

    /// [`ServerAuth::kdc_request`] for the first token of an exchange that has not started,
    /// on a server accepting Kerberos with `config`.
    pub fn first_kdc_request(config: &AcceptorConfig, token: &[u8]) -> Option<KdcRequest> {
        let inner = if iakerb::is_iakerb(token) {
            token.to_vec()
        } else {
            match spnego::decode(token).ok()? {
                NegToken::Init(init)
                    if init.mech_types.first().is_some_and(|m| m == OID_IAKERB) =>
                {
                    init.mech_token?
                }
                _ => return None,
            }
        };
        Iakerb::new(&config.realm).request(&inner)
    }

    /// The KDC's reply to `request` (or why there is none), for the next step.
    pub fn kdc_answered(&mut self, request: KdcRequest, reply: Result<Vec<u8>, String>) {
        self.kdc_answer = Some((request, reply));
    }

    /// The IAKerb token `token` carries in this exchange's state: itself when bare, the
    /// mechanism token of SPNEGO otherwise.
    fn iakerb_token(&self, token: &[u8]) -> Option<Vec<u8>> {
        match self.state {
            ServerState::Iakerb(false) => Some(token.to_vec()),
            ServerState::Iakerb(true) => match spnego::decode(token).ok()? {
                NegToken::Resp(resp) => resp.response_token,
                NegToken::Init(_) => None,
            },
            _ => None,
        }
    }

    /// Whether the client chose IAKerb: its first mechanism (IAKerb listed after another
    /// mechanism is left to the others: no mechListMIC exchange is built for it).
    pub(super) fn picks_iakerb(&self, mech_types: &[Vec<u8>]) -> bool {
        self.kerberos.is_some() && mech_types.first().is_some_and(|m| m == OID_IAKERB)
    }

    /// One IAKerb leg: `token` is the client's IAKerb token, `spnego` whether it came in
    /// SPNEGO, `first` whether this is the exchange's first answer (it names the mechanism).
    pub(super) fn iakerb_leg(
        &mut self,
        token: Option<&[u8]>,
        spnego: bool,
        first: bool,
    ) -> Result<ServerStep, AuthError> {
        let realm = self
            .kerberos
            .as_ref()
            .ok_or(AuthError::Unsupported("Kerberos is not configured"))?
            .config
            .realm
            .clone();
        let iak = self
            .iakerb
            .get_or_insert_with(|| Box::new(Iakerb::new(&realm)));
        let mech = first.then(|| OID_IAKERB.to_vec());
        let Some(token) = token else {
            // SPNEGO chose IAKerb without an optimistic token: ask for it.
            self.state = ServerState::Iakerb(spnego);
            return Ok(ServerStep::Continue(spnego::encode_resp(&NegTokenResp {
                neg_state: Some(neg_state::ACCEPT_INCOMPLETE),
                supported_mech: mech,
                response_token: None,
                mech_list_mic: None,
            })));
        };
        if iakerb::is_proxy(token) {
            if let Some(answer) = self.kdc_answer.take() {
                iak.answered(answer.0, answer.1);
            }
            let out = iak.proxy(token)?;
            self.state = ServerState::Iakerb(spnego);
            return Ok(ServerStep::Continue(if spnego {
                spnego::encode_resp(&NegTokenResp {
                    neg_state: Some(neg_state::ACCEPT_INCOMPLETE),
                    supported_mech: mech,
                    response_token: Some(out),
                    mech_list_mic: None,
                })
            } else {
                out
            }));
        }
        // The AP-REQ, framed with the IAKerb OID (or Kerberos 5's).
        let ap_req = match iakerb::ap_req_as_krb5(token) {
            Ok(t) => t,
            Err(_) if crate::krb5::gss_unwrap(token).is_ok() => token.to_vec(),
            Err(e) => return Err(e),
        };
        let acc = self.accept_ticket(&ap_req)?;
        if let Some(iak) = &self.iakerb {
            iak.check_finished(&acc)?;
        }
        let rep = if acc.token.is_empty() {
            Vec::new()
        } else {
            iakerb::ap_rep_as_iakerb(&acc.token)?
        };
        self.state = ServerState::Done;
        let token = if spnego {
            spnego::encode_resp(&NegTokenResp {
                neg_state: Some(neg_state::ACCEPT_COMPLETED),
                supported_mech: mech,
                response_token: (!rep.is_empty()).then_some(rep),
                mech_list_mic: None,
            })
        } else {
            rep
        };
        Ok(Self::kerberos_done(acc, token))
    }
}

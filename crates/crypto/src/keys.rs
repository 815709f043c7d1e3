//! Session key derivation ([MS-SMB2] 3.3.5.5.3, 3.1.4.2).

use crate::kdf::smb3_kdf;

/// The keys of one SMB session, from the server's point of view.
#[derive(Clone)]
pub struct SessionKeys {
    /// Session.SigningKey.
    pub signing: [u8; 16],
    /// Session.EncryptionKey: encrypts server-to-client messages (16 or 32 bytes; empty before 3.0).
    pub encrypt_server_to_client: Vec<u8>,
    /// Session.DecryptionKey: decrypts client-to-server messages (16 or 32 bytes; empty before 3.0).
    pub decrypt_client_to_server: Vec<u8>,
    /// Session.ApplicationKey.
    pub application: [u8; 16],
}

impl std::fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKeys { .. }")
    }
}

/// Derive the session's keys.
///
/// * `dialect` 0x0202 / 0x0210: the signing key is the session key; the others are zero/empty.
/// * 0x0300 / 0x0302: labels "SMB2AESCMAC"/"SmbSign", "SMB2AESCCM"/"ServerOut" (server
///   encrypts), "SMB2AESCCM"/"ServerIn " (server decrypts), "SMB2APP"/"SmbRpc".
/// * 0x0311: labels "SMBSigningKey", "SMBS2CCipherKey", "SMBC2SCipherKey", "SMBAppKey" with the
///   preauthentication hash as context (64 zero bytes if `preauth` is `None`).
///
/// `session_key` is the full GSS key. Session.SessionKey is its first 16 bytes, right-padded with
/// zeros; it derives the signing and application keys and the 128-bit cipher keys. With
/// `cipher_key_len == 32` (AES-256-CCM/GCM) the cipher keys are derived from the full key
/// (Session.FullSessionKey, [MS-SMB2] 3.3.5.5.3) with L = 256. For NTLM the two are the same
/// 16 bytes. Any other `cipher_key_len` is treated as 16.
pub fn derive(
    dialect: u16,
    session_key: &[u8],
    preauth: Option<&[u8; 64]>,
    cipher_key_len: usize,
) -> SessionKeys {
    let mut sk = [0u8; 16];
    let n = session_key.len().min(16);
    sk[..n].copy_from_slice(&session_key[..n]);

    if dialect < 0x0300 {
        return SessionKeys {
            signing: sk,
            encrypt_server_to_client: Vec::new(),
            decrypt_client_to_server: Vec::new(),
            application: [0; 16],
        };
    }

    let zero_hash = [0u8; 64];
    // (label, context) for signing, server-to-client cipher, client-to-server cipher, application.
    let ctx: &[u8] = preauth.unwrap_or(&zero_hash);
    let [(sign_l, sign_c), (enc_l, enc_c), (dec_l, dec_c), (app_l, app_c)]: [(&[u8], &[u8]); 4] =
        if dialect >= 0x0311 {
            [
                (b"SMBSigningKey\0", ctx),
                (b"SMBS2CCipherKey\0", ctx),
                (b"SMBC2SCipherKey\0", ctx),
                (b"SMBAppKey\0", ctx),
            ]
        } else {
            [
                (b"SMB2AESCMAC\0", b"SmbSign\0"),
                (b"SMB2AESCCM\0", b"ServerOut\0"),
                (b"SMB2AESCCM\0", b"ServerIn \0"),
                (b"SMB2APP\0", b"SmbRpc\0"),
            ]
        };

    let mut signing = [0u8; 16];
    smb3_kdf(&sk, sign_l, sign_c, &mut signing);
    let mut application = [0u8; 16];
    smb3_kdf(&sk, app_l, app_c, &mut application);

    let (cipher_input, len): (&[u8], usize) = if cipher_key_len == 32 && dialect >= 0x0311 {
        (
            if session_key.len() > 16 {
                session_key
            } else {
                &sk
            },
            32,
        )
    } else {
        (&sk, 16)
    };
    let mut enc = vec![0u8; len];
    smb3_kdf(cipher_input, enc_l, enc_c, &mut enc);
    let mut dec = vec![0u8; len];
    smb3_kdf(cipher_input, dec_l, dec_c, &mut dec);

    SessionKeys {
        signing,
        encrypt_server_to_client: enc,
        decrypt_client_to_server: dec,
        application,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unhex;

    // Microsoft Open Specifications blog, "SMB 2 and SMB 3 security in Windows 10: the anatomy of
    // signing and cryptographic keys" (2017), appendix "Key derivation examples". The blog lists
    // keys from the client's side: its EncryptionKey is the server's decryption key.

    #[test]
    fn derives_the_published_smb30_keys() {
        let k = derive(0x0300, &unhex("7CD451825D0450D235424E44BA6E78CC"), None, 16);
        assert_eq!(
            k.signing.to_vec(),
            unhex("0B7E9C5CAC36C0F6EA9AB275298CEDCE")
        );
        assert_eq!(
            k.decrypt_client_to_server,
            unhex("FAD27796665B313EBB578F388632B4F7")
        );
        assert_eq!(
            k.encrypt_server_to_client,
            unhex("B0F0427F7CEB416D1D9DCC0CD4F99447")
        );
        assert_eq!(
            k.application.to_vec(),
            unhex("BB23A4575AA26C721AF525AF15A87B4F")
        );
    }

    #[test]
    fn derives_the_published_smb30_second_channel_signing_key() {
        let k = derive(0x0300, &unhex("4E01A2B313BCF660CC250BEF021AEDE6"), None, 16);
        assert_eq!(
            k.signing.to_vec(),
            unhex("BA1A17DBBFEC349BCA105563D598952F")
        );
    }

    #[test]
    fn derives_the_published_smb311_keys_from_the_preauth_hash() {
        let preauth: [u8; 64] = unhex(
            "0DD13628CC3ED218EF9DF9772D436D0887AB9814BFAE63A80AA845F36909DB79\
             28622DDDAD522D9751640A459762C5A9D6BB084CBB3CE6BDADEF5D5BCE3C6C01",
        )
        .try_into()
        .unwrap();
        let k = derive(
            0x0311,
            &unhex("270E1BA896585EEB7AF3472D3B4C75A7"),
            Some(&preauth),
            16,
        );
        assert_eq!(
            k.signing.to_vec(),
            unhex("73FE7A9A77BEF0BDE49C650D8CCB5F76")
        );
        assert_eq!(
            k.decrypt_client_to_server,
            unhex("629BCBC54422A0F572B97F45989B6073")
        );
        assert_eq!(
            k.encrypt_server_to_client,
            unhex("E2AF0DCEFAC68DA71A0DFBD0D1350D74")
        );
        assert_eq!(
            k.application.to_vec(),
            unhex("6D7AD7954E9EC61E907B4D473DC178FF")
        );
    }

    #[test]
    fn smb2_dialects_sign_with_the_session_key_itself() {
        let sk = unhex("00112233445566778899aabbccddeeff");
        for d in [0x0202, 0x0210] {
            let k = derive(d, &sk, None, 16);
            assert_eq!(k.signing.to_vec(), sk);
            assert!(k.encrypt_server_to_client.is_empty());
            assert_eq!(k.application, [0; 16]);
        }
    }

    #[test]
    fn short_session_keys_are_right_padded_with_zeros() {
        let a = derive(0x0300, &[1, 2, 3], None, 16);
        let b = derive(
            0x0300,
            &[1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            None,
            16,
        );
        assert_eq!(a.signing, b.signing);
    }

    #[test]
    fn aes256_gives_32_byte_cipher_keys_and_16_byte_signing_key() {
        let preauth = [3u8; 64];
        let k128 = derive(0x0311, &[9; 16], Some(&preauth), 16);
        let k256 = derive(0x0311, &[9; 16], Some(&preauth), 32);
        assert_eq!(k256.encrypt_server_to_client.len(), 32);
        assert_eq!(k256.decrypt_client_to_server.len(), 32);
        assert_eq!(k128.signing, k256.signing);
        assert_ne!(
            k128.encrypt_server_to_client[..],
            k256.encrypt_server_to_client[..16]
        );
        // A longer GSS key feeds the AES-256 cipher keys but not the signing key.
        let long = derive(0x0311, &[9; 32], Some(&preauth), 32);
        assert_eq!(long.signing, k256.signing);
        assert_ne!(long.encrypt_server_to_client, k256.encrypt_server_to_client);
    }
}

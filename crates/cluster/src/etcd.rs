//! etcd v3 through its JSON gateway (`/v3/...`, served by etcd 3.4 on the client URL): the
//! handful of calls the coordinator needs. Keys and values travel base64-encoded, 64-bit
//! numbers as JSON strings. Every call has a deadline; on a connection failure, a timeout or
//! an etcd "unavailable" answer it moves on to the next endpoint until the deadline.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::http::{post, Endpoint};
use crate::Error;

/// Largest answer accepted from etcd (a range over all nodes and partitions is far smaller).
pub const MAX_RESPONSE: usize = 4 << 20;

/// A stored key: what `range` and txn range answers carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub create_revision: i64,
    pub mod_revision: i64,
    pub version: i64,
    pub lease: i64,
}

/// A txn compare. `CreateRevision(key, 0)` holds when the key does not exist.
#[derive(Debug, Clone)]
pub enum Compare {
    CreateRevisionEq(Vec<u8>, i64),
    CreateRevisionNe(Vec<u8>, i64),
    ModRevisionEq(Vec<u8>, i64),
}

/// A txn operation.
#[derive(Debug, Clone)]
pub enum Op {
    Put {
        key: Vec<u8>,
        value: Vec<u8>,
        lease: i64,
    },
    Delete {
        key: Vec<u8>,
    },
}

/// What a txn answered.
#[derive(Debug, Clone)]
pub struct TxnResult {
    pub succeeded: bool,
    /// The store's revision after the txn; when it succeeded with a write, the write's revision.
    pub revision: i64,
}

/// A blocking etcd client over several endpoints (not shared between threads: each thread
/// makes its own; a call opens one short TCP connection).
#[derive(Debug)]
pub struct Etcd {
    endpoints: Vec<Endpoint>,
    cur: usize,
    /// Budget of one attempt on one endpoint.
    attempt: Duration,
}

impl Etcd {
    /// `endpoints` are client URLs (`http://127.0.0.1:2379`); `attempt` bounds one attempt on
    /// one endpoint.
    pub fn new(endpoints: &[String], attempt: Duration) -> Result<Self, Error> {
        if endpoints.is_empty() {
            return Err(Error::Config("no etcd endpoints".into()));
        }
        let endpoints = endpoints
            .iter()
            .map(|e| Endpoint::parse(e))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Etcd {
            endpoints,
            cur: 0,
            attempt,
        })
    }

    /// POSTs `body` to `path`, trying endpoints in turn until one answers or `deadline` passes.
    fn call(&mut self, path: &str, body: &Value, deadline: Instant) -> Result<Value, Error> {
        let body = serde_json::to_vec(body).map_err(|e| Error::BadResponse(e.to_string()))?;
        let mut last = Error::Unavailable("deadline passed before the first attempt".into());
        let mut tried = 0usize;
        while Instant::now() < deadline {
            let ep = &self.endpoints[self.cur % self.endpoints.len()];
            let attempt_deadline = deadline.min(Instant::now() + self.attempt);
            match post(ep, path, &body, attempt_deadline, MAX_RESPONSE) {
                Ok((200, b)) => {
                    return serde_json::from_slice(&b).map_err(|e| {
                        Error::BadResponse(format!("{}{path}: not JSON: {e}", ep.host))
                    })
                }
                Ok((status, b)) => {
                    let msg = String::from_utf8_lossy(&b[..b.len().min(300)]).into_owned();
                    // 4xx other than timeouts are the request's fault: do not retry.
                    if (400..500).contains(&status) && status != 408 && status != 429 {
                        return Err(Error::Etcd(format!(
                            "{}{path}: HTTP {status}: {msg}",
                            ep.host
                        )));
                    }
                    last = Error::Unavailable(format!("{}{path}: HTTP {status}: {msg}", ep.host));
                }
                Err(e @ Error::BadResponse(_)) => return Err(e),
                Err(e) => last = e,
            }
            self.cur = (self.cur + 1) % self.endpoints.len();
            tried += 1;
            if tried.is_multiple_of(self.endpoints.len()) {
                // Every endpoint failed once: do not spin while an election runs.
                std::thread::sleep(
                    Duration::from_millis(100)
                        .min(deadline.saturating_duration_since(Instant::now())),
                );
            }
        }
        Err(last)
    }

    /// Every key starting with `prefix`, and the store revision they were read at.
    pub fn range_prefix(
        &mut self,
        prefix: &[u8],
        deadline: Instant,
    ) -> Result<(i64, Vec<KeyValue>), Error> {
        let body = json!({"key": b64(prefix), "range_end": b64(&prefix_end(prefix))});
        let v = self.call("/v3/kv/range", &body, deadline)?;
        Ok((header_revision(&v)?, kvs(&v)?))
    }

    /// One key.
    pub fn get(&mut self, key: &[u8], deadline: Instant) -> Result<Option<KeyValue>, Error> {
        let v = self.call("/v3/kv/range", &json!({"key": b64(key)}), deadline)?;
        Ok(kvs(&v)?.into_iter().next())
    }

    /// A transaction: if every compare holds, `success` runs, else `failure`.
    pub fn txn(
        &mut self,
        cmp: &[Compare],
        success: &[Op],
        failure: &[Op],
        deadline: Instant,
    ) -> Result<TxnResult, Error> {
        let cmp: Vec<Value> = cmp
            .iter()
            .map(|c| match c {
                Compare::CreateRevisionEq(k, r) => json!({"key": b64(k), "target": "CREATE", "result": "EQUAL", "create_revision": r.to_string()}),
                Compare::CreateRevisionNe(k, r) => json!({"key": b64(k), "target": "CREATE", "result": "NOT_EQUAL", "create_revision": r.to_string()}),
                Compare::ModRevisionEq(k, r) => json!({"key": b64(k), "target": "MOD", "result": "EQUAL", "mod_revision": r.to_string()}),
            })
            .collect();
        let ops = |ops: &[Op]| -> Vec<Value> {
            ops.iter()
                .map(|o| match o {
                    Op::Put { key, value, lease } => json!({"request_put": {"key": b64(key), "value": b64(value), "lease": lease.to_string()}}),
                    Op::Delete { key } => json!({"request_delete_range": {"key": b64(key)}}),
                })
                .collect()
        };
        let body = json!({"compare": cmp, "success": ops(success), "failure": ops(failure)});
        let v = self.call("/v3/kv/txn", &body, deadline)?;
        let succeeded = match v.get("succeeded") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(o) => return Err(Error::BadResponse(format!("txn: succeeded = {o}"))),
        };
        Ok(TxnResult {
            succeeded,
            revision: header_revision(&v)?,
        })
    }

    /// Grants a lease; returns (id, granted TTL in seconds).
    pub fn lease_grant(&mut self, ttl_secs: i64, deadline: Instant) -> Result<(i64, i64), Error> {
        let v = self.call(
            "/v3/lease/grant",
            &json!({"TTL": ttl_secs.to_string()}),
            deadline,
        )?;
        if let Some(e) = v
            .get("error")
            .and_then(Value::as_str)
            .filter(|e| !e.is_empty())
        {
            return Err(Error::Etcd(format!("lease grant: {e}")));
        }
        let id = int(v.get("ID"))
            .ok_or_else(|| Error::BadResponse(format!("lease grant: no ID in {v}")))?;
        let ttl = int(v.get("TTL")).unwrap_or(0);
        if id == 0 || ttl <= 0 {
            return Err(Error::BadResponse(format!("lease grant: {v}")));
        }
        Ok((id, ttl))
    }

    /// Renews a lease once; returns the TTL it now has, 0 when the lease no longer exists.
    pub fn lease_keepalive(&mut self, id: i64, deadline: Instant) -> Result<i64, Error> {
        let v = self.call(
            "/v3/lease/keepalive",
            &json!({"ID": id.to_string()}),
            deadline,
        )?;
        // The gateway wraps stream messages: {"result": {...}} or {"error": {...}}.
        if let Some(e) = v.get("error") {
            return Err(Error::Unavailable(format!("lease keepalive: {e}")));
        }
        let r = v
            .get("result")
            .ok_or_else(|| Error::BadResponse(format!("lease keepalive: {v}")))?;
        Ok(int(r.get("TTL")).unwrap_or(0).max(0))
    }

    /// Revokes a lease (its keys go at once).
    pub fn lease_revoke(&mut self, id: i64, deadline: Instant) -> Result<(), Error> {
        self.call("/v3/lease/revoke", &json!({"ID": id.to_string()}), deadline)
            .map(|_| ())
    }

    /// (the answering member's id, its leader's id), from `/v3/maintenance/status`.
    pub fn status(&mut self, deadline: Instant) -> Result<(u64, u64), Error> {
        let v = self.call("/v3/maintenance/status", &json!({}), deadline)?;
        let uint = |x: Option<&Value>| match x {
            Some(Value::String(s)) => s.parse::<u64>().ok(),
            Some(Value::Number(n)) => n.as_u64(),
            _ => None,
        };
        let me = uint(v.get("header").and_then(|h| h.get("member_id")));
        match (me, uint(v.get("leader"))) {
            (Some(m), Some(l)) => Ok((m, l)),
            _ => Err(Error::BadResponse(format!("status: {}", short(&v)))),
        }
    }

    /// Puts a key (no lease).
    pub fn put(&mut self, key: &[u8], value: &[u8], deadline: Instant) -> Result<i64, Error> {
        let v = self.call(
            "/v3/kv/put",
            &json!({"key": b64(key), "value": b64(value)}),
            deadline,
        )?;
        header_revision(&v)
    }
}

/// The first key after every key starting with `p` (etcd's `range_end` for a prefix).
pub fn prefix_end(p: &[u8]) -> Vec<u8> {
    let mut e = p.to_vec();
    while let Some(last) = e.last_mut() {
        if *last < 0xff {
            *last += 1;
            return e;
        }
        e.pop();
    }
    vec![0]
}

/// A JSON number or numeric string (etcd's gateway sends int64 as strings).
fn int(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_i64(),
        _ => None,
    }
}

fn header_revision(v: &Value) -> Result<i64, Error> {
    int(v.get("header").and_then(|h| h.get("revision")))
        .ok_or_else(|| Error::BadResponse(format!("no header.revision in {}", short(v))))
}

fn kvs(v: &Value) -> Result<Vec<KeyValue>, Error> {
    let Some(list) = v.get("kvs") else {
        return Ok(Vec::new());
    };
    let list = list
        .as_array()
        .ok_or_else(|| Error::BadResponse("kvs is not a list".into()))?;
    list.iter()
        .map(|kv| {
            let bytes = |f: &str| -> Result<Vec<u8>, Error> {
                match kv.get(f) {
                    None => Ok(Vec::new()),
                    Some(Value::String(s)) => unb64(s),
                    Some(o) => Err(Error::BadResponse(format!("kv {f} = {}", short(o)))),
                }
            };
            let key = bytes("key")?;
            if key.is_empty() {
                return Err(Error::BadResponse("kv without a key".into()));
            }
            Ok(KeyValue {
                key,
                value: bytes("value")?,
                create_revision: int(kv.get("create_revision")).unwrap_or(0),
                mod_revision: int(kv.get("mod_revision")).unwrap_or(0),
                version: int(kv.get("version")).unwrap_or(0),
                lease: int(kv.get("lease")).unwrap_or(0),
            })
        })
        .collect()
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 200 {
        format!("{}…", s.chars().take(200).collect::<String>())
    } else {
        s
    }
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding (what the gateway's protobuf JSON uses for `bytes`).
pub fn b64(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                out.push(B64[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Decodes standard or URL-safe base64, padded or not; anything else is an error.
pub fn unb64(s: &str) -> Result<Vec<u8>, Error> {
    let bad = || {
        Error::BadResponse(format!(
            "bad base64 {:?}",
            s.chars().take(40).collect::<String>()
        ))
    };
    let t = s.trim_end_matches('=');
    if s.len() - t.len() > 2 || t.len() % 4 == 1 {
        return Err(bad());
    }
    let mut out = Vec::with_capacity(t.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for ch in t.bytes() {
        let v = match ch {
            b'A'..=b'Z' => ch - b'A',
            b'a'..=b'z' => ch - b'a' + 26,
            b'0'..=b'9' => ch - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return Err(bad()),
        };
        acc = acc << 6 | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_every_length_and_matches_known_text() {
        assert_eq!(b64(b"a"), "YQ==");
        assert_eq!(b64(b"ab"), "YWI=");
        assert_eq!(b64(b"abc"), "YWJj");
        // RFC 4648 section 10.
        for (plain, enc) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(b64(plain.as_bytes()), enc);
        }
        assert_eq!(unb64("YQ==").unwrap(), b"a");
        for n in 0..40u8 {
            let d: Vec<u8> = (0..n)
                .map(|i| i.wrapping_mul(37).wrapping_add(200))
                .collect();
            assert_eq!(unb64(&b64(&d)).unwrap(), d);
        }
    }

    #[test]
    fn bad_base64_is_an_error_not_a_panic() {
        for s in ["Y", "Y===", "YQ!=", "é"] {
            assert!(unb64(s).is_err(), "{s}");
        }
    }

    #[test]
    fn a_prefix_range_ends_just_past_the_prefix() {
        assert_eq!(prefix_end(b"/a/"), b"/a0");
        assert_eq!(prefix_end(b"a\xff"), b"b");
        assert_eq!(prefix_end(b"\xff"), vec![0]);
    }

    #[test]
    fn odd_range_answers_are_errors_not_panics() {
        for v in [
            json!({"kvs": 3}),
            json!({"kvs": [{"key": 5}]}),
            json!({"kvs": [{"key": "!!"}]}),
            json!({"kvs": [{"value": "YQ=="}]}),
        ] {
            assert!(kvs(&v).is_err(), "{v}");
        }
        assert!(header_revision(&json!({"header": {}})).is_err());
        assert_eq!(
            header_revision(&json!({"header": {"revision": "7"}})).unwrap(),
            7
        );
    }
}

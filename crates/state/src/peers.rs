//! What the server keeps about remote peers by address (the rate limits of
//! their log lines, [`crate::loglimit`]; the failed-logon backoff,
//! [`crate::backoff`]): keyed by IP address, never by port (a client
//! reconnects from new ports), in tables of bounded size, so that a peer with
//! many addresses cannot make them grow without end.

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::net::{IpAddr, SocketAddr};

/// The IP address of a peer name as the driver makes it (`192.0.2.7:50123`,
/// `[2001:db8::7]:50123`; a bare address is taken too). An IPv4 address a
/// dual-stack listener sees as IPv6 (`[::ffff:192.0.2.7]:50123`) is the IPv4
/// address: a firewall bans that one. `None` for anything else (`unknown`).
pub fn ip_of(peer: &str) -> Option<IpAddr> {
    let ip = match peer.parse::<SocketAddr>() {
        Ok(a) => a.ip(),
        Err(_) => peer.parse::<IpAddr>().ok()?,
    };
    Some(ip.to_canonical())
}

/// A peer's address as log lines show it: the bare IP address (no port, no
/// brackets), `unknown` without one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PeerIp(pub Option<IpAddr>);

impl fmt::Display for PeerIp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(ip) => ip.fmt(f),
            None => f.write_str("unknown"),
        }
    }
}

/// A map of at most `cap` entries, each with the time it was last used: a
/// new key when it is full first drops the least recently used half (one
/// pass, so each insertion costs O(1) on average).
pub struct Table<K, V> {
    map: HashMap<K, (V, u64)>,
    cap: usize,
}

impl<K: Hash + Eq + Copy, V> Table<K, V> {
    pub fn new(cap: usize) -> Self {
        Table {
            map: HashMap::new(),
            cap: cap.max(2),
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    pub fn get(&self, key: &K) -> Option<&V> {
        self.map.get(key).map(|(v, _)| v)
    }

    /// The entry of `key`, used at `now`; made with `make` when missing.
    /// Entries dropped to make room go to `dropped`.
    pub fn entry(
        &mut self,
        key: K,
        now: u64,
        make: impl FnOnce() -> V,
        dropped: impl FnMut(K, V),
    ) -> &mut V {
        if !self.map.contains_key(&key) && self.map.len() >= self.cap {
            self.drop_oldest_half(dropped);
        }
        let e = self.map.entry(key).or_insert_with(|| (make(), now));
        e.1 = e.1.max(now);
        &mut e.0
    }

    /// Keep the entries `keep` says to.
    pub fn retain(&mut self, mut keep: impl FnMut(&K, &mut V) -> bool) {
        self.map.retain(|k, (v, _)| keep(k, v));
    }

    fn drop_oldest_half(&mut self, mut dropped: impl FnMut(K, V)) {
        let mut times: Vec<u64> = self.map.values().map(|(_, t)| *t).collect();
        let mid = times.len() / 2;
        let (_, cut, _) = times.select_nth_unstable(mid);
        let cut = *cut;
        let old: Vec<K> = self
            .map
            .iter()
            .filter(|(_, (_, t))| *t <= cut)
            .map(|(k, _)| *k)
            .collect();
        for k in old {
            if let Some((v, _)) = self.map.remove(&k) {
                dropped(k, v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_name_gives_its_address_without_the_port_and_mapped_ipv4_as_ipv4() {
        let v4: IpAddr = "192.0.2.7".parse().unwrap();
        assert_eq!(ip_of("192.0.2.7:50123"), Some(v4));
        assert_eq!(ip_of("[::ffff:192.0.2.7]:445"), Some(v4));
        assert_eq!(ip_of("192.0.2.7"), Some(v4));
        let v6: IpAddr = "2001:db8::7".parse().unwrap();
        assert_eq!(ip_of("[2001:db8::7]:50123"), Some(v6));
        assert_eq!(ip_of("2001:db8::7"), Some(v6));
        assert_eq!(ip_of("unknown"), None);
        assert_eq!(ip_of(""), None);
        assert_eq!(PeerIp(Some(v6)).to_string(), "2001:db8::7");
        assert_eq!(PeerIp(None).to_string(), "unknown");
    }

    #[test]
    fn a_full_table_forgets_the_least_recently_used_half_to_take_a_new_key() {
        let mut t: Table<u32, u32> = Table::new(8);
        let mut dropped = Vec::new();
        for k in 0..8 {
            *t.entry(k, u64::from(k), || 0, |_, _| unreachable!()) += 1;
        }
        // Key 0 is used again: it is the most recent now.
        t.entry(0, 100, || 0, |_, _| unreachable!());
        t.entry(8, 101, || 0, |k, _| dropped.push(k));
        dropped.sort_unstable();
        assert_eq!(dropped, vec![1, 2, 3, 4, 5]);
        assert_eq!(t.len(), 4);
        assert!(t.get(&0).is_some() && t.get(&8).is_some() && t.get(&1).is_none());
        for k in 1000..100_000 {
            t.entry(k, u64::from(k), || 0, |_, _| {});
            assert!(t.len() <= 8);
        }
    }
}

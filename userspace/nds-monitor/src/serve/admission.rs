//! Which connections `serve` keeps open.
//!
//! At most `capacity` connections at once, and at most `per_peer` from one address. A new
//! connection is always admitted: when a bound is reached, the connection that has been quiet
//! longest (of that peer when the peer is at its bound, else of all) is closed to make room.
//! So a client holding every connection open cannot keep the kubelet's probe out: each
//! probe costs it one idle connection, and a peer that hoards only ever evicts itself.

use std::collections::HashMap;
use std::net::IpAddr;

/// Names one admitted connection.
pub type ConnectionId = u64;

/// The open connections, each with what closes it when evicted (`T`: dropping it closes).
///
/// # Invariants
///
/// `open.len() <= capacity`, and no peer has more than `per_peer` entries; `clock` is
/// greater than every entry's `last_active`.
#[derive(Debug)]
pub struct Admission<T> {
    capacity: usize,
    per_peer: usize,
    next_id: ConnectionId,
    /// Counts admissions and requests: orders connections by their last activity.
    clock: u64,
    open: HashMap<ConnectionId, Entry<T>>,
}

#[derive(Debug)]
struct Entry<T> {
    peer: IpAddr,
    last_active: u64,
    handle: T,
}

/// What admitting a connection did.
#[derive(Debug)]
pub struct Admitted<T> {
    /// The new connection.
    pub id: ConnectionId,
    /// The handle of the connection closed to make room, if one was.
    pub evicted: Option<T>,
}

impl<T> Admission<T> {
    /// Room for `capacity` connections, `per_peer` of them from one address (both at least 1).
    #[must_use]
    pub fn new(capacity: usize, per_peer: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            capacity,
            per_peer: per_peer.clamp(1, capacity),
            next_id: 0,
            clock: 0,
            open: HashMap::with_capacity(capacity),
        }
    }

    /// Admits a connection from `peer`, evicting the quietest one if a bound is reached.
    pub fn admit(&mut self, peer: IpAddr, handle: T) -> Admitted<T> {
        let peer = peer.to_canonical();
        let from_peer = self.open.values().filter(|e| e.peer == peer).count();
        let victim = if from_peer >= self.per_peer {
            self.quietest(|entry| entry.peer == peer)
        } else if self.open.len() >= self.capacity {
            self.quietest(|_| true)
        } else {
            None
        };
        let evicted = victim
            .and_then(|id| self.open.remove(&id))
            .map(|entry| entry.handle);
        let id = self.next_id;
        self.next_id += 1;
        let last_active = self.tick();
        self.open.insert(
            id,
            Entry {
                peer,
                last_active,
                handle,
            },
        );
        Admitted { id, evicted }
    }

    /// Connection `id` received a request: it is now the most recently active.
    pub fn active(&mut self, id: ConnectionId) {
        let now = self.tick();
        if let Some(entry) = self.open.get_mut(&id) {
            entry.last_active = now;
        }
    }

    /// Connection `id` ended (it may have been evicted already).
    pub fn close(&mut self, id: ConnectionId) -> Option<T> {
        self.open.remove(&id).map(|entry| entry.handle)
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn quietest(&self, eligible: impl Fn(&Entry<T>) -> bool) -> Option<ConnectionId> {
        self.open
            .iter()
            .filter(|(_, entry)| eligible(entry))
            .min_by_key(|(_, entry)| entry.last_active)
            .map(|(&id, _)| id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn v4(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
    }

    #[test]
    fn below_the_bounds_nothing_is_evicted() {
        let mut admission = Admission::new(4, 2);
        for peer in [v4(1), v4(1), v4(2), v4(3)] {
            assert!(admission.admit(peer, ()).evicted.is_none());
        }
        assert_eq!(admission.open.len(), 4);
    }

    #[test]
    fn a_full_table_evicts_the_quietest_connection() {
        let mut admission = Admission::new(3, 3);
        let first = admission.admit(v4(1), "first").id;
        let second = admission.admit(v4(2), "second").id;
        admission.admit(v4(3), "third");
        // The first one asked for something since: the second is now the quietest.
        admission.active(first);
        let admitted = admission.admit(v4(4), "probe");
        assert_eq!(admitted.evicted, Some("second"));
        assert_eq!(admission.open.len(), 3);
        assert!(admission.close(second).is_none(), "already gone");
        assert_eq!(admission.close(first), Some("first"));
    }

    #[test]
    fn a_peer_at_its_bound_evicts_only_itself() {
        let mut admission = Admission::new(8, 2);
        let other = admission.admit(v4(9), "other").id;
        admission.admit(v4(1), "a");
        admission.admit(v4(1), "b");
        // The other peer is the quietest of all, but the hoarder pays.
        assert_eq!(admission.admit(v4(1), "c").evicted, Some("a"));
        assert_eq!(admission.admit(v4(1), "d").evicted, Some("b"));
        assert_eq!(admission.close(other), Some("other"));
    }

    #[test]
    fn mapped_ipv4_is_the_same_peer_as_ipv4() {
        let mut admission = Admission::new(8, 1);
        admission.admit(v4(1), "plain");
        let mapped = IpAddr::V6(Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped());
        assert_eq!(admission.admit(mapped, "mapped").evicted, Some("plain"));
        let v6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
        assert!(admission.admit(v6, "v6").evicted.is_none());
    }

    #[test]
    fn a_new_connection_is_always_admitted() {
        let mut admission = Admission::new(16, 4);
        for round in 0..1000u32 {
            let peer = v4(u8::try_from(round % 7).unwrap());
            admission.admit(peer, round);
            assert!(admission.open.len() <= 16);
            let from_peer = admission.open.values().filter(|e| e.peer == peer).count();
            assert!(from_peer <= 4);
        }
        assert_eq!(admission.open.len(), 16);
    }
}

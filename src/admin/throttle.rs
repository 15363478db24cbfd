//! How often something may happen: a leaky bucket per client address and one for everybody.
//! A full bucket refuses until it has drained by one. The admin surface counts wrong tokens in
//! one throttle ([`RULES`]: a full bucket refuses attempts, right or wrong) and anonymous page
//! loads in another ([`anonymous_reads`]). Pure: the caller passes the clock.
//!
//! Addresses are the TCP peer's: behind a reverse proxy every client shares the proxy's bucket.
//! IPv6 clients are grouped by /64, the block a single host usually holds.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// A bucket: `burst` failures at once, then one more every `every`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub burst: u32,
    pub every: Duration,
}

/// The limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThrottleRules {
    pub per_address: Rate,
    pub global: Rate,
    /// Addresses remembered at most; beyond, new addresses meet the global bucket only.
    pub max_addresses: usize,
}

/// Wrong tokens: 5 per address at once and then 5 a minute; 30 over all addresses at once and
/// then 60 a minute.
pub const RULES: ThrottleRules = ThrottleRules {
    per_address: Rate {
        burst: 5,
        every: Duration::from_secs(12),
    },
    global: Rate {
        burst: 30,
        every: Duration::from_secs(1),
    },
    max_addresses: 10_000,
};

/// Anonymous page loads, `per_second` over all addresses (twice that at once), half of it per
/// address; `None` for 0 (no limit).
pub fn anonymous_reads(per_second: u32) -> Option<ThrottleRules> {
    (per_second > 0).then(|| ThrottleRules {
        per_address: Rate {
            burst: per_second,
            every: Duration::from_secs(2) / per_second,
        },
        global: Rate {
            burst: 2 * per_second,
            every: Duration::from_secs(1) / per_second,
        },
        max_addresses: RULES.max_addresses,
    })
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    level: f64,
    at: Instant,
}

impl Bucket {
    fn level(&self, rate: Rate, now: Instant) -> f64 {
        let drained =
            now.saturating_duration_since(self.at).as_secs_f64() / rate.every.as_secs_f64();
        (self.level - drained).max(0.0)
    }

    /// How long until one more failure fits; `None`: it fits now.
    fn wait(&self, rate: Rate, now: Instant) -> Option<Duration> {
        let over = self.level(rate, now) + 1.0 - f64::from(rate.burst);
        (over > 1e-9).then(|| rate.every.mul_f64(over))
    }

    fn add(&mut self, rate: Rate, now: Instant) {
        self.level = self.level(rate, now) + 1.0;
        self.at = now;
    }
}

/// Who is refused, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    pub retry_after: Duration,
    /// All addresses together, not this one alone, used up the limit.
    pub global: bool,
}

/// The buckets.
#[derive(Debug)]
pub struct Throttle {
    rules: ThrottleRules,
    global: Option<Bucket>,
    addresses: HashMap<IpAddr, Bucket>,
}

impl Throttle {
    pub fn new(rules: ThrottleRules) -> Throttle {
        Throttle {
            rules,
            global: None,
            addresses: HashMap::new(),
        }
    }

    /// Whether `peer` may try a token now.
    pub fn check(&self, peer: Option<IpAddr>, now: Instant) -> Result<(), Refused> {
        let own = peer
            .and_then(|ip| self.addresses.get(&client(ip)))
            .and_then(|b| b.wait(self.rules.per_address, now));
        if let Some(retry_after) = own {
            return Err(Refused {
                retry_after,
                global: false,
            });
        }
        match self.global.and_then(|b| b.wait(self.rules.global, now)) {
            Some(retry_after) => Err(Refused {
                retry_after,
                global: true,
            }),
            None => Ok(()),
        }
    }

    /// Counts one (a wrong token, a page load) from `peer`.
    pub fn count(&mut self, peer: Option<IpAddr>, now: Instant) {
        let rules = self.rules;
        self.global
            .get_or_insert(Bucket {
                level: 0.0,
                at: now,
            })
            .add(rules.global, now);
        let Some(ip) = peer.map(client) else {
            return;
        };
        if !self.addresses.contains_key(&ip) && self.addresses.len() >= rules.max_addresses {
            self.addresses
                .retain(|_, b| b.level(rules.per_address, now) > 0.0);
            if self.addresses.len() >= rules.max_addresses {
                return;
            }
        }
        self.addresses
            .entry(ip)
            .or_insert(Bucket {
                level: 0.0,
                at: now,
            })
            .add(rules.per_address, now);
    }

    /// Addresses remembered now.
    pub fn addresses(&self) -> usize {
        self.addresses.len()
    }
}

/// The key of a client address: IPv4 as is (IPv4-mapped IPv6 too), IPv6 by its /64.
fn client(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut segments = v6.segments();
                segments[4..].fill(0);
                IpAddr::V6(segments.into())
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEST: ThrottleRules = ThrottleRules {
        per_address: Rate {
            burst: 3,
            every: Duration::from_secs(10),
        },
        global: Rate {
            burst: 5,
            every: Duration::from_secs(1),
        },
        max_addresses: 4,
    };

    fn ip(text: &str) -> Option<IpAddr> {
        Some(text.parse().unwrap())
    }

    #[test]
    fn an_address_gets_its_burst_then_waits_for_the_bucket_to_drain() {
        let t0 = Instant::now();
        let mut throttle = Throttle::new(TEST);
        for _ in 0..3 {
            assert!(throttle.check(ip("10.0.0.1"), t0).is_ok());
            throttle.count(ip("10.0.0.1"), t0);
        }
        let refused = throttle.check(ip("10.0.0.1"), t0).unwrap_err();
        assert_eq!(refused.retry_after, Duration::from_secs(10));
        assert!(!refused.global);
        assert!(
            throttle.check(ip("10.0.0.2"), t0).is_ok(),
            "others still may"
        );
        assert!(
            throttle
                .check(ip("10.0.0.1"), t0 + Duration::from_secs(10))
                .is_ok()
        );
    }

    #[test]
    fn all_addresses_together_meet_the_global_limit() {
        let t0 = Instant::now();
        let mut throttle = Throttle::new(TEST);
        for i in 0..5 {
            throttle.count(ip(&format!("10.0.1.{i}")), t0);
        }
        let refused = throttle.check(ip("10.0.2.1"), t0).unwrap_err();
        assert!(refused.global);
        assert_eq!(refused.retry_after, Duration::from_secs(1));
        assert!(
            throttle
                .check(ip("10.0.2.1"), t0 + Duration::from_secs(1))
                .is_ok()
        );
    }

    #[test]
    fn ipv6_clients_share_a_bucket_per_slash_64() {
        let t0 = Instant::now();
        let mut throttle = Throttle::new(TEST);
        for host in ["2001:db8::1", "2001:db8::2", "2001:db8::ffff:1"] {
            throttle.count(ip(host), t0);
        }
        assert!(throttle.check(ip("2001:db8::9"), t0).is_err());
        assert!(throttle.check(ip("2001:db8:0:1::1"), t0).is_ok());
        throttle.count(ip("::ffff:10.0.0.7"), t0);
        assert_eq!(throttle.addresses(), 2, "IPv4-mapped is IPv4");
    }

    #[test]
    fn anonymous_reads_allow_a_burst_of_twice_the_rate_and_half_of_it_per_address() {
        let rules = anonymous_reads(20).unwrap();
        assert_eq!(rules.global.burst, 40);
        assert_eq!(rules.global.every, Duration::from_millis(50));
        assert_eq!(rules.per_address.burst, 20);
        assert_eq!(rules.per_address.every, Duration::from_millis(100));
        assert_eq!(anonymous_reads(0), None);
    }

    #[test]
    fn the_address_table_stays_bounded() {
        let t0 = Instant::now();
        let rules = ThrottleRules {
            global: Rate {
                burst: 1000,
                every: Duration::from_millis(1),
            },
            ..TEST
        };
        let mut throttle = Throttle::new(rules);
        for i in 0..10 {
            throttle.count(ip(&format!("10.0.3.{i}")), t0);
        }
        assert_eq!(throttle.addresses(), 4);
        // Drained addresses make room.
        throttle.count(ip("10.0.4.1"), t0 + Duration::from_secs(60));
        assert_eq!(throttle.addresses(), 1);
    }
}

//! Signed-in browser sessions: a random id per sign-in with its CSRF token, ended by idle time,
//! by age, or by eviction when the store is full. Pure: the caller passes the clock.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Sessions held at most; a sign-in beyond it ends the least recently used one.
pub const MAX_SESSIONS: usize = 1000;

/// When a session ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionRules {
    /// Unused for this long.
    pub idle: Duration,
    /// This long after sign-in, used or not.
    pub max_age: Duration,
    pub capacity: usize,
}

#[derive(Debug, Clone)]
struct Session {
    csrf: String,
    created: Instant,
    last_seen: Instant,
}

impl Session {
    fn expired(&self, rules: &SessionRules, now: Instant) -> bool {
        now.saturating_duration_since(self.last_seen) >= rules.idle
            || now.saturating_duration_since(self.created) >= rules.max_age
    }
}

/// The live sessions by id.
#[derive(Debug)]
pub struct Sessions {
    rules: SessionRules,
    live: HashMap<String, Session>,
}

impl Sessions {
    pub fn new(rules: SessionRules) -> Sessions {
        debug_assert!(rules.capacity > 0);
        Sessions {
            rules,
            live: HashMap::new(),
        }
    }

    /// Starts a session under `id` with its `csrf` token; ended ones go first, and a full store
    /// gives up its least recently used session.
    pub fn create(&mut self, id: String, csrf: String, now: Instant) {
        let rules = self.rules;
        self.live.retain(|_, s| !s.expired(&rules, now));
        while self.live.len() >= rules.capacity {
            let Some(oldest) = self
                .live
                .iter()
                .min_by_key(|(_, s)| s.last_seen)
                .map(|(id, _)| id.clone())
            else {
                break;
            };
            self.live.remove(&oldest);
        }
        self.live.insert(
            id,
            Session {
                csrf,
                created: now,
                last_seen: now,
            },
        );
    }

    /// The CSRF token of a live session, which counts as used now; an ended one is forgotten.
    pub fn touch(&mut self, id: &str, now: Instant) -> Option<String> {
        let rules = self.rules;
        let session = self.live.get_mut(id)?;
        if session.expired(&rules, now) {
            self.live.remove(id);
            return None;
        }
        session.last_seen = now;
        Some(session.csrf.clone())
    }

    pub fn remove(&mut self, id: &str) {
        self.live.remove(id);
    }

    pub fn len(&self) -> usize {
        self.live.len()
    }

    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: SessionRules = SessionRules {
        idle: Duration::from_secs(60),
        max_age: Duration::from_secs(300),
        capacity: 3,
    };

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn a_session_used_within_the_idle_limit_lives_on() {
        let t0 = Instant::now();
        let mut sessions = Sessions::new(RULES);
        sessions.create("a".into(), "csrf-a".into(), t0);
        assert_eq!(
            sessions.touch("a", t0 + secs(59)).as_deref(),
            Some("csrf-a")
        );
        assert_eq!(
            sessions.touch("a", t0 + secs(118)).as_deref(),
            Some("csrf-a")
        );
        assert_eq!(sessions.touch("b", t0), None);
    }

    #[test]
    fn an_idle_session_ends_and_is_forgotten() {
        let t0 = Instant::now();
        let mut sessions = Sessions::new(RULES);
        sessions.create("a".into(), "csrf-a".into(), t0);
        assert_eq!(sessions.touch("a", t0 + secs(60)), None);
        assert!(sessions.is_empty());
    }

    #[test]
    fn a_session_ends_at_its_maximum_age_however_busy() {
        let t0 = Instant::now();
        let mut sessions = Sessions::new(RULES);
        sessions.create("a".into(), "csrf-a".into(), t0);
        for minute in 1..5 {
            assert!(sessions.touch("a", t0 + secs(minute * 59)).is_some());
        }
        assert_eq!(sessions.touch("a", t0 + secs(300)), None);
    }

    #[test]
    fn a_full_store_ends_the_least_recently_used_session() {
        let t0 = Instant::now();
        let mut sessions = Sessions::new(RULES);
        sessions.create("a".into(), "1".into(), t0);
        sessions.create("b".into(), "2".into(), t0 + secs(1));
        sessions.create("c".into(), "3".into(), t0 + secs(2));
        sessions.touch("a", t0 + secs(3));
        sessions.create("d".into(), "4".into(), t0 + secs(4));
        assert_eq!(sessions.len(), 3);
        assert_eq!(
            sessions.touch("b", t0 + secs(5)),
            None,
            "b was used last longest ago"
        );
        assert!(sessions.touch("a", t0 + secs(5)).is_some());
        assert!(sessions.touch("d", t0 + secs(5)).is_some());
    }

    #[test]
    fn signing_in_clears_ended_sessions_first() {
        let t0 = Instant::now();
        let mut sessions = Sessions::new(RULES);
        sessions.create("a".into(), "1".into(), t0);
        sessions.create("b".into(), "2".into(), t0);
        sessions.create("c".into(), "3".into(), t0 + secs(100));
        assert_eq!(sessions.len(), 1, "a and b were idle for 100 s");
    }
}

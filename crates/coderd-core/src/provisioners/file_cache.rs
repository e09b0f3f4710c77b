//! Template archives kept in memory for job payloads, bounded by bytes.
//!
//! Files never change once uploaded, and a few templates serve most builds, so the archive a
//! build needs is usually here. The bound is on bytes, not entries: archives run from a few KiB
//! to the upload limit, and 64 archives of 9 MiB took coderd to ~875 MiB. The least recently
//! used archives go first; one larger than the whole budget is served but not kept.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use uuid::Uuid;

use coderd_store as store;

/// The default budget: a few template archives of the largest size uploads allow.
pub const DEFAULT_MAX_BYTES: usize = 32 << 20;

/// Template archives by file id. Cheap to clone (shared).
#[derive(Clone)]
pub struct FileCache {
    lru: Arc<Mutex<Lru>>,
}

impl Default for FileCache {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_BYTES)
    }
}

impl FileCache {
    pub fn new(max_bytes: usize) -> Self {
        Self {
            lru: Arc::new(Mutex::new(Lru::new(max_bytes))),
        }
    }

    /// The archive of file `id`, from memory or (then kept, if it fits) the database.
    pub async fn get(&self, store: &store::Store, id: Uuid) -> Result<Bytes, store::Error> {
        if let Some(data) = self.lock().get(id) {
            return Ok(data);
        }
        let data = Bytes::from(store.file_by_id(id).await?.data);
        self.lock().insert(id, data.clone());
        Ok(data)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Lru> {
        self.lru.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Least-recently-used entries within a byte budget.
struct Lru {
    max_bytes: usize,
    bytes: usize,
    /// Increases on every use; an entry's last use orders eviction.
    clock: u64,
    entries: HashMap<Uuid, (Bytes, u64)>,
    by_use: BTreeMap<u64, Uuid>,
}

impl Lru {
    fn new(max_bytes: usize) -> Self {
        Self {
            max_bytes,
            bytes: 0,
            clock: 0,
            entries: HashMap::new(),
            by_use: BTreeMap::new(),
        }
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn get(&mut self, id: Uuid) -> Option<Bytes> {
        let now = self.tick();
        let (data, used) = self.entries.get_mut(&id)?;
        self.by_use.remove(used);
        *used = now;
        self.by_use.insert(now, id);
        Some(data.clone())
    }

    fn insert(&mut self, id: Uuid, data: Bytes) {
        if data.len() > self.max_bytes || self.entries.contains_key(&id) {
            return;
        }
        while self.bytes + data.len() > self.max_bytes {
            let Some((_, oldest)) = self.by_use.pop_first() else {
                break;
            };
            if let Some((evicted, _)) = self.entries.remove(&oldest) {
                self.bytes -= evicted.len();
            }
        }
        let now = self.tick();
        self.bytes += data.len();
        self.by_use.insert(now, id);
        self.entries.insert(id, (data, now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(len: usize) -> Bytes {
        Bytes::from(vec![0; len])
    }

    #[test]
    fn keeps_the_most_recently_used_within_the_budget() {
        let mut lru = Lru::new(30);
        let (a, b, c) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        lru.insert(a, file(10));
        lru.insert(b, file(10));
        lru.insert(c, file(10));
        assert_eq!(lru.bytes, 30);
        assert!(lru.get(a).is_some(), "a is now the most recent");
        let d = Uuid::new_v4();
        lru.insert(d, file(15));
        assert!(
            lru.get(b).is_none() && lru.get(c).is_none(),
            "b and c made room"
        );
        assert!(lru.get(a).is_some() && lru.get(d).is_some());
        assert_eq!(lru.bytes, 25);
    }

    #[test]
    fn an_archive_larger_than_the_budget_is_not_kept() {
        let mut lru = Lru::new(30);
        let small = Uuid::new_v4();
        lru.insert(small, file(10));
        lru.insert(Uuid::new_v4(), file(31));
        assert_eq!(lru.bytes, 10);
        assert!(lru.get(small).is_some(), "nothing was evicted for it");
    }

    #[test]
    fn the_budget_holds_under_any_sequence() {
        let mut lru = Lru::new(100);
        let ids: Vec<Uuid> = (0..20).map(|_| Uuid::new_v4()).collect();
        for round in 0..200usize {
            let id = ids[(round * 7) % ids.len()];
            if lru.get(id).is_none() {
                lru.insert(id, file((round * 13) % 60));
            }
            assert!(lru.bytes <= 100);
            assert_eq!(lru.entries.len(), lru.by_use.len());
            let held: usize = lru.entries.values().map(|(d, _)| d.len()).sum();
            assert_eq!(held, lru.bytes);
        }
    }
}

//! Poison-tolerant locking.
//!
//! A `std::sync` lock is poisoned when a thread panicked while holding it. Every lock in the
//! fleet guards plain data (a map, a registry snapshot, a breaker) that a panic cannot leave
//! half-written in a way worse than a lost update, so a request must not turn a past panic
//! into a second one: these helpers take the guard back out of the poison error instead.

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Lock `mutex`, ignoring poison (see the module doc for why that is safe here).
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Take a read guard on `lock`, ignoring poison.
pub fn read<T: ?Sized>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

/// Take a write guard on `lock`, ignoring poison.
pub fn write<T: ?Sized>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn poison_mutex(m: &Arc<Mutex<u32>>) {
        let m = m.clone();
        let _ = std::thread::spawn(move || {
            let _guard = m.lock().unwrap();
            panic!("poison on purpose");
        })
        .join();
    }

    #[test]
    fn a_poisoned_mutex_still_locks() {
        let m = Arc::new(Mutex::new(1));
        poison_mutex(&m);
        assert!(m.is_poisoned());
        *lock(&m) += 1;
        assert_eq!(*lock(&m), 2);
    }

    #[test]
    fn a_poisoned_rwlock_still_reads_and_writes() {
        let l = Arc::new(RwLock::new(1));
        let l2 = l.clone();
        let _ = std::thread::spawn(move || {
            let _guard = l2.write().unwrap();
            panic!("poison on purpose");
        })
        .join();
        assert!(l.is_poisoned());
        *write(&l) = 5;
        assert_eq!(*read(&l), 5);
    }
}

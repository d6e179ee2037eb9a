// Note [Spin locks]
// Some locks are taken on every op and held for a few dozen instructions: the shared engines'
// bookkeeping of a launch (Note [Shared engines]), a framework's allocator cache. Taking and
// releasing an uncontended std::mutex is two library calls (pthread_mutex_lock/unlock, about 60
// instructions); a spin lock is one atomic exchange and one store. A waiter spins a little,
// then yields its time slice on every further try, so a holder that the OS descheduled (a busy
// machine with more threads than cores) still gets to run and finish. Only for short critical
// sections that never block: no I/O, no waiting on other locks taken in another order.
#pragma once

#include <atomic>
#include <thread>

namespace trnsim {

class SpinLock {
 public:
  void lock() {
    for (int tries = 0; locked_.exchange(true, std::memory_order_acquire); ++tries) {
      // Wait with plain loads (no cache-line ping-pong), yielding after a few rounds.
      for (int spins = 0; locked_.load(std::memory_order_relaxed); ++spins) {
        if (tries > 0 || spins >= kSpinsBeforeYield) std::this_thread::yield();
      }
    }
  }
  bool try_lock() {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  static constexpr int kSpinsBeforeYield = 64;
  std::atomic<bool> locked_{false};
};

}  // namespace trnsim

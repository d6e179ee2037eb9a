#include "runtime/DeviceAllocator.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <trnsim/error.h>
#include <trnsim/spin_lock.h>

#include "runtime/PointerTable.h"
#include "runtime/Runtime.h"
#include "runtime/SimulatorError.h"
#include "runtime/Stream.h"

namespace torch_neuron {
namespace {

using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatArray;
using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

// Requests up to 1 MiB are "small pool" in the stats and take blocks of small segments only,
// as in CUDA's allocator (Note [Split blocks]).
constexpr size_t kSmallSize = 1 << 20;

struct Block;
// Cached blocks by the stream they belong to and size. A live block keeps its node handle, so
// caching and reusing a block allocates nothing (Note [Allocator hot path]).
using PoolKey = std::pair<const trnsim::Queue*, size_t>;
using FreeBlocks = std::multimap<PoolKey, Block*>;

struct Block {
  c10::DeviceIndex device;
  void* ptr;
  size_t size;       // rounded size: a whole segment reserved from HBM, or a part of one
  size_t requested;  // what the caller asked for
  // The stream whose pool it belongs to: the one that reserved its segment (Note [Caching
  // HBM allocator]).
  const trnsim::Queue* queue;
  std::vector<c10::StreamId> other_streams;  // from record_stream
  double ready_ns = 0;  // when the other streams' work queued before it was freed finishes
  Block* prev = nullptr;  // the blocks before and after it in its segment (Note [Split blocks])
  Block* next = nullptr;
  bool live = false;
  uint64_t allocation = 0;  // which allocation it serves while live (Note [Allocation ids])
  FreeBlocks::node_type free_node;  // set while the block is live
  FreeBlocks::iterator where;       // set while the block is cached
};

// Note [Split blocks]: as CUDA's allocator does, a request takes the smallest cached block of
// its stream's pool that fits (small requests from small segments, large from large) and
// leaves the rest of the block cached as a block of its own when the rest is worth keeping: at
// least one alignment unit in the small pool, more than 1 MiB in the large one (CUDA's
// thresholds; a smaller rest stays part of the allocation). So memory_allocated counts what the
// request rounds to, not the size of whatever cached block served it, and a freed block merges
// with the free blocks beside it in its segment, all of whose blocks belong to one stream.
// Only whole segments go back to HBM (empty_cache, the retry before an out-of-memory error).
// The rest remembers the other streams that used the block (record_stream), so its reuse
// still waits for them (Note [Caching HBM allocator]).
bool worth_splitting(size_t block_size, size_t size) {
  const size_t rest = block_size - size;
  return size <= kSmallSize ? rest >= trnsim::Hbm::kAlignment : rest > kSmallSize;
}

// `deferred_peak`: an increase whose peak waits for settle_peaks (Note [Host kernel scratch]).
void update(StatArray& stats, size_t size, int64_t delta, bool deferred_peak = false) {
  const auto pool = size <= kSmallSize ? StatType::SMALL_POOL : StatType::LARGE_POOL;
  for (auto type : {StatType::AGGREGATE, pool}) {
    auto& stat = stats[static_cast<size_t>(type)];
    if (delta < 0) {
      stat.decrease(-delta);
    } else if (deferred_peak) {
      stat.current += delta;
      stat.allocated += delta;
    } else {
      stat.increase(delta);
    }
  }
}

// Everything the allocator keeps for one device. Guarded by the allocator's lock.
struct DeviceCache {
  // The device, looked up at its first allocation (read without the lock).
  std::atomic<trnsim::Device*> device{nullptr};
  FreeBlocks small_blocks, large_blocks;  // cached blocks of small and large segments
  std::map<uintptr_t, Block*> segments;   // the first block of each segment, by address
  DeviceStats stats;
  // set_per_process_memory_fraction: the most this process may reserve (SIZE_MAX: no limit).
  size_t reserve_limit = SIZE_MAX;
  double fraction = 1.0;

  // A block of the small pool is at most kSmallSize; of the large pool, larger.
  FreeBlocks& pool_of(size_t size) { return size <= kSmallSize ? small_blocks : large_blocks; }
  static PoolKey key_of(const Block* b) { return {b->queue, b->size}; }

  // A cached block part of a split segment cannot go back to HBM: CUDA's inactive_split
  // statistics ("non-releasable memory"). Called as a block enters (+1) or leaves (-1) the
  // cache; while it is cached its neighbours do not change (they are live: free neighbours
  // merge).
  void count_inactive_split(const Block* b, int64_t sign) {
    if (b->prev == nullptr && b->next == nullptr) return;
    update(stats.inactive_split_bytes, b->size, sign * static_cast<int64_t>(b->size));
    update(stats.inactive_split, b->size, sign);
  }
  FreeBlocks::node_type take_out(FreeBlocks& pool, FreeBlocks::iterator where) {
    count_inactive_split(where->second, -1);
    return pool.extract(where);
  }
  FreeBlocks::iterator put_in(FreeBlocks& pool, Block* b, FreeBlocks::node_type node = {}) {
    count_inactive_split(b, +1);
    if (node.empty()) return pool.emplace(key_of(b), b);
    node.key() = key_of(b);
    node.mapped() = b;
    return pool.insert(std::move(node));
  }

  // A new segment of `size` bytes from HBM, or nullptr when HBM or the limit has no room.
  void* try_reserve(trnsim::Hbm& hbm, size_t size) {
    const auto reserved = stats.reserved_bytes[static_cast<size_t>(StatType::AGGREGATE)].current;
    if (static_cast<size_t>(reserved) + size > reserve_limit) return nullptr;
    try {
      return hbm.allocate(size);
    } catch (const trnsim::OutOfMemory&) {
      return nullptr;
    }
  }

  // A segment `b` (a whole one) was reserved (`sign` +1) or released (-1).
  void account_reserve(Block* b, int64_t sign) {
    update(stats.reserved_bytes, b->size, sign * static_cast<int64_t>(b->size));
    update(stats.segment, b->size, sign);
    const auto address = reinterpret_cast<uintptr_t>(b->ptr);
    if (sign > 0) {
      segments.emplace(address, b);
    } else {
      segments.erase(address);
    }
  }
  void account_use(Block* b, int64_t sign, bool deferred_peak = false) {
    update(stats.allocated_bytes, b->size, sign * static_cast<int64_t>(b->size), deferred_peak);
    update(stats.active_bytes, b->size, sign * static_cast<int64_t>(b->size), deferred_peak);
    update(stats.requested_bytes, b->size, sign * static_cast<int64_t>(b->requested),
           deferred_peak);
    update(stats.allocation, b->size, sign, deferred_peak);
    update(stats.active, b->size, sign, deferred_peak);
  }
  // What is allocated now counts towards the peaks (Note [Host kernel scratch]).
  void settle_peaks() {
    for (auto* array : {&stats.allocated_bytes, &stats.active_bytes, &stats.requested_bytes,
                        &stats.allocation, &stats.active}) {
      for (auto& stat : *array) stat.peak = std::max(stat.peak, stat.current);
    }
  }

  // The smallest cached block of `queue`'s stream and `size`'s pool that fits `size`, taken
  // out of the cache with any rest worth keeping split off and cached (Note [Split blocks]);
  // nullptr when none fits.
  Block* take_cached(const trnsim::Queue* queue, size_t size) {
    FreeBlocks& pool = pool_of(size);
    auto it = pool.lower_bound({queue, size});
    if (it == pool.end() || it->first.first != queue) return nullptr;
    Block* block = it->second;
    block->free_node = take_out(pool, it);
    if (worth_splitting(block->size, size)) {
      auto* rest = new Block{block->device, static_cast<char*>(block->ptr) + size,
                             block->size - size, 0, block->queue, block->other_streams,
                             block->ready_ns, block, block->next};
      if (rest->next != nullptr) rest->next->prev = rest;
      block->next = rest;
      block->size = size;
      rest->where = put_in(pool, rest);
    }
    return block;
  }

  // Caches a freed block, merged with the free blocks beside it in its segment.
  void cache(Block* block) {
    FreeBlocks& pool = pool_of(block->size);
    FreeBlocks::node_type node = std::move(block->free_node);
    if (block->prev != nullptr && !block->prev->live) {
      Block* prev = block->prev;
      node = take_out(pool, prev->where);  // reuse the neighbour's node; drop this block's
      merge_into(prev, block);
      block = prev;
    }
    if (block->next != nullptr && !block->next->live) {
      Block* next = block->next;
      take_out(pool, next->where);
      merge_into(block, next);
    }
    block->where = put_in(pool, block, std::move(node));
  }

  // Gives every cached whole segment back to HBM (split ones stay until all their parts are
  // free again).
  void release_cached(trnsim::Hbm& hbm) {
    for (FreeBlocks* pool : {&small_blocks, &large_blocks}) {
      for (auto it = pool->begin(); it != pool->end();) {
        Block* block = it->second;
        if (block->prev != nullptr || block->next != nullptr) {
          ++it;
          continue;
        }
        hbm.release(block->ptr);
        account_reserve(block, -1);
        ++stats.num_device_free;
        delete block;
        it = pool->erase(it);
      }
    }
  }

 private:
  // `second`, the free block right after free block `first` in their segment, becomes part of
  // `first`, which keeps the history of both (Note [Caching HBM allocator]).
  static void merge_into(Block* first, Block* second) {
    first->size += second->size;
    first->next = second->next;
    if (first->next != nullptr) first->next->prev = first;
    first->ready_ns = std::max(first->ready_ns, second->ready_ns);
    first->other_streams.insert(first->other_streams.end(), second->other_streams.begin(),
                                second->other_streams.end());
    delete second;
  }
};

// Note [Allocator hot path]: every host-executed op allocates its outputs here and frees the
// previous ones, so the common path is kept short: one lock for the whole allocator (the
// per-device caches and the live-block table), taken once per allocation and once per free and
// held for a few dozen instructions, so a spin lock (Note [Spin locks] in trnsim/spin_lock.h:
// about a tenth of an uncontended std::mutex's instructions); no heap allocation when a cached
// block is reused whole (its free-list node is kept in the block; only splitting one makes a
// new block); a free reads no clock unless the block was recorded on other streams; and
// allocate_on checks the device index once (current_queue).
// DataPtrs carry the data pointer as their context (not the Block), so that
// c10::Allocator::raw_allocate/raw_deleter work: CPU kernels running on device memory
// (Note [Host execution]) may use them; the live table finds the block again.
struct AllocatorState {
  trnsim::SpinLock mutex;  // Note [Spin locks] in trnsim/spin_lock.h
  std::vector<DeviceCache> caches;  // one per visible device
  PointerTable<Block*> live;        // blocks in use, by data pointer
  uint64_t allocations = 0;         // allocations made so far (Note [Allocation ids])
};

// Deliberately never destroyed: tensors freed during interpreter shutdown still return here.
AllocatorState& state() {
  static auto* s = [] {
    auto* st = new AllocatorState();
    st->caches = std::vector<DeviceCache>(device_count_or_zero());
    return st;
  }();
  return *s;
}

DeviceCache& cache_of(c10::DeviceIndex index) {
  check_device_index(index);
  return state().caches.at(index);
}

size_t round_size(size_t n) {
  const size_t a = trnsim::Hbm::kAlignment;
  return (n + a - 1) / a * a;
}

// The clock of a stream that is known to be valid (it allocated or used a block).
double stream_clock(c10::DeviceIndex device, c10::StreamId id) {
  return system().device(device).queue(static_cast<int>(id)).now_ns();
}

// Caches `ptr`'s block if it is the start of a live block; false when it is not ours.
bool release(void* ptr) {
  // In a forked child the block belongs to the parent's allocator: leave it alone.
  if (ptr == nullptr || in_bad_fork()) return false;
  auto& st = state();
  std::lock_guard<trnsim::SpinLock> lock(st.mutex);
  Block** found = st.live.find(ptr);
  if (found == nullptr) return false;  // not ours; a deleter must not throw
  Block* block = *found;
  st.live.erase(ptr);
  // Remember when the other streams that used the block (record_stream) finish with it; its
  // own stream's later work follows its last use anyway (Note [Caching HBM allocator]).
  double ready = 0;
  for (auto id : block->other_streams) ready = std::max(ready, stream_clock(block->device, id));
  block->ready_ns = ready;
  auto& cache = st.caches[block->device];
  cache.account_use(block, -1);
  block->live = false;
  cache.cache(block);
  return true;
}

void free_block(void* ptr) { release(ptr); }

[[noreturn]] void raise_oom(c10::DeviceIndex index, size_t requested, DeviceCache& cache,
                            trnsim::Hbm& hbm) {
  const auto agg = static_cast<size_t>(StatType::AGGREGATE);
  const auto allocated = cache.stats.allocated_bytes[agg].current;
  const auto reserved = cache.stats.reserved_bytes[agg].current;
  ++cache.stats.num_ooms;
  std::string limit;
  if (cache.reserve_limit != SIZE_MAX) {
    limit = c10::str(" This process may use ", trnsim::format_bytes(cache.reserve_limit), " (",
                     cache.fraction,
                     " of it, set by torch.neuron.set_per_process_memory_fraction; raise the "
                     "fraction to allow more).");
  }
  TORCH_CHECK_WITH(OutOfMemoryError, false, "neuron out of memory. Tried to allocate ",
                   trnsim::format_bytes(requested), ". neuron:", static_cast<int>(index),
                   " has a total capacity of ", trnsim::format_bytes(hbm.capacity()),
                   " of which ", trnsim::format_bytes(hbm.free_bytes()), " is free (the largest "
                   "free block: ", trnsim::format_bytes(hbm.largest_free_block()), ").", limit, " ",
                   trnsim::format_bytes(allocated), " is allocated by PyTorch and ",
                   trnsim::format_bytes(reserved - allocated),
                   " is reserved by PyTorch but unallocated. Free tensors you no longer need, "
                   "reduce the batch size, or choose an instance with more HBM per NeuronCore "
                   "(TORCH_NEURON_INSTANCE).");
}

}  // namespace

NeuronDeviceAllocator& device_allocator() {
  static NeuronDeviceAllocator allocator;
  return allocator;
}

c10::DataPtr NeuronDeviceAllocator::allocate(size_t nbytes) {
  return allocate_on(current_device(), nbytes);
}

c10::DataPtr NeuronDeviceAllocator::allocate_on(c10::DeviceIndex index, size_t nbytes,
                                                trnsim::Queue* current, bool deferred_peak) {
  const c10::Device dev(kNeuron, index);
  // Checks the device index (and refuses a forked child), so the cache may skip that; a queue
  // passed in was looked up the same way.
  trnsim::Queue& queue = current != nullptr ? *current : current_queue(index);
  auto& st = state();
  auto& cache = st.caches[index];
  trnsim::Device* dev_state = cache.device.load(std::memory_order_acquire);
  if (dev_state == nullptr) {
    dev_state = &system().device(index);
    cache.device.store(dev_state, std::memory_order_release);
  }
  // A failed device allocates nothing.
  simulator_call([&] { dev_state->health().check(index); });
  if (nbytes == 0) return {nullptr, nullptr, &free_block, dev};
  const size_t size = round_size(nbytes);
  Block* block = nullptr;
  {
    std::lock_guard<trnsim::SpinLock> lock(st.mutex);
    block = cache.take_cached(&queue, size);
    if (block == nullptr) {
      auto& hbm = dev_state->hbm();
      void* ptr = cache.try_reserve(hbm, size);
      if (ptr == nullptr) {
        // Give the cache back to HBM and try once more before failing.
        ++cache.stats.num_alloc_retries;
        cache.release_cached(hbm);
        ptr = cache.try_reserve(hbm, size);
        if (ptr == nullptr) raise_oom(index, nbytes, cache, hbm);
      }
      block = new Block{index, ptr, size, 0, &queue};
      cache.account_reserve(block, +1);
      ++cache.stats.num_device_alloc;
    }
    block->requested = nbytes;
    block->allocation = ++st.allocations;
    block->live = true;
    cache.account_use(block, +1, deferred_peak);
    st.live.insert(block->ptr, block);
  }
  // A block recorded on other streams waits for their work queued before it was freed, on the
  // simulated clock (its own stream's order already guarantees the rest). Nobody else can
  // reach the block until we return it.
  if (!block->other_streams.empty()) queue.wait_until(block->ready_ns);
  block->other_streams.clear();
  return {block->ptr, block->ptr, &free_block, dev};
}

std::vector<NeuronDeviceAllocator::SegmentInfo> NeuronDeviceAllocator::snapshot(
    c10::DeviceIndex index) {
  auto& cache = cache_of(resolve_device(index));
  std::lock_guard<trnsim::SpinLock> lock(state().mutex);
  std::vector<SegmentInfo> out;
  for (const auto& [address, head] : cache.segments) {
    SegmentInfo segment{address, 0, false, {}};
    for (const Block* b = head; b != nullptr; b = b->next) {
      segment.size += b->size;
      segment.blocks.push_back({reinterpret_cast<uintptr_t>(b->ptr), b->size,
                                b->live ? b->requested : 0, b->live});
    }
    // A segment is reserved for one request, so its size says which pool it serves.
    segment.small_pool = segment.size <= kSmallSize;
    out.push_back(std::move(segment));
  }
  return out;
}

void NeuronDeviceAllocator::settle_peaks(c10::DeviceIndex index) {
  auto& st = state();
  std::lock_guard<trnsim::SpinLock> lock(st.mutex);
  st.caches[index].settle_peaks();
}

c10::DeleterFnPtr NeuronDeviceAllocator::raw_deleter() const { return &free_block; }

bool NeuronDeviceAllocator::release_if_owned(void* ptr) { return release(ptr); }

uint64_t NeuronDeviceAllocator::allocation_id(const void* ptr) {
  auto& st = state();
  std::lock_guard<trnsim::SpinLock> lock(st.mutex);
  Block** found = st.live.find(const_cast<void*>(ptr));
  return found == nullptr ? 0 : (*found)->allocation;
}

bool NeuronDeviceAllocator::owns(const c10::DataPtr& ptr) {
  return ptr.get_deleter() == &free_block;
}

void NeuronDeviceAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  // Simulated HBM is host memory.
  std::memcpy(dest, src, count);
}

void NeuronDeviceAllocator::emptyCache(c10::MempoolId_t) {
  auto& st = state();
  for (c10::DeviceIndex i = 0; i < static_cast<c10::DeviceIndex>(st.caches.size()); ++i) {
    auto& d = device(i);
    if (!d.hbm_reserved()) continue;
    std::lock_guard<trnsim::SpinLock> lock(st.mutex);
    st.caches[i].release_cached(d.hbm());
  }
}

void NeuronDeviceAllocator::recordStream(const c10::DataPtr& ptr, c10::Stream stream) {
  if (ptr.get_deleter() != &free_block || ptr.get() == nullptr) return;
  auto& st = state();
  std::lock_guard<trnsim::SpinLock> lock(st.mutex);
  Block** found = st.live.find(ptr.get());
  if (found == nullptr) return;
  Block* block = *found;
  TORCH_CHECK(stream.device_type() == kNeuron && stream.device_index() == block->device,
              "record_stream: the stream is on ", stream.device(),
              " but the tensor is on neuron:", static_cast<int>(block->device));
  if (stream.id() == block->queue->id()) return;
  block->other_streams.push_back(stream.id());
}

c10::CachingDeviceAllocator::DeviceStats NeuronDeviceAllocator::getDeviceStats(
    c10::DeviceIndex index) {
  auto& cache = cache_of(resolve_device(index));
  std::lock_guard<trnsim::SpinLock> lock(state().mutex);
  return cache.stats;
}

void NeuronDeviceAllocator::resetAccumulatedStats(c10::DeviceIndex index) {
  auto& cache = cache_of(resolve_device(index));
  std::lock_guard<trnsim::SpinLock> lock(state().mutex);
  auto& s = cache.stats;
  for (auto* array : {&s.allocation, &s.segment, &s.active, &s.inactive_split,
                      &s.allocated_bytes, &s.reserved_bytes, &s.active_bytes,
                      &s.inactive_split_bytes, &s.requested_bytes}) {
    for (auto& stat : *array) stat.reset_accumulated();
  }
  s.num_alloc_retries = s.num_ooms = s.num_device_alloc = s.num_device_free = 0;
}

void NeuronDeviceAllocator::resetPeakStats(c10::DeviceIndex index) {
  auto& cache = cache_of(resolve_device(index));
  std::lock_guard<trnsim::SpinLock> lock(state().mutex);
  auto& s = cache.stats;
  for (auto* array : {&s.allocation, &s.segment, &s.active, &s.inactive_split,
                      &s.allocated_bytes, &s.reserved_bytes, &s.active_bytes,
                      &s.inactive_split_bytes, &s.requested_bytes}) {
    for (auto& stat : *array) stat.reset_peak();
  }
}

void NeuronDeviceAllocator::setMemoryFraction(double fraction, c10::DeviceIndex index) {
  TORCH_CHECK_VALUE(fraction >= 0.0 && fraction <= 1.0, "invalid memory fraction ", fraction,
                    ": pass a float from 0 to 1 (the share of the device's HBM this process may "
                    "use)");
  index = resolve_device(index);
  const auto capacity = device(index).hbm().capacity();
  auto& cache = cache_of(index);
  std::lock_guard<trnsim::SpinLock> lock(state().mutex);
  cache.fraction = fraction;
  // As CUDA's allocator does, the limit applies to what the caching allocator reserves.
  cache.reserve_limit = static_cast<size_t>(fraction * static_cast<double>(capacity));
}

double NeuronDeviceAllocator::getMemoryFraction(c10::DeviceIndex index) {
  auto& cache = cache_of(resolve_device(index));
  std::lock_guard<trnsim::SpinLock> lock(state().mutex);
  return cache.fraction;
}

std::pair<size_t, size_t> NeuronDeviceAllocator::getMemoryInfo(c10::DeviceIndex index) {
  auto& hbm = device(resolve_device(index)).hbm();
  return {hbm.free_bytes(), hbm.capacity()};
}

// Registered so that storage allocation and torch.accelerator.memory_* find it.
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &device_allocator())

}  // namespace torch_neuron

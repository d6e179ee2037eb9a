#include "trnsim/schedule.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <queue>
#include <utility>
#include <variant>

#include "trnsim/error.h"

namespace trnsim {
namespace {

constexpr int kComputeEngines = static_cast<int>(Engine::Dma);  // TensorE .. GpSimdE
constexpr uint64_t kOwnGroup = uint64_t{1} << 63;                // groups of one instruction

bool overlaps_nothing(const Region& r) { return r.end <= r.begin; }

}  // namespace

double ScheduleResult::utilization(Engine engine) const {
  return makespan_ns > 0 ? busy_ns[static_cast<int>(engine)] / makespan_ns : 0.0;
}

Schedule::Schedule(const InstanceSpec& instance, int dma_queues)
    : instance_(&instance), dma_queues_(dma_queues) {
  if (dma_queues < 1) throw Error("a schedule needs at least one DMA queue");
}

uint32_t Schedule::source(const std::string& tag) {
  auto [it, added] = source_ids_.emplace(tag, static_cast<uint32_t>(sources_.size()));
  if (added) sources_.push_back(tag);
  return it->second;
}

int Schedule::unit_of(const Instruction& instruction) const {
  if (instruction.engine == Engine::Dma) return kComputeEngines + instruction.queue;
  return static_cast<int>(instruction.engine);
}

void Schedule::split(Segments& segments, uint64_t at) {
  auto it = segments.upper_bound(at);
  if (it == segments.begin()) return;
  --it;
  if (it->first >= at || it->second.end <= at) return;
  Segment tail = it->second;
  it->second.end = at;
  segments.emplace(at, std::move(tail));
}

void Schedule::record_read(const Region& r, uint32_t index, uint64_t group,
                           std::vector<uint32_t>& deps) {
  Segments& segments = spaces_[r.space];
  split(segments, r.begin);
  split(segments, r.end);
  uint64_t pos = r.begin;
  auto it = segments.lower_bound(r.begin);
  while (pos < r.end) {
    if (it == segments.end() || it->first > pos) {
      // Never touched: a segment that only this instruction has read.
      const uint64_t gap_end = it == segments.end() ? r.end : std::min(r.end, it->first);
      it = segments.emplace_hint(it, pos, Segment{gap_end, 0, {}, {index}});
      pos = gap_end;
      ++it;
      continue;
    }
    Segment& s = it->second;
    if (s.writer_group != 0 && s.writer_group != group) {
      deps.insert(deps.end(), s.writers.begin(), s.writers.end());  // RAW
    }
    if (s.readers.empty() || s.readers.back() != index) s.readers.push_back(index);
    pos = s.end;
    ++it;
  }
}

void Schedule::record_write(const Region& r, uint32_t index, uint64_t group,
                            std::vector<uint32_t>& deps) {
  Segments& segments = spaces_[r.space];
  split(segments, r.begin);
  split(segments, r.end);
  uint64_t pos = r.begin;
  auto it = segments.lower_bound(r.begin);
  while (pos < r.end) {
    if (it == segments.end() || it->first > pos) {
      const uint64_t gap_end = it == segments.end() ? r.end : std::min(r.end, it->first);
      it = segments.emplace_hint(it, pos, Segment{gap_end, group, {index}, {}});
      pos = gap_end;
      ++it;
      continue;
    }
    Segment& s = it->second;
    // WAR: the readers since the last write (and older ones of this group, kept below).
    for (uint32_t reader : s.readers) {
      if (group_of_[reader] != group) deps.push_back(reader);
    }
    if (s.writer_group == group) {
      // Another instruction of the same group: the write is theirs together.
      if (s.writers.back() != index) s.writers.push_back(index);
    } else {
      if (s.writer_group != 0) deps.insert(deps.end(), s.writers.begin(), s.writers.end());  // WAW
      s.writer_group = group;
      s.writers.assign(1, index);
      // Readers of this group are not ordered before this write: a later writer waits for them.
      s.readers.erase(std::remove_if(s.readers.begin(), s.readers.end(),
                                     [&](uint32_t i) { return group_of_[i] != group; }),
                      s.readers.end());
    }
    pos = s.end;
    ++it;
  }
}

size_t Schedule::add(Instruction instruction) {
  if (instruction.engine == Engine::Dma &&
      (instruction.queue < 0 || instruction.queue >= dma_queues_)) {
    throw Error("DMA queue " + std::to_string(instruction.queue) + " out of range: the schedule has " +
                std::to_string(dma_queues_) + " queues");
  }
  if (!(instruction.duration_ns >= 0)) throw Error("an instruction has a negative or NaN duration");
  if (instruction.source >= sources_.size()) throw Error("unknown source tag id");
  if (instructions_.size() >= std::numeric_limits<uint32_t>::max()) {
    throw Error("a schedule holds at most 2^32 - 1 instructions");
  }
  const auto index = static_cast<uint32_t>(instructions_.size());
  const uint64_t group = instruction.group != 0 ? instruction.group : kOwnGroup + index;
  group_of_.push_back(group);
  std::vector<uint32_t> deps;
  for (const Region& r : instruction.reads) {
    if (!overlaps_nothing(r)) record_read(r, index, group, deps);
  }
  for (const Region& r : instruction.writes) {
    if (!overlaps_nothing(r)) record_write(r, index, group, deps);
  }
  std::sort(deps.begin(), deps.end());
  deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
  deps_.push_back(std::move(deps));
  instructions_.push_back(std::move(instruction));
  return index;
}

std::vector<size_t> Schedule::track(Engine engine, int queue) const {
  std::vector<size_t> out;
  for (size_t i = 0; i < instructions_.size(); ++i) {
    const Instruction& ins = instructions_[i];
    if (ins.engine == engine && (engine != Engine::Dma || ins.queue == queue)) out.push_back(i);
  }
  return out;
}

// Event by event: start what can start, then move to the next end (a fixed-duration
// instruction's, or the first shared transfer's to drain at the current share).
ScheduleResult Schedule::run() const {
  const size_t n = instructions_.size();
  const int units = kComputeEngines + dma_queues_;
  ScheduleResult result;
  result.times.resize(n);
  result.dma_queue_busy_ns.assign(dma_queues_, 0.0);

  std::vector<std::vector<uint32_t>> streams(units), dependents(n);
  std::vector<uint32_t> waiting(n);
  for (size_t i = 0; i < n; ++i) {
    streams[unit_of(instructions_[i])].push_back(static_cast<uint32_t>(i));
    ++result.instructions[static_cast<int>(instructions_[i].engine)];
    waiting[i] = static_cast<uint32_t>(deps_[i].size());
    for (uint32_t d : deps_[i]) dependents[d].push_back(static_cast<uint32_t>(i));
  }
  std::vector<size_t> head(units, 0);
  std::vector<bool> busy(units, false);
  using Timed = std::pair<double, uint32_t>;
  std::priority_queue<Timed, std::vector<Timed>, std::greater<Timed>> fixed;  // (end, index)
  struct Transfer {
    uint32_t index;
    double remaining;  // bytes
    double cap;        // bytes per ns (infinity: none)
    double rate = 0;   // bytes per ns now
  };
  std::vector<Transfer> shared;
  const double bandwidth = instance_->core_stream_gbps();  // bytes per ns
  // The bandwidth shared equally by the transfers in flight, none above its cap: the capped
  // ones, least first, take their cap when it is under the equal share of what is left.
  std::vector<Transfer*> by_cap;  // reused at every event: run()'s loop is hot
  auto set_rates = [&] {
    by_cap.clear();
    for (Transfer& t : shared) by_cap.push_back(&t);
    std::sort(by_cap.begin(), by_cap.end(),
              [](const Transfer* a, const Transfer* b) { return a->cap < b->cap; });
    double left = bandwidth;
    for (size_t k = 0; k < by_cap.size(); ++k) {
      const double equal = left / static_cast<double>(by_cap.size() - k);
      by_cap[k]->rate = std::min(by_cap[k]->cap, equal);
      left -= by_cap[k]->rate;
    }
  };
  double now = 0;
  size_t finished = 0;
  uint8_t ports_held = 0;

  auto finish = [&](uint32_t i) {
    result.times[i].end_ns = now;
    busy[unit_of(instructions_[i])] = false;
    ports_held &= static_cast<uint8_t>(~instructions_[i].ports);
    ++head[unit_of(instructions_[i])];
    for (uint32_t d : dependents[i]) --waiting[d];
    ++finished;
  };
  std::vector<uint32_t> ready;  // reused at every event
  while (finished < n) {
    // Start every unit's next instruction that is ready, in program order (when two wait for
    // one port, the earlier takes it); zero-time ones finish at once.
    for (bool started = true; started;) {
      started = false;
      ready.clear();
      for (int u = 0; u < units; ++u) {
        if (busy[u] || head[u] >= streams[u].size()) continue;
        const uint32_t i = streams[u][head[u]];
        if (waiting[i] == 0) ready.push_back(i);
      }
      std::sort(ready.begin(), ready.end());
      for (uint32_t i : ready) {
        const Instruction& ins = instructions_[i];
        if (ins.ports & ports_held) continue;
        const int u = unit_of(ins);
        result.times[i].start_ns = now;
        busy[u] = true;
        ports_held |= ins.ports;
        started = true;
        if (ins.engine == Engine::Dma && ins.bytes > 0) {
          const double cap = ins.max_rate > 0 ? ins.max_rate
                                              : std::numeric_limits<double>::infinity();
          shared.push_back({i, static_cast<double>(ins.bytes), cap});
        } else if (ins.duration_ns > 0) {
          fixed.emplace(now + ins.duration_ns, i);
        } else {
          finish(i);
        }
      }
    }
    if (finished == n) break;
    // The next event: a fixed-duration end, or the first shared transfer to drain.
    set_rates();
    double drain = std::numeric_limits<double>::infinity();  // ns until the first is done
    for (const Transfer& t : shared) drain = std::min(drain, t.remaining / t.rate);
    const double fixed_next = fixed.empty() ? std::numeric_limits<double>::infinity()
                                            : fixed.top().first;
    if (shared.empty() && fixed.empty()) {
      throw Error("schedule deadlock: an instruction waits for one that never runs");
    }
    const bool transfer_first = !shared.empty() && now + drain <= fixed_next;
    const double step = transfer_first ? drain : fixed_next - now;
    for (Transfer& t : shared) t.remaining -= step * t.rate;
    now = transfer_first ? now + drain : fixed_next;
    while (!fixed.empty() && fixed.top().first <= now) {
      const uint32_t i = fixed.top().second;
      fixed.pop();
      finish(i);
    }
    // The transfers that drained in this step (the first, and any within rounding of it)
    // finish now, whatever rounding left of them: the clock may not resolve their remainder.
    for (size_t k = 0; k < shared.size();) {
      const double moved = step * shared[k].rate;  // bytes this step
      const double slack = transfer_first ? 1e-9 * std::max(moved, 1.0)
                                          : 1e-9 * std::max(1.0, shared[k].rate);
      if (shared[k].remaining <= slack) {
        finish(shared[k].index);
        shared[k] = shared.back();
        shared.pop_back();
      } else {
        ++k;
      }
    }
  }

  // Busy time per engine and queue; DMA as a whole: the union of its queues' intervals.
  std::vector<std::pair<double, double>> dma_intervals;
  for (size_t i = 0; i < n; ++i) {
    const Instruction& ins = instructions_[i];
    const InstructionTime& t = result.times[i];
    result.makespan_ns = std::max(result.makespan_ns, t.end_ns);
    if (ins.engine == Engine::Dma) {
      result.dma_queue_busy_ns[ins.queue] += t.end_ns - t.start_ns;
      if (t.end_ns > t.start_ns) dma_intervals.emplace_back(t.start_ns, t.end_ns);
    } else {
      result.busy_ns[static_cast<int>(ins.engine)] += t.end_ns - t.start_ns;
    }
  }
  std::sort(dma_intervals.begin(), dma_intervals.end());
  double covered_to = 0, dma_busy = 0;
  for (const auto& [start, end] : dma_intervals) {
    if (end <= covered_to) continue;
    dma_busy += end - std::max(start, covered_to);
    covered_to = end;
  }
  result.busy_ns[static_cast<int>(Engine::Dma)] = dma_busy;
  return result;
}

namespace {

// Slice `i` of `tiles` of a region (a region covering everything is not sliced).
Region slice(const Region& r, int i, int tiles) {
  if (r.end == UINT64_MAX || tiles <= 1) return r;
  const unsigned __int128 length = r.end - r.begin;
  return {r.space, r.begin + static_cast<uint64_t>(length * i / tiles),
          r.begin + static_cast<uint64_t>(length * (i + 1) / tiles)};
}

bool is_compute(const WorkTime& time) {
  const OpCost& cost = time.cost;
  if (cost.engine_ns[static_cast<int>(Engine::Dma)] > 0) return false;
  if (cost.hbm_ns > 0) return true;
  for (int e = 0; e < kComputeEngines; ++e) {
    if (cost.engine_ns[e] > 0) return true;
  }
  return false;
}

uint64_t region_bytes(const Region& r) { return r.end > r.begin ? r.end - r.begin : 0; }

}  // namespace

size_t add_work(Schedule& schedule, const Work& work, const OpRegions& regions, int tiles,
                uint32_t source) {
  return add_work(schedule, time_of(schedule.instance(), work), regions, tiles, source);
}

size_t add_work(Schedule& schedule, const WorkTime& time, const OpRegions& regions, int tiles,
                uint32_t source) {
  size_t added = 0;
  if (!is_compute(time)) {
    Instruction transfer;
    transfer.engine = Engine::Dma;
    transfer.queue = schedule.next_dma_queue();
    transfer.duration_ns = time.duration_ns;
    for (const auto* list : {&regions.tiled_reads, &regions.whole_reads,
                             &regions.sbuf_tiled_reads, &regions.sbuf_whole_reads}) {
      transfer.reads.insert(transfer.reads.end(), list->begin(), list->end());
    }
    for (const auto* list : {&regions.writes, &regions.whole_writes, &regions.sbuf_writes,
                             &regions.sbuf_whole_writes, &regions.completed_writes}) {
      transfer.writes.insert(transfer.writes.end(), list->begin(), list->end());
    }
    transfer.source = source;
    schedule.add(std::move(transfer));
    return 1;
  }
  tiles = std::max(tiles, 1);
  if (!regions.tile_scratch.empty() && regions.tile_scratch.size() != static_cast<size_t>(tiles)) {
    throw Error("add_work: tile_scratch needs one region per tile");
  }
  const OpCost& cost = time.cost;
  for (int i = 0; i < tiles; ++i) {
    const uint64_t group = schedule.new_group();
    std::vector<Region> reads, writes;
    for (const Region& r : regions.tiled_reads) reads.push_back(slice(r, i, tiles));
    reads.insert(reads.end(), regions.whole_reads.begin(), regions.whole_reads.end());
    for (const Region& r : regions.writes) writes.push_back(slice(r, i, tiles));
    writes.insert(writes.end(), regions.whole_writes.begin(), regions.whole_writes.end());
    if (!regions.tile_scratch.empty()) writes.push_back(regions.tile_scratch[i]);
    std::vector<Region> engine_reads = reads, engine_writes = writes;
    if (i == tiles - 1) {
      engine_writes.insert(engine_writes.end(), regions.completed_writes.begin(),
                           regions.completed_writes.end());
    }
    for (const Region& r : regions.sbuf_tiled_reads) engine_reads.push_back(slice(r, i, tiles));
    engine_reads.insert(engine_reads.end(), regions.sbuf_whole_reads.begin(),
                        regions.sbuf_whole_reads.end());
    for (const Region& r : regions.sbuf_writes) engine_writes.push_back(slice(r, i, tiles));
    engine_writes.insert(engine_writes.end(), regions.sbuf_whole_writes.begin(),
                         regions.sbuf_whole_writes.end());
    for (int e = 0; e < kComputeEngines; ++e) {
      if (cost.engine_ns[e] <= 0) continue;
      Instruction ins;
      ins.engine = static_cast<Engine>(e);
      ins.duration_ns = cost.engine_ns[e] / tiles;
      ins.reads = engine_reads;
      ins.writes = engine_writes;
      ins.source = source;
      ins.group = group;
      schedule.add(std::move(ins));
      ++added;
    }
    const auto total = static_cast<unsigned __int128>(cost.bytes);
    const uint64_t bytes = static_cast<uint64_t>(total * (i + 1) / tiles) -
                           static_cast<uint64_t>(total * i / tiles);
    if (bytes > 0) {
      Instruction dma;
      dma.engine = Engine::Dma;
      dma.queue = schedule.next_dma_queue();
      dma.bytes = bytes;
      dma.reads = std::move(reads);
      dma.writes = std::move(writes);
      dma.source = source;
      dma.group = group;
      schedule.add(std::move(dma));
      ++added;
    }
  }
  return added;
}

OpProgram::OpProgram(const InstanceSpec& instance)
    : instance_(&instance),
      sbuf_buffers_(std::max<uint64_t>(
          1, instance.chip->sbuf_bytes_per_core *
                 static_cast<uint64_t>(instance.physical_cores_per_logical()) /
                 (2 * kProgramTileBytes))),
      resident_capacity_(instance.chip->sbuf_bytes_per_core *
                         static_cast<uint64_t>(instance.physical_cores_per_logical()) / 2),
      schedule_(instance, instance.chip->dma_engines_per_core *
                              instance.physical_cores_per_logical()) {}

void OpProgram::add_op(const WorkTime& time, const std::vector<Region>* inputs,
                       const std::vector<Region>* outputs, const std::string& source) {
  PendingOp op;
  op.time = time;
  op.known = inputs != nullptr && outputs != nullptr;
  if (op.known) {
    op.inputs = *inputs;
    op.outputs = *outputs;
  }
  op.source = source;
  charged_bytes_ += time.cost.bytes;
  pending_.push_back(std::move(op));
  built_ = false;
}

void OpProgram::keep_in_hbm(const std::vector<Region>& regions, Kept role) {
  kept_.insert(kept_.end(), regions.begin(), regions.end());
  if (role == Kept::Input) inputs_.insert(inputs_.end(), regions.begin(), regions.end());
  kept_known_ = true;
  built_ = false;
}

Schedule& OpProgram::schedule() {
  build();
  return schedule_;
}

const Schedule& OpProgram::schedule() const {
  build();
  return schedule_;
}

uint64_t OpProgram::sbuf_saved_bytes() const {
  build();
  return saved_bytes_;
}

namespace {

uint64_t overlap_bytes(const Region& a, const Region& b) {
  if (a.space != b.space) return 0;
  const uint64_t begin = std::max(a.begin, b.begin), end = std::min(a.end, b.end);
  return end > begin ? end - begin : 0;
}

bool has_engine_work(const WorkTime& time) {
  for (int e = 0; e < kComputeEngines; ++e) {
    if (time.cost.engine_ns[e] > 0) return true;
  }
  return false;
}

}  // namespace

std::vector<OpProgram::SbufUse> OpProgram::sbuf_use() const {
  // Pass 1: the tensors the program writes (Note [Intermediates in SBUF]): who writes each,
  // which ops read how many of its bytes, and the last op that touches it.
  struct Tensor {
    Region region;
    size_t writer;
    size_t last_use;
    bool kept;
    bool input;  // part of a program input, updated in place
    bool resident = false;
  };
  struct Read {
    size_t tensor;
    uint64_t bytes;
    size_t input;  // which of the op's inputs
  };
  const size_t n = pending_.size();
  std::vector<Tensor> tensors;
  std::vector<std::vector<Read>> reads(n);
  std::vector<std::vector<size_t>> written(n);
  std::vector<size_t> live;  // tensors not yet overwritten
  for (size_t i = 0; i < n; ++i) {
    const PendingOp& op = pending_[i];
    if (!op.known) {  // may read anything from HBM, and overwrite it
      for (size_t t : live) {
        tensors[t].last_use = i;
        tensors[t].kept = true;
      }
      live.clear();
      continue;
    }
    for (size_t j = 0; j < op.inputs.size(); ++j) {
      for (size_t t : live) {
        const uint64_t b = overlap_bytes(op.inputs[j], tensors[t].region);
        if (b == 0) continue;
        reads[i].push_back({t, b, j});
        tensors[t].last_use = i;
      }
    }
    written[i].assign(op.outputs.size(), SIZE_MAX);
    for (size_t j = 0; j < op.outputs.size(); ++j) {
      const Region& w = op.outputs[j];
      if (w.end <= w.begin) continue;
      live.erase(std::remove_if(live.begin(), live.end(),
                                [&](size_t t) { return overlap_bytes(w, tensors[t].region) > 0; }),
                 live.end());
      const auto overlaps = [&](const std::vector<Region>& list) {
        return std::any_of(list.begin(), list.end(),
                           [&](const Region& k) { return overlap_bytes(w, k) > 0; });
      };
      const bool kept = !kept_known_ || overlaps(kept_);
      written[i][j] = tensors.size();
      live.push_back(tensors.size());
      tensors.push_back({w, i, i, kept, overlaps(inputs_)});
    }
  }
  // Pass 2: in program order, keep what fits beside the tensors resident then.
  std::vector<std::vector<size_t>> ends(n);
  for (size_t t = 0; t < tensors.size(); ++t) ends[tensors[t].last_use].push_back(t);
  uint64_t used = 0;
  std::vector<SbufUse> use(n);
  for (size_t i = 0; i < n; ++i) {
    const PendingOp& op = pending_[i];
    use[i].output_in_sbuf.assign(op.outputs.size(), false);
    for (size_t j = 0; j < written[i].size(); ++j) {
      if (written[i][j] == SIZE_MAX) continue;
      Tensor& tensor = tensors[written[i][j]];
      const uint64_t size = tensor.region.end - tensor.region.begin;
      if (used + size > resident_capacity_ || tensor.input) continue;
      tensor.resident = true;
      used += size;
      if (!tensor.kept) {
        use[i].saved += size;
        use[i].output_in_sbuf[j] = true;
      }
    }
    std::vector<uint64_t> from_sbuf(op.inputs.size(), 0);
    for (const Read& r : reads[i]) {
      if (!tensors[r.tensor].resident) continue;
      use[i].saved += r.bytes;
      from_sbuf[r.input] += r.bytes;
    }
    use[i].input_in_sbuf.resize(op.inputs.size());
    for (size_t j = 0; j < op.inputs.size(); ++j) {
      use[i].input_in_sbuf[j] = from_sbuf[j] > 0 && from_sbuf[j] >= region_bytes(op.inputs[j]);
    }
    for (size_t t : ends[i]) {
      if (tensors[t].resident) used -= tensors[t].region.end - tensors[t].region.begin;
    }
  }
  return use;
}

void OpProgram::build() const {
  if (built_) return;
  schedule_ = Schedule(*instance_, schedule_.dma_queues());
  next_buffer_ = 0;
  saved_bytes_ = 0;
  std::vector<SbufUse> use = sbuf_use();
  first_instruction_.clear();
  for (size_t i = 0; i < pending_.size(); ++i) {
    first_instruction_.push_back(schedule_.size());
    place(pending_[i], std::move(use[i]));
  }
  first_instruction_.push_back(schedule_.size());
  built_ = true;
}

std::vector<OpTiming> OpProgram::op_timings(const ScheduleResult& result) const {
  build();
  if (result.times.size() != schedule_.size()) {
    throw Error("op_timings() needs a run of this program's current schedule (" +
                std::to_string(schedule_.size()) + " instructions), got one of " +
                std::to_string(result.times.size()));
  }
  std::vector<OpTiming> out(pending_.size());
  for (size_t op = 0; op < pending_.size(); ++op) {
    OpTiming& t = out[op];
    t.source = pending_[op].source;
    const size_t first = first_instruction_[op], last = first_instruction_[op + 1];
    std::vector<InstructionTime> transfers;
    for (size_t i = first; i < last; ++i) {
      const Instruction& in = schedule_.instruction(i);
      const InstructionTime& time = result.times[i];
      t.start_ns = i == first ? time.start_ns : std::min(t.start_ns, time.start_ns);
      t.end_ns = std::max(t.end_ns, time.end_ns);
      if (in.engine == Engine::Dma) {
        transfers.push_back(time);
        t.hbm_bytes += in.bytes;
      } else {
        t.busy_ns[static_cast<int>(in.engine)] += time.end_ns - time.start_ns;
      }
    }
    // DMA: the time at least one of its transfers runs, as ScheduleResult counts it.
    std::sort(transfers.begin(), transfers.end(),
              [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
    double covered_to = 0;
    for (const InstructionTime& x : transfers) {
      const double from = std::max(x.start_ns, covered_to);
      if (x.end_ns > from) t.busy_ns[static_cast<int>(Engine::Dma)] += x.end_ns - from;
      covered_to = std::max(covered_to, x.end_ns);
    }
    // A copy, host round trip or collective is one fixed-time transfer of what it moves.
    if (!is_compute(pending_[op].time)) t.hbm_bytes = pending_[op].time.cost.bytes;
  }
  return out;
}

void OpProgram::place(const PendingOp& op, SbufUse use) const {
  const uint32_t tag = schedule_.source(op.source);
  OpRegions regions;
  if (!op.known) {
    regions.whole_reads = {kEverything};
    regions.writes = {kEverything};
    add_work(schedule_, op.time, regions, 1, tag);
    return;
  }
  WorkTime time = op.time;
  const bool in_sbuf = has_engine_work(time);  // a transfer moves what it moves
  if (in_sbuf && use.saved > 0) {
    const uint64_t saved = std::min<uint64_t>(use.saved, time.cost.bytes);
    time.cost.set_bytes(*instance_, time.cost.bytes - saved);
    saved_bytes_ += saved;
  }
  const std::vector<Region>* inputs = &op.inputs;
  const std::vector<Region>* outputs = &op.outputs;
  const auto is_output = [&](const Region& r) {
    return std::any_of(outputs->begin(), outputs->end(), [&](const Region& o) {
      return o.space == r.space && o.begin == r.begin && o.end == r.end;
    });
  };
  uint64_t largest = 0;
  for (const Region& r : *outputs) largest = std::max(largest, region_bytes(r));
  // TensorE work streams its largest operand when that is larger than its result (a weight
  // against a few rows of activations, a KV cache against one query): then the operand is
  // cut into the tiles, and the result is complete after the last (Note [Ops as tiles]).
  const bool tensor_engine = time.cost.engine_ns[static_cast<int>(Engine::Tensor)] > 0;
  uint64_t streamed = 0;
  if (tensor_engine) {
    for (const Region& r : *inputs) {
      if (!is_output(r)) streamed = std::max(streamed, region_bytes(r));
    }
  }
  const bool by_operand = streamed > largest;
  const uint64_t basis = by_operand ? streamed : largest;
  const int tiles = static_cast<int>(std::clamp<uint64_t>(
      (basis + kProgramTileBytes - 1) / kProgramTileBytes, 1, kMaxOpTiles));
  for (size_t j = 0; j < inputs->size(); ++j) {
    const Region& r = (*inputs)[j];
    // An input that is also an output (an out= argument, an in-place operand) is ordered by
    // the write already: a write waits for every earlier reader and writer.
    if (is_output(r)) continue;
    const bool tiled = tiles > 1 && region_bytes(r) >= basis && (!tensor_engine || by_operand);
    const bool sbuf = in_sbuf && use.input_in_sbuf[j];
    (tiled ? (sbuf ? regions.sbuf_tiled_reads : regions.tiled_reads)
           : (sbuf ? regions.sbuf_whole_reads : regions.whole_reads))
        .push_back(r);
  }
  for (size_t j = 0; j < outputs->size(); ++j) {
    const Region& r = (*outputs)[j];
    const bool tiled = region_bytes(r) == largest || tiles == 1;
    const bool sbuf = in_sbuf && use.output_in_sbuf[j];
    if (by_operand && tiled && tiles > 1) regions.completed_writes.push_back(r);
    (tiled ? (sbuf ? regions.sbuf_writes : regions.writes)
           : (sbuf ? regions.sbuf_whole_writes : regions.whole_writes))
        .push_back(r);
  }
  if (is_compute(time)) {
    for (int i = 0; i < tiles; ++i) {
      const uint64_t b = (next_buffer_++ % sbuf_buffers_) * kProgramTileBytes;
      regions.tile_scratch.push_back({kSbufSpace, b, b + kProgramTileBytes});
    }
  }
  add_work(schedule_, time, regions, tiles, tag);
}

}  // namespace trnsim

#include "trnsim/kernel_schedule.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "trnsim/error.h"

namespace trnsim {
namespace {

// Address spaces: 0 is HBM; on-chip spaces start here, 8 per program (SBUF and PSUM x 4
// quadrants).
constexpr uint32_t kFirstOnChipSpace = 16;
constexpr uint32_t kQuadrants = 128 / kPartitionQuadrant;

struct ProgramSchedule {
  Schedule schedule;
  std::vector<uint32_t> kernel_index;  // per schedule instruction
  ProgramSchedule(const InstanceSpec& core, int queues) : schedule(core, queues) {}
};

// The schedule instruction that released `i`: the latest-ending of its dependencies and its
// unit's previous instruction, if it ended when `i` started.
bool releaser(const Schedule& s, const ScheduleResult& r, const std::vector<int64_t>& previous,
              size_t i, size_t& out) {
  const double start = r.times[i].start_ns;
  double best = -1;
  auto consider = [&](size_t j) {
    if (r.times[j].end_ns > best) {
      best = r.times[j].end_ns;
      out = j;
    }
  };
  for (uint32_t d : s.dependencies(i)) consider(d);
  if (previous[i] >= 0) consider(static_cast<size_t>(previous[i]));
  return best >= 0 && std::abs(best - start) <= 1e-6 * std::max(1.0, start);
}

bool overlap(const KernelRegion& a, const KernelRegion& b) {
  if (a.memory != b.memory || a.begin >= b.end || b.begin >= a.end) return false;
  if (a.memory == KernelMemory::Hbm) return a.buffer == b.buffer;
  return a.p0 < b.p1 && b.p0 < a.p1;
}

// Whether `ki` reads what `previous` writes (Note [Dependent instruction overhead]).
bool reads_output_of(const KernelInstruction& ki, const KernelInstruction& previous) {
  for (const KernelRegion& r : ki.reads) {
    for (const KernelRegion& w : previous.writes) {
      if (overlap(r, w)) return true;
    }
  }
  return false;
}

// The shared on-chip RAM ports (Note [Shared SBUF and PSUM ports]), one bit each.
constexpr uint8_t kSbufPort = 1, kPsumPort = 2;
constexpr int kPorts = 2;

bool touches(const KernelInstruction& ki, KernelMemory memory) {
  for (const auto* regions : {&ki.reads, &ki.writes}) {
    for (const KernelRegion& r : *regions) {
      if (r.memory == memory) return true;
    }
  }
  return false;
}

// The shared ports `ki` holds while it runs on `engine`.
uint8_t ports_of(const InstanceSpec& core, Engine engine, const KernelInstruction& ki) {
  if (!core.chip->shared_ram_ports) return 0;
  uint8_t ports = 0;
  if ((engine == Engine::Vector || engine == Engine::GpSimd) && touches(ki, KernelMemory::Sbuf)) {
    ports |= kSbufPort;
  }
  if ((engine == Engine::Vector || engine == Engine::Scalar) && touches(ki, KernelMemory::Psum)) {
    ports |= kPsumPort;
  }
  return ports;
}

// A program's work so far per engine and per shared port, in program order: what the compiler
// weighs when it places an instruction (Note [Engine choice]).
struct Workload {
  std::array<double, kEngineCount> engine{};
  std::array<double, kPorts> port{};

  double finish(Engine e, uint8_t ports, double duration) const {
    double start = engine[static_cast<int>(e)];
    for (int p = 0; p < kPorts; ++p) {
      if (ports & (1 << p)) start = std::max(start, port[p]);
    }
    return start + duration;
  }
  void add(Engine e, uint8_t ports, double duration) {
    engine[static_cast<int>(e)] += duration;
    for (int p = 0; p < kPorts; ++p) {
      if (ports & (1 << p)) port[p] += duration;
    }
  }
};

// The engine `ki` runs on: isa.engine, or the best of its choices (Note [Engine choice]).
Engine place(const InstanceSpec& core, const KernelInstruction& ki, const Workload& work) {
  if (ki.engine_choices == 0) return ki.isa.engine;
  if (!(ki.engine_choices & engine_bit(ki.isa.engine))) {
    throw Error("an instruction's engine must be one of its engine choices");
  }
  IsaInstruction isa = ki.isa;
  const double own = work.finish(isa.engine, ports_of(core, isa.engine, ki),
                                 isa_duration_ns(core, isa));
  Engine best = ki.isa.engine;
  double best_finish = own;
  for (int e = 0; e < kEngineCount; ++e) {
    const auto engine = static_cast<Engine>(e);
    if (!(ki.engine_choices & engine_bit(engine)) || engine == ki.isa.engine) continue;
    if (engine == Engine::Dma) throw Error("a DMA queue is not an engine choice");
    isa.engine = engine;
    const double finish = work.finish(engine, ports_of(core, engine, ki),
                                      isa_duration_ns(core, isa));
    if (finish < best_finish) {
      best_finish = finish;
      best = engine;
    }
  }
  return best;
}

}  // namespace

double KernelTiming::utilization(Engine engine) const {
  const double span = makespan_ns * programs;
  return span > 0 ? busy_ns[static_cast<int>(engine)] / span : 0.0;
}

InstanceSpec physical_core(const InstanceSpec& instance) {
  InstanceSpec core = instance;
  core.logical_cores_per_chip = instance.chip->physical_cores;
  return core;
}

InstanceSpec physical_core(const ChipSpec& chip) {
  InstanceSpec one_chip;
  one_chip.name = chip.name;
  one_chip.chip = &chip;
  one_chip.chips = 1;
  return physical_core(one_chip);
}

void kernel_regions(const KernelRegion& region, int program, std::vector<Region>& out) {
  if (region.end <= region.begin) return;
  if (region.memory == KernelMemory::Hbm) {
    const uint64_t base = region.buffer << 40;
    out.push_back({0, base + region.begin, base + region.end});
    return;
  }
  if (region.p0 < 0 || region.p1 > 128 || region.p1 <= region.p0) {
    throw Error("an on-chip region spans partitions [" + std::to_string(region.p0) + ", " +
                std::to_string(region.p1) + "): they must lie within [0, 128)");
  }
  const uint32_t base = kFirstOnChipSpace + static_cast<uint32_t>(program) * 2 * kQuadrants +
                        (region.memory == KernelMemory::Psum ? kQuadrants : 0);
  for (int32_t q = region.p0 / kPartitionQuadrant;
       q * kPartitionQuadrant < region.p1; ++q) {
    out.push_back({base + static_cast<uint32_t>(q), region.begin, region.end});
  }
}

double dma_transfer_cap(const InstanceSpec& core, const KernelInstruction& ki) {
  int32_t p0 = kEngineLanes, p1 = 0;
  for (const auto* regions : {&ki.reads, &ki.writes}) {
    for (const KernelRegion& r : *regions) {
      if (r.memory == KernelMemory::Hbm) continue;
      p0 = std::min(p0, r.p0);
      p1 = std::max(p1, r.p1);
    }
  }
  if (p1 <= p0) return 0;  // HBM to HBM: every engine
  const int32_t per_engine = static_cast<int32_t>(kEngineLanes) / core.chip->dma_engines_per_core;
  const int32_t engines = (p1 - 1) / per_engine - p0 / per_engine + 1;
  return engines * core.chip->dma_engine_gbps;
}

namespace {

// One phase of a kernel (Note [Core barriers]): no CoreBarrier instructions.
KernelTiming schedule_phase(const InstanceSpec& core, int dma_queues, int programs,
                            const std::vector<KernelInstruction>& instructions) {
  std::vector<ProgramSchedule> cores;
  cores.reserve(programs);
  for (int p = 0; p < programs; ++p) cores.emplace_back(core, dma_queues);
  // Per program and engine, the last compute instruction issued (an index into instructions).
  std::vector<std::array<int64_t, kEngineCount>> last_on_engine(programs);
  for (auto& last : last_on_engine) last.fill(-1);
  std::vector<Workload> work(programs);
  std::vector<Engine> engines(instructions.size());

  for (size_t k = 0; k < instructions.size(); ++k) {
    const KernelInstruction& ki = instructions[k];
    if (ki.program < 0 || ki.program >= programs) {
      throw Error("instruction " + std::to_string(k) + " belongs to program " +
                  std::to_string(ki.program) + " of a kernel of " + std::to_string(programs));
    }
    ProgramSchedule& ps = cores[ki.program];
    Instruction ins;
    ins.engine = ki.isa.engine;
    for (const KernelRegion& r : ki.reads) kernel_regions(r, ki.program, ins.reads);
    for (const KernelRegion& r : ki.writes) kernel_regions(r, ki.program, ins.writes);
    if (ki.isa.kind == IsaKind::DmaCopy) {
      if (ki.isa.engine != Engine::Dma) throw Error("dma_copy runs on a DMA queue");
      ins.queue = ki.queue;
      Instruction latency;
      latency.engine = Engine::Dma;
      latency.queue = ki.queue;
      latency.duration_ns = kDmaFixedLatencyNs;
      latency.reads = ins.reads;  // it starts once what it moves is ready
      ps.schedule.add(std::move(latency));
      ps.kernel_index.push_back(static_cast<uint32_t>(k));
      ins.bytes = isa_dma_bytes(ki.isa);
      ins.max_rate = dma_transfer_cap(core, ki);
    } else {
      IsaInstruction isa = ki.isa;
      isa.engine = place(core, ki, work[ki.program]);
      ins.engine = isa.engine;
      ins.duration_ns = isa_duration_ns(core, isa);
      ins.ports = ports_of(core, isa.engine, ki);
      int64_t& last = last_on_engine[ki.program][static_cast<int>(isa.engine)];
      const bool pipelined = isa.engine == Engine::Vector || isa.engine == Engine::Scalar;
      if (pipelined && last >= 0 && reads_output_of(ki, instructions[last])) {
        ins.duration_ns += kDependentIssueOverheadCycles / engine_ghz(core, isa.engine);
      }
      last = static_cast<int64_t>(k);
      work[ki.program].add(isa.engine, ins.ports, ins.duration_ns);
    }
    engines[k] = ins.engine;
    ps.schedule.add(std::move(ins));
    ps.kernel_index.push_back(static_cast<uint32_t>(k));
  }

  KernelTiming timing;
  timing.programs = programs;
  timing.dma_queue_busy_ns.assign(dma_queues, 0.0);
  timing.times.assign(instructions.size(), InstructionTime{-1, 0});
  std::vector<uint32_t> path;
  double last_end = -1;
  for (ProgramSchedule& ps : cores) {
    const Schedule& s = ps.schedule;
    const ScheduleResult r = s.run();
    timing.makespan_ns = std::max(timing.makespan_ns, r.makespan_ns);
    for (int e = 0; e < kEngineCount; ++e) timing.busy_ns[e] += r.busy_ns[e];
    for (int q = 0; q < dma_queues; ++q) timing.dma_queue_busy_ns[q] += r.dma_queue_busy_ns[q];
    for (size_t i = 0; i < s.size(); ++i) {
      InstructionTime& t = timing.times[ps.kernel_index[i]];
      if (t.start_ns < 0) t.start_ns = r.times[i].start_ns;
      t.end_ns = r.times[i].end_ns;
    }
    if (s.size() == 0 || r.makespan_ns <= last_end) continue;
    // This program ends last: its critical path is the kernel's.
    last_end = r.makespan_ns;
    std::vector<int64_t> previous(s.size(), -1);
    {
      std::vector<int64_t> last_of_unit(kEngineCount + dma_queues, -1);
      for (size_t i = 0; i < s.size(); ++i) {
        const Instruction& ins = s.instruction(i);
        const int unit = ins.engine == Engine::Dma ? kEngineCount + ins.queue
                                                   : static_cast<int>(ins.engine);
        previous[i] = last_of_unit[unit];
        last_of_unit[unit] = static_cast<int64_t>(i);
      }
    }
    size_t i = 0;
    for (size_t j = 1; j < s.size(); ++j) {
      if (r.times[j].end_ns > r.times[i].end_ns) i = j;
    }
    path.clear();
    for (;;) {
      const uint32_t k = ps.kernel_index[i];
      if (path.empty() || path.back() != k) path.push_back(k);
      size_t next = 0;
      if (!releaser(s, r, previous, i, next)) break;
      i = next;
    }
    std::reverse(path.begin(), path.end());
  }
  timing.critical_path = std::move(path);
  for (Engine e : engines) ++timing.instructions[static_cast<int>(e)];
  timing.engines = std::move(engines);
  return timing;
}

}  // namespace

KernelTiming schedule_kernel(const InstanceSpec& core, int dma_queues, int programs,
                             const std::vector<KernelInstruction>& instructions) {
  if (programs < 1) throw Error("a kernel runs at least one program");
  bool barriers = false;
  for (const KernelInstruction& ki : instructions) {
    barriers = barriers || ki.isa.kind == IsaKind::CoreBarrier;
  }
  if (!barriers) return schedule_phase(core, dma_queues, programs, instructions);

  // Note [Core barriers]: phase by phase, each starting when the previous one has ended.
  KernelTiming total;
  total.programs = programs;
  total.dma_queue_busy_ns.assign(dma_queues, 0.0);
  total.times.assign(instructions.size(), InstructionTime{});
  total.engines.assign(instructions.size(), Engine::GpSimd);
  std::vector<KernelInstruction> phase;
  std::vector<uint32_t> index;  // phase position -> kernel instruction
  auto close_phase = [&] {
    if (phase.empty()) return;
    const KernelTiming t = schedule_phase(core, dma_queues, programs, phase);
    for (size_t i = 0; i < phase.size(); ++i) {
      total.times[index[i]] = {total.makespan_ns + t.times[i].start_ns,
                               total.makespan_ns + t.times[i].end_ns};
      total.engines[index[i]] = t.engines[i];
    }
    for (int e = 0; e < kEngineCount; ++e) {
      total.busy_ns[e] += t.busy_ns[e];
      total.instructions[e] += t.instructions[e];
    }
    for (int q = 0; q < dma_queues; ++q) total.dma_queue_busy_ns[q] += t.dma_queue_busy_ns[q];
    for (uint32_t k : t.critical_path) total.critical_path.push_back(index[k]);
    total.makespan_ns += t.makespan_ns;
    phase.clear();
    index.clear();
  };
  for (size_t k = 0; k < instructions.size(); ++k) {
    const KernelInstruction& ki = instructions[k];
    if (ki.program < 0 || ki.program >= programs) {
      throw Error("instruction " + std::to_string(k) + " belongs to program " +
                  std::to_string(ki.program) + " of a kernel of " + std::to_string(programs));
    }
    if (ki.isa.kind != IsaKind::CoreBarrier) {
      phase.push_back(ki);
      index.push_back(static_cast<uint32_t>(k));
      continue;
    }
    close_phase();
    total.times[k] = {total.makespan_ns, total.makespan_ns};
    total.engines[k] = ki.isa.engine;
    ++total.instructions[static_cast<int>(ki.isa.engine)];
  }
  close_phase();
  return total;
}

WorkTime kernel_launch(const InstanceSpec& instance, double makespan_ns,
                       const std::array<double, kEngineCount>& busy_ns, uint64_t hbm_bytes,
                       double flops) {
  if (!(makespan_ns >= 0)) throw Error("a kernel's makespan must be >= 0");
  WorkTime time;
  time.cost.engine_ns = busy_ns;
  time.cost.flops = flops;
  time.cost.set_bytes(instance, hbm_bytes);
  time.duration_ns = kLaunchOverheadNs + makespan_ns;
  return time;
}

}  // namespace trnsim

#include "trnsim/cost.h"

#include <algorithm>

namespace trnsim {

double OpCost::duration_ns() const {
  double busiest = hbm_ns;
  for (double ns : engine_ns) busiest = std::max(busiest, ns);
  return kLaunchOverheadNs + busiest;
}

void OpCost::add_pass(const InstanceSpec& instance, Engine engine, uint64_t elements, Pass pass,
                      bool sixteen_bit) {
  engine_ns[static_cast<int>(engine)] +=
      streaming_engine_ns(instance, engine, elements, pass, sixteen_bit);
}

void OpCost::set_bytes(const InstanceSpec& instance, uint64_t traffic) {
  bytes = traffic;
  hbm_ns = trnsim::hbm_ns(instance, traffic);
}

double hbm_ns(const InstanceSpec& instance, uint64_t bytes) {
  return static_cast<double>(bytes) / instance.core_stream_gbps();
}

OpCost matmul_cost(const InstanceSpec& instance, int64_t batch, int64_t m, int64_t k, int64_t n,
                   Precision precision, uint64_t bytes) {
  OpCost cost;
  cost.flops = 2.0 * batch * m * k * n;
  cost.set_bytes(instance, bytes);
  if (cost.flops == 0) return cost;
  cost.engine_ns[static_cast<int>(Engine::Tensor)] =
      tensor_engine_ns(instance, batch, m, k, n, precision);
  // Each output element leaves its PSUM bank once, as fp32, through a copy instruction. The
  // NKI kernels alternate these copies between VectorE and ScalarE (assumption: evenly).
  const auto outputs = static_cast<uint64_t>(batch) * static_cast<uint64_t>(m) *
                       static_cast<uint64_t>(n);
  cost.add_pass(instance, Engine::Vector, (outputs + 1) / 2);
  cost.add_pass(instance, Engine::Scalar, outputs / 2);
  return cost;
}

}  // namespace trnsim

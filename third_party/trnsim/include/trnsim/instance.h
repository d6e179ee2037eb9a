// The instance table: which Trainium chips an EC2 instance type has and what each chip can do.
// Numbers come from the AWS Neuron architecture docs (Trn1/Trn2/Trn3 architecture pages,
// https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/arch/neuron-hardware/).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace trnsim {

constexpr uint64_t kKiB = 1024, kMiB = 1024 * kKiB, kGiB = 1024 * kMiB;

// Facts about one Trainium chip generation. Rates are per chip, as the docs give them.
struct ChipSpec {
  std::string name;          // "Trainium2"
  std::string core_version;  // "NeuronCore-v3"
  int physical_cores;        // NeuronCores per chip
  // Engine clocks in GHz.
  double tensor_ghz, vector_ghz, scalar_ghz, gpsimd_ghz;
  uint64_t sbuf_bytes_per_core;
  uint64_t psum_bytes_per_core;
  uint64_t hbm_bytes;        // per chip
  double hbm_gbps;           // HBM bandwidth per chip, GB/s (1e9 bytes/s)
  double dma_gbps;           // aggregate DMA bandwidth per chip, GB/s
  double link_gbps;          // NeuronLink bandwidth per chip within an instance, GB/s
  // The dense TFLOPS per chip the product pages state. The cost model derives its peaks from
  // the TensorE clock and array size instead (tensor_engine.h); these are kept to check that
  // the two agree within a few percent.
  double bf16_tflops;        // dense BF16/FP16 per chip
  double fp32_tflops;        // dense FP32 per chip
  double fp8_tflops;         // dense FP8 per chip (0 when the chip has no FP8 rate of its own)
  int dma_engines_per_core;  // per physical core
  double dma_engine_gbps;    // one DMA engine's streaming rate, GB/s (bytes per ns)
  // TensorE contraction rows per FP8 matmul instruction: 128, or 256 where the engine's FP8
  // "double row" mode processes two rows per PE (NeuronCore-v3), which doubles its FP8 rate.
  int fp8_rows;
  // NeuronCore-v3 VectorE "performance mode": BF16/FP16 copies and tensor-scalar ops at 4x the
  // NeuronCore-v2 element rate, tensor-tensor ops at 2x.
  bool vector_performance_mode;
  // NeuronLink ports per chip, each to one neighbouring chip (Note [NeuronLink topology]).
  int neuronlinks = 0;
  // NeuronCore-v2's on-chip RAM ports: VectorE and GpSimdE cannot access SBUF in parallel, nor
  // VectorE and ScalarE PSUM (Note [Shared SBUF and PSUM ports], kernel_schedule.h).
  bool shared_ram_ports = false;
  // NeuronCore-v2: an SBUF/PSUM access whose most-minor free-dimension stride exceeds 16 bytes
  // gets half of a read/write interface's bandwidth (Note [Strided access], isa_cost.h).
  bool strided_access_half_rate = false;
};

// One EC2 instance type. A logical NeuronCore is one framework device (`neuron:i`).
struct InstanceSpec {
  std::string name;  // "trn2.3xlarge"
  const ChipSpec* chip;
  int chips;
  int logical_cores_per_chip;  // Trn2 default LNC=2 groups 2 physical cores into one logical
  // The instance's network to other instances, GB/s (the docs give Gbit/s; 800 Gbps = 100 GB/s),
  // and whether it is EFA. Single-chip sizes have a plain network and no NeuronLink.
  double network_gbps = 0;
  bool efa = false;
  // The chips' NeuronLink torus, torus_x x torus_y (0 x 0: one chip, no NeuronLink), and for
  // an UltraServer the instances its NeuronLink joins and the GB/s per chip between them
  // (Note [NeuronLink topology] in topology.h).
  int torus_x = 0, torus_y = 0;
  int ultraserver_instances = 1;
  double ultraserver_link_gbps = 0;

  int core_count() const { return chips * logical_cores_per_chip; }
  int physical_cores_per_logical() const { return chip->physical_cores / logical_cores_per_chip; }
  uint64_t hbm_bytes_per_core() const { return chip->hbm_bytes / logical_cores_per_chip; }
  // Peak rates of one logical core: the chip's rate split evenly over its logical cores.
  double core_bf16_tflops() const { return chip->bf16_tflops / logical_cores_per_chip; }
  double core_fp32_tflops() const { return chip->fp32_tflops / logical_cores_per_chip; }
  double core_hbm_gbps() const { return chip->hbm_gbps / logical_cores_per_chip; }
  // What a logical core's DMA engines can stream between HBM and SBUF, GB/s: its DMA engines'
  // aggregate rate, bounded by its HBM share. On Trainium1 the DMA engines are the limit
  // (272 of 410 GB/s, NKI DMA bandwidth guide); on Trainium2 the HBM share is.
  double core_stream_gbps() const {
    const double dma = core_dma_gbps();
    return dma < core_hbm_gbps() ? dma : core_hbm_gbps();
  }
  // What a logical core's DMA engines move, GB/s: 16 engines per physical core at 17 B/ns
  // (Trainium1) or 23 B/ns (Trainium2), NKI DMA bandwidth guide.
  double core_dma_gbps() const {
    return chip->dma_engines_per_core * chip->dma_engine_gbps * physical_cores_per_logical();
  }
};

// Every chip generation simulated, including any no instance type in the table has
// (Trainium3: its NKI kernels are timed).
const std::vector<const ChipSpec*>& chip_table();
// The chip whose cores are `core_version` ("NeuronCore-v4"); throws trnsim::Error naming the
// known ones.
const ChipSpec& find_chip(std::string_view core_version);

// The instance a SystemConfig without one describes.
constexpr std::string_view kDefaultInstance = "trn2.3xlarge";

const std::vector<InstanceSpec>& instance_table();

// Looks an instance up by name; throws trnsim::Error listing the valid names.
const InstanceSpec& find_instance(std::string_view name);

// "trn1.2xlarge, trn1.32xlarge, ...": for messages and help text.
std::string instance_names();

}  // namespace trnsim

#include "trnsim/instance.h"

#include "trnsim/error.h"

namespace trnsim {
namespace {

// Trainium1, NeuronCore-v2: Trn1 architecture page of the Neuron docs. DMA: 16 engines per core
// at 17 B/ns each, 272 GB/s per core (NKI "DMA bandwidth" guide, nki-dma-bandwidth-guide.rst).
const ChipSpec kTrainium1{
    "Trainium1", "NeuronCore-v2", /*physical_cores=*/2,
    /*tensor_ghz=*/2.8, /*vector_ghz=*/1.12, /*scalar_ghz=*/1.4, /*gpsimd_ghz=*/1.4,
    /*sbuf=*/24 * kMiB, /*psum=*/2 * kMiB,
    /*hbm_bytes=*/32 * kGiB, /*hbm_gbps=*/820.0, /*dma_gbps=*/1000.0, /*link_gbps=*/384.0,
    /*bf16_tflops=*/190.0, /*fp32_tflops=*/47.5, /*fp8_tflops=*/190.0,
    /*dma_engines_per_core=*/16, /*dma_engine_gbps=*/17.0, /*fp8_rows=*/128,
    /*vector_performance_mode=*/false,
    /*neuronlinks=*/4,  // "4 (Trainium) NeuronLink-v2" (NKI architecture guide)
    // NKI architecture guide (nki/guides/architecture/trainium_inferentia2_arch.rst), Data
    // Movement: "Vector Engine and GpSimd Engine cannot access SBUF in parallel", "Vector Engine
    // and Scalar Engine cannot access PSUM in parallel"; "If the most-minor F dimension stride
    // exceeds 16 bytes, the achievable bandwidth of each tensor read/write interface will be
    // half of the peak bandwidth".
    /*shared_ram_ports=*/true, /*strided_access_half_rate=*/true};

// Trainium2, NeuronCore-v3: Trn2 architecture page. FP8 runs at twice the BF16 rate ("double
// row", NKI Trainium2 architecture guide); VectorE has its BF16/FP16 performance mode (same
// guide). DMA: 16 engines per physical core at 23 B/ns (DMA bandwidth guide).
// NeuronLink-v3: 1,024 GB/s per chip within an instance (Trn2 page, "Intra-instance NeuronLink-v3
// bandwidth"); an UltraServer's 256 GB/s per chip between instances is on trn2u.48xlarge.
const ChipSpec kTrainium2{
    "Trainium2", "NeuronCore-v3", /*physical_cores=*/8,
    /*tensor_ghz=*/2.4, /*vector_ghz=*/0.96, /*scalar_ghz=*/1.2, /*gpsimd_ghz=*/1.2,
    /*sbuf=*/28 * kMiB, /*psum=*/2 * kMiB,
    /*hbm_bytes=*/96 * kGiB, /*hbm_gbps=*/2900.0, /*dma_gbps=*/3500.0, /*link_gbps=*/1024.0,
    /*bf16_tflops=*/667.0, /*fp32_tflops=*/181.0, /*fp8_tflops=*/1299.0,
    /*dma_engines_per_core=*/16, /*dma_engine_gbps=*/23.0, /*fp8_rows=*/256,
    /*vector_performance_mode=*/true,
    /*neuronlinks=*/4,  // "4 NeuronLink-v3" (NKI Trainium2 architecture guide)
    // "In NeuronCore-v3, two restrictions in engine parallel accesses to SBUF/PSUM are lifted"
    // (NKI Trainium2 architecture guide, trainium2_arch.rst). Its guide says nothing of strided
    // access, so no penalty is charged (an assumption).
    /*shared_ram_ports=*/false, /*strided_access_half_rate=*/false};

// Trainium3, NeuronCore-v4: Trainium3 architecture page (about-neuron/arch/neuron-hardware/
// trainium3.rst: eight NeuronCore-v4 per chip; 2,517 MXFP8/MXFP4, 671 BF16 and 183 FP32 TFLOPS;
// 144 GiB of HBM at 4.9 TB/s; 4.9 TB/s of DMA; NeuronLink-v4 2.56 TB/s per device) and the NKI
// Trainium3 architecture guide (nki/guides/architecture/trainium3_arch.rst, "Compute Engine
// Specifications": TensorE 2.4 GHz, VectorE, ScalarE and GpSimdE 1.2 GHz; SBUF 32 MiB, PSUM
// 2 MiB). DMA: 16 engines per core at 33 B/ns (DMA bandwidth guide and DMA overview tables;
// the overview's text says 38.4 GB/s for NeuronCore-v4, its table and the guide 33). No EC2
// instance type of it is in the table (the docs name only UltraServers, whose chips a
// PCIe-switched NeuronSwitch joins instead of NeuronLink ports), so only NKI kernels compiled
// for it are timed (chip_table). FP8 keeps NeuronCore-v3's double row (an assumption: the
// page gives MXFP8's rate only); VectorE its BF16 performance mode (512 BF16 elements a cycle).
const ChipSpec kTrainium3{
    "Trainium3", "NeuronCore-v4", /*physical_cores=*/8,
    /*tensor_ghz=*/2.4, /*vector_ghz=*/1.2, /*scalar_ghz=*/1.2, /*gpsimd_ghz=*/1.2,
    /*sbuf=*/32 * kMiB, /*psum=*/2 * kMiB,
    /*hbm_bytes=*/144 * kGiB, /*hbm_gbps=*/4900.0, /*dma_gbps=*/4900.0, /*link_gbps=*/2560.0,
    /*bf16_tflops=*/671.0, /*fp32_tflops=*/183.0, /*fp8_tflops=*/2517.0,
    /*dma_engines_per_core=*/16, /*dma_engine_gbps=*/33.0, /*fp8_rows=*/256,
    /*vector_performance_mode=*/true,
    /*neuronlinks=*/0,
    /*shared_ram_ports=*/false, /*strided_access_half_rate=*/false};

}  // namespace

const std::vector<const ChipSpec*>& chip_table() {
  static const std::vector<const ChipSpec*> chips{&kTrainium1, &kTrainium2, &kTrainium3};
  return chips;
}

const ChipSpec& find_chip(std::string_view core_version) {
  std::string known;
  for (const ChipSpec* chip : chip_table()) {
    if (chip->core_version == core_version) return *chip;
    known += (known.empty() ? "" : ", ") + chip->core_version;
  }
  throw Error("no simulated chip has a " + std::string(core_version) + "; known: " + known);
}

const std::vector<InstanceSpec>& instance_table() {
  // Trn2 instances default to logical NeuronCore config LNC=2: 8 physical cores -> 4 devices.
  // Network, in Gbit/s / 8: Trn1 page table (trn1.2xlarge "up-to 25" and no NeuronLink; it has
  // no EFA; trn1.32xlarge 800 Gbps EFA); Trn2 page table (trn2.3xlarge 0.2 Tbps, "does not use
  // NeuronLink interconnect or EFA networking"; trn2.48xlarge 3.2 Tbps EFAv3).
  // NeuronLink: 16 chips in a 2-D torus on trn1.32xlarge (Trn1 page) and a 4x4 2-D torus on
  // trn2.48xlarge (Trn2 page); a Trn2 UltraServer is four trn2u.48xlarge whose same-coordinate
  // chips are linked in a ring, 256 GB/s per chip between instances (Trn2 page).
  static const std::vector<InstanceSpec> table{
      {"trn1.2xlarge", &kTrainium1, /*chips=*/1, /*logical_cores_per_chip=*/2,
       /*network_gbps=*/25.0 / 8, /*efa=*/false},
      {"trn1.32xlarge", &kTrainium1, 16, 2, 800.0 / 8, true, /*torus_x=*/4, /*torus_y=*/4},
      {"trn2.3xlarge", &kTrainium2, 1, 4, 200.0 / 8, false},
      {"trn2.48xlarge", &kTrainium2, 16, 4, 3200.0 / 8, true, 4, 4},
      {"trn2u.48xlarge", &kTrainium2, 16, 4, 3200.0 / 8, true, 4, 4,
       /*ultraserver_instances=*/4, /*ultraserver_link_gbps=*/256.0},
  };
  return table;
}

std::string instance_names() {
  std::string names;
  for (const auto& spec : instance_table()) {
    if (!names.empty()) names += ", ";
    names += spec.name;
  }
  return names;
}

const InstanceSpec& find_instance(std::string_view name) {
  for (const auto& spec : instance_table()) {
    if (spec.name == name) return spec;
  }
  throw Error("unknown Trainium instance type '" + std::string(name) +
              "'; valid names are: " + instance_names());
}

}  // namespace trnsim

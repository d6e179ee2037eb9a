#include "runtime/Settings.h"

#include <c10/util/Exception.h>

#include <strings.h>

#include <cstdlib>
#include <map>
#include <mutex>

#include <trnsim/instance.h>

namespace torch_neuron {
namespace settings {
namespace {

// Note [Settings table]. Sources: AWS's TorchNeuron environment variables
// (torch/reference/env-vars.html), the Neuron runtime's configuration
// (neuron-runtime/nrt-configurable-parameters.html) and torchrun's environment
// (PyTorch docs, "torchrun (Elastic Launch)", "Environment Variables").
const std::vector<Spec>& build_table() {
  static const std::vector<Spec> specs = {
      // torch_neuron's own.
      {"TORCH_NEURON_INSTANCE", Type::Text, trnsim::kDefaultInstance.data(), "",
       "EC2 instance type to simulate; an unknown name lists the valid ones "
       "(`python -m torch_neuron info` describes the chosen one)"},
      {"TORCH_NEURON_EXECUTE", Type::Bool, "1", "",
       "0: predict-only mode, ops are charged and allocate HBM but compute nothing "
       "(torch_neuron.set_execute)"},
      {"TORCH_NEURON_FALLBACK", Type::Choice, "allow", "allow|error",
       "error: an op Trainium does not run raises instead of falling back to the CPU "
       "(torch_neuron.set_fallback_error)"},
      {"TORCH_NEURON_FLOAT64", Type::Choice, "narrow", "narrow|exact",
       "exact: float64 computed exactly on the host; narrow: in float32, as on Trainium "
       "(torch_neuron.set_float64_mode)"},
      {"TORCH_NEURON_INJECT_FAULT", Type::Text, "", "",
       "<kind>:<device>:<launch>, e.g. hbm_ue:1:500: that launch fails with the Neuron "
       "runtime's status (torch_neuron.inject_fault)"},
      {"TORCH_NEURON_COLLECTIVE_ALGORITHMS", Type::Choice, "current", "current|neuron-2.18",
       "the Neuron runtime whose collective algorithms the model picks from: current (today's "
       "docs) or neuron-2.18 (Ring, and all-reduce's all-to-all pattern only on 16 ranks of a "
       "trn1 on NeuronCores 0-15 or 16-31), to predict measurements of that release"},
      {"TORCH_NEURON_VIRTUAL_RANKS", Type::Text, "", "",
       "a virtual world: the global ranks that run as processes, e.g. '0' or '0,128'; the "
       "other ranks of WORLD_SIZE are virtual (set by `python -m torch_neuron run --virtual`)"},
      // The Neuron runtime's.
      {"NEURON_RT_VISIBLE_CORES", Type::Text, "", "",
       "NeuronCores the process sees: '2', '0-3' or '0,2-3'; neuron:i is the i-th"},
      {"NEURON_RT_NUM_CORES", Type::Int, "", "",
       "the first N NeuronCores (0: all); NEURON_RT_VISIBLE_CORES wins when both are set"},
      {"NEURON_LOGICAL_NC_CONFIG", Type::Int, "", "",
       "physical NeuronCores per logical core (device): Trainium2 2 (default) or 1"},
      // NKI's (aws-neuron-sdk nki/guides/nki_simulator.rst, "Target Platform").
      {"NEURON_PLATFORM_TARGET_OVERRIDE", Type::Text, "", "",
       "NeuronCore an NKI kernel targets: trn1|inf2|gen2, trn2|gen3 or trn3|gen4 (default: "
       "the simulated instance's; @nki.jit(platform_target=...) wins)"},
      // TorchNeuron's.
      {"TORCH_NEURONX_COMPLEX_DECOMPOSE", Type::Bool, "1", "",
       "0: every op on a complex tensor falls back to the CPU (torch_neuron.set_complex_decompose)"},
      {"TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", Type::Bool, "1", "",
       "0: a torch.compile(backend='neuron') graph that fails to compile runs eagerly"},
      {"TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY", Type::Bool, "0", "",
       "1: a CPU tensor among a compiled graph's inputs raises"},
      {"TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", Type::Bool, "0", "",
       "1: compiled graphs and their generated code are written under TORCH_NEURONX_DEBUG_DIR"},
      {"TORCH_NEURONX_DEBUG_DIR", Type::Text, "/tmp/neuron_backend", "",
       "where compilation artifacts go"},
      {"TORCH_NEURONX_NEFF_CACHE_DIR", Type::Text, "", "",
       "folder of Inductor's compile cache (unless TORCHINDUCTOR_CACHE_DIR is set)"},
      {"TORCH_NEURONX_NEFF_DISABLE_CACHE", Type::Bool, "0", "", "1: compile caches off"},
      {"TORCH_NEURONX_DISABLE_NEFF_CACHE", Type::Bool, "0", "", "1: compile caches off"},
      // PyTorch's, read to cooperate with it.
      {"TORCHINDUCTOR_CACHE_DIR", Type::Text, "", "",
       "Inductor's cache folder; when set, TORCH_NEURONX_NEFF_CACHE_DIR leaves it alone"},
      // torchrun's (and accelerate's), set for each rank.
      {"RANK", Type::Int, "", "", "global rank (names compilation artifact folders)"},
      {"LOCAL_RANK", Type::Int, "", "",
       "rank on its node: the process starts on neuron:LOCAL_RANK when that core is visible"},
      {"WORLD_SIZE", Type::Int, "", "", "number of ranks (in the distributed report)"},
      {"GROUP_RANK", Type::Int, "", "", "node rank: which simulated instance the rank sits on"},
      {"LOCAL_WORLD_SIZE", Type::Int, "", "",
       "ranks per node: where a virtual world's ranks sit (rank r on instance r / it)"},
      {"TORCHELASTIC_RESTART_COUNT", Type::Int, "", "",
       "restart attempt: process-group store keys carry it so a restart never meets the last "
       "attempt's addresses"},
  };
  return specs;
}

std::mutex& api_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, std::string, std::less<>>& api_values() {
  static auto* values = new std::map<std::string, std::string, std::less<>>();
  return *values;
}

bool is_word(const std::string& text, std::initializer_list<const char*> words) {
  for (const char* w : words) {
    if (strcasecmp(text.c_str(), w) == 0) return true;
  }
  return false;
}

// `text` checked against `spec`'s type and normalized; throws naming the variable (a
// RuntimeError, as every bad setting has always raised).
std::string checked(const Spec& spec, const std::string& text) {
  switch (spec.type) {
    case Type::Bool:
      if (is_word(text, {"1", "true", "yes", "on"})) return "1";
      if (is_word(text, {"0", "false", "no", "off"})) return "0";
      TORCH_CHECK(false, spec.name, "='", text,
                  "' is not a boolean; set it to 1 or 0 (also true/false, yes/no, "
                        "on/off), or unset it");
    case Type::Int: {
      char* end = nullptr;
      std::strtoll(text.c_str(), &end, 10);
      TORCH_CHECK(!text.empty() && *end == '\0',
                        invalid_value(spec.name, text, "use an integer, or unset it"));
      return text;
    }
    case Type::Choice: {
      std::string options = std::string("|") + spec.choices + "|";
      TORCH_CHECK(options.find("|" + text + "|") != std::string::npos,
                        invalid_value(spec.name, text,
                                      std::string("use one of ") + spec.choices +
                                          " (default " + spec.default_value + "), or unset it"));
      return text;
    }
    case Type::Text:
      return text;
  }
  return text;
}

}  // namespace

const char* source_name(Source source) {
  switch (source) {
    case Source::Default:
      return "default";
    case Source::Environment:
      return "environment";
    case Source::Api:
      return "api";
  }
  return "default";
}

const std::vector<Spec>& table() { return build_table(); }

const Spec& spec(std::string_view name) {
  for (const auto& s : table()) {
    if (name == s.name) return s;
  }
  TORCH_CHECK_VALUE(false, "'", name, "' is not a torch_neuron setting; ",
                    "`python -m torch_neuron env` lists them");
}

Value read(std::string_view name) {
  const Spec& s = spec(name);
  {
    std::lock_guard<std::mutex> lock(api_mutex());
    auto it = api_values().find(name);
    if (it != api_values().end()) return {it->second, Source::Api};
  }
  // The one place the environment is read (Note [Settings table]).
  const char* raw = std::getenv(s.name);
  if (raw != nullptr && *raw != '\0') return {checked(s, raw), Source::Environment};
  return {s.default_value, Source::Default};
}

bool read_bool(std::string_view name) { return read(name).text == "1"; }

std::optional<int64_t> read_int(std::string_view name) {
  const Value v = read(name);
  if (v.text.empty()) return std::nullopt;
  return std::strtoll(v.text.c_str(), nullptr, 10);
}

std::string read_text(std::string_view name) { return read(name).text; }

void set_from_api(std::string_view name, const std::string& text) {
  const Spec& s = spec(name);
  std::string value = checked(s, text);
  std::lock_guard<std::mutex> lock(api_mutex());
  api_values()[std::string(name)] = std::move(value);
}

std::string invalid_value(std::string_view name, const std::string& value,
                          const std::string& why) {
  return std::string(name) + "='" + value + "' is not valid; " + why;
}

}  // namespace settings
}  // namespace torch_neuron

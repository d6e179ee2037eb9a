// Note [torch.profiler device activities]
// torch.profiler.profile(activities=[..., ProfilerActivity.PrivateUse1]) collects a backend's
// device activities through a Kineto plugin (torch/csrc/profiler/standalone/
// privateuse1_profiler.h). While a session records, every piece of work launched on a simulated
// queue is observed (trnsim::set_trace_observer) and becomes one device activity: on the
// NeuronCore's row and its stream's lane, starting when the host launched it and lasting its
// simulated Trainium duration, linked to the op that launched it. The link is Kineto's
// correlation id, which PyTorch pushes around every op (pushCorrelationId) and which becomes
// the launching thread's trnsim trace tag. PyTorch then reports each op's device time
// (key_averages(), tables, exported traces) as the simulated time of its work.
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <c10/util/ApproximateClock.h>

#include <GenericTraceActivity.h>
#include <output_base.h>
#include <IActivityProfiler.h>
#include <libkineto.h>

#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <trnsim/queue.h>

#include "profiler/KinetoPlugin.h"

namespace torch_neuron {
namespace {

std::atomic<bool> session_recording{false};

// What a launch leaves for the trace: the record and the host time it was launched at.
struct Launch {
  trnsim::TraceRecord record;
  int64_t host_ns;
};

// The correlation ids PyTorch pushed on this thread (ops nest), the innermost one the tag.
thread_local std::vector<uint64_t> correlation_stack;

class NeuronProfilerSession final : public libkineto::IActivityProfilerSession {
 public:
  ~NeuronProfilerSession() override {
    if (recording_) stop_recording();
  }

  void start() override {
    recording_ = true;
    start_ns_ = c10::getTime();
    trnsim::set_trace_observer([this](const trnsim::TraceRecord& record) {
      const int64_t now = c10::getTime();
      std::lock_guard<std::mutex> lock(mutex_);
      launches_.push_back({record, now});
    });
    session_recording = true;
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    stop_recording();
    end_ns_ = c10::getTime();
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; },
                 start_ns_, end_ns_);
  }

  void processTrace(libkineto::ActivityLogger& logger,
                    libkineto::getLinkedActivityCallback linked_activity, int64_t,
                    int64_t) override {

    buffer_.span = libkineto::TraceSpan(start_ns_, end_ns_, "neuron");
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Launch& launch : launches_) {
      const trnsim::TraceRecord& r = launch.record;
      buffer_.emplace_activity(buffer_.span, libkineto::ActivityType::CONCURRENT_KERNEL,
                               r.name);
      auto& activity = *buffer_.activities.back();
      activity.startTime = launch.host_ns;
      activity.endTime = launch.host_ns + static_cast<int64_t>(r.duration_ns);
      activity.device = r.device;
      activity.resource = r.queue;
      activity.id = static_cast<int32_t>(++next_id_);
      activity.linked = r.tag != 0 ? linked_activity(static_cast<int32_t>(r.tag)) : nullptr;
      logger.handleGenericActivity(activity);
      // (No metadata: Kineto formats it with fmt, whose symbols libtorch does not export.)
    }
    launches_.clear();
    status_ = libkineto::TraceStatus::READY;
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override { return nullptr; }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override { return {}; }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {

    return std::make_unique<libkineto::CpuTraceBuffer>(std::move(buffer_));
  }

  void pushCorrelationId(uint64_t id) override {
    correlation_stack.push_back(id);
    trnsim::set_trace_tag(id);
  }
  void popCorrelationId() override {
    if (!correlation_stack.empty()) correlation_stack.pop_back();
    trnsim::set_trace_tag(correlation_stack.empty() ? 0 : correlation_stack.back());
  }

 private:
  void stop_recording() {
    trnsim::set_trace_observer(nullptr);
    session_recording = false;
    recording_ = false;
  }

  bool recording_ = false;
  int64_t start_ns_ = 0;
  int64_t end_ns_ = 0;
  std::mutex mutex_;
  std::vector<Launch> launches_;
  libkineto::CpuTraceBuffer buffer_;
  int64_t next_id_ = 0;
};

class NeuronActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override {
    return activities_;
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<libkineto::ActivityType>&, const libkineto::Config&) override {
    return std::make_unique<NeuronProfilerSession>();
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t, int64_t, const std::set<libkineto::ActivityType>& types,
      const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_ = "neuron";
  std::set<libkineto::ActivityType> activities_{libkineto::ActivityType::CONCURRENT_KERNEL};
};

REGISTER_PRIVATEUSE1_PROFILER(NeuronActivityProfiler);

}  // namespace

bool kineto_session_recording() { return session_recording; }

}  // namespace torch_neuron

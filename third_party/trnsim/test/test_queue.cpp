// Queues and events on the simulated clock (Note [Simulated time] in queue.h).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "trnsim/error.h"
#include "trnsim/queue.h"

namespace trnsim {
namespace {

TEST(Queue, LaunchAdvancesClock) {
  Queue q(0, 0);
  EXPECT_EQ(q.now_ns(), 0.0);
  EXPECT_EQ(q.launch("a", 100.0), 100.0);
  EXPECT_EQ(q.launch("b", 50.0), 150.0);
  EXPECT_EQ(q.launch("empty", 0.0), 150.0);
  EXPECT_EQ(q.now_ns(), 150.0);
}

TEST(Queue, BadDurationThrowsAndLeavesClock) {
  Queue q(0, 0);
  q.launch("a", 10.0);
  EXPECT_THROW(q.launch("neg", -1.0), Error);
  EXPECT_THROW(q.launch("nan", std::nan("")), Error);
  EXPECT_EQ(q.now_ns(), 10.0);
  try {
    q.launch("my_kernel", -5.0);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("my_kernel"), std::string::npos) << e.what();
  }
}

TEST(Queue, WaitUntilOnlyMovesForward) {
  Queue q(0, 0);
  q.launch("a", 100.0);
  q.wait_until(50.0);
  EXPECT_EQ(q.now_ns(), 100.0);
  q.wait_until(300.0);
  EXPECT_EQ(q.now_ns(), 300.0);
  // Work after the wait starts at the waited-for time.
  EXPECT_EQ(q.launch("b", 10.0), 310.0);
}

TEST(Queue, TraceRecordsWorkInOrder) {
  Queue q(2, 5);
  q.launch("untraced", 7.0);
  q.set_tracing(true);
  q.launch("first", 10.0);
  q.wait_until(100.0);
  q.launch("second", 20.0);
  q.set_tracing(false);
  q.launch("after", 1.0);

  const auto trace = q.take_trace();
  ASSERT_EQ(trace.size(), 2u);
  EXPECT_EQ(trace[0].name, "first");
  EXPECT_EQ(trace[0].device, 2);
  EXPECT_EQ(trace[0].queue, 5);
  EXPECT_EQ(trace[0].start_ns, 7.0);
  EXPECT_EQ(trace[0].duration_ns, 10.0);
  EXPECT_EQ(trace[1].name, "second");
  EXPECT_EQ(trace[1].start_ns, 100.0);  // after the wait, not at 17
  EXPECT_EQ(trace[1].duration_ns, 20.0);

  EXPECT_TRUE(q.take_trace().empty());
}

TEST(Queue, ObserverSeesTaggedWorkWithoutKeepingATrace) {
  Queue q(1, 3);
  std::vector<TraceRecord> seen;
  set_trace_observer([&](const TraceRecord& r) { seen.push_back(r); });
  EXPECT_TRUE(tracing_enabled());
  set_trace_tag(42);
  q.launch("tagged", 5.0);
  set_trace_tag(0);
  q.launch("untagged", 2.0);
  set_trace_observer(nullptr);
  q.launch("unobserved", 1.0);
  EXPECT_FALSE(tracing_enabled());

  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].name, "tagged");
  EXPECT_EQ(seen[0].tag, 42u);
  EXPECT_EQ(seen[0].start_ns, 0.0);
  EXPECT_EQ(seen[0].duration_ns, 5.0);
  EXPECT_EQ(seen[1].tag, 0u);
  EXPECT_EQ(seen[1].start_ns, 5.0);
  EXPECT_TRUE(q.take_trace().empty());  // observing keeps no trace of its own
}

TEST(Event, RecordCapturesTime) {
  Queue q(0, 0);
  q.launch("a", 40.0);
  Event e;
  EXPECT_FALSE(e.recorded());
  e.record(q);
  EXPECT_TRUE(e.recorded());
  EXPECT_EQ(e.device(), 0);
  q.launch("b", 60.0);
  // The event keeps the time its record wrote; later work does not move it.
  EXPECT_DOUBLE_EQ(e.time_ns(), 40.0 + kEventRecordNs);
  EXPECT_DOUBLE_EQ(q.now_ns(), 40.0 + kEventRecordNs + 60.0);
}

TEST(Event, BackToBackRecordsAreOneRecordApart) {
  Queue q(0, 0);
  Event start, end;
  start.record(q);
  end.record(q);
  EXPECT_GT(Event::elapsed_ms(start, end), 0.0);
  EXPECT_DOUBLE_EQ(Event::elapsed_ms(start, end), kEventRecordNs / 1e6);
  EXPECT_TRUE(q.take_trace().empty());  // records are not ops
}

TEST(Event, ElapsedIsWorkDurationInMs) {
  Queue q(1, 0);
  q.launch("warmup", 123.0);
  Event start, end;
  start.record(q);
  q.launch("work", 2.5e6);
  end.record(q);
  // The work and the end event's own record.
  EXPECT_DOUBLE_EQ(Event::elapsed_ms(start, end), 2.5 + kEventRecordNs / 1e6);
  EXPECT_DOUBLE_EQ(Event::elapsed_ms(end, start), -(2.5 + kEventRecordNs / 1e6));
}

TEST(Event, ElapsedAcrossQueuesOfOneDevice) {
  Queue a(0, 0), b(0, 1);
  b.launch("x", 3e6);
  Event start, end;
  start.record(a);
  end.record(b);
  EXPECT_DOUBLE_EQ(Event::elapsed_ms(start, end), 3.0);
}

TEST(Event, UnrecordedThrows) {
  Queue q(0, 0);
  Event recorded, never;
  recorded.record(q);
  EXPECT_THROW(never.time_ns(), Error);
  EXPECT_THROW(Event::elapsed_ms(recorded, never), Error);
  EXPECT_THROW(Event::elapsed_ms(never, recorded), Error);
}

TEST(Event, CrossDeviceElapsedThrows) {
  Queue q0(0, 0), q1(1, 0);
  Event a, b;
  a.record(q0);
  b.record(q1);
  try {
    Event::elapsed_ms(a, b);
    FAIL() << "expected trnsim::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("neuron:0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("neuron:1"), std::string::npos) << msg;
  }
}

TEST(Event, BlockMakesAnotherQueueWait) {
  Queue producer(0, 0), consumer(0, 1);
  producer.launch("produce", 500.0);
  Event ready;
  ready.record(producer);
  ready.block(consumer);
  EXPECT_DOUBLE_EQ(consumer.now_ns(), 500.0 + kEventRecordNs);
  EXPECT_DOUBLE_EQ(consumer.launch("consume", 10.0), 510.0 + kEventRecordNs);
  // A queue already past the event is not pulled back.
  Queue late(0, 2);
  late.launch("long", 1000.0);
  ready.block(late);
  EXPECT_EQ(late.now_ns(), 1000.0);
}

TEST(Event, BlockOnUnrecordedIsNoop) {
  Queue q(0, 0);
  q.launch("a", 5.0);
  Event never;
  never.block(q);
  EXPECT_EQ(q.now_ns(), 5.0);
}

TEST(Queue, PausedClocksDoNotAdvance) {
  Queue q(0, 0);
  q.launch("before", 10.0);
  pause_clocks();
  pause_clocks();  // pauses nest
  EXPECT_TRUE(clocks_paused());
  EXPECT_DOUBLE_EQ(q.launch("hidden", 1000.0), 10.0);
  resume_clocks();
  EXPECT_DOUBLE_EQ(q.launch("still hidden", 1000.0), 10.0);
  resume_clocks();
  EXPECT_FALSE(clocks_paused());
  EXPECT_DOUBLE_EQ(q.launch("after", 5.0), 15.0);
  EXPECT_THROW(resume_clocks(), Error);
  EXPECT_FALSE(clocks_paused());
}

TEST(Queue, PausedClocksAreTheCallingThreads) {
  Queue q(0, 0);
  pause_clocks();
  double other_finish = -1;
  bool other_paused = true;
  std::thread other([&] {
    other_paused = clocks_paused();
    other_finish = q.launch("another thread's work", 7.0);
  });
  other.join();
  EXPECT_FALSE(other_paused);
  EXPECT_DOUBLE_EQ(other_finish, 7.0);
  EXPECT_DOUBLE_EQ(q.launch("hidden", 1000.0), 7.0);
  resume_clocks();
  EXPECT_DOUBLE_EQ(q.launch("after", 3.0), 10.0);
}

}  // namespace
}  // namespace trnsim

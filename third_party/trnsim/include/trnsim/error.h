// Errors raised by the simulated Trainium runtime. Messages name the problem and the fix,
// because a framework on top may pass them straight to its users.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace trnsim {

// Bad argument or bad state: an unknown instance type, a device index out of range, a pointer
// that the runtime did not allocate.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An HBM allocation that does not fit. Carries the numbers so the caller can retry or report.
class OutOfMemory : public Error {
 public:
  OutOfMemory(int device, uint64_t requested, uint64_t free, uint64_t capacity);
  int device() const { return device_; }
  uint64_t requested() const { return requested_; }
  uint64_t free_bytes() const { return free_; }
  uint64_t capacity() const { return capacity_; }

 private:
  int device_;
  uint64_t requested_, free_, capacity_;
};

// "1.50 GiB", "512.00 KiB": the format used in every memory message.
std::string format_bytes(uint64_t bytes);

}  // namespace trnsim

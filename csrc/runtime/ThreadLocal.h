// Note [Per-op thread locals]: a shared library's thread_local variables are reached through a
// call to __tls_get_addr (the general-dynamic TLS model), and every op reads a few of them
// (current device and stream, the AllocateOnDevice target, spare host views). The initial-exec
// model reads them with one instruction, but puts the library's whole TLS block into the static
// TLS space that glibc reserves for libraries loaded with dlopen (a few hundred bytes). So only
// small variables are thread_local in this library; anything bigger is reached through a
// thread_local pointer. test_unboxed_kernels.py checks the TLS segment stays small.
//
// A thread_local with a destructor is reached through a guard variable that the compiler keeps
// in the general-dynamic model, so such objects are per_thread<T>() instead: an initial-exec
// pointer, created on first use and destroyed when the thread exits.
#pragma once

#define TORCH_NEURON_THREAD_LOCAL thread_local __attribute__((tls_model("initial-exec")))

namespace torch_neuron {
namespace detail {

// Deletes a thread's object when the thread exits (the slow path registers it on first use).
template <class T>
struct PerThreadOwner {
  T** slot;
  ~PerThreadOwner() {
    delete *slot;
    *slot = nullptr;
  }
};

template <class T, class Tag>
T& create_per_thread(T*& slot) {
  slot = new T();
  thread_local PerThreadOwner<T> owner{&slot};
  return *slot;
}

}  // namespace detail

// This thread's T, distinct per Tag (a type private to the caller's file).
template <class T, class Tag>
T& per_thread() {
  static TORCH_NEURON_THREAD_LOCAL T* instance = nullptr;
  if (__builtin_expect(instance != nullptr, 1)) return *instance;
  return detail::create_per_thread<T, Tag>(instance);
}

}  // namespace torch_neuron

// Note [Per-op thread locals]: a shared library's thread_local variables are reached through a
// call to __tls_get_addr (the general-dynamic TLS model), and every op reads a few of them
// (current device and stream, the AllocateOnDevice target, spare host views). The initial-exec
// model reads them with one instruction, but puts the library's whole TLS block into the static
// TLS space that glibc reserves for libraries loaded with dlopen (a few hundred bytes). So only
// small variables are thread_local in this library; anything bigger is reached through a
// thread_local pointer. test_cpp_internals.py checks the TLS segment stays small.
#pragma once

#define TORCH_NEURON_THREAD_LOCAL thread_local __attribute__((tls_model("initial-exec")))

// trnsim: a software model of AWS Trainium, for frameworks that want a simulated NeuronCore.
// The one header to include; README.md maps the library.
#pragma once

#include "trnsim/collective.h"        // collectives by algorithm and topology
#include "trnsim/cost.h"              // OpCost: engine busy time, FLOPs, HBM bytes
#include "trnsim/device.h"            // one logical NeuronCore: HBM, queues, health
#include "trnsim/error.h"             // trnsim::Error, trnsim::OutOfMemory
#include "trnsim/fault.h"             // simulated hardware faults
#include "trnsim/hbm.h"               // simulated HBM and its allocator
#include "trnsim/instance.h"          // the instance table (trn1, trn2, trn3)
#include "trnsim/isa_cost.h"          // NKI instruction costs (ISA stub formulas)
#include "trnsim/kernel_schedule.h"   // an NKI kernel's instructions on the engines
#include "trnsim/queue.h"             // queues, events, the clock, traces
#include "trnsim/schedule.h"          // instruction streams on the engines, by buffer region
#include "trnsim/streaming_engine.h"  // VectorE, ScalarE, GpSimdE
#include "trnsim/system.h"            // the machine a process sees (SystemConfig)
#include "trnsim/tensor_engine.h"     // TensorE
#include "trnsim/topology.h"          // NeuronLink torus and links
#include "trnsim/transfer.h"          // DMA copies: host link, HBM, NeuronLink
#include "trnsim/work.h"              // work descriptions and time_of()

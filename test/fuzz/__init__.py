"""Differential fuzzer: random ATen programs run on the CPU and on neuron and compared
(test/fuzz/run.py --help)."""

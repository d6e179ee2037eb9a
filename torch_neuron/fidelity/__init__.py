"""Published Trainium measurements beside the simulator's predictions.

    python -m torch_neuron fidelity [--json] [--sources]
                                    [--kind op|end-to-end|collective|scale] [--eager]
                                    [--anchor NAME] [--all] [--markdown FILE] [--list]

Each anchor is a number AWS published for real Trainium hardware (a kernel's latency, a model's
inference latency or training throughput, a collective's time in nccom-test, a Llama job's
throughput or latency), the workload that produced it written as ordinary PyTorch on device
"neuron" (for a collective, the collective model's public entry point; for a Llama job, the
project's example run as a virtual world, docs/scale.md), and the instance it ran on.
Workloads run in predict-only mode (Note [Predict-only execution]): nothing is computed. AWS
measured its model numbers on compiled graphs, so those workloads run under
torch.compile(backend="neuron"); kernels measured as one kernel run as one eager op; --eager
adds eager predictions beside the compiled ones.

Goals (issue 25), checked by the exit status:
  end to end: median |predicted / measured - 1| <= 15%, every anchor within 0.67x-1.5x;
  op level:   median <= 10%, every anchor within 0.8x-1.25x;
  scale:      as end to end (virtual Llama jobs; most run only on request, --kind scale);
  no prediction faster than a physical peak (the documented peak FLOPs and HBM bandwidth of
  what the workload must do).

Note [Fidelity anchors]
~~~~~~~~~~~~~~~~~~~~~~~
Every row of every published table used is an anchor. A row counts towards its kind's goals
unless a reason that does not depend on the prediction keeps it out: it times a deliberately
unoptimized kernel, a feature the model does not describe (concurrent streams, variable-count
collectives), or its source names no instance type (loose); and a row that any model meets by
construction (TensorE busy on a large matmul) is a sanity row. Rows that do not count are still
predicted and printed with their reason. The model is never fitted to an anchor: its constants
come from the Neuron documents (third_party/trnsim), docs/fidelity.md has the table.
"""

from torch_neuron.fidelity.anchors import ANCHORS  # noqa: F401
from torch_neuron.fidelity.cli import main  # noqa: F401

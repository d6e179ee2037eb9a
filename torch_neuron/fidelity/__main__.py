"""python -m torch_neuron.fidelity: the suite's command line (python -m torch_neuron fidelity),
and with --worker the per-instance worker that runner.py starts (its request on stdin)."""

import json
import sys

if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        from torch_neuron.fidelity.runner import worker

        request = json.loads(sys.stdin.read())
        print(json.dumps(worker(request["instance"], request["names"], request["eager"])))
        sys.exit(0)
    from torch_neuron.fidelity.cli import main

    sys.exit(main())

"""Every anchor, by kind (Note [Fidelity anchors] in torch_neuron/fidelity/__init__.py)."""

from torch_neuron.fidelity import (collective_anchors, end_to_end_anchors, op_anchors,
                                   scale_anchors)

ANCHORS = (op_anchors.ANCHORS + end_to_end_anchors.ANCHORS + collective_anchors.ANCHORS
           + scale_anchors.ANCHORS)

assert len({a.name for a in ANCHORS}) == len(ANCHORS), "anchor names must be unique"

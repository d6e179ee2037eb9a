"""torch.save / torch.load of neuron tensors and modules, with and without map_location."""

import copy
import io
import pickle

import pytest
import torch


def save_load(obj, **load_kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load_kwargs)


@pytest.fixture
def payload():
    cpu = torch.randn(4, 6)
    return cpu, {
        "x": cpu.to("neuron:1"),
        "half": cpu.to("neuron:1", torch.bfloat16),
        "ints": torch.arange(10).to("neuron:1"),
        "mask": (cpu > 0).to("neuron:1"),
    }


def check_values(loaded, cpu):
    assert torch.equal(loaded["x"].cpu(), cpu)
    assert torch.equal(loaded["half"].cpu(), cpu.to(torch.bfloat16))
    assert loaded["half"].dtype == torch.bfloat16
    assert torch.equal(loaded["ints"].cpu(), torch.arange(10))
    assert torch.equal(loaded["mask"].cpu(), cpu > 0)


def test_load_keeps_device(payload):
    cpu, obj = payload
    loaded = save_load(obj)
    for t in loaded.values():
        assert t.device == torch.device("neuron", 1)
    check_values(loaded, cpu)


def test_load_with_weights_only_false(payload):
    cpu, obj = payload
    loaded = save_load(obj, weights_only=False)
    assert loaded["x"].device == torch.device("neuron", 1)
    check_values(loaded, cpu)


@pytest.mark.parametrize("location, want", [
    ("cpu", torch.device("cpu")),
    ("neuron:2", torch.device("neuron", 2)),
    (torch.device("neuron", 3), torch.device("neuron", 3)),
    ({"neuron:1": "neuron:0"}, torch.device("neuron", 0)),
    ({"neuron:1": "cpu"}, torch.device("cpu")),
    ({"neuron:2": "neuron:0"}, torch.device("neuron", 1)),  # no entry for neuron:1: unchanged
])
def test_map_location(payload, location, want):
    cpu, obj = payload
    loaded = save_load(obj, map_location=location)
    for t in loaded.values():
        assert t.device == want
    check_values(loaded, cpu)


def test_cpu_checkpoint_to_neuron():
    cpu = torch.randn(3, 3)
    loaded = save_load({"w": cpu}, map_location="neuron:2")
    assert loaded["w"].device == torch.device("neuron", 2)
    assert torch.equal(loaded["w"].cpu(), cpu)


def test_shared_storage_and_views_survive():
    base = torch.arange(24.0).reshape(4, 6).to("neuron")
    view = base.t()[1:, ::2]
    loaded = save_load({"base": base, "view": view})
    lb, lv = loaded["base"], loaded["view"]
    assert lv.stride() == view.stride() and lv.storage_offset() == view.storage_offset()
    assert torch.equal(lv.cpu(), view.cpu())
    assert lv.untyped_storage().data_ptr() == lb.untyped_storage().data_ptr()
    lb.fill_(0)
    assert torch.equal(lv.cpu(), torch.zeros(lv.shape))


def test_module_state_dict(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.BatchNorm1d(4)).to("neuron:1")
    reference = {k: v.cpu() for k, v in model.state_dict().items()}
    path = tmp_path / "model.pt"
    torch.save(model.state_dict(), path)

    sd = torch.load(path)
    assert set(sd) == set(reference)
    for k, v in sd.items():
        assert v.device == torch.device("neuron", 1), k
        assert torch.equal(v.cpu(), reference[k]), k

    for location, want in [("cpu", "cpu"), ("neuron:2", "neuron:2"),
                           ({"neuron:1": "neuron:0"}, "neuron:0")]:
        sd = torch.load(path, map_location=location)
        for k, v in sd.items():
            assert v.device == torch.device(want), (location, k)
            assert torch.equal(v.cpu(), reference[k]), (location, k)

    # Loading into a module that lives on another neuron device copies the values there.
    fresh = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.BatchNorm1d(4)).to("neuron:0")
    fresh.load_state_dict(torch.load(path))
    for k, v in fresh.state_dict().items():
        assert v.device == torch.device("neuron", 0)
        assert torch.equal(v.cpu(), reference[k])


def test_whole_module_round_trip():
    model = torch.nn.Linear(3, 2).to("neuron:1")
    loaded = save_load(model, weights_only=False)
    assert loaded.weight.device == torch.device("neuron", 1)
    assert torch.equal(loaded.weight.cpu(), model.weight.cpu())
    x = torch.randn(4, 3)
    assert torch.equal(loaded(x.to("neuron:1")).cpu(), model(x.to("neuron:1")).cpu())


@pytest.mark.filterwarnings("ignore:TypedStorage is deprecated")
def test_storage_round_trip():
    s = torch.arange(8, dtype=torch.uint8).to("neuron:1").untyped_storage()
    loaded = save_load(s, weights_only=False)
    assert loaded.device == torch.device("neuron", 1)
    assert bytes(loaded.cpu()) == bytes(range(8))


def test_loading_onto_a_missing_device_raises():
    buf = io.BytesIO()
    torch.save(torch.ones(2, device="neuron:3"), buf)
    buf.seek(0)
    with pytest.raises(RuntimeError):
        torch.load(buf, map_location={"neuron:3": "neuron:9"})


def test_pickle_and_deepcopy():
    x = torch.randn(3, 4).to("neuron:2")
    for clone in (pickle.loads(pickle.dumps(x)), copy.deepcopy(x)):
        assert clone.device == torch.device("neuron", 2)
        assert torch.equal(clone.cpu(), x.cpu())
        assert clone.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    model = torch.nn.Linear(3, 2).to("neuron:1")
    twin = copy.deepcopy(model)
    assert twin.weight.device == torch.device("neuron", 1)
    assert torch.equal(twin.weight.cpu(), model.weight.cpu())

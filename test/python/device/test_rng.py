"""Random numbers on neuron: seeding through torch.manual_seed and torch.neuron.manual_seed,
generator state, explicit generators, per-device generators, and the distributions' shape."""

import pytest
import torch

import torch_neuron

# Random ops on neuron, each as f(generator or None) -> a new neuron tensor.
SAMPLERS = {
    "randn": lambda g: torch.randn(64, device="neuron", generator=g),
    "rand": lambda g: torch.rand(64, device="neuron", generator=g),
    "randint": lambda g: torch.randint(-50, 50, (64,), device="neuron", generator=g),
    "bernoulli_tensor": lambda g: torch.bernoulli(torch.full((64,), 0.5, device="neuron"),
                                                  generator=g),
    "bernoulli_p": lambda g: torch.empty(64, device="neuron").bernoulli_(0.3, generator=g),
    "normal_": lambda g: torch.empty(64, device="neuron").normal_(2.0, 3.0, generator=g),
    "uniform_": lambda g: torch.empty(64, device="neuron").uniform_(-2, 5, generator=g),
    "normal_sized": lambda g: torch.normal(1.0, 2.0, (64,), device="neuron", generator=g),
    "random_": lambda g: torch.empty(64, dtype=torch.int64, device="neuron").random_(generator=g),
    "exponential_": lambda g: torch.empty(64, device="neuron").exponential_(generator=g),
    "bf16_randn": lambda g: torch.randn(64, device="neuron", dtype=torch.bfloat16, generator=g),
}


def draw(name, generator=None):
    return SAMPLERS[name](generator).cpu()


@pytest.fixture(autouse=True)
def restore_rng():
    states = torch.neuron.get_rng_state_all()
    cpu_state = torch.get_rng_state()
    yield
    torch.neuron.set_rng_state_all(states)
    torch.set_rng_state(cpu_state)


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_torch_manual_seed_reproduces(name):
    torch.manual_seed(1234)
    first = draw(name)
    torch.manual_seed(1234)
    second = draw(name)
    assert torch.equal(first, second)
    torch.manual_seed(4321)
    assert not torch.equal(draw(name), first)


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_neuron_manual_seed_reproduces(name):
    # Only the neuron generator is seeded: the CPU generator must not matter.
    torch.neuron.manual_seed(7)
    first = draw(name)
    torch.randn(100)  # moves the CPU generator
    torch.neuron.manual_seed(7)
    second = draw(name)
    assert torch.equal(first, second)
    torch.neuron.manual_seed(8)
    assert not torch.equal(draw(name), first)


def test_consecutive_draws_differ():
    torch.manual_seed(0)
    assert not torch.equal(draw("randn"), draw("randn"))


def test_cpu_draws_do_not_disturb_the_neuron_stream():
    torch.manual_seed(5)
    a = draw("randn")
    b = draw("randn")
    torch.manual_seed(5)
    a2 = draw("randn")
    torch.randn(1000)  # CPU
    torch.rand(10)
    b2 = draw("randn")
    assert torch.equal(a, a2) and torch.equal(b, b2)


def test_rng_state_round_trip():
    torch.manual_seed(11)
    draw("randn")
    state = torch.neuron.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    first = [draw(name) for name in SAMPLERS]
    torch.neuron.set_rng_state(state)
    second = [draw(name) for name in SAMPLERS]
    for a, b in zip(first, second):
        assert torch.equal(a, b)
    # The state returned is a snapshot, not a live view.
    assert torch.equal(torch.neuron.get_rng_state(), torch.neuron.get_rng_state())
    assert not torch.equal(torch.neuron.get_rng_state(), state)


def test_rng_state_of_named_device():
    torch.manual_seed(3)
    state = torch.neuron.get_rng_state("neuron:2")
    with torch.neuron.device(2):
        a = draw("rand")
    torch.neuron.set_rng_state(state, 2)
    with torch.neuron.device(2):
        b = draw("rand")
    assert torch.equal(a, b)


def test_rng_state_all_round_trip():
    torch.manual_seed(21)
    states = torch.neuron.get_rng_state_all()
    assert len(states) == 4
    before = [torch.rand(8, device=f"neuron:{i}").cpu() for i in range(4)]
    torch.neuron.set_rng_state_all(states)
    after = [torch.rand(8, device=f"neuron:{i}").cpu() for i in range(4)]
    for a, b in zip(before, after):
        assert torch.equal(a, b)


def test_fork_rng_restores_neuron_state():
    torch.manual_seed(2)
    with torch.random.fork_rng(devices=[0], device_type="neuron"):
        torch.neuron.manual_seed(100)
        draw("randn")
    a = draw("randn")
    torch.manual_seed(2)
    assert torch.equal(a, draw("randn"))


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_explicit_generator(name):
    g = torch.Generator(device="neuron")
    assert g.device == torch.device("neuron", 0)
    g.manual_seed(42)
    first = draw(name, g)
    torch.neuron.manual_seed(0)  # the default generator does not matter
    g.manual_seed(42)
    assert torch.equal(draw(name, g), first)


def test_explicit_generator_leaves_default_stream_alone():
    torch.manual_seed(9)
    a = draw("randn")
    torch.manual_seed(9)
    g = torch.Generator(device="neuron").manual_seed(1)
    draw("randn", g)
    assert torch.equal(draw("randn"), a)


def test_generator_state_round_trip():
    g = torch.Generator(device="neuron").manual_seed(77)
    state = g.get_state()
    a = draw("rand", g)
    g.set_state(state)
    assert torch.equal(draw("rand", g), a)
    assert g.initial_seed() == 77
    clone = torch.Generator(device="neuron")
    clone.set_state(state)
    assert torch.equal(draw("rand", clone), a)


def test_generator_on_named_device():
    g = torch.Generator(device="neuron:2")
    assert g.device == torch.device("neuron", 2)


def test_cpu_generator_is_refused():
    with pytest.raises(RuntimeError, match="neuron"):
        torch.randn(3, device="neuron", generator=torch.Generator())
    assert torch.randn(3, device="neuron").device.type == "neuron"


def test_per_device_generators_are_independent():
    torch.manual_seed(31)
    a = draw("randn")  # neuron:0
    torch.manual_seed(31)
    with torch.neuron.device(1):
        torch.neuron.manual_seed(999)  # only the current device, neuron:1
        torch.randn(100, device="neuron")
    torch.randn(100, device="neuron:3")
    assert torch.equal(draw("randn"), a)


def test_manual_seed_seeds_current_device_only():
    torch.manual_seed(0)
    with torch.neuron.device(2):
        torch.neuron.manual_seed(55)
        assert torch.neuron.initial_seed() == 55
    assert torch.neuron.initial_seed() == 0


def test_manual_seed_all_and_same_seed_same_numbers_on_every_device():
    torch.neuron.manual_seed_all(13)
    draws = [torch.randn(16, device=f"neuron:{i}").cpu() for i in range(4)]
    for d in draws[1:]:
        assert torch.equal(d, draws[0])


def test_initial_seed():
    torch.manual_seed(123)
    assert torch.neuron.initial_seed() == 123
    torch.neuron.manual_seed(2**40 + 5)
    assert torch.neuron.initial_seed() == 2**40 + 5


def test_seed_and_seed_all():
    torch.neuron.seed()
    s = torch.neuron.initial_seed()
    torch.neuron.seed()
    assert torch.neuron.initial_seed() != s  # non-deterministic, equal with ~0 probability
    torch.neuron.seed_all()
    seeds = []
    for i in range(4):
        with torch.neuron.device(i):
            seeds.append(torch.neuron.initial_seed())
    assert len(set(seeds)) == 1


def test_default_generators():
    gens = torch.neuron.default_generators
    assert len(gens) == 4
    for i, g in enumerate(gens):
        assert g.device == torch.device("neuron", i)
    gens[1].manual_seed(17)
    with torch.neuron.device(1):
        assert torch.neuron.initial_seed() == 17
    # The same objects' state as torch.neuron's functions see.
    torch.manual_seed(8)
    state = gens[0].get_state()
    assert torch.equal(state, torch.neuron.get_rng_state(0))


# The numbers follow their distributions (the reference: the distribution's own moments).


def test_distributions():
    torch.manual_seed(0)
    n = 200_000
    x = torch.randn(n, device="neuron").cpu()
    assert abs(x.mean().item()) < 0.02 and abs(x.std().item() - 1) < 0.02
    u = torch.rand(n, device="neuron").cpu()
    assert u.min().item() >= 0 and u.max().item() < 1 and abs(u.mean().item() - 0.5) < 0.01
    r = torch.randint(3, 9, (n,), device="neuron").cpu()
    assert set(r.unique().tolist()) == set(range(3, 9))
    b = torch.empty(n, device="neuron").bernoulli_(0.3).cpu()
    assert set(b.unique().tolist()) <= {0.0, 1.0} and abs(b.mean().item() - 0.3) < 0.01
    p = torch.rand(n, device="neuron")
    bt = torch.bernoulli(p).cpu()
    assert abs(bt.mean().item() - p.cpu().mean().item()) < 0.01
    nm = torch.empty(n, device="neuron").normal_(5, 2).cpu()
    assert abs(nm.mean().item() - 5) < 0.05 and abs(nm.std().item() - 2) < 0.05
    un = torch.empty(n, device="neuron").uniform_(-3, 1).cpu()
    assert un.min().item() >= -3 and un.max().item() < 1
    e = torch.empty(n, device="neuron").exponential_(4.0).cpu()
    assert e.min().item() >= 0 and abs(e.mean().item() - 0.25) < 0.01


def test_random_ops_run_on_device():
    torch_neuron.clear_op_tracking()
    torch.manual_seed(0)
    for name in SAMPLERS:
        draw(name)
    # A random op falling back to the CPU would draw from the CPU generator.
    assert torch_neuron.get_fallback_ops() == {}

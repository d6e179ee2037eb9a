"""transformers' own N-D parallelism on neuron: `from_pretrained(path,
distributed_config=DistributedConfig(tp_plan="auto", tp_size=2, fsdp_size=2, ...))` on a 2x2
mesh of 4 ranks, then a few AdamW training steps, against the same script on CPU tensors with
Gloo (distributed/workers/hf_nd_parallel_worker.py).

  tp_fsdp  a tiny Llama: the model's tensor-parallel plan on the "tp" axis, FSDP2 on the "fsdp"
           axis (parameters become 2-D DTensors on the (fsdp, tp) mesh).
  ep       a tiny Mixtral-style MoE with 4 experts: the dense layers as tp_fsdp, the experts
           split by expert over all 4 ranks (ep_size=4, the model's ep plan: tokens reach their
           experts through all-to-all).

Both runs load the same saved weights, built here on the CPU (so the neuron generator plays no
part). Tolerance: none. The neuron run computes every op with the CPU's ATen kernels on the same
shards and Gloo moves the same bytes in the same order, so losses and final parameters are
equal bit for bit (measured).

Per case, the two launches (4 ranks each) start at once when the first test of the case asks
for them; on a busy 2-core machine that test takes about 30 s.
"""

import concurrent.futures
import io

import pytest
import torch

from conftest import assert_ok, run_ranks

transformers = pytest.importorskip("transformers", reason="install with scripts/install.sh")
pytest.importorskip("transformers.distributed", reason="transformers without DistributedConfig")

pytestmark = pytest.mark.extended  # 4 ranks on a 2x2 mesh (test/README.md)

WORLD = 4
TIMEOUT = 180  # per launch: about 40 s on a busy 2-core machine
SHAPE = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
             num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=64)
MODELS = {
    "tp_fsdp": (transformers.LlamaConfig, {}),
    "ep": (transformers.MixtralConfig, dict(num_local_experts=4, num_experts_per_tok=2)),
}
CPU_ENV = {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}  # the CPU reference never loads torch_neuron


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf_nd")
    initial = {}
    for case, (config_class, extra) in MODELS.items():
        torch.manual_seed(0)
        model = transformers.AutoModelForCausalLM.from_config(config_class(**SHAPE, **extra))
        model.save_pretrained(root / case)
        initial[case] = {k: v.detach().clone() for k, v in model.named_parameters()}
    return root, initial


def launch(root, device, case):
    out = root / device / case
    out.mkdir(parents=True, exist_ok=True)  # (a failed first launch is retried by the next test)
    results = run_ranks("hf_nd_parallel_worker.py", WORLD,
                        ["--device", device, "--out", str(out), f"--case={case}={root / case}"],
                        env=CPU_ENV if device == "cpu" else None, timeout=TIMEOUT)
    for result in results:
        assert_ok(result)
    return [torch.load(io.BytesIO((out / f"{case}_rank{rank}.pt").read_bytes()))
            for rank in range(WORLD)]


@pytest.fixture(scope="module")
def runs(saved):
    """runs(case)["neuron" or "cpu"]: what the ranks saved. A case's two launches start at once
    when a test first asks for it (about 30 s on a busy 2-core machine)."""
    root, _ = saved
    done = {}

    def get(case):
        if case not in done:
            with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
                futures = {device: pool.submit(launch, root, device, case)
                           for device in ("neuron", "cpu")}
                done[case] = {device: future.result() for device, future in futures.items()}
        return done[case]

    return get


@pytest.mark.parametrize("case", sorted(MODELS))
def test_training_on_2x2_mesh_matches_cpu_gloo(saved, runs, case):
    initial = saved[1][case]
    for rank in range(WORLD):
        n, c = runs(case)["neuron"][rank], runs(case)["cpu"][rank]
        assert (n["backend"], c["backend"]) == ("neuron", "gloo")
        assert n["dp_index"] == c["dp_index"] == rank // 2  # ranks (0, 1) and (2, 3) share a batch
        assert torch.equal(n["losses"], c["losses"]), (rank, n["losses"], c["losses"])
        assert n["params"].keys() == c["params"].keys() == initial.keys()
        for name, p in n["params"].items():
            assert torch.equal(p, c["params"][name]), (case, rank, name)
            assert not torch.equal(p, initial[name]), (case, rank, name)  # it trained
    losses = [r["losses"] for r in runs(case)["neuron"]]
    assert torch.equal(losses[0], losses[1]) and torch.equal(losses[2], losses[3])
    assert not torch.equal(losses[0], losses[2])  # the two FSDP groups saw different batches


@pytest.mark.parametrize("case", sorted(MODELS))
def test_parameters_are_2d_dtensors_on_the_rank_core(runs, case):
    for rank in range(WORLD):
        n, c = runs(case)["neuron"][rank], runs(case)["cpu"][rank]
        assert n["model_device"] == f"neuron:{rank}" and n["world"] == WORLD
        for name, where in n["layout"].items():
            assert where["local_device"] == f"neuron:{rank}", (name, where)
            # The same layout as on the CPU, shard shapes included.
            assert {**where, "local_device": "cpu"} == c["layout"][name], (name, where)
            if name.endswith(("proj.weight", "embed_tokens.weight", "lm_head.weight")):
                assert where["mesh"] == ("fsdp", "tp"), (name, where)  # TP and FSDP
            elif ".experts." in name:
                assert where["mesh"] == ("efsdp", "ep"), (name, where)
                assert where["local_shape"][0] == 1, (name, where)  # 1 of the 4 experts
            else:
                assert where["mesh"] == ("fsdp",), (name, where)  # norms, router: FSDP only


@pytest.mark.parametrize("case", sorted(MODELS))
def test_collectives_on_neuron_without_fallback(runs, case):
    want = {"c10d::all_gather", "c10d::all_reduce", "c10d::reduce_scatter"}
    if case == "ep":
        want.add("c10d::all_to_all")  # the routed tokens
    counts = [r["collectives"] for r in runs(case)["neuron"]]
    assert set(counts[0]) == want, counts[0]
    assert all(c == counts[0] for c in counts), counts
    assert all(r["fallback_ops"] == {} for r in runs(case)["neuron"])

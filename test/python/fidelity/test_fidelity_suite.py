"""The fidelity suite's smoke subset (`python -m torch_neuron fidelity`, torch_neuron/fidelity):
a few anchors through the command line, the goals and the physical-peak check against hand
computations on made-up predictions, and docs/fidelity.md listing every anchor. The full suite
is `./scripts/fidelity.sh` (its own CI step; test/fidelity)."""

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import NEURON_ENV_VARS
from torch_neuron.fidelity import cli, report
from torch_neuron.fidelity.anchor import COUNTS, GOALS, Anchor
from torch_neuron.fidelity.anchors import ANCHORS

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
# Two worker processes (trn1.2xlarge, trn1.32xlarge), seconds. The matmul tutorial's anchors
# time NKI kernels of 40,000 to 100,000 instructions (5-15 s each): extended only.
SMOKE = ["layernorm-fp32-4096x8192", "mamba-v1-fp32-256x512",
         "alltoallv-r2-N2-1048608B-fp32-alltoallv", "allr-r2-1024B-fp32-sweep",
         "allr-r64-N2-1073741824B-fp32-multi-instance"]
# Excluded, and beyond what the simulator can run: printed with '-' for its prediction.
NO_PREDICTION = "mamba-v2-fp32-4096x8192"


def fidelity(*args, timeout=120):
    env = {k: v for k, v in os.environ.items() if k not in NEURON_ENV_VARS}
    return subprocess.run([sys.executable, "-m", "torch_neuron", "fidelity", *args], env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def smoke():
    args = [a for name in SMOKE + [NO_PREDICTION] for a in ("--anchor", name)]
    out = fidelity(*args, "--json", "--sources")
    lines = out.stdout.strip().splitlines()
    return out, json.loads(lines[-1]), "\n".join(lines[:-1])


def test_smoke_anchors_are_predicted_and_printed(smoke):
    out, result, text = smoke
    assert out.returncode in (0, 1), out.stderr[-3000:]
    assert out.returncode == (0 if result["summary"]["goals_met"] else 1)
    header = text.splitlines()[0].split()
    assert header[:6] == ["anchor", "kind", "status", "instance", "measured", "predicted"]
    for name in SMOKE:
        prediction = result["predictions"][name]
        assert "error" not in prediction, prediction
        assert prediction["predicted"] > 0
        assert re.search(rf"^{re.escape(name)}\s", text, re.M), name
    # A row the model does not describe is printed with its reason and counted in no goal.
    assert "excluded (1: alltoallv-r2-N2-1048608B-fp32-alltoallv): " in text
    assert result["summary"]["kinds"]["op"]["counting"] == 2
    # A Mamba v2 row whose tiles AWS's compiler spilled: no prediction, said so, not counted.
    assert result["predictions"][NO_PREDICTION] == {"predicted": None,
                                                    "bound": pytest.approx(0.985, rel=1e-3)}
    row = re.search(rf"^{NO_PREDICTION}\s.*$", text, re.M).group(0).split()
    assert row[2] == "excluded" and row[5:7] == ["-", "-"]
    assert "does not model the compiler's spills" in text
    assert "loose (2: allr-r2-1024B-fp32-sweep, allr-r64-N2-" in text
    assert "sources:" in text and "nccom-test.rst" in text


@pytest.mark.extended
def test_the_matmul_anchor_is_never_faster_than_the_documented_peak():
    # Hand computation: 2*M*K*N at Trn1's documented 190 BF16 TFLOPS per chip, 2 cores.
    out = fidelity("--anchor", "matmul-bf16-4096x8192x8192", "--json")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    peak_ms = 2 * 4096 * 8192 * 8192 / (190e12 / 2) * 1e3
    prediction = result["predictions"]["matmul-bf16-4096x8192x8192"]
    assert prediction["bound"] == pytest.approx(peak_ms)
    assert prediction["predicted"] >= peak_ms


def _anchor(name, kind="op", measured=1.0, status=COUNTS, reason=""):
    return Anchor(name, kind, "trn1.2xlarge", "w", measured, "ms", "s", lambda mode: 0.0,
                  status=status, reason=reason)


@pytest.mark.parametrize("ratios, met", [
    ([1.0, 1.05, 0.95], True),            # median 5%, all in the band
    ([1.0, 1.3, 1.0], False),             # one outside 0.8x-1.25x
    ([1.15, 0.88, 1.2], False),           # all in the band, median 15% > 10%
])
def test_op_goals(ratios, met):
    anchors = [_anchor(f"a{i}") for i in range(len(ratios))]
    results = {a.name: {"predicted": r, "bound": 0.5} for a, r in zip(anchors, ratios)}
    s = report.summary(anchors, results)
    assert s["kinds"]["op"]["goals_met"] is met and s["goals_met"] is met
    assert s["kinds"]["op"]["median_abs_error"] == pytest.approx(
        sorted(abs(r - 1) for r in ratios)[1])


def test_rows_that_do_not_count_are_printed_but_not_counted():
    anchors = [_anchor("good"), _anchor("off", status="excluded", reason="another instance")]
    results = {"good": {"predicted": 1.0}, "off": {"predicted": 10.0}}
    s = report.summary(anchors, results)
    assert s["goals_met"] and s["kinds"]["op"]["counting"] == 1
    text = report.table(anchors, results)
    assert re.search(r"^off\s+op\s+excluded\s.*10\.00ms\s+10\.00", text, re.M)


def test_a_prediction_below_its_physical_peak_fails():
    anchors = [_anchor("fast")]
    s = report.summary(anchors, {"fast": {"predicted": 1.0, "bound": 1.01}})
    assert s["below_peak"] == ["fast"] and not s["goals_met"]
    assert "<peak" in report.table(anchors, {"fast": {"predicted": 1.0, "bound": 1.01}})


def test_end_to_end_band_and_exit_status(monkeypatch, capsys):
    assert GOALS["end-to-end"] == {"median_abs_error": 0.15, "band": (0.67, 1.5)}
    names = [a.name for a in ANCHORS if a.kind == "end-to-end" and a.status == COUNTS][:2]
    measured = {a.name: a.measured for a in ANCHORS}
    for factor, code in ((1.1, 0), (1.6, 1)):
        monkeypatch.setattr(cli.runner, "predict", lambda anchors, eager=False, timeout=0: {
            a.name: {"predicted": measured[a.name] * factor} for a in anchors})
        args = [x for n in names for x in ("--anchor", n)]
        assert cli.main(args) == code
        assert ("all goals met" if code == 0 else "goals NOT met") in capsys.readouterr().out


def test_a_failing_workload_fails_the_run(monkeypatch, capsys):
    monkeypatch.setattr(cli.runner, "predict",
                        lambda anchors, eager=False, timeout=0: {a.name: {"error": "boom"}
                                                               for a in anchors})
    assert cli.main(["--anchor", SMOKE[0]]) == 1
    assert "boom" in capsys.readouterr().err


def test_the_busy_fraction_is_a_sanity_row_not_an_anchor():
    (busy,) = [a for a in ANCHORS if a.unit == "%"]
    assert busy.status == "sanity" and "by construction" in busy.reason


def test_every_anchor_that_does_not_count_says_why_and_every_source_is_pinned():
    for a in ANCHORS:
        assert (a.status == COUNTS) == (not a.reason), a.name
        assert re.search(r"@[0-9a-f]{7}", a.source), (a.name, a.source)
    kinds = {k: [a for a in ANCHORS if a.kind == k and a.status == COUNTS] for k in GOALS}
    # 8 inference rows at batch 1 and 8 at larger batches, 3 training rows
    assert len(kinds["end-to-end"]) == 19


def test_the_doc_table_lists_every_anchor():
    doc = open(os.path.join(REPO, "docs", "fidelity.md")).read()
    block = doc.split(cli.DOC_BEGIN)[1].split(cli.DOC_END)[0]
    rows = [[c.strip() for c in line.strip("|").split("|")]
            for line in block.strip().splitlines() if line.startswith("| ")][1:]
    assert [r[0] for r in rows] == [a.name for a in ANCHORS]
    for row, a in zip(rows, ANCHORS):
        assert row[1:5] == [a.kind, a.status, a.instance, report.fmt(a.measured, a.unit)], row


def test_anchor_names_are_patterns_too():
    """--anchor takes names and shell-style patterns; the on-request rows they name run."""
    chosen = cli.select(None, ["*-trn1-tp32-in128-out128-*", "matmul-bf16-4096x8192x8192"])
    assert [a.name for a in chosen] == [
        "matmul-bf16-4096x8192x8192",
        "llama-3-70b-trn1-tp32-in128-out128-ttft", "llama-3-70b-trn1-tp32-in128-out128-tpot",
        "llama-2-70b-trn1-tp32-in128-out128-ttft", "llama-2-70b-trn1-tp32-in128-out128-tpot"]
    assert len(cli.select("op", ["*"])) == len([a for a in ANCHORS if a.kind == "op"])


@pytest.mark.parametrize("args, message", [
    (["--bogus"], "--bogus"), (["--anchor", "nope"], "unknown anchor 'nope'"),
    (["--anchor", "llama-*", "--anchor", "nope-*"], "unknown anchor 'nope-*'"),
    (["--kind", "nope"], "invalid choice")])
def test_bad_usage_is_named(args, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(args)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_help_lists_the_options_without_running():
    out = fidelity("--help", timeout=60)
    assert out.returncode == 0
    for option in ("--json", "--sources", "--kind", "--eager", "--markdown", "--anchor"):
        assert option in out.stdout
    assert "peak bound" not in out.stdout  # the comparison did not run


def test_inference_outputs_return_to_the_host_as_the_traced_model_returns_them():
    """The encoder workloads time what neuronperf times, model(input) of a traced model, whose
    outputs come back to the host: in predict-only mode the copy is still charged, a DMA over
    the host link (trnsim transfer.h: 2 us setup, 25 GB/s, both assumptions), and execution is
    off again after it. The end event's record takes its own time (_EVENT_RECORD_NS)."""
    import torch

    import torch_neuron
    from torch_neuron.fidelity import workloads

    with torch_neuron.predict_only():
        logits = torch.empty(128, 50_000, device="neuron")
        ms = workloads.timed_ms(lambda: workloads._to_host([logits]))
        assert not torch_neuron._C._execute_enabled()
    copy_ns = 2000 + 128 * 50_000 * 4 / 25.0
    assert ms == pytest.approx((copy_ns + torch_neuron._C._EVENT_RECORD_NS) / 1e6, rel=1e-9)


def test_encoders_compute_as_matmult_bf16_auto_cast_does():
    """The inference tables' Matmult-BF16: a matmul's operands in BF16, its result FP32, the
    rest of the FP32 model in FP32 (neuronx-cc --auto-cast matmult). A Linear and the
    attention of the encoder workload, against the same arithmetic on the CPU."""
    import torch

    from torch_neuron.fidelity import workloads

    torch.manual_seed(0)
    cpu = torch.nn.Linear(64, 32)
    linear = torch.nn.Linear(64, 32).to("neuron")
    linear.load_state_dict(cpu.state_dict())
    workloads._matmult_bf16_linear(linear)
    x = torch.randn(8, 64)
    out = linear(x.to("neuron"))
    expected = torch.nn.functional.linear(x.bfloat16(), cpu.weight.bfloat16()).float() + cpu.bias
    assert out.dtype == torch.float32 and linear.weight.dtype == torch.float32
    torch.testing.assert_close(out.cpu(), expected)

    q, k, v = (torch.randn(1, 2, 16, 8) for _ in range(3))
    module = torch.nn.Module()
    module.is_causal = False
    attn, _ = workloads._matmult_bf16_attention(module, q.to("neuron"), k.to("neuron"),
                                                v.to("neuron"), None)
    reference = torch.nn.functional.scaled_dot_product_attention(q.bfloat16(), k.bfloat16(),
                                                                 v.bfloat16())
    assert attn.dtype == torch.float32
    torch.testing.assert_close(attn.cpu(), reference.float().transpose(1, 2))


# -- scale anchors: published Llama jobs through the virtual world (issue 26, item 8) --------


def test_the_scale_anchors_are_listed_and_only_one_run_is_in_the_default_set():
    from torch_neuron.fidelity import scale_workloads

    out = fidelity("--list", "--kind", "scale", timeout=60)
    scale = [a for a in ANCHORS if a.kind == "scale"]
    listed = [line.split()[0] for line in out.stdout.splitlines()]
    assert out.returncode == 0 and listed == [a.name for a in scale]
    # Training throughput and inference latency, each from AWS's published tables.
    assert any(a.name.endswith("pretrain-32-nodes") for a in scale)
    assert {a.name.rsplit("-", 1)[1] for a in scale} >= {"ttft", "tpot"}
    for a in scale:
        assert "aws-neuron-sdk@" in a.source and "the example differs" in a.note, a.name
    # Without --kind scale the suite runs only the anchors of one short virtual run.
    default = cli.select(None, None)
    assert {a.worker for a in default if a.kind == "scale"} == {
        "70b-tp64-trn2.48xlarge-prompt10000-cache12800"}
    assert cli.select(None, None, everything=True) == ANCHORS
    # Each run models the collective algorithms of the release that measured it (trnsim Note
    # [Collective algorithms by release]): Neuron 2.18's for the trn1 decoder tables' rows,
    # today's for the rest (Neuron 2.24 training, the trn2 tutorial).
    for a in scale:
        settings = scale_workloads.run_settings(a.predict.args[0])
        old_release = "Neuron 2.18" in a.source
        assert settings == ({"TORCH_NEURON_COLLECTIVE_ALGORITHMS": "neuron-2.18"}
                            if old_release else {}), a.name
        assert ("TORCH_NEURON_COLLECTIVE_ALGORITHMS=neuron-2.18" in a.workload) == old_release


def test_the_scale_workloads_parse_what_the_examples_print(monkeypatch):
    """The lines parsed are the examples' own (their f-strings, in examples/llama_*.py)."""
    from torch_neuron.fidelity import scale_workloads

    for script, line in (("llama_pretrain.py", 'f"throughput: {'),
                         ("llama_generate.py", 'f"time to first token: {')):
        assert line in open(os.path.join(REPO, "examples", script)).read(), script
    printed = ("step 1  loss nan  time 23219.500 ms\n"
               "throughput: 44.10 sequences/s, 361267 tokens/s, MFU 30.00% (step 23219.500 ms,"
               " mean of 1; model FLOPs 6N + 12LHQT per token over 1024 NeuronCores' peak bf16)\n"
               "time to first token: 812.125 ms; per output token: 19.750 ms (50.6 tokens/s)\n")
    monkeypatch.setattr(scale_workloads, "virtual_run", lambda *run: (printed, 1.0))
    run = ("llama_pretrain.py", 1, 2, "trn1.32xlarge", "0", ())
    assert scale_workloads.step_ms(run, "eager") == 23219.5
    assert scale_workloads.first_token_ms(run, "compiled") == 812.125
    assert scale_workloads.per_token_ms(run, "compiled") == 19.75
    monkeypatch.setattr(scale_workloads, "virtual_run", lambda *run: ("no such line", 1.0))
    with pytest.raises(RuntimeError, match="printed no throughput line"):
        scale_workloads.step_ms(run, "eager")


def test_decode_steps_run_at_the_serving_stacks_mean_bucket():
    """Note [Decode cache buckets]: the buckets as Transformers NeuronX and NxD Inference make
    them, and the mean cache length of a row's decode steps."""
    from torch_neuron.fidelity import scale_anchors as s

    assert s.token_buckets_tnx(1152) == [128, 256, 512, 1024, 1152]
    assert s.token_buckets_tnx(256) == [128, 256]
    # NxD Inference stops its powers of two at 2^round(log2(seq_len)): no 8192 + 513 pair.
    assert s.token_buckets_nxdi(12800) == [128, 256, 512, 1024, 2048, 4096, 8192, 12800]
    assert s.token_buckets_nxdi(9000) == [128, 256, 512, 1024, 2048, 4096, 9000]
    # 128 in, 128 out: the steps hold positions 129..255, all in the 256 bucket.
    assert s.mean_decode_bucket(s.token_buckets_tnx(256), 128, 128) == 256
    # 1024 in, 2048 out of 3072: 1024 steps in the 2048 bucket (positions 1025..2048), 1023 in
    # the 3072 one.
    assert s.mean_decode_bucket(s.token_buckets_tnx(3072), 1024, 2048) == round(
        (1024 * 2048 + 1023 * 3072) / 2047)
    run = {a.name: a.predict.args[0] for a in s.ANCHORS if a.name.endswith("-tpot")}
    example_args = run["llama-2-70b-trn1-tp32-in1024-out2048-tpot"][5]
    assert example_args[example_args.index("--cache-len") + 1] == "2560"
    # The throughput table's rows run the batch the row names, over the same buckets.
    batched = run["llama-2-7b-trn1-tp32-b8-in128-out8064-tpot"][5]
    assert batched[batched.index("--batch") + 1] == "8"
    assert batched[batched.index("--cache-len") + 1] == "5546"


@pytest.mark.extended
def test_a_scale_workload_runs_the_example_as_a_virtual_world():
    from torch_neuron.fidelity import scale_workloads

    run = ("llama_generate.py", 1, 4, "trn2.48xlarge", "0",
           ("--size", "tiny", "--tp", "4", "--prompt-len", "8", "--new-tokens", "2"))
    assert scale_workloads.first_token_ms(run, "eager") > 0
    assert scale_workloads.per_token_ms(run, "eager") > 0


def test_the_scale_anchors_are_documented():
    doc = open(os.path.join(REPO, "docs", "fidelity.md")).read()
    scale_doc = open(os.path.join(REPO, "docs", "scale.md")).read()
    assert "## Published Llama measurements beside the predictions" in scale_doc
    for a in ANCHORS:
        if a.kind == "scale":
            assert f"| {a.name} |" in doc, a.name

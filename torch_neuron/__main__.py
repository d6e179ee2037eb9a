"""Command line of torch_neuron.

    python -m torch_neuron run SCRIPT.py [ARGS] [--instance NAME] [--trace OUT.json] [--plot OUT.png]
    python -m torch_neuron run --nproc-per-node N [--nnodes M] SCRIPT.py [ARGS] [--instance NAME]
                               [--trace OUT.json]   # a distributed script, one report of all ranks
    python -m torch_neuron run --no-execute SCRIPT.py [ARGS]   # predict only: nothing computed
    python -m torch_neuron run --virtual --nnodes N --nproc-per-node M [--run-ranks 0,128]
                               SCRIPT.py [ARGS]    # a job of N*M ranks, only LIST run
    python -m torch_neuron fidelity [--kind K] [--eager] [--sources] [--json]  # published
                                                   # Trainium measurements vs the model
    python -m torch_neuron info [--instance NAME]  # the simulated Trainium instance
    python -m torch_neuron env [--markdown]        # every setting: value, source, doc
    python -m torch_neuron cmake-prefix-path       # for cmake -DCMAKE_PREFIX_PATH=... (C++)
    python -m torch_neuron run --help              # the options of run; --help: the commands

`run` executes an unmodified script that uses device "neuron" and prints, at its end, how long
its work would take on the chosen Trainium instance and where the time goes. Its options may
come before or after the script's own arguments; put script arguments after `--` if they
clash with them. With --no-execute the script runs in predict-only mode (TORCH_NEURON_EXECUTE=0):
every op is timed and allocates HBM, nothing is computed, so full-size models are predicted in
seconds; what needs values (printing a tensor, .item() of an integer) raises. With
--nproc-per-node, --no-execute runs every rank in predict-only mode: collectives are timed and
agreed on, no data moves.

With --virtual, `run` predicts a job of any size from a few processes: only the ranks of
--run-ranks (default 0) run, in predict-only mode, and see the whole world; collectives over
groups with virtual ranks are timed for the whole group (docs/scale.md).

With --nproc-per-node N, `run` launches a distributed script as torchrun would: N ranks per
simulated instance (rank on neuron:LOCAL_RANK, backend "neuron"), M instances with --nnodes M,
all on this machine's loopback. It then prints one report of every rank (predicted time,
compute, communication and exposed communication per rank, the collectives with their sizes,
algorithms, links and bus bandwidths, CPU fallback ops, peak HBM), and --trace writes one
trace with a process per rank. The exit code is nonzero if a rank failed; the end of that
rank's stderr is shown.
"""

import argparse
import os
import runpy
import signal
import sys
import traceback

import torch

import torch_neuron
from torch_neuron.distributed import report as _distributed_report


def cmake_prefix_path(args: argparse.Namespace) -> None:
    # find_package(TorchNeuron) also needs Torch's config, so both directories are printed.
    print(f"{torch_neuron.cmake_prefix_path};{torch.utils.cmake_prefix_path}")


def select_instance(name: str | None) -> None:
    """Picks the simulated instance; must happen before the first device use."""
    if not name:
        return
    os.environ["TORCH_NEURON_INSTANCE"] = name
    try:
        actual = torch_neuron._C._instance_info()["name"]
    except RuntimeError as e:  # an unknown name: its message, without the C++ stack
        raise RuntimeError(str(e).split("\nException raised from", 1)[0]) from None
    if actual != name:
        raise RuntimeError(f"the simulator already runs {actual}; set TORCH_NEURON_INSTANCE={name} "
                           "before starting Python instead")


def info(args: argparse.Namespace) -> None:
    select_instance(args.instance)
    inst = torch_neuron._C._instance_info()
    count = torch.neuron.device_count()
    print(f"instance:      {inst['name']} ({inst['chips']} x {inst['chip']}, {inst['core_version']})")
    print(f"devices:       {count} (neuron:0..neuron:{count - 1})")
    print(f"HBM per core:  {torch.neuron.get_device_properties(0).total_memory / 2**30:.1f} GiB")
    # The model's peaks come from the TensorE clock and its 128x128 array; the product page's
    # per-chip figure is shown beside them.
    print(f"peak BF16:     {inst['peak_bf16_tflops_per_core']:.1f} TFLOPS per core "
          f"(product page: {inst['bf16_tflops_per_chip']:g} per chip)")
    print(f"peak FP32:     {inst['peak_fp32_tflops_per_core']:.1f} TFLOPS per core")
    print(f"HBM streaming: {inst['stream_gbps_per_core']:.0f} GB/s per core")


def env(args: argparse.Namespace) -> None:
    """One line per setting of the settings table (Note [Settings table]); --markdown prints
    the table docs/settings.md holds instead."""
    if args.markdown:
        print(settings_markdown())
        return
    for name, value, source, doc in torch_neuron._C._settings():
        if source == "invalid":  # the value is the error, which names the variable
            print(f"{name} is invalid: {value}")
        else:
            print(f"{name}={value}  ({source})  {doc}")


def settings_markdown() -> str:
    """The settings table as the Markdown table of docs/settings.md."""
    lines = ["| Setting | Type | Default | What it does |", "|---|---|---|---|"]
    for name, kind, default, choices, doc in torch_neuron._C._setting_specs():
        if kind == "choice":
            kind = " / ".join(f"`{c}`" for c in choices.split("|"))
        default = f"`{default}`" if default else "unset"
        doc = doc.replace("|", "/").replace("<", "&lt;").replace(">", "&gt;")
        lines.append(f"| `{name}` | {kind} | {default} | {doc} |")
    return "\n".join(lines)


RUN_OPTIONS = {"--instance": "instance", "--trace": "trace", "--plot": "plot",
               "--nproc-per-node": "nproc", "--nproc_per_node": "nproc", "--nnodes": "nnodes",
               "--run-ranks": "run_ranks",
               # Internal: a rank started by the launcher writes its records to this directory.
               "--rank-report-dir": "rank_report_dir"}
# Options that take no value.
RUN_FLAGS = {"--no-execute": "no_execute", "--virtual": "virtual"}
RUN_USAGE = ("usage: python -m torch_neuron run [--nproc-per-node N [--nnodes M] [--virtual "
             "[--run-ranks LIST]]] SCRIPT.py [ARGS] [--instance NAME] [--trace OUT.json] "
             "[--plot OUT.png] [--no-execute]")
RUN_HELP_FLAGS = ("-h", "--help")
RUN_HELP = RUN_USAGE + """

Runs SCRIPT.py on the simulated Trainium instance and prints, at its end, how long its work
would take there and where the time goes.

options:
  -h, --help            show this help message and exit (before SCRIPT.py; after it,
                        --help is the script's)
  --instance NAME       simulated instance type (default: TORCH_NEURON_INSTANCE)
  --trace OUT.json      write a trace of the run (open in https://ui.perfetto.dev)
  --plot OUT.png        draw the run's timeline (one process only)
  --no-execute          predict only: every op is timed, nothing is computed
  --nproc-per-node N    run a distributed script as torchrun would, N ranks per instance
  --nnodes M            with --nproc-per-node: M simulated instances (default 1)
  --virtual             with --nproc-per-node: run only the ranks of --run-ranks, predict-only;
                        the others are virtual (a job of any size from a few processes)
  --run-ranks LIST      with --virtual: the global ranks that run, e.g. 0 or 0,128 (default 0)

The options may come before or after the script's own arguments; put the script's arguments
after -- if they clash with them."""


def split_run_arguments(tokens: list[str]) -> tuple[dict, str | None, list[str]]:
    """(our options, script, script arguments) from everything after `run`."""
    options, script, script_args = {}, None, []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        name, has_value, value = token.partition("=")
        if token == "--":
            script_args += tokens[i + 1:]
            break
        if token in RUN_HELP_FLAGS and script is None:
            # Before the script only: `run train.py --help` asks the script, as torchrun does.
            options["help"] = True
        elif token in RUN_FLAGS:
            options[RUN_FLAGS[token]] = True
        elif name in RUN_OPTIONS:
            if not has_value:
                i += 1
                if i == len(tokens):
                    raise SystemExit(f"python -m torch_neuron run: {name} needs a value")
                value = tokens[i]
            options[RUN_OPTIONS[name]] = value
        elif script is None:
            if token.startswith("-"):  # not a script: a mistyped option
                print(f"python -m torch_neuron run: unknown option {token} (see "
                      "python -m torch_neuron run --help)", file=sys.stderr)
                raise SystemExit(2)
            script = token
        else:
            script_args.append(token)
        i += 1
    return options, script, script_args


def positive_int(options: dict, name: str, flag: str) -> int:
    value = options.get(name, "1")
    if not value.isdigit() or int(value) < 1:
        raise SystemExit(f"python -m torch_neuron run: {flag} needs a positive integer, "
                         f"not {value!r}")
    return int(value)


def launch_ranks(options: dict, script: str, script_args: list[str]) -> int:
    """`run --nproc-per-node N [--nnodes M]`: the ranks under torchrun, one report."""
    from torch_neuron.distributed import launcher as _launcher

    nproc = positive_int(options, "nproc", "--nproc-per-node")
    nnodes = positive_int(options, "nnodes", "--nnodes")
    if "plot" in options:
        print("python -m torch_neuron run: --plot draws one process; with --nproc-per-node use "
              "--trace", file=sys.stderr)
        return 2
    count = torch.neuron.device_count()
    if nproc > count:
        name = torch_neuron._C._instance_info()["name"]
        print(f"python -m torch_neuron run: error: --nproc-per-node {nproc} needs {nproc} "
              f"NeuronCores, the simulated {name} has {count}; choose a larger instance "
              "with --instance", file=sys.stderr)
        return 1
    if options.get("virtual"):
        from torch_neuron.distributed import virtual as _virtual

        try:
            run_ranks = _virtual.parse_run_ranks(options.get("run_ranks", "0"), nproc * nnodes)
        except ValueError as e:
            print(f"python -m torch_neuron run: error: {e}", file=sys.stderr)
            return 2
        return _virtual.launch_virtual(nproc, nnodes, run_ranks, script, script_args,
                                       options.get("instance"), options.get("trace"))
    return _launcher.launch(nproc, nnodes, script, script_args, options.get("instance"),
                            options.get("trace"), execute=not options.get("no_execute"))


def run(tokens: list[str]) -> int:
    options, script, script_args = split_run_arguments(tokens)
    if options.get("help"):
        print(RUN_HELP)
        return 0
    if script is None:
        print(RUN_USAGE, file=sys.stderr)
        return 2
    if not os.path.isfile(script):
        print(f"python -m torch_neuron run: no such script: {script}", file=sys.stderr)
        return 2
    try:
        select_instance(options.get("instance"))
    except RuntimeError as e:  # a bad --instance
        print(f"python -m torch_neuron run: error: {e}", file=sys.stderr)
        return 1
    distributed = "nproc" in options or "nnodes" in options
    if ("virtual" in options or "run_ranks" in options) and not distributed:
        print("python -m torch_neuron run: --virtual and --run-ranks describe a distributed job: "
              "give its size with --nproc-per-node N [--nnodes M]", file=sys.stderr)
        return 2
    if "run_ranks" in options and "virtual" not in options:
        print("python -m torch_neuron run: --run-ranks needs --virtual (without it every rank "
              "runs)", file=sys.stderr)
        return 2
    if distributed:
        return launch_ranks(options, script, script_args)
    if options.get("no_execute"):
        torch_neuron.set_execute(False)
    rank_report_dir = options.get("rank_report_dir")
    if rank_report_dir:
        from torch_neuron.distributed.launcher import die_with_parent

        die_with_parent(signal.SIGKILL)  # Note [Launcher processes]
    sys.argv = [script] + script_args
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    code, error = 0, None
    with torch_neuron.profiler.profile() as prof:
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if not isinstance(e.code, (int, type(None))):
                print(e.code, file=sys.stderr)  # sys.exit("message"), as Python prints it
                error = str(e.code)
        except Exception as e:
            # The script failed: its traceback, as `python SCRIPT.py` shows it (without the
            # frames of this launcher), then the report of the work it did until then.
            tb = e.__traceback__
            while tb is not None and tb.tb_frame.f_code.co_filename != script:
                tb = tb.tb_next
            error = "".join(traceback.format_exception(type(e), e, tb or e.__traceback__))
            print(error, end="", file=sys.stderr)
            code = 1
            if rank_report_dir:
                record_for_torchrun(e)
    if rank_report_dir:
        report = _distributed_report.rank_report(prof, code, error)
        _distributed_report.write_rank_report(rank_report_dir, report)
        return code
    print("\n" + "=" * 30 + " torch_neuron report " + "=" * 30)
    print(prof.summary())
    if "trace" in options:
        prof.export_chrome_trace(options["trace"])
        print(f"trace: {options['trace']} (open in https://ui.perfetto.dev)")
    if "plot" in options:
        prof.plot(options["plot"])
        print(f"plot: {options['plot']}")
    return code


def record_for_torchrun(e: BaseException) -> None:
    """Writes the error where torchrun's failure summary reads it (TORCHELASTIC_ERROR_FILE),
    as @torch.distributed.elastic.multiprocessing.errors.record would."""
    from torch.distributed.elastic.multiprocessing.errors import ErrorHandler

    try:
        ErrorHandler().record_exception(e)
    except Exception:  # the summary is a courtesy; the rank's own report has the error
        pass


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "run":
        sys.exit(run(argv[1:]))
    if argv and argv[0] == "fidelity":
        from torch_neuron import fidelity

        sys.exit(fidelity.main(argv[1:]))
    parser = argparse.ArgumentParser(prog="python -m torch_neuron", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "cmake-prefix-path", help="print the CMAKE_PREFIX_PATH for find_package(TorchNeuron)"
    ).set_defaults(run=cmake_prefix_path)
    info_parser = commands.add_parser("info", help="describe the simulated Trainium instance")
    info_parser.add_argument("--instance", help="instance type (default: TORCH_NEURON_INSTANCE)")
    info_parser.set_defaults(run=info)
    env_parser = commands.add_parser("env", help="every setting torch_neuron reads: value, "
                                     "where it came from (default, environment, api), doc")
    env_parser.add_argument("--markdown", action="store_true",
                            help="print the table of docs/settings.md instead")
    env_parser.set_defaults(run=env)
    commands.add_parser("run", help="run SCRIPT.py on the simulated instance and report "
                        "its predicted time (options: --instance, --trace, --plot, "
                        "--no-execute; --nproc-per-node N [--nnodes M] for a distributed "
                        "script)")
    commands.add_parser("fidelity", help="published Trainium measurements beside the "
                        "simulator's predictions; exit 1 when a goal is not met (fidelity "
                        "--help: the options)")
    args = parser.parse_args(argv)
    try:
        args.run(args)
    except RuntimeError as e:  # a bad TORCH_NEURON_INSTANCE or NEURON_RT_VISIBLE_CORES
        parser.exit(1, f"{parser.prog}: error: {e}\n")


if __name__ == "__main__":
    main()

"""Collectives on the "neuron" c10d backend, in the style of NVIDIA nccl-tests.

For each instance configuration and collective, one table of sizes (8 B, 32 B, ... 128 MiB
in x4 steps, then 256 MiB) with the simulated Trainium time the backend charged (read off the
simulated clock around the op), nccl-tests' algbw and busbw derived from it, the cost model's
algorithm, link and busbw ceiling, and the host WALL time of the same collective on neuron
tensors and on CPU tensors through a Gloo group of the same ranks. Gloo moves the bytes in
both cases (Note [Neuron process group]), so the wall ratio neuron/CPU is what the backend adds
per collective. Target: ratio <= 1.2.

    python benchmarks/collective_benchmark.py            # the three configurations below
    python benchmarks/collective_benchmark.py --smoke    # CI: 2 ranks, 2 ops, <= 1 MiB
    python benchmarks/collective_benchmark.py --instance trn2.48xlarge --ranks 8

Configurations: "trn2.3xlarge" (4 ranks on its one chip, on-chip), "trn2.48xlarge" (4 ranks on
4 chips: NEURON_RT_VISIBLE_CORES=0,4,8,12 puts neuron:i on chip i, NeuronLink) and
"2xtrn2.48xlarge" (2 simulated instances x 2 ranks: two torchrun agents, EFA). Ranks run on
this machine's loopback under torchrun; every rank is killed if one fails or time runs out.

Definitions (NVIDIA/nccl-tests doc/PERFORMANCE.md): S is the size column, the bytes of the
largest buffer a rank holds (all_gather: its output; reduce_scatter: its input; all_to_all:
its input or output), rounded up for those three so that every rank's chunk holds whole
float32 elements; count is nccl-tests' per-rank chunk for them and the buffer otherwise;
algbw = S / t; busbw = algbw x factor, factor 2(p-1)/p for all_reduce, (p-1)/p for all_gather,
reduce_scatter and all_to_all, 1 for broadcast, reduce and send_recv (each rank sends S to the
next rank and receives S from the previous one). t is the simulated time of one call.
"""

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import warnings

MIB = 1 << 20
DTYPE_BYTES = 4  # float32

# name -> (simulated instance type, nodes, default ranks, layout in words)
CONFIGS = {
    "trn2.3xlarge": ("trn2.3xlarge", 1, 4, "on its one chip"),
    "trn2.48xlarge": ("trn2.48xlarge", 1, 4, "one per chip"),
    "2xtrn2.48xlarge": ("trn2.48xlarge", 2, 4, "on 2 instances"),
}
DISPLAY = {"2xtrn2.48xlarge": "2 x trn2.48xlarge"}

# op -> (collective_cost name, nccl-tests bus factor(p), whether S splits into p chunks)
OPS = {
    "all_reduce": ("all_reduce", lambda p: 2 * (p - 1) / p, False),
    "all_gather_into_tensor": ("all_gather", lambda p: (p - 1) / p, True),
    "reduce_scatter_tensor": ("reduce_scatter", lambda p: (p - 1) / p, True),
    "broadcast": ("broadcast", lambda p: 1.0, False),
    "all_to_all_single": ("all_to_all", lambda p: (p - 1) / p, True),
    "reduce": ("reduce", lambda p: 1.0, False),
    "send_recv": ("send_recv", lambda p: 1.0, False),
}
SMOKE_OPS = ["all_reduce", "all_gather_into_tensor"]

# Variables that change the simulated machine: the ranks get only the ones set here.
NEURON_ENV_VARS = ("TORCH_NEURON_INSTANCE", "NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES",
                   "NEURON_LOGICAL_NC_CONFIG")

# One table row: size, count, type | simulated: time, time / model's duration_ns, algbw, busbw |
# cost model: algorithm, link, busbw ceiling, busbw / ceiling | wall: neuron, CPU, ratio,
# calls per timed batch x batches.
ROW = ("{:>12} {:>10} {:>5} {:>10} {:>7} {:>8} {:>8}  {:<31} {:<10} {:>8} {:>7} | "
       "{:>11} {:>11} {:>7} {:>7}")


def config_key(name):
    """"2 x trn2.48xlarge", "2xtrn2.48xlarge" and "2x-trn2.48xlarge" name the same thing."""
    key = "".join(name.split()).lower().replace("x-", "x")
    if key not in CONFIGS:
        raise argparse.ArgumentTypeError(
            f"unknown instance configuration {name!r}; choose from {', '.join(CONFIGS)}")
    return key


def display(key):
    return DISPLAY.get(key, key)


def sizes(max_bytes):
    """nccl-tests' -b 8 -f 4 sweep, with -e as a last row when the x4 steps skip it."""
    out, size = [], 8
    while size <= max_bytes:
        out.append(size)
        size *= 4
    if out[-1] != max_bytes:
        out.append(max_bytes)
    return out


def warmups(size, args):
    """Warm-up iterations (each one neuron and one CPU call) before the measured ones."""
    if args.warmup is not None:
        return args.warmup
    return 2 if size < MIB and not args.smoke else 1


def batching(pair_seconds, args):
    """(calls per timed batch, timed batches) from the slowest rank's last warm-up pair (one
    neuron and one CPU call). Like nccl-tests, a sample times several calls back to back, so
    that a small collective's time is not lost in the barrier's exit skew; as many samples as
    fit in a time budget per size, at least 3 (--iters fixes the count)."""
    batch_s, most_calls, budget, least, most = ((0.005, 10, 0.15, 3, 5) if args.smoke else
                                                (0.02, 50, 0.3, 3, 11))
    one = max(pair_seconds / 2, 1e-9)
    calls = max(1, min(most_calls, int(batch_s / one)))
    if args.iters:
        return calls, args.iters
    return calls, max(least, min(most, int(budget / (2 * one * calls))))


# ----------------------------------------------------------------------------- the ranks

def worker(args):
    import torch
    import torch.distributed as dist
    from datetime import timedelta

    import torch_neuron  # noqa: F401  (registers the backend)
    from torch_neuron.distributed import collective_cost

    # PyTorch 2.13 suggests all_gather_single and reduce_scatter_single; programs call these.
    warnings.filterwarnings("ignore", category=FutureWarning,
                            message=r"`torch\.distributed\.\w+` is deprecated")

    with open(os.path.join(args.run_dir, f"pid.{os.getpid()}"), "w"):
        pass  # the launcher kills the pids it finds here if the run fails
    # torchrun starts ranks in sessions of their own: a rank whose agent is gone exits.
    agent = os.getppid()

    def follow_agent():
        while os.getppid() == agent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=follow_agent, daemon=True).start()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("neuron", timeout=timedelta(seconds=args.timeout))
    neuron_group = dist.group.WORLD
    backend = neuron_group._get_backend(torch.device("neuron"))
    device = torch.device("neuron", backend.device)
    torch.neuron.set_device(device)
    cpu_group = dist.new_group(backend="gloo")
    places = [tuple(p) for p in backend.places]
    instance = torch_neuron._C._instance_info()["name"]
    key = args.instance[0]

    def out(line=""):
        if rank == 0:
            print(line, flush=True)

    chips = len(set(places))
    out(f"# {display(key)}: {world} ranks {CONFIGS[key][3]}, simulated {instance}; "
        f"rank places (instance, chip) {places}, {chips} chip(s)")
    for line in textwrap.wrap(
            "float32, sum. sim time: the simulated clock around one call after a barrier "
            "(sim/model: over the model's duration_ns plus one event record, the completion "
            "marker each call's Work records on the stream). wall: per call, median over iterations "
            "of the slowest rank's time from leaving a barrier to the return of `calls` "
            "back-to-back calls, divided by `calls`; neuron and CPU iterations alternate, after "
            "warm-up calls.", 98):
        out("# " + line)

    largest = max(args.max_bytes // DTYPE_BYTES, world)  # elements
    buffers = {str(dev): (torch.zeros(largest, device=dev), torch.zeros(largest, device=dev))
               for dev in (device, torch.device("cpu"))}

    def make(op, size):
        """(actual S, count, neuron call, CPU call) for nccl-tests size `size`."""
        _, _, split = OPS[op]
        elems = max(size // DTYPE_BYTES, 1)
        if split:  # whole elements per rank, at least one
            elems = max(elems // world, 1) * world
        nbytes = elems * DTYPE_BYTES
        chunk = elems // world
        count = chunk if op in ("all_gather_into_tensor", "reduce_scatter_tensor") else elems
        if op == "all_to_all_single":
            count = chunk  # nccl-tests prints the per-peer count

        def build(dev, group):
            # Views of two buffers allocated once: no allocation or page faults between sizes.
            a, b = buffers[str(dev)]
            z = lambda n: a[:n]  # noqa: E731
            o = lambda n: b[:n]  # noqa: E731
            if op == "all_reduce":
                t = z(elems)
                return lambda: dist.all_reduce(t, group=group)
            if op == "all_gather_into_tensor":
                out_, in_ = o(elems), z(chunk)
                return lambda: dist.all_gather_into_tensor(out_, in_, group=group)
            if op == "reduce_scatter_tensor":
                out_, in_ = o(chunk), z(elems)
                return lambda: dist.reduce_scatter_tensor(out_, in_, group=group)
            if op == "broadcast":
                t = z(elems)
                return lambda: dist.broadcast(t, src=0, group=group)
            if op == "all_to_all_single":
                out_, in_ = o(elems), z(elems)
                return lambda: dist.all_to_all_single(out_, in_, group=group)
            if op == "reduce":
                t = z(elems)
                return lambda: dist.reduce(t, dst=0, group=group)
            if op == "send_recv":  # nccl-tests sendrecv: to the next rank, from the previous
                s, r = z(elems), o(elems)
                nxt, prv = (rank + 1) % world, (rank - 1) % world

                def sendrecv():
                    works = [dist.isend(s, nxt, group=group), dist.irecv(r, prv, group=group)]
                    for w in works:
                        w.wait()
                return sendrecv
            raise ValueError(op)

        return nbytes, count, build(device, neuron_group), build("cpu", cpu_group)

    def timed(call, group, clock, calls=1):
        """Wall seconds per call and simulated ns per call of `calls` back-to-back calls
        after a barrier; the clock is read around them, outside the wall time."""
        dist.barrier(group=group)
        sim0 = torch.neuron.simulated_time_ns() if clock else 0.0
        start = time.perf_counter()
        for _ in range(calls):
            call()
        wall = time.perf_counter() - start
        sim = torch.neuron.simulated_time_ns() - sim0 if clock else 0.0
        return wall / calls, sim / calls

    head = ("#" + ROW.format("size", "count", "type", "sim time", "sim/", "algbw", "busbw",
                             "algorithm", "link", "ceiling", "busbw/", "wall neuron",
                             "wall cpu", "neuron/", "calls")[1:])
    unit = ("#" + ROW.format("(B)", "(elements)", "", "(us)", "model", "(GB/s)", "(GB/s)",
                             "(cost model)", "", "(GB/s)", "ceiling", "(us)", "(us)", "cpu",
                             "x iters")[1:])
    rows = []
    for op in args.ops:
        model_op, factor, _ = OPS[op]
        out("#")
        out(f"# {op} on {display(key)}, {world} ranks  (cost model: {model_op})")
        out(head)
        out(unit)
        for size in sizes(args.max_bytes):
            nbytes, count, on_neuron, on_cpu = make(op, size)
            pairs = ((on_neuron, neuron_group, True), (on_cpu, cpu_group, False))
            warmup = warmups(nbytes, args)
            pair, singles = 0.0, []
            for _ in range(warmup):  # one call each: the simulated time of one op
                pair = 0.0
                for call, group, is_neuron in pairs:
                    wall, sim = timed(call, group, is_neuron)
                    pair += wall
                    if is_neuron:
                        singles.append(sim)
            # Every rank runs the same batches: the slowest rank's warm-up decides.
            t = torch.tensor([pair], dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX, group=cpu_group)
            calls, iters = batching(t.item(), args)
            neuron_wall, cpu_wall, batched = [], [], []
            for i in range(iters):
                # Alternate which device goes first, so drift on this shared machine hits both.
                for call, group, is_neuron in (pairs if i % 2 == 0 else pairs[::-1]):
                    wall, sim = timed(call, group, is_neuron, calls)
                    if is_neuron:
                        neuron_wall.append(wall)
                        batched.append(sim)
                    else:
                        cpu_wall.append(wall)
            # The slowest rank sets a collective's time: elementwise MAX over ranks; and the
            # spread of the simulated times over ranks, single calls and batches.
            sims = singles + batched
            t = torch.tensor(neuron_wall + cpu_wall + sims + [-s for s in sims],
                             dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX, group=cpu_group)
            n, m = iters, len(sims)
            neuron_t = statistics.median(t[:n].tolist())
            cpu_t = statistics.median(t[n:2 * n].tolist())
            sim_all = t[2 * n:2 * n + m]
            sim_ns = sim_all[0].item() if singles else sim_all.max().item()  # one call
            sim_max, sim_min = sim_all.max().item(), -t[2 * n + m:].max().item()
            if op == "send_recv":
                # Every rank sends to the next and receives from the previous at once: the
                # slowest pair of the ring sets the time.
                model = max((torch_neuron._C._collective_cost(
                    "send_recv", nbytes, [places[r], places[(r + 1) % world]], instance)
                    for r in range(world)), key=lambda cost: cost["duration_ns"])
            else:
                model = collective_cost(model_op, nbytes)
            # A call's Work marks its completion with an event on the stream (Note [Event
            # records]): the clock moves by the collective and that record.
            model_ns = model["duration_ns"] + torch_neuron._C._EVENT_RECORD_NS
            algbw = nbytes / sim_ns if sim_ns > 0 else float("nan")  # bytes/ns = GB/s
            busbw = algbw * factor(world)
            ceiling = model["link_gbps"]
            row = {"config": display(key), "instance": instance, "ranks": world,
                   "places": places, "op": op, "model_op": model_op, "bytes": nbytes,
                   "count": count, "type": "float", "sim_ns": sim_ns, "sim_ns_min": sim_min,
                   "sim_ns_max": sim_max,
                   "model_ns": model_ns, "algbw_gbps": algbw, "busbw_gbps": busbw,
                   "algorithm": model["algorithm"], "link": model["link"],
                   "link_gbps": ceiling, "busbw_of_ceiling": busbw / ceiling,
                   "wall_neuron_s": neuron_t, "wall_cpu_s": cpu_t,
                   "wall_ratio": neuron_t / cpu_t, "warmup": warmup, "calls": calls,
                   "iters": iters}
            rows.append(row)
            out(ROW.format(nbytes, count, "float", f"{sim_ns * 1e-3:.3f}",
                           f"{sim_ns / model_ns:.4f}", f"{algbw:.2f}", f"{busbw:.2f}",
                           model["algorithm"][:31], model["link"], f"{ceiling:.1f}",
                           f"{100 * busbw / ceiling:.1f}%", f"{neuron_t * 1e6:.1f}",
                           f"{cpu_t * 1e6:.1f}", f"{neuron_t / cpu_t:.2f}", f"{calls}x{iters}"))
    if rank == 0:
        with open(os.path.join(args.run_dir, "rows.json"), "w") as f:
            json.dump(rows, f)
    dist.barrier(group=cpu_group)
    dist.destroy_process_group()


# ----------------------------------------------------------------------------- the launcher

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def descendants(pids):
    """Every process below `pids` (torchrun starts its workers in sessions of their own, so
    killing an agent's process group does not reach them)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], list(pids)
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_run(agents, run_dir):
    """SIGKILL the agents, every process below them and every rank that registered in
    `run_dir` (a rank whose agent died first has been re-parented)."""
    pids = [a.pid for a in agents] + descendants([a.pid for a in agents])
    for name in os.listdir(run_dir):
        if name.startswith("pid."):
            pid = int(name[4:])
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if os.path.basename(__file__).encode() in f.read():
                        pids.append(pid)
            except OSError:
                pass
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for agent in agents:
        agent.wait()


def launch(key, args):
    """Runs the ranks of configuration `key` under torchrun; returns rank 0's rows."""
    instance, nodes, default_ranks, _ = CONFIGS[key]
    ranks = args.ranks or default_ranks
    if ranks % nodes:
        sys.exit(f"{display(key)}: --ranks {ranks} does not split over {nodes} instances")
    per_node = ranks // nodes
    env = {k: v for k, v in os.environ.items() if k not in NEURON_ENV_VARS}
    env.update({"MASTER_ADDR": "127.0.0.1", "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1",
                "TORCH_NEURON_INSTANCE": instance, "PYTHONUNBUFFERED": "1"})
    if key == "trn2.48xlarge":
        # 4 logical NeuronCores per Trn2 chip: cores 0, 4, 8, ... are one per chip, in order.
        env["NEURON_RT_VISIBLE_CORES"] = ",".join(str(4 * i) for i in range(ranks))
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="collective_benchmark.") as run_dir:
        rank_args = worker_args(args, key, run_dir)
        agents = []
        for node in range(nodes):
            command = [sys.executable, "-m", "torch.distributed.run",
                       f"--nproc-per-node={per_node}", f"--nnodes={nodes}",
                       f"--node-rank={node}", "--master-addr=127.0.0.1",
                       f"--master-port={port}", "--max-restarts=0", "--monitor-interval=0.1",
                       os.path.abspath(__file__), *rank_args]
            agents.append(subprocess.Popen(command, env=env))  # in our process group
        deadline = time.monotonic() + args.timeout
        try:
            while True:
                codes = [a.poll() for a in agents]
                if all(c == 0 for c in codes):
                    break
                if any(c not in (None, 0) for c in codes):
                    raise RuntimeError(f"{display(key)}: a torchrun agent exited with "
                                       f"{[c for c in codes if c]} (see its output above)")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{display(key)}: ranks still running after "
                                       f"{args.timeout:.0f} s (--timeout); killed")
                time.sleep(0.05)
        except BaseException:
            kill_run(agents, run_dir)
            raise
        kill_run(agents, run_dir)  # nothing should be left; make sure
        with open(os.path.join(run_dir, "rows.json")) as f:
            return json.load(f)


def worker_args(args, key, run_dir):
    out = ["--_worker", "--_run-dir", run_dir, "--instance", key,
           "--ops", *args.ops, "--max-size", str(args.max_bytes), "--timeout", str(args.timeout)]
    if args.smoke:
        out.append("--smoke")
    if args.iters:
        out += ["--iters", str(args.iters)]
    if args.warmup is not None:
        out += ["--warmup", str(args.warmup)]
    return out


# ----------------------------------------------------------------------------- the summary

def pct(x):
    return f"{100 * x:.1f}%"


def summary(rows, configs):
    """One paragraph: what each configuration reached, and what the backend costs in wall time."""
    ranges = ((lambda r: r["bytes"] >= MIB, ">= 1 MiB"), (lambda r: r["bytes"] < MIB, "< 1 MiB"))
    text = ["Summary. Per configuration: (a) busbw at each op's largest size as a percentage of "
            "that row's busbw ceiling (the cost model's link_gbps); (b) the highest busbw/ceiling "
            "over every row (op x size), which must be <= 100%; (c) rows whose simulated time "
            "equals the model's duration_ns within 1e-6 relative; (d) per op, the median and the "
            "max over sizes of the wall-time ratio neuron/CPU-Gloo, each size's ratio being the "
            "median neuron wall time over its median CPU wall time (the slowest rank per "
            "iteration), for sizes >= 1 MiB and < 1 MiB separately; (e) rows above the 1.2x "
            "wall-time target."]
    for key in configs:
        mine = [r for r in rows if r["config"] == display(key)]
        if not mine:
            continue
        ops = list(dict.fromkeys(r["op"] for r in mine))
        largest = []
        for op in ops:
            r = max((r for r in mine if r["op"] == op), key=lambda r: r["bytes"])
            largest.append(f"{op} {pct(r['busbw_of_ceiling'])} of {r['link_gbps']:.0f} GB/s")
        worst = max(mine, key=lambda r: r["busbw_of_ceiling"])
        exact = [r for r in mine if all(abs(r[k] / r["model_ns"] - 1) <= 1e-6
                                        for k in ("sim_ns", "sim_ns_min", "sim_ns_max"))]
        off = {}
        for r in mine:
            if r not in exact:
                off.setdefault(r["op"], []).append(r["sim_ns"] / r["model_ns"])
        off_text = "".join(f"; {op}: sim/model {min(v):.3f}..{max(v):.3f} on {len(v)} rows"
                           for op, v in off.items())
        ratios = []
        for op in ops:
            for keep, label in ranges:
                sel = [r["wall_ratio"] for r in mine if r["op"] == op and keep(r)]
                if sel:
                    ratios.append(f"{op} {label} {statistics.median(sel):.2f}/{max(sel):.2f} "
                                  f"({len(sel)} sizes)")
        over = [r for r in mine if r["wall_ratio"] > 1.2]
        text.append(
            f"{display(key)} ({mine[0]['ranks']} ranks, {mine[0]['link']}): (a) "
            f"{', '.join(largest)} at {max(r['bytes'] for r in mine)} B; (b) "
            f"{pct(worst['busbw_of_ceiling'])} ({worst['op']} at {worst['bytes']} B"
            f"{'' if worst['busbw_of_ceiling'] <= 1 else ', ABOVE 100%'}); (c) "
            f"{len(exact)} of {len(mine)}{off_text}; (d) median/max {', '.join(ratios)}; "
            f"(e) {len(over)} of {len(mine)}.")
    return " ".join(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true",
                        help="CI: 2 ranks, all_reduce and all_gather, sizes up to 1 MiB, "
                             "few iterations (default instance: trn2.3xlarge)")
    parser.add_argument("--instance", nargs="+", type=config_key, metavar="CONFIG",
                        help=f"configurations to run: {', '.join(CONFIGS)} (default: all; "
                             "with --smoke: trn2.3xlarge)")
    parser.add_argument("--ranks", type=int, help="total ranks per configuration "
                        "(default 4; 2 with --smoke)")
    parser.add_argument("--ops", nargs="+", choices=list(OPS), metavar="OP",
                        help=f"collectives to run: {', '.join(OPS)} (default: all; with "
                             "--smoke: all_reduce, all_gather_into_tensor)")
    parser.add_argument("--max-size", type=int, dest="max_bytes",
                        help="largest size S in bytes (default 256 MiB; 1 MiB with --smoke)")
    parser.add_argument("--iters", type=int, help="timed batches at every size (default: as "
                        "many as fit in 0.3 s per size, 3 to 11; 3 to 5 with --smoke)")
    parser.add_argument("--warmup", type=int, help="warm-up iterations at every size "
                        "(default 2 below 1 MiB, else 1; 1 with --smoke)")
    parser.add_argument("--timeout", type=float,
                        help="seconds per configuration before every rank is killed "
                             "(default 420; 50 with --smoke)")
    parser.add_argument("--json", metavar="PATH", help="also write every row to PATH")
    parser.add_argument("--_worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--_run-dir", dest="run_dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.ops = args.ops or (SMOKE_OPS if args.smoke else
                            ["all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor",
                             "broadcast", "all_to_all_single", "reduce", "send_recv"])
    args.max_bytes = args.max_bytes or (MIB if args.smoke else 256 * MIB)
    args.timeout = args.timeout or (50.0 if args.smoke else 420.0)
    if args._worker:
        return worker(args)

    configs = args.instance or (["trn2.3xlarge"] if args.smoke else list(CONFIGS))
    if args.smoke and not args.ranks:
        args.ranks = 2
    started = time.monotonic()
    rows = []
    print(f"# collective_benchmark: {', '.join(display(k) for k in configs)}; ops "
          f"{', '.join(args.ops)}; sizes 8 B .. {args.max_bytes} B x4; "
          f"{os.cpu_count()} host CPUs", flush=True)
    for key in configs:
        print("#", flush=True)
        try:
            rows += launch(key, args)
        except RuntimeError as e:
            sys.exit(f"collective_benchmark: {e}")
    print("#")
    print("\n".join(textwrap.wrap(summary(rows, configs), 100, initial_indent="# ",
                                   subsequent_indent="# ", break_on_hyphens=False)))
    print(f"# {len(rows)} rows in {time.monotonic() - started:.0f} s", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

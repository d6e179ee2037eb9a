"""Failures under the neuron process group raise clear errors within the group's timeout
instead of hanging, and tearing a group down gives its HBM back."""

from conftest import assert_ok, run_ranks


def test_an_exited_rank_makes_the_others_raise_naming_it():
    results = run_ranks("faults_worker.py", 2, ["rank_exits"], timeout=90)
    assert results[1].returncode == 3
    survivor = assert_ok(results[0])
    assert "DistBackendError" in survivor.stdout
    assert "rank(s) 1 exited" in survivor.stdout, survivor.stdout
    assert "all_reduce on rank 0 of 2" in survivor.stdout


def test_mismatched_collectives_raise_on_every_rank():
    results = run_ranks("faults_worker.py", 2, ["mismatch"], env={"TEST_PG_TIMEOUT": "10"},
                        timeout=90)
    for result in results:
        assert_ok(result)
        assert "raised" in result.stdout and "all_reduce" in result.stdout, result.stdout


def test_every_mismatch_raises_on_every_rank_and_the_group_stays_usable():
    # Note [Collectives that carry their data]: the data rides with the check, and is used
    # only once every rank agrees.
    results = run_ranks("faults_worker.py", 2, ["mismatch_kinds"], env={"TEST_PG_TIMEOUT": "20"},
                        timeout=90)
    kinds = ("all_reduce", "reduce", "broadcast", "all_gather_into_tensor", "all_gather",
             "reduce_scatter_tensor", "reduce_scatter", "all_to_all_single")
    for result in results:
        out = assert_ok(result).stdout
        for kind in kinds:
            for what in ("size", "small and large size", "dtype"):
                assert f"raised: {kind}, different {what}\n" in out, out
            other = "reduce op" if "reduce" in kind else "collective"
            assert f"raised: {kind}, different {other}\n" in out, out
        for kind in ("reduce", "broadcast"):
            assert f"raised: {kind}, different root\n" in out, out
        assert "group usable" in out, out


def test_mismatch_is_named_with_distributed_debug_detail():
    results = run_ranks("faults_worker.py", 2, ["mismatch"],
                        env={"TEST_PG_TIMEOUT": "10", "TORCH_DISTRIBUTED_DEBUG": "DETAIL"},
                        timeout=90)
    for result in results:
        assert_ok(result)
        # PyTorch's ProcessGroupWrapper compares the ranks' collectives before running them.
        assert "Detected mismatch between collectives on ranks" in result.stdout, result.stdout


def test_mismatched_send_and_recv_sizes_raise_on_both_ranks():
    # Note [Point-to-point sizes]: Gloo alone leaves a receive half-written (smaller send) or
    # aborts the process (larger send).
    results = run_ranks("faults_worker.py", 2, ["p2p_sizes"], env={"TEST_PG_TIMEOUT": "20"},
                        timeout=90)
    for result in results:
        out = assert_ok(result).stdout
        for sent, received in ((32, 64), (64, 32), (160000, 80000), (80000, 160000), (16, 8)):
            assert (f"send/recv size mismatch: rank 0 sent {sent} bytes to rank 1, whose "
                    f"receive buffer holds {received} bytes") in out, out
        assert "group usable" in out, out


def test_a_rank_that_never_joins_makes_init_raise():
    (result,) = run_ranks("faults_worker.py", 2, ["no_peer"], env={"TEST_PG_TIMEOUT": "5"},
                          ranks=[0], timeout=90)
    assert_ok(result)
    assert "raised after" in result.stdout


def test_destroy_process_group_gives_hbm_back():
    for result in run_ranks("faults_worker.py", 2, ["teardown"], timeout=90):
        assert "teardown ok" in assert_ok(result).stdout

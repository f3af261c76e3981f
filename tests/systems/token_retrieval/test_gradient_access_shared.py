"""The gradient-access scans share first gradients and scores without changing a number."""
import numpy as np
import pytest


def test_a_first_gradient_from_the_seeds_samples_is_the_one_drawn_alone():
    from recallkit.systems.token_retrieval.gradient_access import first_gradient, training_samples

    alone = first_gradient(2, 32, 181, 5, 9)
    shared = first_gradient(2, 32, 181, 5, 9, training_samples(2, 32, 181, 5))
    for name in ("G", "S", "U", "E", "z", "perm"):
        assert np.array_equal(getattr(alone, name), getattr(shared, name))


def test_scans_through_shared_instances_are_the_scans_alone():
    from recallkit.systems.token_retrieval.gradient_access import Instances, needed_d

    instances = Instances(32, 76, 5)
    for observation in ("surrogate", "noisy_gradient"):
        for decoder in ("correlation", "hungarian"):
            alone = needed_d(32, 76, 5, 0.5, decoder, observation, (0, 1), d_max=64)
            shared = needed_d(32, 76, 5, 0.5, decoder, observation, (0, 1), d_max=64, instances=instances)
            assert alone.d is not None and (alone.d, alone.accuracy, alone.snr, alone.curve) == (
                shared.d, shared.accuracy, shared.snr, shared.curve)


def test_one_blas_thread_inside_the_block_and_the_count_restored_after():

    from recallkit.empirics.numerics import _loaded_openblas, one_blas_thread

    libraries = _loaded_openblas()
    if not libraries:
        pytest.skip("this numpy has no OpenBLAS: the block is a no-op")
    before = [get() for get, _ in libraries]
    with one_blas_thread():
        assert [get() for get, _ in libraries] == [1] * len(libraries)
    assert [get() for get, _ in libraries] == before

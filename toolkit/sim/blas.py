"""One BLAS thread while the simulator runs.

The convolutions are float64 matrix products (conv.py). OpenBLAS splits even small products
across its threads; on a machine whose cores are busy those threads wait for each other: a
ResNet-8 inference took 7x longer than on one thread. The TOSA reference model runs on one
thread too.
"""

from __future__ import annotations

from functools import lru_cache

from threadpoolctl import ThreadpoolController


@lru_cache(maxsize=1)
def _blas_pools():
    return ThreadpoolController().select(user_api="blas")


def one_blas_thread():
    """A context in which numpy's BLAS uses one thread."""
    return _blas_pools().limit(limits=1)

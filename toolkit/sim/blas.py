"""One BLAS thread while the simulator runs.

The convolutions are float64 matrix products (conv.py). OpenBLAS splits even small products
across its threads; on a machine whose cores are busy those threads wait for each other: a
ResNet-8 inference took 7x longer than on one thread. The TOSA reference model runs on one
thread too.
"""

from __future__ import annotations

from contextlib import contextmanager
from functools import lru_cache

from threadpoolctl import ThreadpoolController


@lru_cache(maxsize=1)
def _blas_libraries() -> tuple:
    return tuple(ThreadpoolController().select(user_api="blas").lib_controllers)


@contextmanager
def one_blas_thread():
    """A context in which numpy's BLAS uses one thread, through the libraries' own get/set
    calls (threadpoolctl's limit() re-reads every library's state at each run)."""
    libraries = _blas_libraries()
    before = [lib.get_num_threads() for lib in libraries]
    for lib in libraries:
        lib.set_num_threads(1)
    try:
        yield
    finally:
        for lib, threads in zip(libraries, before):
            lib.set_num_threads(threads)

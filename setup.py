"""The simulator's native kernels (toolkit/sim/native/*.c); everything else is in
pyproject.toml. optional: where no C compiler is found the package installs without them and
the simulator runs its numpy path (`etk doctor` says which)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "toolkit.sim.native._kernels",
            sources=[
                "toolkit/sim/native/module.c",
                "toolkit/sim/native/conv.c",
                "toolkit/sim/native/copy.c",
                "toolkit/sim/native/elementwise.c",
                "toolkit/sim/native/image.c",
                "toolkit/sim/native/payload.c",
                "toolkit/sim/native/pool.c",
            ],
            depends=["toolkit/sim/native/native.h", "toolkit/sim/native/table.h"],
            extra_compile_args=["-O3"],
            optional=True,
        )
    ]
)

"""The simulator's native kernels (toolkit/sim/native/*.c); everything else is in
pyproject.toml. optional: where no C compiler is found the package installs without them and
the simulator runs its numpy path (`etk doctor` says which)."""

import os

from setuptools import Extension, setup

# the C is built with every warning; ETK_C_STRICT=1 (CI) makes them errors, and
# ETK_C_SANITIZE=1 builds it with AddressSanitizer and UndefinedBehaviorSanitizer
# (scripts/sanitized_native_tests.sh runs the native tests so)
FLAGS = ["-O3", "-Wall", "-Wextra"]
if os.environ.get("ETK_C_STRICT") == "1":
    FLAGS.append("-Werror")
if os.environ.get("ETK_C_SANITIZE") == "1":
    FLAGS = [
        "-O1",
        "-g",
        "-Wall",
        "-Wextra",
        "-fsanitize=address,undefined",
        "-fno-sanitize-recover=undefined",
        "-fno-omit-frame-pointer",
    ]

setup(
    ext_modules=[
        Extension(
            "toolkit.sim.native._kernels",
            sources=[
                "toolkit/sim/native/module.c",
                "toolkit/sim/native/conv.c",
                "toolkit/sim/native/copy.c",
                "toolkit/sim/native/elementwise.c",
                "toolkit/sim/native/pool.c",
            ],
            depends=["toolkit/sim/native/native.h", "toolkit/sim/native/table.h"],
            extra_compile_args=FLAGS,
            extra_link_args=[f for f in FLAGS if f.startswith("-fsanitize")],
            optional=True,
        )
    ]
)

"""pip's build of the kolo package (pyproject.toml has the metadata): carries libkolo.so
inside the package, so that an installed kolo needs neither KOLO_LIBRARY nor PYTHONPATH.
Where the library comes from, first found: KOLO_LIBRARY; the source tree's build/ (a
`cmake --build build` beside this folder); an installed one (ldconfig's cache)."""
import ctypes.util
import glob
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def find_libkolo():
    explicit = os.environ.get("KOLO_LIBRARY")
    if explicit:
        if not os.path.isfile(explicit):
            raise SystemExit(f"kolo: KOLO_LIBRARY={explicit} is not a file")
        return explicit
    built = sorted(glob.glob(os.path.join(HERE, "..", "..", "build", "libkolo.so*")))
    if built:
        return built[0]
    installed = ctypes.util.find_library("kolo")
    if installed:
        for folder in ("/usr/local/lib", "/usr/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu"):
            path = os.path.join(folder, installed)
            if os.path.isfile(path):
                return path
    raise SystemExit("kolo: libkolo.so not found: build kolo first (cmake --build build) or set KOLO_LIBRARY "
                     "to the library's path")


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        target = os.path.join(self.build_lib, "kolo", "libkolo.so")
        shutil.copyfile(find_libkolo(), target)  # follows links: the library itself
        os.chmod(target, 0o755)


setup(cmdclass={"build_py": BuildWithLibrary})

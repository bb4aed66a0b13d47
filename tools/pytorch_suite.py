"""PyTorch's own distributed test suite, DistributedTest._DistTestBase as the installed torch
ships it (torch.testing._internal.distributed.distributed_test; never copied into kolo), run
by tools/pytorch-suite.sh. The suite picks its tests by BACKEND; it runs with BACKEND=gloo
either way, and with KOLO_INSTEAD_OF_GLOO=1 every process group it makes for Gloo (the
default group, new_group) is made with kolo's backend instead, so kolo faces what Gloo faces.
Each test spawns WORLD_SIZE processes, which import this file again: the swap holds in them."""
import importlib.machinery
import os
import sys
import types
import unittest


class _Py311Dataclass(importlib.machinery.SourceFileLoader):
    """torch 1.13's sharded-tensor metadata gives a dataclass field an instance of another
    dataclass as its default, which Python 3.11 refuses (ValueError: mutable default): every
    DDP test then fails at its import, on any backend. Loaded with default_factory instead."""
    NAME = "torch.distributed._shard.sharded_tensor.metadata"

    def get_code(self, fullname):  # from the source, never a cached .pyc of the original
        source = self.get_data(self.path).replace(b"field(default=TensorProperties())",
                                                  b"field(default_factory=TensorProperties)")
        return self.source_to_code(source, self.path)

    @classmethod
    def find_spec(cls, name, path, target=None):
        if name != cls.NAME:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        spec.loader = cls(name, spec.origin)
        return spec


if sys.version_info >= (3, 11):
    sys.meta_path.insert(0, _Py311Dataclass)

import torch.distributed as dist  # noqa: E402 - after the loader above is in place

try:
    import expecttest  # noqa: F401 - torch's test helpers import it; Debian has no package of it
except ImportError:  # what torch's TestCase takes from it, none of which the distributed suite uses
    sys.modules["expecttest"] = types.SimpleNamespace(TestCase=unittest.TestCase, ACCEPT=False)

if os.environ.get("KOLO_INSTEAD_OF_GLOO") == "1":
    import kolo.torch.distributed  # noqa: F401 - registers "kolo"
    from torch.distributed import distributed_c10d

    _make_group = distributed_c10d._new_process_group_helper

    def _kolo_for_gloo(group_size, group_rank, global_ranks, backend, *args, **kwargs):
        if dist.Backend(backend) == dist.Backend.GLOO:
            backend = "kolo"
        return _make_group(group_size, group_rank, global_ranks, backend, *args, **kwargs)

    distributed_c10d._new_process_group_helper = _kolo_for_gloo

from torch.testing._internal.common_utils import UNITTEST_ARGS  # noqa: E402
from torch.testing._internal.distributed.distributed_test import DistributedTest, TestDistBackend  # noqa: E402


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    # As torch's test/distributed/test_distributed_spawn.py runs the suite.
    def setUp(self):
        super().setUp()
        self._spawn_processes()


class _Verdicts(unittest.TextTestResult):
    """Each test's verdict, one line to the file SUITE_VERDICTS names ("pass NAME", "fail NAME",
    "skip NAME"): the suite's processes write their logs through unittest's, so its own lines
    cannot be parsed."""

    def _note(self, test, verdict):
        with open(os.environ["SUITE_VERDICTS"], "a") as f:
            f.write(f"{verdict} {test.id().rsplit('.', 1)[-1]}\n")

    def addSuccess(self, test):
        super().addSuccess(test)
        self._note(test, "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._note(test, "fail")

    def addError(self, test, err):
        super().addError(test, err)
        self._note(test, "fail")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._note(test, "skip")

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._note(test, "pass")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._note(test, "fail")


if __name__ == "__main__":
    unittest.main(argv=UNITTEST_ARGS, testRunner=unittest.TextTestRunner(resultclass=_Verdicts, verbosity=2))

"""torchrun (torch.distributed.run) with torch 1.13's Std.from_str fixed for Python 3.11:

    /usr/bin/python3 torchrun_launch.py [torchrun's arguments...]

torch 1.13's Std.from_str ("0" -> Std.NONE, the default of --redirects and --tee) finds the
member by iterating the IntFlag `Std`, and from Python 3.11 iterating a Flag yields only its
single-bit members (OUT, ERR): "0" and "3" map to None, and start_processes fails in to_map
before any worker starts:

    AttributeError: 'NoneType' object has no attribute 'get'

Here "0".."3" map to Std(value) again (only where the installed torch has the fault), then
torchrun's own main() runs with the arguments given: the same agent, rendezvous and worker
code path as `torchrun ARGS`. (Without this file: `--redirects 9:1 --tee 9:1`, a mapping for a
local rank that does not exist, gives every worker Std.NONE through the mapping branch.)"""
import sys

from torch.distributed.elastic.multiprocessing import api as _mp_api
from torch.distributed.elastic.multiprocessing.api import Std

_broken = Std.from_str("0") is None  # Python 3.11+ with torch 1.13's from_str
if _broken:
    _original = Std.from_str.__func__

    def _from_str(cls, vm):
        value = _original(cls, vm)
        fix = lambda v, text: Std(int(text)) if v is None else v  # noqa: E731
        if isinstance(value, dict):
            return {i: fix(v, t.split(":")[1]) for (i, v), t in zip(value.items(), vm.split(","))}
        return fix(value, vm)

    Std.from_str = classmethod(_from_str)
    _mp_api.Std = Std

if __name__ == "__main__":
    if sys.argv[1:2] == ["--check-fix"]:  # whether this torch needs the fix, and that it works
        print(f"torchrun_launch: Std.from_str fix {'applied' if _broken else 'not needed'}: "
              f"{[Std.from_str(v) for v in '0123']}")
        sys.exit(0)
    from torch.distributed.run import main
    sys.argv[0] = "torchrun"
    main(sys.argv[1:])

"""kolo.torch.elastic (Horovod's hvd.elastic): usage `elastic_test.py KOLORUN PYTHON EXAMPLES`.

(a) Two ranks (this script again, with --two-ranks, under `kolorun -np 2` in an elastic
world): ObjectState and TorchState save, restore and sync (rank 0's state to both);
commit with no worker waiting; run() after a failure (a KoloError raised on both ranks
alike: no peer dies here) restores the last commit, rebuilds (membership epoch 1, the
same two workers), calls the reset callbacks, forgets what was in flight (process sets,
handles, the optimizer's allreduces, counters of unnamed operations) and trains on; after
HostsUpdatedInterrupt it rebuilds without restoring; usage errors and mismatches are
raised, not retried.

(b) examples/elastic_cnn.py under `kolorun -np 4 --min-np 2 --max-np 4`, worker 2 SIGKILLed
at the start of global batch DIE (mid-epoch, between commits): the run must finish on 3
ranks, every survivor print its rebuild line, and the commits match a reference that
replays the same commits without the elastic machinery: run A, 4 ranks with no failure,
stops at the last commit before DIE and saves it; run B, 3 ranks, starts from A's save.
Each step's global batch depends on its index only (a rank takes its share by rank and
size) and the gradients go as one fused allreduce, so the elastic run (4 ranks up to that
commit, the discarded batches after it, 3 ranks from it) must print A's commit lines then
B's, and B's final loss, bit for bit: restore, rebuild and sync may change nothing. Also
checked, within 1e-4: the final loss of 4 ranks with no failure (the same arithmetic up to
the order of float sums), which shows that the replay recovers the curve.

(c) The same example started on 3 ranks with a 4th slot offered (--host-discovery-script):
the worker kolorun starts into the job joins at the first commit after it arrives
(HostsUpdatedInterrupt on every rank, a rebuild without restoring) and gets the state by
sync(); checked against the same kind of reference, 3 ranks up to that commit and 4 from
it, bit for bit.

(d) With `--hosts PREFIX LAUNCHER` (tests/multihost/elastic_torch_test.sh, on test hosts
PREFIX-h0..h3 made by tools/testhosts.sh): the example on 3 hosts x 1 rank, and the
discovery script starts listing a 4th host 3 s into the run; the rank kolorun starts there
joins at a commit, and the run matches the same kind of reference (3 hosts up to that
commit, 4 from it), on the same hosts, bit for bit. (e) Then 3 hosts, and the script
stops listing the third 3 s in: its worker leaves at the next commit (exit 0) and the two
others go on without restoring, matching 3 hosts up to that commit and 2 from it, bit for
bit. Nothing else runs in this mode.

Skips (b) and (c), exiting 77, where kolorun has no --min-np. ctest: python_elastic_test,
multihost_elastic_torch."""
import os
import re
import subprocess
import sys
import tempfile
import time

TWO_RANKS = "--two-ranks" in sys.argv


def two_ranks():
    import copy

    import torch

    import kolo.torch as hvd
    from kolo._capi import ERR_INVALID_USAGE, KoloError, KoloUsageError, RESULT_NAMES
    from kolo.torch import _requests
    from kolo_checks import expect, finish, section

    hvd.init()
    me = hvd.rank()
    expect(hvd.size() == 2 and hvd.elastic.epoch() == 0 and hvd.elastic.worker_id() == str(me), "a world of two")

    @section
    def object_state():
        s = hvd.elastic.ObjectState(epoch=0, batch=0, seen=[me])
        s.epoch, s.batch = 3, 7
        s.seen.append(2)
        s.restore()
        expect((s.epoch, s.batch, s.seen) == (0, 0, [me]), f"restore before a commit: {s.epoch, s.batch, s.seen}")
        s.epoch, s.seen = 1 + me, [5 + me]
        s.commit()  # nobody waits to join: no interrupt
        s.seen.append(6)  # in place, after the commit: the commit keeps its own copy
        s.epoch = 9
        s.restore()
        expect((s.epoch, s.seen) == (1 + me, [5 + me]), f"restore after a commit: {s.epoch, s.seen}")
        s.epoch = 4
        s.sync()
        expect((s.epoch, s.seen) == (1, [5]), f"sync gives rank 0's commit: {s.epoch, s.seen}")
        s.epoch = 8
        s.restore()
        expect(s.epoch == 1, "after sync, rank 0's commit is every rank's")

    @section
    def torch_state():
        torch.manual_seed(me)  # each rank its own weights, until sync
        model = torch.nn.Linear(4, 2)
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                                       named_parameters=model.named_parameters())
        s = hvd.elastic.TorchState(model, opt, epoch=0)
        s.sync()
        weights = hvd.allgather(model.weight.detach().reshape(1, -1))
        expect(torch.equal(weights[0], weights[1]), "sync gives rank 0's weights")

        def train_step():
            opt.zero_grad()
            model(torch.full((3, 4), 1.0 + me)).sum().backward()
            opt.step()
        train_step()
        s.epoch = 1
        s.commit()
        committed = copy.deepcopy((model.state_dict(), opt.state_dict()))
        train_step()
        s.epoch = 2
        s.restore()
        expect(all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), committed[0].values())),
               "restore gives the committed parameters")
        momentum = [v["momentum_buffer"] for v in opt.state_dict()["state"].values()]
        expect(len(momentum) == 2 and all(torch.equal(a, v["momentum_buffer"]) for a, v in
                                          zip(momentum, committed[1]["state"].values())),
               "restore gives the committed momentum")
        expect(s.epoch == 1, "restore gives the committed epoch")
        empty = hvd.elastic.TorchState(epoch=5)  # no model, no optimizer
        empty.epoch = 6
        empty.restore()
        expect(empty.epoch == 5, "a TorchState without model and optimizer")

    @section
    def elastic_sampler():
        # 21 samples on 2 ranks: 11 each (one dealt twice); ranks disjoint but for the pad.
        sampler = hvd.elastic.ElasticSampler(list(range(21)), shuffle=True, seed=3)
        mine = list(sampler)
        both = hvd.allgather_object(mine)
        expect(len(sampler) == 11 and len(mine) == 11 and len(set(both[0]) | set(both[1])) == 21,
               f"dealt among 2 ranks: {both}")
        s = hvd.elastic.TorchState(sampler=sampler, epoch=0)
        expect(s.sampler is sampler, "the state holds the sampler itself")
        sampler.record_batch(0, 2)
        sampler.record_batch(1, 2)  # the world has taken 8 samples
        s.commit()
        sampler.record_batch(2, 2)
        s.restore()
        expect(sampler.processed_num == 8 and len(sampler) == 7, f"restore: 8 taken, 13 left: {sampler.processed_num}")
        if me == 1:
            sampler.record_batch(3, 2)  # rank 1 runs ahead; sync gives rank 0's count
        s.sync()
        expect(sampler.processed_num == 8 and list(sampler) == hvd.allgather_object(list(sampler))[me],
               "sync: rank 0's progress, dealt again")
        sampler.set_epoch(1)
        expect(sampler.processed_num == 0 and len(sampler) == 11, "set_epoch starts the next epoch whole")

    @section
    def run_errors_not_retried():
        calls = []

        @hvd.elastic.run
        def usage(state):
            calls.append(1)
            raise KoloUsageError(ERR_INVALID_USAGE, "a usage error")

        @hvd.elastic.run
        def mismatch(state):
            calls.append(2)
            raise KoloError(RESULT_NAMES.index("ERR_MISMATCH"), "ranks disagree")
        for fn, exc in ((usage, KoloUsageError), (mismatch, KoloError)):
            try:
                fn(hvd.elastic.ObjectState(x=0))
                expect(False, f"{fn.__name__}: returned")
            except exc:
                pass
        expect(calls == [1, 2], f"usage errors and mismatches are raised at once: calls {calls}")

    @section
    def run_rebuilds():
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 2)
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                       named_parameters=model.named_parameters())
        state = hvd.elastic.TorchState(model, opt, value=0)
        resets, epochs, stale = [], [], {}
        state.register_reset_callbacks([lambda: resets.append(hvd.elastic.epoch())])
        start_weight = model.weight.detach().clone()

        @hvd.elastic.run
        def train(state):
            epochs.append(hvd.elastic.epoch())
            state.value += 1
            if len(epochs) == 1:
                # What a failure leaves behind: a process set, an unsynchronized handle, an
                # unnamed operation counted, the optimizer's allreduces in flight. Both ranks
                # raise alike (no peer dies here; (b) kills one).
                stale["set"] = hvd.add_process_set([0])
                stale["handle"] = hvd.allreduce_async(torch.ones(2))
                model(torch.ones(3, 4)).sum().backward()  # hooks enqueue the gradients' allreduces
                with torch.no_grad():
                    model.weight.add_(1.0)  # an uncommitted change
                raise KoloError(RESULT_NAMES.index("ERR_ABORTED"), "a peer died (simulated)")
            if len(epochs) == 2:
                expect(torch.equal(model.weight, start_weight), "after a failure: the commit's weights")
                expect(state.value == 1, f"after a failure: the commit's value + 1, got {state.value}")
                expect(not _requests._pending and not _requests._counters, "requests and counters forgotten")
                for what, call in (("handle", lambda: hvd.synchronize(stale["handle"])),
                                   ("process set", lambda: hvd.allreduce(torch.ones(1), process_set=stale["set"]))):
                    try:
                        call()
                        expect(False, f"the old world's {what} still works")
                    except ValueError:
                        pass
                opt.zero_grad()  # refused while allreduces were thought in flight
                model(torch.ones(3, 4)).sum().backward()
                opt.step()
                state.commit()
                raise hvd.elastic.HostsUpdatedInterrupt(False)
            expect(state.value == 2, f"after an interrupt: the commit kept, + 1: got {state.value}")
            return hvd.allreduce(torch.ones(1), op=hvd.Sum).item()

        out = train(state)
        expect(out == 2.0, f"a collective on the rebuilt world: {out}")
        expect(epochs == [0, 1, 2] and resets == [1, 2], f"membership epochs {epochs}, resets {resets}")
        expect(hvd.size() == 2 and hvd.rank() == me and hvd.elastic.worker_id() == str(me),
               "the same workers, in the same order")

    finish(f"elastic_test (two ranks, rank {me})")


def kolorun_lines(cmd, env_extra=None, timeout=600):
    env = dict(os.environ, **(env_extra or {}))
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    return proc.returncode, proc.stdout


COMMIT = re.compile(r"\] commit epoch=(\d+) batch=(\d+) size=(\d+) loss=(\S+)")
FINAL = re.compile(r"\] final loss=(\S+) size=(\d+)")
REBUILT = re.compile(r"\] rebuilt epoch=(\d+) size=(\d+) rank=(\d+) worker=(\S+) seconds_since_failure=(\S+)")
JOINED = re.compile(r"\] joined epoch=(\d+) size=(\d+) rank=(\d+) worker=(\S+)")
failures = []


def expect(ok, what):
    if not ok:
        failures.append(what)
        print(f"elastic_test: FAIL {what}", flush=True)


def launch(name, cmd, env_extra=None):
    """kolorun's output, its lines of the example shown; the commits and final lines parsed."""
    env = dict({"KOLO_TIMEOUT": os.environ.get("KOLO_TIMEOUT", "30")}, **(env_extra or {}))
    rc, out = kolorun_lines(cmd, env)
    print(f"== {name}: kolorun exited {rc}\n" + "".join(
        line + "\n" for line in out.splitlines() if COMMIT.search(line) or FINAL.search(line) or
        REBUILT.search(line) or JOINED.search(line) or "Error" in line or line.startswith("kolorun:")),
        end="", flush=True)
    expect(rc == 0, f"{name}: kolorun exited {rc}")
    return out, [m.groups() for m in COMMIT.finditer(out)], [m.groups() for m in FINAL.finditer(out)]


def replays(name, commits, final, before, after, size_after, at):
    """The reference: `before` (a kolorun command line with the example) up to global batch
    `at` (a commit), saved; `after` from that save, on size_after ranks. The elastic run
    must print its commit lines and final loss."""
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = os.path.join(tmp, "commit.pt")
        _, ref_a, _ = launch(f"{name}: reference A", before + ["--stop-after", str(at), "--save", ckpt])
        _, ref_b, final_b = launch(f"{name}: reference B", after + ["--resume", ckpt])
    expect(commits == ref_a + ref_b, f"{name}: its commits = A's then B's:\n  {commits}\n  {ref_a} + {ref_b}")
    expect(len(final) == 1 and final == final_b and final[0][1] == str(size_after),
           f"{name}: final loss on {size_after} ranks = B's: {final} vs {final_b}")


def changed_at(name, commits, every, before, after):
    """The global batch of the commit from which the world had `after` ranks, after checking
    that the sizes went from `before` to `after` there, once."""
    sizes = [c[2] for c in commits]
    at = (sizes.index(str(after)) if str(after) in sizes else 0) * every
    expect(at > 0 and sizes == [str(before)] * (at // every) + [str(after)] * (len(sizes) - at // every),
           f"{name}: sizes {before}, then {after}: {sizes}")
    return at


def joined_at(name, out, commits, every, after):
    """changed_at for a joiner coming into a world of `after`, after checking that it
    joined once."""
    joined = [m.groups() for m in JOINED.finditer(out)]
    expect(len(joined) == 1 and joined[0][1] == str(after) and joined[0][3] == "j1",
           f"{name}: the joiner j1 came into a world of {after}: {joined} (the job ended before it was let in?)")
    return changed_at(name, commits, every, after - 1, after)


def discovery_script(folder, body):
    """A --host-discovery-script in `folder` that runs `body` (sh)."""
    path = os.path.join(folder, "hosts.sh")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body + "\nexit 0\n")
    os.chmod(path, 0o755)
    return path


def main_hosts(kolorun, python, examples, prefix, launcher):
    """(d) a host added mid-training and (e) one removed, on test hosts."""
    every = 4
    hosts = [f"{prefix}-h{i}" for i in range(4)]
    example = [python, os.path.join(examples, "elastic_cnn.py"), "--batches-per-epoch", "12", "--commit-every",
               str(every), "--epochs", "16"]
    base = [kolorun, "--launcher", launcher, "-x", "PYTHONPATH"]

    def on(n):  # the example on the first n test hosts, one rank each
        return base + ["-H", ",".join(h + ":1" for h in hosts[:n])]

    started = int(time.time())
    with tempfile.TemporaryDirectory() as tmp:  # the 4th host from 3 s after the job's start
        discovery = discovery_script(tmp, f"printf '%s\\n' {' '.join(h + ':1' for h in hosts[:3])}\n"
                                          f"[ $(( $(date +%s) - {started} )) -ge 3 ] && echo {hosts[3]}:1")
        out, commits, final = launch("(d) a host added", on(3) + ["--min-np", "2", "--max-np", "4",
                                                                   "--host-discovery-script", discovery] + example)
    expect(f"started rank 3 on {hosts[3]}" in out, "(d) kolorun started a rank on the new host")
    at = joined_at("(d)", out, commits, every, 4)
    if at:
        replays("(d)", commits, final, on(3) + example, on(4) + example, 4, at)
    # (e) A host removed: 3 hosts, the script stops listing the third 3 s into the run; its
    # worker leaves at the next commit (exit 0), the other two go on without restoring.
    started = int(time.time())
    with tempfile.TemporaryDirectory() as tmp:
        discovery = discovery_script(tmp, f"printf '%s\\n' {' '.join(h + ':1' for h in hosts[:2])}\n"
                                          f"[ $(( $(date +%s) - {started} )) -lt 3 ] && echo {hosts[2]}:1")
        out, commits, final = launch("(e) a host removed", on(3) + ["--min-np", "2", "--max-np", "3",
                                                                     "--host-discovery-script", discovery] + example)
    expect("worker 2 leaves: its host was removed" in out and "rank 2 left" in out,
           "(e) the removed host's worker left, and kolorun said so")
    expect("killed by signal" not in out and "exited with status" not in out, "(e) no worker failed")
    at = changed_at("(e)", commits, every, 3, 2)
    if at:
        replays("(e)", commits, final, on(3) + example, on(2) + example, 2, at)
    print(f"elastic_test: {'FAIL' if failures else 'ok'} ({len(failures)} failed)")
    sys.exit(1 if failures else 0)


def main():
    if "--hosts" in sys.argv:
        i = sys.argv.index("--hosts")
        main_hosts(*sys.argv[1:4], sys.argv[i + 1], sys.argv[i + 2])
    kolorun, python, examples = sys.argv[1:4]
    help_text = subprocess.run([kolorun, "--help"], stdout=subprocess.PIPE, text=True).stdout
    has_elastic = "--min-np" in help_text
    # Without kolorun's flags, KOLO_ELASTIC=1 (which they set) still makes the world elastic.
    two = [kolorun, "-np", "2"] + (["--min-np", "2", "--max-np", "2"] if has_elastic else [])
    rc, out = kolorun_lines(two + [python, os.path.abspath(__file__), "--two-ranks"], {"KOLO_ELASTIC": "1"})
    print(out, end="")
    expect(rc == 0, f"(a) two ranks: kolorun exited {rc}")
    if not has_elastic:
        print("elastic_test: SKIP (b) and (c): kolorun has no --min-np (elastic jobs) yet")
        sys.exit(1 if failures else 77)

    # (b) Worker 2 of 4 killed at the start of batch `die`.
    bpe, every, die = 12, 4, 10
    example = [python, os.path.join(examples, "elastic_cnn.py"), "--batches-per-epoch", str(bpe),
               "--commit-every", str(every)]
    short = example + ["--epochs", "2"]
    out, commits, final = launch("(b) a worker killed", [kolorun, "-np", "4", "--min-np", "2", "--max-np", "4"] + short,
                                 {"ELASTIC_CNN_DIE_WORKER": "2", "ELASTIC_CNN_DIE_AT_BATCH": str(die)})
    rebuilt = [m.groups() for m in REBUILT.finditer(out)]
    expect(sorted(r[3] for r in rebuilt) == ["0", "1", "3"], f"survivors 0, 1, 3 print rebuilt lines: {rebuilt}")
    expect(all(r[0] == "1" and r[1] == "3" for r in rebuilt), f"rebuilt: membership epoch 1, size 3: {rebuilt}")
    expect(sorted(int(r[2]) for r in rebuilt) == [0, 1, 2], f"survivors ranked 0, 1, 2: {rebuilt}")
    for r in rebuilt:
        print(f"elastic_test: worker {r[3]} trained again {float(r[4]):.2f} s after the failure")
    resume = die // every * every  # the last commit before the kill (`die` is not a commit point)
    expect([c[2] for c in commits] == ["4"] * (resume // every) + ["3"] * ((2 * bpe - resume) // every),
           f"sizes: 4 up to the commit before the kill, 3 after: {commits}")
    replays("(b)", commits, final, [kolorun, "-np", "4"] + short, [kolorun, "-np", "3"] + short, 3, resume)
    _, _, final_whole = launch("(b) no failure", [kolorun, "-np", "4"] + short)
    if final and final_whole:
        a, b = float(final[0][0]), float(final_whole[0][0])
        print(f"elastic_test: final loss {a:.9g}, with no failure {b:.9g}")
        expect(abs(a - b) <= 1e-4 * abs(b), "the final loss is that of a run with no failure, within 1e-4")

    # (c) A worker joins a job of 3 (the discovery script offers a 4th slot from the start):
    # a commit after its arrival raises HostsUpdatedInterrupt; it gets the state by sync().
    long = example + ["--epochs", "16"]
    with tempfile.TemporaryDirectory() as tmp:
        discovery = discovery_script(tmp, "echo localhost:4")
        out, commits, final = launch("(c) a worker joins", [kolorun, "-np", "3", "--min-np", "2", "--max-np", "4",
                                                             "--host-discovery-script", discovery] + long)
    joined = [m.groups() for m in JOINED.finditer(out)]
    rebuilt = [m.groups() for m in REBUILT.finditer(out)]
    expect(joined == [("1", "4", "3", "j1")], f"the joiner: epoch 1, size 4, rank 3, worker j1: {joined} (the job "
                                              "ended before it was let in?)")
    expect(sorted(r[3] for r in rebuilt) == ["0", "1", "2"] and all(r[1] == "4" for r in rebuilt),
           f"workers 0, 1, 2 rebuilt on 4: {rebuilt}")
    at = changed_at("(c)", commits, every, 3, 4)  # the commit at which the joiner came in
    if at:
        replays("(c)", commits, final, [kolorun, "-np", "3"] + long, [kolorun, "-np", "4"] + long, 4, at)
    print(f"elastic_test: {'FAIL' if failures else 'ok'} ({len(failures)} failed)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    two_ranks() if TWO_RANKS else main()

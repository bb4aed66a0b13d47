#!/usr/bin/env python3
"""Writes the hand-made seeds of fuzz/corpus/ (run from anywhere; rewrites only the files
named here). Each seed is a well-formed input of its target, so the fuzzer starts from
inside the parser rather than at its first check. Inputs a long run found worth keeping
(reproducers of fixed bugs) sit beside them under other names."""
import os
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(target, name, data):
    os.makedirs(os.path.join(HERE, target), exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(HERE, target, name), "wb") as f:
        f.write(data)


# --- store_protocol_fuzz: bodies, and streams (client nonce + frames, insecure MACs) ---
def sbytes(b):
    b = b.encode() if isinstance(b, str) else b
    return struct.pack("<I", len(b)) + b


def frame(body):
    return struct.pack("<I", len(body)) + body + b"\0" * 32


hello = bytes([1]) + sbytes("kolo-store/4")
set_ = bytes([2]) + sbytes("job/rank/0") + sbytes("10.0.0.1:4242")
get = bytes([3]) + sbytes("job/rank/0")
add = bytes([4]) + sbytes("job/count") + struct.pack("<q", 1)
wait = bytes([5]) + struct.pack("<q", 2) + sbytes("a") + sbytes("b")
gather = bytes([9]) + sbytes("job/host/") + struct.pack("<q", 2) + struct.pack("<q", 1500) + struct.pack("<q", 0)
reply_ok = bytes([6]) + struct.pack("<q", 0) + sbytes("") + struct.pack("<q", 0)
reply_get = bytes([6]) + struct.pack("<q", 0) + sbytes("10.0.0.1:4242") + struct.pack("<q", 7)
reply_err = bytes([6]) + struct.pack("<q", 4) + sbytes("client speaks store protocol 'x'") + struct.pack("<q", 0)
reply_gather = bytes([6]) + struct.pack("<q", 0) + sbytes(sbytes("host-a") + sbytes("host-b")) + struct.pack("<q", 2)
for name, body in [("hello", hello), ("set", set_), ("get", get), ("add", add), ("wait", wait),
                   ("gather", gather), ("reply_ok", reply_ok), ("reply_get", reply_get), ("reply_error", reply_err),
                   ("reply_gather", reply_gather)]:
    write("store_protocol_fuzz", "body_" + name, body)
nonce = bytes(range(32))
write("store_protocol_fuzz", "stream_session", nonce + frame(hello) + frame(set_) + frame(get) + frame(add) + frame(wait) + frame(gather))
write("store_protocol_fuzz", "stream_replies", nonce + frame(reply_ok) + frame(reply_get) + frame(reply_err))
write("store_protocol_fuzz", "stream_partial", nonce + frame(hello) + struct.pack("<I", 40) + b"\3")

# --- tcp_link_fuzz: byte 0 = receives before (bits 0-1) / after (bits 2-3), then per
# receive tag + u16 size, then frames (u64 tag, u64 bytes, payload; host order) ---
def tframe(tag, payload):
    return struct.pack("<QQ", tag, len(payload)) + payload


write("tcp_link_fuzz", "early_frames", b"\0" + tframe(1, b"abcd") + tframe(2, b""))
write("tcp_link_fuzz", "posted", b"\1" + bytes([1]) + struct.pack("<H", 4) + tframe(1, b"abcd"))
write("tcp_link_fuzz", "posted_and_late", b"\5" + bytes([1]) + struct.pack("<H", 4) + bytes([2]) + struct.pack("<H", 3)
      + tframe(2, b"xyz") + tframe(1, b"abcd"))
write("tcp_link_fuzz", "size_mismatch", b"\1" + bytes([7]) + struct.pack("<H", 8) + tframe(7, b"abcd"))
write("tcp_link_fuzz", "truncated", b"\0" + tframe(3, b"0123456789")[:20])
# A hello as the acceptor reads it: 80 bytes, so the target's rank is 80 % 3 = 2.
write("tcp_link_fuzz", "hello", struct.pack("<IiiI", 0x6B6F6C32, 3, 2, 0) + bytes(range(32)) + b"\0" * 32)

# --- shm_offer_fuzz: byte 0 = ranks the reader expects, then the offer (or a pid) ---
write("shm_offer_fuzz", "offer_2", b"\2kolo-00112233445566778899aabbccddeeff 2 4 1048576 262144")
write("shm_offer_fuzz", "offer_8", b"\x08kolo-0f 8 64 4096 1073741824")
write("shm_offer_fuzz", "pid", b"\2" + b"12345")

# --- shm_link_fuzz: as tcp_link_fuzz, but 32-byte headers (tag, bytes, address, kind, 0) ---
def shframe(tag, payload, kind=1, address=0, size=None):
    n = len(payload) if size is None else size
    return struct.pack("<QQQII", tag, n, address, kind, 0) + (payload if kind == 1 else b"")


write("shm_link_fuzz", "early_frames", b"\0" + shframe(1, b"abcd") + shframe(2, b""))
write("shm_link_fuzz", "posted", b"\1" + bytes([1]) + struct.pack("<H", 4) + shframe(1, b"abcd"))
write("shm_link_fuzz", "posted_and_late", b"\5" + bytes([1]) + struct.pack("<H", 4) + bytes([2]) + struct.pack("<H", 3)
      + shframe(2, b"xyz") + shframe(1, b"abcd"))
write("shm_link_fuzz", "wraps_the_ring", b"\1" + bytes([5]) + struct.pack("<H", 4000) + shframe(9, b"x" * 100)
      + shframe(5, bytes(range(256)) * 15 + b"y" * 160))
write("shm_link_fuzz", "request_to_send", b"\1" + bytes([3]) + struct.pack("<H", 64)
      + shframe(3, b"", kind=2, address=0x1000, size=64) + shframe(4, b"", kind=2, address=0, size=8))
write("shm_link_fuzz", "stray_ack", b"\0" + shframe(6, b"", kind=3))

# --- runtime_message_fuzz (engine/runtime/wire.h: u64 and f64 little-endian) ---
def wstr(s):
    s = s.encode()
    return struct.pack("<Q", len(s)) + s


def u64s(values):
    return struct.pack("<Q", len(values)) + b"".join(struct.pack("<Q", v) for v in values)


def sig(kind=0, dtype=8, op=0, root=0, pre=1.0, post=1.0, wire=12, device=0, counts=(1024,)):
    return bytes([kind, dtype, op]) + struct.pack("<qdd", root, pre, post) + bytes([wire, device]) + u64s(counts)


rank_msg = (b"\0" + struct.pack("<Q", 2) + wstr("grad.0") + sig() + u64s([]) + wstr("grad.1")
            + sig(kind=3, counts=(16,)) + u64s([16]) + struct.pack("<Q", 1) + wstr("grad.2") + struct.pack("<d", 61.5))
joined = b"\1" + struct.pack("<Q", 0) + struct.pack("<Q", 0)
responses = (struct.pack("<Q", 2) + wstr("grad.0") + sig() + struct.pack("<Q", 0) + b"\0" + wstr("")
             + wstr("grad.1") + sig(kind=3, counts=(16,)) + struct.pack("<Q", 2) + u64s([16]) + u64s([8])
             + b"\4" + wstr("mismatch") + b"\0" + wstr(""))
write("runtime_message_fuzz", "rank_message", rank_msg)
write("runtime_message_fuzz", "rank_joined", joined)
write("runtime_message_fuzz", "response_list", responses)
# For the coordinator: byte 0 = ranks - 1, then per rank u16 length + message.
two = [b"\0" + struct.pack("<Q", 1) + wstr("t") + sig() + u64s([]) + struct.pack("<Q", 0),
       b"\0" + struct.pack("<Q", 1) + wstr("t") + sig(counts=(512,)) + u64s([]) + struct.pack("<Q", 0)]
write("runtime_message_fuzz", "coordinator_mismatch", b"\1" + b"".join(struct.pack("<H", len(m)) + m for m in two))
same = [two[0], two[0], two[0]]
write("runtime_message_fuzz", "coordinator_agree", b"\2" + b"".join(struct.pack("<H", len(m)) + m for m in same))

# --- env_fuzz: lines of <selector><value>; selector 'N' + i picks variable i (env_fuzz.cc) ---
names = ["KOLO_TIMEOUT", "KOLO_ALGO", "KOLO_TRANSPORTS", "KOLO_SHM_SINGLE_COPY", "KOLO_SHM_CHUNK_BYTES",
         "KOLO_SHM_STREAM_BYTES", "KOLO_CHUNK_BYTES", "KOLO_FUSION_THRESHOLD", "KOLO_CYCLE_TIME",
         "KOLO_CACHE_CAPACITY", "KOLO_STALL_CHECK_TIME", "KOLO_STALL_SHUTDOWN_TIME", "KOLO_AUTOTUNE", "KOLO_RANK",
         "KOLO_SIZE", "KOLO_ADDR", "KOLO_SECRET", "KOLO_INSECURE", "KOLO_LAUNCHER", "KOLO_BACKEND",
         "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_JOB_NODELIST",
         "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_STEP_NODELIST", "PMI_RANK", "PMI_SIZE"]


def env(**values):
    return "".join(chr(ord("N") + names.index(k)) + v + "\n" for k, v in values.items())


write("env_fuzz", "kolorun", env(KOLO_RANK="1", KOLO_SIZE="4", KOLO_ADDR="10.0.0.1:29500",
                                 KOLO_SECRET="00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
                                 KOLO_LAUNCHER="kolorun"))
write("env_fuzz", "tuning", env(KOLO_ALGO="halving_doubling", KOLO_TRANSPORTS="shm,tcp", KOLO_CHUNK_BYTES="262144",
                                KOLO_SHM_CHUNK_BYTES="1048576", KOLO_SHM_SINGLE_COPY="0", KOLO_TIMEOUT="12.5",
                                KOLO_FUSION_THRESHOLD="67108864", KOLO_CYCLE_TIME="0.5", KOLO_CACHE_CAPACITY="0",
                                KOLO_STALL_CHECK_TIME="30", KOLO_STALL_SHUTDOWN_TIME="120", KOLO_AUTOTUNE="1",
                                KOLO_BACKEND="kolo", KOLO_SHM_STREAM_BYTES="1e9"))
write("env_fuzz", "slurm", env(SLURM_PROCID="3", SLURM_NTASKS="8", SLURM_JOB_NODELIST="gpu[03-05,7],cpu1",
                               SLURM_JOB_ID="123456", SLURM_STEP_ID="2", SLURM_STEP_NODELIST="gpu[04-05]",
                               KOLO_INSECURE="1"))
write("env_fuzz", "openmpi", env(OMPI_COMM_WORLD_RANK="0", OMPI_COMM_WORLD_SIZE="2", KOLO_ADDR="[::1]:4000",
                                 KOLO_INSECURE="1"))
write("env_fuzz", "bad_values", env(KOLO_TIMEOUT="-1", KOLO_ALGO="rings", KOLO_TRANSPORTS="tcp,,ucx",
                                    KOLO_CHUNK_BYTES="0x10", KOLO_SECRET="abc", KOLO_RANK="4", KOLO_SIZE="4"))

# --- schedule_json_fuzz: bytes pick ranks, rank, generator, dtype, op, count, root, flags,
# chunk, then whether a second call is appended (schedule_json_fuzz.cc) ---
write("schedule_json_fuzz", "ring_allreduce_4", bytes([3, 1, 0, 8, 0, 0, 4, 0, 0, 0, 0]))
write("schedule_json_fuzz", "tree_and_direct", bytes([7, 5, 5, 8, 0, 0x10, 0x27, 0, 6, 2, 1, 13, 4, 0, 0x40, 0, 3, 0, 0]))
write("schedule_json_fuzz", "halving_doubling_6", bytes([5, 4, 4, 9, 1, 0xff, 0x7f, 0, 0, 7, 0]))
write("schedule_json_fuzz", "alltoall_barrier", bytes([2, 0, 18, 1, 0, 100, 0, 0, 0, 0, 1, 19, 0, 0, 0, 0, 0, 0, 0]))

# --- topology parsers: the smallest forms (tools/fuzz.sh adds topology/fixtures) ---
write("topo_json_fuzz", "minimal",
      '{"format": "kolo-topology", "version": 1, "host": "h", "nodes": [{"name": "cpu0", "kind": "cpu", '
      '"index": 0, "socket": 0, "cores": 2}, {"name": "gpu0", "kind": "gpu", "index": 0, "bus_id": "0000:17:00.0"}], '
      '"links": [{"a": "gpu0", "b": "cpu0", "kind": "pcie"}]}\n')
write("topo_nccl_xml_fuzz", "minimal",
      '<system version="1"><cpu numaid="0" affinity="ff" arch="x86_64" vendor="GenuineIntel" familyid="6" '
      'modelid="85"><pci busid="0000:17:00.0" class="0x030200" link_speed="16.0 GT/s PCIe" link_width="16">'
      '<gpu dev="0" sm="80" rank="0" gdr="1"/></pci></cpu></system>\n')

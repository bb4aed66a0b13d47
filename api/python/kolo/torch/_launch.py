"""Who started this process: the rank, size and local placement its launcher gave it
(kolorun, torchrun, Open MPI, MPICH, Slurm, or a hand-made KOLO_RANK), as kolo_init reads
them. kolo.torch (its world under torchrun) and the "kolo" backend (init_process_group) ask."""
import os
from typing import NamedTuple


class Launch(NamedTuple):
    """Where this process stands in the job its launcher started."""
    rank: int
    size: int
    local_rank: int  # among the ranks on this host
    local_size: int  # ranks on this host; 0 where the launcher does not say
    launcher: str    # "kolorun", "KOLO_RANK" (set by hand), "torchrun", "Open MPI", "Slurm", "single process"
    job: str         # a name the launcher gives this job, the same on every rank ("" if none)


def _int(name, default=None):
    text = os.environ.get(name)
    if text is None or text == "":
        if default is None:
            raise ValueError(f"kolo: {name} is not set")
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"kolo: {name}={text!r} is not a number") from None
    if value < 0:
        raise ValueError(f"kolo: {name}={text!r} is negative")
    return value


def launched():
    """The rank and size this process was started with, from the variables of its launcher:
    kolorun (or a hand-made launch) KOLO_RANK/KOLO_SIZE, torchrun RANK/WORLD_SIZE, Open
    MPI's mpirun OMPI_COMM_WORLD_RANK/SIZE, MPICH's mpiexec PMI_RANK/PMI_SIZE, Slurm's srun
    SLURM_PROCID/SLURM_NTASKS (of a step), in that order (torchrun inside an mpirun or srun allocation is the launcher of this process);
    none of them: a single process. As kolo_init reads them, torchrun's added."""
    env = os.environ

    def has(*names):
        return all(env.get(n) for n in names)

    if has("KOLO_RANK", "KOLO_SIZE"):
        rank, size = _int("KOLO_RANK"), _int("KOLO_SIZE")
        local_rank, local_size = _int("KOLO_LOCAL_RANK", rank), _int("KOLO_LOCAL_SIZE", 0)
        launcher = "kolorun" if env.get("KOLO_LAUNCHER") == "kolorun" else "KOLO_RANK"
        job = env.get("KOLO_ADDR", "")
    elif has("RANK", "WORLD_SIZE"):
        rank, size = _int("RANK"), _int("WORLD_SIZE")
        local_rank, local_size = _int("LOCAL_RANK", rank), _int("LOCAL_WORLD_SIZE", 0)
        launcher = "torchrun"
        job = env.get("TORCHELASTIC_RUN_ID") or (f"{env['MASTER_ADDR']}:{env['MASTER_PORT']}"
                                                 if has("MASTER_ADDR", "MASTER_PORT") else "")
    elif has("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"):
        rank, size = _int("OMPI_COMM_WORLD_RANK"), _int("OMPI_COMM_WORLD_SIZE")
        local_rank = _int("OMPI_COMM_WORLD_LOCAL_RANK", rank)
        local_size = _int("OMPI_COMM_WORLD_LOCAL_SIZE", 0)
        launcher = "Open MPI"
        job = env.get("PMIX_NAMESPACE") or env.get("OMPI_MCA_ess_base_jobid", "")
    elif has("PMI_RANK", "PMI_SIZE"):
        rank, size = _int("PMI_RANK"), _int("PMI_SIZE")
        local_rank, local_size = _int("MPI_LOCALRANKID", rank), _int("MPI_LOCALNRANKS", 0)
        launcher = "MPICH (Hydra)"
        job = env.get("KOLO_ADDR", "")
    elif has("SLURM_PROCID", "SLURM_NTASKS", "SLURM_STEP_ID"):  # a step's task, not the batch script
        rank, size = _int("SLURM_PROCID"), _int("SLURM_NTASKS")
        local_rank = _int("SLURM_LOCALID", rank)
        local_size = size if env.get("SLURM_STEP_NUM_NODES", env.get("SLURM_NNODES")) == "1" else 0
        launcher = "Slurm"
        job = f"{env['SLURM_JOB_ID']}.{env.get('SLURM_STEP_ID', '0')}" if env.get("SLURM_JOB_ID") else ""
    else:
        return Launch(0, 1, 0, 1, "single process", "")
    if size < 1 or rank >= size:
        raise ValueError(f"kolo: rank {rank} of {size} (from {launcher}) is not a rank of the job")
    return Launch(rank, size, local_rank, local_size, launcher, job)

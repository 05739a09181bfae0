// Who am I in a multi-process job? Rank, world size and local rank from the
// launcher's environment: OpenMPI's mpirun (OMPI_COMM_WORLD_*), Slurm's srun
// (SLURM_PROCID / SLURM_STEP_NUM_TASKS / SLURM_LOCALID) or torchrun-style variables
// (RANK / WORLD_SIZE / LOCAL_RANK). No MPI library is involved: the launchers
// only start the processes.
#pragma once

#include <cstdlib>
#include <string>

#include "zero/base/common.h"

struct LaunchEnv {
    int world = 1, rank = 0, local_rank = 0;
    std::string source = "none";  // which launcher's variables were found
};

inline bool env_int(const char* name, int& out) {
    const char* v = getenv(name);
    if (!v || !*v) return false;
    char* end = nullptr;
    long x = strtol(v, &end, 10);
    CHECK(*end == '\0' && x >= 0 && x < (1L << 24), "environment variable %s=%s is not a valid count", name, v);
    out = (int)x;
    return true;
}

inline LaunchEnv detect_launch_env() {
    LaunchEnv e;
    struct Source {
        const char *rank, *world, *local, *name;
    };
    const Source sources[] = {
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OpenMPI"},
        // srun sets SLURM_STEP_NUM_TASKS for its job step; a batch script alone has
        // SLURM_NTASKS too but is a single process
        {"SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", "Slurm"},
        {"RANK", "WORLD_SIZE", "LOCAL_RANK", "RANK/WORLD_SIZE"},
    };
    for (const Source& s : sources) {
        if (!env_int(s.world, e.world)) continue;
        CHECK(env_int(s.rank, e.rank), "%s is set but %s is not", s.world, s.rank);
        if (!env_int(s.local, e.local_rank)) e.local_rank = e.rank;
        CHECK(e.world >= 1 && e.rank < e.world, "%s=%d is not below %s=%d", s.rank, e.rank, s.world, e.world);
        e.source = s.name;
        return e;
    }
    return e;
}

# Communication: the rendezvous of multi-process jobs (zero/comm/bootstrap.h), launcher
# detection (zero/comm/launcher.h) and, on machines with GPUs, the NCCL backend
# (zero/comm/comm_nccl.h) under mpirun.

# Ranks as forked processes meeting over loopback TCP or a file: payload
# delivery, duplicate-GPU / world / rank errors reaching every rank, timeouts,
# stray connections, options from the environment.
zero_test(NAME bootstrap SOURCES test_bootstrap.cpp ARGS bootstrap LABELS cpu comm)
set_tests_properties(bootstrap PROPERTIES TIMEOUT 300)

# detect_launch_env() under OpenMPI, Slurm and RANK/WORLD_SIZE variables, and
# malformed values.
zero_test(NAME launcher SOURCES test_bootstrap.cpp ARGS launcher LABELS cpu comm)

# mpirun -np 2 of the CUDA trainer: with one GPU it must fail with the
# duplicate-GPU message; with two or more, its losses must match the same run
# emulated as --ranks 2 in one process. Skipped (77) without a GPU or mpirun.
zero_script_test(NAME nccl_launch
                 COMMAND bash "${CMAKE_CURRENT_SOURCE_DIR}/run_nccl_tests.sh" "${REPO_ROOT}"
                 LABELS gpu comm)
set_tests_properties(nccl_launch PROPERTIES TIMEOUT 3600)
# hangs: the emulated backend's barrier watchdog names the waiting rank, the collective and the missing rank
zero_test(NAME watchdog SOURCES test_watchdog.cpp)
# Sub-communicators (Comm::split) of the emulated backend on t x d grids: each
# group's collectives, rank order by key, and bytes counted per communicator.
zero_test(NAME comm_groups SOURCES test_comm_groups.cpp)

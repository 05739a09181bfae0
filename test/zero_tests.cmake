# ZeRO: the shard plan, the stages end to end, communication volume, memory
# accounting against the predictor, checkpoints.
zero_test(NAME zero_stages SOURCES test_zero_stages.cpp ARGS ${CPU_TRAINER})
# clipping by the whole model's norm on every data-parallel rank, at every stage, offloaded or not
zero_test(NAME clip_across_ranks SOURCES test_clip_across_ranks.cpp ARGS ${CPU_TRAINER})
zero_test(NAME zero_memory SOURCES test_zero_memory.cpp ARGS ${CPU_TRAINER})
zero_test(NAME oracle SOURCES test_oracle.cpp ARGS ${CPU_TRAINER} ${REPO_ROOT}/dev/gpt2_reference.py)
zero_test(NAME shard_plan SOURCES test_shard_plan.cpp)
# checking mode: the GPU's stream order held on the CPU, released memory poisoned
zero_test(NAME stream_check SOURCES test_stream_check.cpp)
zero_test(NAME comm_emulated SOURCES test_comm_emulated.cpp)
zero_test(NAME checkpoint SOURCES test_checkpoint.cpp ARGS ${CPU_TRAINER})
zero_test(NAME offload_recompute SOURCES test_offload_recompute.cpp ARGS ${CPU_TRAINER})
# NVMe offload bit for bit against CPU offload (stages, precisions, delayed update, tp, pp, the host's
# share), checkpoints across the two, the disk in the memory report, bad input and faults
zero_test(NAME nvme_offload SOURCES test_nvme_offload.cpp ARGS ${CPU_TRAINER} ${REPO_ROOT}/dev/homework/stage3_offload.json)
# the delayed parameter update (--offload_delay_steps) bit for bit against the engine driven by its rule
zero_test(NAME delayed_update SOURCES test_delayed_update.cpp)
# NVMe offload of the optimizer states: the ring bit for bit against memory, disk faults, the dry run's ops
zero_test(NAME disk_states SOURCES test_disk_states.cpp)
zero_test(NAME loss_scaler SOURCES test_loss_scaler.cpp ARGS ${CPU_TRAINER})
# kill -9 at random moments during a run that checkpoints every step, then resume:
# bit-identical to the uninterrupted run; another run's directory refused or overwritten, never mixed
zero_test(NAME kill_resume SOURCES test_kill_resume.cpp ARGS ${CPU_TRAINER})
zero_test(NAME tp_plan SOURCES test_tp_plan.cpp)
zero_test(NAME vocab_parallel SOURCES test_vocab_parallel.cpp)
# Tensor parallelism beside ZeRO: the grid in process (losses, parameters,
# bytes, memory against one rank and the formulas) and through the trainer.
zero_test(NAME tensor_parallel SOURCES test_tensor_parallel.cpp)
zero_test(NAME tp_trainer SOURCES test_tp_trainer.cpp ARGS ${CPU_TRAINER})
# Checkpoints of a t x d grid resumed on another grid (t, d and stage), through the full tensors.
zero_test(NAME tp_checkpoint SOURCES test_tp_checkpoint.cpp ARGS ${CPU_TRAINER})
# The prepared speed variants (ZERO_VARIANTS): the one-launch optimizer and the fused residual layernorm
# bit for bit through the trainer, the loss summed on the device, the encoder backward's split runs
zero_test(NAME variants SOURCES test_variants.cpp ARGS ${CPU_TRAINER})

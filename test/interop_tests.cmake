# Working with other tools: Hugging Face checkpoints in and out (test_hf.cpp:
# the safetensors reader and writer, --from_hf, --export_hf, the export's
# logits through dev/hf_reference.py and PyTorch), --sample (test_sample.cpp:
# the token draw, and the command against PyTorch's greedy decoding; needs
# data/gpt2_tokenizer.bin), and the CPU trainer's threads and peak line
# (test_run_log.cpp).
zero_test(NAME hf SOURCES test_hf.cpp ARGS ${CPU_TRAINER} ${REPO_ROOT}/dev/hf_reference.py LABELS cpu)
zero_test(NAME sample SOURCES test_sample.cpp
          ARGS ${CPU_TRAINER} ${REPO_ROOT}/dev/sample_reference.py ${REPO_ROOT}/data/gpt2_tokenizer.bin
          LABELS cpu)
zero_test(NAME run_log SOURCES test_run_log.cpp ARGS ${CPU_TRAINER} LABELS cpu)
# dev/bench_torch_gpt2.py (the torch.compile GPT-2 that dev/bench_gpu.sh section
# `peers` times against ours on a GPU) in its tiny CPU mode with Debian's torch:
# the final line's format, and that 2 steps train (test_bench_torch_gpt2.sh).
zero_script_test(NAME bench_torch_gpt2 COMMAND sh "${REPO_ROOT}/test/test_bench_torch_gpt2.sh" "${REPO_ROOT}"
                 LABELS cpu)
# dev/bench_speed.sh (the prepared speed variants' GPU script) against a stand-in trainer: its table's
# ratios and bit checks, flags where a variant moves the bits or is not on; dev/kernel_table.py's parsing
zero_script_test(NAME bench_speed COMMAND sh "${REPO_ROOT}/test/test_bench_speed.sh" "${REPO_ROOT}" LABELS cpu)

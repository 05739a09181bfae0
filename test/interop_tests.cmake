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

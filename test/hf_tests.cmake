# Hugging Face checkpoints in and out: the safetensors reader and writer,
# --from_hf and --export_hf (test_hf.cpp; the export's logits through
# dev/hf_reference.py and PyTorch).
zero_test(NAME hf SOURCES test_hf.cpp ARGS ${CPU_TRAINER} ${REPO_ROOT}/dev/hf_reference.py LABELS cpu)

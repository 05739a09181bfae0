# DeepSpeed-style JSON configs (--deepspeed_config): the strict JSON parser
# (zero/base/json.h) on valid and invalid documents, and the mapping of DeepSpeed's
# keys onto the trainer's options (zero/run/deepspeed_config.h), one-line errors
# included; and a corpus of configs as people write them (test_deepspeed_corpus.cpp).
zero_test(NAME deepspeed_config SOURCES test_deepspeed_config.cpp test_deepspeed_corpus.cpp LABELS cpu)

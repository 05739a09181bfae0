// The small GPT-2 shapes the tests build, named once. Each is a model
// descriptor (zero/layout/gpt2_config.h): layers, heads, channels, vocabulary,
// longest sequence. Small enough that a whole training run takes a second on
// the CPU build, large enough to have several units and heads.
#pragma once

// The vocabulary of every shape below: the tests' token shards draw from it.
constexpr int TINY_VOCAB = 512;

// two layers, sequences of up to 32: the trainer's end-to-end tests
constexpr const char* TINY = "L=2,H=4,C=64,V=512,T=32";
// four layers: recomputation has layer outputs to drop
constexpr const char* TINY_4_LAYERS = "L=4,H=4,C=64,V=512,T=32";
// sequences of up to 64: the PyTorch oracle, the shard plans
constexpr const char* TINY_T64 = "L=2,H=4,C=64,V=512,T=64";

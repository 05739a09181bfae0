// DeepSpeed configs as people write them, read as DeepSpeed reads them
// (zero/run/deepspeed_config.h): a corpus of configs, each modelled on a public
// file named beside it, taken through the command line as the trainer takes it,
// with what each must resolve to (the settings line), the notes it must print or
// its refusal; for each with a schedule, the learning rate of every step of a
// 40-step run against DeepSpeed's own formulas, written out below. Then the rules
// the corpus leans on, one by one: the flags around the file, the checked and the
// lenient sections, bias_correction, the bound on a file's size, comments.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "test/child_process.h"
#include "test/test_util.h"
#include "zero/run/run_setup.h"

namespace {

// DeepSpeed's learning-rate schedules (deepspeed/runtime/lr_schedules.py), from
// their formulas, in double: the rate its scheduler holds after `it` of its steps
// (it = -1: as constructed, before any). With W = max(2, warmup_num_steps) and a
// warmup fraction w(it) = ln(it + 1) / ln(W) ("log", the default) or it / W
// ("linear") while it < W:
//   WarmupLR       min + (max - min) x w, then max
//   WarmupDecayLR  the same warmup, then min + (max - min) x max(0, (T - it) / max(1, T - W))
//   WarmupCosineLR lr x r: r = min_ratio + (1 - min_ratio) x w during warmup, then
//                  max(0, c + (1 - c) x (1 + cos(pi x p)) / 2), p = min(1, (it - W + 1) / max(1, T - W)),
//                  c = cos_min_ratio; and 0 before any step
// DeepSpeed's engine steps the scheduler after each optimizer step, so step s
// (from 0) runs at it = s - 1.
struct DeepSpeedSchedule {
    std::string type;  // "": no schedule to check
    double min, max;   // warmup_min_lr, warmup_max_lr; WarmupCosineLR: warmup_min_ratio, the optimizer's lr
    int warmup = 1000, total = 0;  // warmup_num_steps, total_num_steps
    bool log = true;
    double cos_min_ratio = 0.0001;

    double at(int it) const {
        const int W = std::max(2, warmup);
        const double w = log ? std::log(it + 1.0) / std::log((double)W) : (double)it / W;
        if (type == "WarmupCosineLR") {
            if (it < 0) return 0.0;
            if (it < W) return max * (min + (1 - min) * w);
            const double p = std::min(1.0, (it - W + 1.0) / std::max(1, total - W));
            return max * std::max(0.0, cos_min_ratio + (1 - cos_min_ratio) * (1 + std::cos(M_PI * p)) / 2);
        }
        if (it < 0) return min;
        const double gamma = it < W ? w : type == "WarmupLR" ? 1.0 : std::max(0.0, (double)(total - it) / std::max(1, total - W));
        return min + (max - min) * gamma;
    }
};

const int STEPS = 40;  // every config runs -x 40

// The trainer's reading of a command line around `json` (in corpus.json): its
// flags, DeepSpeed's batch rules, the run's checks, then the settings line on
// stderr; with a schedule, the learning rate of each step against DeepSpeed's
// (exit 4 at the first that differs). In a child: a refusal ends it (status 1).
ChildResult run_config(const std::string& json, const std::string& before, const std::string& after,
                       const DeepSpeedSchedule& schedule = {}) {
    FILE* f = open_file("corpus.json", "wb");
    fputs(json.c_str(), f);
    fclose(f);
    return run_in_child([&] {
        TrainOptions o;
        parse_flag_string("-e L=2,H=12,C=96,V=384,T=32 -t 32 --ranks 4 -x " + std::to_string(STEPS) + " " + before +
                              " --deepspeed_config corpus.json " + after,
                          o);
        resolve_batch(o);
        make_run_setup(o);
        print_option_sources(o, stderr);
        for (int s = 0; !schedule.type.empty() && s < STEPS; s++) {
            const double want = schedule.at(s - 1), got = learning_rate_at(o, s, STEPS);
            if (std::fabs(got - want) > 1e-6 * want + 1e-15) {
                fprintf(stderr, "step %d: lr %.9g, DeepSpeed's %.9g\n", s, got, want);
                _exit(4);
            }
        }
    });
}

struct CorpusConfig {
    const char* source;  // the public file it is modelled on
    const char* json;
    const char* before, *after;  // flags before and after --deepspeed_config
    std::vector<std::string> expect;  // in stderr: the settings line's items and notes, or the one-line refusal
    bool refused;
    DeepSpeedSchedule schedule;
};

const DeepSpeedSchedule NONE{};

std::vector<CorpusConfig> corpus() {
    return {
        {"huggingface/transformers tests/deepspeed/ds_config_zero2.json (every value \"auto\")",
         R"({"fp16": {"enabled": "auto", "loss_scale": 0, "loss_scale_window": 1000, "initial_scale_power": 16,
                      "hysteresis": 2, "min_loss_scale": 1},
             "bf16": {"enabled": "auto"},
             "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
             "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto",
                                                          "warmup_num_steps": "auto"}},
             "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "pin_memory": true},
                                   "allgather_partitions": true, "allgather_bucket_size": 2e8, "overlap_comm": true,
                                   "reduce_scatter": true, "reduce_bucket_size": 2e8, "contiguous_gradients": true},
             "gradient_accumulation_steps": "auto", "gradient_clipping": "auto", "steps_per_print": 2000,
             "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "wall_clock_breakdown": false})",
         "-l 5e-4 -u 10 -b 2", "",
         {" --zero_stage 2 ", " --grad_clip 1 ", " --lr 0.0005 ", " --lr_schedule WarmupLR ", " --warmup 10 ",
          " --warmup_type log ", " --offload_optimizer cpu", "note: \"auto\" keeps this trainer's values: "
          "train_micro_batch_size_per_gpu 2, gradient_accumulation_steps (-d's), train_batch_size (-b and -d's), "
          "gradient_clipping 1, bf16.enabled (the build's default precision), fp16.enabled (the build's default "
          "precision), optimizer.params.lr 0.0005, optimizer.params.weight_decay 0, optimizer.params.betas (0.9, "
          "0.95), optimizer.params.eps 1e-08, scheduler.params.warmup_num_steps 10, scheduler.params.warmup_max_lr "
          "0.0005, scheduler.params.warmup_min_lr 0\n"},
         false, {"WarmupLR", 0, 5e-4, 10}},
        {"huggingface/transformers tests/deepspeed/ds_config_zero3.json (its explicit version)",
         R"({"fp16": {"enabled": true, "loss_scale": 0, "loss_scale_window": 1000, "initial_scale_power": 16,
                      "hysteresis": 2, "min_loss_scale": 1},
             "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": true},
                                   "offload_param": {"device": "cpu", "pin_memory": true}, "overlap_comm": true,
                                   "contiguous_gradients": true, "sub_group_size": 1e14, "reduce_bucket_size": 0,
                                   "stage3_prefetch_bucket_size": 0, "stage3_param_persistence_threshold": 0,
                                   "stage3_max_live_parameters": 1e9, "stage3_max_reuse_distance": 1e9,
                                   "stage3_gather_fp16_weights_on_model_save": true},
             "optimizer": {"type": "AdamW", "params": {"lr": 3e-5, "betas": [0.8, 0.999], "eps": 1e-8, "weight_decay": 3e-7}},
             "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 3e-5, "warmup_num_steps": 500}},
             "steps_per_print": 2000, "wall_clock_breakdown": false})",
         "-b 2", "",
         {" --precision fp16", " --zero_stage 3 ", " --offload_param cpu", " --adam_beta1 0.8 ", " --lr 3e-05 ",
          " --warmup 500 ", "note: scheduler WarmupLR as DeepSpeed computes it: log warmup, then constant\n",
          "note: no effect here (each tunes what this trainer does one fixed way; zero/run/deepspeed_keys.cpp says how): "
          "zero_optimization.offload_optimizer.pin_memory, zero_optimization.offload_param.pin_memory, "
          "zero_optimization.overlap_comm, zero_optimization.contiguous_gradients, zero_optimization.sub_group_size, "
          "zero_optimization.reduce_bucket_size, zero_optimization.stage3_prefetch_bucket_size, "
          "zero_optimization.stage3_param_persistence_threshold, zero_optimization.stage3_max_live_parameters, "
          "zero_optimization.stage3_max_reuse_distance, zero_optimization.stage3_gather_fp16_weights_on_model_save, "
          "steps_per_print, wall_clock_breakdown\n"},
         false, {"WarmupLR", 0, 3e-5, 500}},
        {"huggingface/transformers tests/deepspeed/ds_config_zero3_bf16.json",
         R"({"bfloat16": {"enabled": "auto"},
             "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
             "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto",
                                                          "warmup_num_steps": "auto"}},
             "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": true},
                                   "offload_param": {"device": "cpu", "pin_memory": true}, "overlap_comm": true,
                                   "contiguous_gradients": true, "sub_group_size": 1e9, "reduce_bucket_size": "auto",
                                   "stage3_prefetch_bucket_size": "auto", "stage3_param_persistence_threshold": "auto",
                                   "stage3_max_live_parameters": 1e9, "stage3_max_reuse_distance": 1e9,
                                   "stage3_gather_fp16_weights_on_model_save": true},
             "gradient_accumulation_steps": "auto", "gradient_clipping": "auto", "steps_per_print": 2000,
             "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "wall_clock_breakdown": false})",
         "-p bf16 -u 0", "",
         {"bfloat16.enabled bf16", " --zero_stage 3 ", " --warmup 0 ", " --lr 0.0003 "}, false, {"WarmupLR", 0, 3e-4, 0}},
        {"deepspeedai/DeepSpeedExamples training/cifar/cifar10_deepspeed.py, get_ds_config (--dtype bf16 --stage 1)",
         R"({"train_batch_size": 16, "steps_per_print": 2000,
             "optimizer": {"type": "Adam", "params": {"lr": 0.001, "betas": [0.8, 0.999], "eps": 1e-8, "weight_decay": 3e-7}},
             "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 0.001, "warmup_num_steps": 1000}},
             "gradient_clipping": 1.0, "prescale_gradients": false, "bf16": {"enabled": true},
             "fp16": {"enabled": false, "fp16_master_weights_and_grads": false, "loss_scale": 0, "loss_scale_window": 500,
                      "hysteresis": 2, "min_loss_scale": 1, "initial_scale_power": 15},
             "wall_clock_breakdown": false,
             "zero_optimization": {"stage": 1, "allgather_partitions": true, "reduce_scatter": true,
                                   "allgather_bucket_size": 50000000, "reduce_bucket_size": 50000000,
                                   "overlap_comm": true, "contiguous_gradients": true, "cpu_offload": false}})",
         "", "", {" --micro_batch 4 ", " --total_batch 512 ", " --precision bf16", " --zero_stage 1 ", " --grad_clip 1 "},
         false, {"WarmupLR", 0, 1e-3, 1000}},
        {"deepspeedai/DeepSpeedExamples training/pipeline_parallelism/ds_config.json",
         R"({"train_batch_size": 256, "train_micro_batch_size_per_gpu": 8,
             "optimizer": {"type": "Adam", "params": {"lr": 0.001, "betas": [0.9, 0.999], "eps": 1e-8}},
             "steps_per_print": 10, "wall_clock_breakdown": false})",
         "", "", {" --micro_batch 8 ", " --total_batch 8192 ", " --lr_schedule cosine ", " --warmup 0 ",
                  " --final_lr_frac 1 ", " --grad_clip 0 ", " --zero_stage 0 "}, false, NONE},
        {"deepspeedai/DeepSpeedExamples training/imagenet/config/ds_fp16_z1_config.json",
         R"({"train_batch_size": 256, "gradient_accumulation_steps": 1, "steps_per_print": 50,
             "optimizer": {"type": "Adam", "params": {"lr": 0.001, "betas": [0.8, 0.999], "eps": 1e-8, "weight_decay": 3e-7}},
             "zero_optimization": {"stage": 1}, "zero_allow_untested_optimizer": true,
             "fp16": {"enabled": true, "auto_cast": true}, "gradient_clipping": 0, "prescale_gradients": false,
             "cuda_visible_devices": 0, "wall_clock_breakdown": false})",
         "", "", {" --micro_batch 64 ", "note: ignoring unknown DeepSpeed key cuda_visible_devices, as DeepSpeed does\n"},
         false, NONE},
        {"deepspeedai/DeepSpeedExamples training/gan/gan_deepspeed_config.json",
         R"({"train_batch_size": 64,
             "optimizer": {"type": "Adam", "params": {"lr": 0.0002, "betas": [0.5, 0.999], "eps": 1e-8}},
             "steps_per_print": 10})",
         "", "", {" --micro_batch 16 ", " --lr 0.0002 ", " --adam_beta1 0.5 ", " --adam_beta2 0.999 "}, false, NONE},
        {"deepspeedai/DeepSpeedExamples training/BingBertSquad/deepspeed_bsz24_config.json",
         R"({"train_batch_size": 24, "train_micro_batch_size_per_gpu": 3, "steps_per_print": 10,
             "optimizer": {"type": "Adam", "params": {"lr": 3e-5, "weight_decay": 0.0, "bias_correction": false}},
             "gradient_clipping": 1.0, "fp16": {"enabled": true}})",
         "", "", {" --micro_batch 3 ", " --total_batch 768 ", " --adam_bias_correction 0"}, false, NONE},
        {"deepspeedai/DeepSpeedExamples training/autotuning/hf/dsconfigs/ds_config_fp16_z2.json",
         R"({"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2}, "fp16": {"enabled": true}})",
         "-b 3", "", {"note: \"auto\" keeps this trainer's values: train_micro_batch_size_per_gpu 3\n", " --zero_stage 2 "},
         false, NONE},
        {"deepspeedai/DeepSpeedExamples training/bf16_master_weight/configs/bf16_full.json",
         R"({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1, "steps_per_print": 100,
             "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}},
             "bf16": {"enabled": true, "bf16_master_weights_and_grads": true, "bf16_optimizer_states": true},
             "zero_optimization": {"stage": 3, "overlap_comm": true, "contiguous_gradients": true,
                                   "reduce_bucket_size": 5e7, "stage3_param_persistence_threshold": 0},
             "torch_autocast": {"enabled": true, "dtype": "torch.bfloat16"}})",
         "", "", {" --precision bf16", " --weight_decay 0.01 ",
                  "note: ignoring DeepSpeed sections of features this trainer lacks: torch_autocast\n",
                  "note: bf16.bf16_master_weights_and_grads: true keeps them in 16 bits in DeepSpeed; masters are always "
                  "fp32 here\n", "note: bf16.bf16_optimizer_states: true keeps them in 16 bits in DeepSpeed; optimizer "
                  "states are always fp32 here\n"}, false, NONE},
        {"deepspeedai/DeepSpeedExamples training/tensor_parallel/hf_integration/configs/ds_config.json",
         R"({"bf16": {"enabled": "auto"},
             "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
             "scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": "auto", "warmup_min_lr": "auto",
                                                               "warmup_max_lr": "auto", "warmup_num_steps": "auto"}},
             "zero_optimization": {"stage": 2, "gather_16bit_weights_on_model_save": true},
             "tensor_parallel": {"autotp_size": 4},
             "gradient_accumulation_steps": "auto", "gradient_clipping": "auto", "steps_per_print": 1,
             "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "wall_clock_breakdown": false})",
         "-l 2e-4 -u 4", "",
         {" --lr_schedule WarmupDecayLR ", " --total_num_steps 0", "scheduler.params.total_num_steps (the run's)",
          "note: ignoring DeepSpeed sections of features this trainer lacks: tensor_parallel\n"},
         false, {"WarmupDecayLR", 0, 2e-4, 4, STEPS}},
        {"deepspeedai/DeepSpeed tests/model/Megatron_GPT2/ds_config_func_scheduler.json",
         R"({"train_batch_size": 4, "gradient_accumulation_steps": 1, "steps_per_print": 1,
             "zero_optimization": {"stage": 2}, "gradient_clipping": 1.0,
             "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 0.001, "warmup_num_steps": 10}},
             "fp16": {"enabled": true, "loss_scale": 0, "loss_scale_window": 1000, "hysteresis": 2, "min_loss_scale": 1}})",
         "", "", {" --micro_batch 1 ", " --lr 0.001 ", " --warmup 10 ", " --warmup_min_ratio 0 "}, false,
         {"WarmupLR", 0, 1e-3, 10}},
        {"deepspeedai/DeepSpeed tests/model/Megatron_GPT2/ds_config_func_bs8_zero0_gas3.json",
         R"({"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 3, "steps_per_print": 1,
             "zero_optimization": {"stage": 0, "reduce_bucket_size": 7000000, "allgather_bucket_size": 7000000,
                                   "reduce_scatter": true},
             "gradient_clipping": 1.0,
             "fp16": {"enabled": true, "loss_scale": 0, "loss_scale_window": 1000, "hysteresis": 2, "min_loss_scale": 1},
             "activation_checkpointing": {"partition_activations": true, "contiguous_memory_optimization": true}})",
         "", "", {" --total_batch 3072 ", "activation_checkpointing.partition_activations = true does nothing without --tp"},
         false, NONE},
        {"deepspeedai/DeepSpeed tests/model/Megatron_GPT2/ds_config_func_bs4_zero2_offload.json",
         R"({"train_batch_size": 4, "gradient_accumulation_steps": 1, "steps_per_print": 1,
             "zero_optimization": {"stage": 2, "reduce_bucket_size": 7000000, "allgather_bucket_size": 7000000,
                                   "reduce_scatter": true, "cpu_offload": true},
             "gradient_clipping": 1.0,
             "fp16": {"enabled": true, "loss_scale": 0, "loss_scale_window": 1000, "hysteresis": 2, "min_loss_scale": 1}})",
         "", "", {" --offload_optimizer cpu", " --zero_stage 2 "}, false, NONE},
        {"deepspeedai/DeepSpeed tests/torch_compile/ds_config_z3.json",
         R"({"train_batch_size": 8, "steps_per_print": 2000,
             "optimizer": {"type": "Adam", "params": {"lr": 0.001, "betas": [0.8, 0.999], "eps": 1e-8, "weight_decay": 3e-7}},
             "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 0.001, "warmup_num_steps": 1000}},
             "gradient_clipping": 1.0, "prescale_gradients": false, "bf16": {"enabled": true}, "wall_clock_breakdown": false,
             "zero_optimization": {"stage": 3, "reduce_scatter": true, "overlap_comm": false, "contiguous_gradients": false}})",
         "", "", {" --micro_batch 2 ", " --zero_stage 3 "}, false, {"WarmupLR", 0, 1e-3, 1000}},
        {"deepspeedai/DeepSpeed examples/sdma_allgather/ds_config_zero3.json",
         R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "steps_per_print": 10,
             "optimizer": {"type": "AdamW", "params": {"lr": 1e-5, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}},
             "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 1e-5, "warmup_num_steps": 10}},
             "gradient_clipping": 1.0, "bf16": {"enabled": true},
             "zero_optimization": {"stage": 3, "allgather_partitions": true, "allgather_bucket_size": 5e7,
                                   "overlap_comm": true, "reduce_scatter": true, "reduce_bucket_size": 5e7,
                                   "contiguous_gradients": true, "stage3_max_live_parameters": 1e9,
                                   "stage3_max_reuse_distance": 1e9, "stage3_prefetch_bucket_size": 5e7,
                                   "stage3_param_persistence_threshold": 1e5,
                                   "stage3_gather_16bit_weights_on_model_save": true, "sub_group_size": 1e12},
             "wall_clock_breakdown": false})",
         "", "", {" --lr 1e-05 ", " --warmup 10 "}, false, {"WarmupLR", 0, 1e-5, 10}},
        {"deepspeedai/DeepSpeed deepspeed/autotuning/config_templates/template_zero3.json, with flags before it",
         R"({"zero_optimization": {"stage": 3, "allgather_partitions": true, "allgather_bucket_size": 5e8,
                                   "overlap_comm": false, "reduce_scatter": true, "reduce_bucket_size": 5e8,
                                   "contiguous_gradients": false, "stage3_max_live_parameters": 1e9,
                                   "stage3_max_reuse_distance": 1e9, "stage3_prefetch_bucket_size": 5e8,
                                   "stage3_param_persistence_threshold": 1e6,
                                   "stage3_gather_16bit_weights_on_model_save": false, "sub_group_size": 1e12}})",
         // the file decides the schedule and the clip as it decides the stage: DeepSpeed's none; the optimizer it
         // leaves to the script, here the flags before it
         "-b 2 -l 1e-4 -u 5 -q 0.1 --grad_clip 0.5 -p bf16", "",
         {" --zero_stage 3 ", " --grad_clip 0 ", " --lr 0.0001 ", " --warmup 0 ", " --final_lr_frac 1 ",
          " --precision fp32"}, false, NONE},
        {"deepspeedai/Megatron-DeepSpeed examples_deepspeed/curriculum_learning/ds_zero_stage_1_config_baseline.json",
         R"({"train_batch_size": 512, "gradient_accumulation_steps": 1, "steps_per_print": 1,
             "zero_optimization": {"stage": 1},
             "optimizer": {"type": "Adam", "params": {"lr": 0.00015, "max_grad_norm": 1.0, "betas": [0.9, 0.95]}},
             "gradient_clipping": 1.0,
             "fp16": {"enabled": true, "loss_scale": 0, "loss_scale_window": 1000, "hysteresis": 2, "min_loss_scale": 1},
             "wall_clock_breakdown": false, "zero_allow_untested_optimizer": false})",
         "", "", {"optimizer.params.max_grad_norm: a key this trainer does not read"}, true, NONE},
        {"deepspeedai/Megatron-DeepSpeed examples_deepspeed/universal_checkpointing/ds_config.json (on 4 ranks)",
         R"({"train_batch_size": 16, "train_micro_batch_size_per_gpu": 16, "steps_per_print": 1,
             "zero_optimization": {"stage": 1}, "bf16": {"enabled": true},
             "data_types": {"grad_accum_dtype": "fp32"}, "wall_clock_breakdown": false})",
         "", "", {"DeepSpeed train_batch_size (16) must be a multiple of micro-batch x world size = 16 x 4"}, true, NONE},
        {"deepspeedai/Megatron-DeepSpeed examples_deepspeed/finetune_hf_llama/ds_config.json",
         R"({"train_batch_size": 256, "train_micro_batch_size_per_gpu": 16, "steps_per_print": 100,
             "zero_optimization": {"stage": 0}, "bf16": {"enabled": true}})",
         "", "", {" --micro_batch 16 ", " --total_batch 8192 ", " --zero_stage 0 "}, false, NONE},
        {"deepspeedai/Megatron-DeepSpeed examples_deepspeed/data_efficiency/gpt/eval/ds_config_eval_dummy.json",
         R"({"train_batch_size": 2048, "train_micro_batch_size_per_gpu": 16, "steps_per_print": 10,
             "zero_optimization": {"stage": 0}, "gradient_clipping": 1.0, "prescale_gradients": true,
             "fp16": {"enabled": false, "loss_scale": 0, "loss_scale_window": 500, "hysteresis": 2, "min_loss_scale": 1,
                      "initial_scale_power": 11},
             "bf16": {"enabled": false}, "wall_clock_breakdown": false})",
         "-p bf16", "", {" --precision fp32", " --total_batch 65536 "}, false, NONE},
        {"bigscience-workshop/bigscience jz/configs/deepspeed/ds_zero2.json",
         R"({"fp16": {"enabled": true, "loss_scale": 0, "loss_scale_window": 1000, "initial_scale_power": 32,
                      "hysteresis": 2, "min_loss_scale": 1},
             "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
             "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto",
                                                               "warmup_num_steps": "auto", "total_num_steps": "auto"}},
             "zero_optimization": {"stage": 2, "allgather_partitions": true, "allgather_bucket_size": 3e8,
                                   "overlap_comm": true, "reduce_scatter": true, "reduce_bucket_size": 3e8,
                                   "contiguous_gradients": true, "cpu_offload": true},
             "gradient_accumulation_steps": "auto", "gradient_clipping": "auto", "steps_per_print": 5000,
             "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "wall_clock_breakdown": false})",
         "-l 1e-4 -u 3", "", {" --initial_scale_power 32 ", " --offload_optimizer cpu", " --lr_schedule WarmupDecayLR "},
         false, {"WarmupDecayLR", 0, 1e-4, 3, STEPS}},
        {"bigscience-workshop/bigscience jz/configs/deepspeed/ds_zero3.json, with flags after it",
         R"({"fp16": {"enabled": true, "loss_scale": 0, "loss_scale_window": 1000, "initial_scale_power": 16,
                      "hysteresis": 2, "min_loss_scale": 1},
             "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
             "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto",
                                                               "warmup_num_steps": "auto", "total_num_steps": "auto"}},
             "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": true},
                                   "offload_param": {"device": "cpu", "pin_memory": true}, "overlap_comm": true,
                                   "contiguous_gradients": true, "sub_group_size": 1e14, "reduce_bucket_size": "auto",
                                   "stage3_prefetch_bucket_size": "auto", "stage3_param_persistence_threshold": "auto",
                                   "stage3_max_live_parameters": 1e9, "stage3_max_reuse_distance": 1e9,
                                   "stage3_gather_fp16_weights_on_model_save": true},
             "gradient_accumulation_steps": "auto", "gradient_clipping": "auto", "steps_per_print": 5000,
             "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "wall_clock_breakdown": false})",
         "", "-u 6 -l 2e-4 --warmup_type linear --total_num_steps 30",
         {"from flags after it: --lr 0.0002 --warmup 6 --warmup_type linear --total_num_steps 30\n"}, false,
         {"WarmupDecayLR", 0, 2e-4, 6, 30, false}},
        {"deepspeedai/DeepSpeed tests/unit/runtime/test_lr_schedulers.py, TestLrSchedule (linear, 2 ranks)",
         R"({"train_batch_size": 2, "steps_per_print": 1, "optimizer": {"type": "Adam", "params": {"lr": 0.00015}},
             "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0.1, "warmup_max_lr": 0.2,
                                                          "warmup_num_steps": 15, "warmup_type": "linear"}},
             "gradient_clipping": 1.0})",
         "--ranks 2", "", {" --lr 0.2 ", " --warmup_type linear ", " --warmup_min_ratio 0.5 "}, false,
         {"WarmupLR", 0.1, 0.2, 15, 0, false}},
        {"deepspeedai/DeepSpeed tests/unit/runtime/test_lr_schedulers.py, TestGetLrBeforeTrain (WarmupLR, {})",
         R"({"train_batch_size": 2, "steps_per_print": 1, "optimizer": {"type": "Adam", "params": {"lr": 0.00015}},
             "scheduler": {"type": "WarmupLR", "params": {}}, "gradient_clipping": 1.0})",
         "--ranks 2", "", {" --warmup 1000 "}, false, {"WarmupLR", 0, 0.00015, 1000}},
        {"deepspeedai/DeepSpeed tests/unit/runtime/test_lr_schedulers.py, TestGetLrBeforeTrain (WarmupDecayLR)",
         R"({"train_batch_size": 2, "steps_per_print": 1, "optimizer": {"type": "Adam", "params": {"lr": 0.00015}},
             "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": 10, "total_num_steps": 20}},
             "gradient_clipping": 1.0})",
         "--ranks 2", "", {" --lr 0.001 ", " --total_num_steps 20"}, false, {"WarmupDecayLR", 0, 0.001, 10, 20}},
        {"deepspeedai/DeepSpeed tests/unit/runtime/test_lr_schedulers.py, TestGetLrBeforeTrain (WarmupCosineLR)",
         R"({"train_batch_size": 2, "steps_per_print": 1, "optimizer": {"type": "Adam", "params": {"lr": 0.00015}},
             "scheduler": {"type": "WarmupCosineLR", "params": {"warmup_num_steps": 10, "total_num_steps": 20}},
             "gradient_clipping": 1.0})",
         "--ranks 2", "", {" --final_lr_frac 0.0001 ", " --lr 0.00015 "}, false, {"WarmupCosineLR", 0, 0.00015, 10, 20}},
        {"deepspeedai/DeepSpeed tests/unit/runtime/test_lr_schedulers.py, TestGetLrBeforeTrain (OneCycle)",
         R"({"train_batch_size": 2, "optimizer": {"type": "Adam", "params": {"lr": 0.00015}},
             "scheduler": {"type": "OneCycle", "params": {"cycle_min_lr": 0, "cycle_max_lr": 0.1}}})",
         "--ranks 2", "", {"DeepSpeed key scheduler.type = \"OneCycle\" (a string) is not supported: the schedules here "
                           "are DeepSpeed's WarmupLR, WarmupDecayLR and WarmupCosineLR"}, true, NONE},
        {"deepspeedai/DeepSpeed tests/unit/runtime/test_lr_schedulers.py, TestGetLrBeforeTrain (LRRangeTest)",
         R"({"train_batch_size": 2, "optimizer": {"type": "Adam", "params": {"lr": 0.00015}},
             "scheduler": {"type": "LRRangeTest", "params": {}}})",
         "--ranks 2", "", {"scheduler.type = \"LRRangeTest\" (a string) is not supported"}, true, NONE},
        {"deepspeedai/DeepSpeed docs/_pages/config-json.md's scheduler section, as WarmupCosineLR without cos_min_ratio "
         "(DeepSpeed's default: 0.0001)",
         R"({"train_batch_size": 4, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
             "scheduler": {"type": "WarmupCosineLR", "params": {"warmup_num_steps": 2, "total_num_steps": 6}}})",
         "", "", {" --lr_schedule WarmupCosineLR ", " --final_lr_frac 0.0001 "}, false, {"WarmupCosineLR", 0, 1e-3, 2, 6}},
        {"deepspeedai/DeepSpeed docs/_pages/config-json.md's batch and ZeRO keys, with comments and a trailing comma "
         "(DeepSpeed reads its configs with hjson)",
         "{\n  // DeepSpeed reads its configs with hjson\n  \"train_batch_size\": 8,  # per step\n"
         "  /* ZeRO */ \"zero_optimization\": {\"stage\": 2,},\n}\n",
         "", "", {" --zero_stage 2 ", " --micro_batch 2 "}, false, NONE},
    };
}

void test_corpus() {
    const std::vector<CorpusConfig> configs = corpus();
    EXPECT(configs.size() >= 20, "a corpus of %zu configs", configs.size());
    auto spaced = [](std::string s) {  // " --x 1 " matches a line's last item too
        for (size_t at = s.find('\n'); at != std::string::npos; at = s.find('\n', at + 2)) s.insert(at, " ");
        return s;
    };
    for (const CorpusConfig& c : configs) {
        ChildResult r = run_config(c.json, c.before, c.after, c.schedule);
        EXPECT(r.status == (c.refused ? 1 : 0), "%s: status %d (expected %s):\n%s", c.source, r.status,
               c.refused ? "a refusal" : "accepted", r.err.c_str());
        if (c.refused)  // notes, then one line
            EXPECT(r.err.find("error: ") == r.err.rfind('\n', r.err.size() - 2) + 1, "%s: one error line last:\n%s",
                   c.source, r.err.c_str());
        for (const std::string& e : c.expect)
            EXPECT(spaced(r.err).find(spaced(e)) != std::string::npos, "%s: lacks \"%s\":\n%s", c.source, e.c_str(),
                   r.err.c_str());
    }
}

// A config's reading, expected to be accepted with every one of `expect` in its
// stderr, or refused with the first of them in its one error line.
void expect_config(const char* what, const std::string& json, const std::string& before, const std::string& after,
                   bool refused, const std::vector<std::string>& expect, const DeepSpeedSchedule& schedule = {}) {
    ChildResult r = run_config(json, before, after, schedule);
    EXPECT(r.status == (refused ? 1 : 0), "%s: status %d:\n%s", what, r.status, r.err.c_str());
    for (const std::string& e : expect)
        EXPECT(r.err.find(e) != std::string::npos, "%s: lacks \"%s\":\n%s", what, e.c_str(), r.err.c_str());
}

void test_schedules() {
    // the oracle itself, at its first steps written out: DeepSpeed's test file (WarmupLR from 0 to
    // 0.001 over 10 log steps) runs at 0, 0, ln 2 / ln 10 x 0.001; a WarmupCosineLR over 2 warmup steps of 6
    // at 0, 0, then the peak and the cosine's first quarter
    const DeepSpeedSchedule warmup{"WarmupLR", 0, 1e-3, 10}, cosine{"WarmupCosineLR", 0, 1e-3, 2, 6};
    EXPECT(warmup.at(-1) == 0 && warmup.at(0) == 0 && std::fabs(warmup.at(1) - 3.0103e-4) < 1e-8, "WarmupLR oracle");
    EXPECT(cosine.at(-1) == 0 && cosine.at(0) == 0 && std::fabs(cosine.at(1) - 1e-3) < 1e-15 &&
               std::fabs(cosine.at(2) - 1e-3 * (0.0001 + 0.9999 * (1 + std::sqrt(0.5)) / 2)) < 1e-15,
           "WarmupCosineLR oracle");
    const std::string adamw = R"("optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}, "train_batch_size": 4)";
    expect_config("WarmupLR without params: DeepSpeed's defaults", "{" + adamw + R"(, "scheduler": {"type": "WarmupLR"}})",
                  "", "", false, {" --warmup 1000 ", " --warmup_type log "}, {"WarmupLR", 0, 1e-3, 1000});
    expect_config("warmup_type neither log nor linear",
                  "{" + adamw + R"(, "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 5,
                                                                                  "warmup_type": "exp"}}})",
                  "", "", false, {"note: scheduler.params.warmup_type \"exp\" is neither log nor linear: log, as DeepSpeed"},
                  {"WarmupLR", 0, 1e-3, 5});
    expect_config("a scheduler without a type", "{" + adamw + R"(, "scheduler": {"params": {"warmup_num_steps": 5}}})",
                  "-u 3", "", false, {"note: scheduler without a type: DeepSpeed runs none", " --warmup 0 "});
    expect_config("WarmupLr, misspelt", "{" + adamw + R"(, "scheduler": {"type": "WarmupLr", "params": {}}})", "", "", true,
                  {"DeepSpeed key scheduler.type = \"WarmupLr\" (a string) is not supported: the schedules here are "
                   "DeepSpeed's WarmupLR, WarmupDecayLR and WarmupCosineLR (spelt as DeepSpeed spells them"});
    expect_config("torch's StepLR", "{" + adamw + R"(, "scheduler": {"type": "StepLR", "params": {"step_size": 10}}})", "",
                  "", true, {"scheduler.type = \"StepLR\" (a string) is not supported"});
    expect_config("another type's parameter",
                  "{" + adamw + R"(, "scheduler": {"type": "WarmupLR", "params": {"cos_min_ratio": 0.1}}})", "", "", true,
                  {"scheduler.params.cos_min_ratio: a key this trainer does not read"});
    expect_config("WarmupDecayLR without total_num_steps",
                  "{" + adamw + R"(, "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": 5}}})", "", "",
                  true, {"DeepSpeed's WarmupDecayLR needs scheduler.params.total_num_steps, the step its decay ends at"});
    expect_config("warmup_min_lr as a fraction of warmup_max_lr, decayed back to",
                  "{" + adamw + R"(, "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": 2e-5,
                                 "warmup_max_lr": 4e-4, "warmup_num_steps": 7, "total_num_steps": 25}}})",
                  "", "", false, {" --warmup_min_ratio 0.05 "}, {"WarmupDecayLR", 2e-5, 4e-4, 7, 25});
    // the settings line shows the rate and its schedule even where the file leaves them as they were
    expect_config("the settings line", R"({"optimizer": {"type": "AdamW", "params": {"lr": 3e-4}}, "train_batch_size": 4})",
                  "", "", false, {" --lr 0.0003 ", " --lr_schedule cosine ", " --warmup 0 ", " --grad_clip 0 ", " --zero_stage 0"});
    // one rule for the flags around the file: it replaces what it governs (its keys, else DeepSpeed's defaults:
    // no schedule, no clip, stage 0, fp32), later flags replace it
    expect_config("flags before the file", R"({"train_batch_size": 4})", "-u 5 -q 0.5 --grad_clip 2 -z 3 -p bf16", "",
                  false, {" --warmup 0 ", " --final_lr_frac 1 ", " --grad_clip 0 ", " --zero_stage 0", " --precision fp32"});
    expect_config("flags after the file", R"({"train_batch_size": 4})", "", "-u 5 -q 0.5 --grad_clip 2 -z 3",
                  false, {"from flags after it: --warmup 5 --final_lr_frac 0.5 --grad_clip 2 --zero_stage 3\n"});
}

// DeepSpeed's sections, as strict or as lenient as DeepSpeed is with them
void test_sections() {
    const std::string batch = R"("train_batch_size": 4)";
    expect_config("bf16's extra keys, lenient up to DeepSpeed 0.17.0",
                  "{" + batch + R"(, "bf16": {"enabled": true, "loss_scale": 0, "bf16_master_weights_and_grads": false}})",
                  "", "", false, {"note: ignoring unknown DeepSpeed key bf16.loss_scale, as DeepSpeed does up to 0.17.0 (later "
                                  "versions refuse it)\n", " --precision bf16"});
    expect_config("a top-level key DeepSpeed does not know", "{" + batch + R"(, "cuda_visible_devices": 0, "steps_per_prnt": 1})",
                  "", "", false, {"note: ignoring unknown DeepSpeed key cuda_visible_devices, as DeepSpeed does\n",
                                  "note: ignoring unknown DeepSpeed key steps_per_prnt (did you mean steps_per_print?), "
                                  "as DeepSpeed does\n"});
    expect_config("a negative bucket", "{" + batch + R"(, "zero_optimization": {"stage": 2, "reduce_bucket_size": -5e8}})", "",
                  "", true, {"DeepSpeed key zero_optimization.reduce_bucket_size must be a number >= 0, as DeepSpeed checks (got -5e8)"});
    expect_config("a negative offload buffer",
                  "{" + batch + R"(, "zero_optimization": {"stage": 3, "offload_param": {"device": "cpu", "buffer_size": -1}},
                                    "optimizer": {"type": "AdamW"}})", "--offload_optimizer cpu", "", true,
                  {"zero_optimization.offload_param.buffer_size must be a number >= 0"});
    expect_config("DeepSpeed's short names of stage3_ keys, and its signed mics_shard_size",
                  "{" + batch + R"(, "zero_optimization": {"stage": 3, "prefetch_bucket_size": 5e7, "mics_shard_size": -1}})",
                  "", "", false, {"zero_optimization.prefetch_bucket_size, zero_optimization.mics_shard_size"});
    expect_config("an unknown key in zero_optimization", "{" + batch + R"(, "zero_optimization": {"stage": 2, "max_grad_norm": 1}})",
                  "", "", true, {"zero_optimization.max_grad_norm: a key this trainer does not read"});
    // DeepSpeed's deprecated cpu_offload_param (offload_param.device cpu), spelt right; misspelt, a typo
    expect_config("cpu_offload_param", "{" + batch + R"(, "zero_optimization": {"stage": 3, "cpu_offload": true,
                                                                            "cpu_offload_param": true}})",
                  "", "", false, {" --offload_optimizer cpu", " --offload_param cpu"});
    expect_config("cpu_offload_params", "{" + batch + R"(, "zero_optimization": {"stage": 3, "cpu_offload_params": true}})",
                  "", "", true, {"zero_optimization.cpu_offload_params (did you mean "
                                 "zero_optimization.cpu_offload_param?): a key this trainer does not read"});
    expect_config("an unterminated comment", "{" + batch + ", /* }", "", "", true, {"corpus.json:1:25: unterminated /* comment"});
}

// Adam's bias_correction false: the moments as they are, not over 1 - beta^t
// (DeepSpeed's FusedAdam and CPU Adam): the config, the step's arguments, and one
// element's update against the formula
void test_bias_correction() {
    expect_config("bias_correction false",
                  R"({"train_batch_size": 4, "optimizer": {"type": "Adam", "params": {"bias_correction": false}}})", "", "",
                  false, {" --adam_bias_correction 0"});
    TrainOptions o;
    o.adam_bias_correction = 0;
    const float lr = 1e-3f, b1 = o.adam_beta1, b2 = o.adam_beta2, eps = o.adam_eps, g = 0.5f;
    const AdamWStep s = adamw_step(optimizer_config(o), lr, 1.0f, 3, 0);
    EXPECT(s.bias_correction1 == 1.0f && s.bias_correction2 == 1.0f, "bias corrections %g %g", s.bias_correction1,
           s.bias_correction2);
    float w = 2.0f, m = 0.0f, v = 0.0f;
    adamw_update(w, m, v, g, s);
    const double want = 2.0 - lr * ((1 - b1) * g / (std::sqrt((1 - b2) * g * g) + eps));
    EXPECT(std::fabs(w - want) < 1e-7, "one step without bias correction: %.9g, the formula's %.9g", w, want);
    o.adam_bias_correction = 1;
    const AdamWStep c = adamw_step(optimizer_config(o), lr, 1.0f, 3, 0);
    EXPECT(std::fabs(c.bias_correction1 - (1 - std::pow(b1, 3))) < 1e-6, "with: 1 - beta1^3, got %g", c.bias_correction1);
}

// A file beyond the bound is refused before it is read: a 24 MiB config (one wide array)
// under a 1 GiB address-space limit, where reading it whole took ~100 bytes a value
void test_size_bound() {
    std::string big = "{\"train_batch_size\": 4, \"x\": [0";
    for (size_t i = 0; i < (12u << 20); i++) big += ",0";
    big += "]}";
    FILE* f = open_file("big.json", "wb");
    fwrite(big.data(), 1, big.size(), f);
    fclose(f);
    ChildResult r = run_in_child([] {
        struct rlimit limit = {1ul << 30, 1ul << 30};
        setrlimit(RLIMIT_AS, &limit);
        TrainOptions o;
        apply_deepspeed_config("big.json", o);
    });
    EXPECT(r.status == 1 && r.err == "error: DeepSpeed config big.json is larger than 1 MiB: not a config (those are a "
                                     "few KiB)\n",
           "a 24 MiB config: status %d, %s", r.status, r.err.c_str());
}

}  // namespace

void test_deepspeed_corpus() {
    test_corpus();
    test_schedules();
    test_sections();
    test_bias_correction();
    test_size_bound();
}

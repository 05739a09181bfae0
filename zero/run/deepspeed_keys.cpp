// Every key DeepSpeed's config documents that the mapping does not read, with why
// each has no effect here (zero/run/deepspeed_keys.h), and the known key a typo
// away. Mostly the table itself, one key per line.
#include "zero/run/deepspeed_keys.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>
#include <vector>

namespace deepspeed_detail {

std::string lower(std::string s) {
    for (char& c : s) c = (char)tolower((unsigned char)c);
    return s;
}

// Section by section; not the keys the mapping reads, which it asks for by name
// (zero/run/deepspeed_config.h says what a key in neither does). Sections marked
// OPAQUE are whole features of DeepSpeed this trainer does not have (logging
// back-ends, profilers, pipeline parallelism, ...): one note for the section, its
// members unchecked.
const char* const OPAQUE = "OPAQUE";
const char* const BUCKETS = "communication is one collective per unit (a layer) here, so bucket sizes have no effect";
const char* const PARAMS_IN_HOST = "parameters offload to cpu only (stage 3's slices are read by every pass); nvme holds only optimizer states";
const char* const AIO_NVME = "the aio section tunes offload_optimizer.device nvme only";
const char* const PREAD = "the disk is read and written here with plain pread and pwrite from threads, not libaio";
const KnownKey KNOWN_KEYS[] = {
    {"optimizer.params.torch_adam", "the CPU and GPU AdamW are this trainer's own"},
    {"optimizer.params.fp32_optimizer_states", "optimizer states are always fp32 here"},
    {"scheduler.params.last_batch_iteration", "a resumed run takes its step from the checkpoint (-y 1)"},
    {"fp16.auto_cast", "the model is written in the compute dtype; there is nothing to cast"},
    {"fp16.fp16_master_weights_and_grads", "masters are always fp32 here"},
    {"bf16.immediate_grad_update", "gradients are reduced as backward finishes each unit, always"},
    {"bf16.check_grad_overflow", "bf16 has fp32's range: overflow is checked for fp16 only"},
    {"bf16.bf16_master_weights_and_grads", "masters are always fp32 here"},
    {"bf16.bf16_optimizer_states", "optimizer states are always fp32 here"},
    {"amp.opt_level", "NVIDIA Apex AMP is not used here"},
    {"zero_optimization.offload_optimizer.pin_memory", "host buffers are always pinned here"},
    {"zero_optimization.offload_optimizer.nvme_path", "only device nvme reads it"},
    {"zero_optimization.offload_optimizer.buffer_count", "cpu offload here double-buffers each unit's slices; buffer_count sizes device nvme's ring"},
    {"zero_optimization.offload_optimizer.pipeline_read", "nvme reads run ahead of the CPU AdamW here, always"},
    {"zero_optimization.offload_optimizer.pipeline_write", "nvme writes run behind the CPU AdamW here, always"},
    {"zero_optimization.offload_optimizer.fast_init", "the states are first written to disk one way here, so this changes nothing"},
    {"zero_optimization.offload_optimizer.ratio", "the CPU updates every slice it holds (no partial offload)"},
    {"zero_optimization.offload_param.pin_memory", "host buffers are always pinned here"},
    {"zero_optimization.offload_param.nvme_path", PARAMS_IN_HOST},
    {"zero_optimization.offload_param.buffer_count", PARAMS_IN_HOST},
    {"zero_optimization.offload_param.buffer_size", PARAMS_IN_HOST},
    {"zero_optimization.offload_param.max_in_cpu", PARAMS_IN_HOST},
    {"zero_optimization.cpu_offload_use_pin_memory", "host buffers are always pinned here"},
    {"zero_optimization.allgather_partitions", "stages 1-2 always all-gather the updated slices after the step here"},
    {"zero_optimization.allgather_bucket_size", BUCKETS},
    {"zero_optimization.reduce_scatter", "stages 1-3 always reduce-scatter gradients here"},
    {"zero_optimization.reduce_bucket_size", BUCKETS},
    {"zero_optimization.overlap_comm", "collectives always run on their own stream here, overlapping compute where the order allows"},
    {"zero_optimization.contiguous_gradients", "gradients live in one flat buffer here, so they are always contiguous"},
    {"zero_optimization.sub_group_size", "the optimizer steps one unit (a layer) at a time here"},
    {"zero_optimization.stage3_prefetch_bucket_size", "stage 3 prefetches exactly the next unit (a layer) here"},
    {"zero_optimization.stage3_max_live_parameters", "stage 3 holds at most three gathered units (layers) at a time here"},
    {"zero_optimization.stage3_max_reuse_distance", "stage 3 releases every unit after use and gathers it again for backward here"},
    {"zero_optimization.stage3_param_persistence_threshold", "every unit is partitioned here, however small"},
    {"zero_optimization.stage3_model_persistence_threshold", "every unit is partitioned here, however small"},
    {"zero_optimization.stage3_gather_16bit_weights_on_model_save", "every checkpoint holds a full model.bin (rank 0 gathers each unit)"},
    {"zero_optimization.stage3_gather_fp16_weights_on_model_save", "every checkpoint holds a full model.bin (rank 0 gathers each unit)"},
    {"zero_optimization.elastic_checkpoint", "checkpoints re-slice to any world size and stage here, always"},
    {"zero_optimization.load_from_fp32_weights", "resume always loads the fp32 masters"},
    {"zero_optimization.ignore_unused_parameters", "GPT-2 uses every parameter"},
    {"zero_optimization.round_robin_gradients", "each rank owns a fixed slice of every unit here"},
    {"zero_optimization.legacy_stage1", "there is one stage 1 here"},
    {"zero_optimization.memory_efficient_linear", "the linear layers here keep only their inputs, always"},
    {"zero_optimization.zero_hpz_partition_size", "ZeRO++'s hierarchical partitioning is not implemented"},
    {"zero_optimization.zero_quantized_weights", "ZeRO++'s quantized collectives are not implemented"},
    {"zero_optimization.zero_quantized_nontrainable_weights", "ZeRO++'s quantized collectives are not implemented"},
    {"zero_optimization.zero_quantized_gradients", "ZeRO++'s quantized collectives are not implemented"},
    {"zero_optimization.mics_shard_size", "MiCS is not implemented: shards span the whole world"},
    {"zero_optimization.mics_hierarchical_params_gather", "MiCS is not implemented"},
    {"zero_optimization.use_multi_rank_bucket_allreduce", BUCKETS},
    {"zero_optimization.pipeline_loading_checkpoint", "there is no pipeline parallelism here"},
    {"zero_optimization.override_module_apply", "the model is not a torch module"},
    {"zero_optimization.stage3_module_granularity_threshold", "the units are fixed: embeddings, each layer, the final layernorm"},
    {"zero_optimization.log_trace_cache_warnings", "stage 3's gather order is fixed, not traced"},
    {"aio.block_size", AIO_NVME},
    {"aio.queue_depth", AIO_NVME},
    {"aio.intra_op_parallelism", AIO_NVME},
    {"aio.thread_count", AIO_NVME},
    {"aio.use_gds", AIO_NVME},
    {"aio.single_submit", PREAD},
    {"aio.overlap_events", PREAD},
    {"activation_checkpointing.contiguous_memory_optimization", "saved layer inputs are one buffer here, always"},
    {"activation_checkpointing.number_checkpoints", "-r 2 keeps every layer's input"},
    {"activation_checkpointing.synchronize_checkpoint_boundary", "the CPU build runs in order; the GPU build's streams are ordered by events"},
    {"activation_checkpointing.profile", "each step line prints its time"},
    {"steps_per_print", "every step prints one line here"},
    {"wall_clock_breakdown", "every step line prints its time"},
    {"dump_state", "--estimate 1 prints the run's memory plan"},
    {"memory_breakdown", "use --mem_report 1 for per-rank memory"},
    {"prescale_gradients", "gradients are summed across ranks, then scaled once by 1 / tokens per step"},
    {"gradient_predivide_factor", "gradients are summed across ranks, then scaled once by 1 / tokens per step"},
    {"communication_data_type", "collectives move the compute dtype here"},
    {"seq_parallel_communication_data_type", "there is no sequence parallelism here"},
    {"zero_allow_untested_optimizer", "the optimizer is AdamW, always"},
    {"zero_force_ds_cpu_optimizer", "optimizer offload always uses this trainer's CPU AdamW"},
    {"sparse_gradients", "GPT-2's gradients are dense here"},
    {"disable_allgather", "the stages decide the collectives here"},
    {"dataloader_drop_last", "the data loader drops a shard's tail that does not fill a batch, always"},
    {"fp32_allreduce", "collectives move the compute dtype here"},
    {"load_universal_checkpoint", "checkpoints re-slice to any world size and stage here, always"},
    {"flops_profiler", OPAQUE},
    {"tensorboard", OPAQUE},
    {"wandb", OPAQUE},
    {"csv_monitor", OPAQUE},
    {"comet", OPAQUE},
    {"comms_logger", OPAQUE},
    {"monitor_config", OPAQUE},
    {"autotuning", OPAQUE},
    {"elasticity", OPAQUE},
    {"compression_training", OPAQUE},
    {"data_efficiency", OPAQUE},
    {"curriculum_learning", OPAQUE},
    {"data_types", OPAQUE},
    {"pipeline", OPAQUE},
    {"sparse_attention", OPAQUE},
    {"nebula", OPAQUE},
    {"checkpoint", OPAQUE},
    {"progressive_layer_drop", OPAQUE},
    {"eigenvalue", OPAQUE},
    {"quantize_training", OPAQUE},
    {"weight_quantization", OPAQUE},
    {"hybrid_engine", OPAQUE},
    {"torch_autocast", OPAQUE},
    {"tensor_parallel", OPAQUE},
    {"compile", OPAQUE},
    {"timers", OPAQUE},
};

const KnownKey* known_key(const std::string& path) {
    for (const KnownKey& k : KNOWN_KEYS)
        if (path == k.path) return &k;
    // zero_optimization's stage3_ keys go by their short names too (prefetch_bucket_size), as in DeepSpeed
    const std::string zero = "zero_optimization.";
    if (path.rfind(zero, 0) == 0 && path.find('.', zero.size()) == std::string::npos &&
        path.find("stage3_") == std::string::npos)
        return known_key(zero + "stage3_" + path.substr(zero.size()));
    return nullptr;
}

size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); j++) row[j] = j;
    for (size_t i = 1; i <= a.size(); i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b.size(); j++) {
            size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diag = up;
        }
    }
    return row[b.size()];
}

std::string nearest_known_key(const std::string& prefix, const std::string& key, std::vector<std::string> names) {
    for (const KnownKey& k : KNOWN_KEYS) {
        const std::string p = k.path;
        if (p.compare(0, prefix.size(), prefix) == 0 && p.find('.', prefix.size()) == std::string::npos)
            names.push_back(p.substr(prefix.size()));
    }
    std::string best;
    size_t best_d = SIZE_MAX;
    for (const std::string& name : names) {
        const size_t d = edit_distance(lower(key), name);
        if (d < best_d) best_d = d, best = name;
    }
    return best_d <= std::max<size_t>(2, key.size() / 3) ? best : "";  // only a key a typo away
}

}  // namespace deepspeed_detail

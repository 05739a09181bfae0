// train_gpt2_zero: GPT-2 training with ZeRO stages 0-3: the training loop and
// main(). The same source builds the CUDA trainer (nvcc) and the CPU trainer
// (g++ -DZERO_CPU); only the kernels behind kernels/kernels.h differ.
//
// Reading guide:
//   zero/model/gpt2.h           GPT2::forward / backward: the model as explicit call lists, unit by unit
//   zero/engine/zero_engine.h   what each ZeRO stage does at each unit hook
//   zero/layout/shard_plan.h    the offset arithmetic behind all of it
//   train_rank()                the training loop of one rank
//   main()                      flags, world set-up (NCCL or emulated ranks)
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "data/dataloader.h"
#include "data/tokenizer.h"
#include "kernels/kernels.h"
#include "zero/engine/checkpoint.h"
#include "zero/comm/comm_emulated.h"
#include "zero/run/fit_check.h"
#include "zero/run/main_log.h"
#include "zero/run/flags.h"
#include "zero/run/hf_export.h"
#include "zero/run/loss_plot.h"
#include "zero/run/model_state_estimate.h"
#include "zero/engine/loss_scaler.h"
#include "zero/base/memory.h"
#include "zero/engine/memory_predictor.h"
#include "zero/layout/model_file.h"
#include "zero/layout/param_layout.h"
#include "zero/model/gpt2.h"
#include "zero/perf/calibrate.h"
#include "zero/perf/peak_flops.h"
#include "zero/pipeline/bubble.h"
#include "zero/pipeline/stage_runner.h"
#include "zero/run/predict_report.h"
#include "zero/run/reports.h"
#include "zero/run/run_setup.h"
#include "zero/run/sample.h"
#include "zero/engine/zero_engine.h"
#ifdef ZERO_CUDA
#include "zero/comm/comm_nccl.h"
#endif

// ----------------------------------------------------------------------------
// Learning rate: linear warmup, then cosine decay to final_frac of the peak.
inline float learning_rate_at(const TrainOptions& o, int step, int total_steps) {
    if (step < o.warmup_steps) return o.learning_rate * (step + 1) / o.warmup_steps;
    float min_lr = o.learning_rate * o.final_lr_frac;
    int decay_steps = std::max(1, total_steps - o.warmup_steps);
    float ratio = std::min(1.0f, (float)(step - o.warmup_steps) / decay_steps);
    return min_lr + 0.5f * (1.0f + cosf((float)M_PI * ratio)) * (o.learning_rate - min_lr);
}

// The largest micro-batch (at most B) for which some validation shard holds one
// global batch of B*T*ranks+1 tokens; 0 if none does.
inline int validation_micro_batch(const std::string& pattern, int B, int T, int world) {
    size_t longest = 0;
    for (const std::string& path : glob_sorted(pattern)) longest = std::max(longest, read_shard_header(path));
    if (longest == 0) return B;  // no files: let the loader say so
    return (int)std::min<size_t>(B, (longest - 1) / ((size_t)T * world));
}

// Samples gen_tokens tokens from the model, starting from <|endoftext|>.
// Every rank runs it (stage 3 needs every rank for its gathers); rank 0 prints.
// Through a pipeline, each token's forward runs stage by stage and the last
// stage draws the token, which the pipeline group then shares.
template <typename T>
void print_sample(GPT2<T>& model, const Tokenizer* tok, int gen_tokens, uint64_t seed, bool print,
                  PipelineStage<T>* pipeline = nullptr) {
    // sequence parallelism cuts a pass's tokens evenly across the tensor group: the
    // prompt is padded to a multiple of t (causal attention keeps the padding out
    // of the logits read), and the longest padded prompt must fit
    const int multiple = model.sp ? model.tp : 1;
    const int room = std::min<int>(model.cfg.max_seq_len, (int)model.acts.maxBT) / multiple * multiple;
    const int max_len = std::min(gen_tokens + 1, room);
    int eot = tok ? tok->eot_token : model.cfg.vocab_size - 1;
    std::vector<int> tokens(1, eot);
    Rng rng(seed);
    if (print) printf("sample: ");
    while ((int)tokens.size() < max_len) {
        int t = (int)tokens.size();
        std::vector<int> padded = tokens;
        padded.resize((t + multiple - 1) / multiple * multiple, eot);
        if (pipeline) pipeline->forward_only(padded.data(), nullptr, 1, (int)padded.size());
        else model.forward(padded.data(), nullptr, 1, (int)padded.size(), 0.0f);
        int next = model.cfg.vocab_size - 1;
        if (model.last) {
            std::vector<float> logits = model.logits_at(t - 1);
            float maxv = logits[0];
            for (float x : logits) maxv = std::max(maxv, x);
            double sum = 0.0;
            for (float& x : logits) sum += (x = expf(x - maxv));
            double coin = rng.next_float() * sum, acc = 0.0;
            for (int v = 0; v < model.cfg.vocab_size; v++)
                if ((acc += logits[v]) > coin) {
                    next = v;
                    break;
                }
        }
        if (pipeline) next = (int)pipeline->pipe.sum_scalar(model.last ? next : 0);
        tokens.push_back(next);
        if (print) {
            if (tok) printf("%s", tok->decode(next).c_str());
            else printf("%d ", next);
            fflush(stdout);
        }
    }
    if (print) printf("\n");
}

// cudaMemGetInfo's used bytes once the CUDA context is open and before the run
// allocates anything (set in main; 0 in the CPU build): the memory report sets
// the growth since then beside the accountant's reserved bytes.
static size_t device_used_at_start = 0;

inline size_t device_memory_used() {
#ifdef ZERO_CUDA
    size_t free_b = 0, total_b = 0;
    cudaCheck(cudaMemGetInfo(&free_b, &total_b));
    return total_b - free_b;
#else
    return 0;
#endif
}

// ----------------------------------------------------------------------------
// One rank's whole run.

template <typename T>
void train_rank(const TrainOptions& o, const RunSetup& run, Comm& world_comm) {
    const int rank = world_comm.rank;
    const bool rank0 = rank == 0;
#ifdef _OPENMP
    omp_set_num_threads(run.cpu_threads_per_rank());  // OMP_NUM_THREADS, or every core, over the ranks
#endif
    // The grid (zero/layout/pipeline_plan.h): with tensor parallelism, a tensor
    // group of run.tp adjacent ranks; with pipeline parallelism, a pipeline group
    // of one rank per stage; and a data group of the ranks holding the same part
    // of the model, on which ZeRO, the batches and the loss live. The first and
    // last stage of a pipeline pair up for the tied embeddings.
    const Grid3 grid = run.grid();
    const int stage = grid.stage(rank), P = run.pp;
    std::unique_ptr<Comm> tensor_group, data_group, pipe_group, tied_pair;
    if (run.tp > 1) tensor_group = world_comm.split(rank / run.tp, grid.tp_rank(rank));
    if (run.tp > 1 || P > 1) data_group = world_comm.split(stage * run.tp + grid.tp_rank(rank), grid.dp_rank(rank));
    if (P > 1) {
        const int line = grid.dp_rank(rank) * run.tp + grid.tp_rank(rank);  // the same (dp, tp) on every stage
        const bool end = stage == 0 || stage == P - 1;
        pipe_group = world_comm.split(line, stage);
        tied_pair = world_comm.split(end ? line : run.world + rank, stage);
        if (!end) tied_pair.reset();
    }
    Comm& comm = data_group ? *data_group : world_comm;
    // every step's collectives and host transfers, in order (written with --mem_report 1 -o DIR)
    Trace trace;
    comm.group_name = "data";
    for (Comm* c : {&world_comm, data_group.get(), tensor_group.get(), pipe_group.get(), tied_pair.get()})
        if (c) c->trace = &trace;
    if (tensor_group) tensor_group->group_name = "tensor";
    if (pipe_group) pipe_group->group_name = "pipe";
    if (tied_pair) tied_pair->group_name = "tied";
    const int dp_rank = comm.rank, world = comm.world;  // data-parallel rank and size
    MemoryAccountant mem(rank);
    KernelCtx ctx = create_kernel_ctx(mem, (size_t)o.micro_batch * o.seq_len, run.cfg.channels, run.cfg.num_heads);
    ParamLayout layout(run.cfg, run.tp, P > 1 ? run.pipeline.range(stage) : StageRange{});
    ZeroEngine<T> zero(layout, comm, mem, ctx, run.zero_config(o), tensor_group.get(), pipe_group.get(),
                       tied_pair.get());
    GPT2<T> model(zero, o.micro_batch, o.seq_len, o.recompute, run.offload_activations, mem, run.sp,
                  P > 1 ? PipelineStage<T>::activation_slots(run.schedule, P, stage, run.micro_steps) : 1);
    std::unique_ptr<PipelineStage<T>> pipeline;
    if (P > 1) pipeline = std::make_unique<PipelineStage<T>>(model, *pipe_group, run.schedule, run.micro_steps);
    MemoryPrediction predicted = predict_memory(run.memory_query(o, stage), SHARD_ALIGN);

    if (!run.hf_dir.empty()) {
        HfGpt2Reader hf(run.hf_dir);
        zero.load_parameters([&](int u, float* dst) { hf.read_unit(layout, u, dst); });
    } else if (run.model_file.empty()) zero.init_parameters(o.seed);
    else {
        ModelFile mf(run.model_file);
        ParamLayout whole = layout.whole_tensors();
        std::vector<float> full_unit;
        zero.load_parameters([&](int u, float* dst) {
            if (run.tp == 1) return mf.read_unit(layout, u, dst);
            full_unit.assign(whole.unit_spec(u).numel, 0.0f);  // the full unit, then this rank's part of it
            mf.read_unit(whole, u, full_unit.data());
            layout.tp_slice_unit(zero.tp_rank, u, full_unit.data(), dst);
        });
    }

    DataLoader train_loader, val_loader;
    train_loader.init(o.train_pattern, o.micro_batch, o.seq_len, dp_rank, world, o.shuffle != 0, o.seed,
                      run.micro_steps);
    train_loader.set_vocab_check(run.cfg.vocab_size);
    // validation: the micro-batch, or fewer sequences if the validation set is smaller than one global batch
    int val_B = o.val_every > 0 && !o.val_pattern.empty() ? validation_micro_batch(o.val_pattern, o.micro_batch, o.seq_len, world) : 0;
    bool have_val = val_B > 0;
    if (have_val) {
        val_loader.init(o.val_pattern, val_B, o.seq_len, dp_rank, world, false, o.seed);
        val_loader.set_vocab_check(run.cfg.vocab_size);
    }
    if (rank0 && o.val_every > 0 && val_B < o.micro_batch)
        printf(val_B ? "note: the validation set holds fewer than B*T*ranks tokens: validating with B=%d\n"
                     : "note: the validation set holds fewer than T*ranks+1 tokens: no validation\n", val_B);
    std::unique_ptr<Tokenizer> tokenizer;
    if (file_exists(o.tokenizer_path)) {
        tokenizer = std::make_unique<Tokenizer>();
        tokenizer->load(o.tokenizer_path);
    } else if (rank0 && o.sample_every > 0) {
        printf("note: no tokenizer at %s; samples print as token ids\n", o.tokenizer_path.c_str());
    }

    LossScaler scaler(loss_scaler_config(o), run.dtype == DType::F16);
    const OptimizerConfig oc = optimizer_config(o);

    const long tokens_per_step = (long)o.micro_batch * o.seq_len * world * run.micro_steps;
    int total_steps = o.max_steps >= 0 ? o.max_steps : (int)(train_loader.num_batches() / run.micro_steps);
    CHECK(total_steps > 0 || o.max_steps == 0, "the training data holds fewer than one step of %ld tokens", tokens_per_step);

    // resume
    int start_step = 0;
    if (o.resume) {
        RunState rs;
        std::string dir = resume_checkpoint(o.output_dir, zero, world_comm, rs, o.seed);
        if (dir.empty()) {
            if (rank0) printf("no complete checkpoint in %s: starting from scratch\n", o.output_dir.c_str());
        } else {
            scaler.st = rs.scaler;
            train_loader.restore(rs.loader);
            start_step = rs.step;
            if (rank0) printf("resumed from %s (step %d)\n", dir.c_str(), rs.step);
        }
    }

    // logging
    FILE* main_log = nullptr;
    if (rank0 && !o.output_dir.empty()) {
        make_dir(o.output_dir);
        main_log = open_main_log(o.output_dir + "/main.log", start_step);
    }
    const double baseline = unigram_baseline_for(o.train_pattern);  // NAN where the data records none
    auto save = [&](int step) {
        RunState rs{step, zero.adam_t, scaler.st, train_loader.state()};
        std::string dir = save_checkpoint(o.output_dir, rs, zero, world_comm, run.dtype, o.seed, tokens_per_step,
                                          run.pipeline);
        if (rank0) printf("checkpoint written: %s\n", dir.c_str());
    };

    // A sum of the last stage's losses over the data group, at every rank.
    auto step_total = [&](double last_stage_sum) {
        double total = model.last ? comm.sum_scalar(last_stage_sum) : 0.0;
        return pipe_group ? pipe_group->sum_scalar(total) : total;  // the other stages add zeros
    };
    auto evaluate = [&]() {
        val_loader.reset();
        int batches = std::min<int>(o.val_max_batches, (int)val_loader.num_batches());
        double sum = 0.0;
        for (int i = 0; i < batches; i++) {
            val_loader.next_batch();
            if (pipeline) pipeline->forward_only(val_loader.inputs, val_loader.targets, val_B, o.seq_len);
            else model.forward(val_loader.inputs, val_loader.targets, val_B, o.seq_len, 0.0f);
            if (model.last) sum += model.read_loss_sum(false);
        }
        double tokens = (double)batches * val_B * o.seq_len * world;
        return step_total(sum) / tokens;
    };

    // MFU: model flops per second over the matmul peak of the devices in use
    // (emulated ranks share one device; NCCL ranks have one each): the best
    // probe this machine has recorded, so that load does not move it
    // (zero/perf/peak_flops.h)
    double peak = 0.0;
    world_comm.barrier();  // nobody computes while rank 0 measures
    if (rank0) {
#ifdef ZERO_CUDA
        double probe = measure_matmul_peak_flops<T>(ctx, 8192);
        std::string key = device_name() + " " + dtype_name(run.dtype);
#else
        // every core of the process: the other ranks wait at the barrier
        omp_set_num_threads(process_cpu_threads());
        double probe = measure_matmul_peak_flops<T>(ctx, 1024);
        omp_set_num_threads(run.cpu_threads_per_rank());
        std::string key = device_name() + " " + dtype_name(run.dtype) + " " + std::to_string(process_cpu_threads()) +
                          " thread(s)";
        printf("CPU threads: %d per rank, %d rank(s) in this process\n", run.cpu_threads_per_rank(),
               run.ranks_per_process);
#endif
        PeakRecord rec = update_peak_record(key, probe, peak_record_path());
        if (!rec.note.empty()) printf("%s\n", rec.note.c_str());
        peak = rec.flops * (run.launch.world > 1 ? run.world : 1);
        printf("measured matmul peak: %s/s (%s); model: %s per token\n", flops_text(rec.flops).c_str(),
               dtype_name(run.dtype),
               flops_text(train_flops_per_token(layout.num_parameters(), run.cfg, o.seq_len)).c_str());
        if (rec.path.empty()) printf("  (this run's probe: no record kept, set ZERO_PEAK_FILE to keep one)\n");
        else printf("  (the best probe recorded for %s in %s; this run's: %s/s)\n", key.c_str(), rec.path.c_str(),
                    flops_text(rec.probe).c_str());
    }
    world_comm.barrier();
    const double flops_per_step = train_flops_per_token(layout.num_parameters(), run.cfg, o.seq_len) * tokens_per_step;
    if (rank0) {
        printf("training %d steps from step %d: %ld tokens per step (%d rank(s) x B=%d x T=%d x %d micro-step(s))\n",
               total_steps, start_step, tokens_per_step, world, o.micro_batch, o.seq_len, run.micro_steps);
        if (run.tp > 1)
            printf("tensor parallel: %d x %d grid (tensor groups of %d ranks%s, ZeRO stage %d across %d data-parallel "
                   "rank(s))\n", run.tp, run.dp, run.tp, run.sp ? ", sequence parallel" : "", o.zero_stage, run.dp);
        if (P > 1) {
            printf("grid: %d ranks = %d data-parallel x %d tensor-parallel x %d pipeline stages; rank = (stage*%d + "
                   "dp)*%d + tp (tensor rank fastest, then data rank, then stage)\n",
                   run.world, run.dp, run.tp, P, run.dp, run.tp);
            printf("pipeline: %s schedule, %d micro-batch(es) per step; layers per stage %s; stage 0 holds the "
                   "embeddings, stage %d the final layernorm and the LM head (tied to stage 0's wte); ZeRO stage %d "
                   "across each stage's %d data-parallel rank(s)\n",
                   pipeline_schedule_name(run.schedule), run.micro_steps, run.pipeline.text().c_str(), P - 1,
                   o.zero_stage, run.dp);
        }
        std::string accum = offload_grad_accum_text(o, run), delay = offload_delay_text(run);
        if (!accum.empty()) printf("%s\n", accum.c_str());
        if (!delay.empty()) printf("%s\n", delay.c_str());
    }
    double total_ms = 0.0;
    int timed_steps = 0;
    std::vector<MicroBatch> micro_batches(run.micro_steps);  // a pipeline step's tokens, kept to each backward
    for (int step = start_step; step <= total_steps; step++) {
        bool last = step == total_steps;
        // (-x 0: the initial model is the checkpoint; -n -1: no checkpoints)
        bool checkpoint = !o.output_dir.empty() && o.checkpoint_every >= 0 && (step > start_step || total_steps == 0) &&
                          (last || (o.checkpoint_every > 0 && step % o.checkpoint_every == 0));
        // with --offload_delay_steps the device computes one update behind; a
        // checkpoint and the end see every update (validation and samples between
        // them see the parameters the device trains with)
        if (checkpoint || last) zero.apply_pending_update();
        if (have_val && (step % o.val_every == 0 || last)) {
            double val_loss = evaluate();
            if (rank0) {
                printf("step %d: val loss %.6f\n", step, val_loss);
                if (main_log) fprintf(main_log, "s:%d tel:%.6f\n", step, val_loss), fflush(main_log);
                if (main_log && !last) write_loss_plot(o.output_dir, baseline);  // the curve so far
            }
        }
        if (o.sample_every > 0 && (step % o.sample_every == 0 || last) && step > 0)
            print_sample(model, tokenizer.get(), o.gen_tokens, o.seed + step, rank0, pipeline.get());
        if (checkpoint) save(step);
        if (last) break;

        // ---- one optimizer step
        HostClock step_clock;
        mem.reset_peak();
        comm.stats = CommStats{};
        world_comm.stats = CommStats{};
        if (tensor_group) tensor_group->stats = CommStats{};
        if (pipe_group) pipe_group->stats = CommStats{};
        if (tied_pair) tied_pair->stats = CommStats{};
        trace.clear();
        MemCounts live_fwd, live_bwd;
        float dloss = scaler.scale() / (float)tokens_per_step;  // d(mean loss)/d(token loss), scaled

        if (pipeline) {  // the step's micro-batches through the stages, in the schedule's order
            for (MicroBatch& mb : micro_batches) {
                train_loader.next_batch();
                mb.inputs.assign(train_loader.inputs, train_loader.inputs + (size_t)o.micro_batch * o.seq_len);
                mb.targets.assign(train_loader.targets, train_loader.targets + (size_t)o.micro_batch * o.seq_len);
            }
            pipeline->train(micro_batches, o.micro_batch, o.seq_len, dloss);
            live_fwd = pipeline->live_after_forward, live_bwd = pipeline->live_after_backward;
        } else {
            for (int micro = 0; micro < run.micro_steps; micro++) {
                train_loader.next_batch();
                model.forward(train_loader.inputs, train_loader.targets, o.micro_batch, o.seq_len, dloss);
                model.add_losses(micro == 0);
                live_fwd = mem.live_bytes();
                model.backward(micro);
                live_bwd = mem.live_bytes();
            }
        }
        float lr = learning_rate_at(o, step, total_steps);
        StepResult res = zero.step(lr, oc, scaler.scale());
        stream_sync(ctx.stream);
        if (pipeline) pipeline->finish_step(step > start_step || total_steps - start_step == 1);
        double loss = step_total(model.last ? model.read_loss_sum(true) : 0.0) / tokens_per_step;
        MemCounts live_step = mem.live_bytes();  // (the loss sums read back and let go: model states only)
        float loss_scale_used = scaler.scale();
        scaler.update(res.skipped);
        double ms = step_clock.lap();
        if (step > start_step) total_ms += ms, timed_steps++;  // the first step warms up

        if (rank0) {
            printf("step %4d/%d | loss %.6f | norm %.4f | lr %.2e | %.2f ms | %.0f tok/s", step + 1, total_steps, loss,
                   res.grad_norm, lr, ms, tokens_per_step / (ms / 1000.0));
            if (run.dtype == DType::F16) printf(" | scale %.17g%s", loss_scale_used, res.skipped ? " (skipped)" : "");
            if (peak > 0) printf(" | MFU %.1f%%", 100.0 * flops_per_step / (ms / 1000.0) / peak);
            printf(" | mem %.1f MiB\n", mem.peak_live(Arena::Device) / 1048576.0);
            if (main_log) fprintf(main_log, "s:%d trl:%.6f\n", step + 1, loss), fflush(main_log);
        }
        if (o.mem_report) {
            PhaseMemory phases{live_fwd, live_bwd, live_step};
            size_t used = device_memory_used();
            for (int r = 0; r < run.world; r++) {  // one rank at a time, in rank order
                world_comm.barrier();
                if (r != rank) continue;
                CommStats pipeline_stats;  // the stages' sends and receives, and the tied embeddings' all-reduce
                if (pipe_group) pipeline_stats = combined(pipe_group->stats, tied_pair ? tied_pair->stats : CommStats{});
                print_memory_line(rank, phases, predicted, mem, comm.stats, used,
                                  tensor_group ? &tensor_group->stats : nullptr, device_used_at_start,
                                  pipe_group ? &pipeline_stats : nullptr);
                if (run.offload_optimizer) print_offload_line(rank, zero.offload_times(), zero.optimizer_numel());
                if (o.output_dir.empty()) continue;
                std::string suffix = "_rank" + std::to_string(rank) + ".csv";
                append_memory_csv(o.output_dir + "/mem_report" + suffix, step + 1, rank, phases, predicted, mem, used);
                append_comm_csv(o.output_dir + "/comm_report" + suffix, step + 1, rank, comm.stats);
                append_trace_csv(o.output_dir + "/comm_trace" + suffix, step + 1, rank, trace);
            }
            world_comm.barrier();
        }
    }
    if (rank0 && timed_steps > 0)
        printf("average step time %.2f ms (%.0f tok/s) over %d steps; 20 steps take %.2f s\n", total_ms / timed_steps,
               tokens_per_step / (total_ms / timed_steps / 1000.0), timed_steps, 20 * total_ms / timed_steps / 1000.0);
    if (pipeline && total_steps > start_step) {  // every rank's slot times, to rank 0
        PipelineBubble bubble = measure_bubble(*pipe_group, run.schedule, run.micro_steps, pipeline->times);
        if (rank0) print_bubble_line(bubble, run.ranks_per_process, process_cpu_threads(), stdout);
        if (rank0 && !o.output_dir.empty()) write_bubble_csv(o.output_dir + "/pipeline_timeline.csv", bubble);
    }
    if (main_log) {
        fclose(main_log);
        if (write_loss_plot(o.output_dir, baseline)) printf("loss curve: %s/loss.png\n", o.output_dir.c_str());
    }
    destroy_kernel_ctx(ctx);
}

// ----------------------------------------------------------------------------

template <typename T>
void run_world(const TrainOptions& o, const RunSetup& run) {
#ifdef ZERO_CUDA
    if (run.launch.world > 1) {  // one rank per process and GPU, under mpirun/srun/torchrun
        run_nccl_rank(run.launch, [&](Comm& comm) { train_rank<T>(o, run, comm); }, o.timeout_s);
        return;
    }
#endif
    run_emulated_ranks(o.ranks, [&](int rank, EmulatedWorld& world) {
        KernelCtx comm_ctx;
        EmulatedComm comm(world, rank, comm_ctx);
        train_rank<T>(o, run, comm);
    }, o.timeout_s > 0 ? o.timeout_s : COLLECTIVE_TIMEOUT_S);
}

int main(int argc, char** argv) {
    setvbuf(stdout, nullptr, _IOLBF, 0);  // every line out at once, even into a file: a killed run loses none
    TrainOptions o;
    if (!parse_flags(argc, argv, o)) {
        print_usage(argv[0]);
        return 0;
    }
    if (o.params != 0) {  // a raw parameter count: the paper's model states, any model
        CHECK(o.estimate, "--params is for --estimate 1 (model states of a model of that many parameters)");
        print_model_state_estimate(o, stdout);
        return 0;
    }
    if (!o.sample.empty()) {  // text from a model instead of training
        switch (parse_precision(o.precision)) {
            case DType::F32: run_sample<float>(o); break;
            case DType::BF16: run_sample<bf16>(o); break;
            case DType::F16: run_sample<f16>(o); break;
        }
        return 0;
    }
    if (!o.export_hf.empty() && o.consolidate.empty()) {  // a conversion: no run to set up
        export_hf_folder(o.from_hf.empty() ? o.model : "", o.from_hf, o.export_hf);
        return 0;
    }
    if (!o.predict.empty()) prepare_prediction(o);  // a cluster profile's world
    resolve_batch(o);                                 // DeepSpeed's batch keys, over that world
    RunSetup run = make_run_setup(o);
    if (run.launch.rank == 0) print_option_sources(o, stdout);
    if (o.pp_schedule_print) {  // the schedule this run would follow, stage by stage
        if (run.launch.rank == 0)
            printf("%s", pipeline_schedule_text(run.schedule, run.pp, run.micro_steps).c_str());
        return 0;
    }
#ifdef ZERO_CUDA
    // Under a launcher, bind this rank's GPU before anything touches CUDA: the fit
    // check's cudaMemGetInfo would otherwise open a context on GPU 0 in every rank
    // and measure GPU 0's free memory.
    if (run.launch.world > 1) cudaCheck(cudaSetDevice(select_rank_device(run.launch)));
#endif
    if (!o.predict.empty()) {  // the step-time model's prediction on a profile, instead of running
        print_prediction(o, run, stdout);
        return 0;
    }
    if (!o.calibrate.empty()) {  // time this run's operations into a measured profile
        MemoryQuery q = run.memory_query(o);
        const int cores = process_cpu_threads();
        switch (run.dtype) {
            case DType::F32: calibrate_profile<float>(o.calibrate, q, run.world, cores, device_name(), "fp32", stdout); break;
            case DType::BF16: calibrate_profile<bf16>(o.calibrate, q, run.world, cores, device_name(), "bf16", stdout); break;
            case DType::F16: calibrate_profile<f16>(o.calibrate, q, run.world, cores, device_name(), "fp16", stdout); break;
        }
        return 0;
    }
    if (o.estimate) {  // the prediction, and whether it fits this machine (exit status 1 if not)
        for (int stage = 0; stage < run.pp; stage++)  // (each pipeline stage its own)
            print_memory_prediction(run.memory_query(o, stage), predict_memory(run.memory_query(o, stage), SHARD_ALIGN),
                                    stdout);
        bool fits_plan = estimate_fit(o, run);
        printf("fits: %s\n", fits_plan ? "yes" : "no");
        return fits_plan ? 0 : 1;
    }
    if (!o.consolidate.empty()) {
        std::string model_file = consolidate_checkpoint(o.consolidate);
        if (!o.export_hf.empty()) export_hf_folder(model_file, "", o.export_hf);
        return 0;
    }

    refuse_if_too_big(o, run);  // (its cudaMemGetInfo opens the CUDA context)
    device_used_at_start = device_memory_used();
    if (run.launch.rank == 0) claim_output_dir(o.output_dir, o.resume != 0, o.overwrite != 0);
    switch (run.dtype) {
        case DType::F32: run_world<float>(o, run); break;
        case DType::BF16: run_world<bf16>(o, run); break;
        case DType::F16: run_world<f16>(o, run); break;
    }
    return 0;
}

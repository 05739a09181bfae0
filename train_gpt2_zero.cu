// train_gpt2_zero: GPT-2 training with ZeRO stages 0-3: the training loop and
// main(). The same source builds the CUDA trainer (nvcc) and the CPU trainer
// (g++ -DZERO_CPU); only the kernels behind kernels/kernels.h differ.
//
// Reading guide: zero/README.md (the design, an index of where each collective
// is issued, and every file's job); then train_rank() below, train_step() in
// zero/run/train_step.h and GPT2::forward / backward in zero/model/gpt2.h.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "data/dataloader.h"
#include "data/tokenizer.h"
#include "zero/comm/comm_emulated.h"
#include "zero/engine/checkpoint.h"
#include "zero/engine/loss_scaler.h"
#include "zero/pipeline/bubble.h"
#include "zero/run/calibration.h"
#include "zero/run/fit_check.h"
#include "zero/run/flags.h"
#include "zero/run/hf_export.h"
#include "zero/run/loss_plot.h"
#include "zero/run/main_log.h"
#include "zero/run/model_state_estimate.h"
#include "zero/run/predict_report.h"
#include "zero/run/rank.h"
#include "zero/run/reports.h"
#include "zero/run/sample.h"
#include "zero/run/step_trace.h"
#include "zero/run/train_step.h"
#ifdef ZERO_CUDA
#include "zero/comm/comm_nccl.h"
#endif

// cudaMemGetInfo's used bytes once the CUDA context is open and before the run
// allocates anything (set in main; 0 in the CPU build): the memory report sets
// the growth since then beside the accountant's reserved bytes.
static size_t device_used_at_start = 0;

// ----------------------------------------------------------------------------
// One rank's whole run.

template <typename T>
void train_rank(const TrainOptions& o, const RunSetup& run, Comm& world_comm) {
#ifdef _OPENMP
    omp_set_num_threads(run.cpu_threads_per_rank());  // OMP_NUM_THREADS, or every core, over the ranks
#endif
    StepTrace trace(o, run, world_comm.rank);  // --trace: records from here (zero/run/step_trace.h)
    Rank<T> r(o, run, world_comm);  // the groups, memory, engine, model and pipeline stage (zero/run/rank.h)
    ZeroEngine<T>& zero = r.zero;
    Comm& data = r.groups.data();
    const bool rank0 = world_comm.rank == 0;
    r.load_start(run, o.seed);

    // ---- data: each data-parallel rank its part of every step's tokens
    DataLoader train_loader, val_loader;
    train_loader.init(o.train_pattern, o.micro_batch, o.seq_len, data.rank, data.world, o.shuffle != 0, o.seed,
                      run.micro_steps);
    train_loader.set_vocab_check(run.cfg.vocab_size);
    // validation: the micro-batch, or fewer sequences if the validation set is smaller than one global batch
    int val_B = o.val_every > 0 && !o.val_pattern.empty() ? validation_micro_batch(o.val_pattern, o.micro_batch, o.seq_len, data.world) : 0;
    if (val_B > 0) {
        val_loader.init(o.val_pattern, val_B, o.seq_len, data.rank, data.world, false, o.seed);
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
    const long tokens_per_step = (long)o.micro_batch * o.seq_len * data.world * run.micro_steps;
    int total_steps = o.max_steps >= 0 ? o.max_steps : (int)(train_loader.num_batches() / run.micro_steps);
    CHECK(total_steps > 0 || o.max_steps == 0, "the training data holds fewer than one step of %ld tokens", tokens_per_step);

    // ---- resume, and the log
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
    FILE* main_log = nullptr;
    if (rank0 && !o.output_dir.empty()) {
        make_dir(o.output_dir);
        main_log = open_main_log(o.output_dir + "/main.log", start_step);
    }
    const double baseline = unigram_baseline_for(o.train_pattern);  // NAN where the data records none
    auto evaluate = [&]() {  // the mean validation loss over the data group
        val_loader.reset();
        int batches = std::min<int>(o.val_max_batches, (int)val_loader.num_batches());
        double sum = 0.0;
        for (int i = 0; i < batches; i++) {
            val_loader.next_batch();
            if (r.pipeline) r.pipeline->forward_only(val_loader.inputs, val_loader.targets, val_B, o.seq_len);
            else r.model.forward(val_loader.inputs, val_loader.targets, val_B, o.seq_len, 0.0f);
            if (r.model.last) sum += r.model.read_loss_sum(false);
        }
        double total = r.model.last ? data.sum_scalar(sum) : 0.0;
        total = r.groups.pipe ? r.groups.pipe->sum_scalar(total) : total;
        return total / ((double)batches * val_B * o.seq_len * data.world);
    };

    const size_t params = r.layout.num_parameters();
    const double peak = matmul_peak_for_mfu<T>(r.ctx, run, params, o.seq_len, world_comm);
    const double flops_per_step = train_flops_per_token(params, run.cfg, o.seq_len) * tokens_per_step;
    if (rank0) print_run_header(o, run, total_steps, start_step, tokens_per_step);
    double total_ms = 0.0;
    int timed_steps = 0;
    std::vector<MicroBatch> batches(run.micro_steps);
    for (int step = start_step; step <= total_steps; step++) {
        const bool last = step == total_steps;
        // ---- between steps: validation, a sample, a checkpoint
        // (-x 0: the initial model is the checkpoint; -n -1: no checkpoints)
        bool checkpoint = !o.output_dir.empty() && o.checkpoint_every >= 0 && (step > start_step || total_steps == 0) &&
                          (last || (o.checkpoint_every > 0 && step % o.checkpoint_every == 0));
        // with --offload_delay_steps the device computes one update behind; a
        // checkpoint and the end see every update (validation and samples
        // between them see the parameters the device trains with)
        if (checkpoint || last) zero.apply_pending_update();
        if (val_B > 0 && (step % o.val_every == 0 || last)) {
            double val_loss = evaluate();
            if (rank0) printf("step %d: val loss %.6f\n", step, val_loss);
            if (main_log) fprintf(main_log, "s:%d tel:%.6f\n", step, val_loss), fflush(main_log);
            if (main_log && !last) write_loss_plot(o.output_dir, baseline);  // the curve so far
        }
        if (o.sample_every > 0 && (step % o.sample_every == 0 || last) && step > 0)
            print_sample(r.model, tokenizer.get(), o.gen_tokens, o.seed + step, rank0, r.pipeline.get());
        if (checkpoint) {
            RunState rs{step, zero.adam_t, scaler.st, train_loader.state()};
            std::string dir = save_checkpoint(o.output_dir, rs, zero, world_comm, run.dtype, o.seed, tokens_per_step,
                                              run.pipeline);
            if (rank0) printf("checkpoint written: %s\n", dir.c_str());
        }
        if (last) break;

        // ---- one optimizer step
        HostClock clock;
        for (MicroBatch& mb : batches) {  // this rank's tokens of every micro-step
            train_loader.next_batch();
            mb.inputs.assign(train_loader.inputs, train_loader.inputs + (size_t)o.micro_batch * o.seq_len);
            mb.targets.assign(train_loader.targets, train_loader.targets + (size_t)o.micro_batch * o.seq_len);
        }
        const float lr = learning_rate_at(o, step, total_steps), scale = scaler.scale();
        const float dloss = scale / (float)tokens_per_step;  // d(mean loss)/d(token loss), scaled
        trace.before(step, start_step, total_steps, run.offload_delay_steps);
        StepOutcome s = train_step(r, batches, o.micro_batch, o.seq_len, lr, dloss, oc, scale, tokens_per_step);
        scaler.update(s.result.skipped);
        const double ms = clock.lap();
        if (step > start_step) total_ms += ms, timed_steps++;  // the first step warms up
        if (r.pipeline && (step > start_step || total_steps - start_step == 1)) r.pipeline->add_step_times();

        // ---- what the step did
        if (rank0) {
            const double mfu = peak > 0 ? flops_per_step / (ms / 1000.0) / peak : 0.0;
            print_step_line(step + 1, total_steps, s.loss, s.result, lr, ms, tokens_per_step, run.dtype == DType::F16,
                            scale, mfu, r.mem);
            if (main_log) fprintf(main_log, "s:%d trl:%.6f\n", step + 1, s.loss), fflush(main_log);
        }
        if (o.mem_report) {
            OffloadTimes times = zero.offload_times();
            report_memory(step + 1, r.groups, s.live, r.predicted, r.mem, run.offload_optimizer ? &times : nullptr,
                          zero.optimizer_numel(), device_memory_used(), device_used_at_start, o.output_dir);
        }
        trace.after(world_comm, ms / 1e3, stdout);
    }

    // ---- the run's end: its average step, the pipeline's bubble, the loss curve
    if (rank0 && timed_steps > 0)
        printf("average step time %.2f ms (%.0f tok/s) over %d steps; 20 steps take %.2f s\n", total_ms / timed_steps,
               tokens_per_step / (total_ms / timed_steps / 1000.0), timed_steps, 20 * total_ms / timed_steps / 1000.0);
    if (r.pipeline && total_steps > start_step) {  // every rank's slot times, to rank 0
        PipelineBubble bubble = measure_bubble(*r.groups.pipe, run.schedule, run.micro_steps, r.pipeline->times);
        if (rank0) print_bubble_line(bubble, run.ranks_per_process, process_cpu_threads(), stdout);
        if (rank0 && !o.output_dir.empty()) write_bubble_csv(o.output_dir + "/pipeline_timeline.csv", bubble);
    }
    if (main_log) {
        fclose(main_log);
        if (write_loss_plot(o.output_dir, baseline)) printf("loss curve: %s/loss.png\n", o.output_dir.c_str());
    }
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
    signal(SIGXFSZ, SIG_IGN);  // past a file-size limit (ulimit -f) a write fails with its reason (EFBIG), no kill
    variant_bits();                       // ZERO_VARIANTS checked before anything (zero/base/variants.h)
    TrainOptions o;
    if (!parse_flags(argc, argv, o)) {
        print_usage(argv[0]);
        return 0;
    }
    check_trace_flags(o);  // (zero/run/step_trace.h)
    if (o.params != 0) {  // a raw parameter count: the paper's model states, any model
        CHECK(o.estimate, "--params is for --estimate 1 (model states of a model of that many parameters)");
        print_model_state_estimate(o, stdout);
        return 0;
    }
    if (!o.sample.empty()) {  // text from a model instead of training
        in_dtype(parse_precision(o.precision), [&](auto t) { run_sample<decltype(t)>(o); });
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
    if (o.dry_run || !o.predict.empty()) {  // the step without computing, no GPU needed: memory, on a profile the time
        print_prediction(o, run, stdout);
        return 0;
    }
#ifdef ZERO_CUDA
    // Under a launcher, bind this rank's GPU before anything touches CUDA: the fit
    // check's cudaMemGetInfo would otherwise open a context on GPU 0 in every rank
    // and measure GPU 0's free memory.
    if (run.launch.world > 1) cudaCheck(cudaSetDevice(select_rank_device(run.launch)));
#endif
    if (!o.calibrate.empty()) {  // time this run's operations into a measured profile
        check_runnable(o, run, false);
        in_dtype(run.dtype, [&](auto t) { calibrate_profile<decltype(t)>(o, run, dtype_name(run.dtype), stdout); });
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

    check_runnable(o, run, true);
    refuse_if_too_big(o, run);  // (its cudaMemGetInfo opens the CUDA context)
    device_used_at_start = device_memory_used();
    if (run.launch.rank == 0) claim_output_dir(o.output_dir, o.resume != 0, o.overwrite != 0);
    in_dtype(run.dtype, [&](auto t) { run_world<decltype(t)>(o, run); });
    return 0;
}

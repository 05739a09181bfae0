// DeepSpeed's batch rules (zero/run/deepspeed_config.h), applied once the world
// size is known: train_batch_size = micro-batch x gradient_accumulation_steps x
// world size, any two of them determining the third, made into -b and -d.
#include "zero/run/deepspeed_config.h"

#include <climits>
#include <cmath>

#include "zero/base/common.h"

long deepspeed_total_batch(int accum, long train_batch, int micro_batch, int seq_len, int world) {
    if (accum <= 0 && train_batch <= 0) return -1;
    CHECK(micro_batch >= 1 && seq_len >= 1 && world >= 1, "deepspeed_total_batch: B, T and world must be >= 1");
    // sequences per micro-step over all ranks
    double per_micro = (double)micro_batch * world;
    long seqs;
    if (train_batch > 0) {
        if (accum > 0 && (double)train_batch != per_micro * accum)
            fail("DeepSpeed train_batch_size (%ld) must equal micro-batch x gradient_accumulation_steps x world size "
                 "= %d x %d x %d = %.0f (micro-batch: train_micro_batch_size_per_gpu or -b)",
                 train_batch, micro_batch, accum, world, per_micro * accum);
        if (std::fmod((double)train_batch, per_micro) != 0.0)
            fail("DeepSpeed train_batch_size (%ld) must be a multiple of micro-batch x world size = %d x %d "
                 "(micro-batch: train_micro_batch_size_per_gpu or -b)",
                 train_batch, micro_batch, world);
        seqs = train_batch;
    } else {
        CHECK(per_micro * accum < 9.0e18, "DeepSpeed gradient_accumulation_steps (%d) is too large", accum);
        seqs = (long)per_micro * accum;
    }
    CHECK((double)seqs * seq_len < 9.0e18, "DeepSpeed batch of %ld sequences of %d tokens is too large", seqs, seq_len);
    return seqs * seq_len;
}

void resolve_deepspeed_batch(TrainOptions& o, int world) {
    if ((o.grad_accum <= 0 && o.train_batch_seqs <= 0) || world < 1) return;
    if (o.derive_micro_batch && o.train_batch_seqs > 0) {  // DeepSpeed's micro-batch from the other two
        long per_micro = (long)(o.grad_accum > 0 ? o.grad_accum : 1) * world;
        if (o.train_batch_seqs % per_micro != 0 || o.train_batch_seqs / per_micro > INT_MAX)
            fail("DeepSpeed train_batch_size (%ld) must be divisible by gradient_accumulation_steps x world size = "
                 "%d x %d: without train_micro_batch_size_per_gpu the micro-batch is their quotient",
                 o.train_batch_seqs, o.grad_accum > 0 ? o.grad_accum : 1, world);
        o.micro_batch = (int)(o.train_batch_seqs / per_micro);
    }
    o.total_batch = deepspeed_total_batch(o.grad_accum, o.train_batch_seqs, o.micro_batch, o.seq_len, world);
    o.grad_accum = 0;
    o.train_batch_seqs = 0;
    o.derive_micro_batch = 0;
}

// Fuzz target: the launcher's environment (zero/comm/launcher.h) and the
// rendezvous' (zero/comm/bootstrap.h). The input's lines are the values of the
// variables below, in order; a missing line leaves the variable unset.
#include <cstdlib>
#include <vector>

#include "test/fuzz/fuzz_util.h"
#include "zero/comm/bootstrap.h"
#include "zero/comm/launcher.h"

static const char* const VARIABLES[] = {
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_PROCID",
    "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
    "ZERO_BOOTSTRAP_TIMEOUT", "ZERO_NCCL_ID_FILE", "ZERO_JOB_ID", "SLURM_JOB_ID", "PMIX_NAMESPACE",
    "OMPI_MCA_ess_base_jobid", "TORCHELASTIC_RUN_ID",
};

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string all((const char*)data, size);
    size_t pos = 0;
    for (const char* name : VARIABLES) {
        if (pos > all.size()) {
            unsetenv(name);
            continue;
        }
        size_t eol = all.find('\n', pos);
        std::string value = all.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
        pos = eol == std::string::npos ? all.size() + 1 : eol + 1;
        if (value.find('\0') != std::string::npos) value.resize(value.find('\0'));  // as an environment holds it
        setenv(name, value.c_str(), 1);
    }
    refusal_ok([] { detect_launch_env(); });
    refusal_ok([] { bootstrap_options_from_env(); });
    refusal_ok([] { bootstrap_job_tag(); });
    return 0;
}
